"""Common direction (paper 000, Eq. 5, Lemmas 1-2, R10-R12, R17) and phase detection (R9)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.metrics.diversity import (
    common_direction_decomposition,
    common_directions,
    detect_phases,
    primary_coefficients,
    residual_singular_values,
    sign_consistency,
    smooth_curve,
)
from collapselab.stats import CommonDirectionAccumulator

LR = 0.1


def _factors(seed: int = 0, n: int = 40, h: int = 6, d: int = 9):
    rng = np.random.default_rng(seed)
    common = rng.normal(size=h)
    # gradients share a dominant direction, as in phase 1, plus noise
    g = rng.normal(size=(n, 1)) * common + 0.3 * rng.normal(size=(n, h))
    f = np.maximum(rng.normal(size=(n, d)), 0.0)
    return g, f


def _concatenated(g: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The per-sample changes -lr g_x F_x^T side by side: (h, d*N)."""
    return np.concatenate([-LR * np.outer(g[i], f[i]) for i in range(len(g))], axis=1)


def test_common_direction_equals_top_singular_vectors_of_concatenated_changes():
    g, f = _factors()
    big = _concatenated(g, f)
    u, s, _ = np.linalg.svd(big, full_matrices=False)
    res = common_directions(CommonDirectionAccumulator().update(g, f, lr=LR), k=3)
    dirs = res.directions.numpy()
    for i in range(3):
        assert abs(dirs[:, i] @ u[:, i]) == pytest.approx(1.0, abs=1e-10)
    np.testing.assert_allclose(res.eigenvalues, s[:3] ** 2, rtol=1e-10)
    assert res.total == pytest.approx(float((big**2).sum()), rel=1e-12)
    np.testing.assert_allclose(res.explained, s[:3] ** 2 / (s**2).sum(), rtol=1e-10)
    np.testing.assert_allclose(dirs.T @ dirs, np.eye(3), atol=1e-12)
    assert torch.equal(res.primary, res.directions[:, 0])


def test_streaming_merge_and_whole_changes_agree():
    g, f = _factors(seed=1)
    one = CommonDirectionAccumulator().update(g, f, lr=LR)
    a, b = CommonDirectionAccumulator(), CommonDirectionAccumulator()
    a.update(g[:15], f[:15], lr=LR)
    b.update(torch.tensor(g[15:]), torch.tensor(f[15:]), lr=LR)
    a.merge(b)
    np.testing.assert_allclose(a.gram.numpy(), one.gram.numpy(), atol=1e-13)
    assert a.n_changes == one.n_changes == len(g)
    whole = CommonDirectionAccumulator()
    for i in range(len(g)):
        whole.update_weight_change(-LR * np.outer(g[i], f[i]))
    np.testing.assert_allclose(whole.gram.numpy(), one.gram.numpy(), atol=1e-13)


def test_sign_convention():
    gram = np.diag([1.0, 4.0, 2.0])
    gram[0, 1] = gram[1, 0] = 0.5
    c = common_directions(gram).primary.numpy()
    assert c[np.argmax(np.abs(c))] > 0  # default: largest-magnitude entry positive
    ref = -c
    c_ref = common_directions(gram, sign_reference=ref).primary.numpy()
    np.testing.assert_allclose(c_ref, -c, atol=1e-14)
    assert c_ref @ ref > 0


def _lemma_reference(m: np.ndarray, c: np.ndarray):
    """Lemma 1/2 column by column: column i of M^T... i.e. row i of M^T is M[:, i]."""
    d = m.shape[1]
    v = np.array([m[:, i] @ c / (c @ c) for i in range(d)])
    eps = np.stack([m[:, i] - v[i] * c for i in range(d)])  # (d, h)
    return v, eps


@pytest.mark.parametrize("scale", [1.0, -3.5])
def test_lemma_decomposition_identities(scale):
    rng = np.random.default_rng(2)
    m = rng.normal(size=(6, 9))  # (h, d)
    c = scale * rng.normal(size=6)
    dec = common_direction_decomposition(m, c)
    v_ref, eps_ref = _lemma_reference(m, c)
    np.testing.assert_allclose(dec.v.numpy(), v_ref, atol=1e-13)
    np.testing.assert_allclose(dec.eps.numpy(), eps_ref, atol=1e-13)
    assert dec.reconstruction_error < 1e-14
    assert dec.orthogonality < 1e-14
    np.testing.assert_allclose(dec.eps.numpy() @ c, 0.0, atol=1e-13)
    # minimality (Lemma 1 proof): any other coefficients leave a larger residual
    best = np.linalg.norm(eps_ref)
    for _ in range(20):
        v_other = v_ref + 0.1 * rng.normal(size=v_ref.shape)
        assert np.linalg.norm(m.T - np.outer(v_other, c)) > best


def test_residual_singular_values():
    rng = np.random.default_rng(3)
    w = rng.normal(size=(5, 8))
    c = rng.normal(size=5)
    _, eps = _lemma_reference(w, c)
    sv = residual_singular_values(w, c)
    np.testing.assert_allclose(sv, np.linalg.svd(eps, compute_uv=False), atol=1e-13)
    assert sv.shape == (5,)
    assert sv[-1] < 1e-12  # eps C = 0: rank at most h - 1
    # a weight built from C alone has no residual
    assert residual_singular_values(np.outer(c, rng.normal(size=8)), c).max() < 1e-12


def test_primary_coefficients_and_sign_consistency():
    c = np.array([0.0, 2.0, 0.0])
    g = np.array([[1.0, 3.0, 0.0], [0.0, 1.0, 5.0], [2.0, -1.0, 0.0], [0.0, -2.0, 1.0], [1, 0, 0]])
    y = np.array([0, 0, 0, 1, 1])
    np.testing.assert_allclose(primary_coefficients(g, c), [3.0, 1.0, -1.0, -2.0, 0.0])
    res = sign_consistency(g, y, c, n_classes=3)
    np.testing.assert_allclose(res.fraction[:2], [2 / 3, 1 / 2])
    assert np.isnan(res.fraction[2])
    np.testing.assert_array_equal(res.majority_sign, [1, -1, 0])


def test_direction_bad_inputs():
    with pytest.raises(ValueError, match="c has length 4 but matrix has 3 rows"):
        common_direction_decomposition(np.ones((3, 2)), np.ones(4))
    with pytest.raises(ValueError, match="c must be non-zero"):
        residual_singular_values(np.ones((3, 2)), np.zeros(3))
    with pytest.raises(ValueError, match="symmetric"):
        common_directions(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="k must be an integer in"):
        common_directions(np.eye(3), k=4)
    with pytest.raises(ValueError, match="sign_reference must have length 3"):
        common_directions(np.eye(3), sign_reference=np.ones(2))
    with pytest.raises(ValueError, match="output width 4 but earlier ones had 3"):
        CommonDirectionAccumulator().update(np.ones((2, 3)), np.ones((2, 5))).update(
            np.ones((2, 4)), np.ones((2, 5))
        )
    with pytest.raises(ValueError, match="empty"):
        common_directions(CommonDirectionAccumulator())
    with pytest.raises(ValueError, match="NaN"):
        CommonDirectionAccumulator().update_weight_change(np.full((2, 2), np.nan))


def test_smooth_curve_matches_loop():
    rng = np.random.default_rng(4)
    v = rng.normal(size=11)
    got = smooth_curve(v, 5)
    ref = [np.mean(v[max(i - 2, 0) : min(i + 3, 11)]) for i in range(11)]
    np.testing.assert_allclose(got, ref, atol=1e-14)
    np.testing.assert_allclose(smooth_curve(v, 1), v)


def test_detect_phases_on_constructed_curves():
    steps = np.arange(0, 300, 10)
    m2 = 0.6 + 0.001 * np.minimum(steps, 130) - 0.001 * np.maximum(steps - 130, 0)
    noisy = m2.copy()
    noisy[5] += 0.15  # a one-point spike at step 50
    loss = np.where(steps < 140, 2.30 - 1e-4 * steps, 2.30 - 0.02 * (steps - 130))
    raw = detect_phases(steps + 100, noisy)
    assert raw.phase1_end == 150.0  # the spike, without smoothing
    res = detect_phases(steps + 100, noisy, loss, window=5, loss_drop=0.05)
    assert res.phase1_end == 230.0
    assert res.phase1_length == 130.0
    # loss[0] - loss[t] > 0.05 first at step 140 (2.30 - 2.10 = 0.2) on the shifted axis
    assert res.plateau_end == 240.0
    assert res.plateau_length == 140.0
    rel = detect_phases(steps, m2, loss, loss_drop=0.05, relative=True)  # delta = 0.115
    assert rel.plateau_end == 140.0
    stuck = detect_phases(steps, m2, np.full(len(steps), 2.3026), loss_drop=0.01)
    assert stuck.plateau_end is None and stuck.plateau_length is None


def test_detect_phases_bad_inputs():
    s = np.arange(5)
    with pytest.raises(ValueError, match="strictly increasing"):
        detect_phases(np.array([0, 1, 1, 2, 3]), s)
    with pytest.raises(ValueError, match="similarity has 4 points but steps has 5"):
        detect_phases(s, s[:4])
    with pytest.raises(ValueError, match="window must be an odd"):
        detect_phases(s, s, window=2)
    with pytest.raises(ValueError, match="loss_drop must be a positive"):
        detect_phases(s, s, loss=s)
    with pytest.raises(ValueError, match="similarity contains NaN"):
        detect_phases(s, np.array([0, 1, np.nan, 2, 3]))
