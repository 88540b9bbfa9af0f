"""DenseNets of the MSE neural-collapse paper (003, §4.2): DenseNet40/100/250 and DenseNet201.

Huang, Liu, van der Maaten & Weinberger (CVPR 2017), written here. Paper 003 (after
Papyan, Han & Donoho, PNAS 2020) trains DenseNet40 (MNIST, SVHN), DenseNet100 (CIFAR10),
DenseNet201 (STL10) and DenseNet250 (FashionMNIST) but prints no layer specification; the
choices below are ours and follow Huang et al.'s own configurations:

* **DenseNet-BC for small images** (depths 40, 100, 250): a 3x3 stem convolution with
  ``2k`` channels, three dense blocks of ``n = (depth - 4) / 6`` bottleneck layers each,
  transitions with compression ``0.5``, growth rate ``k = 12`` (40, 100) or ``24`` (250,
  Huang et al.'s "DenseNet-BC (L=250, k=24)").
* **DenseNet-201** (the ImageNet model, used on 96x96 STL10 images): a 7x7 stride-2 stem
  convolution with 64 channels, BatchNorm, ReLU and a 3x3 stride-2 max-pool, then four
  dense blocks of ``(6, 12, 48, 32)`` bottleneck layers, growth rate 32, compression 0.5.

The depth counts the convolutional and linear layers on the longest path: ``6n + 4`` for
the three-block BC networks (stem, ``2n`` per block, two transitions, classifier) and
``1 + 2 (6 + 12 + 48 + 32) + 3 + 1 = 201`` for DenseNet-201 (:attr:`DenseNet.depth`).
"""

from __future__ import annotations

import torch
from torch import nn

from collapselab.checks import check_bool, check_choice, check_float, check_int
from collapselab.models._common import _check_image_input, _kaiming_conv_bn_init

_STEMS = ("small", "imagenet")


class _DenseLayer(nn.Module):
    """One dense layer: ``k`` new feature maps from everything before it (pre-activation).

    Bottleneck (the "B" of DenseNet-BC): ``conv2(relu2(norm2(conv1(relu1(norm1(x))))))``
    with a 1x1 ``conv1`` to ``bn_size * k`` channels and a 3x3 ``conv2`` to ``k``. Without
    bottleneck: ``conv2(relu2(norm2(x)))`` only. Returns the ``k`` new maps (the block
    concatenates them).
    """

    def __init__(self, in_ch: int, growth_rate: int, bottleneck: bool, bn_size: int) -> None:
        super().__init__()
        mid = in_ch
        if bottleneck:
            mid = bn_size * growth_rate
            self.norm1 = nn.BatchNorm2d(in_ch)
            self.relu1 = nn.ReLU()
            self.conv1 = nn.Conv2d(in_ch, mid, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(mid)
        self.relu2 = nn.ReLU()
        self.conv2 = nn.Conv2d(mid, growth_rate, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "conv1"):
            x = self.conv1(self.relu1(self.norm1(x)))
        return self.conv2(self.relu2(self.norm2(x)))


class _DenseBlock(nn.Module):
    """``n`` dense layers; layer ``i`` reads the concatenation of the input and the maps of
    layers ``0..i-1``. The output is the concatenation of all of them
    (``in_ch + n * k`` channels)."""

    def __init__(
        self, n_layers: int, in_ch: int, growth_rate: int, bottleneck: bool, bn_size: int
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            _DenseLayer(in_ch + i * growth_rate, growth_rate, bottleneck, bn_size)
            for i in range(n_layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        maps = [x]
        for layer in self.layers:
            maps.append(layer(torch.cat(maps, dim=1)))
        return torch.cat(maps, dim=1)


class _Transition(nn.Module):
    """``pool(conv(relu(norm(x))))``: 1x1 convolution to ``out_ch`` channels, 2x2 average
    pool with stride 2."""

    def __init__(self, in_ch: int, out_ch: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(in_ch)
        self.relu = nn.ReLU()
        self.conv = nn.Conv2d(in_ch, out_ch, 1, bias=False)
        self.pool = nn.AvgPool2d(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.conv(self.relu(self.norm(x))))


class DenseNet(nn.Module):
    """A DenseNet (Huang et al. 2017) with the collapselab layer convention.

    Layout: ``stem``; ``block1``, ``transition1``, ..., ``block{K}`` (no transition after
    the last block); ``norm`` and ``relu`` (the final pre-activation); ``avgpool`` (global
    average), ``flatten`` and ``classifier``. Transition ``i`` maps ``c`` channels to
    ``floor(compression * c)`` and halves the spatial size.

    Stems: ``"small"`` is a single 3x3 stride-1 convolution (Huang et al.'s CIFAR/SVHN
    networks; 32x32 inputs keep their size until the first transition); ``"imagenet"`` is
    a 7x7 stride-2 convolution, BatchNorm, ReLU and a 3x3 stride-2 max-pool (a quarter of the
    input size). ``init_features`` defaults to ``2k`` with bottleneck and compression (BC),
    ``16`` otherwise (small stem), and 64 for the ImageNet stem.

    Init: He-normal (fan-out) convolutions, BatchNorm scale 1 / shift 0, classifier at
    PyTorch's default with zero bias.

    ``feature_layers = ["stem", "block1", "transition1", ..., "block{K}", "relu"]`` (the
    stem output, every block and transition output, the final pre-activation);
    ``penultimate = "flatten"`` (the global-average-pooled features, ``num_features``
    dimensions).

    Args:
        block_config: number of dense layers in each block.
        growth_rate: ``k``, the maps each dense layer adds.
        in_channels: input channels.
        n_classes: number of outputs.
        bottleneck: 1x1 bottleneck convolutions in the dense layers (the "B" of BC).
        compression: transition compression factor in ``(0, 1]`` (``0.5``: the "C" of BC).
        bn_size: bottleneck width as a multiple of ``k``.
        stem: ``"small"`` or ``"imagenet"``.
        init_features: channels of the stem output; default as described above.
    """

    def __init__(
        self,
        block_config: tuple[int, ...] | list[int],
        growth_rate: int = 12,
        in_channels: int = 3,
        n_classes: int = 10,
        bottleneck: bool = True,
        compression: float = 0.5,
        bn_size: int = 4,
        stem: str = "small",
        init_features: int | None = None,
    ) -> None:
        super().__init__()
        if isinstance(block_config, (str, bytes)) or not isinstance(block_config, (list, tuple)):
            raise TypeError(
                f"block_config must be a list or tuple of layer counts, got {block_config!r}"
            )
        if not block_config:
            raise ValueError("block_config must list at least one dense block")
        self.block_config = tuple(
            check_int(f"block_config[{i}]", n, minimum=1) for i, n in enumerate(block_config)
        )
        self.growth_rate = check_int("growth_rate", growth_rate, minimum=1)
        self.in_channels = check_int("in_channels", in_channels, minimum=1)
        self.n_classes = check_int("n_classes", n_classes, minimum=1)
        self.bottleneck = check_bool("bottleneck", bottleneck)
        self.compression = check_float("compression", compression, minimum=0.0, strict=True)
        if self.compression > 1.0:
            raise ValueError(f"compression must lie in (0, 1], got {compression}")
        bn_size = check_int("bn_size", bn_size, minimum=1)
        self.stem_kind = check_choice("stem", stem, _STEMS)
        if init_features is None:
            if self.stem_kind == "imagenet":
                init_features = 64
            elif self.bottleneck and self.compression < 1.0:
                init_features = 2 * self.growth_rate
            else:
                init_features = 16
        channels = check_int("init_features", init_features, minimum=1)

        self.stem = self._make_stem(channels)
        n_blocks = len(self.block_config)
        for i, n_layers in enumerate(self.block_config, start=1):
            block = _DenseBlock(n_layers, channels, self.growth_rate, self.bottleneck, bn_size)
            setattr(self, f"block{i}", block)
            channels += n_layers * self.growth_rate
            if i < n_blocks:
                out = max(1, int(self.compression * channels))
                setattr(self, f"transition{i}", _Transition(channels, out))
                channels = out
        self.norm = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.classifier = nn.Linear(channels, self.n_classes)
        self.num_features = channels
        _kaiming_conv_bn_init(self)
        nn.init.zeros_(self.classifier.bias)

    def _make_stem(self, channels: int) -> nn.Sequential:
        if self.stem_kind == "small":
            return nn.Sequential(nn.Conv2d(self.in_channels, channels, 3, padding=1, bias=False))
        return nn.Sequential(
            nn.Conv2d(self.in_channels, channels, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
        )

    @property
    def depth(self) -> int:
        """Convolutional and linear layers on the longest path (Huang et al.'s ``L``)."""
        per_layer = 2 if self.bottleneck else 1
        transitions = len(self.block_config) - 1
        return 1 + per_layer * sum(self.block_config) + transitions + 1

    @property
    def feature_layers(self) -> list[str]:
        names = ["stem"]
        n_blocks = len(self.block_config)
        for i in range(1, n_blocks + 1):
            names.append(f"block{i}")
            if i < n_blocks:
                names.append(f"transition{i}")
        return [*names, "relu"]

    @property
    def penultimate(self) -> str:
        return "flatten"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(N, n_classes)`` for images ``(N, in_channels, H, W)``."""
        min_size = 2 ** (len(self.block_config) - 1) * (4 if self.stem_kind == "imagenet" else 1)
        _check_image_input(x, self.in_channels, min_size=min_size)
        h = self.stem(x)
        n_blocks = len(self.block_config)
        for i in range(1, n_blocks + 1):
            h = getattr(self, f"block{i}")(h)
            if i < n_blocks:
                h = getattr(self, f"transition{i}")(h)
        h = self.relu(self.norm(h))
        return self.classifier(self.flatten(self.avgpool(h)))


def densenet_bc(
    depth: int,
    growth_rate: int = 12,
    in_channels: int = 3,
    n_classes: int = 10,
) -> DenseNet:
    """Three-block DenseNet-BC for small images of depth ``6n + 4`` (``n`` layers per block)."""
    depth = check_int("depth", depth, minimum=10)
    if (depth - 4) % 6:
        raise ValueError(
            f"a three-block DenseNet-BC has depth 6n + 4 (10, 16, ..., 40, 100, 250); got {depth}"
        )
    n = (depth - 4) // 6
    return DenseNet((n, n, n), growth_rate, in_channels, n_classes, stem="small")


def densenet40(in_channels: int = 3, n_classes: int = 10, growth_rate: int = 12) -> DenseNet:
    """DenseNet-BC-40: three blocks of 6 bottleneck layers, ``k = 12`` (003: MNIST, SVHN)."""
    return densenet_bc(40, growth_rate, in_channels, n_classes)


def densenet100(in_channels: int = 3, n_classes: int = 10, growth_rate: int = 12) -> DenseNet:
    """DenseNet-BC-100: three blocks of 16 bottleneck layers, ``k = 12`` (003: CIFAR10)."""
    return densenet_bc(100, growth_rate, in_channels, n_classes)


def densenet250(in_channels: int = 3, n_classes: int = 10, growth_rate: int = 24) -> DenseNet:
    """DenseNet-BC-250: three blocks of 41 bottleneck layers, ``k = 24`` (003: FashionMNIST)."""
    return densenet_bc(250, growth_rate, in_channels, n_classes)


def densenet201(in_channels: int = 3, n_classes: int = 10, growth_rate: int = 32) -> DenseNet:
    """DenseNet-201 (ImageNet layout): ImageNet stem, blocks ``(6, 12, 48, 32)``, ``k = 32``
    (003: STL10, 96x96 images)."""
    return DenseNet((6, 12, 48, 32), growth_rate, in_channels, n_classes, stem="imagenet")
