"""Paper 004's theorems (3.1, 4.1-4.4, E.1-E.3) held against exact and solved optima on the
note's configurations and on random ones; Theorem E.1 published vs corrected."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collapselab.curvature import dense_spectrum
from collapselab.theory.dlufm import (
    DeepLinearUFM,
    DeepReLUUFM,
    closed_form,
    exact_optimum,
    gradient_descent,
)
from collapselab.theory.dlufm_layerwise import gradient_covariance
from collapselab.theory.dlufm_theorems import (
    SpectrumPrediction,
    predict_dnc,
    predict_extended_errors,
    predict_features,
    predict_gradient,
    predict_gradient_covariance,
    predict_hessian,
    predict_papyan,
    predict_weights,
    verify_dlufm,
)

from .test_theory_dlufm import CONFIG_A, CONFIG_B, RANDOM_CONFIGS

THEOREMS = {"optimum", "3.1", "4.1", "4.2", "4.3", "4.4", "E.1", "E.2", "E.3"}
EIGENVECTOR_CHECKS = [
    ("3.1", "W_{L:l}W_{L:l}^T = s_l I_K"),
    ("4.1", "eigenvectors v_kk'"),
    *(
        ("4.2", f"eigenvectors {part} ({centring} centring)")
        for part in ("class", "cross")
        for centring in ("logit", "class")
    ),
    ("4.4", "eigenvectors"),
    ("E.1", "eigenvectors covariance"),
    ("E.1", "eigenvectors second moment"),
    ("E.2", "eigenvectors"),
    ("E.3", "eigenvectors"),
]


def _columns(arrays):
    """The paper's column matrices (``(d, N)``) of the model's row arrays (``(N, d)``)."""
    return [a.T for a in arrays]


@pytest.mark.parametrize("config", [CONFIG_A, CONFIG_B, *RANDOM_CONFIGS])
@pytest.mark.parametrize("seed", [0, 7])
def test_every_theorem_holds_at_an_exact_optimum(config, seed):
    model = DeepLinearUFM(**config)
    check = verify_dlufm(model, seed=seed)
    assert check.passed(1e-9), [c for c in check.failures(1e-9) if c.variant != "published"]
    assert set(check.worst()) == THEOREMS | {"E.1 published"}
    assert {c.layer for c in check.checks if c.theorem == "4.1"} == set(
        range(1, model.n_layers + 1)
    )
    # an eigenvector check for every theorem and layer, and Theorem 3.1's weight Gram
    layers = set(range(1, model.n_layers + 1))
    for theorem, quantity in EIGENVECTOR_CHECKS:
        found = {c.layer for c in check.checks if (c.theorem, c.quantity) == (theorem, quantity)}
        assert found == (layers | {model.n_layers + 1} if theorem == "E.3" else layers), quantity


def test_every_theorem_holds_at_the_gradient_descent_solution_of_configuration_a():
    """The paper's procedure (GD from a normal start) reaches a point where every
    prediction holds to 1e-6 (note §5.2: converged within a few thousand steps)."""
    model = DeepLinearUFM(**CONFIG_A)
    traj = gradient_descent(model, 0.5, 8000, w_scale=0.5, h_scale=0.5, checkpoints=2)
    check = verify_dlufm(model, traj.final, layers=[3])
    assert check.passed(1e-6), [c for c in check.failures(1e-6) if c.variant != "published"]
    worst = check.worst()
    assert worst["4.1"] < 1e-8 and worst["optimum"] < 1e-8


def test_theorem_e1_published_reading_fails_and_the_corrected_one_holds():
    model = DeepLinearUFM(**CONFIG_B)
    point = exact_optimum(model, seed=3)
    k = model.n_classes
    for layer in range(1, model.n_layers + 1):
        moment = dense_spectrum(gradient_covariance(model, point, layer, centred=False)).numpy()
        cov = dense_spectrum(gradient_covariance(model, point, layer)).numpy()
        published = predict_gradient_covariance(model, layer, centred=False, variant="published")
        corrected = predict_gradient_covariance(model, layer, centred=False, variant="corrected")
        assert published.rank == k - 1 and corrected.rank == k
        # the second moment has K equal non-zero eigenvalues: the K-th is not zero
        assert np.allclose(moment[:k], corrected.eigenvalues, rtol=1e-10)
        assert moment[k - 1] > 1e6 * abs(moment[k])
        # the covariance has K − 1; both variants agree on it
        for variant in ("published", "corrected"):
            pred = predict_gradient_covariance(model, layer, variant=variant)
            assert pred.rank == k - 1 and np.allclose(cov[: k - 1], pred.eigenvalues, rtol=1e-10)
        assert abs(cov[k - 1]) < 1e-10 * cov[0]
    check = verify_dlufm(model, point)
    published = [c for c in check.checks if c.variant == "published"]
    assert published and all(c.error == 1.0 and c.measured == k for c in published)


def test_predictions_have_the_theorems_values():
    model = DeepLinearUFM(**CONFIG_A)
    form = closed_form(model)
    k, t = 3, form.t_star
    h = predict_hessian(model, 3)
    assert h.rank == 9 and np.allclose(h.eigenvalues, 0.2022600, rtol=1e-6)
    parts = predict_papyan(model, 3)
    assert (parts["class"].rank, parts["cross"].rank, parts["within"].rank) == (3, 6, 0)
    g = predict_gradient(model, 3)
    assert g.coefficient == pytest.approx(-0.0129330, rel=1e-4) and g.n_nonzero == 3
    assert np.allclose(g.cosines.reshape(3, 3), -np.eye(3) / math.sqrt(3))
    w = predict_weights(model, 2)
    assert w.rank == 3 and np.allclose(w.eigenvalues, 1.569487, rtol=1e-6)
    cov = predict_gradient_covariance(model, 3)
    assert cov.rank == 2 and np.allclose(cov.eigenvalues, 1.17712e-4, rtol=1e-5)
    errors = predict_extended_errors(model, 3)
    assert np.allclose(errors.eigenvalues, [3.064162, 3.064162, 9.134e-4], rtol=1e-4)
    assert errors.eigenvalues[0] / errors.eigenvalues[-1] == pytest.approx(
        (1 + t * t) / (1 - t) ** 2
    )
    feats = [predict_features(model, layer).eigenvalues[0] for layer in range(1, 6)]
    assert np.allclose(feats[:4], [1.569487, 2.46329, 3.866103, 6.067799], rtol=1e-5)
    assert feats[4] == pytest.approx(model.n_per_class * t * t)
    dnc = predict_dnc(model)
    assert np.allclose(dnc["mean_norm_sq"], form.mean_norm_sq) and np.all(dnc["dnc1"] == 0)
    assert dnc["dnc3_scale"][-1] != dnc["dnc3_scale"][-1]  # NaN at the outputs
    for key in ("equinorm", "equiangle", "maxangle"):  # the centred frame is a simplex ETF
        assert np.all(dnc[key] == 0)
    for key in ("self_duality", "self_duality_classwise"):  # cos(h̄_k, h̃_k) = √(2/3)
        assert np.allclose(dnc[key][:-1], 2 - 2 * math.sqrt(2 / 3), rtol=1e-15)
    assert np.allclose(dnc["weight_gram"][:-1], form.sigma_w_sq[0] ** np.arange(4, 0, -1))
    assert k == model.n_classes


def test_predictions_refuse_the_relu_model_and_configurations_beyond_the_threshold():
    relu = DeepReLUUFM(3, 4, 5, 1e-3, 1e-3, n_layers=3)
    with pytest.raises(ValueError, match="deep linear UFM"):
        predict_hessian(relu, 1)
    heavy = DeepLinearUFM(3, 10, 6, 0.2, 0.2, n_layers=3)
    with pytest.raises(ValueError, match=r"condition \(2\), which fails: β = "):
        predict_hessian(heavy, 1)
    with pytest.raises(ValueError, match=r"layer must be an integer in \[1, 3\], got 4"):
        predict_hessian(DeepLinearUFM(3, 4, 5, 1e-3, 1e-3, n_layers=3), 4)


@pytest.mark.parametrize("config", [CONFIG_A, CONFIG_B, *RANDOM_CONFIGS])
def test_eigenvector_and_weight_gram_checks_fail_away_from_the_optimum(config):
    """At a random point every eigenvector residual and Theorem 3.1's weight Gram error is
    far from 0 (> 1e-3): the checks can fail."""
    model = DeepLinearUFM(**config)
    check = verify_dlufm(model, model.random_point(seed=11))
    wanted = set(EIGENVECTOR_CHECKS)
    errors = [c.error for c in check.checks if (c.theorem, c.quantity) in wanted]
    assert len(errors) >= len(wanted) and min(errors) > 1e-3


def _product(point, start, k):
    out = np.eye(k)
    for j in range(len(point.W), start - 1, -1):
        out = out @ point.W[j - 1]
    return out


def _flat(u, v, order):
    """vec of the rank-one matrix u vᵀ (row- or column-major), entry by entry."""
    out = np.zeros(u.size * v.size)
    for a in range(u.size):
        for b in range(v.size):
            out[a * v.size + b if order == "row" else b * u.size + a] = u[a] * v[b]
    return out


def _means_by_loops(model, h):
    k, n = model.n_classes, model.n_per_class
    return [sum(h[:, c * n + i] for i in range(n)) / n for c in range(k)]


def _layer_matrices_by_loops(model, point, layer, order):
    """H_l, Papyan's G_class and G_cross (both centrings), the gradient covariance and second
    moment, and the extended errors' second moment, from their definitions with loops."""
    k, n, N, kappa = model.n_classes, model.n_per_class, model.n_samples, model.kappa
    feats = _columns(model.features(point))
    h, out = feats[layer - 1], feats[-1]
    A = _product(point, layer + 1, k)
    delta = {
        (c, kk, i): _flat(A[c], h[:, kk * n + i], order)
        for c in range(k)
        for kk in range(k)
        for i in range(n)
    }
    P = next(iter(delta.values())).size
    hess = sum(np.outer(v, v) for v in delta.values()) * kappa / N
    dck = {(c, kk): sum(delta[c, kk, i] for i in range(n)) / n for c in range(k) for kk in range(k)}
    papyan = {}
    for centring in ("logit", "class"):
        # δ_k = mean_c δ_{c,k} (logit centring) or δ'_c = mean_k δ_{c,k} (class centring)
        logit = centring == "logit"
        centres = [sum(dck[(j, m) if logit else (m, j)] for j in range(k)) / k for m in range(k)]
        spread = [dck[c, kk] - centres[kk if logit else c] for (c, kk) in dck]
        cross = sum(np.outer(v, v) for v in spread) * kappa / k
        papyan[centring] = (sum(np.outer(v, v) for v in centres) * kappa, cross)
    grads = []
    for kk in range(k):
        for i in range(n):
            s = kk * n + i
            r = out[:, s] - np.eye(k)[kk]
            grads.append(kappa * _flat(A.T @ r, h[:, s], order))
    mean = sum(grads) / N
    covariance = sum(np.outer(g - mean, g - mean) for g in grads) / N
    moment = sum(np.outer(g, g) for g in grads) / N
    extended = np.zeros((A.shape[1], A.shape[1]))
    for s in range(N):
        for c in range(k):
            e = A.T @ (out[:, s] - np.eye(k)[c])
            extended += np.outer(e, e) / N
    assert hess.shape == (P, P)
    return hess, papyan, covariance, moment, extended


def _eigenspace(matrix, start, stop):
    """Projector on the eigenvectors ``start..stop-1`` (descending) of numpy's eigh."""
    vectors = np.linalg.eigh(matrix)[1][:, ::-1][:, start:stop]
    return vectors @ vectors.T


def _span(rows, rank):
    """Projector on the span of ``rows``, which must have numerical rank ``rank``."""
    u, s, _ = np.linalg.svd(np.asarray(rows).T, full_matrices=False)
    assert int(np.sum(s > 1e-9 * s[0])) == rank
    return u[:, :rank] @ u[:, :rank].T


@pytest.mark.parametrize(
    "config", [CONFIG_B, RANDOM_CONFIGS[0], RANDOM_CONFIGS[2], RANDOM_CONFIGS[3]]
)
@pytest.mark.parametrize("order", ["row", "column"])
def test_predicted_eigenvectors_span_the_eigenspaces_of_matrices_built_by_loops(config, order):
    """At an exact optimum, the span of each predicted eigenvector set (of the predicted
    rank) equals numpy's eigh eigenspace of the matrix built by loops: projectors to 1e-9."""
    model = DeepLinearUFM(**config)
    point = exact_optimum(model, seed=5)
    k = model.n_classes
    options = {"point": point, "order": order}
    for layer in range(1, model.n_layers + 1):
        hess, papyan, covariance, moment, extended = _layer_matrices_by_loops(
            model, point, layer, order
        )
        pairs = [(hess, 0, predict_hessian(model, layer, **options))]
        for centring, (klass, cross) in papyan.items():
            parts = predict_papyan(model, layer, centring=centring, **options)
            pairs += [(klass, 0, parts["class"]), (cross, 0, parts["cross"])]
        pairs += [
            (covariance, 0, predict_gradient_covariance(model, layer, **options)),
            (moment, 0, predict_gradient_covariance(model, layer, centred=False, **options)),
        ]
        w = point.W[layer - 1]
        gram = np.array([[w[a] @ w[b] for b in range(w.shape[0])] for a in range(w.shape[0])])
        pairs.append((gram, 0, predict_weights(model, layer, point=point)))
        for matrix, start, pred in pairs:
            stop = start + pred.rank
            reference = _eigenspace(matrix, start, stop)
            assert np.abs(_span(pred.eigenvectors, pred.rank) - reference).max() < 1e-9
        errors = predict_extended_errors(model, layer, point=point)
        assert (
            np.abs(_span(errors.eigenvectors[:-1], k - 1) - _eigenspace(extended, 0, k - 1)).max()
            < 1e-9
        )
        assert (
            np.abs(_span(errors.eigenvectors[-1:], 1) - _eigenspace(extended, k - 1, k)).max()
            < 1e-9
        )
    for layer in range(1, model.n_layers + 2):
        h = _columns(model.features(point))[layer - 1]
        gram = sum(np.outer(h[:, s], h[:, s]) for s in range(model.n_samples))
        pred = predict_features(model, layer, point=point)
        assert np.allclose(pred.eigenvectors, _means_by_loops(model, h), rtol=1e-13, atol=0)
        assert np.abs(_span(pred.eigenvectors, k) - _eigenspace(gram, 0, k)).max() < 1e-9


def test_spectrum_prediction_eigenvectors_and_their_residual():
    model = DeepLinearUFM(**CONFIG_A)
    point = exact_optimum(model, seed=2)
    assert predict_hessian(model, 2).eigenvectors is None
    with pytest.raises(ValueError, match="no eigenvectors; pass point="):
        predict_hessian(model, 2).vector_eigenvalues()
    pred = predict_extended_errors(model, 2, point=point)
    assert np.array_equal(pred.vector_eigenvalues(), pred.eigenvalues)
    cross = predict_papyan(model, 2, point=point)["cross"]
    assert cross.eigenvectors.shape == (9, 100) and cross.rank == 6
    assert np.all(cross.vector_eigenvalues() == cross.eigenvalues[0])
    assert predict_papyan(model, 2, point=point)["within"].eigenvectors.shape == (0, 100)
    # the residual by hand: ‖Mv − λv‖/(λ_max‖v‖) with M = 2λI on the eigenvector rows: 1
    doubled = 2 * pred.eigenvalues[0] * np.eye(10)
    v = pred.eigenvectors[0]
    assert SpectrumPrediction(1, pred.eigenvalues[:1], v[None]).eigenvector_residual(
        doubled
    ) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="eigenvectors has 3 rows for 2 eigenvalues"):
        SpectrumPrediction(2, np.array([2.0, 1.0]), np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"eigenvectors must be 2-D \(m, D\), got shape \(4,\)"):
        SpectrumPrediction(1, np.array([2.0]), np.ones(4))
