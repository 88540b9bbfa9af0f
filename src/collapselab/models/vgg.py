"""VGG-11/13/19 with BatchNorm for small images: VGG-11/13 as used by the MSE neural-collapse
paper (003), VGG-19 as used by the PC-bias paper (002, Figs 5b and 7b)."""

from __future__ import annotations

import torch
from torch import nn

from collapselab.checks import check_int
from collapselab.models._common import _check_image_input, _check_width_multiplier, _scaled_channels

#: Simonyan & Zisserman's configurations A (VGG-11), B (VGG-13) and E (VGG-19: 16
#: convolutions); "M" is a 2x2 max-pool.
_CONFIGS: dict[str, list[int | str]] = {
    "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg13": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M",
              512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}  # fmt: skip


class VGG(nn.Module):
    """VGG with BatchNorm (PNAS / 003 style) for 32x32-and-larger images.

    ``features`` is a flat ``nn.Sequential`` in torchvision's order: each conv entry is
    ``Conv3x3(padding 1) - BatchNorm2d - ReLU`` (three consecutive indices), each ``"M"`` a
    2x2 max-pool. The head is our choice (003/PNAS do not print theirs): ``avgpool``
    (global average; 1x1 already for 32x32 inputs after five pools), ``flatten`` and a single
    linear ``classifier`` (512 x width_multiplier -> n_classes). No dropout.

    Init (torchvision's VGG): He-normal fan-out convolutions with zero bias, BatchNorm
    scale 1 / shift 0, classifier ``N(0, 0.01^2)`` with zero bias.

    ``feature_layers``: the ReLU output of every conv layer, ``features.{i}``;
    ``penultimate = "flatten"``. Inputs need ``H, W >= 32`` (five halvings).

    Args:
        config: list of channel counts and ``"M"`` (max-pool) entries.
        in_channels: input channels.
        n_classes: number of outputs.
        width_multiplier: scales every channel count (rounded, at least 1).
    """

    def __init__(
        self,
        config: list[int | str],
        in_channels: int = 3,
        n_classes: int = 10,
        width_multiplier: float = 1.0,
    ) -> None:
        super().__init__()
        self.in_channels = check_int("in_channels", in_channels, minimum=1)
        self.n_classes = check_int("n_classes", n_classes, minimum=1)
        mult = _check_width_multiplier(width_multiplier)
        layers: list[nn.Module] = []
        relu_names: list[str] = []
        prev = self.in_channels
        self._n_pools = 0
        for v in config:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
                self._n_pools += 1
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"config entries must be positive ints or 'M', got {v!r}")
            c = _scaled_channels(v, mult)
            layers += [nn.Conv2d(prev, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU()]
            relu_names.append(f"features.{len(layers) - 1}")
            prev = c
        if not relu_names:
            raise ValueError("config must contain at least one conv layer")
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.classifier = nn.Linear(prev, self.n_classes)
        self._feature_layers = tuple(relu_names)
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.classifier.weight, 0.0, 0.01)
        nn.init.zeros_(self.classifier.bias)

    @property
    def feature_layers(self) -> list[str]:
        return list(self._feature_layers)

    @property
    def penultimate(self) -> str:
        return "flatten"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(N, n_classes)`` for images ``(N, in_channels, H, W)``, ``H, W >= 32``."""
        _check_image_input(x, self.in_channels, min_size=2**self._n_pools)
        return self.classifier(self.flatten(self.avgpool(self.features(x))))


def vgg11(in_channels: int = 3, n_classes: int = 10, width_multiplier: float = 1.0) -> VGG:
    """VGG-11 with BatchNorm (configuration A)."""
    return VGG(_CONFIGS["vgg11"], in_channels, n_classes, width_multiplier)


def vgg13(in_channels: int = 3, n_classes: int = 10, width_multiplier: float = 1.0) -> VGG:
    """VGG-13 with BatchNorm (configuration B)."""
    return VGG(_CONFIGS["vgg13"], in_channels, n_classes, width_multiplier)


def vgg19(in_channels: int = 3, n_classes: int = 10, width_multiplier: float = 1.0) -> VGG:
    """VGG-19 with BatchNorm (configuration E: 16 3x3 convolutions in five stages of 2, 2, 4,
    4, 4, each stage ending in a 2x2 max-pool), paper 002's VGG-19 (Figs 5b and 7b).

    002 names the network (Simonyan & Zisserman) and nothing else; for 32x32 CIFAR images the
    head and the BatchNorm are this module's (see :class:`VGG`): the original's 4096-wide FC
    layers were made for 224x224 inputs, and 002's other networks train by SGD without
    momentum, under which a 19-layer VGG without normalisation hardly trains from scratch
    (Simonyan & Zisserman initialised their deeper configurations from shallower ones).
    At width 1 with 3 input channels and 10 classes: 20,024,384 convolution parameters (the
    configuration's well-known count), 11,008 BatchNorm and 5,130 classifier parameters.
    """
    return VGG(_CONFIGS["vgg19"], in_channels, n_classes, width_multiplier)
