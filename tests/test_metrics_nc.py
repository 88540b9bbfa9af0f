"""NC1-NC4 metrics against an independent numpy brute force and exact fixtures."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from collapselab.metrics import (
    equiangularity,
    equinorm,
    etf_distance,
    max_equiangularity,
    nc1_trace_ratio,
    nc2_etf_distance,
    ncc_accuracy,
    orthogonal_frame_distance,
    self_duality,
    self_duality_classwise,
)
from collapselab.metrics.nc import nc_metrics
from collapselab.stats import class_stats_from_features

REL = 1e-10


def brute_nc(H, y, C, W=None, b=None, *, weighting="balanced", ddof=1, pairs="unordered"):
    """Every NC metric by explicit per-class loops, dense D x D matrices and numpy.pinv."""
    H = np.asarray(H, dtype=np.float64)
    y = np.asarray(y)
    N, D = H.shape
    n = np.array([np.sum(y == c) for c in range(C)], dtype=np.float64)
    pi = np.full(C, 1.0 / C) if weighting == "balanced" else n / N
    mu = np.zeros((C, D))
    for c in range(C):
        for i in range(N):
            if y[i] == c:
                mu[c] += H[i]
        mu[c] /= n[c]
    mu_g = sum(pi[c] * mu[c] for c in range(C))
    sw = np.zeros((D, D))
    var = np.zeros(C)
    for i in range(N):
        c = y[i]
        d = H[i] - mu[c]
        sw += pi[c] / n[c] * np.outer(d, d)
        var[c] += d @ d / n[c]
    sb = sum(pi[c] * np.outer(mu[c] - mu_g, mu[c] - mu_g) for c in range(C))
    cm = mu - mu_g
    out = {
        "nc1": np.trace(sw @ np.linalg.pinv(sb)) / C,
        "nc1_trace_ratio": np.trace(sw) / np.trace(sb),
    }
    ratios = [
        (var[c] + var[k]) / (2 * np.sum((mu[c] - mu[k]) ** 2))
        for c in range(C)
        for k in range(C)
        if c != k
    ]
    out["nc1_cdnv"] = np.mean(ratios)

    def geometry(V, tag):
        norms = np.array([np.linalg.norm(v) for v in V])
        out[f"nc2_equinorm_{tag}"] = np.std(norms, ddof=ddof) / np.mean(norms)
        cosines, gaps = [], []
        for c in range(C):
            for k in range(C):
                if c == k or (pairs == "unordered" and k < c):
                    continue
                cos = V[c] @ V[k] / (norms[c] * norms[k])
                cosines.append(cos)
                gaps.append(abs(cos + 1 / (C - 1)))
        out[f"nc2_equiangle_{tag}"] = np.std(cosines, ddof=ddof) if len(cosines) > 1 else 0.0
        out[f"nc2_maxangle_{tag}"] = np.mean(gaps)

    geometry(cm, "means")
    g = cm @ cm.T
    etf = (np.eye(C) - np.ones((C, C)) / C) / np.sqrt(C - 1)
    out["nc2_etf_distance"] = np.linalg.norm(g / np.linalg.norm(g) - etf)
    g0 = mu @ mu.T
    out["nc2_orthogonal_frame"] = np.linalg.norm(g0 / np.linalg.norm(g0) - np.eye(C) / np.sqrt(C))
    ncc = np.array([np.argmin([np.linalg.norm(h - m) for m in mu]) for h in H])
    out["ncc_accuracy"] = sum(pi[c] * np.mean(ncc[y == c] == c) for c in range(C))
    if W is not None:
        W = np.asarray(W, dtype=np.float64)
        b = np.zeros(C) if b is None else np.asarray(b, dtype=np.float64)
        geometry(W, "classifiers")
        out["nc3_self_duality"] = np.sum((W.T / np.linalg.norm(W) - cm.T / np.linalg.norm(cm)) ** 2)
        out["nc3_self_duality_classwise"] = np.mean(
            [
                np.sum((W[c] / np.linalg.norm(W[c]) - cm[c] / np.linalg.norm(cm[c])) ** 2)
                for c in range(C)
            ]
        )
        pred = np.array([np.argmax(W @ h + b) for h in H])
        out["accuracy"] = sum(pi[c] * np.mean(pred[y == c] == c) for c in range(C))
        out["nc4_ncc_mismatch"] = sum(
            pi[c] * np.mean(pred[y == c] != ncc[y == c]) for c in range(C)
        )
    out["_sw"], out["_sb"], out["_mu"] = sw, sb, mu
    return out


def random_problem(seed, C=4, D=7, per_class=(12, 12, 12, 12), spread=1.5):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=spread, size=(C, D))
    y = np.concatenate([np.full(k, c) for c, k in enumerate(per_class)])
    rng.shuffle(y)
    H = centres[y] + rng.normal(size=(len(y), D))
    W = rng.normal(size=(C, D))
    b = rng.normal(size=C)
    return H, y, W, b


def assert_close(got: dict, want: dict, rel=REL, abs_tol=1e-12):
    for key, value in want.items():
        if key.startswith("_"):
            continue
        assert key in got, key
        assert math.isclose(got[key], value, rel_tol=rel, abs_tol=abs_tol), (key, got[key], value)


@pytest.mark.parametrize("mode", ["dense", "projected"])
@pytest.mark.parametrize("pairs", ["unordered", "ordered"])
@pytest.mark.parametrize("ddof", [0, 1])
def test_nc_metrics_match_brute_force_balanced(mode, pairs, ddof):
    H, y, W, b = random_problem(0)
    st = class_stats_from_features(torch.from_numpy(H), torch.from_numpy(y), 4, W=W, b=b, mode=mode)
    got = nc_metrics(st, ddof=ddof, pairs=pairs)
    want = brute_nc(H, y, 4, W, b, ddof=ddof, pairs=pairs)
    assert_close(got, want)
    assert set(got) == {k for k in want if not k.startswith("_")}


@pytest.mark.parametrize("weighting", ["balanced", "sample"])
def test_nc_metrics_match_brute_force_imbalanced(weighting):
    H, y, W, b = random_problem(1, C=3, D=5, per_class=(5, 9, 20))
    st = class_stats_from_features(H, y, 3, W=W, b=b, weighting=weighting)
    assert_close(nc_metrics(st), brute_nc(H, y, 3, W, b, weighting=weighting))


def test_weightings_differ_on_imbalanced_data_and_agree_on_balanced():
    H, y, _, _ = random_problem(2, C=3, D=5, per_class=(5, 9, 20))
    a = nc_metrics(class_stats_from_features(H, y, 3, weighting="balanced"))
    s = nc_metrics(class_stats_from_features(H, y, 3, weighting="sample"))
    assert abs(a["nc1"] - s["nc1"]) > 1e-3
    H, y, _, _ = random_problem(2, C=3, D=5, per_class=(8, 8, 8))
    a = nc_metrics(class_stats_from_features(H, y, 3, weighting="balanced"))
    s = nc_metrics(class_stats_from_features(H, y, 3, weighting="sample"))
    assert_close(a, s, rel=1e-12)


def test_nc1_without_division_by_c():
    H, y, _, _ = random_problem(3)
    st = class_stats_from_features(H, y, 4)
    assert math.isclose(
        nc_metrics(st, nc1_divide_by_c=False)["nc1"], 4 * nc_metrics(st)["nc1"], rel_tol=1e-14
    )


def simplex_etf(C, D, seed, scale=3.0):
    """Rows form a simplex ETF: a random rotation of sqrt(C/(C-1)) (I - 11^T/C)."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(D, C)))
    return scale * np.sqrt(C / (C - 1)) * (np.eye(C) - 1 / C) @ q.T


def test_etf_means_give_zero_nc2():
    C, D = 5, 9
    m = simplex_etf(C, D, 4)
    offset = np.random.default_rng(5).normal(size=D)
    means = m + offset
    rng = np.random.default_rng(6)
    y = np.repeat(np.arange(C), 6)
    noise = rng.normal(size=(len(y), D))
    for c in range(C):  # zero-mean noise per class keeps the class means exact
        noise[y == c] -= noise[y == c].mean(axis=0)
    st = class_stats_from_features(means[y] + noise, y, C)
    got = nc_metrics(st, pairs="ordered")
    for key in ("nc2_equinorm_means", "nc2_equiangle_means", "nc2_maxangle_means"):
        assert abs(got[key]) < 1e-12, (key, got[key])
    assert abs(got["nc2_etf_distance"]) < 1e-12
    assert etf_distance(m) < 1e-14 and max_equiangularity(m) < 1e-14
    assert got["nc1"] > 0.01


def test_collapsed_features_give_zero_nc1_and_perfect_ncc():
    C, D = 4, 6
    means = np.random.default_rng(7).normal(size=(C, D))
    y = np.repeat(np.arange(C), 5)
    # A classifier that is the NCC rule written linearly: argmax_c mu_c.h - ||mu_c||^2/2.
    W, b = means, -0.5 * (means**2).sum(axis=1)
    st = class_stats_from_features(means[y], y, C, W=W, b=b)
    got = nc_metrics(st)
    # Zero up to the rounding of the class means (sums / n_c).
    assert got["nc1"] < 1e-30 and got["nc1_trace_ratio"] < 1e-30 and got["nc1_cdnv"] < 1e-30
    assert got["ncc_accuracy"] == 1.0 and got["accuracy"] == 1.0
    assert got["nc4_ncc_mismatch"] == 0.0


def test_self_dual_classifier_gives_zero_nc3():
    H, y, _, _ = random_problem(8)
    st = class_stats_from_features(H, y, 4, W=np.zeros((4, 7)) + 1)
    W = 2.5 * st.centred_means
    assert self_duality(W, st.centred_means) < 1e-28
    assert self_duality_classwise(W, st.centred_means) < 1e-28
    st = class_stats_from_features(H, y, 4, W=W)
    got = nc_metrics(st)
    assert got["nc3_self_duality"] < 1e-28 and got["nc3_self_duality_classwise"] < 1e-28
    # Per-class rescaling keeps the classwise form at zero but not the global one.
    scaled = W * torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64).unsqueeze(1)
    assert self_duality_classwise(scaled, st.centred_means) < 1e-28
    assert self_duality(scaled, st.centred_means) > 1e-3


def test_orthogonal_frame_fixture():
    q, _ = np.linalg.qr(np.random.default_rng(9).normal(size=(8, 4)))
    assert orthogonal_frame_distance(3.0 * q.T) < 1e-14
    assert orthogonal_frame_distance(simplex_etf(4, 8, 9)) > 0.1


def test_geometry_helpers_match_formulas():
    v = np.random.default_rng(10).normal(size=(5, 3))
    norms = np.linalg.norm(v, axis=1)
    assert math.isclose(equinorm(v, ddof=0), norms.std() / norms.mean(), rel_tol=1e-14)
    u = v / norms[:, None]
    cos = u @ u.T
    iu = np.triu_indices(5, 1)
    assert math.isclose(equiangularity(v, "unordered", 1), cos[iu].std(ddof=1), rel_tol=1e-13)
    off = ~np.eye(5, dtype=bool)
    assert math.isclose(equiangularity(v, "ordered", 1), cos[off].std(ddof=1), rel_tol=1e-13)
    assert equiangularity(v[:2], "unordered", 1) == 0.0


def test_feature_level_functions_match_brute_force():
    H, y, _, _ = random_problem(11)
    want = brute_nc(H, y, 4)
    Ht, yt = torch.from_numpy(H), torch.from_numpy(y)
    for h, lab in ((H, y), (Ht, yt), (Ht.float(), yt.int())):
        tol = REL if h.dtype != torch.float32 else 1e-6
        assert math.isclose(nc1_trace_ratio(h, lab), want["nc1_trace_ratio"], rel_tol=tol)
        assert math.isclose(nc2_etf_distance(h, lab), want["nc2_etf_distance"], rel_tol=tol)
        assert ncc_accuracy(h, lab) == pytest.approx(want["ncc_accuracy"], abs=1e-15)
    assert isinstance(nc1_trace_ratio(H, y), float)


def test_ncc_accuracy_with_reference_means():
    H, y, _, _ = random_problem(12)
    ref = np.random.default_rng(13).normal(size=(4, 7))
    pred = np.array([np.argmin([np.linalg.norm(h - m) for m in ref]) for h in H])
    assert ncc_accuracy(H, y, means=ref) == pytest.approx(np.mean(pred == y), abs=1e-15)
    sub = np.arange(20)  # a subset may miss classes; balanced = mean of per-class accuracy
    yy = y[sub]
    counts = np.bincount(yy, minlength=4)
    assert len(set(counts[counts > 0])) > 1  # imbalanced
    per_class = [np.mean(pred[sub][yy == c] == c) for c in np.unique(yy)]
    got = {}
    for weighting in ("auto", "balanced", "sample"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got[weighting] = ncc_accuracy(H[sub], yy, ref, weighting=weighting)
        assert len(caught) == 1, weighting
        assert f"counts {counts.tolist()}" in str(caught[0].message)
        assert caught[0].filename == __file__
    assert got["balanced"] == pytest.approx(np.mean(per_class), abs=1e-15)
    assert got["sample"] == pytest.approx(np.mean(pred[sub] == yy), abs=1e-15)
    assert got["auto"] == got["sample"] != pytest.approx(got["balanced"], abs=1e-3)


def test_ncc_ties_go_to_lowest_class():
    means = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 5.0]])
    H = np.array([[0.0, 0.0], [0.0, -1.0]])  # equidistant from classes 0 and 1
    assert ncc_accuracy(H, np.array([0, 0]), means) == 1.0
    assert ncc_accuracy(H, np.array([1, 1]), means) == 0.0


def test_feature_level_functions_reject_bad_input():
    H, y, _, _ = random_problem(14)
    with pytest.raises(ValueError, match="NaN or Inf"):
        nc1_trace_ratio(np.where(np.arange(H.size).reshape(H.shape) == 3, np.nan, H), y)
    with pytest.raises(ValueError, match="integers"):
        nc2_etf_distance(H, y.astype(float))
    with pytest.raises(ValueError, match="at least 2 samples"):
        nc1_trace_ratio(H[:5], y[:5], n_classes=4)
    with pytest.raises(ValueError, match="means has 3 rows"):
        ncc_accuracy(H, y, means=np.zeros((3, 7)), n_classes=4)
    with pytest.raises(ValueError, match="zero between-class scatter"):
        nc1_trace_ratio(np.ones((8, 3)), np.arange(8) % 2)
    with pytest.raises(ValueError, match="zero rows"):
        equiangularity(np.zeros((3, 2)))


FEATURE_FUNCTIONS = (nc1_trace_ratio, nc2_etf_distance, ncc_accuracy)


def _call(fn, H, y, **kwargs):
    """``fn(H, y, **kwargs)`` and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn(H, y, **kwargs)
    return value, caught


def test_feature_functions_default_to_balanced_on_equal_counts():
    H, y, _, _ = random_problem(15, C=3, D=5, per_class=(9, 9, 9))
    want = brute_nc(H, y, 3)
    for fn in FEATURE_FUNCTIONS:
        auto, caught = _call(fn, H, y)
        assert not caught, fn.__name__
        assert auto == fn(H, y, weighting="balanced") == fn(H, y, weighting="sample")
        assert math.isclose(auto, want[fn.__name__], rel_tol=REL, abs_tol=1e-15), fn.__name__


def test_feature_functions_default_to_sample_weights_on_unequal_counts():
    H, y, _, _ = random_problem(16, C=3, D=5, per_class=(5, 9, 20), spread=0.8)
    sample, balanced = brute_nc(H, y, 3, weighting="sample"), brute_nc(H, y, 3)
    for fn in FEATURE_FUNCTIONS:
        name = fn.__name__
        auto, caught = _call(fn, H, y)
        assert len(caught) == 1, name
        message = str(caught[0].message)
        assert "counts [5, 9, 20]" in message and "sample-weighted" in message, name
        assert "weighting='balanced'" in message and caught[0].filename == __file__
        explicit, caught = _call(fn, H, y, weighting="sample")
        assert auto == explicit and len(caught) == 1, name
        assert math.isclose(auto, sample[name], rel_tol=REL, abs_tol=1e-15), name
        forced, caught = _call(fn, H, y, weighting="balanced")
        assert len(caught) == 1 and "'balanced'-weighted" in str(caught[0].message), name
        assert math.isclose(forced, balanced[name], rel_tol=REL, abs_tol=1e-15), name
        assert abs(forced - auto) > 1e-3 * abs(auto), name


def test_feature_functions_reject_an_unknown_weighting():
    H, y, _, _ = random_problem(17)
    for fn in FEATURE_FUNCTIONS:
        with pytest.raises(ValueError, match="weighting must be one of"):
            fn(H, y, weighting="uniform")
