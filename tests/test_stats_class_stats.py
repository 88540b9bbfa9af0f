"""ClassStats: brute-force statistics, streaming == one-shot, merging, modes, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from collapselab.data.dataset import LabeledData
from collapselab.metrics import nc1_pinv, nc_metrics
from collapselab.stats import (
    ClassStats,
    class_stats_from_batches,
    class_stats_from_features,
    nearest_class_mean,
)


def data(seed=0, C=4, D=9, per_class=(7, 11, 9, 13)):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.full(k, c) for c, k in enumerate(per_class)])
    rng.shuffle(y)
    H = rng.normal(scale=2.0, size=(C, D))[y] + rng.normal(size=(len(y), D)) + 3.0
    return torch.from_numpy(H), torch.from_numpy(y)


def brute(H, y, C, weighting):
    H, y = H.numpy(), y.numpy()
    n = np.array([np.sum(y == c) for c in range(C)], dtype=float)
    pi = np.full(C, 1 / C) if weighting == "balanced" else n / n.sum()
    mu = np.stack([H[y == c].mean(axis=0) for c in range(C)])
    sw = sum(
        pi[c] * np.cov(H[y == c].T, bias=True) for c in range(C)
    )  # per-class covariance normalised by n_c
    mu_g = pi @ mu
    sb = sum(pi[c] * np.outer(mu[c] - mu_g, mu[c] - mu_g) for c in range(C))
    var = np.array([np.mean(np.sum((H[y == c] - mu[c]) ** 2, axis=1)) for c in range(C)])
    return mu, mu_g, sw, sb, var, pi


def random_split(n, parts, rng):
    cuts = np.sort(rng.choice(np.arange(1, n), size=parts - 1, replace=False))
    return np.split(rng.permutation(n), cuts)


@pytest.mark.parametrize("weighting", ["balanced", "sample"])
def test_statistics_match_brute_force(weighting):
    H, y = data()
    st = class_stats_from_features(H, y, 4, weighting=weighting, mode="dense")
    mu, mu_g, sw, sb, var, pi = brute(H, y, 4, weighting)
    np.testing.assert_allclose(st.means.numpy(), mu, rtol=1e-13)
    np.testing.assert_allclose(st.global_mean.numpy(), mu_g, rtol=1e-13)
    np.testing.assert_allclose(st.within_cov.numpy(), sw, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(st.class_variances.numpy(), var, rtol=1e-12)
    np.testing.assert_allclose(st.class_weights.numpy(), pi, rtol=1e-15)
    assert math.isclose(st.within_trace, np.trace(sw), rel_tol=1e-12)
    assert math.isclose(st.between_trace, np.trace(sb), rel_tol=1e-12)
    basis, s = st.basis.numpy(), st.between_singular_values.numpy()
    assert basis.shape == (9, 3)
    np.testing.assert_allclose(basis.T @ basis, np.eye(3), atol=1e-13)
    np.testing.assert_allclose(basis @ np.diag(s**2) @ basis.T, sb, atol=1e-12)
    proj = st.within_projected.numpy()
    np.testing.assert_allclose(proj, basis.T @ sw @ basis, rtol=1e-11, atol=1e-13)


def test_projected_equals_dense_nc1():
    H, y = data(1, C=5, D=30, per_class=(8, 8, 8, 8, 8))
    dense = class_stats_from_features(H, y, 5, mode="dense")
    proj = class_stats_from_features(H, y, 5, mode="projected")
    assert proj.mode == "projected" and proj.within_projected.shape == (4, 4)
    assert math.isclose(nc1_pinv(proj), nc1_pinv(dense), rel_tol=1e-10)
    _, _, sw, sb, _, _ = brute(H, y, 5, "balanced")
    assert math.isclose(nc1_pinv(proj), np.trace(sw @ np.linalg.pinv(sb)) / 5, rel_tol=1e-10)
    with pytest.raises(ValueError, match="projected mode"):
        _ = proj.within_cov


def test_large_dimension_is_projected_without_a_dense_matrix():
    H, y = data(11, C=3, D=2500, per_class=(10, 10, 10))
    auto = class_stats_from_features(H, y, 3)
    assert auto.mode == "projected"
    assert all(t.numel() <= 3 * 2500 for t in auto._p2.values())  # nothing D x D
    dense = class_stats_from_features(H, y, 3, mode="dense")
    assert math.isclose(nc1_pinv(auto), nc1_pinv(dense), rel_tol=1e-10)
    assert math.isclose(auto.within_trace, dense.within_trace, rel_tol=1e-12)


def test_auto_mode_threshold():
    H, y = data(2)
    assert class_stats_from_features(H, y, 4).mode == "dense"
    assert class_stats_from_features(H, y, 4, dense_max_dim=8).mode == "projected"
    assert class_stats_from_features(H, y, 4, dense_max_dim=9).mode == "dense"


@pytest.mark.parametrize("mode", ["dense", "projected"])
def test_streaming_over_random_batches_equals_one_shot(mode):
    H, y = data(3)
    W = torch.randn(4, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    whole = class_stats_from_batches([(H, y)], 4, mode=mode, W=W)
    want = nc_metrics(whole)
    rng = np.random.default_rng(4)
    for parts in (2, 5, 17):
        idx = random_split(len(y), parts, rng)
        batches = [(H[i], y[i]) for i in idx]
        got = nc_metrics(class_stats_from_batches(batches, 4, mode=mode, W=W))
        for key, value in want.items():
            assert math.isclose(got[key], value, rel_tol=1e-10, abs_tol=1e-14), key


def test_merge_of_partial_statistics_equals_whole():
    H, y = data(5)
    whole = class_stats_from_features(H, y, 4)
    halves = [H[:20], H[20:]], [y[:20], y[20:]]
    parts = [ClassStats(4) for _ in range(2)]
    for st, h, lab in zip(parts, *halves, strict=True):
        st.update_means(h, lab)
    merged = ClassStats(4).merge(parts[0]).merge(parts[1])
    merged.finalize_means()
    second = [ClassStats(4), ClassStats(4)]
    for st in second:
        st.merge(parts[0]).merge(parts[1])
        st.finalize_means()
    for st, h, lab in zip(second, *halves, strict=True):
        st.update_scatter(h, lab)
    merged.merge(second[0]).merge(second[1])
    np.testing.assert_allclose(merged.within_cov.numpy(), whole.within_cov.numpy(), rtol=1e-12)
    assert math.isclose(nc1_pinv(merged), nc1_pinv(whole), rel_tol=1e-12)
    other = class_stats_from_features(H + 1, y, 4)
    with pytest.raises(ValueError, match="same fixed means"):
        merged.merge(other)


def test_batches_from_a_dataloader_and_a_callable():
    H, y = data(6)
    ds = LabeledData(H.float(), y, 4)
    st = class_stats_from_batches(ds.loader(batch_size=7), 4)
    ref = class_stats_from_features(H.float(), y, 4)
    assert math.isclose(nc1_pinv(st), nc1_pinv(ref), rel_tol=1e-10)
    st2 = class_stats_from_batches(
        lambda: ((H[i : i + 5], y[i : i + 5]) for i in range(0, 40, 5)), 4
    )
    assert math.isclose(nc1_pinv(st2), nc1_pinv(ref), rel_tol=1e-6)
    with pytest.raises(TypeError, match="re-iterable"):
        class_stats_from_batches(iter([(H, y)]), 4)


def test_pass_one_variance_fallback_and_pass_two_consistency():
    H, y = data(7)
    st = ClassStats(4)
    st.update_means(H, y)
    st.finalize_means()
    one_pass = st.class_variances.clone()
    st.update_scatter(H[:10], y[:10])
    assert not st.pass2_complete
    with pytest.raises(RuntimeError, match="pass 2 saw 10 samples"):
        _ = st.within_projected
    st.update_scatter(H[10:], y[10:])
    np.testing.assert_allclose(one_pass.numpy(), st.class_variances.numpy(), rtol=1e-10)


def test_nearest_class_mean_matches_explicit_distances_and_breaks_ties_low():
    rng = np.random.default_rng(8)
    h, m = rng.normal(size=(50, 4)), rng.normal(size=(6, 4))
    want = np.array([np.argmin([np.linalg.norm(x - mu) for mu in m]) for x in h])
    got = nearest_class_mean(torch.from_numpy(h), torch.from_numpy(m)).numpy()
    np.testing.assert_array_equal(got, want)
    # (0, 0) is equidistant from classes 0 and 2; (0, 0.5) from the duplicated 1 and 3.
    means = torch.tensor([[0.0, 1.0], [2.0, 0.0], [0.0, -1.0], [2.0, 0.0]], dtype=torch.float64)
    ties = torch.tensor([[0.0, 0.0], [2.0, 0.5]], dtype=torch.float64)
    assert nearest_class_mean(ties, means).tolist() == [0, 1]


def test_phase_errors_and_bad_batches():
    H, y = data(9)
    st = ClassStats(4)
    with pytest.raises(RuntimeError, match="before finalize_means"):
        st.update_scatter(H, y)
    with pytest.raises(ValueError, match="no features"):
        st.finalize_means()
    st.update_means(H, y)
    with pytest.raises(ValueError, match="dimension 8, expected 9"):
        st.update_means(H[:, :8], y)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 4\)"):
        st.update_means(H[:2], torch.tensor([0, 4]))
    with pytest.raises(ValueError, match="integers"):
        st.update_means(H[:2], torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="one label per row"):
        st.update_means(H[:2], torch.tensor([0]))
    bad = H[:2].clone()
    bad[1, 3] = float("inf")
    with pytest.raises(ValueError, match="1 NaN or Inf"):
        st.update_means(bad, y[:2])
    with pytest.raises(ValueError, match="2-D"):
        st.update_means(H[0], y[:1])
    with pytest.raises(ValueError, match="W must have shape"):
        st.finalize_means(W=torch.zeros(3, 9))
    st.finalize_means()
    with pytest.raises(RuntimeError, match="pass 1 is closed"):
        st.update_means(H, y)
    with pytest.raises(ValueError, match="at least 2"):
        ClassStats(1)
    with pytest.raises(ValueError, match="weighting"):
        ClassStats(3, weighting="uniform")
    with pytest.raises(ValueError, match="mode"):
        ClassStats(3, mode="sparse")
    lonely = ClassStats(4)
    lonely.update_means(H[:5], torch.tensor([0, 0, 1, 2, 3]))
    with pytest.raises(ValueError, match="class 1: 1"):
        lonely.finalize_means()


def test_zero_between_scatter_gives_empty_basis():
    st = class_stats_from_features(torch.ones(6, 3), torch.tensor([0, 1, 2, 0, 1, 2]), 3)
    assert st.basis.shape == (3, 0)
    with pytest.raises(ValueError, match="zero between-class scatter"):
        nc1_pinv(st)
