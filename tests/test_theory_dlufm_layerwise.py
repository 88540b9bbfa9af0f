"""Layer-wise matrices of paper 004's deep UFM against independent references: the Hessian
three ways and by finite differences of the gradient, Papyan's decomposition from its
definition by loops, per-sample gradients by autograd, App. E matrices by loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from collapselab.theory.dlufm import (
    DeepLinearUFM,
    DeepReLUUFM,
    UFMParameters,
    closed_form,
    exact_optimum,
)
from collapselab.theory.dlufm_layerwise import (
    count_outliers,
    descending_eigh,
    dnc_metrics,
    eigenvector_alignment,
    extended_error_moment,
    feature_gram,
    gradient_coefficients,
    gradient_covariance,
    gram_tables,
    layer_data,
    layer_gradient,
    layer_hessian,
    layer_hessian_operator,
    layer_hessian_top,
    papyan_decomposition,
    predicted_eigenvectors,
    subspace_overlap,
    top_fraction,
    true_eigenvector_coefficients,
    weight_spectra,
)

LINEAR = [
    DeepLinearUFM(3, 4, [5, 6, 4], [1e-3, 2e-3, 3e-3], 2e-3),
    DeepLinearUFM(4, 3, [4, 5], [2e-3, 1e-3], 1e-3, loss_scale="1/N"),
    DeepLinearUFM(2, 3, 3, 1e-2, 1e-2, n_layers=1),
]
RELU = [
    DeepReLUUFM(3, 4, [5, 6, 4], [1e-3, 2e-3, 3e-3], 2e-3),
    DeepReLUUFM(4, 3, 5, 2e-3, 1e-3, n_layers=4, relu_on_features=True, loss_scale="1/(2n)"),
]


def _layers(model):
    return range(1, model.n_layers + 1)


def _row_to_column(matrix, d_out, d_in):
    """Reorder a row-major (vec_row W) matrix to column-major (vec_col W) indices."""
    perm = np.arange(d_out * d_in).reshape(d_out, d_in).T.ravel()
    return matrix[np.ix_(perm, perm)]


@pytest.mark.parametrize("model", LINEAR, ids=repr)
def test_hessian_three_ways_agree_to_1e_10_on_the_linear_model(model):
    point = model.random_point(seed=1)
    for layer in _layers(model):
        for order in ("row", "column"):
            for reg in (False, True):
                hs = [
                    layer_hessian(model, point, layer, method=m, order=order, regularised=reg)
                    for m in ("kronecker", "data", "autodiff")
                ]
                scale = np.abs(hs[0]).max()
                assert np.abs(hs[1] - hs[0]).max() <= 1e-10 * scale
                assert np.abs(hs[2] - hs[0]).max() <= 1e-10 * scale


@pytest.mark.parametrize("model", RELU, ids=repr)
def test_relu_data_dependent_hessian_equals_autodiff(model):
    point = model.random_point(seed=2)
    for layer in _layers(model):
        for order in ("row", "column"):
            data = layer_hessian(model, point, layer, method="data", order=order)
            auto = layer_hessian(model, point, layer, method="autodiff", order=order)
            assert np.abs(data - auto).max() <= 1e-10 * np.abs(data).max()
    with pytest.raises(ValueError, match="linear model only"):
        layer_hessian(model, point, 1, method="kronecker")


@pytest.mark.parametrize("model", LINEAR[:2] + RELU, ids=repr)
def test_hessian_vector_products_and_lanczos_equal_the_autodiff_hessian(model):
    """The matrix-free operator applied to I equals the autodiff Hessian; Lanczos top-5
    equals numpy's eigh of it (both orders, with and without λI)."""
    point = model.random_point(seed=3)
    for layer in _layers(model):
        for order in ("row", "column"):
            for reg in (False, True):
                options = {"order": order, "regularised": reg}
                dense = layer_hessian(model, point, layer, method="autodiff", **options)
                operator = layer_hessian_operator(model, point, layer, **options)
                scale = np.abs(dense).max()
                assert np.abs(operator @ np.eye(dense.shape[0]) - dense).max() <= 1e-12 * scale
                values, vectors = layer_hessian_top(model, point, layer, 5, **options)
                reference = descending_eigh(dense)[0][:5]
                assert np.abs(values - reference).max() <= 1e-10 * scale
                residual = dense @ vectors - vectors * values
                assert np.abs(residual).max() <= 1e-8 * scale


def test_lanczos_at_a_large_width_finds_the_k_squared_closed_form_outliers():
    """d = 120 (P = 14,400 at layer 3, never formed densely): at the exact optimum the top
    K² = 9 eigenvalues equal Theorem 4.1's λ_out(3) and the next is 0 (rank K²)."""
    model = DeepLinearUFM(3, 10, 120, 5e-3, 5e-3, n_layers=4)
    values, _ = layer_hessian_top(model, exact_optimum(model, seed=0), 3, 10)
    predicted = closed_form(model).hessian_outlier[2]
    assert np.abs(values[:9] - predicted).max() <= 1e-10 * predicted
    assert abs(values[9]) <= 1e-12 * predicted
    with pytest.raises(ValueError, match="k"):
        layer_hessian_top(model, exact_optimum(model), 3, 14_400)


@pytest.mark.parametrize("model", [LINEAR[0], RELU[0]], ids=repr)
def test_hessian_is_the_finite_difference_of_the_gradient_and_orders_permute(model):
    point = model.random_point(seed=3)
    layer = 2
    w = point.W[layer - 1]
    eps = 1e-6
    d_out, d_in = w.shape
    fd = np.zeros((w.size, w.size))
    for j in range(w.size):
        e = np.zeros(w.size)
        e[j] = eps
        grads = []
        for sign in (1, -1):
            weights = list(point.W)
            weights[layer - 1] = w + sign * e.reshape(w.shape)
            g = model.gradient(UFMParameters(point.H, tuple(weights))).W[layer - 1]
            grads.append(g.ravel() - model.lambda_w[layer - 1] * weights[layer - 1].ravel())
        fd[:, j] = (grads[0] - grads[1]) / (2 * eps)
    row = layer_hessian(model, point, layer, method="data")
    assert np.abs(fd - row).max() <= 1e-6 * np.abs(row).max()
    column = layer_hessian(model, point, layer, method="data", order="column")
    assert np.array_equal(_row_to_column(row, d_out, d_in), column)
    reg = layer_hessian(model, point, layer, regularised=True)
    assert np.allclose(reg - row, model.lambda_w[layer - 1] * np.eye(w.size), rtol=0, atol=1e-15)


def _papyan_by_loops(model, point, layer, centring):
    """Papyan's decomposition from its definition, with explicit loops (note §3.9)."""
    data = layer_data(model, point, layer)
    k, n, kappa = model.n_classes, model.n_per_class, model.kappa
    delta = {}
    for kk in range(k):
        for i in range(n):
            s = kk * n + i
            for c in range(k):
                delta[c, kk, i] = np.kron(data.back[s, c], data.h[:, s])
    dck = {(c, kk): sum(delta[c, kk, i] for i in range(n)) / n for c in range(k) for kk in range(k)}
    P = data.dim
    G = sum(np.outer(v, v) for v in delta.values()) * kappa / model.n_samples
    within = (
        sum(
            np.outer(delta[c, kk, i] - dck[c, kk], delta[c, kk, i] - dck[c, kk])
            for (c, kk, i) in delta
        )
        * kappa
        / model.n_samples
    )
    if centring == "logit":
        centre = {kk: sum(dck[c, kk] for c in range(k)) / k for kk in range(k)}
        cross = (
            sum(
                np.outer(dck[c, kk] - centre[kk], dck[c, kk] - centre[kk])
                for c in range(k)
                for kk in range(k)
            )
            * kappa
            / k
        )
    else:
        centre = {c: sum(dck[c, kk] for kk in range(k)) / k for c in range(k)}
        cross = (
            sum(
                np.outer(dck[c, kk] - centre[c], dck[c, kk] - centre[c])
                for c in range(k)
                for kk in range(k)
            )
            * kappa
            / k
        )
    klass = sum(np.outer(v, v) for v in centre.values()) * kappa
    assert G.shape == (P, P)
    return G, klass, cross, within


@pytest.mark.parametrize("model", [LINEAR[0], LINEAR[1], RELU[1]], ids=repr)
@pytest.mark.parametrize("centring", ["logit", "class"])
def test_papyan_decomposition_matches_its_definition_and_sums_to_the_hessian(model, centring):
    point = model.random_point(seed=4)
    layer = model.n_layers - 1 if model.n_layers > 1 else 1
    dec = papyan_decomposition(model, point, layer, centring=centring)
    G, klass, cross, within = _papyan_by_loops(model, point, layer, centring)
    for got, ref in (
        (dec.G, G),
        (dec.G_class, klass),
        (dec.G_cross, cross),
        (dec.G_within, within),
    ):
        assert np.allclose(got, ref, rtol=1e-12, atol=1e-14 * np.abs(G).max())
    assert np.allclose(
        dec.G_class + dec.G_cross + dec.G_within, dec.G, atol=1e-14 * np.abs(G).max()
    )
    hess = layer_hessian(model, point, layer, method="autodiff")  # H̃ = 0: H equals G
    assert np.abs(dec.G - hess).max() <= 1e-10 * np.abs(hess).max()


def test_papyan_at_the_optimum_knockouts_and_orthogonal_images():
    model = DeepLinearUFM(4, 3, [5, 6, 5], [2e-3, 3e-3, 1e-3], 2e-3)
    point = exact_optimum(model, seed=2)
    for centring in ("logit", "class"):
        dec = papyan_decomposition(model, point, 2, centring=centring)
        ranks = dec.ranks()
        assert ranks == {
            "G": 16,
            "class": 4,
            "without_class": 12,
            "cross": 12,
            "without_cross": 4,
            "within": 0,
            "without_within": 16,
        }
        assert dec.image_overlap() < 1e-14
        spectra = dec.knockout_spectra()
        assert count_outliers(spectra["none"]) == 16
        assert count_outliers(spectra["class"]) == 12 and count_outliers(spectra["cross"]) == 4
        assert np.allclose(spectra["within"], spectra["none"], atol=1e-15)


@pytest.mark.parametrize("model", [LINEAR[0], RELU[0], RELU[1]], ids=repr)
def test_layer_gradient_is_the_data_part_of_the_gradient_and_the_per_sample_mean(model):
    point = model.random_point(seed=5)
    full = model.gradient(point)
    for layer in _layers(model):
        for order in ("row", "column"):
            g = layer_gradient(model, point, layer, order=order)
            ref = full.W[layer - 1] - model.lambda_w[layer - 1] * point.W[layer - 1]
            ref = ref.ravel() if order == "row" else ref.T.ravel()
            assert np.allclose(g, ref, rtol=1e-11, atol=1e-14)
            per = layer_gradient(model, point, layer, order=order, per_sample=True)
            assert np.allclose(per.mean(axis=0), g, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("model", [LINEAR[1], RELU[0]], ids=repr)
def test_per_sample_gradients_and_their_covariance_by_autograd(model):
    point = model.random_point(seed=6)
    layer = 2
    module = model.as_module(point)
    eye = torch.eye(model.n_samples, dtype=torch.float64)
    targets = torch.tensor(model.targets.T)
    rows = []
    for i in range(model.n_samples):
        module.zero_grad()
        out = module(eye[i : i + 1])
        loss = 0.5 * model.kappa * ((out - targets[i]) ** 2).sum()  # ℓ_i = (κ/2)‖f − y‖²
        loss.backward()
        rows.append(module.layers[layer].weight.grad.reshape(-1).numpy().copy())
    rows = np.asarray(rows)
    per = layer_gradient(model, point, layer, per_sample=True)
    assert np.allclose(per, rows, rtol=1e-11, atol=1e-14)
    centred = rows - rows.mean(axis=0)
    assert np.allclose(
        gradient_covariance(model, point, layer),
        centred.T @ centred / len(rows),
        rtol=1e-10,
        atol=1e-16,
    )
    assert np.allclose(
        gradient_covariance(model, point, layer, centred=False),
        rows.T @ rows / len(rows),
        rtol=1e-10,
        atol=1e-16,
    )


@pytest.mark.parametrize("model", [LINEAR[0], RELU[0]], ids=repr)
def test_extended_errors_gram_tables_and_features_by_loops(model):
    point = model.random_point(seed=7)
    feats = model.features(point)
    masks = model.masks(point)
    k, N = model.n_classes, model.n_samples
    for layer in _layers(model):
        # A_i by explicit products, sample by sample
        def back(s, layer=layer):
            a = np.eye(k)
            for j in range(model.n_layers, layer, -1):
                a = a @ point.W[j - 1] * masks[j - 2][:, s][None, :]
            return a

        E = np.zeros((point.W[layer - 1].shape[0],) * 2)
        table4 = np.zeros((k, k))
        for s in range(N):
            a = back(s)
            for c in range(k):
                e = a.T @ (feats[-1][:, s] - np.eye(k)[c])
                E += np.outer(e, e) / N
            b = a @ point.W[layer - 1]
            table4 += b @ b.T / N
        assert np.allclose(extended_error_moment(model, point, layer), E, rtol=1e-12)
        prod = np.eye(k)
        for w in reversed(point.W[layer - 1 :]):
            prod = prod @ w
        t3, t4 = gram_tables(model, point, layer)
        assert np.allclose(t3, prod @ prod.T, rtol=1e-12) and np.allclose(t4, table4, rtol=1e-12)
        if model.activation == "identity":
            assert np.allclose(t3, t4, rtol=1e-12)
    for layer in range(1, model.n_layers + 2):
        assert np.allclose(feature_gram(model, point, layer), feats[layer - 1] @ feats[layer - 1].T)
    for w, spectrum in zip(point.W, weight_spectra(point), strict=True):
        sv = np.linalg.svd(w, compute_uv=False) ** 2  # descending, min(d_out, d_in) of them
        padded = np.r_[sv, np.zeros(w.shape[0] - sv.size)]
        assert spectrum.shape == (w.shape[0],)
        assert np.allclose(spectrum, padded, rtol=1e-12, atol=1e-14 * sv[0])


def test_predicted_eigenvectors_alignment_coefficients_and_f_top():
    model = DeepLinearUFM(3, 4, [5, 6, 4], [1e-3, 2e-3, 3e-3], 2e-3)
    point = exact_optimum(model, seed=1)
    layer = 2
    hess = layer_hessian(model, point, layer)
    V = predicted_eigenvectors(model, point, layer)
    means, means_next = layer_data(model, point, layer).class_means()
    assert np.allclose(V[1 * 3 + 2], np.kron(means_next[:, 1], means[:, 2]))
    Vc = predicted_eigenvectors(model, point, layer, order="column")
    assert np.allclose(Vc[1 * 3 + 2], np.kron(means[:, 2], means_next[:, 1]))
    assert np.allclose(eigenvector_alignment(hess, V), 1.0, atol=1e-13)
    g = layer_gradient(model, point, layer)
    cos = gradient_coefficients(g, V).reshape(3, 3)
    assert np.allclose(np.diag(cos), -1 / math.sqrt(3), atol=1e-12)
    assert np.abs(cos - np.diag(np.diag(cos))).max() < 1e-12
    raw = gradient_coefficients(g, V, normalise="raw")
    assert raw[0] == pytest.approx(float(g @ V[0]) / np.linalg.norm(V[0]))
    assert top_fraction(hess, g, 9) == pytest.approx(1.0, abs=1e-12)
    coeffs = true_eigenvector_coefficients(hess, g, 9)
    assert float(np.sum(coeffs**2)) == pytest.approx(1.0, abs=1e-12)
    # a random vector is not an eigenvector; a vector orthogonal to the top space has f_top 0
    rng = np.random.default_rng(0)
    assert eigenvector_alignment(hess, rng.standard_normal((1, hess.shape[0])))[0] < 0.9
    top = descending_eigh(hess)[1][:, :9]
    x = rng.standard_normal(hess.shape[0])
    x -= top @ (top.T @ x)
    assert top_fraction(hess, x, 9) == pytest.approx(0.0, abs=1e-12)
    q, _ = np.linalg.qr(rng.standard_normal((9, 9)))
    assert subspace_overlap(top, top @ q) == pytest.approx(1.0, abs=1e-12)
    assert subspace_overlap(top[:, :4], np.linalg.qr(x[:, None])[0].repeat(4, 1)) < 1e-12


def test_count_outliers():
    assert count_outliers(np.r_[np.full(9, 0.2), np.zeros(91)]) == 9
    assert count_outliers(np.r_[np.full(9, 0.2), 1e-17 * np.ones(91)]) == 9
    assert count_outliers(np.r_[[3, 2.5, 2, 1], 1e-3 * np.ones(20)]) == 4
    assert count_outliers(np.r_[[3, 2.5], [1e-3, 1e-3]], rule="threshold", rtol=1e-2) == 2
    assert count_outliers(np.zeros(5)) == 0
    assert count_outliers(np.ones(5)) == 5


def test_dnc_metrics_at_the_optimum_and_away_from_it():
    model = DeepLinearUFM(3, 4, [5, 6, 4], [1e-3, 2e-3, 3e-3], 2e-3)
    dnc = dnc_metrics(model, exact_optimum(model, seed=0))
    assert np.all(dnc["dnc1"] < 1e-25) and np.all(dnc["orthogonal_frame"] < 1e-13)
    assert np.all(dnc["dnc3"][:-1] < 1e-13) and math.isnan(dnc["dnc3"][-1])
    assert np.all(dnc["etf_distance"] < 1e-13)
    point = model.random_point(seed=0)
    away = dnc_metrics(model, point)
    assert np.all(away["dnc1"] > 1e-2) and np.all(away["dnc3"][:-1] > 1e-2)
    # the ETF distance by its definition, on the centred class means of every layer
    for i, h in enumerate(model.features(point)):
        means = h.reshape(-1, 3, 4).mean(axis=2)
        centred = means - means.mean(axis=1, keepdims=True)
        gram = centred.T @ centred
        etf = (np.eye(3) - 1 / 3) / math.sqrt(2)
        expected = np.linalg.norm(gram / np.linalg.norm(gram) - etf)
        assert away["etf_distance"][i] == pytest.approx(expected, rel=1e-10)
    # the zero point: undefined metrics are NaN, not errors
    zero = dnc_metrics(model, model.random_point(seed=0).scaled(0.0))
    assert np.all(np.isnan(zero["dnc1"])) and np.all(zero["mean_norm_sq"] == 0)
