"""One curvature vocabulary for dense and matrix-free operators: every function of it on the
same matrix given three ways (paper 004's deep UFM layer Hessian), against dense float64
references (numpy's ``eigh``, explicit loops, scipy's principal angles).

The three operators: :class:`DenseOperator` of the theory's dense matrix
(``layer_hessian``), :class:`HessianOperator` (double backward on the UFM as an
``nn.Module``) and the theory's per-sample matrix-free operator (``layer_hessian_operator``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import torch

from collapselab.curvature import (
    DenseOperator,
    HessianOperator,
    Objective,
    count_outliers,
    counted_spectrum,
    dense_spectrum,
    eigenvector_alignment,
    gradient_coefficients,
    kronecker_vectors,
    module_class_means,
    papyan_decomposition,
    subspace_overlap,
    top_eigenpairs,
    top_fraction,
)
from collapselab.theory.dlufm import DeepLinearUFM, DeepReLUUFM, exact_optimum
from collapselab.theory.dlufm_layerwise import (
    layer_data,
    layer_gradient,
    layer_hessian,
    layer_hessian_operator,
    layer_papyan_decomposition,
    predicted_eigenvectors,
)
from tests._curvature_reference import outliers_by_loops

K, N_PER = 3, 4
CASES = [
    (DeepLinearUFM(K, N_PER, [5, 6, 4], [1e-3, 2e-3, 3e-3], 2e-3), 1),
    (DeepLinearUFM(K, N_PER, [5, 6, 4], [1e-3, 2e-3, 3e-3], 2e-3), 2),
    (DeepReLUUFM(K, N_PER, 5, 1e-3, 1e-3, n_layers=3), 2),
]
IDS = ["linear-W1", "linear-W2", "relu-W2"]


def _objective(model, point, layer) -> tuple[Objective, torch.nn.Module]:
    """The UFM as an ``nn.Module``: the data term ``(1/2N)‖F − Y‖²`` in ``W_layer``."""
    module = model.as_module(point)
    x = torch.eye(model.n_samples, dtype=torch.float64)
    y = torch.arange(model.n_classes).repeat_interleave(model.n_per_class)
    obj = Objective(
        module, "mse_half", [(x[:7], y[:7]), (x[7:], y[7:])], params=[module.layers[layer].weight]
    )
    return obj, module


def _setup(model, layer, point=None):
    point = model.random_point(seed=2, w_scale=1.0, h_scale=0.5) if point is None else point
    H = layer_hessian(model, point, layer)
    obj, module = _objective(model, point, layer)
    ops = {
        "dense": DenseOperator(H),
        "hessian-vector": HessianOperator(obj),
        "per-sample": layer_hessian_operator(model, point, layer),
    }
    return point, H, obj, module, ops


def _eigh(H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, vectors = np.linalg.eigh(H)
    return values[::-1], vectors[:, ::-1]


def _apply_by_loops(H: np.ndarray, v: np.ndarray) -> list[float]:
    return [sum(H[i, j] * v[j] for j in range(v.size)) for i in range(v.size)]


def _top_k_at_a_gap(values: np.ndarray, scale: float) -> int:
    """The smallest ``k >= K`` with a gap after it (the top-``k`` space is defined)."""
    return next(k for k in range(K, values.size) if values[k - 1] - values[k] > 1e-6 * scale)


@pytest.mark.parametrize(("model", "layer"), CASES, ids=IDS)
def test_three_operators_of_one_matrix_and_their_spectra(model, layer):
    _, H, _, _, ops = _setup(model, layer)
    scale = float(np.abs(H).max())
    values, _ = _eigh(H)
    m = 2 * K * K + K
    for name, op in ops.items():
        assert np.abs(op.dense().numpy() - H).max() <= 1e-12 * scale, name
        spectrum = dense_spectrum(op).numpy()
        assert np.abs(spectrum - values).max() <= 1e-12 * scale, name
        pairs = top_eigenpairs(op, m, tol=1e-12)
        assert np.abs(pairs.values.numpy() - values[:m]).max() <= 1e-10 * scale, name
        # the outlier rule on the whole spectrum and on the family's window
        assert count_outliers(spectrum) == outliers_by_loops(values), name
        counted = counted_spectrum(op, m, tol=1e-8)
        assert counted.outliers() == outliers_by_loops(values[:m], floor=counted.tol), name
    assert dense_spectrum(H).numpy() == pytest.approx(values, abs=1e-12 * scale)


@pytest.mark.parametrize(("model", "layer"), CASES, ids=IDS)
def test_alignment_fraction_coefficients_and_overlap_on_every_operator(model, layer):
    point, H, obj, _, ops = _setup(model, layer)
    scale = float(np.abs(H).max())
    values, vectors = _eigh(H)
    g = layer_gradient(model, point, layer)
    assert np.allclose(obj.gradient().numpy(), g, rtol=1e-10, atol=1e-14)
    rng = np.random.default_rng(0)
    V = np.concatenate(
        [predicted_eigenvectors(model, point, layer).T, rng.normal(size=(H.shape[0], 3))], axis=1
    )
    # explicit loops: a(v) = ⟨Hv, v⟩/(‖Hv‖‖v‖), cosines ⟨g, v⟩/(‖g‖‖v‖), raw ⟨g, v/‖v‖⟩
    align, cosines, raw = [], [], []
    gnorm = math.sqrt(sum(x * x for x in g))
    for j in range(V.shape[1]):
        v = V[:, j]
        hv = _apply_by_loops(H, v)
        vnorm = math.sqrt(sum(x * x for x in v))
        dot_g = sum(a * b for a, b in zip(g, v, strict=True))
        align.append(
            sum(a * b for a, b in zip(hv, v, strict=True))
            / (math.sqrt(sum(x * x for x in hv)) * vnorm)
        )
        cosines.append(dot_g / (gnorm * vnorm))
        raw.append(dot_g / vnorm)
    k = _top_k_at_a_gap(values, scale)
    top = vectors[:, :k]
    projected = top @ (top.T @ g)
    f_top = sum(x * x for x in projected) / gnorm**2
    for name, op in ops.items():
        got = eigenvector_alignment(op, V).numpy()
        assert np.allclose(got, align, rtol=1e-10, atol=1e-12), name
        assert np.allclose(gradient_coefficients(g, V).numpy(), cosines, rtol=1e-10, atol=1e-13)
        assert np.allclose(
            gradient_coefficients(g, V, normalise="raw").numpy(), raw, rtol=1e-10, atol=1e-13
        )
        U = top_eigenpairs(op, k, tol=1e-12).vectors
        assert top_fraction(g, U) == pytest.approx(f_top, rel=1e-9), name
        assert top_fraction(torch.from_numpy(g), top) == pytest.approx(f_top, rel=1e-12)
        assert subspace_overlap(U, top) == pytest.approx(1.0, abs=1e-9), name
        other = np.linalg.qr(rng.normal(size=(H.shape[0], k + 2)))[0]
        by_loops = sum(
            sum(U[a, i].item() * other[a, j] for a in range(H.shape[0])) ** 2
            for i in range(k)
            for j in range(k + 2)
        )
        assert subspace_overlap(U, other) == pytest.approx(by_loops / k, rel=1e-9), name
    # undefined alignment: a zero vector, or Hv = 0
    for op in (*ops.values(), DenseOperator(np.zeros_like(H))):
        got = eigenvector_alignment(op, np.c_[np.zeros(H.shape[0]), V[:, 0]]).numpy()
        assert math.isnan(got[0]) and (math.isnan(got[1]) == (not op.dense().any()))


@pytest.mark.parametrize(("model", "layer"), CASES, ids=IDS)
def test_the_networks_kronecker_vectors_are_the_theorys_predicted_eigenvectors(model, layer):
    """The class means a network hook reads (``module_class_means``: the layer's input and
    the next weight layer's input) and ``kronecker_vectors`` of them are the theory's
    ``predicted_eigenvectors``, and both equal ``h̄^{(l+1)}_k ⊗ h̄^{(l)}_{k'}`` by ``np.kron``."""
    point, _, obj, module, _ = _setup(model, layer)
    following = module.layers[layer + 1] if layer < model.n_layers else None
    h_in, h_out = module_class_means(obj, module.layers[layer], K, next_module=following)
    means, means_next = layer_data(model, point, layer).class_means()  # (K, d) rows
    assert np.allclose(h_in.numpy(), means, rtol=1e-12, atol=1e-14)
    assert np.allclose(h_out.numpy(), means_next, rtol=1e-12, atol=1e-14)
    vectors = kronecker_vectors(h_out, h_in).reshape(K * K, -1).numpy()
    predicted = predicted_eigenvectors(model, point, layer)
    for k in range(K):
        for kk in range(K):
            ref = np.kron(means_next[k], means[kk])
            assert np.allclose(vectors[k * K + kk], ref, rtol=1e-12, atol=1e-14)
            assert np.array_equal(predicted[k * K + kk], ref)


def _papyan_by_loops(model, point, layer, centring):
    """``G``, ``G_class``, ``G_cross``, ``G_within`` from the per-sample extended gradients
    ``δ_{c,k,i} = (row c of A_i) ⊗ h_i`` by loops (note 004 §3.9, κ = 1)."""
    data = layer_data(model, point, layer)
    n, N = model.n_per_class, model.n_samples
    delta = {
        (c, k, i): np.kron(data.back[k * n + i, c], data.h[k * n + i])
        for c in range(K)
        for k in range(K)
        for i in range(n)
    }
    pair = {(c, k): sum(delta[c, k, i] for i in range(n)) / n for c in range(K) for k in range(K)}
    G = sum(np.outer(v, v) for v in delta.values()) / N
    within = sum(np.outer(v - pair[c, k], v - pair[c, k]) for (c, k, i), v in delta.items()) / N
    if centring == "logit":
        centre = {k: sum(pair[c, k] for c in range(K)) / K for k in range(K)}
        cross = sum(np.outer(pair[c, k] - centre[k], pair[c, k] - centre[k])
                    for c in range(K) for k in range(K)) / K  # fmt: skip
    else:
        centre = {c: sum(pair[c, k] for k in range(K)) / K for c in range(K)}
        cross = sum(np.outer(pair[c, k] - centre[c], pair[c, k] - centre[c])
                    for c in range(K) for k in range(K)) / K  # fmt: skip
    klass = sum(np.outer(v, v) for v in centre.values())
    return {"G": G, "class": klass, "cross": cross, "within": within}


def _image(matrix: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh(matrix)
    return vectors[:, values > 1e-10 * max(values.max(), 1e-300)]


@pytest.mark.parametrize("centring", ["logit", "class"])
@pytest.mark.parametrize(("model", "layer", "optimum"), [
    (CASES[0][0], 2, False), (CASES[2][0], 2, False), (CASES[0][0], 2, True),
], ids=["linear", "relu", "linear-optimum"])  # fmt: skip
def test_papyan_dense_and_matrix_free_against_loops(model, layer, optimum, centring):
    """The dense decomposition (the theory's) and the matrix-free one (an objective's) of
    the same ``G``: parts, knock-out spectra, ranks, image overlap and the outlier counts of
    the knock-outs, against loops, numpy's ``eigh`` and scipy's principal angles."""
    point = exact_optimum(model, seed=1) if optimum else None
    point, _, obj, _, _ = _setup(model, layer, point)
    ref = _papyan_by_loops(model, point, layer, centring)
    scale = float(np.abs(ref["G"]).max())
    knocked = {
        "none": ref["G"],
        "class": ref["G"] - ref["class"],
        "cross": ref["G"] - ref["cross"],
        "within": ref["class"] + ref["cross"],
    }
    spectra = {part: _eigh(m)[0] for part, m in knocked.items()}
    top = spectra["none"][0]
    ranks = {"G": int(np.sum(np.abs(spectra["none"]) > 1e-8 * top))}
    for part in ("class", "cross", "within"):
        ranks[part] = int(np.sum(np.abs(np.linalg.eigvalsh(ref[part])) > 1e-8 * top))
        ranks[f"without_{part}"] = int(np.sum(np.abs(spectra[part]) > 1e-8 * top))
    angles = scipy.linalg.subspace_angles(_image(ref["class"]), _image(ref["cross"]))
    overlap = float(np.cos(angles.min()))
    decompositions = {
        "dense": layer_papyan_decomposition(model, point, layer, centring=centring),
        "matrix-free": papyan_decomposition(obj, centring=centring, n_classes=K),
    }
    for name, dec in decompositions.items():
        parts = {"G": dec.ggn, **dec.parts()}
        for part, op in parts.items():
            got = op.dense().numpy()
            assert np.abs(got - ref[part]).max() <= 1e-12 * scale, (name, part)
        for part, got in dec.knockout_spectra().items():
            got = got.numpy()
            assert np.abs(got - spectra[part]).max() <= 1e-12 * scale, (name, part)
            assert count_outliers(got) == outliers_by_loops(spectra[part]), (name, part)
        assert dec.ranks(1e-8) == ranks, name
        assert dec.image_overlap() == pytest.approx(overlap, abs=1e-9), name
    if optimum:  # Theorem 4.2: ranks K², K, K(K−1), 0 and orthogonal images
        assert ranks == {"G": 9, "class": 3, "without_class": 6, "cross": 6,
                         "without_cross": 3, "within": 0, "without_within": 9}  # fmt: skip
        assert overlap < 1e-9
        assert [outliers_by_loops(spectra[p]) for p in ("none", "class", "cross")] == [9, 6, 3]
    else:
        assert 1e-3 < overlap < 1 - 1e-3  # a general position, away from the extremes
