"""Papyan's decomposition against brute-force definitions; paper 004's theorems at DNC."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.curvature import (
    HessianOperator,
    Objective,
    class_pair_means,
    count_outliers,
    eigenvector_alignment,
    gradient_coefficients,
    image_overlap,
    kronecker_vectors,
    module_class_means,
    papyan_decomposition,
    subspace_overlap,
    top_eigenpairs,
    top_fraction,
)
from tests._curvature import batches, blobs, jacobians, tanh_net, ufm_at_dnc


def _brute_force(obj: Objective, x, y, K: int, centring: str):
    """G and its three parts from per-sample Jacobians, by the definitions (dense)."""
    J = jacobians(obj, x)  # (N, C, P)
    w, u = obj.loss.factors(obj.forward(obj.theta, x))  # (N, C), (C, N, C)
    N, C = w.shape
    delta = torch.stack([torch.stack([J[n].T @ u[c, n] for c in range(C)]) for n in range(N)])
    rho = 1.0 / N
    G = rho * sum(
        w[n, c] * torch.outer(delta[n, c], delta[n, c]) for n in range(N) for c in range(C)
    )
    mass = torch.zeros(C, K, dtype=torch.float64)
    means = torch.zeros(C, K, obj.dim, dtype=torch.float64)
    for c in range(C):
        for k in range(K):
            rows = (y == k).nonzero().flatten()
            mass[c, k] = rho * w[rows, c].sum()
            means[c, k] = (w[rows, c, None] * delta[rows, c]).sum(0) / w[rows, c].sum()
    within = rho * sum(
        w[n, c] * torch.outer(delta[n, c] - means[c, y[n]], delta[n, c] - means[c, y[n]])
        for n in range(N)
        for c in range(C)
    )
    if centring == "logit":
        centre = [(mass[:, k, None] * means[:, k]).sum(0) / mass[:, k].sum() for k in range(K)]
        cls = sum(mass[:, k].sum() * torch.outer(centre[k], centre[k]) for k in range(K))
        cross = sum(
            mass[c, k] * torch.outer(means[c, k] - centre[k], means[c, k] - centre[k])
            for c in range(C)
            for k in range(K)
        )
    else:
        centre = [(mass[c, :, None] * means[c]).sum(0) / mass[c].sum() for c in range(C)]
        cls = sum(mass[c].sum() * torch.outer(centre[c], centre[c]) for c in range(C))
        cross = sum(
            mass[c, k] * torch.outer(means[c, k] - centre[c], means[c, k] - centre[c])
            for c in range(C)
            for k in range(K)
        )
    return G, cls, cross, within


@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("centring", ["logit", "class"])
def test_the_decomposition_equals_its_definitions_and_sums_to_g(loss, centring):
    x, y = blobs(n=15)
    obj = Objective(tanh_net(width=4), loss, batches(x, y, 4))
    dec = papyan_decomposition(obj, centring=centring)
    G, cls, cross, within = _brute_force(obj, x, y, 3, centring)
    scale = float(G.abs().max())
    assert (dec.ggn.dense() - G).abs().max() < 1e-12 * scale
    assert (dec.class_part.dense() - cls).abs().max() < 1e-12 * scale
    assert (dec.cross_part.dense() - cross).abs().max() < 1e-12 * scale
    assert (dec.within_part.dense() - within).abs().max() < 1e-12 * scale
    total = dec.class_part.dense() + dec.cross_part.dense() + dec.within_part.dense()
    assert (total - G).abs().max() < 1e-12 * scale
    assert dec.class_part.rank_bound == 3 and dec.cross_part.rank_bound == 9
    if loss == "ce" and centring == "logit":  # Σ_c p_c δ_c = 0: the class part vanishes
        assert float(dec.class_part.dense().abs().max()) < 1e-14 * scale
    if loss == "ce" and centring == "class":
        assert len(dec.class_part.eigenpairs()[0]) == 2  # rank K - 1
    knock = dec.knockout("within").dense()
    assert (knock - cls - cross).abs().max() < 1e-12 * scale
    assert (dec.knockout("cross").dense() - cls - within).abs().max() < 1e-12 * scale


def test_class_pair_means_take_one_pass_and_refuse_batch_statistics():
    x, y = blobs(n=15)
    obj = Objective(tanh_net(), "ce", batches(x, y, 4))
    before = obj.passes
    pairs = class_pair_means(obj)
    assert obj.passes == before + 1 and pairs.counts.tolist() == [5, 5, 5]
    missing = Objective(tanh_net(), "ce", [(x[y < 2], y[y < 2])])
    with pytest.raises(ValueError, match=r"classes \[2\] have no sample"):
        class_pair_means(missing)
    bn = Objective(tanh_net(), "ce", [(x, y)], batchnorm="batch")
    with pytest.raises(ValueError, match="splits each batch by class"):
        class_pair_means(bn)


@pytest.mark.parametrize("centring", ["logit", "class"])
def test_paper_004_theorems_at_deep_neural_collapse(centring):
    """Theorems 4.1-4.3 on the deep linear UFM with exact DNC (note 004 §§3.8-3.10)."""
    K, L = 3, 3
    model, x, y = ufm_at_dnc(K=K, L=L)
    layer = model.layers[2]  # W_2: an inner layer
    obj = Objective(model, "mse_half", [(x, y)], params=[layer.weight])
    H = HessianOperator(obj)
    dense = H.dense()
    vals = np.linalg.eigvalsh(dense.numpy())[::-1]
    # Theorem 4.1: rank K², all outliers equal (1/K)‖a‖²‖h̄^(l)‖²
    left = model.layers[3].weight.detach()  # W_{L:l+1} = W_3
    feats = x @ model.layers[0].weight.detach().T
    feats = feats @ model.layers[1].weight.detach().T  # h^(2), the input of W_2
    lam_out = float(left[0].norm() ** 2 * feats[0].norm() ** 2 / K)
    assert np.allclose(vals[: K * K], lam_out, rtol=1e-12)
    assert np.abs(vals[K * K :]).max() < 1e-13 * lam_out
    pairs = top_eigenpairs(H, 2 * K * K + K, tol=1e-10)
    assert np.allclose(pairs.values.numpy()[: K * K], lam_out, rtol=1e-10)
    assert count_outliers(pairs.values.numpy()) == K * K
    # M11: the Kronecker vectors of the class means are eigenvectors (a(v) = 1)
    h_in, h_out = module_class_means(obj, layer, K)
    v = kronecker_vectors(h_out, h_in).reshape(K * K, -1).T
    assert (eigenvector_alignment(H, v) - 1).abs().max() < 1e-12
    # Theorem 4.3: the gradient lies in the top K² eigenspace, on the K diagonal vectors
    g = obj.gradient()
    assert top_fraction(g, pairs.vectors[:, : K * K]) == pytest.approx(1.0, abs=1e-12)
    coef = gradient_coefficients(g, v / v.norm(dim=0)).reshape(K, K)
    assert torch.allclose(coef.diagonal().abs(), torch.full((K,), K**-0.5, dtype=torch.float64))
    assert coef.fill_diagonal_(0).abs().max() < 1e-12
    # Theorem 4.2: G_within = 0, ranks K and K(K-1), equal eigenvalues, orthogonal images
    dec = papyan_decomposition(obj, centring=centring)
    assert (dec.ggn.dense() - dense).abs().max() < 1e-14
    assert float(dec.within_part.dense().abs().max()) < 1e-13 * lam_out
    cls_vals, _ = dec.class_part.eigenpairs()
    cross_vals, _ = dec.cross_part.eigenpairs()
    assert len(cls_vals) == K and len(cross_vals) == K * (K - 1)
    assert np.allclose(cls_vals.numpy(), lam_out, rtol=1e-12)
    assert np.allclose(cross_vals.numpy(), lam_out, rtol=1e-12)
    assert image_overlap(dec.class_part, dec.cross_part) < 1e-12
    for part, left_over in (("class", K * (K - 1)), ("cross", K), ("within", K * K)):
        knocked = np.linalg.eigvalsh(dec.knockout(part).dense().numpy())[::-1]
        assert count_outliers(knocked[: 2 * K * K + K]) == left_over, part


def test_subspace_overlap_is_the_trace_of_the_projectors():
    """M15: tr(P_U P_V)/k, by dense projectors; 1 for a rotated basis, 0 for orthogonal."""
    g = torch.Generator().manual_seed(0)
    Q = torch.linalg.qr(torch.randn(20, 20, generator=g, dtype=torch.float64))[0]
    U, W = Q[:, :3], Q[:, 3:7]
    R = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))[0]
    assert subspace_overlap(U, U @ R) == pytest.approx(1.0, abs=1e-14)
    assert subspace_overlap(U, W) == pytest.approx(0.0, abs=1e-14)
    V = torch.linalg.qr(torch.randn(20, 4, generator=g, dtype=torch.float64))[0]
    dense = float(torch.trace((U @ U.T) @ (V @ V.T))) / 3
    assert subspace_overlap(U, V) == pytest.approx(dense, rel=1e-12)
    with pytest.raises(ValueError, match="different dimensions"):
        subspace_overlap(U, V[:10])
