r"""Per-sample losses of the outputs, with the derivatives curvature needs.

A curvature operator needs more of its loss than its value: the Gauss–Newton matrix needs
the Hessian of the loss with respect to the network's outputs ``f`` (``C`` logits per
sample), and Papyan's decomposition needs that Hessian written as a weighted sum of outer
products of ``C`` vectors. :class:`OutputLoss` gives all three for the losses whose output
Hessian is known in closed form and positive semi-definite:

* ``"ce"``: cross-entropy :math:`\ell(f, y) = -\log p_y`, :math:`p = \mathrm{softmax}(f)`,

  .. math::
      \nabla_f \ell = p - e_y, \qquad
      \nabla_f^2 \ell = \mathrm{diag}(p) - p p^\top
      = \sum_{c=1}^{C} p_c\,(e_c - p)(e_c - p)^\top ;

* ``"mse"``, ``"mse_sum"``, ``"mse_half"``: :math:`\ell(f, y) = s\,\lVert f - e_y\rVert^2`
  with :math:`s = 1/C` (``nn.MSELoss()`` per sample, the training loop's ``"mse"``),
  :math:`s = 1` (``"sum_classes"``) and :math:`s = 1/2` (papers 003 and 004),

  .. math::
      \nabla_f \ell = 2s\,(f - e_y), \qquad
      \nabla_f^2 \ell = 2s\,I_C = \sum_{c=1}^{C} 2s\, e_c e_c^\top .

The decomposition :math:`\nabla_f^2\ell = \sum_c w_c\,u_c u_c^\top` (weights :math:`w_c \ge 0`,
vectors :math:`u_c`) is what :meth:`OutputLoss.factors` returns; for cross-entropy
:math:`\sum_c w_c u_c = 0`.

Any other loss (a callable, ``nn.NLLLoss``, label smoothing, class weights) is refused by
:func:`resolve_loss` with an error naming what it accepts: the Hessian operator alone could
use any twice-differentiable loss, but one loss object serves every operator here, and the
GGN, the empirical Fisher and Papyan's decomposition need the closed forms above.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

LOSSES = ("ce", "mse", "mse_sum", "mse_half")
"""The loss names :func:`resolve_loss` accepts."""

_MSE_SCALES = {"mse_sum": 1.0, "mse_half": 0.5}


@dataclass(frozen=True)
class OutputLoss:
    """A per-sample loss of the outputs ``f (B, C)`` and labels ``y (B,)``.

    Attributes:
        name: one of :data:`LOSSES`.
        scale: ``s`` of the MSE losses (``None`` for ``"ce"`` and for ``"mse"``, whose
            ``s = 1/C`` depends on the number of outputs).
    """

    name: str
    scale: float | None = None

    def mse_scale(self, n_outputs: int) -> float:
        """``s`` of ``s‖f − e_y‖²`` for ``C = n_outputs`` (MSE losses only)."""
        return 1.0 / n_outputs if self.scale is None else self.scale

    def value(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-sample losses ``(B,)``."""
        target = _one_hot(y, f)
        if self.name == "ce":  # log-sum-exp form: forward-mode AD of nll_loss is scripted
            return torch.logsumexp(f, dim=-1) - (f * target).sum(-1)
        return self.mse_scale(f.shape[-1]) * (f - target).pow(2).sum(-1)

    def gradient(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``∇_f ℓ`` per sample, ``(B, C)``."""
        target = _one_hot(y, f)
        if self.name == "ce":
            return torch.softmax(f, dim=-1) - target
        return 2.0 * self.mse_scale(f.shape[-1]) * (f - target)

    def hessian_apply(self, f: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``∇²_f ℓ · v`` per sample for ``v (..., B, C)`` (leading dimensions broadcast)."""
        if self.name == "ce":
            p = torch.softmax(f, dim=-1)
            return p * v - p * (v * p).sum(-1, keepdim=True)
        return 2.0 * self.mse_scale(f.shape[-1]) * v

    def factors(self, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(w (B, C), u (C, B, C))`` with ``∇²_f ℓ_i = Σ_c w[i, c] u[c, i] u[c, i]ᵀ``.

        Cross-entropy: ``w = p``, ``u[c, i] = e_c − p_i``. MSE: ``w = 2s``, ``u[c, i] = e_c``.
        """
        n, c = f.shape
        eye = torch.eye(c, dtype=f.dtype, device=f.device)
        if self.name == "ce":
            p = torch.softmax(f, dim=-1)
            return p, eye[:, None, :] - p[None, :, :]
        w = torch.full((n, c), 2.0 * self.mse_scale(c), dtype=f.dtype, device=f.device)
        return w, eye[:, None, :].expand(c, n, c)

    def __str__(self) -> str:
        return self.name


def _one_hot(y: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """``e_y`` rows in ``f``'s dtype (a comparison, which :func:`torch.func.vmap` batches)."""
    classes = torch.arange(f.shape[-1], device=f.device)
    return (y[..., None] == classes).to(f.dtype)


def loss_reduction(loss: object) -> str | None:
    """How a loss module reduces over the batch (its ``reduction``: ``"mean"``, ``"sum"`` or
    ``"none"``); ``None`` for a loss given by name, which says nothing about it."""
    if isinstance(loss, nn.CrossEntropyLoss | nn.MSELoss):
        return str(loss.reduction)
    return None


def resolve_loss(loss: object) -> OutputLoss:
    """An :class:`OutputLoss` from a name of :data:`LOSSES`, an ``nn.CrossEntropyLoss`` or an
    ``nn.MSELoss``. The module's per-sample convention: ``nn.MSELoss()`` averages over the
    ``B x C`` entries, so per sample it is ``"mse"`` (the mean over the ``C`` outputs);
    ``nn.MSELoss(reduction="sum")`` sums them, ``"mse_sum"`` per sample. How the samples
    are reduced (the module's ``reduction``) is the objective's
    (:class:`~collapselab.curvature.Objective`).

    Raises:
        ValueError: any other loss, naming what is accepted and why.
    """
    if isinstance(loss, OutputLoss):
        return loss
    if isinstance(loss, str):
        if loss == "ce":
            return OutputLoss("ce")
        if loss == "mse":
            return OutputLoss("mse")
        if loss in _MSE_SCALES:
            return OutputLoss(loss, _MSE_SCALES[loss])
    if isinstance(loss, nn.CrossEntropyLoss):
        if loss.weight is None and loss.label_smoothing == 0.0:
            return OutputLoss("ce")
    elif isinstance(loss, nn.MSELoss):
        return OutputLoss("mse_sum", 1.0) if loss.reduction == "sum" else OutputLoss("mse")
    raise ValueError(
        f"loss must be one of {LOSSES}, an nn.CrossEntropyLoss (no class weights, no label "
        f"smoothing) or an nn.MSELoss, got {loss!r}: the Gauss-Newton matrix, the empirical "
        "Fisher and Papyan's decomposition need the loss's Hessian in the outputs in closed "
        "form (see collapselab.curvature.losses)"
    )
