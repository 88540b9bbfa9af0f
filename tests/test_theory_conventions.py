"""The theory API's conventions (docs/theory.md, Conventions) against independent float64
brute force: samples are rows, and every per-layer function of the deep linear theories
(paper 004's deep UFM, paper 002's PC-bias) indexes layer ``l`` one way, at every layer,
the boundary layers included.

The references build each product ``W_{a:b} = W_a ⋯ W_b`` by explicit loops from the right
(``W_a(W_{a-1}(⋯ W_b))``, the library multiplies from the left or from the identity),
every feature sample by sample and every per-sample matrix entry by entry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collapselab.models import layer_variances
from collapselab.theory import pcbias as pb
from collapselab.theory.dlufm import (
    DeepLinearUFM,
    DeepReLUUFM,
    UFMParameters,
    balancedness_residuals,
    closed_form,
    exact_optimum,
)
from collapselab.theory.dlufm_layerwise import (
    dnc_metrics,
    extended_error_moment,
    feature_class_means,
    feature_gram,
    gauss_newton_split,
    gradient_covariance,
    gram_tables,
    layer_data,
    layer_gradient,
    layer_hessian,
    layer_hessian_operator,
    layer_hessian_top,
    preactivation_signs,
    predicted_eigenvectors,
    weight_product,
    weight_spectra,
)
from collapselab.theory.dlufm_theorems import (
    predict_dnc,
    predict_extended_errors,
    predict_features,
    predict_gradient,
    predict_gradient_covariance,
    predict_hessian,
    predict_papyan,
    predict_weights,
)

# Unequal widths and λ per layer, so that an index off by one changes a shape or a value.
LINEAR = DeepLinearUFM(3, 2, [4, 6, 5, 3], [1e-3, 2e-3, 3e-3, 4e-3], 2e-3)
RELU = DeepReLUUFM(3, 2, [4, 6, 5, 3], [1e-3, 2e-3, 3e-3, 4e-3], 2e-3)


# ---------------------------------------------------------------------------------------
# brute force


def _product(ws, a: int, b: int, k: int) -> np.ndarray:
    """``W_{a:b} = W_a W_{a-1} ⋯ W_b`` (1-based) accumulated from the right; the identity of
    size ``k`` when ``a < b`` (the empty product)."""
    if a < b:
        return np.eye(k)
    out = ws[b - 1].copy()
    for j in range(b + 1, a + 1):
        out = ws[j - 1] @ out
    return out


def _forward(model, point) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """Per sample ``i``: ``[h^{(1)}_i, ..., h^{(L+1)}_i]`` and the masks ``[D_{1,i}, ...]``."""
    relu = model.activation == "relu"
    feats, masks = [], []
    for i in range(model.n_samples):
        h = point.H[:, i].copy()
        hs, ms = [h], []
        for j, w in enumerate(point.W, start=1):
            z = w @ h
            if j < model.n_layers:
                ms.append((z > 0).astype(float) if relu else np.ones_like(z))
                z = np.maximum(z, 0.0) if relu else z
            hs.append(z)
            h = z
        feats.append(hs)
        masks.append(ms)
    return feats, masks


def _back(model, point, masks, layer: int, i: int) -> np.ndarray:
    """``A_i = W_L D_{L-1,i} W_{L-1} ⋯ W_{l+1} D_{l,i}`` (``I_K`` at ``l = L``)."""
    a = np.eye(model.n_classes)
    for j in range(model.n_layers, layer, -1):
        a = a @ point.W[j - 1] @ np.diag(masks[i][j - 2])
    return a


def _means(model, feats, layer: int) -> np.ndarray:
    """``(K, d_l)``: row ``k`` the mean of ``h^{(l)}`` over class ``k``'s samples."""
    n = model.n_per_class
    return np.array(
        [sum(feats[c * n + s][layer - 1] for s in range(n)) / n for c in range(model.n_classes)]
    )


def _jacobian(a: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``J[c, (r, s)] = A[c, r] h[s]``, row-major ``vec(W_l)``, entry by entry."""
    jac = np.zeros((a.shape[0], a.shape[1] * h.size))
    for c in range(a.shape[0]):
        for r in range(a.shape[1]):
            for s in range(h.size):
                jac[c, r * h.size + s] = a[c, r] * h[s]
    return jac


def _layer_by_loops(model, point, layer: int) -> dict[str, np.ndarray]:
    """Layer ``l``'s Hessian, data gradient, per-sample gradients and extended-error
    second moment from their definitions, sample by sample."""
    feats, masks = _forward(model, point)
    k, n_samples, kappa = model.n_classes, model.n_samples, model.kappa
    labels = model.labels
    hess, per, ext = 0.0, [], 0.0
    for i in range(n_samples):
        a = _back(model, point, masks, layer, i)
        jac = _jacobian(a, feats[i][layer - 1])
        hess = hess + kappa / n_samples * (jac.T @ jac)
        out = feats[i][-1]
        per.append(kappa * jac.T @ (out - np.eye(k)[labels[i]]))
        for c in range(k):
            e = a.T @ (out - np.eye(k)[c])
            ext = ext + np.outer(e, e) / n_samples
    per = np.array(per)
    return {"hessian": hess, "gradient": per.mean(axis=0), "per_sample": per, "extended": ext}


def _top(matrix: np.ndarray) -> float:
    return float(np.linalg.eigvalsh(0.5 * (matrix + matrix.T))[-1])


# ---------------------------------------------------------------------------------------
# layout: samples are rows


@pytest.mark.parametrize("model", [LINEAR, RELU], ids=["linear", "relu"])
def test_features_masks_targets_and_layer_data_are_rows(model):
    point = model.random_point(seed=1)
    feats, masks = _forward(model, point)
    got = model.features(point)
    assert len(got) == model.n_layers + 1
    for layer in range(1, model.n_layers + 2):  # index l - 1 holds h^{(l)}, the last f
        expected = np.array([feats[i][layer - 1] for i in range(model.n_samples)])
        assert got[layer - 1].shape == (model.n_samples, model.dims[layer - 1])
        np.testing.assert_allclose(got[layer - 1], expected, rtol=1e-13, atol=1e-15)
    got_masks = model.masks(point)
    assert len(got_masks) == model.n_layers - 1
    for layer in range(1, model.n_layers):  # D_l after W_l, l = 1..L-1
        expected = np.array([masks[i][layer - 1] for i in range(model.n_samples)])
        np.testing.assert_array_equal(got_masks[layer - 1], expected)
    np.testing.assert_array_equal(model.targets, np.eye(model.n_classes)[model.labels])
    for layer in range(1, model.n_layers + 1):
        data = layer_data(model, point, layer)
        np.testing.assert_array_equal(data.h, got[layer - 1])
        np.testing.assert_array_equal(data.h_next, got[layer])
        np.testing.assert_array_equal(data.residual, got[-1] - model.targets)
        means, means_next = data.class_means()
        np.testing.assert_allclose(means, _means(model, feats, layer), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(means_next, _means(model, feats, layer + 1), rtol=1e-13)
        np.testing.assert_array_equal(feature_class_means(model, got[layer - 1]), means)
        for i in range(model.n_samples):
            np.testing.assert_allclose(
                data.back[i], _back(model, point, masks, layer, i), rtol=1e-13, atol=1e-15
            )


def test_free_features_convert_between_rows_and_the_paper_matrix():
    """``H_1`` is a parameter in the ``(out, in)`` layout, ``(d_1, N)``; the named adapters
    take and give its rows, and a point built from rows is the model's point."""
    model = LINEAR
    point = model.random_point(seed=2)
    rows = point.feature_rows
    assert rows.shape == (model.n_samples, model.widths[0])
    np.testing.assert_array_equal(rows, point.H.T)
    np.testing.assert_array_equal(rows, model.features(point)[0])
    again = model.check_point(UFMParameters.from_feature_rows(rows, point.W))
    np.testing.assert_array_equal(again.H, point.H)
    assert model.objective(again) == model.objective(point)
    with pytest.raises(ValueError):
        model.check_point(UFMParameters.from_feature_rows(point.H, point.W))  # (d_1, N)


# ---------------------------------------------------------------------------------------
# deep UFM: every per-layer function at every layer


@pytest.mark.parametrize("model", [LINEAR, RELU], ids=["linear", "relu"])
def test_layerwise_functions_at_every_layer(model):
    point = model.random_point(seed=3)
    k, big_l = model.n_classes, model.n_layers
    feats, _ = _forward(model, point)
    for layer in range(1, big_l + 1):
        ref = _layer_by_loops(model, point, layer)
        scale = np.abs(ref["hessian"]).max()
        for method in ("data", "autodiff") + (("kronecker",) if model is LINEAR else ()):
            got = layer_hessian(model, point, layer, method=method)
            assert np.abs(got - ref["hessian"]).max() < 1e-12 * scale, (layer, method)
        reg = layer_hessian(model, point, layer, regularised=True)
        shift = model.lambda_w[layer - 1] * np.eye(ref["hessian"].shape[0])  # λ of W_l
        assert np.abs(reg - ref["hessian"] - shift).max() < 1e-12 * scale
        gauss_newton, rest = gauss_newton_split(model, point, layer)
        assert np.abs(gauss_newton - ref["hessian"]).max() < 1e-12 * scale
        assert np.abs(rest).max() < 1e-10 * scale
        vec = np.random.default_rng(layer).standard_normal(ref["hessian"].shape[0])
        operator = layer_hessian_operator(model, point, layer, regularised=True)
        np.testing.assert_allclose(
            operator.matvec(vec), (ref["hessian"] + shift) @ vec, rtol=1e-11, atol=1e-13 * scale
        )
        np.testing.assert_allclose(
            layer_gradient(model, point, layer), ref["gradient"], rtol=1e-11, atol=1e-15
        )
        per = layer_gradient(model, point, layer, per_sample=True)
        np.testing.assert_allclose(per, ref["per_sample"], rtol=1e-11, atol=1e-15)
        centred = ref["per_sample"] - ref["per_sample"].mean(axis=0)
        np.testing.assert_allclose(
            gradient_covariance(model, point, layer),
            centred.T @ centred / model.n_samples,
            rtol=1e-10,
            atol=1e-17,
        )
        np.testing.assert_allclose(
            extended_error_moment(model, point, layer), ref["extended"], rtol=1e-11, atol=1e-15
        )
        # v_{kk'} = h̄^{(l+1)}_k ⊗ h̄^{(l)}_{k'}, row k K + k'
        means, means_next = _means(model, feats, layer), _means(model, feats, layer + 1)
        vectors = predicted_eigenvectors(model, point, layer)
        for a in range(k):
            for b in range(k):
                np.testing.assert_allclose(
                    vectors[a * k + b], np.kron(means_next[a], means[b]), rtol=1e-12, atol=1e-15
                )
        # Tables 3 and 4: W_{L:l} W_{L:l}ᵀ and (1/N) Σ_i (A_i W_l)(A_i W_l)ᵀ
        table3, table4 = gram_tables(model, point, layer)
        prod = _product(point.W, big_l, layer, k)
        np.testing.assert_allclose(table3, prod @ prod.T, rtol=1e-12, atol=1e-15)
        _, masks = _forward(model, point)
        b = [_back(model, point, masks, layer, i) @ point.W[layer - 1] for i in range(len(feats))]
        np.testing.assert_allclose(
            table4, sum(m @ m.T for m in b) / model.n_samples, rtol=1e-12, atol=1e-15
        )
    for layer in range(1, big_l + 2):  # l = L + 1: the outputs, the empty product I_K
        np.testing.assert_allclose(
            weight_product(model, point, layer),
            _product(point.W, big_l, layer, k),
            rtol=1e-12,
            atol=1e-15,
        )
        hs = [feats[i][layer - 1] for i in range(model.n_samples)]
        np.testing.assert_allclose(
            feature_gram(model, point, layer), sum(np.outer(h, h) for h in hs), rtol=1e-12
        )
    for layer, spectrum in enumerate(weight_spectra(point), start=1):
        w = point.W[layer - 1]
        np.testing.assert_allclose(
            spectrum, np.sort(np.linalg.eigvalsh(w @ w.T))[::-1], rtol=1e-10, atol=1e-14
        )


@pytest.mark.parametrize("model", [LINEAR, RELU], ids=["linear", "relu"])
def test_gradient_balancedness_and_lanczos_at_every_layer(model):
    """``∇F``'s ``W[l − 1]`` is ``∂F/∂W_l = 2s Σ_i A_iᵀ(f_i − y_i)h_iᵀ + λ_{W_l}W_l``; the
    balancedness residual ``[0]`` pairs ``W_1`` with ``H_1`` and ``[l]`` pairs ``W_{l+1}``
    with ``W_l``; ``layer_hessian_top`` at layer ``l`` is the top of ``H_l``."""
    point = model.random_point(seed=6)
    feats, masks = _forward(model, point)
    grad = model.gradient(point)
    big_l, k, s = model.n_layers, model.n_classes, model.loss_scale
    for layer in range(1, big_l + 1):
        expected = model.lambda_w[layer - 1] * point.W[layer - 1]
        for i in range(model.n_samples):
            a = _back(model, point, masks, layer, i)
            r = feats[i][-1] - np.eye(k)[model.labels[i]]
            expected = expected + 2 * s * np.outer(a.T @ r, feats[i][layer - 1])
        np.testing.assert_allclose(grad.W[layer - 1], expected, rtol=1e-11, atol=1e-15)
        values, _ = layer_hessian_top(model, point, layer, 2)
        ref = np.sort(np.linalg.eigvalsh(_layer_by_loops(model, point, layer)["hessian"]))
        np.testing.assert_allclose(values, ref[::-1][:2], rtol=1e-10)
    lefts = [model.lambda_w[0] * point.W[0].T @ point.W[0]]
    rights = [model.lambda_h * point.H @ point.H.T]
    for layer in range(1, big_l):
        w_next, w = point.W[layer], point.W[layer - 1]
        lefts.append(model.lambda_w[layer] * w_next.T @ w_next)
        rights.append(model.lambda_w[layer - 1] * w @ w.T)
    expected = [
        np.linalg.norm(a - b) / max(np.linalg.norm(a), np.linalg.norm(b))
        for a, b in zip(lefts, rights, strict=True)
    ]
    np.testing.assert_allclose(balancedness_residuals(model, point), expected, rtol=1e-12)


def test_preactivation_signs_name_the_layer_after_whose_weights_they_act():
    model = RELU
    point = model.random_point(seed=4)
    _, masks = _forward(model, point)
    signs = preactivation_signs(model, point)
    assert signs.layers.tolist() == list(range(1, model.n_layers))
    for j in range(1, model.n_layers):  # the ReLU after W_j
        positive = np.array([masks[i][j - 1] for i in range(model.n_samples)])
        assert signs.nonpositive_fraction[j - 1] == (positive == 0).mean()


def test_dnc_metrics_at_every_layer():
    """``[l − 1]`` is layer ``l``: its means ``M_l`` and its product ``W_{L:l}``; NaN where
    no product is measured (``l = L + 1``)."""
    model = LINEAR
    point = model.random_point(seed=5)
    feats, _ = _forward(model, point)
    dnc = dnc_metrics(model, point)
    for layer in range(1, model.n_layers + 2):
        means = _means(model, feats, layer)  # M_lᵀ
        norms = [float(m @ m) for m in means]
        assert dnc["mean_norm_sq"][layer - 1] == pytest.approx(sum(norms) / 3, rel=1e-12)
        if layer == model.n_layers + 1:
            assert np.isnan(dnc["dnc3"][layer - 1]) and np.isnan(dnc["dnc3_scale"][layer - 1])
            continue
        prod = _product(point.W, model.n_layers, layer, model.n_classes)
        mt = means
        expected = np.linalg.norm(prod / np.linalg.norm(prod) - mt / np.linalg.norm(mt))
        assert dnc["dnc3"][layer - 1] == pytest.approx(expected, rel=1e-10)
        c = float(np.sum(prod * mt) / np.sum(mt * mt))  # least squares W_{L:l} ≈ c M_lᵀ
        assert dnc["dnc3_scale"][layer - 1] == pytest.approx(c, rel=1e-10)


# ---------------------------------------------------------------------------------------
# deep UFM: the closed form and every theorem at every layer, against the exact optimum


def _optimum_by_loops(model):
    """The exact optimum measured by loops: for every layer ``l = 1..L+1`` the mean norm
    ``‖h̄^{(l)}‖²``, the row norm ``s_l`` of ``W_{L:l}`` and DNC3's ``c_l``
    (``W_{L:l} = c_l M_lᵀ``)."""
    point = exact_optimum(model, seed=1)
    feats, _ = _forward(model, point)
    out = {"point": point, "mean": [], "row": [], "c": []}
    for layer in range(1, model.n_layers + 2):
        means = _means(model, feats, layer)
        prod = _product(point.W, model.n_layers, layer, model.n_classes)
        out["mean"].append(float(means[0] @ means[0]))
        out["row"].append(float(prod[0] @ prod[0]))
        out["c"].append(float(np.sum(prod * means) / np.sum(means * means)))
    return out


def test_closed_form_and_predict_dnc_index_layer_l_by_w_l_to_l():
    model = LINEAR
    form, pred = closed_form(model), predict_dnc(model)
    ref = _optimum_by_loops(model)
    big_l = model.n_layers
    assert form.mean_norm_sq.shape == form.row_norm_sq.shape == form.dnc3_scale.shape == (5,)
    np.testing.assert_allclose(form.mean_norm_sq, ref["mean"], rtol=1e-12)
    np.testing.assert_allclose(form.row_norm_sq, ref["row"], rtol=1e-12)
    np.testing.assert_allclose(form.dnc3_scale, ref["c"], rtol=1e-12)
    assert form.row_norm_sq[-1] == 1.0  # W_{L:L+1} = I_K
    assert form.dnc3_scale[-1] == pytest.approx(1 / form.t_star, rel=1e-14)
    np.testing.assert_allclose(form.dnc3_scale * np.asarray(ref["mean"]), form.t_star, rtol=1e-12)
    np.testing.assert_allclose(pred["mean_norm_sq"], ref["mean"], rtol=1e-12)
    np.testing.assert_allclose(pred["dnc3_scale"][:big_l], ref["c"][:big_l], rtol=1e-12)
    np.testing.assert_allclose(pred["weight_gram"][:big_l], ref["row"][:big_l], rtol=1e-12)
    assert np.isnan(pred["dnc3_scale"][big_l]) and np.isnan(pred["weight_gram"][big_l])
    point = ref["point"]
    for layer in range(1, big_l + 1):
        w = point.W[layer - 1]
        assert form.sigma_w_sq[layer - 1] == pytest.approx(_top(w @ w.T), rel=1e-12)


def test_closed_form_at_the_zero_optimum_keeps_the_indexing():
    """Beyond condition (2) every product vanishes but the empty one, ``W_{L:L+1} = I_K``."""
    model = DeepLinearUFM(3, 2, [4, 6, 5], 5.0, 5.0)
    form = closed_form(model)
    assert not form.nontrivial and form.t_star == 0.0
    np.testing.assert_array_equal(form.row_norm_sq, [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(form.dnc3_scale, np.zeros(4))
    np.testing.assert_array_equal(form.hessian_outlier, np.zeros(3))
    np.testing.assert_array_equal(form.gradient_coefficient, np.zeros(3))


def test_every_theorem_prediction_at_every_layer():
    model = LINEAR
    form = closed_form(model)
    ref = _optimum_by_loops(model)
    point = ref["point"]
    feats, _ = _forward(model, point)
    k = model.n_classes
    for layer in range(1, model.n_layers + 1):
        loops = _layer_by_loops(model, point, layer)
        outlier = _top(loops["hessian"])
        assert form.hessian_outlier[layer - 1] == pytest.approx(outlier, rel=1e-11)
        assert predict_hessian(model, layer).eigenvalues[0] == pytest.approx(outlier, rel=1e-11)
        for part in predict_papyan(model, layer).values():
            assert part.eigenvalues.size == 0 or part.eigenvalues[0] == pytest.approx(
                outlier, rel=1e-11
            )
        # Theorem 4.3: g_l = β_l Σ_k h̄^{(l+1)}_k ⊗ h̄^{(l)}_k
        means, means_next = _means(model, feats, layer), _means(model, feats, layer + 1)
        v = sum(np.kron(means_next[c], means[c]) for c in range(k))
        beta = float(loops["gradient"] @ v / (v @ v))
        np.testing.assert_allclose(loops["gradient"], beta * v, rtol=1e-10, atol=1e-15)
        assert form.gradient_coefficient[layer - 1] == pytest.approx(beta, rel=1e-10)
        assert predict_gradient(model, layer).coefficient == pytest.approx(beta, rel=1e-10)
        w = point.W[layer - 1]
        assert predict_weights(model, layer).eigenvalues[0] == pytest.approx(
            _top(w @ w.T), rel=1e-11
        )
        centred = loops["per_sample"] - loops["per_sample"].mean(axis=0)
        covariance = centred.T @ centred / model.n_samples
        assert predict_gradient_covariance(model, layer).eigenvalues[0] == pytest.approx(
            _top(covariance), rel=1e-9
        )
        spectrum = np.sort(np.linalg.eigvalsh(loops["extended"]))[::-1][:k]
        np.testing.assert_allclose(
            predict_extended_errors(model, layer).eigenvalues, spectrum, rtol=1e-9
        )
    for layer in range(1, model.n_layers + 2):
        hs = [feats[i][layer - 1] for i in range(model.n_samples)]
        gram = sum(np.outer(h, h) for h in hs)
        assert predict_features(model, layer).eigenvalues[0] == pytest.approx(_top(gram), rel=1e-11)


# ---------------------------------------------------------------------------------------
# PC-bias: every per-layer function at every layer


def _pc_net(widths: list[int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(0.0, 0.6, (widths[i + 1], widths[i])) for i in range(len(widths) - 1)]


def _pc_data(q: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, 30)
    return rng.normal(size=(30, q)), np.eye(k)[labels]


@pytest.mark.parametrize("widths", [[5, 3], [5, 4, 3], [5, 7, 6, 4, 3]])
def test_pcbias_per_layer_functions_at_every_layer(widths):
    """``[l − 1]`` is ``W_l``: ``A_l = W_{L:l+1}W_{L:l+1}ᵀ`` (``I_K`` at ``l = L``),
    ``B_l = W_{l−1:1}ᵀW_{l−1:1}`` (``I_q`` at ``l = 1``), Lemma 1's gradient and the
    drivers of Eq. 9, for ``L = 1`` (both products empty), 2 and 4."""
    ws = _pc_net(widths, 1)
    x, y = _pc_data(widths[0], widths[-1])
    big_l, q, k = len(ws), widths[0], widths[-1]
    a, b = pb.gradient_scale_matrices(ws)
    _, b_published = pb.gradient_scale_matrices(ws, "published")
    grads = pb.layer_gradients(ws, x, y)
    compact = _product(ws, big_l, 1, q)
    np.testing.assert_allclose(pb.compact_matrix(ws), compact, rtol=1e-12)
    err = compact @ x.T @ x - y.T @ x
    driver_published, driver_corrected = 0.0, 0.0
    for layer in range(1, big_l + 1):
        above = _product(ws, big_l, layer + 1, k)  # W_{L:l+1}
        below = _product(ws, layer - 1, 1, q)  # W_{l-1:1}
        np.testing.assert_allclose(a[layer - 1], above @ above.T, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(b[layer - 1], below.T @ below, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(b_published[layer - 1], below @ below.T, rtol=1e-12)
        np.testing.assert_allclose(
            grads[layer - 1], above.T @ err @ below.T, rtol=1e-11, atol=1e-11
        )
        driver_published = driver_published + above @ above.T
        driver_corrected = driver_corrected + np.trace(below.T @ below) / q * above @ above.T
    np.testing.assert_allclose(pb.driving_matrix(ws, "published"), driver_published, rtol=1e-12)
    np.testing.assert_allclose(pb.driving_matrix(ws), driver_corrected, rtol=1e-12)
    stepped = pb.gd_step(ws, x, y, 1e-3)
    for layer in range(1, big_l + 1):
        np.testing.assert_allclose(
            stepped[layer - 1], ws[layer - 1] - 1e-3 * grads[layer - 1], rtol=1e-14
        )


@pytest.mark.parametrize("init", ["def3", "glorot_normal"])
def test_expected_scales_at_every_layer(init):
    """Thm 3's ``α_l``, ``β_l`` (index ``l − 1``) by the exact second-moment recursion:
    ``E[W S Wᵀ] = σ² tr(S) I`` and ``E[Wᵀ T W] = σ² tr(T) I`` for i.i.d. entries."""
    widths = [6, 9, 7, 8, 4]
    var = layer_variances(widths, init)
    alpha, beta = pb.expected_scales(widths, init)
    big_l = len(var)
    for layer in range(1, big_l + 1):
        s = np.eye(widths[layer])  # W_{L:l+1} W_{L:l+1}ᵀ from the inside: W_{l+1} first
        for n in range(layer + 1, big_l + 1):
            s = var[n - 1] * np.trace(s) * np.eye(widths[n])
        t = np.eye(widths[layer - 1])  # W_{l-1:1}ᵀ W_{l-1:1} from the inside: W_{l-1} first
        for n in range(layer - 1, 0, -1):
            t = var[n - 1] * np.trace(t) * np.eye(widths[n - 1])
        assert alpha[layer - 1] == pytest.approx(s[0, 0], rel=1e-12)
        assert beta[layer - 1] == pytest.approx(t[0, 0], rel=1e-12)
    assert pb.effective_factor(widths, init) == pytest.approx(float(alpha @ beta), rel=1e-14)
    assert math.isclose(alpha[-1], 1.0) and math.isclose(beta[0], 1.0)
