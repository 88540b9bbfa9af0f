"""Bias-free deep linear network of the PC-bias paper (002, Eq. 5 and Def. 3)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from collapselab.checks import check_choice, check_int, check_probability
from collapselab.models._common import _check_features_input, _normal_, _uniform_

_INITS = ("def3", "def3_uniform", "glorot_uniform", "glorot_normal", "he")


def def3_variances(widths: Sequence[int]) -> list[float]:
    r"""Per-layer entry variances of Definition 3 of paper 002 (its Glorot-like init).

    For ``widths = [m_0, ..., m_L]`` and ``W_l`` of shape ``(m_l, m_{l-1})``:

    * first layer ``\sigma_1^2 = 1 / m_1`` (scaled by its **output** width),
    * inner layers ``\sigma_l^2 = 2 / (m_{l-1} + m_l)`` for ``1 < l < L``,
    * last layer ``\sigma_L^2 = 1 / m_{L-1}`` (scaled by its input width).

    With a single layer (L = 1) the first and last rules conflict; we then use the
    inner (Glorot) rule ``2 / (m_0 + m_1)``.
    """
    n_layers = len(widths) - 1
    if n_layers == 1:
        return [2.0 / (widths[0] + widths[1])]
    out = [2.0 / (widths[i] + widths[i + 1]) for i in range(n_layers)]
    out[0] = 1.0 / widths[1]
    out[-1] = 1.0 / widths[-2]
    return out


def layer_variances(widths: Sequence[int], init: str) -> list[float]:
    r"""Per-layer entry variances ``sigma_l^2`` of :class:`DeepLinear`'s scheme ``init``.

    Def. 3 (``"def3"``, ``"def3_uniform"``): :func:`def3_variances`; Glorot (uniform or
    normal): ``2 / (m_{l-1} + m_l)``; He: ``2 / m_{l-1}``. The random-matrix scales of
    paper 002's Thm 3 (:func:`collapselab.theory.pcbias.expected_scales`) take these.
    """
    init = check_choice("init", init, _INITS)
    if init in ("def3", "def3_uniform"):
        return def3_variances(widths)
    if init in ("glorot_uniform", "glorot_normal"):
        return [2.0 / (widths[i] + widths[i + 1]) for i in range(len(widths) - 1)]
    # He-normal, fan-in mode: variance 2 / fan_in.
    return [2.0 / widths[i] for i in range(len(widths) - 1)]


class DeepLinear(nn.Module):
    r"""Deep linear network ``f(x) = W_L \cdots W_1 x`` without biases (paper 002, Eq. 5).

    ``W_l`` has shape ``(m_l, m_{l-1})`` with ``widths = [m_0, ..., m_L]``: ``m_0`` is the
    input dimension q and ``m_L`` the number of outputs K. A network with L layers has
    L - 1 hidden layers (002's counting).

    Initialisation (i.i.d. entries, zero mean):

    * ``"def3"``: Gaussian with the variances of Def. 3 (:func:`def3_variances`);
    * ``"def3_uniform"``: uniform with the same variances;
    * ``"glorot_uniform"``: ``U(-a, a)``, ``a = sqrt(6 / (m_{l-1} + m_l))`` (002's experiments);
    * ``"glorot_normal"``: ``N(0, 2 / (m_{l-1} + m_l))``;
    * ``"he"``: ``N(0, 2 / m_{l-1})``.

    Layer names: ``flatten``, ``layers.{i}`` (``nn.Linear`` holding ``W_{i+1}``), and
    ``dropout`` (before the last layer; identity when ``dropout == 0``; 002 uses 0.5 in its
    FC experiments, which breaks the exact linear-GD theory in training mode).
    ``feature_layers = ["layers.0", ..., "layers.{L-2}"]`` (hidden outputs, shape
    ``(N, m_l)``); ``classifier`` is ``layers.{L-1}``; ``penultimate`` is ``"dropout"`` (whose
    output is the classifier input; equal to the last hidden output in eval mode).

    Args:
        widths: ``[m_0, m_1, ..., m_L]``, at least two entries, all positive.
        init: one of the schemes above.
        dropout: dropout probability before the last layer, in ``[0, 1)``.
    """

    def __init__(self, widths: Sequence[int], init: str = "def3", dropout: float = 0.0) -> None:
        super().__init__()
        if isinstance(widths, (str, bytes)) or not isinstance(widths, Sequence):
            raise TypeError(f"widths must be a sequence of ints, got {type(widths).__name__}")
        if len(widths) < 2:
            raise ValueError(f"widths must have at least 2 entries [m_0, m_1], got {list(widths)}")
        self.widths = [check_int(f"widths[{i}]", w, minimum=1) for i, w in enumerate(widths)]
        self.init = check_choice("init", init, _INITS)
        p = check_probability("dropout", dropout, allow_one=False)
        self.flatten = nn.Flatten()
        self.layers = nn.ModuleList(
            nn.Linear(self.widths[i], self.widths[i + 1], bias=False)
            for i in range(len(self.widths) - 1)
        )
        self.dropout = nn.Dropout(p)
        self.reset_parameters()

    @property
    def n_layers(self) -> int:
        """L, the number of weight matrices."""
        return len(self.layers)

    def reset_parameters(self) -> None:
        """Redraw every ``W_l`` from the chosen scheme."""
        draw = _uniform_ if self.init in ("def3_uniform", "glorot_uniform") else _normal_
        for layer, var in zip(self.layers, layer_variances(self.widths, self.init), strict=True):
            draw(layer.weight, var)

    @property
    def feature_layers(self) -> list[str]:
        return [f"layers.{i}" for i in range(self.n_layers - 1)]

    @property
    def penultimate(self) -> str:
        return "dropout"

    @property
    def classifier(self) -> nn.Linear:
        return self.layers[-1]

    def product(self) -> torch.Tensor:
        r"""The end-to-end matrix ``W = W_L \cdots W_1`` of shape ``(m_L, m_0)``.

        Differentiable (it is built from the parameters), so it can enter losses.
        """
        out = self.layers[0].weight
        for layer in list(self.layers)[1:]:
            out = layer.weight @ out
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Outputs ``(N, m_L)`` for inputs ``(N, ...)`` with ``m_0`` features."""
        _check_features_input(x, self.widths[0])
        h = self.flatten(x)
        for layer in list(self.layers)[:-1]:
            h = layer(h)
        return self.layers[-1](self.dropout(h))


class DeepReLU(DeepLinear):
    r"""The non-linear counterpart of :class:`DeepLinear`: the same bias-free layers, inits
    and dropout, with a ReLU after every hidden layer,

    .. math::

        f(x) = W_L\, \mathrm{drop}\big(\sigma(W_{L-1} \cdots \sigma(W_1 x))\big),
        \qquad \sigma = \mathrm{ReLU}.

    Paper 002 compares its linear nets with non-linear ones (VGG-19 in Fig. 7b); this is the
    comparison with everything else held fixed. The ReLUs are ``acts.{i}`` (``feature_layers``,
    post-activation). A ReLU network has no compact matrix: :meth:`product` raises (read its
    linearisation with :func:`collapselab.models.compact_representation`).
    """

    def __init__(self, widths: Sequence[int], init: str = "def3", dropout: float = 0.0) -> None:
        super().__init__(widths, init, dropout)
        self.acts = nn.ModuleList(nn.ReLU() for _ in range(self.n_layers - 1))

    @property
    def feature_layers(self) -> list[str]:
        return [f"acts.{i}" for i in range(self.n_layers - 1)]

    def product(self) -> torch.Tensor:
        raise TypeError(
            "DeepReLU is not linear: it has no compact matrix W_L ⋯ W_1; use "
            "collapselab.models.compact_representation(net, shape, 'ignore_nonlinearities') "
            "for its linearisation"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Outputs ``(N, m_L)`` for inputs ``(N, ...)`` with ``m_0`` features."""
        _check_features_input(x, self.widths[0])
        h = self.flatten(x)
        for layer, act in zip(list(self.layers)[:-1], self.acts, strict=True):
            h = act(layer(h))
        return self.layers[-1](self.dropout(h))
