"""Argument checks and initialisers shared by the model modules (private)."""

from __future__ import annotations

import math

import torch
from torch import nn

from collapselab.checks import check_float


def _scaled_channels(channels: int, width_multiplier: float) -> int:
    """``round(channels * width_multiplier)``, at least 1 (cheap test instances)."""
    return max(1, round(channels * width_multiplier))


def _check_width_multiplier(value: object) -> float:
    return check_float("width_multiplier", value, minimum=0.0, strict=True)


def _check_features_input(x: torch.Tensor, in_dim: int) -> None:
    """Inputs to vector models: ``(N, ...)`` with ``prod(...) == in_dim``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (N, ...) with a batch dimension, got {tuple(x.shape)}")
    n_features = math.prod(x.shape[1:])
    if n_features != in_dim:
        raise ValueError(
            f"x has {n_features} features per sample (shape {tuple(x.shape)}), "
            f"expected in_dim={in_dim}"
        )


def _check_image_input(x: torch.Tensor, in_channels: int, min_size: int = 1) -> None:
    """Inputs to convolutional models: ``(N, in_channels, H, W)``, ``H, W >= min_size``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 4 or x.shape[1] != in_channels:
        raise ValueError(
            f"x must have shape (N, {in_channels}, H, W), got {tuple(x.shape)} "
            f"(in_channels={in_channels})"
        )
    if min(x.shape[2], x.shape[3]) < min_size:
        raise ValueError(
            f"x has spatial size {tuple(x.shape[2:])}; this model needs H, W >= {min_size}"
        )


def _normal_(weight: torch.Tensor, variance: float) -> None:
    """Fill ``weight`` in place with i.i.d. N(0, variance) entries."""
    with torch.no_grad():
        weight.normal_(0.0, math.sqrt(variance))


def _uniform_(weight: torch.Tensor, variance: float) -> None:
    """Fill ``weight`` with i.i.d. U(-a, a) entries, a = sqrt(3 variance) (same variance)."""
    bound = math.sqrt(3.0 * variance)
    with torch.no_grad():
        weight.uniform_(-bound, bound)


def _kaiming_conv_bn_init(module: nn.Module) -> None:
    """He-normal (fan_out, ReLU gain) convolutions, BatchNorm scale 1 / shift 0.

    Conv weights get variance ``2 / (out_channels * kh * kw)`` (He et al. 2015, fan-out
    mode), the torchvision default for ResNets; conv biases (if any) are zeroed. Linear
    layers are left at PyTorch's default unless the caller re-initialises them.
    """
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) and m.affine:
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
