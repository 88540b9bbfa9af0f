"""Straight-line extensions of the layer-wise family (paper 001): vector t, dPFC1/dt, PFC2(t)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.theory.geodesic import (
    dpfc1_along_line,
    geodesic_curve,
    interpolate,
    pfc1_along_line,
    pfc2_along_line,
    theorem1_s,
)

K, N_PER, D = 4, 12, 6


def _labels() -> np.ndarray:
    return np.repeat(np.arange(K), N_PER)


def _pair(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = _labels()
    h0 = rng.normal(size=(K, D))[y] + rng.normal(size=(len(y), D))
    h1 = 3.0 * rng.normal(size=(K, D))[y] + 0.4 * rng.normal(size=(len(y), D))
    return h0, h1


# -- brute-force references (explicit loops) ----------------------------------------------


def _means(h, y):
    return np.array([h[y == k].mean(axis=0) for k in sorted(set(y.tolist()))])


def _pfc1(h, y, pi=None):
    m = _means(h, y)
    c = len(m)
    pi = np.full(c, 1.0 / c) if pi is None else pi
    counts = np.bincount(y)
    g = sum(pi[k] * m[k] for k in range(c))
    within = sum(pi[y[i]] / counts[y[i]] * np.sum((h[i] - m[y[i]]) ** 2) for i in range(len(y)))
    between = sum(pi[k] * np.sum((m[k] - g) ** 2) for k in range(c))
    return within / between


def _pfc2(h, y):
    m = _means(h, y)
    mt = m - m.mean(axis=0)
    gram = np.array([[mt[a] @ mt[b] for b in range(len(m))] for a in range(len(m))])
    c = len(m)
    etf = (np.eye(c) - np.ones((c, c)) / c) / np.sqrt(c - 1)
    return np.linalg.norm(gram / np.linalg.norm(gram) - etf)


# -- tests ----------------------------------------------------------------------------------


def test_interpolate_accepts_a_vector_of_times():
    h0, h1 = _pair(1)
    ts = [0.0, 0.25, 1.0, 1.5]
    got = interpolate(h0, h1, ts)
    assert got.shape == (4, K * N_PER, D)
    for j, t in enumerate(ts):
        np.testing.assert_allclose(got[j].numpy(), (1 - t) * h0 + t * h1, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(got[j].numpy(), interpolate(h0, h1, t).numpy())
    as_tensor = interpolate(torch.tensor(h0), torch.tensor(h1), torch.tensor([0.5]))
    np.testing.assert_allclose(as_tensor[0].numpy(), 0.5 * (h0 + h1), atol=1e-15)
    # a 0-d array or tensor is a scalar time
    assert interpolate(h0, h1, np.float64(0.3)).shape == (K * N_PER, D)
    assert interpolate(h0, h1, torch.tensor(0.3)).shape == (K * N_PER, D)
    with pytest.raises(ValueError, match="ts contains NaN"):
        interpolate(h0, h1, [0.1, np.nan])
    with pytest.raises(TypeError, match="t must be a finite number"):
        interpolate(h0, h1, "0.5")
    with pytest.raises(ValueError, match="t must be a finite number"):
        interpolate(h0, h1, float("inf"))


@pytest.mark.parametrize("endpoint", ["empirical", "class_means"])
def test_dpfc1_matches_finite_differences_of_brute_force(endpoint):
    h0, h1 = _pair(2)
    y = _labels()
    end = h1 if endpoint == "empirical" else _means(h1, y)[y]
    ts = np.linspace(0.05, 0.95, 7)
    step = 1e-6
    fd = [
        (
            _pfc1((1 - t - step) * h0 + (t + step) * end, y)
            - _pfc1((1 - t + step) * h0 + (t - step) * end, y)
        )
        / (2 * step)
        for t in ts
    ]
    got = dpfc1_along_line(h0, h1, y, ts, endpoint=endpoint)
    np.testing.assert_allclose(got, fd, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:imbalanced classes")
def test_dpfc1_with_sample_weights_on_imbalanced_classes():
    rng = np.random.default_rng(3)
    y = np.array([0] * 9 + [1] * 4 + [2] * 6)
    h0 = rng.normal(size=(19, 3))
    h1 = 4.0 * np.eye(3)[y] + 0.3 * rng.normal(size=(19, 3))
    pi = np.bincount(y) / len(y)
    ts = np.array([0.1, 0.5, 0.9])
    step = 1e-6
    fd = [
        (
            _pfc1((1 - t - step) * h0 + (t + step) * h1, y, pi)
            - _pfc1((1 - t + step) * h0 + (t - step) * h1, y, pi)
        )
        / (2 * step)
        for t in ts
    ]
    np.testing.assert_allclose(dpfc1_along_line(h0, h1, y, ts, weighting="sample"), fd, rtol=1e-6)


def test_dpfc1_at_zero_has_the_sign_of_minus_s_for_a_collapsed_end():
    # Appendix A: dPFC1/dt(0) = -2 W0 S / (K B(0)^2) for a collapsed end point
    y = _labels()
    for seed in range(6):
        h0, h1 = _pair(10 + seed)
        h1 = h1 * (1 if seed % 2 else -1)  # flip the end so that S takes both signs
        s = theorem1_s(h0, h1, y)
        slope = dpfc1_along_line(h0, h1, y, [0.0], endpoint="class_means")[0]
        assert np.sign(slope) == -np.sign(s)
        end_slope = dpfc1_along_line(h0, h1, y, [1.0], endpoint="class_means")[0]
        assert abs(end_slope) < 1e-25


@pytest.mark.parametrize("endpoint", ["empirical", "class_means"])
def test_pfc2_along_line_matches_brute_force(endpoint):
    h0, h1 = _pair(4)
    y = _labels()
    end = h1 if endpoint == "empirical" else _means(h1, y)[y]
    ts = np.linspace(-0.3, 1.2, 11)
    got = pfc2_along_line(h0, h1, y, ts, endpoint=endpoint)
    np.testing.assert_allclose(got, [_pfc2((1 - t) * h0 + t * end, y) for t in ts], rtol=1e-12)
    # and the closed form PFC1 agrees with the brute force on the same grid
    np.testing.assert_allclose(
        pfc1_along_line(h0, h1, y, ts, endpoint=endpoint),
        [_pfc1((1 - t) * h0 + t * end, y) for t in ts],
        rtol=1e-11,
    )


def test_pfc2_along_line_is_nan_where_the_class_means_coincide():
    y = _labels()
    rng = np.random.default_rng(5)
    means = rng.normal(size=(K, D))
    h0 = means[y] + 0.1 * rng.normal(size=(len(y), D))
    h1 = 2 * h0.mean(axis=0) - h0  # class means reflected through the global mean
    curve = pfc2_along_line(h0, h1, y, [0.0, 0.5, 1.0])
    assert np.isnan(curve[1]) and np.isfinite(curve[[0, 2]]).all()
    with pytest.raises(ValueError, match="at least 2 classes"):
        pfc2_along_line(h0[:N_PER], h1[:N_PER], y[:N_PER], [0.5])
    with pytest.raises(ValueError, match="weighting must be"):
        dpfc1_along_line(h0, h1, y, [0.5], weighting="uniform")


@pytest.mark.filterwarnings("ignore:imbalanced classes")
@pytest.mark.parametrize("weighting", ["balanced", "sample"])
def test_pfc2_along_line_follows_the_weighting_of_nc2(weighting):
    rng = np.random.default_rng(6)
    y = np.array([0] * 7 + [1] * 3 + [2] * 5 + [3] * 4)
    h0 = rng.normal(size=(19, 5))
    h1 = 3.0 * np.eye(4, 5)[y] + 0.2 * rng.normal(size=(19, 5))
    ts = np.linspace(0, 1, 6)
    direct = geodesic_curve(h0, h1, y, ts, ["nc2_etf_distance"], weighting=weighting)
    got = pfc2_along_line(h0, h1, y, ts, weighting=weighting)
    np.testing.assert_allclose(got, direct["nc2_etf_distance"], rtol=1e-12, atol=1e-15)
