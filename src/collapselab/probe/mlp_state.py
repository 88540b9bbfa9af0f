"""The per-sample state of a plain MLP at one iteration, as paper 000's analysis reads it
(R4, R5).

:class:`MLPState` holds, for every linear layer ``l = 1..L`` (the paper's 1-based
numbering), the weight ``W^(l)``, the layer's input ``F^(l-1)``, the pre-activation gradients
``g^(l) = D^(l) Ḟ^(l) = ∂ℓ_x/∂(W^(l) F^(l-1))`` and the gating ``D^(l)`` (the derivative of
the activation: 0/1 for ReLU, 1/slope for LeakyReLU). A per-sample weight change is kept as
its rank-1 factors ``(-η g_x, F_x)``, never as a d x h matrix (R5). The state is captured
from a model by :func:`collapselab.probe.capture_mlp_state`; the theorems of
:mod:`collapselab.theory.diversity_trap` read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from collapselab.checks import check_float


@dataclass(frozen=True)
class MLPState:
    """One iteration's per-sample capture of an MLP (R4), all float64, layers 1-based.

    Attributes:
        weights: ``W^(l)``, ``(h_l, d_l)``, for l = 1..L (index ``l - 1``).
        inputs: ``F^(l-1)``, ``(N, d_l)``: the input of linear layer l.
        pre_grads: ``g^(l)``, ``(N, h_l)``: gradient of each sample's own loss with respect
            to the linear layer's output.
        slopes: ``D^(l)`` diagonals, ``(N, h_l)``, for l = 1..L-1 (the activation's derivative
            at the pre-activation); None for a model with normalisation layers (the
            theorems assume ``F^(l) = D^(l) W^(l) F^(l-1)``, Eq. 1).
        logits: ``(N, C)``.
        labels: ``(N,)`` int64.
    """

    weights: tuple[torch.Tensor, ...]
    inputs: tuple[torch.Tensor, ...]
    pre_grads: tuple[torch.Tensor, ...]
    slopes: tuple[torch.Tensor, ...] | None
    logits: torch.Tensor
    labels: torch.Tensor

    @property
    def depth(self) -> int:
        """Number of linear layers L."""
        return len(self.weights)

    def check_layer(self, layer: int, *, needs_next: bool = False) -> int:
        """``layer`` as an int in 1..L (1..L-1 with ``needs_next``), else a clear error."""
        top = self.depth - 1 if needs_next else self.depth
        what = "layers 1..{top} (layer l+1 must exist)" if needs_next else "layers 1..{top}"
        if isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= top:
            raise ValueError(
                f"layer {layer!r} is out of range: this MLP has {self.depth} linear layers; "
                f"expected one of {what.format(top=top)}"
            )
        return layer

    def slopes_of(self, layer: int) -> torch.Tensor:
        """``D^(l)`` of a hidden layer (1..L-1), or a clear error when it is not defined."""
        layer = self.check_layer(layer)
        if self.slopes is None:
            raise ValueError(
                "the gating D^(l) is not defined for a model with normalisation layers: the "
                "paper's Eq. 1 (F = D W F_prev) and its theorems assume none"
            )
        if layer == self.depth:
            raise ValueError(f"layer {layer} is the classifier: it has no activation D^(l)")
        return self.slopes[layer - 1]

    def feature_change_to(self, later: MLPState, layer: int) -> torch.Tensor:
        """``ΔF^(l-1) = F_later - F_self`` of the same probe samples (the ``batch_step``
        reading of note A7 when ``later`` is captured one optimiser step after this one)."""
        layer = self.check_layer(layer)
        same = later.depth == self.depth and torch.equal(later.labels, self.labels)
        if not same or not torch.equal(later.inputs[0], self.inputs[0]):
            raise ValueError(
                "the two captures must be of the same MLP on the same probe samples "
                "(same depth, inputs and labels)"
            )
        return later.inputs[layer - 1] - self.inputs[layer - 1]

    def weight_change(self, layer: int, lr: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Rank-1 factors ``(-η g_x, F_x)`` of the per-sample changes ``ΔW^(l)|_x`` (R5)."""
        layer = self.check_layer(layer)
        return -check_float("lr", lr) * self.pre_grads[layer - 1], self.inputs[layer - 1]
