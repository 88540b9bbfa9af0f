"""Paper 000 over a window: deflation directions and strengths s_i (Fig. 4, R11), ε
trajectories (R12), phase detection that never invents a boundary (R9), analysis windows,
per-class accuracy (M13) and the probe set's class check. References: a direct SVD of the
side-by-side changes, explicit loops."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.metrics.diversity import (
    check_probe_classes,
    common_direction_decomposition,
    deflation_directions,
    detect_phases,
    direction_strengths,
    dominant_classes,
    per_class_accuracy,
    residual_trajectory,
    select_window,
)


def _window(seed: int = 0, t: int = 6, h: int = 7, d: int = 9) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=h)
    # a dominant common direction with slowly varying coefficients, plus noise
    base = rng.normal(size=d)
    return [
        np.outer(c, base + 0.2 * rng.normal(size=d)) + 0.3 * rng.normal(size=(h, d))
        for _ in range(t)
    ]


def test_deflation_equals_top_singular_vectors_of_side_by_side_changes():
    changes = _window()
    u, _, _ = np.linalg.svd(np.concatenate(changes, axis=1), full_matrices=False)
    dirs = deflation_directions(changes, k=4).numpy()
    for i in range(4):
        assert abs(dirs[:, i] @ u[:, i]) == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(dirs.T @ dirs, np.eye(4), atol=1e-12)


@pytest.mark.parametrize("reduction", ["signed_mean", "mean_norm"])
def test_direction_strengths_against_loops(reduction):
    changes = _window(seed=1)
    res = direction_strengths(changes, k=3, reduction=reduction)
    dirs = res.directions.numpy()
    for i in range(3):
        coefs = [m.T @ dirs[:, i] for m in changes]  # ΔV̄_{i,t}, (d,)
        if reduction == "signed_mean":
            mean = np.mean(coefs, axis=0)
            ref = np.linalg.norm(np.outer(dirs[:, i], mean))  # ‖C_i ΔV̄_iᵀ‖_F
        else:
            ref = np.mean([np.linalg.norm(v) for v in coefs])
        assert res.strengths[i] == pytest.approx(ref, rel=1e-12)
    assert res.coefficients.shape == (6, 3, 9)
    assert res.ratio == pytest.approx(res.strengths[0] / res.strengths[1])
    # one dominant direction; the signed mean also cancels the zero-mean noise over t
    assert res.ratio > (3 if reduction == "signed_mean" else 1)


def test_signed_mean_cancels_opposite_changes():
    m = np.outer(np.ones(3), np.arange(4.0))
    res = direction_strengths([m, -m], k=1)
    assert res.strengths[0] == pytest.approx(0.0, abs=1e-12)
    assert direction_strengths([m, -m], k=1, reduction="mean_norm").strengths[0] == pytest.approx(
        np.linalg.norm(m)
    )


def test_residual_trajectory_against_lemma2():
    weights = _window(seed=2, t=4)
    c = np.random.default_rng(9).normal(size=7)
    traj = residual_trajectory(weights, c)
    assert traj.singular_values.shape == (4, 7)
    for t, w in enumerate(weights):
        v = w.T @ c / (c @ c)
        eps = w.T - np.outer(v, c)
        np.testing.assert_allclose(
            traj.singular_values[t], np.linalg.svd(eps, compute_uv=False), atol=1e-12
        )
        assert traj.v_norm[t] == pytest.approx(np.linalg.norm(v), rel=1e-12)
        dec = common_direction_decomposition(w, c)
        assert dec.reconstruction_error < 1e-14


def test_window_shape_errors():
    with pytest.raises(ValueError, match=r"changes\[1\] has shape \(3, 3\) but changes\[0\]"):
        deflation_directions([np.ones((3, 2)), np.ones((3, 3))])
    with pytest.raises(ValueError, match="at least one"):
        direction_strengths([])
    with pytest.raises(ValueError, match="reduction must be one of"):
        direction_strengths([np.ones((2, 2))], k=1, reduction="mean")


def test_never_left_phase1_gets_no_boundary():
    steps = np.arange(0, 200, 10)
    rising = 0.5 + 0.001 * steps  # still rising at the last step: no peak seen
    flat_loss = np.full(steps.shape, 2.3026)
    res = detect_phases(steps, rising, flat_loss, loss_drop=0.01)
    assert res.phase1_end is None and res.phase1_length is None
    assert res.plateau_end is None and res.plateau_length is None
    assert res.left_phase1 is False
    assert res.as_dict() == {
        "phase1_end": None,
        "phase1_length": None,
        "plateau_end": None,
        "plateau_length": None,
        "left_phase1": 0.0,
    }
    # a tiny wobble after the peak is no fall when peak_drop asks for more
    wobble = rising.copy()
    wobble[-1] = wobble[-2] - 1e-4
    assert detect_phases(steps, wobble).phase1_end == 180.0
    assert detect_phases(steps, wobble, peak_drop=0.01).phase1_end is None
    assert detect_phases(steps, wobble).left_phase1 is True
    # M2 peaked but the loss never dropped: the loss criterion decides left_phase1
    both = detect_phases(steps, wobble, flat_loss, loss_drop=0.01)
    assert both.phase1_end == 180.0 and both.left_phase1 is False


def test_two_phase_curve_lengths():
    steps = np.arange(0, 300, 10)
    m2 = 0.6 + 0.001 * np.minimum(steps, 130) - 0.001 * np.maximum(steps - 130, 0)
    loss = np.where(steps < 140, 2.30, 2.30 - 0.02 * (steps - 130))
    res = detect_phases(steps, m2, loss, window=3, loss_drop=0.05)
    assert (res.phase1_end, res.phase1_length) == (130.0, 130.0)
    assert (res.plateau_end, res.plateau_length) == (140.0, 140.0)
    assert res.left_phase1 is True
    assert res.as_dict()["left_phase1"] == 1.0


def test_select_window():
    steps = np.array([0, 10, 20, 30, 40])
    np.testing.assert_array_equal(select_window(steps, 10, 30), [1, 2, 3])
    np.testing.assert_array_equal(select_window(steps, 5, 15), [1])
    with pytest.raises(
        ValueError, match=r"window \[10, 50\] lies outside the recorded iterations \[0, 40\]"
    ):
        select_window(steps, 10, 50)
    with pytest.raises(ValueError, match=r"window \[-5, 10\] lies outside"):
        select_window(steps, -5, 10)
    with pytest.raises(ValueError, match="reversed"):
        select_window(steps, 30, 10)
    with pytest.raises(ValueError, match="contains no recorded iteration"):
        select_window(steps, 11, 19)
    with pytest.raises(ValueError, match="no iterations were recorded"):
        select_window(np.array([]), 0, 1)


def test_per_class_accuracy_against_loop():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(30, 4))
    y = np.arange(30) % 4
    acc = per_class_accuracy(torch.tensor(logits), y, 4)
    pred = logits.argmax(axis=1)
    ref = [np.mean(pred[y == c] == c) for c in range(4)]
    np.testing.assert_allclose(acc, ref, atol=1e-15)
    exact = per_class_accuracy(np.eye(3)[[0, 1, 2, 0]], np.array([0, 1, 1, 2]), 3)
    assert exact.tolist() == [1.0, 0.5, 0.0]


def test_probe_missing_a_class():
    with pytest.raises(
        ValueError, match=r"probe set has no sample of class 1, 3; expected every class 0\.\.3"
    ):
        check_probe_classes(np.array([0, 2, 2, 0]), 4)
    with pytest.raises(ValueError, match="no sample of class 2"):
        per_class_accuracy(np.eye(3)[[0, 1, 0]], np.array([0, 1, 0]), 3)
    with pytest.raises(ValueError, match="logits has 2 columns but n_classes is 3"):
        per_class_accuracy(np.ones((3, 2)), np.array([0, 1, 2]), 3)
    np.testing.assert_array_equal(check_probe_classes(np.array([1, 0]), 2).numpy(), [1, 0])


def test_dominant_classes():
    acc = np.array([0.9, 0.05, 0.21, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3])
    np.testing.assert_array_equal(dominant_classes(acc), [0, 2, 9])  # > 2/10
    np.testing.assert_array_equal(dominant_classes(acc, factor=5.0), [0])
    with pytest.raises(ValueError, match="factor must be"):
        dominant_classes(acc, factor=0.0)
