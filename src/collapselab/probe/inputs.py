"""Where and in what dtype a model takes its inputs.

A measurement that runs a model on a loader's batches (the Monitor's data pass, a family's
own pass) moves floating inputs to the model's device and floating dtype, so that a float64
model gets float64 inputs from a float32 loader, and leaves integer inputs (token ids)
their dtype.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn


def first_param(model: nn.Module) -> torch.Tensor | None:
    """The first floating parameter or buffer (its device and dtype are the model's)."""
    for t in itertools.chain(model.parameters(), model.buffers()):  # lazily: the first wins
        if t.is_floating_point():
            return t
    return None


def model_inputs(model: nn.Module, x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``x`` on ``device``, and in the model's floating dtype when ``x`` is floating."""
    first = first_param(model)
    if first is not None and x.is_floating_point():
        return x.to(device=device, dtype=first.dtype)
    return x.to(device)


__all__ = ["first_param", "model_inputs"]
