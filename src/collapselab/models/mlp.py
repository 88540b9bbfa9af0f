"""Plain deep MLP of the feature-diversity paper (000, Eq. 1 and requirement R1)."""

from __future__ import annotations

import torch
from torch import nn

from collapselab.checks import check_bool, check_choice, check_float, check_int
from collapselab.models._common import _check_features_input, _normal_

_ACTIVATIONS = ("relu", "leaky_relu")
_NORMS = ("none", "batchnorm", "norm1")


def xavier_normal_variance(fan_in: int, fan_out: int, gamma: float = 1.0) -> float:
    """Entry variance ``gamma * 2 / (fan_in + fan_out)`` of the scaled Xavier-normal init.

    ``gamma`` multiplies the **variance** (note 000, R1): gamma = 1 is Glorot-normal,
    gamma = 2 is He-normal for square layers.
    """
    return gamma * 2.0 / (fan_in + fan_out)


class _HiddenLayer(nn.Module):
    """``act(norm(linear(x)))``: one hidden layer; ``norm`` exists only when requested."""

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        bias: bool,
        norm: str,
        activation: str,
        negative_slope: float,
    ) -> None:
        super().__init__()
        self.linear = nn.Linear(in_dim, out_dim, bias=bias)
        if norm != "none":
            self.norm = nn.BatchNorm1d(out_dim, affine=(norm == "batchnorm"))
        if activation == "relu":
            self.act: nn.Module = nn.ReLU()
        else:
            self.act = nn.LeakyReLU(negative_slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        if hasattr(self, "norm"):
            h = self.norm(h)
        return self.act(h)


class MLP(nn.Module):
    r"""Deep fully connected network with ``depth`` linear layers (paper 000, Eq. 1).

    .. math::
        F^{(l)} = \sigma(\mathrm{norm}(W^{(l)} F^{(l-1)} [+ b^{(l)}])),\quad l < L,\qquad
        f(x) = W^{(L)} F^{(L-1)} [+ b^{(L)}],

    with ``F^{(0)} = x`` (flattened). ReLU (or LeakyReLU) follows every linear layer but the
    last; the optional normalisation sits between the linear layer and the activation
    (000, A21). Paper 000 uses no bias and no normalisation, which are the defaults.

    Initialisation: every weight, the classifier included, is i.i.d.
    ``N(0, gamma * 2 / (fan_in + fan_out))``: Xavier-normal with its **variance** scaled by
    ``gamma`` (000, R1). Biases, when enabled, start at zero.

    Layer names (``named_modules``): ``flatten``; ``layers.{i}`` for the ``depth - 1`` hidden
    layers, each with ``layers.{i}.linear``, ``layers.{i}.norm`` (only if ``norm != "none"``)
    and ``layers.{i}.act``; ``classifier`` (the L-th linear layer).
    ``feature_layers = ["layers.0.act", ..., "layers.{L-2}.act"]`` (post-activation F^(l),
    shape ``(N, width)``); ``penultimate`` is the last of them (``"flatten"`` when
    ``depth == 1``).

    Args:
        in_dim: input dimension (inputs of shape ``(N, ...)`` are flattened).
        n_classes: number of outputs C.
        width: hidden width h.
        depth: number of linear layers L (>= 1).
        activation: ``"relu"`` or ``"leaky_relu"``.
        negative_slope: LeakyReLU slope (ignored for ReLU).
        bias: add biases to every linear layer (default off, as Eq. 1).
        norm: ``"none"``, ``"batchnorm"`` (BatchNorm1d with affine scale/shift) or
            ``"norm1"`` (BatchNorm1d without affine parameters).
        gamma: variance multiplier of the Xavier-normal init (> 0).
    """

    def __init__(
        self,
        in_dim: int,
        n_classes: int,
        width: int,
        depth: int,
        activation: str = "relu",
        negative_slope: float = 0.01,
        bias: bool = False,
        norm: str = "none",
        gamma: float = 1.0,
    ) -> None:
        super().__init__()
        self.in_dim = check_int("in_dim", in_dim, minimum=1)
        self.n_classes = check_int("n_classes", n_classes, minimum=1)
        self.width = check_int("width", width, minimum=1)
        self.depth = check_int("depth", depth, minimum=1)
        activation = check_choice("activation", activation, _ACTIVATIONS)
        negative_slope = check_float("negative_slope", negative_slope)
        bias = check_bool("bias", bias)
        norm = check_choice("norm", norm, _NORMS)
        self.gamma = check_float("gamma", gamma, minimum=0.0, strict=True)

        self.flatten = nn.Flatten()
        dims = [self.in_dim] + [self.width] * (self.depth - 1)
        self.layers = nn.ModuleList(
            _HiddenLayer(dims[i], dims[i + 1], bias, norm, activation, negative_slope)
            for i in range(self.depth - 1)
        )
        self.classifier = nn.Linear(dims[-1], self.n_classes, bias=bias)
        self._feature_layers = tuple(f"layers.{i}.act" for i in range(self.depth - 1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw all weights from the scaled Xavier-normal law; zero the biases."""
        linears = [layer.linear for layer in self.layers] + [self.classifier]
        for lin in linears:
            var = xavier_normal_variance(lin.in_features, lin.out_features, self.gamma)
            _normal_(lin.weight, var)
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)
        for layer in self.layers:
            if hasattr(layer, "norm"):
                layer.norm.reset_parameters()

    @property
    def feature_layers(self) -> list[str]:
        return list(self._feature_layers)

    @property
    def penultimate(self) -> str:
        return self._feature_layers[-1] if self._feature_layers else "flatten"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape ``(N, n_classes)`` for inputs ``(N, ...)`` with ``in_dim`` features."""
        _check_features_input(x, self.in_dim)
        h = self.flatten(x)
        for layer in self.layers:
            h = layer(h)
        return self.classifier(h)
