"""Where the ReLUs of a deep UFM act (``preactivation_signs``) against loops in exact
arithmetic, and the facts the classification of ``dlufm-relu`` rests on: where no ReLU
truncates, the ReLU model's objective, gradient and layer-wise Hessian (a dense autograd
Hessian) equal the deep linear model's to float64 round-off; where no unit switches between
samples, its layer-wise Hessians equal those of the linear model with the dead units pruned."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from collapselab.theory.dlufm import DeepLinearUFM, DeepReLUUFM, UFMParameters
from collapselab.theory.dlufm_layerwise import (
    layer_hessian,
    preactivation_signs,
    rounding_bound,
)

ARGS = (3, 4, [5, 6, 4], [1e-3, 2e-3, 3e-3], 2e-3)  # K, n, widths (L = 3), λ_W, λ_H


def _columns(arrays):
    """The paper's column matrices (``(d, N)``) of the model's row arrays (``(N, d)``)."""
    return [a.T for a in arrays]


def _positive_point(seed: int) -> UFMParameters:
    """``H_1`` and ``W_1..W_{L−1}`` with positive entries (every pre-activation > 0), ``W_L``
    of either sign."""
    rng = np.random.default_rng(seed)
    model = DeepLinearUFM(*ARGS)
    dims = model.dims
    h = rng.uniform(0.1, 1.0, (dims[0], model.n_samples))
    weights = [rng.uniform(0.1, 1.0, (dims[i + 1], dims[i])) for i in range(len(dims) - 2)]
    weights.append(rng.standard_normal((dims[-1], dims[-2])))
    return UFMParameters(h, tuple(weights))


def _exact_signs(w: np.ndarray, h: np.ndarray) -> np.ndarray:
    """The signs of ``W h`` in exact rational arithmetic, entry by entry."""
    out = np.zeros((w.shape[0], h.shape[1]), dtype=np.int64)
    for a in range(w.shape[0]):
        for i in range(h.shape[1]):
            pairs = zip(w[a], h[:, i], strict=True)
            total = sum(Fraction(float(x)) * Fraction(float(y)) for x, y in pairs)
            out[a, i] = (total > 0) - (total < 0)
    return out


def test_rounding_bound_is_highams_gamma():
    u = 2.0**-53
    assert rounding_bound(1) == u / (1 - u)
    assert rounding_bound(30) == pytest.approx(30 * u, rel=1e-14)
    with pytest.raises(ValueError, match="n_terms"):
        rounding_bound(0)


def test_signs_on_an_exact_fixture():
    """Integer weights and features: every pre-activation is exact, counted by hand."""
    model = DeepReLUUFM(2, 2, [2, 3], [1e-3, 1e-3], 1e-3)  # N = 4, one ReLU (after W_1)
    h = np.array([[1.0, 2.0, 0.0, 1.0], [1.0, -1.0, 3.0, 0.0]])
    w1 = np.array([[1.0, 1.0], [-1.0, 0.0], [1.0, -1.0]])
    w2 = np.ones((2, 3))
    signs = preactivation_signs(model, (h, [w1, w2]))
    # z = W_1 H = [[2, 1, 3, 1], [-1, -2, 0, -1], [0, 3, -3, 1]]: unit 0 positive on every
    # sample, unit 1 on none (dead), unit 2 on two (mixed; its 0 is not positive): 6 of 12
    assert signs.layers.tolist() == [1]
    assert signs.nonpositive_fraction.tolist() == [0.5]
    assert signs.dead_units.tolist() == [1] and signs.mixed_units.tolist() == [1]
    assert signs.min_margin[0] == -3.0 / 3.0  # z = −3 against |W||h| = 3
    assert not signs.locally_linear


def test_signs_equal_exact_rational_signs_on_random_points():
    """On random points the non-positive fraction and the dead/mixed units equal those of
    the signs computed in exact rational arithmetic (no entry lies within the rounding
    bound of zero here)."""
    model = DeepReLUUFM(*ARGS)
    for seed in range(3):
        point = model.random_point(seed=seed)
        signs = preactivation_signs(model, point)
        feats = _columns(model.features(point))
        for j in range(1, model.n_layers):
            exact = _exact_signs(point.W[j - 1], feats[j - 1])
            nonpositive = exact <= 0
            assert signs.nonpositive_fraction[j - 1] == pytest.approx(nonpositive.mean(), abs=0)
            per_unit = nonpositive.sum(axis=1)
            assert signs.dead_units[j - 1] == np.sum(per_unit == exact.shape[1])
            assert signs.mixed_units[j - 1] == np.sum((per_unit > 0) & (per_unit < exact.shape[1]))


def test_an_entry_within_the_rounding_bound_is_not_counted_positive():
    """``z`` whose exact value is a tiny positive number from cancelling terms lies within
    ``γ_m |W||h|`` of 0 (float64 may even round it to 0): its sign is not certified, so it
    counts as non-positive."""
    model = DeepReLUUFM(2, 1, [3, 2], [1e-3, 1e-3], 1e-3)  # K = 2, N = 2
    h = np.array([[1.0, 1.0], [1e-17, 1.0], [-1.0, 1.0]])
    w1 = np.ones((2, 3))  # z = [[1e-17, 3], [1e-17, 3]] exactly, scale [[2, 3], [2, 3]]
    signs = preactivation_signs(model, (h, [w1, np.ones((2, 2))]))
    assert _exact_signs(w1, h).tolist() == [[1, 1], [1, 1]]
    assert signs.nonpositive_fraction.tolist() == [0.5]
    assert signs.dead_units.tolist() == [0] and signs.mixed_units.tolist() == [2]
    assert 0 <= signs.min_margin[0] < rounding_bound(3)


def test_relu_on_features_reads_h1_first_and_biases_enter_the_scale():
    model = DeepReLUUFM(3, 4, [5, 6, 4], 1e-3, 1e-3, relu_on_features=True, bias=True)
    point = model.random_point(seed=4)
    point = UFMParameters(point.H, point.W, tuple(np.full(b.shape, 0.5) for b in point.b))
    signs = preactivation_signs(model, point)
    assert signs.layers.tolist() == [0, 1, 2]
    assert signs.nonpositive_fraction[0] == np.mean(point.H <= 0)
    feats = _columns(model.features(point))
    z = point.W[0] @ feats[0] + 0.5
    scale = np.abs(point.W[0]) @ np.abs(feats[0]) + 0.5
    assert signs.min_margin[1] == pytest.approx(np.min(z / scale), rel=1e-14)
    assert signs.nonpositive_fraction[1] == np.mean(z <= rounding_bound(6) * scale)


@pytest.mark.parametrize("seed", [0, 1])
def test_without_truncation_the_relu_model_is_the_linear_model(seed):
    """All pre-activations strictly positive: the ReLU model's objective, gradient and every
    layer-wise Hessian (dense autograd) equal the linear model's (Kronecker formula, App.
    A) to float64 round-off."""
    relu, linear = DeepReLUUFM(*ARGS), DeepLinearUFM(*ARGS)
    point = _positive_point(seed)
    signs = preactivation_signs(relu, point)
    assert signs.locally_linear and np.all(signs.min_margin > 0.05)
    assert relu.objective(point) == pytest.approx(linear.objective(point), rel=1e-15)
    g_relu, g_lin = relu.gradient(point).flat(), linear.gradient(point).flat()
    assert np.max(np.abs(g_relu - g_lin)) <= 1e-14 * np.max(np.abs(g_lin))
    for layer in range(1, relu.n_layers + 1):
        dense = layer_hessian(relu, point, layer, method="autodiff")
        kron = layer_hessian(linear, point, layer, method="kronecker")
        assert np.max(np.abs(dense - kron)) <= 1e-13 * np.max(np.abs(kron)), layer


def test_where_a_relu_truncates_the_hessians_differ():
    """The converse check that the test above can fail: one pre-activation of W_2 made
    negative changes the layer-3 Hessian of the ReLU model and not the linear one's form."""
    relu, linear = DeepReLUUFM(*ARGS), DeepLinearUFM(*ARGS)
    point = _positive_point(0)
    w2 = point.W[1].copy()
    w2[0] = -w2[0]  # unit 0 after W_2 is now negative on every sample
    point = UFMParameters(point.H, (point.W[0], w2, point.W[2]))
    signs = preactivation_signs(relu, point)
    assert not signs.locally_linear and signs.dead_units.tolist() == [0, 1]
    assert math.isclose(signs.nonpositive_fraction[1], 1 / 4)  # 1 of W_2's 4 units
    dense = layer_hessian(relu, point, 3, method="autodiff")
    kron = layer_hessian(linear, point, 3, method="kronecker")
    assert np.max(np.abs(dense - kron)) > 1e-3 * np.max(np.abs(kron))


def test_with_sample_independent_masks_the_relu_model_is_the_pruned_linear_model():
    """A unit off for every sample (dead) and none mixed: every ``A_i`` is the same, and each
    layer-wise Hessian of the ReLU model (dense autograd) is the linear model's Kronecker
    Hessian at the point with the dead unit pruned (its row of ``W_2`` and its column of
    ``W_3`` zeroed), to float64 round-off. This is what ``dlufm-relu``'s split into
    sample-independent masks and ReLU-active runs rests on."""
    relu, linear = DeepReLUUFM(*ARGS), DeepLinearUFM(*ARGS)
    point = _positive_point(1)
    w2, w3 = point.W[1].copy(), point.W[2].copy()
    w2[0] = -w2[0]  # unit 0 after W_2 negative on every sample
    point = UFMParameters(point.H, (point.W[0], w2, w3))
    signs = preactivation_signs(relu, point)
    assert signs.dead_units.tolist() == [0, 1] and signs.mixed_units.tolist() == [0, 0]
    w2_pruned, w3_pruned = w2.copy(), w3.copy()
    w2_pruned[0], w3_pruned[:, 0] = 0.0, 0.0
    pruned = UFMParameters(point.H, (point.W[0], w2_pruned, w3_pruned))
    for layer in range(1, relu.n_layers + 1):
        dense = layer_hessian(relu, point, layer, method="autodiff")
        kron = layer_hessian(linear, pruned, layer, method="kronecker")
        assert np.max(np.abs(dense - kron)) <= 1e-13 * np.max(np.abs(kron)), layer
