"""The straight-line model of paper 001 (Theorems 1 and 2) against explicit references."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.metrics.nc import nc1_trace_ratio, nc2_etf_distance, ncc_accuracy
from collapselab.theory.geodesic import (
    class_mean_transport_cost,
    dpfc1_along_line,
    dpfc1_appendix_a,
    ideal_endpoint,
    pfc2_along_line,
    pfc2_end_curvature,
    simplex_etf,
    straight_line_model,
    theorem1_monte_carlo,
    theorem1_s,
    theorem2_study,
    verify_straight_line,
)

K, N_PER, D = 5, 8, 12


def _labels() -> np.ndarray:
    return np.repeat(np.arange(K), N_PER)


def _instance(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = _labels()
    h0 = rng.normal(size=(K, D))[y] + rng.normal(size=(len(y), D))
    h1 = 4.0 * rng.normal(size=(K, D))[y] + 0.5 * rng.normal(size=(len(y), D))
    return h0, h1, y


def _means(h, y):
    return np.array([h[y == k].mean(axis=0) for k in range(K)])


def _pfc1(h, y):
    m = _means(h, y)
    g = m.mean(axis=0)
    within = sum(np.sum((h[i] - m[y[i]]) ** 2) for i in range(len(y))) / len(y)
    return within / (sum(np.sum((m[k] - g) ** 2) for k in range(K)) / K)


# -- the simplex ETF --------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "d"), [(2, 2), (5, 12), (4, 3), (10, 10)])
def test_simplex_etf_has_the_etf_gram_matrix(k, d):
    m = simplex_etf(k, d, seed=3, scale=2.5)
    assert m.shape == (k, d)
    gram = m @ m.T
    expected = 2.5**2 * (np.eye(k) * (1 + 1 / (k - 1)) - 1 / (k - 1))
    np.testing.assert_allclose(gram, expected, atol=1e-12)
    np.testing.assert_allclose(m.sum(axis=0), 0.0, atol=1e-12)
    assert nc2_etf_distance(torch.tensor(m), torch.arange(k)) < 1e-12


def test_simplex_etf_orientation_is_seeded_and_haar_like():
    a, b = simplex_etf(5, 12, seed=7), simplex_etf(5, 12, seed=7)
    np.testing.assert_array_equal(a, b)
    assert np.linalg.norm(a - simplex_etf(5, 12, seed=8)) > 0.5
    # Definition 1: M = sqrt(K/(K-1)) U P with U^T U = I. Recover U P from M^T and check
    # that the orthogonal factor's first coordinate averages to zero over random draws.
    first = [simplex_etf(5, 12, seed=s)[0, 0] for s in range(400)]
    assert abs(np.mean(first)) < 0.05
    with pytest.raises(ValueError, match="dim must be >= n_classes - 1"):
        simplex_etf(5, 3)
    with pytest.raises(ValueError, match="n_classes must be an integer >= 2"):
        simplex_etf(1, 3)
    with pytest.raises(ValueError, match="scale must be"):
        simplex_etf(3, 3, scale=0.0)
    with pytest.raises(TypeError, match="seed must be"):
        simplex_etf(3, 3, seed="a")


def test_ideal_endpoints_are_collapsed_and_keep_the_between_class_scale():
    _, h1, y = _instance(1)
    means1 = _means(h1, y)
    collapsed = ideal_endpoint(h1, y, "class_means")
    np.testing.assert_allclose(collapsed, means1[y], atol=1e-14)
    for orientation in ("random", "nearest"):
        etf_end = ideal_endpoint(torch.tensor(h1), torch.tensor(y), "simplex_etf", 0, orientation)
        hy = torch.tensor(y)
        assert nc1_trace_ratio(torch.tensor(etf_end), hy) < 1e-28
        assert nc2_etf_distance(torch.tensor(etf_end), hy) < 1e-12
        assert ncc_accuracy(torch.tensor(etf_end), hy) == 1.0
        m = _means(etf_end, y)
        np.testing.assert_allclose(m.mean(axis=0), means1.mean(axis=0), atol=1e-12)
        between = np.sum((m - m.mean(axis=0)) ** 2)
        assert between == pytest.approx(np.sum((means1 - means1.mean(axis=0)) ** 2), rel=1e-12)
    # "nearest" is the closest ETF (of that scale) to the actual centred means
    c1 = means1 - means1.mean(axis=0)
    near = _means(ideal_endpoint(h1, y, "simplex_etf", orientation="nearest"), y)
    d_near = np.linalg.norm(near - near.mean(axis=0) - c1)
    for seed in range(30):
        rand = _means(ideal_endpoint(h1, y, "simplex_etf", seed=seed), y)
        assert d_near <= np.linalg.norm(rand - rand.mean(axis=0) - c1)
    # snapping an exact ETF onto the nearest ETF changes nothing
    exact = (3.0 + simplex_etf(K, D, seed=2, scale=2.0))[y]
    np.testing.assert_allclose(
        ideal_endpoint(exact, y, "simplex_etf", orientation="nearest"), exact, atol=1e-12
    )


# -- the model and its closed forms ----------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["empirical", "class_means", "simplex_etf"])
def test_straight_line_model_matches_direct_evaluation(endpoint):
    h0, h1, y = _instance(2)
    ts = np.linspace(0, 1, 9)
    line = straight_line_model(h0, h1, y, ts, endpoint=endpoint, seed=4)
    end = line.h1
    direct = [_pfc1((1 - t) * h0 + t * end, y) for t in ts]
    np.testing.assert_allclose(line.metrics["nc1_trace_ratio"], direct, rtol=1e-10)
    np.testing.assert_allclose(line.pfc1, direct, rtol=1e-10)
    np.testing.assert_allclose(line.pfc2, line.metrics["nc2_etf_distance"], rtol=1e-10, atol=1e-14)
    assert line.s == pytest.approx(theorem1_s(h0, end, y), rel=1e-12)
    assert line.transport_cost == pytest.approx(class_mean_transport_cost(h0, end, y), rel=1e-12)
    if endpoint != "empirical":
        assert line.pfc1[-1] == pytest.approx(0.0, abs=1e-14)
        assert line.metrics["ncc_accuracy"][-1] == 1.0
    if endpoint == "simplex_etf":
        assert line.pfc2[-1] < 1e-9


def test_appendix_a_derivative_equals_the_closed_form_and_finite_differences():
    h0, h1, y = _instance(3)
    ts = np.linspace(0.0, 0.98, 15)
    printed = dpfc1_appendix_a(h0, h1, y, ts)
    np.testing.assert_allclose(
        printed, dpfc1_along_line(h0, h1, y, ts, endpoint="class_means"), rtol=1e-11
    )
    collapsed = _means(h1, y)[y]
    step = 1e-6
    fd = [
        (
            _pfc1((1 - t - step) * h0 + (t + step) * collapsed, y)
            - _pfc1((1 - t + step) * h0 + (t - step) * collapsed, y)
        )
        / (2 * step)
        for t in ts
    ]
    np.testing.assert_allclose(printed, fd, rtol=1e-6)
    # Theorem 1: negative on [0, 1) when S >= 0
    if theorem1_s(h0, h1, y) >= 0:
        assert np.all(printed < 0)


@pytest.mark.parametrize("endpoint", ["empirical", "class_means", "simplex_etf"])
def test_verify_straight_line_reports_small_relative_errors(endpoint):
    h0, h1, y = _instance(4)
    v = verify_straight_line(h0, h1, y, endpoint=endpoint, seed=1)
    assert v.pfc1 < 1e-12
    assert v.pfc2 < 1e-12
    assert v.appendix_a < 1e-12
    assert v.dpfc1_dt < 1e-7  # central differences, step 1e-5
    if endpoint == "simplex_etf":
        assert v.end_curvature < 1e-4  # second differences, step 1e-3
        assert v.max_error < 1e-4
    else:
        assert np.isnan(v.end_curvature)


def test_pfc2_surrogate_curvature_at_the_end_matches_second_differences():
    rng = np.random.default_rng(5)
    y = np.arange(K)
    h1 = simplex_etf(K, D, seed=5)
    h0 = h1 + 0.5 * rng.normal(size=(K, D))
    predicted = pfc2_end_curvature(h0, h1, y)
    assert predicted > 0

    def surrogate(t):
        return 0.5 * pfc2_along_line(h0, h1, y, [t])[0] ** 2

    h = 1e-3
    fd = (surrogate(1 + h) - 2 * surrogate(1.0) + surrogate(1 - h)) / h**2
    assert fd == pytest.approx(predicted, rel=1e-5)
    # f(1) = f'(1) = 0: the surrogate is quadratic at the end point
    assert surrogate(1.0) < 1e-28
    assert abs(surrogate(1 + h) - surrogate(1 - h)) / (2 * h) < 1e-5 * predicted


# -- Monte-Carlo checks of the theorems ------------------------------------------------------


def test_theorem1_monte_carlo_monotone_whenever_s_is_nonnegative():
    mc = theorem1_monte_carlo(n_trials=300, n_classes=5, dim=20, n_per_class=5, seed=0)
    assert mc.n_s_nonnegative + mc.n_s_negative == 300
    assert mc.n_s_nonnegative > 60 and mc.n_s_negative > 60  # both signs are exercised
    assert mc.fraction_monotone_given_s_nonnegative == 1.0
    assert mc.n_monotone_given_s_nonnegative == mc.n_s_nonnegative
    # S < 0 makes dPFC1/dt(0) > 0: non-monotone up to the grid resolution
    assert mc.fraction_nonmonotone_given_s_negative > 0.95
    h0, h1, y = mc.counterexample
    assert theorem1_s(h0, h1, y) < 0
    assert np.max(np.diff(mc.counterexample_curve)) > 0
    assert np.all(mc.max_rise[mc.s >= 0] <= 1e-12)


def test_theorem1_monte_carlo_analytic_and_direct_agree():
    kw = {"n_trials": 12, "n_classes": 3, "dim": 5, "n_per_class": 4, "n_grid": 41, "seed": 9}
    fast = theorem1_monte_carlo(method="analytic", **kw)
    slow = theorem1_monte_carlo(method="direct", **kw)
    np.testing.assert_array_equal(fast.s, slow.s)
    np.testing.assert_array_equal(fast.monotone, slow.monotone)
    np.testing.assert_allclose(fast.max_rise, slow.max_rise, rtol=1e-8, atol=1e-14)


def test_theorem2_is_local_monotone_near_the_end_only_for_small_transport_cost():
    st = theorem2_study(scales=(0.1, 3.0), n_trials=80, n_classes=5, dim=20, seed=0)
    near, far = 0, 1
    assert st.transport_cost[near].max() < st.transport_cost[far].min()
    assert st.fraction_monotone[near] == 1.0  # small transport cost: monotone on [0, 1]
    assert st.fraction_monotone[far] < 0.9  # far from the end: counter-instances exist
    assert not st.monotone[far].all()
    # ... yet every instance is monotone on some final interval (1 - δ, 1]: Appendix B
    assert np.all(st.min_monotone_interval > 0)
    assert np.all(st.curvature > 0)
    np.testing.assert_array_equal(st.monotone, st.monotone_interval == 1.0)


def test_geodesic_bad_inputs():
    h0, h1, y = _instance(6)
    with pytest.raises(ValueError, match="endpoint must be"):
        straight_line_model(h0, h1, y, [0.5], endpoint="etf")
    with pytest.raises(ValueError, match="mode must be"):
        ideal_endpoint(h1, y, "means")
    with pytest.raises(ValueError, match="orientation must be"):
        ideal_endpoint(h1, y, "simplex_etf", orientation="best")
    with pytest.raises(ValueError, match="h1 has shape"):
        straight_line_model(h0, h1[:, :3], y, [0.5])
    with pytest.raises(ValueError, match="labels has 3 entries"):
        dpfc1_appendix_a(h0, h1, y[:3], [0.5])
    bad = h0.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="h0 contains NaN or Inf"):
        pfc2_end_curvature(bad, h1, y)
    with pytest.raises(TypeError, match="h1 must be"):
        ideal_endpoint(h1.tolist(), y)
    with pytest.raises(ValueError, match="identical class means"):
        ideal_endpoint(np.ones_like(h1), y, "simplex_etf")
    with pytest.raises(ValueError, match="scales must be"):
        theorem2_study(scales=(-1.0,))
    with pytest.raises(ValueError, match="method must be"):
        theorem1_monte_carlo(n_trials=1, method="exact")
