"""SLQ's per-probe basis layout: the same tridiagonals, bit for bit, as the reference
formulation (``einsum`` over a ``(steps, P, probes)`` stack), and exact quadrature against a
dense float64 spectrum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.curvature import DenseOperator, HessianOperator, Objective, slq
from collapselab.curvature.density import lanczos_tridiagonal
from collapselab.curvature.trace import rademacher


def einsum_tridiagonal(op, V0: torch.Tensor, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference: every probe's basis stacked as ``(j, P, p)``, reorthogonalised by
    ``einsum`` (the implementation the layout replaced)."""
    p = V0.shape[1]
    V = V0 / V0.norm(dim=0, keepdim=True)
    stack = [V]
    alpha = torch.zeros(p, steps, dtype=V0.dtype)
    beta = torch.zeros(p, max(steps - 1, 0), dtype=V0.dtype)
    alive = torch.ones(p, dtype=torch.bool)
    for j in range(steps):
        W = op.matmat(stack[-1])
        alpha[:, j] = (W * stack[-1]).sum(0) * alive
        if j == steps - 1:
            break
        S = torch.stack(stack)
        for _ in range(2):
            W = W - torch.einsum("jip,jp->ip", S, torch.einsum("jip,ip->jp", S, W))
        b = W.norm(dim=0)
        alive = alive & (b > 1e-10 * alpha[:, : j + 1].abs().amax(dim=1).clamp_min(1e-300))
        beta[:, j] = torch.where(alive, b, torch.zeros_like(b))
        stack.append(torch.where(alive, W / b.clamp_min(1e-300), torch.zeros_like(W)))
    return alpha, beta


def small_mlp_hessian(dtype: torch.dtype) -> HessianOperator:
    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)
    ).to(dtype)
    x = torch.randn(64, 12, generator=gen, dtype=dtype)
    y = torch.randint(0, 4, (64,), generator=gen)
    return HessianOperator(Objective(model, "ce", [(x, y)]), block=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("probes", "steps"), [(1, 1), (1, 40), (2, 2), (2, 40), (3, 60)])
def test_layout_matches_einsum_bit_for_bit(dtype: torch.dtype, probes: int, steps: int) -> None:
    op = small_mlp_hessian(dtype)  # P = 340: the small-product branch, then BLAS
    V0 = rademacher(
        op.dim, probes, torch.Generator().manual_seed(steps), torch.empty(0, dtype=dtype)
    )
    a, b = lanczos_tridiagonal(op, V0, steps)
    a_ref, b_ref = einsum_tridiagonal(op, V0, steps)
    assert torch.equal(a, a_ref) and torch.equal(b, b_ref)


@pytest.mark.parametrize("probes", [1, 3])
def test_invariant_space_matches_einsum(probes: int) -> None:
    gen = torch.Generator().manual_seed(5)
    A = torch.randn(120, 120, generator=gen, dtype=torch.float64)
    A = A + A.T
    A[:, :3] = 0.0
    A[:3, :] = 0.0
    op = DenseOperator(A)
    V0 = rademacher(120, probes, torch.Generator().manual_seed(1), torch.empty(0, dtype=op.dtype))
    a, b = lanczos_tridiagonal(op, V0, 120)
    a_ref, b_ref = einsum_tridiagonal(op, V0, 120)
    assert torch.equal(a, a_ref) and torch.equal(b, b_ref)


def test_full_krylov_space_is_exact_against_dense_float64() -> None:
    """With ``steps = P`` every probe's quadrature integrates the spectrum exactly: the
    first moments of the density equal ``tr(A^m) / P`` of the dense float64 matrix (to the
    probes' sampling, so one probe's ``v^T A^m v`` is checked against the dense product)."""
    op = small_mlp_hessian(torch.float64)
    H = op.dense()
    H = (H + H.T) / 2
    V0 = rademacher(op.dim, 2, torch.Generator().manual_seed(3), torch.empty(0, dtype=op.dtype))
    density = slq(op, steps=op.dim, probes=2, seed=3)
    for q in range(2):
        v = V0[:, q] / V0[:, q].norm()
        for m in (1, 2, 3):
            exact = float(v @ torch.linalg.matrix_power(H, m) @ v)
            quad = float(np.sum(density.weights[q] * density.nodes[q] ** m))
            assert quad == pytest.approx(exact, rel=1e-8, abs=1e-12 * float(H.abs().max()) ** m)
