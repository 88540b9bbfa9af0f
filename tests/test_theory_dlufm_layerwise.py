"""Layer-wise matrices of paper 004's deep UFM against independent references: the Hessian
three ways and by finite differences of the gradient, Papyan's decomposition from its
definition by loops, per-sample gradients by autograd, App. E matrices by loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from collapselab.curvature import (
    DenseOperator,
    count_outliers,
    eigenvector_alignment,
    gradient_coefficients,
    kron_pairs,
    subspace_overlap,
    top_eigenpairs,
    top_fraction,
)
from collapselab.theory.dlufm import (
    DeepLinearUFM,
    DeepReLUUFM,
    UFMParameters,
    closed_form,
    exact_optimum,
)
from collapselab.theory.dlufm_layerwise import (
    dnc_metrics,
    extended_error_moment,
    feature_gram,
    gauss_newton_split,
    gradient_covariance,
    gram_tables,
    layer_data,
    layer_gradient,
    layer_hessian,
    layer_hessian_operator,
    layer_hessian_top,
    layer_papyan_decomposition,
    predicted_eigenvectors,
    weight_product,
    weight_spectra,
)


def _eigh(matrix):
    """``(values, vectors)``, descending: the exact eigenpairs of a dense operator."""
    return tuple(t.numpy() for t in DenseOperator(matrix).eigenpairs())


def _dense(op):
    return op.dense().numpy()


LINEAR = [
    DeepLinearUFM(3, 4, [5, 6, 4], [1e-3, 2e-3, 3e-3], 2e-3),
    DeepLinearUFM(4, 3, [4, 5], [2e-3, 1e-3], 1e-3, loss_scale="1/N"),
    DeepLinearUFM(2, 3, 3, 1e-2, 1e-2, n_layers=1),
]
RELU = [
    DeepReLUUFM(3, 4, [5, 6, 4], [1e-3, 2e-3, 3e-3], 2e-3),
    DeepReLUUFM(4, 3, 5, 2e-3, 1e-3, n_layers=4, relu_on_features=True, loss_scale="1/(2n)"),
]


def _columns(arrays):
    """The paper's column matrices (``(d, N)``) of the model's row arrays (``(N, d)``)."""
    return [a.T for a in arrays]


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
                assert np.abs(_dense(operator) - dense).max() <= 1e-12 * scale
                values, vectors = layer_hessian_top(model, point, layer, 5, **options)
                reference = _eigh(dense)[0][:5]
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
                delta[c, kk, i] = np.kron(data.back[s, c], data.h[s])
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
    dec = layer_papyan_decomposition(model, point, layer, centring=centring)
    G, klass, cross, within = _papyan_by_loops(model, point, layer, centring)
    G_, class_, cross_, within_ = (
        _dense(op) for op in (dec.ggn, dec.class_part, dec.cross_part, dec.within_part)
    )
    for got, ref in (
        (G_, G),
        (class_, klass),
        (cross_, cross),
        (within_, within),
    ):
        assert np.allclose(got, ref, rtol=1e-12, atol=1e-14 * np.abs(G).max())
    assert np.allclose(class_ + cross_ + within_, G_, atol=1e-14 * np.abs(G).max())
    hess = layer_hessian(model, point, layer, method="autodiff")  # H̃ = 0: H equals G
    assert np.abs(G_ - hess).max() <= 1e-10 * np.abs(hess).max()


def test_papyan_at_the_optimum_knockouts_and_orthogonal_images():
    # layer 2 is 8 x 6: P = 48 entries hold the K² = 16 outliers and a bulk at least as
    # large, as the outlier rule needs (it read 16 of 30 at widths [5, 6, 5])
    model = DeepLinearUFM(4, 3, [5, 6, 8], [2e-3, 3e-3, 1e-3], 2e-3)
    point = exact_optimum(model, seed=2)
    for centring in ("logit", "class"):
        dec = layer_papyan_decomposition(model, point, 2, centring=centring)
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
        spectra = {part: v.numpy() for part, v in dec.knockout_spectra().items()}
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
    targets = torch.tensor(model.targets)
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
    feats = _columns(model.features(point))
    masks = _columns(model.masks(point))
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
    means, means_next = _columns(layer_data(model, point, layer).class_means())
    assert np.allclose(V[1 * 3 + 2], np.kron(means_next[:, 1], means[:, 2]))
    Vc = predicted_eigenvectors(model, point, layer, order="column")
    assert np.allclose(Vc[1 * 3 + 2], np.kron(means[:, 2], means_next[:, 1]))
    H = DenseOperator(hess)
    assert np.allclose(eigenvector_alignment(H, V.T).numpy(), 1.0, atol=1e-13)
    g = layer_gradient(model, point, layer)
    cos = gradient_coefficients(g, V.T).numpy().reshape(3, 3)
    assert np.allclose(np.diag(cos), -1 / math.sqrt(3), atol=1e-12)
    assert np.abs(cos - np.diag(np.diag(cos))).max() < 1e-12
    raw = gradient_coefficients(g, V.T, normalise="raw").numpy()
    assert raw[0] == pytest.approx(float(g @ V[0]) / np.linalg.norm(V[0]))
    top = _eigh(hess)[1][:, :9]
    assert top_fraction(g, top) == pytest.approx(1.0, abs=1e-12)
    coeffs = gradient_coefficients(g, top).numpy()
    assert float(np.sum(coeffs**2)) == pytest.approx(1.0, abs=1e-12)
    # a random vector is not an eigenvector; a vector orthogonal to the top space has f_top 0
    rng = np.random.default_rng(0)
    assert eigenvector_alignment(H, rng.standard_normal((hess.shape[0], 1)))[0] < 0.9
    x = rng.standard_normal(hess.shape[0])
    x -= top @ (top.T @ x)
    assert top_fraction(x, top) == pytest.approx(0.0, abs=1e-12)
    q, _ = np.linalg.qr(rng.standard_normal((9, 9)))
    assert subspace_overlap(top, top @ q) == pytest.approx(1.0, abs=1e-12)
    assert subspace_overlap(top[:, :4], np.linalg.qr(x[:, None])[0].repeat(4, 1)) < 1e-12


def test_count_outliers():
    assert count_outliers(np.r_[np.full(9, 0.2), np.zeros(91)]) == 9
    assert count_outliers(np.r_[np.full(9, 0.2), 1e-17 * np.ones(91)]) == 9
    assert count_outliers(np.r_[[3, 2.5, 2, 1], 1e-3 * np.ones(20)]) == 4
    assert count_outliers(np.r_[[3, 2.5], [1e-3, 1e-3]], "threshold", threshold=1e-2) == 2
    assert count_outliers(np.zeros(5)) == 0
    # a flat spectrum has no outliers: the one rule of curvature (this suite expected 5,
    # curvature's own expected 0 for [1, 1, 1]; the two old rules disagreed)
    assert count_outliers(np.ones(5)) == 0


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
    for i, h in enumerate(_columns(model.features(point))):
        means = h.reshape(-1, 3, 4).mean(axis=2)
        centred = means - means.mean(axis=1, keepdims=True)
        gram = centred.T @ centred
        etf = (np.eye(3) - 1 / 3) / math.sqrt(2)
        expected = np.linalg.norm(gram / np.linalg.norm(gram) - etf)
        assert away["etf_distance"][i] == pytest.approx(expected, rel=1e-10)
    # the zero point: undefined metrics are NaN, not errors
    zero = dnc_metrics(model, model.random_point(seed=0).scaled(0.0))
    assert np.all(np.isnan(zero["dnc1"])) and np.all(zero["mean_norm_sq"] == 0)


def _back_by_products(model, point, layer, s):
    """``A_s = W_L D_{L−1,s} ⋯ W_{l+1} D_{l,s}`` by explicit products (masks from the model)."""
    masks = _columns(model.masks(point))
    a = np.eye(model.n_classes)
    for j in range(model.n_layers, layer, -1):
        a = a @ point.W[j - 1] * masks[j - 2][:, s][None, :]
    return a


def _gauss_newton_by_loops(model, point, layer, order):
    """``(κ/N) Σ_i J_iᵀJ_i`` with ``J_i[c, (a, b)] = A_i[c, a] h_i[b]`` entry by entry."""
    h = _columns(model.features(point))[layer - 1]
    d_out, d_in = point.W[layer - 1].shape
    k, P = model.n_classes, d_out * d_in
    G = np.zeros((P, P))
    for s in range(model.n_samples):
        a = _back_by_products(model, point, layer, s)
        J = np.zeros((k, P))
        for c in range(k):
            for r in range(d_out):
                for q in range(d_in):
                    J[c, r * d_in + q if order == "row" else q * d_out + r] = a[c, r] * h[q, s]
        G += J.T @ J
    return model.kappa / model.n_samples * G


@pytest.mark.parametrize("model", LINEAR + RELU, ids=repr)
def test_gauss_newton_split_has_no_second_order_term_and_g_is_the_sum_of_jtj(model):
    """H̃ = H_autodiff − G vanishes to 1e-12 of G (f is linear in W_l, or piece-wise
    linear), and G equals (κ/N) Σ_i J_iᵀJ_i with the Jacobians built entry by entry."""
    point = model.random_point(seed=8)
    for layer in _layers(model):
        for order in ("row", "column"):
            G, H_tilde = gauss_newton_split(model, point, layer, order=order)
            reference = _gauss_newton_by_loops(model, point, layer, order)
            scale = np.abs(reference).max()
            assert np.abs(G - reference).max() <= 1e-13 * scale
            assert np.abs(H_tilde).max() <= 1e-12 * scale
            auto = layer_hessian(model, point, layer, method="autodiff", order=order)
            assert np.abs(G + H_tilde - auto).max() <= 1e-15 * scale  # H = G + H̃


def _orthonormal(rng, dim, k):
    return np.linalg.qr(rng.standard_normal((dim, k)))[0]


def _projector_by_loops(basis):
    """``Σ_j u_j u_jᵀ`` over the columns, entry by entry."""
    dim, k = basis.shape
    P = np.zeros((dim, dim))
    for j in range(k):
        for a in range(dim):
            for b in range(dim):
                P[a, b] += basis[a, j] * basis[b, j]
    return P


def _top_eigenvectors_reference(hessian, k):
    """The top-``k`` eigenvectors by numpy's general (non-symmetric) solver, normalised."""
    values, vectors = np.linalg.eig(hessian)
    top = np.argsort(values.real)[::-1][:k]
    u = vectors[:, top].real
    return u / np.linalg.norm(u, axis=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_subspace_overlap_is_the_trace_of_the_projectors_at_random_bases(seed):
    """tr(P_U P_V)/k with P built by loops, for random (not nested, not orthogonal) bases."""
    rng = np.random.default_rng(seed)
    dim, k = 9, 3 + seed
    U, V = _orthonormal(rng, dim, k), _orthonormal(rng, dim, k)
    PU, PV = _projector_by_loops(U), _projector_by_loops(V)
    expected = sum(PU[a, b] * PV[b, a] for a in range(dim) for b in range(dim)) / k
    assert 0.05 < expected < 0.95  # a general position, away from the extremes
    assert subspace_overlap(U, V) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("model", [LINEAR[0], RELU[0]], ids=repr)
def test_top_fraction_and_true_coefficients_at_a_random_point_by_brute_force(model):
    """At a random point (g not in the top space): f_top = ‖P g‖²/‖g‖² with P by loops over
    reference eigenvectors, and ⟨g/‖g‖, u_j⟩ entry by entry (squared, summed over each
    eigenvalue's cluster: signs and bases of degenerate eigenspaces are arbitrary); k at
    gaps of the spectrum (at l = L the linear Hessian is I_K ⊗ H_LH_Lᵀ/N: K-fold
    eigenvalues)."""
    point = model.random_point(seed=9)
    for layer in _layers(model):
        hess = layer_hessian(model, point, layer)
        g = layer_gradient(model, point, layer)
        values = np.sort(np.linalg.eigvals(hess).real)[::-1]
        for k in (model.n_classes, 2 * model.n_classes, model.n_classes**2):
            assert values[k - 1] - values[k] > 1e-3 * values[0]  # the top-k space is defined
            u = _top_eigenvectors_reference(hess, k)
            projected = _projector_by_loops(u) @ g
            expected = sum(x * x for x in projected) / sum(x * x for x in g)
            assert 1e-6 < expected < 1 - 1e-6  # neither extreme
            top = _eigh(hess)[1][:, :k]
            assert top_fraction(g, top) == pytest.approx(expected, rel=1e-9)
            gnorm = math.sqrt(sum(x * x for x in g))
            coeffs = [sum(g[a] * u[a, j] for a in range(g.size)) / gnorm for j in range(k)]
            got = gradient_coefficients(g, top).numpy()
            # per eigenvalue (a cluster of equal ones: only their span is defined)
            cluster = np.cumsum(np.r_[0, np.diff(values[:k]) < -1e-9 * values[0]])
            for c in set(cluster.tolist()):
                members = np.flatnonzero(cluster == c)
                want = sum(coeffs[j] ** 2 for j in members)
                assert float(np.sum(got[members] ** 2)) == pytest.approx(want, rel=1e-9, abs=1e-14)
            assert float(np.sum(got**2)) == pytest.approx(expected, rel=1e-9)


def test_array_helpers_reject_bad_shapes_and_a_zero_gradient_by_name():
    """The curvature vocabulary's checks on dense arrays (vectors are columns, ``(P, m)``;
    a matrix is a ``DenseOperator``)."""
    H, V, g = np.eye(4), np.ones((4, 3)), np.ones(4)
    top = H[:, :2]
    cases = [
        (
            lambda: top_fraction(np.zeros(5), top),
            r"gradient must have shape \(4,\) to match the rows of vectors, got \(5,\)",
        ),
        (lambda: top_fraction(np.zeros(4), top), r"gradient is zero; f_top = .* is undefined"),
        (
            lambda: DenseOperator(np.ones((4, 5))),
            r"matrix must be a square \(P, P\) matrix, got shape \(4, 5\)",
        ),
        (
            lambda: top_eigenpairs(DenseOperator(H), 5),
            r"k = 5 exceeds the operator's dimension P = 4",
        ),
        (
            lambda: top_fraction(np.ones((4, 1)), top),
            r"gradient must be 1-D \(P,\), got shape \(4, 1\)",
        ),
        (
            lambda: gradient_coefficients(np.ones(3), top),
            r"gradient must have shape \(4,\) to match the rows of vectors, got \(3,\)",
        ),
        (
            lambda: gradient_coefficients(np.zeros(4), top),
            r"gradient is zero; its cosine with the vectors is undefined",
        ),
        (
            lambda: DenseOperator(np.ones(4)),
            r"matrix must be a square \(P, P\) matrix, got shape \(4,\)",
        ),
        (
            lambda: gradient_coefficients(np.ones(5), V),
            r"gradient must have shape \(4,\) to match the rows of vectors, got \(5,\)",
        ),
        (
            lambda: gradient_coefficients(np.zeros(4), V),
            r"gradient is zero; its cosine with the vectors is undefined",
        ),
        (
            lambda: gradient_coefficients(g, np.ones(4)),
            r"vectors must be 2-D \(P, m\), got shape \(4,\)",
        ),
        (
            lambda: gradient_coefficients(np.ones(5), V, normalise="raw"),
            r"gradient must have shape \(4,\) to match the rows of vectors, got \(5,\)",
        ),
        (
            lambda: DenseOperator(np.ones((4, 3))),
            r"matrix must be a square \(P, P\) matrix, got shape \(4, 3\)",
        ),
        (
            lambda: eigenvector_alignment(DenseOperator(np.eye(5)), V),
            r"vectors must have shape \(5, m\) \(columns of the operator's dimension 5\), "
            r"got \(4, 3\)",
        ),
        (
            lambda: subspace_overlap(np.ones((5, 2)), np.ones((4, 2))),
            r"subspaces of different dimensions: 5 != 4",
        ),
        (
            lambda: subspace_overlap(np.ones(5), np.ones(5)),
            r"vectors_a must be 2-D \(P, k\), got shape \(5,\)",
        ),
        (
            lambda: kron_pairs(np.ones((3, 2)), np.ones((2, 2))),
            r"outputs and inputs must have one number of rows, got 3 and 2",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    # the raw coefficients of a zero gradient are defined (0)
    assert np.array_equal(gradient_coefficients(np.zeros(4), V, normalise="raw"), np.zeros(3))
    model = LINEAR[0]
    with pytest.raises(ValueError, match=r"start must be an integer in \[1, 4\], got 0"):
        weight_product(model, model.random_point(seed=0), 0)


def test_kron_pairs_and_weight_product_by_loops():
    rng = np.random.default_rng(3)
    u, v = rng.standard_normal((4, 3)), rng.standard_normal((4, 5))
    for order in ("row", "column"):
        got = kron_pairs(u, v, order=order)
        for j in range(4):
            ref = np.kron(u[j], v[j]) if order == "row" else np.kron(v[j], u[j])
            assert np.array_equal(got[j], ref)
    model = LINEAR[0]
    point = model.random_point(seed=1)
    for start in range(1, model.n_layers + 2):
        ref = np.eye(model.n_classes)
        for j in range(model.n_layers, start - 1, -1):
            ref = ref @ point.W[j - 1]
        assert np.allclose(weight_product(model, point, start), ref, rtol=1e-14, atol=0)


def _nc_by_loops(model, point):
    """NC2 (centred means) and NC3 (W_{L:l} against the centred means) of every layer, from
    their definitions with explicit loops (unbiased standard deviations)."""
    k, n = model.n_classes, model.n_per_class
    out = {key: [] for key in ("equinorm", "equiangle", "maxangle", "sd", "sd_classwise")}
    for i, h in enumerate(_columns(model.features(point))):
        means = [sum(h[:, c * n + s] for s in range(n)) / n for c in range(k)]
        glob = sum(means) / k
        cm = [m - glob for m in means]
        norms = [math.sqrt(sum(x * x for x in v)) for v in cm]
        avg = sum(norms) / k
        out["equinorm"].append(math.sqrt(sum((x - avg) ** 2 for x in norms) / (k - 1)) / avg)
        cos = {
            (a, b): sum(x * y for x, y in zip(cm[a], cm[b], strict=True)) / (norms[a] * norms[b])
            for a in range(k)
            for b in range(k)
            if a != b
        }
        upper = [cos[a, b] for a in range(k) for b in range(a + 1, k)]
        mean_cos = sum(upper) / len(upper)
        spread = sum((x - mean_cos) ** 2 for x in upper) / (len(upper) - 1) if k > 2 else 0.0
        out["equiangle"].append(math.sqrt(spread))
        out["maxangle"].append(sum(abs(x + 1 / (k - 1)) for x in cos.values()) / len(cos))
        if i == model.n_layers:
            out["sd"].append(math.nan)
            out["sd_classwise"].append(math.nan)
            continue
        W = np.eye(k)
        for j in range(model.n_layers, i, -1):
            W = W @ point.W[j - 1]
        wn = math.sqrt(sum(W[a, b] ** 2 for a in range(k) for b in range(W.shape[1])))
        mn = math.sqrt(sum(x * x for x in norms))
        out["sd"].append(
            sum((W[c, b] / wn - cm[c][b] / mn) ** 2 for c in range(k) for b in range(W.shape[1]))
        )
        per = []
        for c in range(k):
            rn = math.sqrt(sum(x * x for x in W[c]))
            per.append(sum((W[c, b] / rn - cm[c][b] / norms[c]) ** 2 for b in range(W.shape[1])))
        out["sd_classwise"].append(sum(per) / k)
    return {key: np.asarray(v) for key, v in out.items()}


@pytest.mark.parametrize(
    "model",
    [LINEAR[0], LINEAR[1], RELU[1], DeepLinearUFM(2, 3, [3, 4], [1e-2, 2e-2], 1e-2)],
    ids=repr,
)
def test_dnc_metrics_nc2_and_nc3_by_loops_and_at_the_optimum(model):
    point = model.random_point(seed=10)
    dnc, ref = dnc_metrics(model, point), _nc_by_loops(model, point)
    for key, name in (
        ("equinorm", "equinorm"),
        ("equiangle", "equiangle"),
        ("maxangle", "maxangle"),
        ("self_duality", "sd"),
        ("self_duality_classwise", "sd_classwise"),
    ):
        assert np.allclose(dnc[key], ref[name], rtol=1e-10, atol=1e-15, equal_nan=True), key
    if model.n_classes > 2:  # K = 2: the centred means are ±(h̄_1 − h̄_2)/2, NC2 is 0 always
        assert np.all(dnc["equinorm"] > 1e-3) and np.all(dnc["maxangle"] > 1e-3)
    else:
        assert np.all(dnc["equinorm"] < 1e-15) and np.all(dnc["maxangle"] < 1e-15)
    if model.activation != "identity":
        return
    # the optimum: an orthogonal frame, whose centred means are a simplex ETF (NC2 = 0);
    # W_{L:l} ∝ M_lᵀ is not ∝ the centred means: NC3 = 2 − 2√((K−1)/K) on every layer
    k = model.n_classes
    opt = dnc_metrics(model, exact_optimum(model, seed=4))
    for key in ("equinorm", "equiangle", "maxangle"):
        assert np.all(opt[key] < 1e-13), key
    for key in ("self_duality", "self_duality_classwise"):
        assert np.allclose(opt[key][:-1], 2 - 2 * math.sqrt((k - 1) / k), rtol=1e-12), key
        assert math.isnan(opt[key][-1])
