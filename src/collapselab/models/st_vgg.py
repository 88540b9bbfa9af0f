"""st-VGG and its linear twin, the small CNNs of the PC-bias paper (002, §4 and App. D)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from collapselab.checks import check_bool, check_int, check_probability
from collapselab.models._common import _check_image_input, _check_width_multiplier, _scaled_channels

#: (channels, kernel) of the two convolutions of each of st-VGG's four stages.
_STAGES: tuple[tuple[tuple[int, int], tuple[int, int]], ...] = (
    ((32, 3), (32, 3)),
    ((64, 3), (64, 3)),
    ((128, 3), (128, 3)),
    ((256, 2), (256, 2)),
)


class _SameConv2d(nn.Conv2d):
    """Stride-1 convolution with 'same' zero padding, also for even kernels.

    For a kernel of size k the total padding k - 1 is split as ``(k - 1) // 2`` before and
    the rest after (bottom/right), the TensorFlow/Keras convention (PyTorch's own
    ``padding="same"`` does the same but warns and copies for even kernels).
    """

    def __init__(self, in_ch: int, out_ch: int, kernel: int, bias: bool) -> None:
        super().__init__(in_ch, out_ch, kernel, padding=0, bias=bias)
        before = (kernel - 1) // 2
        after = kernel - 1 - before
        self._pad = (before, after, before, after)  # F.pad order: left, right, top, bottom

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, self._pad))


class _StVGGStage(nn.Module):
    """``drop(pool(act2(conv2(act1(conv1(x))))))`` with 'same'-padded convolutions."""

    def __init__(
        self,
        in_ch: int,
        spec: tuple[tuple[int, int], tuple[int, int]],
        linear: bool,
        bias: bool,
        p_drop: float,
    ) -> None:
        super().__init__()
        (c1, k1), (c2, k2) = spec
        self.conv1 = _SameConv2d(in_ch, c1, k1, bias)
        self.act1 = nn.Identity() if linear else nn.ReLU()
        self.conv2 = _SameConv2d(c1, c2, k2, bias)
        self.act2 = nn.Identity() if linear else nn.ReLU()
        self.pool = nn.AvgPool2d(2) if linear else nn.MaxPool2d(2)
        self.drop = nn.Dropout(p_drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act2(self.conv2(self.act1(self.conv1(x))))
        return self.drop(self.pool(h))


def _input_hw(input_size: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(input_size, int) and not isinstance(input_size, bool):
        size = (input_size, input_size)
    elif isinstance(input_size, Sequence) and len(input_size) == 2:
        size = (input_size[0], input_size[1])
    else:
        raise ValueError(f"input_size must be an int or (H, W), got {input_size!r}")
    return (
        check_int("input_size H", size[0], minimum=16),
        check_int("input_size W", size[1], minimum=16),
    )


class StVGG(nn.Module):
    """st-VGG (002, §4): 8 convolutions in 4 stages, two FC layers.

    Convolutions with 32, 32, 64, 64, 128, 128, 256, 256 filters; the first six are 3x3,
    the last two 2x2. After every second convolution: 2x2 max-pool (stride 2) and dropout
    0.25. Then flatten -> FC 512 -> ReLU -> dropout 0.5 -> FC ``n_classes``. Activations are
    ReLU (002 does not name them).

    Padding (unstated in 002): 'same', so only the pools change the resolution
    (32 -> 16 -> 8 -> 4 -> 2 for 32x32 inputs, flatten dimension 256 * 2 * 2 = 1024). The
    2x2 kernels get one zero row/column at the bottom/right (Keras' 'same' convention).

    ``linear=True`` gives the linear twin (002, §4): every activation is the identity and
    max-pooling becomes 2x2 average pooling, so in eval mode (dropout off) the network is
    an affine function of x, linear when ``bias=False``.

    Init (Keras' defaults, which 002's setup suggests): Glorot-uniform weights, zero biases.

    Layer names: ``stages.{k}`` (k = 0..3) with ``conv1, act1, conv2, act2, pool, drop``;
    ``flatten``, ``fc``, ``fc_act``, ``fc_drop``, ``classifier``.
    ``feature_layers``: ``stages.{k}.act1``, ``stages.{k}.act2`` for every stage (each conv's
    activation output, ``(N, C, H_k, W_k)``), then ``fc_act`` (``(N, 512)``);
    ``penultimate = "fc_drop"`` (equal to ``fc_act`` in eval mode).

    Args:
        n_classes: number of outputs K.
        in_channels: input channels.
        linear: build the linear twin.
        input_size: input ``H = W`` or ``(H, W)`` (needed for the flatten dimension;
            at least 16 so that four poolings leave a pixel).
        width_multiplier: scales every conv channel count and the FC width 512.
        bias: biases in every conv and FC layer.
        dropout_conv: dropout after each pool (0.25 in 002).
        dropout_fc: dropout before the classifier (0.5 in 002).
    """

    def __init__(
        self,
        n_classes: int,
        in_channels: int = 3,
        linear: bool = False,
        input_size: int | Sequence[int] = 32,
        width_multiplier: float = 1.0,
        bias: bool = True,
        dropout_conv: float = 0.25,
        dropout_fc: float = 0.5,
    ) -> None:
        super().__init__()
        self.n_classes = check_int("n_classes", n_classes, minimum=1)
        self.in_channels = check_int("in_channels", in_channels, minimum=1)
        self.linear = check_bool("linear", linear)
        self.input_size = _input_hw(input_size)
        mult = _check_width_multiplier(width_multiplier)
        bias = check_bool("bias", bias)
        p_conv = check_probability("dropout_conv", dropout_conv, allow_one=False)
        p_fc = check_probability("dropout_fc", dropout_fc, allow_one=False)

        stages = []
        prev = self.in_channels
        for (c1, k1), (c2, k2) in _STAGES:
            spec = ((_scaled_channels(c1, mult), k1), (_scaled_channels(c2, mult), k2))
            stages.append(_StVGGStage(prev, spec, self.linear, bias, p_conv))
            prev = spec[1][0]
        self.stages = nn.ModuleList(stages)
        h, w = self.input_size
        for _ in _STAGES:
            h, w = h // 2, w // 2
        hidden = _scaled_channels(512, mult)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(prev * h * w, hidden, bias=bias)
        self.fc_act = nn.Identity() if self.linear else nn.ReLU()
        self.fc_drop = nn.Dropout(p_fc)
        self.classifier = nn.Linear(hidden, self.n_classes, bias=bias)
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    @property
    def feature_layers(self) -> list[str]:
        convs = [f"stages.{k}.act{j}" for k in range(len(_STAGES)) for j in (1, 2)]
        return [*convs, "fc_act"]

    @property
    def penultimate(self) -> str:
        return "fc_drop"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(N, n_classes)`` for images ``(N, in_channels, *input_size)``."""
        _check_image_input(x, self.in_channels)
        if tuple(x.shape[2:]) != self.input_size:
            raise ValueError(
                f"x has spatial size {tuple(x.shape[2:])}, but this StVGG was built for "
                f"input_size={self.input_size}"
            )
        h = x
        for stage in self.stages:
            h = stage(h)
        h = self.fc_drop(self.fc_act(self.fc(self.flatten(h))))
        return self.classifier(h)
