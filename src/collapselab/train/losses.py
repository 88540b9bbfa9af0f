"""Training losses with explicit reductions (see :mod:`collapselab.train.config`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from collapselab.checks import check_choice
from collapselab.train.config import LOSSES, MSE_REDUCTIONS


def _check_inputs(
    logits: torch.Tensor, labels: torch.Tensor, loss: str, mse_reduction: str
) -> None:
    check_choice("loss", loss, LOSSES)
    check_choice("mse_reduction", mse_reduction, MSE_REDUCTIONS)
    if not isinstance(logits, torch.Tensor) or logits.ndim != 2:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"model output must be a (batch, n_classes) tensor, got {shape}")
    if labels.ndim != 1 or labels.shape[0] != logits.shape[0]:
        raise ValueError(
            f"labels must have shape ({logits.shape[0]},) to match the logits, "
            f"got {tuple(labels.shape)}"
        )
    if labels.dtype != torch.long:
        raise TypeError(f"labels must be int64 (torch.long), got {labels.dtype}")


def mse_targets(
    labels: torch.Tensor, n_classes: int, label_scale: float, like: torch.Tensor
) -> torch.Tensor:
    """``label_scale * one_hot(labels)`` with the dtype and device of ``like``."""
    return F.one_hot(labels, n_classes).to(dtype=like.dtype) * label_scale


def training_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    loss: str = "ce",
    mse_reduction: str = "mean",
    label_scale: float = 1.0,
) -> torch.Tensor:
    """The scalar training loss of a batch.

    * ``"ce"``: ``(1/B) sum_i -log softmax(z_i)[y_i]`` (``F.cross_entropy``).
    * ``"mse"``, ``"mean"``: ``(1/(B C)) sum_i ||z_i - s e_{y_i}||^2`` (``nn.MSELoss()``;
      paper 003's notebook).
    * ``"mse"``, ``"sum_classes"``: ``(1/B) sum_i ||z_i - s e_{y_i}||^2``.

    Here ``z_i`` are the logits (B, C), ``e_c`` the one-hot vectors, ``s = label_scale``.
    """
    _check_inputs(logits, labels, loss, mse_reduction)
    if loss == "ce":
        return F.cross_entropy(logits, labels)
    targets = mse_targets(labels, logits.shape[1], label_scale, logits)
    if mse_reduction == "mean":
        return F.mse_loss(logits, targets)
    return F.mse_loss(logits, targets, reduction="sum") / logits.shape[0]


def per_sample_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    loss: str = "ce",
    mse_reduction: str = "mean",
    label_scale: float = 1.0,
) -> torch.Tensor:
    """Per-sample losses (B,) whose mean is :func:`training_loss` (up to rounding).

    For ``"mse"``/``"mean"`` a sample's loss is its mean over classes, so averaging over any
    split of the data gives the ``nn.MSELoss()`` value of the whole set.
    """
    _check_inputs(logits, labels, loss, mse_reduction)
    if loss == "ce":
        return F.cross_entropy(logits, labels, reduction="none")
    targets = mse_targets(labels, logits.shape[1], label_scale, logits)
    sq = (logits - targets).pow(2)
    return sq.mean(dim=1) if mse_reduction == "mean" else sq.sum(dim=1)
