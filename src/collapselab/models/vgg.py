"""VGG-11/13 with BatchNorm for small images, as used by the MSE neural-collapse paper (003)."""

from __future__ import annotations

import torch
from torch import nn

from collapselab.checks import check_int
from collapselab.models._common import _check_image_input, _check_width_multiplier, _scaled_channels

#: Simonyan & Zisserman's configurations A (VGG-11) and B (VGG-13); "M" is a 2x2 max-pool.
_CONFIGS: dict[str, list[int | str]] = {
    "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg13": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
}


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
