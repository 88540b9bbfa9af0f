"""Loss and accuracy of a classifier over a whole dataset."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from collapselab.checks import check_int
from collapselab.data.dataset import LabeledData
from collapselab.train.losses import per_sample_loss


def _model_dtype(model: nn.Module) -> torch.dtype | None:
    """The dtype of the model's first floating-point parameter or buffer, if any."""
    for tensor in list(model.parameters()) + list(model.buffers()):
        if tensor.is_floating_point():
            return tensor.dtype
    return None


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` becomes CUDA when available, else CPU; other values go to ``torch.device``."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"device must be 'cpu', 'cuda', 'cuda:<i>' or 'auto', got {device!r}"
        ) from err
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available; use 'cpu'")
    return resolved


def _eval_batches(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``(inputs, labels)`` batches of ``x, y`` in order, on the model's device, the inputs
    in its floating dtype, with the model in eval mode while they are drawn (its mode is
    restored afterwards). Gradient mode is the caller's."""
    batch_size = check_int("batch_size", batch_size, minimum=1)
    params = list(model.parameters())
    device = params[0].device if params else x.device
    dtype = _model_dtype(model)
    was_training = model.training
    model.eval()
    try:
        for start in range(0, int(y.shape[0]), batch_size):
            xb = x[start : start + batch_size].to(device)
            if dtype is not None and xb.is_floating_point():
                xb = xb.to(dtype)
            yield xb, y[start : start + batch_size].to(device)
    finally:
        model.train(was_training)


@torch.no_grad()
def _evaluate_tensors(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    loss: str = "ce",
    batch_size: int = 1024,
    mse_reduction: str = "mean",
    label_scale: float = 1.0,
) -> dict[str, float]:
    """Loss and accuracy of ``model`` (in eval mode) on inputs ``x`` and labels ``y``.

    Batches are moved to the model's device and floating dtype. Per-sample losses are summed
    in float64, so the result is the full-set mean whatever ``batch_size`` is.
    """
    n = int(y.shape[0])
    if n == 0:
        raise ValueError("cannot evaluate on an empty dataset")
    # 0-dim CPU zeros: the first sum moves them to the batches' device, exactly
    loss_sum = torch.zeros((), dtype=torch.float64)
    correct = torch.zeros((), dtype=torch.int64)
    for xb, yb in _eval_batches(model, x, y, batch_size):
        logits = model(xb)
        losses = per_sample_loss(logits, yb, loss, mse_reduction, label_scale)
        loss_sum = loss_sum + losses.to(torch.float64).sum()
        correct = correct + (logits.argmax(dim=1) == yb).sum()
    return {"loss": float(loss_sum) / n, "accuracy": int(correct) / n}


def evaluate(
    model: nn.Module,
    data: LabeledData,
    loss: str = "ce",
    batch_size: int = 1024,
    *,
    mse_reduction: str = "mean",
    label_scale: float = 1.0,
) -> dict[str, float]:
    """Mean loss and accuracy of ``model`` on ``data``, in eval mode, without gradients.

    Args:
        model: maps inputs ``(B, ...)`` to logits ``(B, C)``.
        data: the split to evaluate.
        loss: ``"ce"`` or ``"mse"``, with ``mse_reduction`` and ``label_scale`` as in
            :class:`collapselab.train.TrainConfig`.
        batch_size: evaluation batch size (does not change the result beyond rounding).

    Returns:
        ``{"loss": mean loss, "accuracy": fraction of argmax(logits) == y}``; the model's
        train/eval mode is restored afterwards.
    """
    if not isinstance(data, LabeledData):
        raise TypeError(f"data must be a LabeledData, got {type(data).__name__}")
    return _evaluate_tensors(model, data.x, data.y, loss, batch_size, mse_reduction, label_scale)
