r"""Paper 000's update rules behind the "four operations" (App. M.2-M.4, notes A19-A20).

* Momentum. The paper writes the dynamics as a one-step look-back (Eq. 27,
  ``W_{t+1} = W_t - η ∂L/∂W_t - m ∂L/∂W_{t-1}``) and unrolls it with heavy-ball
  coefficients and a plus sign (Eq. 28, ``W_{T+1} = W_0 + η Σ_t (1 - m^{T+1-t})/(1 - m)
  ∂L/∂W_t``). Neither matches the other, and Eq. 28's sign is wrong for descent. Three
  readings are offered by :func:`momentum_displacement`: ``"eq27"`` (the look-back as
  written), ``"published"`` (Eq. 28 as printed) and ``"corrected"`` (Eq. 28 with a minus:
  exactly PyTorch's heavy ball ``v ← m v + g``, ``W ← W - η v``, tested against
  ``torch.optim.SGD``). The paper's argument only needs the coefficients
  (:func:`momentum_coefficients`) to decrease in t.
* At fixed η a larger m also raises the effective step ``η / (1 - m)``
  (:func:`effective_learning_rate`): the equal-effective-learning-rate control of A19.
* L2 (Eq. 29): ``L = L^CE + λ‖W‖²`` gives ``W_{t+1} = (1 - 2ηλ) W_t - η ∇L^CE``, i.e.
  PyTorch's ``weight_decay = 2λ`` (:func:`l2_weight_decay`, A20).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from collapselab.checks import ArrayLike, as_real_tensor, check_choice, check_float, check_int

MOMENTUM_VARIANTS = ("corrected", "published", "eq27")


def momentum_coefficients(n_steps: int, momentum: float) -> np.ndarray:
    """Eq. 28's weights ``(1 - m^{T+1-t}) / (1 - m)`` of the gradients g_0..g_T.

    ``n_steps = T + 1``; they decrease in t from ``(1 - m^{T+1})/(1 - m)`` to 1 (all 1 for
    m = 0), which is the paper's argument that momentum keeps W_0's noise in W_{T+1}.
    """
    n = check_int("n_steps", n_steps, minimum=1)
    m = check_float("momentum", momentum, minimum=0.0, maximum=1.0)
    if m == 1.0:
        raise ValueError("momentum must be < 1 for the coefficients (1 - m^k)/(1 - m)")
    k = n - np.arange(n)  # T + 1 - t for t = 0..T
    return (1.0 - m**k) / (1.0 - m)


def momentum_displacement(
    grads: Sequence[ArrayLike], lr: float, momentum: float, variant: str = "corrected"
) -> torch.Tensor:
    """``W_{T+1} - W_0`` from the gradients ``g_t = ∂L/∂W_t``, t = 0..T (App. M.2).

    * ``"corrected"``: ``-η Σ_t (1 - m^{T+1-t})/(1 - m) g_t`` (heavy ball, PyTorch's SGD
      with ``momentum=m``, ``dampening=0``, started from ``v = 0``);
    * ``"published"``: Eq. 28 as printed, ``+η Σ_t (1 - m^{T+1-t})/(1 - m) g_t``;
    * ``"eq27"``: Eq. 27 unrolled, ``-η Σ_t g_t - m Σ_{t ≥ 1} g_{t-1}``.

    The gradients are those met along the trajectory (the unrolling is exact for any
    gradients; the readings differ only in how they weigh them).
    """
    variant = check_choice("variant", variant, MOMENTUM_VARIANTS)
    lr = check_float("lr", lr)
    if len(grads) == 0:
        raise ValueError("grads must hold at least one gradient (T + 1 >= 1)")
    g = torch.stack(
        [as_real_tensor(f"grads[{i}]", x).to(torch.float64) for i, x in enumerate(grads)]
    )
    if variant == "eq27":
        m = check_float("momentum", momentum, minimum=0.0)
        return -lr * g.sum(dim=0) - m * g[:-1].sum(dim=0)
    coef = torch.as_tensor(momentum_coefficients(g.shape[0], momentum), dtype=g.dtype)
    total = (coef.reshape(-1, *([1] * (g.ndim - 1))) * g).sum(dim=0)
    return lr * total if variant == "published" else -lr * total


def effective_learning_rate(lr: float, momentum: float) -> float:
    """``η / (1 - m)``: the step size heavy-ball momentum reaches for a steady gradient.

    A19's control: compare momentum m at η with no momentum at ``η / (1 - m)``.
    """
    lr = check_float("lr", lr, minimum=0.0, strict=True)
    m = check_float("momentum", momentum, minimum=0.0, maximum=1.0)
    if m == 1.0:
        raise ValueError("momentum must be < 1: the effective learning rate is infinite")
    return lr / (1.0 - m)


def l2_weight_decay(lam: float) -> float:
    """PyTorch's ``weight_decay`` for the paper's ``λ‖W‖²`` (Eq. 29, A20): ``2λ``."""
    return 2.0 * check_float("lam", lam, minimum=0.0)


def l2_step(weight: ArrayLike, grad_ce: ArrayLike, lr: float, lam: float) -> torch.Tensor:
    """One step of Eq. 29: ``W_{t+1} = (1 - 2ηλ) W_t - η ∇L^CE(W_t)``."""
    w = as_real_tensor("weight", weight).to(torch.float64)
    g = as_real_tensor("grad_ce", grad_ce).to(torch.float64)
    if w.shape != g.shape:
        raise ValueError(f"grad_ce has shape {tuple(g.shape)}; expected {tuple(w.shape)}")
    lr = check_float("lr", lr)
    return (1.0 - 2.0 * lr * check_float("lam", lam, minimum=0.0)) * w - lr * g


__all__ = [
    "MOMENTUM_VARIANTS",
    "effective_learning_rate",
    "l2_step",
    "l2_weight_decay",
    "momentum_coefficients",
    "momentum_displacement",
]
