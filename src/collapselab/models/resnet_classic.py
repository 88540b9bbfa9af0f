"""ResNet-18/34/50 for small images, as used by the MSE neural-collapse paper (003, §4.2).

Torchvision's layout (He et al. 2016, v1.5 bottleneck with the stride on the 3x3 conv),
written here, with the small-image stem of 003's notebook: ``conv1`` is a 3x3, stride 1,
padding 1 convolution and there is no max-pool.
"""

from __future__ import annotations

import torch
from torch import nn

from collapselab.checks import check_int
from collapselab.models._common import (
    _check_image_input,
    _check_width_multiplier,
    _kaiming_conv_bn_init,
    _scaled_channels,
)


def _downsample(in_ch: int, out_ch: int, stride: int) -> nn.Module | None:
    """1x1 conv + BN projection for the shortcut when the shape changes, else None."""
    if stride == 1 and in_ch == out_ch:
        return None
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
    )


class BasicBlock(nn.Module):
    """``relu2(bn2(conv2(relu1(bn1(conv1(x))))) + shortcut(x))`` with 3x3 convolutions.

    Modules: ``conv1, bn1, relu1, conv2, bn2, downsample`` (absent when the shape is kept),
    ``relu2``. Separate ReLU modules (torchvision reuses one ``relu``) so that a forward
    hook on each fires once per forward pass.
    """

    expansion = 1

    def __init__(self, in_ch: int, planes: int, stride: int) -> None:
        super().__init__()
        out_ch = planes * self.expansion
        self.conv1 = nn.Conv2d(in_ch, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, out_ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.downsample = _downsample(in_ch, out_ch, stride)
        self.relu2 = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu2(out + shortcut)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand (x4), BN after each, ReLU, shortcut add, ReLU.

    Modules: ``conv1, bn1, relu1, conv2, bn2, relu2, conv3, bn3, downsample``, ``relu3``.
    """

    expansion = 4

    def __init__(self, in_ch: int, planes: int, stride: int) -> None:
        super().__init__()
        out_ch = planes * self.expansion
        self.conv1 = nn.Conv2d(in_ch, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(planes, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.downsample = _downsample(in_ch, out_ch, stride)
        self.relu3 = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu3(out + shortcut)


class ResNet(nn.Module):
    """ResNet for small images (003's ResNet18/34/50, torchvision layout).

    ``conv1`` (3x3, stride 1, padding 1, no bias) - ``bn1`` - ``relu``; no max-pool;
    ``layer1..layer4`` with ``64, 128, 256, 512`` planes (times ``width_multiplier``) and
    strides ``1, 2, 2, 2``; ``avgpool`` (global average), ``flatten``, ``classifier``
    (torchvision calls the last layer ``fc``; here every model names it ``classifier``).

    Init (torchvision's): He-normal fan-out convolutions, BatchNorm scale 1 / shift 0,
    PyTorch default for the classifier.

    ``feature_layers = ["relu", "layer1.0", ..., "layer4.{n-1}"]``: the stem output
    ("layer0") then every block output; ``penultimate = "flatten"`` (``(N, 512 * expansion)``
    at full width, the 003 notebook's hook point).

    Args:
        block: :class:`BasicBlock` or :class:`Bottleneck`.
        layers: number of blocks in each of the four stages.
        in_channels: input channels.
        n_classes: number of outputs.
        width_multiplier: scales every channel count (rounded, at least 1).
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: list[int],
        in_channels: int = 3,
        n_classes: int = 10,
        width_multiplier: float = 1.0,
    ) -> None:
        super().__init__()
        if block not in (BasicBlock, Bottleneck):
            raise TypeError(f"block must be BasicBlock or Bottleneck, got {block!r}")
        if len(layers) != 4:
            raise ValueError(f"layers must list 4 block counts, got {layers}")
        self.layer_counts = [check_int(f"layers[{i}]", n, minimum=1) for i, n in enumerate(layers)]
        self.in_channels = check_int("in_channels", in_channels, minimum=1)
        self.n_classes = check_int("n_classes", n_classes, minimum=1)
        mult = _check_width_multiplier(width_multiplier)

        planes = [_scaled_channels(p, mult) for p in (64, 128, 256, 512)]
        self.conv1 = nn.Conv2d(self.in_channels, planes[0], 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes[0])
        self.relu = nn.ReLU()
        in_ch = planes[0]
        strides = (1, 2, 2, 2)
        for i, (p, n, stride) in enumerate(zip(planes, self.layer_counts, strides, strict=True)):
            blocks = []
            for j in range(n):
                blocks.append(block(in_ch, p, stride if j == 0 else 1))
                in_ch = p * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.classifier = nn.Linear(in_ch, self.n_classes)
        _kaiming_conv_bn_init(self)

    @property
    def feature_layers(self) -> list[str]:
        blocks = [f"layer{i + 1}.{j}" for i, n in enumerate(self.layer_counts) for j in range(n)]
        return ["relu", *blocks]

    @property
    def penultimate(self) -> str:
        return "flatten"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(N, n_classes)`` for images ``(N, in_channels, H, W)``."""
        _check_image_input(x, self.in_channels)
        h = self.relu(self.bn1(self.conv1(x)))
        h = self.layer4(self.layer3(self.layer2(self.layer1(h))))
        return self.classifier(self.flatten(self.avgpool(h)))


def resnet18(in_channels: int = 3, n_classes: int = 10, width_multiplier: float = 1.0) -> ResNet:
    """ResNet-18: BasicBlock, ``[2, 2, 2, 2]``."""
    return ResNet(BasicBlock, [2, 2, 2, 2], in_channels, n_classes, width_multiplier)


def resnet34(in_channels: int = 3, n_classes: int = 10, width_multiplier: float = 1.0) -> ResNet:
    """ResNet-34: BasicBlock, ``[3, 4, 6, 3]``."""
    return ResNet(BasicBlock, [3, 4, 6, 3], in_channels, n_classes, width_multiplier)


def resnet50(in_channels: int = 3, n_classes: int = 10, width_multiplier: float = 1.0) -> ResNet:
    """ResNet-50: Bottleneck, ``[3, 4, 6, 3]`` (2048 penultimate features at full width)."""
    return ResNet(Bottleneck, [3, 4, 6, 3], in_channels, n_classes, width_multiplier)
