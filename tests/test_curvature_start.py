"""top_eigenpairs' start block (single-vector Lanczos), the fused cross-entropy Hessian and
the reporting of residuals and of unconverged runs, against dense float64 Hessians."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from collapselab.curvature import HessianOperator, Objective, top_eigenpairs
from tests._curvature import blobs, tanh_net


def problem(dtype: torch.dtype = torch.float64):
    """A tanh net with P = 160 (above the default max_dim of 40: restarts happen) and its
    dense float64 Hessian by torch.autograd.functional.hessian of F.cross_entropy."""
    model = tanh_net(seed=3, d=8, width=12, classes=4)
    x, y = blobs(n=48, d=8, classes=4, seed=2)
    obj64 = Objective(model, "ce", [(x, y)])

    def loss(theta: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(obj64.forward(theta, x), y)

    H = torch.autograd.functional.hessian(loss, obj64.theta)
    H = (H + H.T) / 2
    if dtype == torch.float64:
        return obj64, H
    low = copy.deepcopy(model).to(dtype)
    return Objective(low, "ce", [(x.to(dtype), y)]), H


def true_residuals(H: torch.Tensor, values: torch.Tensor, vectors: torch.Tensor):
    X = vectors.to(torch.float64)
    return (H @ X - X * values.to(torch.float64)).norm(dim=0)


@pytest.mark.parametrize("start", [1, 3, "tensor"])
def test_start_blocks_give_the_dense_top_k(start):
    obj, H = problem()
    if start == "tensor":
        start = torch.randn(
            obj.dim, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(5)
        )
    exact = torch.linalg.eigvalsh(H).flip(0)
    k = 6
    pairs = top_eigenpairs(HessianOperator(obj), k, tol=1e-9, start=start)
    assert pairs.converged
    scale = float(exact.abs().max())
    assert torch.allclose(pairs.values, exact[:k], atol=1e-9 * scale, rtol=0)
    # the reported residuals are the residuals, and meet the tolerance
    res = true_residuals(H, pairs.values, pairs.vectors)
    assert torch.allclose(pairs.residuals, res, atol=1e-10 * scale, rtol=1e-6)
    assert float(res.max()) <= 1e-9 * scale * (1 + 1e-6)
    eye = torch.eye(k, dtype=torch.float64)
    assert torch.allclose(pairs.vectors.T @ pairs.vectors, eye, atol=1e-10)


def test_single_vector_start_uses_fewer_products_than_the_default():
    obj, _ = problem()
    default = top_eigenpairs(HessianOperator(obj), 6, tol=1e-6)
    single = top_eigenpairs(HessianOperator(obj), 6, tol=1e-6, start=1)
    assert single.converged and default.converged
    assert single.products < default.products


def test_a_start_in_an_invariant_subspace_still_grows_to_k():
    obj, H = problem()
    vals, vecs = torch.linalg.eigh(H)
    exact = vals.flip(0)
    start = vecs[:, -1:]  # the top eigenvector: its Krylov space is itself
    pairs = top_eigenpairs(HessianOperator(obj), 4, tol=1e-9, start=start)
    assert pairs.converged
    assert torch.allclose(pairs.values, exact[:4], atol=1e-9 * float(exact[0]), rtol=0)


def test_float32_single_vector_start_meets_its_tolerance_against_float64():
    obj32, H = problem(torch.float32)
    tol = 1e-3
    pairs = top_eigenpairs(HessianOperator(obj32, fused_ce=True), 6, tol=tol, start=1)
    exact = torch.linalg.eigvalsh(H).flip(0)
    scale = float(exact.abs().max())
    assert pairs.converged
    assert float(pairs.residuals.max()) <= tol * float(pairs.values.abs().max())
    # against the float64 Hessian: the tolerance plus float32 rounding of the products
    assert float(true_residuals(H, pairs.values, pairs.vectors).max()) <= (tol + 1e-5) * scale
    assert float((pairs.values.double() - exact[:6]).abs().max()) <= tol * scale


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fused_ce_is_the_same_hessian(dtype):
    obj, H = problem(dtype)
    fused = HessianOperator(obj, fused_ce=True).dense().double()
    plain = HessianOperator(obj).dense().double()
    atol = 1e-12 if dtype == torch.float64 else 1e-6
    scale = float(H.abs().max())
    assert torch.allclose(fused, H, atol=atol * scale, rtol=0)
    assert torch.allclose(plain, H, atol=atol * scale, rtol=0)


def test_fused_ce_leaves_other_losses_alone():
    model = tanh_net(seed=3, d=8, width=12, classes=4)
    x, y = blobs(n=48, d=8, classes=4, seed=2)
    obj = Objective(model, "mse", [(x, y)])
    V = torch.randn(obj.dim, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    a = HessianOperator(obj, fused_ce=True).matmat(V)
    b = HessianOperator(obj).matmat(V)
    assert torch.equal(a, b)


@pytest.mark.parametrize("start", [None, 1])
def test_an_unconverged_run_says_so_with_its_true_residuals(start):
    obj, H = problem()
    k, tol = 6, 1e-10
    pairs = top_eigenpairs(HessianOperator(obj), k, tol=tol, start=start, max_products=12)
    assert not pairs.converged
    assert pairs.values.shape == (k,) and pairs.vectors.shape == (obj.dim, k)
    res = true_residuals(H, pairs.values, pairs.vectors)
    scale = float(pairs.values.abs().max())
    assert torch.allclose(pairs.residuals, res, atol=1e-10 * scale, rtol=1e-6)
    assert float(res.max()) > tol * scale  # not converged, and visibly so


def test_bad_start_blocks_are_refused():
    obj, _ = problem()
    op = HessianOperator(obj)
    with pytest.raises(ValueError, match="start"):
        top_eigenpairs(op, 4, start=torch.ones(obj.dim + 1, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="NaN"):
        top_eigenpairs(op, 4, start=torch.full((obj.dim, 1), float("nan"), dtype=torch.float64))
    with pytest.raises(ValueError, match="start"):
        top_eigenpairs(op, 4, start=0)
    with pytest.raises(ValueError, match="start"):
        top_eigenpairs(op, 4, start=45)


@pytest.mark.parametrize(
    ("which", "block", "max_dim"), [("SA", 1, None), ("LM", 1, 12), ("LA", 3, None)]
)
def test_single_vector_start_other_ends_blocks_and_restarts(which, block, max_dim):
    obj, H = problem()
    vals = torch.linalg.eigvalsh(H)
    order = {"LA": vals.flip(0), "SA": vals, "LM": vals[vals.abs().argsort(descending=True)]}
    k = 4
    pairs = top_eigenpairs(
        HessianOperator(obj), k, which=which, tol=1e-9, start=1, block=block, max_dim=max_dim
    )
    assert pairs.converged
    scale = float(vals.abs().max())
    assert torch.allclose(pairs.values, order[which][:k], atol=1e-8 * scale, rtol=0)
    res = true_residuals(H, pairs.values, pairs.vectors)
    assert float(res.max()) <= 1e-9 * scale * (1 + 1e-6)
