"""Convolutional pre-activation ResNets of the progressive-collapse paper (001, Table I)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from collapselab.checks import check_bool, check_int
from collapselab.models._common import (
    _check_image_input,
    _check_width_multiplier,
    _kaiming_conv_bn_init,
    _scaled_channels,
)


class _PreActBlock(nn.Module):
    r"""``x + v(x)``, ``v = Conv3x3(ReLU(BN(Conv3x3(ReLU(BN(x))))))`` (He et al. 2016).

    Shape-preserving (stride 1, padding 1), so every block of a stage has the same
    ``C x H x W`` as the stage's first input. Modules: ``norm1, act1, conv1, norm2, act2,
    conv2``.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(channels)
        self.act1 = nn.ReLU()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm2 = nn.BatchNorm2d(channels)
        self.act2 = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = self.conv1(self.act1(self.norm1(x)))
        v = self.conv2(self.act2(self.norm2(v)))
        return x + v


class _Transition(nn.Module):
    """``Conv3x3(stride)(ReLU(BN(x)))``: changes channels and resolution between stages.

    A separate (non-residual) layer, so that all blocks of a stage are ``x + v(x)`` maps at
    constant dimension (001's "x + v(x)" picture); its output is the stage's "layer0".
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(in_channels)
        self.act = nn.ReLU()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.act(self.norm(x)))


class _Stage(nn.Module):
    def __init__(self, in_channels: int, channels: int, n_blocks: int, stride: int, first: bool):
        super().__init__()
        if not first:
            self.transition = _Transition(in_channels, channels, stride)
        self.blocks = nn.ModuleList(_PreActBlock(channels) for _ in range(n_blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "transition"):
            x = self.transition(x)
        for blk in self.blocks:
            x = blk(x)
        return x


def _check_stages(stages: object) -> list[tuple[int, int, int]]:
    if isinstance(stages, (str, bytes)) or not isinstance(stages, Sequence) or not stages:
        raise ValueError(
            "stages must be a non-empty sequence of (channels, n_blocks, stride) tuples, "
            f"got {stages!r}"
        )
    out = []
    for i, spec in enumerate(stages):
        if not isinstance(spec, Sequence) or len(spec) != 3:
            raise ValueError(f"stages[{i}] must be (channels, n_blocks, stride), got {spec!r}")
        c, n, s = spec
        out.append(
            (
                check_int(f"stages[{i}] channels", c, minimum=1),
                check_int(f"stages[{i}] n_blocks", n, minimum=1),
                check_int(f"stages[{i}] stride", s, minimum=1),
            )
        )
    return out


class ConvResNet(nn.Module):
    r"""Pre-activation convolutional ResNet organised in stages of constant shape (001).

    Architecture, for ``stages = [(C_0, n_0, s_0), (C_1, n_1, s_1), ...]``:

    * ``stem``: ``Conv(in_channels -> C_0, k x k, stride s_0, padding k // 2)``; its output
      is stage 0's "layer0";
    * stage ``i > 0`` starts with ``stages.{i}.transition``: BN-ReLU-Conv3x3 with stride
      ``s_i`` from ``C_{i-1}`` to ``C_i`` channels (a separate layer, not a residual block);
    * every stage has ``n_i`` pre-activation residual blocks
      ``stages.{i}.blocks.{j}``: ``x + Conv3x3(ReLU(BN(Conv3x3(ReLU(BN(x))))))``;
    * head: optional BN-ReLU ``head`` (``final_norm=True``), ``pool`` (global average),
      ``flatten``, ``classifier`` (``nn.Linear(C_last, n_classes)``).

    A 3x3 convolution with padding 1 and stride s maps H to ``ceil(H / s)``, so the
    feature shape of stage i is ``C_i x (H / prod s) x (W / prod s)``. Each row of 001's
    Table I is a preset (:func:`pfc_fashion_mnist` etc.). 001 leaves stem, transitions,
    block internals and head unspecified (its ambiguity 6); the choices above are ours.

    Init: He-normal (fan-out) convolutions, BatchNorm scale 1 / shift 0, PyTorch default
    for the classifier.

    ``feature_layers`` lists every stage's :meth:`stage_layers` in order: the stage input
    ("layer0": ``stem`` or ``stages.{i}.transition``) then each block output, all of shape
    ``(N, C_i, H_i, W_i)``. ``penultimate = "flatten"`` (pooled features, ``(N, C_last)``).
    001 measures the last stage: ``model.stage_layers(-1)``.

    Args:
        in_channels: input channels.
        n_classes: number of outputs.
        stages: ``(channels, n_blocks, stride)`` per stage; ``stride`` is the downsampling
            factor of the stage's first layer (stem for stage 0, transition after).
        stem_kernel: odd stem kernel size (3 by default).
        width_multiplier: scales every channel count (rounded, at least 1); cheap tests.
        final_norm: add a BN-ReLU ``head`` before pooling (as in He et al. 2016).
    """

    def __init__(
        self,
        in_channels: int,
        n_classes: int,
        stages: Sequence[tuple[int, int, int]],
        stem_kernel: int = 3,
        width_multiplier: float = 1.0,
        final_norm: bool = False,
    ) -> None:
        super().__init__()
        self.in_channels = check_int("in_channels", in_channels, minimum=1)
        self.n_classes = check_int("n_classes", n_classes, minimum=1)
        specs = _check_stages(stages)
        stem_kernel = check_int("stem_kernel", stem_kernel, minimum=1)
        if stem_kernel % 2 == 0:
            raise ValueError(f"stem_kernel must be odd, got {stem_kernel}")
        mult = _check_width_multiplier(width_multiplier)
        self.final_norm = check_bool("final_norm", final_norm)
        self.stage_specs = [(_scaled_channels(c, mult), n, s) for c, n, s in specs]

        c0, _, s0 = self.stage_specs[0]
        self.stem = nn.Conv2d(
            self.in_channels, c0, stem_kernel, stride=s0, padding=stem_kernel // 2, bias=False
        )
        prev = c0
        stage_modules = []
        for i, (c, n, s) in enumerate(self.stage_specs):
            stage_modules.append(_Stage(prev, c, n, s, first=(i == 0)))
            prev = c
        self.stages = nn.ModuleList(stage_modules)
        if self.final_norm:
            self.head = nn.Sequential(nn.BatchNorm2d(prev), nn.ReLU())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.classifier = nn.Linear(prev, self.n_classes)
        _kaiming_conv_bn_init(self)

    @property
    def n_stages(self) -> int:
        return len(self.stage_specs)

    def stage_layers(self, stage_index: int) -> list[str]:
        """Names of stage ``stage_index``'s "layer0" (input of its first block) and blocks.

        Negative indices count from the end (``-1``: the last stage, as measured in 001).
        All listed outputs share one shape ``(N, C_i, H_i, W_i)``.
        """
        n = self.n_stages
        i = check_int("stage_index", stage_index, minimum=-n, maximum=n - 1) % n
        layer0 = "stem" if i == 0 else f"stages.{i}.transition"
        n_blocks = self.stage_specs[i][1]
        return [layer0, *(f"stages.{i}.blocks.{j}" for j in range(n_blocks))]

    @property
    def feature_layers(self) -> list[str]:
        return [name for i in range(self.n_stages) for name in self.stage_layers(i)]

    @property
    def penultimate(self) -> str:
        return "flatten"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(N, n_classes)`` for images ``(N, in_channels, H, W)``."""
        _check_image_input(x, self.in_channels)
        h = self.stem(x)
        for stage in self.stages:
            h = stage(h)
        if self.final_norm:
            h = self.head(h)
        return self.classifier(self.flatten(self.pool(h)))


#: 001 Table I, convolutional rows: input shape, class count and stages
#: ``(channels, n_blocks, stride)`` whose outputs are the table's intermediate dims.
PFC_TABLE_I: dict[str, dict[str, Any]] = {
    "pfc_fashion_mnist": {
        "input_shape": (1, 28, 28),
        "n_classes": 10,
        "stages": ((32, 5, 2), (64, 4, 2)),
    },
    "pfc_cifar10": {
        "input_shape": (3, 32, 32),
        "n_classes": 10,
        "stages": ((64, 2, 2), (128, 3, 2), (256, 4, 2)),
    },
    "pfc_stl10": {
        "input_shape": (3, 96, 96),
        "n_classes": 10,
        "stages": ((64, 5, 2), (128, 5, 2), (256, 5, 2), (512, 5, 2)),
    },
    "pfc_cifar100": {
        "input_shape": (3, 32, 32),
        "n_classes": 100,
        "stages": ((64, 3, 1), (128, 3, 2), (256, 4, 2), (512, 4, 2)),
    },
}


def _preset(name: str, n_classes: int | None, width_multiplier: float, **kwargs: Any) -> ConvResNet:
    row = PFC_TABLE_I[name]
    return ConvResNet(
        in_channels=row["input_shape"][0],
        n_classes=row["n_classes"] if n_classes is None else n_classes,
        stages=row["stages"],
        width_multiplier=width_multiplier,
        **kwargs,
    )


def pfc_fashion_mnist(
    n_classes: int | None = None, width_multiplier: float = 1.0, **kwargs: Any
) -> ConvResNet:
    """001 Table I, Fashion-MNIST: 1x28x28 -> 32x14x14 (5 blocks) -> 64x7x7 (4 blocks)."""
    return _preset("pfc_fashion_mnist", n_classes, width_multiplier, **kwargs)


def pfc_cifar10(
    n_classes: int | None = None, width_multiplier: float = 1.0, **kwargs: Any
) -> ConvResNet:
    """001 Table I, CIFAR10: 3x32x32 -> 64x16x16 (2) -> 128x8x8 (3) -> 256x4x4 (4)."""
    return _preset("pfc_cifar10", n_classes, width_multiplier, **kwargs)


def pfc_stl10(
    n_classes: int | None = None, width_multiplier: float = 1.0, **kwargs: Any
) -> ConvResNet:
    """001 Table I, STL10: 3x96x96 -> 64x48x48 (5) -> 128x24x24 (5) -> 256x12x12 (5)
    -> 512x6x6 (5)."""
    return _preset("pfc_stl10", n_classes, width_multiplier, **kwargs)


def pfc_cifar100(
    n_classes: int | None = None, width_multiplier: float = 1.0, **kwargs: Any
) -> ConvResNet:
    """001 Table I, CIFAR100: 3x32x32 -> 64x32x32 (3) -> 128x16x16 (3) -> 256x8x8 (4)
    -> 512x4x4 (4)."""
    return _preset("pfc_cifar100", n_classes, width_multiplier, **kwargs)
