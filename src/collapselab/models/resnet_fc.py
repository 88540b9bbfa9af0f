"""Fully connected residual network of the progressive-collapse paper (001, Table I, MNIST)."""

from __future__ import annotations

import torch
from torch import nn

from collapselab.checks import check_bool, check_choice, check_int
from collapselab.models._common import (
    _check_features_input,
    _check_width_multiplier,
    _scaled_channels,
)

_BLOCKS = ("preact", "linear_relu")


class _FCBlock(nn.Module):
    r"""Residual block ``x + v(x)`` at constant width (001, Eq. 3).

    * ``"preact"`` (He et al. 2016, full pre-activation, the block 001 cites):
      ``v(x) = W_2 \sigma(\mathrm{BN}_2(W_1 \sigma(\mathrm{BN}_1(x))))``;
      modules ``norm1, act1, linear1, norm2, act2, linear2`` (norms only when ``norm``).
    * ``"linear_relu"`` (the form 001 uses in its weight-decay bound, §II-C):
      ``v(x) = \sigma(W x + b)``; modules ``linear1, act1``.
    """

    def __init__(self, width: int, block: str, norm: bool, bias: bool) -> None:
        super().__init__()
        self.block = block
        self.use_norm = norm and block == "preact"
        if block == "preact":
            if self.use_norm:
                self.norm1 = nn.BatchNorm1d(width)
            self.act1 = nn.ReLU()
            self.linear1 = nn.Linear(width, width, bias=bias)
            if self.use_norm:
                self.norm2 = nn.BatchNorm1d(width)
            self.act2 = nn.ReLU()
            self.linear2 = nn.Linear(width, width, bias=bias)
        else:
            self.linear1 = nn.Linear(width, width, bias=bias)
            self.act1 = nn.ReLU()

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        """``v(x)``."""
        if self.block == "linear_relu":
            return self.act1(self.linear1(x))
        h = self.norm1(x) if self.use_norm else x
        h = self.linear1(self.act1(h))
        h = self.norm2(h) if self.use_norm else h
        return self.linear2(self.act2(h))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.residual(x)


class FCResNet(nn.Module):
    r"""Fully connected ResNet: input projection, ``n_blocks`` blocks ``x + v(x)``, linear head.

    .. math::
        h^0 = P x,\qquad h^{l+1} = h^l + v_l(h^l),\qquad f(x) = W h^{L} + b,

    as in 001's MNIST network (Table I: width 1000, 10 blocks). The input projection
    ``P`` (``in_dim -> width``, named ``stem``) is not described in 001; we use a single
    linear map so that ``h^0`` is the first point of the constant-width stream ("layer0").
    The residual branch ``v`` is chosen by ``block`` (see :class:`_FCBlock`): ``"preact"``
    (default) is BN-ReLU-Linear-BN-ReLU-Linear; ``"linear_relu"`` is ReLU(Linear(x)).
    ``final_norm=True`` adds a BN-ReLU ``head`` between the last block and the classifier.

    Linear layers use PyTorch's default init; BatchNorm starts at scale 1, shift 0.

    Layer names: ``flatten``, ``stem``, ``blocks.{i}`` (output ``x + v(x)``) with their inner
    modules, ``head`` (only when ``final_norm``), ``classifier``.
    ``feature_layers = ["stem", "blocks.0", ..., "blocks.{n-1}"]``, each ``(N, width)``;
    ``penultimate`` is ``"blocks.{n-1}"`` (or ``"head"``).

    Args:
        in_dim: input dimension (inputs ``(N, ...)`` are flattened; 784 for MNIST).
        width: stream width (1000 in 001).
        n_blocks: number of residual blocks (>= 1).
        n_classes: number of outputs.
        block: ``"preact"`` or ``"linear_relu"``.
        norm: BatchNorm inside ``"preact"`` blocks (ignored for ``"linear_relu"``).
        bias: biases in the stem, block and classifier linear layers.
        final_norm: add the BN-ReLU ``head``.
    """

    def __init__(
        self,
        in_dim: int,
        width: int,
        n_blocks: int,
        n_classes: int,
        block: str = "preact",
        norm: bool = True,
        bias: bool = True,
        final_norm: bool = False,
    ) -> None:
        super().__init__()
        self.in_dim = check_int("in_dim", in_dim, minimum=1)
        self.width = check_int("width", width, minimum=1)
        self.n_blocks = check_int("n_blocks", n_blocks, minimum=1)
        self.n_classes = check_int("n_classes", n_classes, minimum=1)
        block = check_choice("block", block, _BLOCKS)
        norm = check_bool("norm", norm)
        bias = check_bool("bias", bias)
        self.final_norm = check_bool("final_norm", final_norm)

        self.flatten = nn.Flatten()
        self.stem = nn.Linear(self.in_dim, self.width, bias=bias)
        self.blocks = nn.ModuleList(
            _FCBlock(self.width, block, norm, bias) for _ in range(self.n_blocks)
        )
        if self.final_norm:
            self.head = nn.Sequential(nn.BatchNorm1d(self.width), nn.ReLU())
        self.classifier = nn.Linear(self.width, self.n_classes, bias=bias)

    @property
    def feature_layers(self) -> list[str]:
        return ["stem", *(f"blocks.{i}" for i in range(self.n_blocks))]

    @property
    def penultimate(self) -> str:
        return "head" if self.final_norm else f"blocks.{self.n_blocks - 1}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(N, n_classes)`` for inputs ``(N, ...)`` with ``in_dim`` features."""
        _check_features_input(x, self.in_dim)
        h = self.stem(self.flatten(x))
        for blk in self.blocks:
            h = blk(h)
        if self.final_norm:
            h = self.head(h)
        return self.classifier(h)


def pfc_mnist(n_classes: int = 10, width_multiplier: float = 1.0, **kwargs: object) -> FCResNet:
    """001 Table I, MNIST row: 784 -> 1000-wide stream, 10 blocks, FC.

    ``width_multiplier`` scales the width (1000) for cheap instances; other keyword
    arguments go to :class:`FCResNet`.
    """
    width = _scaled_channels(1000, _check_width_multiplier(width_multiplier))
    return FCResNet(784, width, 10, n_classes, **kwargs)  # type: ignore[arg-type]
