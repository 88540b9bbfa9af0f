"""Small float64 problems for the curvature tests, and dense autograd references."""

from __future__ import annotations

import torch
from torch import nn

from collapselab.curvature import Objective
from collapselab.models import DeepLinear


def tanh_net(seed: int = 0, d: int = 4, width: int = 5, classes: int = 3) -> nn.Module:
    """A smooth two-layer network (its Hessian differs from its GGN)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, width), nn.Tanh(), nn.Linear(width, classes)).double()


def blobs(n: int = 18, d: int = 4, classes: int = 3, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(classes).repeat_interleave(n // classes)
    x = torch.randn(len(y), d, generator=g, dtype=torch.float64) + y[:, None].double()
    return x, y


def batches(x: torch.Tensor, y: torch.Tensor, size: int = 7) -> list:
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(y), size)]


def full_loss(obj: Objective, x: torch.Tensor, y: torch.Tensor):
    """L(θ) of the objective on all of (x, y), for dense autograd references."""

    def fn(theta: torch.Tensor) -> torch.Tensor:
        total = obj.loss.value(obj.forward(theta, x), y).sum()
        return total / len(y) if obj.reduction == "mean" else total

    return fn


def jacobians(obj: Objective, x: torch.Tensor) -> torch.Tensor:
    """Per-sample Jacobians (N, C, P) by autograd."""
    return torch.autograd.functional.jacobian(lambda t: obj.forward(t, x), obj.theta)


def ufm_at_dnc(K: int = 3, n: int = 4, d: int = 6, L: int = 3, seed: int = 0):
    """A deep linear UFM (paper 004) with exact deep neural collapse.

    Returns ``(model, x, y)``: ``x`` the one-hot sample indices (``N = K n``), ``y`` the
    class-major labels; ``model.layers[0].weight`` is ``H_1 = H̄_1 ⊗ 1_nᵀ`` and
    ``model.layers[l].weight`` is ``W_l = σ_l U_{l+1} U_lᵀ`` with orthonormal frames
    ``U_l (d, K)``, ``U_{L+1} = I_K`` (note 004 §3.6's constructor; the scales are arbitrary:
    the structure is what Theorems 4.1-4.3 use).
    """
    g = torch.Generator().manual_seed(seed)
    N = K * n
    model = DeepLinear([N] + [d] * L + [K]).double()
    frames = [
        torch.linalg.qr(torch.randn(d, K, generator=g, dtype=torch.float64))[0] for _ in range(L)
    ] + [torch.eye(K, dtype=torch.float64)]
    scales = [0.7 + 0.2 * i for i in range(L)]
    with torch.no_grad():
        means = 0.9 * frames[0]  # h̄_k^{(1)} = 0.9 U_1[:, k]
        model.layers[0].weight.copy_(means.repeat_interleave(n, dim=1))
        for i in range(1, L + 1):
            model.layers[i].weight.copy_(scales[i - 1] * frames[i] @ frames[i - 1].T)
    x = torch.eye(N, dtype=torch.float64)
    y = torch.arange(K).repeat_interleave(n)
    return model, x, y
