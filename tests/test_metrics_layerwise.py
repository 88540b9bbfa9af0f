"""Per-layer PFC metrics and geodesic diagnostics (paper 001) against explicit loops."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from collapselab.metrics.layerwise import (
    effective_depth,
    effective_depth_from_accuracy,
    mean_displacements,
    ot_regulariser,
    path_lengths,
    path_ot_regulariser,
    path_positions,
    path_straightness,
    per_layer_pfc,
    relative_positions,
    straightness,
)
from collapselab.stats import LayerPathAccumulator
from collapselab.theory.geodesic import (
    class_mean_transport_cost,
    dpfc1_along_line,
    geodesic_curve,
    geodesic_prediction,
    interpolate,
    pfc1_along_line,
    pfc2_along_line,
    theorem1_s,
)

K, N_PER, D = 4, 15, 6


def _labels() -> np.ndarray:
    return np.repeat(np.arange(K), N_PER)


def _layers(seed: int = 0, n_layers: int = 5) -> list[np.ndarray]:
    """Random features that grow more collapsed with depth (balanced classes)."""
    rng = np.random.default_rng(seed)
    y = _labels()
    means = 2.0 * rng.normal(size=(K, D))
    return [
        means[y] * (1 + k) / n_layers + rng.normal(size=(len(y), D)) * (1.0 - 0.15 * k)
        for k in range(n_layers)
    ]


# -- brute-force references (explicit loops) ----------------------------------------------


def _means(h: np.ndarray, y: np.ndarray) -> np.ndarray:
    classes = sorted(set(y.tolist()))
    return np.array([np.mean([h[i] for i in range(len(y)) if y[i] == k], axis=0) for k in classes])


def _pfc1(h, y):
    m = _means(h, y)
    g = m.mean(axis=0)
    within = sum(np.sum((h[i] - m[y[i]]) ** 2) for i in range(len(y))) / len(y)
    between = sum(np.sum((m[k] - g) ** 2) for k in range(len(m))) / len(m)
    return within / between


def _pfc2(h, y):
    m = _means(h, y)
    mt = m - m.mean(axis=0)
    gram = np.array([[mt[a] @ mt[b] for b in range(len(m))] for a in range(len(m))])
    c = len(m)
    etf = (np.eye(c) - np.ones((c, c)) / c) / np.sqrt(c - 1)
    return np.linalg.norm(gram / np.linalg.norm(gram) - etf)


def _pfc3(h, y):
    m = _means(h, y)
    hits = 0
    for i in range(len(y)):
        dist = [np.linalg.norm(h[i] - m[k]) for k in range(len(m))]
        hits += int(np.argmin(dist) == y[i])
    return hits / len(y)


REF = {"nc1_trace_ratio": _pfc1, "nc2_etf_distance": _pfc2, "ncc_accuracy": _pfc3}


def _weighted_pfc(h, y, pi):
    """PFC1-3 with class weights ``pi`` by explicit loops (``Σ_W = Σ_k π_k Cov_k``)."""
    m, n = _means(h, y), np.bincount(y)
    g = sum(pi[k] * m[k] for k in range(len(m)))
    within = sum(pi[y[i]] / n[y[i]] * np.sum((h[i] - m[y[i]]) ** 2) for i in range(len(y)))
    between = sum(pi[k] * np.sum((m[k] - g) ** 2) for k in range(len(m)))
    mt = m - g
    gram = np.array([[mt[a] @ mt[b] for b in range(len(m))] for a in range(len(m))])
    c = len(m)
    etf = (np.eye(c) - np.ones((c, c)) / c) / np.sqrt(c - 1)
    nearest = [np.argmin([np.linalg.norm(h[i] - mk) for mk in m]) for i in range(len(y))]
    hits = np.array([nearest[i] == y[i] for i in range(len(y))])
    return {
        "nc1_trace_ratio": within / between,
        "nc2_etf_distance": np.linalg.norm(gram / np.linalg.norm(gram) - etf),
        "ncc_accuracy": sum(pi[k] * np.mean(hits[y == k]) for k in range(c)),
    }


def _recorded(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn(*args, **kwargs)
    return value, caught


def _step_norms(layers):
    return np.array(
        [
            [np.linalg.norm(layers[k + 1][i] - layers[k][i]) for i in range(len(layers[0]))]
            for k in range(len(layers) - 1)
        ]
    )


# -- tests ----------------------------------------------------------------------------------


def test_per_layer_pfc_matches_brute_force():
    layers, y = _layers(), _labels()
    got = per_layer_pfc(layers, y)
    assert set(got) == set(REF)
    for name, fn in REF.items():
        np.testing.assert_allclose(got[name], [fn(h, y) for h in layers], rtol=1e-10)
    # the construction collapses with depth
    assert np.all(np.diff(got["nc1_trace_ratio"]) < 0)


def test_per_layer_pfc_allows_different_widths():
    rng = np.random.default_rng(1)
    y = _labels()
    layers = [rng.normal(size=(len(y), w)) + np.eye(K, w)[y] * 3 for w in (5, 8, 4)]
    got = per_layer_pfc([torch.tensor(h) for h in layers], torch.tensor(y), ["ncc_accuracy"])
    np.testing.assert_allclose(got["ncc_accuracy"], [_pfc3(h, y) for h in layers])


def test_path_statistics_match_loops():
    layers = _layers(seed=2)
    norms = _step_norms(layers)
    n = len(layers[0])
    np.testing.assert_allclose(path_lengths(layers), norms.sum(axis=1), rtol=1e-13)
    cum = np.concatenate([[0.0], np.cumsum(norms.sum(axis=1))])
    np.testing.assert_allclose(relative_positions(layers), cum / cum[-1], rtol=1e-13)
    np.testing.assert_allclose(mean_displacements(layers), norms.sum(axis=1) / n, rtol=1e-13)
    assert ot_regulariser(layers) == pytest.approx((norms**2).sum() / n, rel=1e-13)
    chord = [np.linalg.norm(layers[-1][i] - layers[0][i]) for i in range(n)]
    np.testing.assert_allclose(straightness(layers), norms.sum(axis=0) / chord, rtol=1e-13)
    assert np.all(straightness(layers) >= 1.0)


def test_layers_on_a_line_have_their_spacing_as_positions_and_straightness_one():
    rng = np.random.default_rng(3)
    h0, h1 = rng.normal(size=(30, D)), rng.normal(size=(30, D))
    ts = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    equal = [(1 - t) * h0 + t * h1 for t in ts]
    np.testing.assert_allclose(relative_positions(equal), ts, atol=1e-14)
    np.testing.assert_allclose(straightness(equal), 1.0, atol=1e-13)
    uneven = np.array([0.0, 0.1, 0.15, 0.6, 1.0])
    np.testing.assert_allclose(
        relative_positions([(1 - t) * h0 + t * h1 for t in uneven]), uneven, atol=1e-14
    )
    # equal increments minimise the kinetic energy: ||h1 - h0||^2 / L (note 001, Eq. 14-15)
    chord2 = np.sum((h1 - h0) ** 2) / 30
    assert ot_regulariser(equal) == pytest.approx(chord2 / 4, rel=1e-13)
    assert ot_regulariser([(1 - t) * h0 + t * h1 for t in uneven]) > chord2 / 4


def test_straightness_degenerate_samples():
    h0 = np.zeros((3, 2))
    h1 = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    h2 = np.array([[2.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    s = straightness([h0, h1, h2])
    assert s[0] == pytest.approx(1.0)
    assert s[1] == math.inf  # goes out and comes back
    assert math.isnan(s[2])  # never moves
    acc = LayerPathAccumulator().update([h0, h1, h2])
    assert path_straightness(acc) == pytest.approx(1.0)


def test_path_accumulator_streaming_matches_one_shot():
    layers = _layers(seed=4)
    a, b = LayerPathAccumulator(), LayerPathAccumulator()
    a.update([h[:17] for h in layers])
    b.update([torch.tensor(h[17:]) for h in layers])
    a.merge(b)
    np.testing.assert_allclose(path_positions(a), relative_positions(layers), atol=1e-14)
    assert path_ot_regulariser(a) == pytest.approx(ot_regulariser(layers), rel=1e-14)
    assert path_straightness(a) == pytest.approx(np.mean(straightness(layers)), rel=1e-13)
    assert a.n_samples == len(layers[0])


def _separable_stack():
    """Layers with known NCC error: noise, 1/60, 0, 1/60, 0 (layers 0 to 4)."""
    rng = np.random.default_rng(5)
    y = _labels()
    centres = 10.0 * np.eye(K, D)
    clean = centres[y] + 0.1 * rng.normal(size=(len(y), D))
    broken = clean.copy()
    broken[0] = centres[1]  # one sample of class 0 sits on class 1's centre: error 1/60
    noise = rng.normal(size=(len(y), D))
    return [noise, broken, clean, broken, clean], y


def test_effective_depth_on_constructed_layers():
    layers, y = _separable_stack()
    acc = per_layer_pfc(layers, y, ["ncc_accuracy"])["ncc_accuracy"]
    np.testing.assert_allclose(acc[1:], [59 / 60, 1.0, 59 / 60, 1.0])
    assert effective_depth(layers, y, eps=0.0) == 2
    assert effective_depth(layers, y, eps=0.0, rule="stable") == 4
    assert effective_depth(layers, y, eps=1 / 60) == 1  # error exactly eps counts
    assert effective_depth(layers[:2], y, eps=0.0) is None
    assert effective_depth_from_accuracy([1.0, 0.2, 0.99], eps=0.01) == 2
    assert effective_depth_from_accuracy([1.0, 0.2, 0.98], eps=0.01, include_input=True) == 0
    assert effective_depth_from_accuracy([1.0, 0.2, 0.98], eps=0.01, rule="stable") is None


def test_theorem1_s_and_transport_cost_match_loops():
    layers, y = _layers(seed=6), _labels()
    h0, h1 = layers[0], layers[-1]
    m0, m1 = _means(h0, y), _means(h1, y)
    c0, c1 = m0 - m0.mean(axis=0), m1 - m1.mean(axis=0)
    s_ref = sum(c0[k] @ c1[k] for k in range(K))
    cost_ref = sum(np.sum((c1[k] - c0[k]) ** 2) for k in range(K))
    assert theorem1_s(h0, h1, y) == pytest.approx(s_ref, rel=1e-12)
    assert class_mean_transport_cost(h0, h1, y) == pytest.approx(cost_ref, rel=1e-12)
    # the paper's rewriting: S = 1/2 sum(|c0|^2 + |c1|^2) - 1/2 cost
    assert s_ref == pytest.approx(0.5 * (np.sum(c0**2) + np.sum(c1**2)) - 0.5 * cost_ref)


def test_theorem1_s_uses_mean_of_class_means_for_imbalanced_labels():
    rng = np.random.default_rng(7)
    y = np.array([0] * 10 + [1] * 3 + [2] * 6)
    h0, h1 = rng.normal(size=(19, 3)), rng.normal(size=(19, 3))
    m0, m1 = _means(h0, y), _means(h1, y)
    s_ref = float(np.sum((m0 - m0.mean(axis=0)) * (m1 - m1.mean(axis=0))))
    assert theorem1_s(h0, h1, y) == pytest.approx(s_ref, rel=1e-12)


def test_geodesic_curve_matches_brute_force_on_the_line():
    layers, y = _layers(seed=8), _labels()
    h0, h1 = layers[0], layers[-1]
    ts = [0.0, 0.3, 0.7, 1.0]
    got = geodesic_curve(h0, h1, y, ts)
    for name, fn in REF.items():
        np.testing.assert_allclose(
            got[name], [fn((1 - t) * h0 + t * h1, y) for t in ts], rtol=1e-10
        )
    np.testing.assert_allclose(interpolate(h0, h1, 0.3).numpy(), 0.7 * h0 + 0.3 * h1)
    ideal = geodesic_curve(h0, h1, y, [1.0], endpoint="class_means")
    assert ideal["nc1_trace_ratio"][0] == pytest.approx(0.0, abs=1e-14)
    assert ideal["ncc_accuracy"][0] == 1.0


@pytest.mark.parametrize("endpoint", ["empirical", "class_means"])
def test_analytic_pfc1_along_line_matches_direct_evaluation(endpoint):
    layers, y = _layers(seed=9), _labels()
    h0, h1 = layers[0], layers[-1]
    if endpoint == "class_means":
        h1_used = _means(h1, y)[y]
    else:
        h1_used = h1
    ts = np.linspace(-0.2, 1.0, 13)
    direct = [_pfc1((1 - t) * h0 + t * h1_used, y) for t in ts]
    got = pfc1_along_line(h0, h1, y, ts, endpoint=endpoint)
    np.testing.assert_allclose(got, direct, rtol=1e-10, atol=1e-14)


@pytest.mark.filterwarnings("ignore:imbalanced classes")
@pytest.mark.parametrize("weighting", ["balanced", "sample"])
def test_analytic_pfc1_weighting_matches_nc_on_imbalanced_classes(weighting):
    rng = np.random.default_rng(13)
    y = np.array([0] * 12 + [1] * 4 + [2] * 7)
    h0 = rng.normal(size=(23, 3))
    h1 = 3.0 * np.eye(3)[y] + 0.5 * rng.normal(size=(23, 3))
    ts = np.linspace(0, 1, 5)
    via_nc = geodesic_curve(h0, h1, y, ts, ["nc1_trace_ratio"], weighting=weighting)
    got = pfc1_along_line(h0, h1, y, ts, weighting=weighting)
    np.testing.assert_allclose(got, via_nc["nc1_trace_ratio"], rtol=1e-10)
    # brute force with class weights pi_k
    pi = np.bincount(y) / len(y) if weighting == "sample" else np.full(3, 1 / 3)
    for t, value in zip(ts, got, strict=True):
        h = (1 - t) * h0 + t * h1
        m = _means(h, y)
        g = pi @ m
        n_k = np.bincount(y)
        # Sigma_W = sum_k pi_k Cov_k (collapselab.stats convention)
        within = sum(pi[y[i]] / n_k[y[i]] * np.sum((h[i] - m[y[i]]) ** 2) for i in range(len(y)))
        between = sum(pi[k] * np.sum((m[k] - g) ** 2) for k in range(3))
        assert value == pytest.approx(within / between, rel=1e-10)


def test_effective_depth_counts_samples_on_imbalanced_classes():
    rng = np.random.default_rng(14)
    y = np.array([0] * 18 + [1] * 2)
    centres = 10.0 * np.eye(2, 3)
    h = centres[y] + 0.1 * rng.normal(size=(20, 3))
    h[18] = centres[0]  # one of the two class-1 samples is misclassified
    # sample fraction 1/20 = 0.05; the class-balanced error would be 0.25
    assert effective_depth([h, h], y, eps=0.05) == 1
    assert effective_depth([h, h], y, eps=0.049) is None


def test_analytic_pfc1_is_monotone_when_s_is_nonnegative():
    # Theorem 1 on a constructed instance: collapsed end point, S >= 0
    layers, y = _layers(seed=10), _labels()
    assert theorem1_s(layers[0], layers[-1], y) >= 0
    curve = pfc1_along_line(layers[0], layers[-1], y, np.linspace(0, 1, 41), "class_means")
    assert np.all(np.diff(curve) < 0)
    assert curve[-1] == pytest.approx(0.0, abs=1e-15)


def test_geodesic_prediction_is_exact_for_layers_on_the_line():
    rng = np.random.default_rng(11)
    y = _labels()
    h0 = rng.normal(size=(len(y), D))
    h1 = 5.0 * np.eye(K, D)[y] + 0.2 * rng.normal(size=(len(y), D))
    ts = [0.0, 0.2, 0.45, 0.8, 1.0]
    layers = [(1 - t) * h0 + t * h1 for t in ts]
    pred = geodesic_prediction(layers, y)
    np.testing.assert_allclose(pred.positions, ts, atol=1e-14)
    for name in REF:
        np.testing.assert_allclose(pred.predicted[name], pred.observed[name], rtol=1e-9)


def test_bad_inputs_raise_clear_errors():
    layers, y = _layers(seed=12), _labels()
    with pytest.raises(ValueError, match=r"layers\[2\] has 59 rows but layers\[0\] has 60"):
        relative_positions([layers[0], layers[1], layers[2][:-1]])
    with pytest.raises(ValueError, match=r"layers\[1\] has dimension 3 .* same space"):
        relative_positions([layers[0], layers[1][:, :3]])
    with pytest.raises(ValueError, match="one label per row"):
        per_layer_pfc(layers, y[:-1])
    with pytest.raises(ValueError, match="one label per row"):
        theorem1_s(layers[0], layers[1], y[:-1])
    bad = layers[1].copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"layers\[1\] contains NaN"):
        per_layer_pfc([layers[0], bad], y)
    with pytest.raises(ValueError, match="h0 contains NaN"):
        class_mean_transport_cost(bad, layers[0], y)
    with pytest.raises(TypeError, match="list or tuple"):
        relative_positions(np.stack(layers))
    with pytest.raises(ValueError, match="at least 2 layer"):
        relative_positions([layers[0]])
    with pytest.raises(ValueError, match="total path length 0"):
        relative_positions([layers[0], layers[0].copy()])
    with pytest.raises(ValueError, match="h1 has shape"):
        geodesic_curve(layers[0], layers[1][:, :3], y, [0.5])
    with pytest.raises(ValueError, match="metrics must be a non-empty subset"):
        per_layer_pfc(layers, y, ["nc1"])
    with pytest.raises(ValueError, match="endpoint must be"):
        pfc1_along_line(layers[0], layers[1], y, [0.5], endpoint="etf")
    with pytest.raises(ValueError, match="ts contains NaN"):
        pfc1_along_line(layers[0], layers[1], y, [np.nan])
    with pytest.raises(ValueError, match="rule must be"):
        effective_depth_from_accuracy([0.5, 1.0], rule="last")
    with pytest.raises(ValueError, match="need at least 2 layer"):
        effective_depth_from_accuracy([1.0])


def _same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    else:
        np.testing.assert_array_equal(a, b)


LINE_FUNCTIONS = (geodesic_curve, pfc1_along_line, dpfc1_along_line, pfc2_along_line)


def test_default_weighting_on_equal_counts_is_balanced_exactly():
    layers, y = _layers(seed=15), _labels()
    ts = np.linspace(0, 1, 4)
    calls = [(per_layer_pfc, (layers, y))] + [
        (fn, (layers[0], layers[-1], y, ts)) for fn in LINE_FUNCTIONS
    ]
    for fn, args in calls:
        auto, caught = _recorded(fn, *args)
        assert not caught, fn.__name__
        _same(auto, fn(*args, weighting="balanced"))
        _same(auto, fn(*args, weighting="sample"))


def test_default_weighting_on_unequal_counts_is_sample_with_one_warning_per_call():
    rng = np.random.default_rng(16)
    y = np.array([0] * 12 + [1] * 4 + [2] * 7)
    centres = 1.5 * rng.normal(size=(3, 4))
    layers = [k / 2 * centres[y] + rng.normal(size=(23, 4)) for k in range(3)]
    n = np.bincount(y)
    sample, balanced = n / n.sum(), np.full(3, 1 / 3)

    got, caught = _recorded(per_layer_pfc, layers, y)
    assert len(caught) == 1 and caught[0].filename == __file__
    message = str(caught[0].message)
    assert "counts [12, 4, 7]" in message and "sample-weighted" in message
    assert "weighting='balanced'" in message
    for name in REF:
        want = [_weighted_pfc(h, y, sample)[name] for h in layers]
        np.testing.assert_allclose(got[name], want, rtol=1e-10, err_msg=name)
    _same(got, _recorded(per_layer_pfc, layers, y, weighting="sample")[0])
    forced, caught = _recorded(per_layer_pfc, layers, y, weighting="balanced")
    assert len(caught) == 1 and "'balanced'-weighted" in str(caught[0].message)
    for name in REF:
        want = [_weighted_pfc(h, y, balanced)[name] for h in layers]
        np.testing.assert_allclose(forced[name], want, rtol=1e-10, err_msg=name)
    assert abs(forced["nc1_trace_ratio"][1] / got["nc1_trace_ratio"][1] - 1) > 1e-3

    ts = np.linspace(0, 1, 5)
    for fn in LINE_FUNCTIONS:
        auto, caught = _recorded(fn, layers[0], layers[-1], y, ts)
        assert len(caught) == 1, fn.__name__
        assert caught[0].filename == __file__, fn.__name__
        assert "counts [12, 4, 7]" in str(caught[0].message), fn.__name__
        _same(auto, _recorded(fn, layers[0], layers[-1], y, ts, weighting="sample")[0])
    line, _ = _recorded(geodesic_curve, layers[0], layers[-1], y, ts, weighting="sample")
    for j, t in enumerate(ts):
        want = _weighted_pfc((1 - t) * layers[0] + t * layers[-1], y, sample)
        for name in REF:
            assert line[name][j] == pytest.approx(want[name], rel=1e-10), (name, t)

    prediction, caught = _recorded(geodesic_prediction, layers, y)
    assert len(caught) == 1 and caught[0].filename == __file__
    _same(prediction.observed, got)
    pos = relative_positions(layers)
    line, _ = _recorded(geodesic_curve, layers[0], layers[-1], y, pos, weighting="sample")
    _same(prediction.predicted, line)
    _, caught = _recorded(effective_depth, layers, y)  # a fraction of samples by definition
    assert not caught
