"""Optimal-transport diagnostics of a layer stack against brute force (permutations, LP)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.optimize import linprog

from collapselab.metrics.layerwise import ot_regulariser, straightness
from collapselab.theory.transport import (
    correspondence_cost,
    layer_transport,
    optimal_coupling,
    w2_squared,
)


def _brute_w2(a: np.ndarray, b: np.ndarray) -> tuple[float, tuple[int, ...]]:
    """min over all permutations of (1/N) Σ ||b_π(i) - a_i||^2 (Birkhoff: equal N)."""
    best, arg = np.inf, None
    for perm in itertools.permutations(range(len(a))):
        cost = np.mean(np.sum((b[list(perm)] - a) ** 2, axis=1))
        if cost < best:
            best, arg = cost, perm
    return best, arg


def _lp_w2(a: np.ndarray, b: np.ndarray) -> float:
    """The transport linear programme with uniform marginals, by scipy's HiGHS."""
    n, m = len(a), len(b)
    cost = np.array([[np.sum((a[i] - b[j]) ** 2) for j in range(m)] for i in range(n)])
    rows = np.kron(np.eye(n), np.ones(m))
    cols = np.kron(np.ones(n), np.eye(m))
    res = linprog(
        cost.ravel(),
        A_eq=np.vstack([rows, cols]),
        b_eq=np.concatenate([np.full(n, 1 / n), np.full(m, 1 / m)]),
        bounds=(0, None),
        method="highs",
    )
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize(("n", "d", "seed"), [(2, 1, 0), (5, 2, 1), (6, 3, 2), (7, 4, 3)])
def test_w2_matches_brute_force_over_permutations(n, d, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(n, d)), rng.normal(size=(n, d)) + 0.5
    best, perm = _brute_w2(a, b)
    assert w2_squared(a, b) == pytest.approx(best, rel=1e-12)
    plan = optimal_coupling(torch.tensor(a), b)
    # the optimal plan is the optimal permutation (unique for generic points), scaled by 1/N
    expected = np.zeros((n, n))
    expected[np.arange(n), list(perm)] = 1.0 / n
    np.testing.assert_allclose(plan, expected, atol=1e-15)


def test_w2_between_clouds_of_different_sizes_matches_the_linear_programme():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(5, 2)), rng.normal(size=(3, 2))
    assert w2_squared(a, b) == pytest.approx(_lp_w2(a, b), rel=1e-9)
    plan = optimal_coupling(a, b)
    np.testing.assert_allclose(plan.sum(axis=1), 1 / 5, atol=1e-15)
    np.testing.assert_allclose(plan.sum(axis=0), 1 / 3, atol=1e-15)


def test_translation_and_positive_scaling_keep_the_identity_coupling_optimal():
    rng = np.random.default_rng(5)
    a = rng.normal(size=(30, 4))
    shift = np.array([1.0, -2.0, 0.5, 3.0])
    b = a + shift
    assert w2_squared(a, b) == pytest.approx(np.sum(shift**2), rel=1e-12)
    assert correspondence_cost(a, b) == pytest.approx(np.sum(shift**2), rel=1e-12)
    c = 2.0 * a - 1.0  # the gradient of a convex function: cyclically monotone
    diag = layer_transport([a, b, c])
    np.testing.assert_array_equal(diag.ratio, [1.0, 1.0])
    np.testing.assert_allclose(diag.identity_mass, 1.0, atol=1e-12)


def test_a_shuffled_layer_has_zero_w2_but_a_costly_correspondence():
    rng = np.random.default_rng(6)
    a = rng.normal(size=(7, 2))
    perm = np.roll(np.arange(7), 1)
    diag = layer_transport([a, a[perm]])
    assert diag.w2_squared[0] == pytest.approx(0.0, abs=1e-14)
    assert diag.correspondence_cost[0] > 0.1
    assert diag.ratio[0] == np.inf
    assert diag.identity_mass[0] == 0.0
    # and identical layers: nothing moves, ratio 1 by convention
    still = layer_transport([a, a.copy()])
    assert still.ratio[0] == 1.0 and np.isnan(still.geodesic_efficiency)


def test_layer_transport_matches_brute_force_per_transition():
    rng = np.random.default_rng(7)
    layers = [rng.normal(size=(6, 3)) * (1 + 0.3 * k) + k for k in range(4)]
    diag = layer_transport(layers)
    for ell in range(3):
        best, _ = _brute_w2(layers[ell], layers[ell + 1])
        own = np.mean(np.sum((layers[ell + 1] - layers[ell]) ** 2, axis=1))
        assert diag.w2_squared[ell] == pytest.approx(best, rel=1e-12)
        assert diag.correspondence_cost[ell] == pytest.approx(own, rel=1e-12)
        assert diag.ratio[ell] == pytest.approx(own / best, rel=1e-12)
        assert diag.ratio[ell] >= 1.0
    assert diag.w2_squared_end_to_end == pytest.approx(_brute_w2(layers[0], layers[-1])[0])
    assert diag.kinetic_energy == pytest.approx(ot_regulariser(layers), rel=1e-13)
    np.testing.assert_allclose(diag.straightness, straightness(layers), rtol=1e-14)
    assert diag.mean_straightness == pytest.approx(np.mean(straightness(layers)))
    # Σ_l C_l >= Σ_l W2^2(l, l+1) >= W2^2(0, L)/L
    assert diag.kinetic_energy >= diag.w2_squared.sum() - 1e-12
    assert diag.w2_squared.sum() >= diag.w2_squared_end_to_end / 3 - 1e-12
    assert 0 < diag.geodesic_efficiency <= 1


def test_equally_spaced_straight_optimal_paths_are_geodesics():
    rng = np.random.default_rng(8)
    a = rng.normal(size=(20, 3))
    end = 1.5 * a + np.array([2.0, 0.0, -1.0])  # optimal map: gradient of a convex function
    even = [a + t * (end - a) for t in np.linspace(0, 1, 5)]
    diag = layer_transport(even)
    assert diag.geodesic_efficiency == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(diag.straightness, 1.0, atol=1e-12)
    np.testing.assert_array_equal(diag.ratio, 1.0)
    uneven = [a + t * (end - a) for t in (0.0, 0.1, 0.2, 0.7, 1.0)]
    assert layer_transport(uneven).geodesic_efficiency < 0.9


def test_subsample_uses_the_same_samples_in_every_layer():
    rng = np.random.default_rng(9)
    layers = [rng.normal(size=(40, 2)) for _ in range(3)]
    diag = layer_transport(layers, subsample=6, seed=3)
    assert diag.samples.shape == (6,) and np.all(np.diff(diag.samples) > 0)
    direct = layer_transport([h[diag.samples] for h in layers])
    np.testing.assert_allclose(diag.w2_squared, direct.w2_squared, rtol=1e-14)
    np.testing.assert_allclose(diag.correspondence_cost, direct.correspondence_cost, rtol=1e-14)
    again = layer_transport(layers, subsample=6, seed=3)
    np.testing.assert_array_equal(again.samples, diag.samples)


def test_transport_bad_inputs():
    a = np.zeros((4, 2))
    with pytest.raises(ValueError, match="a has dimension 2 but b has 3"):
        w2_squared(a, np.zeros((4, 3)))
    with pytest.raises(ValueError, match="expected the same samples"):
        correspondence_cost(a, np.zeros((3, 2)))
    with pytest.raises(TypeError, match="list or tuple"):
        layer_transport(np.zeros((2, 4, 2)))
    with pytest.raises(ValueError, match="at least 2 layers"):
        layer_transport([a])
    with pytest.raises(ValueError, match=r"layers\[1\] has shape"):
        layer_transport([a, np.zeros((5, 2))])
    bad = a.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"layers\[1\] contains NaN"):
        layer_transport([a, bad])
    with pytest.raises(ValueError, match="subsample must be"):
        layer_transport([a, a], subsample=5)
    with pytest.raises(TypeError, match="b must be"):
        w2_squared(a, [[0.0, 0.0]])
