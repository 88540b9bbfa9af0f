"""ClassStats: brute-force statistics, streaming == one-shot, merging, modes, bad input."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from collapselab.data.dataset import LabeledData
from collapselab.metrics import nc1_pinv
from collapselab.metrics.nc import nc_metrics
from collapselab.stats import (
    ClassStats,
    class_stats_from_batches,
    class_stats_from_features,
    nearest_class_mean,
)

# Most fixtures have unequal class counts; the default weighting="auto" then warns. The
# tests of that warning record it explicitly (recording overrides this filter).
pytestmark = pytest.mark.filterwarnings("ignore:imbalanced classes:UserWarning")

_RESOLVED = (
    "class_weights",
    "means",
    "global_mean",
    "centred_means",
    "basis",
    "between_singular_values",
    "class_variances",
    "within_cov",
    "within_projected",
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


def _assert_identical(a: ClassStats, b: ClassStats) -> None:
    for name in _RESOLVED:
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.within_trace == b.within_trace and a.between_trace == b.between_trace


def test_auto_weighting_on_equal_counts_is_balanced_and_sample_exactly():
    H, y = data(12, C=3, per_class=(7, 7, 7))  # pi_c = 7/21 and 1/3 round alike
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        auto = class_stats_from_features(H, y, 3, mode="dense")
        balanced = class_stats_from_features(H, y, 3, weighting="balanced", mode="dense")
        sample = class_stats_from_features(H, y, 3, weighting="sample", mode="dense")
    assert not caught
    assert (auto.requested_weighting, auto.weighting) == ("auto", "balanced")
    _assert_identical(auto, balanced)
    _assert_identical(auto, sample)
    mu, mu_g, sw, _, _, pi = brute(H, y, 3, "balanced")
    np.testing.assert_allclose(auto.class_weights.numpy(), pi, rtol=1e-15)
    np.testing.assert_allclose(auto.means.numpy(), mu, rtol=1e-13)
    np.testing.assert_allclose(auto.global_mean.numpy(), mu_g, rtol=1e-13)
    np.testing.assert_allclose(auto.within_cov.numpy(), sw, rtol=1e-11, atol=1e-13)


def test_auto_weighting_on_unequal_counts_is_sample_and_warns_once():
    H, y = data(13)  # counts 7, 11, 9, 13
    st = ClassStats(4, mode="dense")
    assert (st.requested_weighting, st.weighting) == ("auto", None)
    st.update_means(H, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        st.finalize_means()
    assert len(caught) == 1 and caught[0].category is UserWarning
    assert caught[0].filename == __file__  # attributed to the caller of finalize_means
    message = str(caught[0].message)
    assert "counts [7, 11, 9, 13]" in message
    assert "sample-weighted" in message and "weighting='balanced'" in message
    st.update_scatter(H, y)
    assert (st.requested_weighting, st.weighting) == ("auto", "sample")
    mu, mu_g, sw, sb, var, pi = brute(H, y, 4, "sample")
    np.testing.assert_allclose(st.class_weights.numpy(), pi, rtol=1e-15)
    np.testing.assert_allclose(st.means.numpy(), mu, rtol=1e-13)
    np.testing.assert_allclose(st.class_variances.numpy(), var, rtol=1e-12)
    np.testing.assert_allclose(st.global_mean.numpy(), mu_g, rtol=1e-13)
    np.testing.assert_allclose(st.within_cov.numpy(), sw, rtol=1e-11, atol=1e-13)
    assert math.isclose(st.between_trace, np.trace(sb), rel_tol=1e-12)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sample = class_stats_from_features(H, y, 4, weighting="sample", mode="dense")
        balanced = class_stats_from_features(H, y, 4, weighting="balanced", mode="dense")
        quiet = class_stats_from_features(H, y, 4, mode="dense", warn_imbalanced=False)
    assert not caught  # explicit weightings and warn_imbalanced=False stay silent here
    _assert_identical(st, sample)
    _assert_identical(quiet, sample)
    assert quiet.weighting == "sample" and balanced.weighting == "balanced"
    _, mu_g, sw, sb, _, _ = brute(H, y, 4, "balanced")
    np.testing.assert_allclose(balanced.class_weights.numpy(), np.full(4, 0.25), rtol=0)
    np.testing.assert_allclose(balanced.within_cov.numpy(), sw, rtol=1e-11, atol=1e-13)
    assert math.isclose(balanced.between_trace, np.trace(sb), rel_tol=1e-12)
    assert abs(balanced.between_trace - st.between_trace) > 1e-3 * st.between_trace


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
    merged = ClassStats(4).merge(parts[0]).merge(parts[1])  # all "auto": resolved below
    assert merged.weighting is None
    merged.finalize_means()
    assert merged.weighting == "sample" == whole.weighting
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
    with pytest.raises(ValueError, match="different n_classes or weighting"):
        ClassStats(4).merge(ClassStats(4, weighting="balanced"))
    with pytest.raises(ValueError, match="different n_classes or weighting"):
        merged.merge(class_stats_from_features(H, y, 4, weighting="sample"))


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
    with pytest.raises(ValueError, match=r"NaN or Inf \(1 of 18 entries\)"):
        st.update_means(bad, y[:2])
    with pytest.raises(ValueError, match="2-D"):
        st.update_means(H[0], y[:1])
    with pytest.raises(ValueError, match="W must have shape"):
        st.finalize_means(W=torch.zeros(3, 9))
    st.finalize_means()
    with pytest.raises(RuntimeError, match="pass 1 is closed"):
        st.update_means(H, y)
    with pytest.raises(ValueError, match="n_classes must be an integer >= 2"):
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


def test_pass2_decisions_equal_the_documented_formulas_exactly():
    # Random data: confusions equal nearest_class_mean and argmax(W h + b) applied row by row.
    H, y = data(21)
    y = y.numpy()
    rng = np.random.default_rng(21)
    W, b = rng.normal(size=(4, H.shape[1])), rng.normal(size=4)
    ref = torch.from_numpy(rng.normal(size=(4, H.shape[1])))
    for mode in ("dense", "projected"):
        st = class_stats_from_features(H, y, 4, mode=mode, W=W, b=b, ncc_means=ref, chunk_size=5)
        ncc = nearest_class_mean(H, ref).numpy()
        pred = np.argmax(H.numpy() @ W.T + b, axis=1)
        want_ncc, want_clf = np.zeros((4, 4), int), np.zeros((4, 4), int)
        np.add.at(want_ncc, (y, ncc), 1)
        np.add.at(want_clf, (y, pred), 1)
        np.testing.assert_array_equal(st.ncc_confusion.numpy(), want_ncc)
        np.testing.assert_array_equal(st.classifier_confusion.numpy(), want_clf)
        np.testing.assert_array_equal(
            st.mismatch_counts.numpy(), np.bincount(y[ncc != pred], minlength=4)
        )


@pytest.mark.parametrize("collinear", [False, True])
def test_own_means_ncc_decisions_through_the_projection_are_the_documented_ones(collinear):
    # Projected statistics decide the nearest class mean from the projection on range(M̄)
    # (the means' own differences lie in it); heavily overlapping classes make many rows
    # close to a tie, and collinear means a rank-1 span.
    rng = np.random.default_rng(31)
    C, D, n = 5, 40, 30
    direction = rng.normal(size=D)
    centres = np.outer(np.arange(C), direction) if collinear else rng.normal(size=(C, D))
    y = np.repeat(np.arange(C), n)
    noise = 3.0 * rng.normal(size=(C, n, D))
    noise -= noise.mean(axis=1, keepdims=True)  # class means exactly the centres
    H = torch.from_numpy(centres[y] + noise.reshape(C * n, D))
    W, b = rng.normal(size=(C, D)), rng.normal(size=C)
    st = class_stats_from_features(H, y, C, mode="projected", W=W, b=b, chunk_size=7)
    assert st.basis.shape[1] == (1 if collinear else C - 1)
    ncc = nearest_class_mean(H, st.means).numpy()
    pred = np.argmax(H.numpy() @ W.T + b, axis=1)
    want = np.zeros((C, C), int)
    np.add.at(want, (y, ncc), 1)
    np.testing.assert_array_equal(st.ncc_confusion.numpy(), want)
    np.testing.assert_array_equal(
        st.mismatch_counts.numpy(), np.bincount(y[ncc != pred], minlength=C)
    )
    assert 0 < want.trace() < C * n  # the decisions are not trivial


def test_pass2_exact_ties_go_to_the_lowest_class():
    # Class means (+-0.75, 0) mirror each other about the origin, (0, 4.5) and (0, 3.5)
    # about (0, 4): the samples at (0, 0) and (0, 4) are equidistant from a pair of means.
    # The classifier rows 0/1 and 2/3 are equal, so W h + b ties for every sample.
    h = torch.tensor(
        [[1.0, 0.0], [1.2, 0.0], [0.0, 0.0], [0.8, 0.0],
         [-1.0, 0.0], [-1.2, 0.0], [0.0, 0.0], [-0.8, 0.0],
         [0.0, 5.0], [0.0, 4.0], [0.0, 4.5], [0.0, 3.0], [0.0, 4.0], [0.0, 3.5]],
        dtype=torch.float64,
    )  # fmt: skip
    y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3])
    W = torch.tensor([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    b = torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=torch.float64)
    for mode in ("dense", "projected"):
        st = class_stats_from_features(h, y, 4, mode=mode, W=W, b=b)
        want_ncc = torch.zeros(4, 4, dtype=torch.int64)
        for label, pick in zip(y, nearest_class_mean(h, st.means), strict=True):
            want_ncc[label, pick] += 1
        np.testing.assert_array_equal(st.ncc_confusion.numpy(), want_ncc.numpy())
        # the tie samples go to the lower class: (0, 0) of class 1 to class 0, (0, 4) of
        # class 3 to class 2 (and those of classes 0 and 2 stay)
        assert st.ncc_confusion[1, 0] == 1 and st.ncc_confusion[3, 2] == 1
        assert st.ncc_confusion.trace() == 12
        # every classifier score ties within {0, 1} and {2, 3}: decisions are 0 or 2 only
        clf = st.classifier_confusion
        assert clf[:, [1, 3]].sum() == 0 and clf.sum() == 14


def test_default_chunk_size_is_in_bytes():
    from collapselab.stats.class_stats import default_chunk_size

    assert default_chunk_size(512) == 1024  # 4 MiB of float64
    assert default_chunk_size(32768) == 64  # at least 64 rows ...
    assert default_chunk_size(2**20) == 8  # ... within 64 MiB
    assert default_chunk_size(2**24) == 1
    assert default_chunk_size(512, 7) == 7
    with pytest.raises(ValueError, match="chunk_size must be an integer >= 1"):
        default_chunk_size(4, 0)
    H, y = data(3)
    a = class_stats_from_features(H, y, 4, mode="dense")
    c = class_stats_from_features(H, y, 4, mode="dense", chunk_size=3)
    np.testing.assert_allclose(a.within_cov.numpy(), c.within_cov.numpy(), rtol=1e-12)
