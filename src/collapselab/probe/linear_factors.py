r"""Rank-1 factors of the per-sample weight gradients of linear layers (paper 000, R4-R5).

For a linear layer ``z = W a (+ b)`` and a per-sample loss ``l_x``, the gradient of ``l_x``
with respect to ``W`` is ``g_x a_xᵀ`` with ``g_x = dl_x/dz_x`` (the pre-activation gradient)
and ``a_x`` the layer's input: one SGD step on x alone changes the weight by
``ΔW|_x = -η g_x a_xᵀ``. :func:`linear_factors` returns ``a`` and ``g`` for every sample and
every selected linear layer from one forward and one backward pass of ``sum_x l_x`` (exact
per-sample rows when the samples are independent, as in
:func:`~collapselab.probe.per_sample_gradients`), never forming a d x h matrix per sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from collapselab.probe.capture import FeatureCapture, flatten_batch
from collapselab.probe.gradients import (
    LossFn,
    check_independent_rows,
    cross_entropy_per_sample,
    linear_layer_names,
)
from collapselab.probe.modes import eval_mode
from collapselab.probe.select import LayerSpec


@dataclass
class LinearFactors:
    """What :func:`linear_factors` returns; detached, rows are samples.

    Attributes:
        inputs: ``{layer: (B, d)}`` the inputs ``a_x`` of each linear layer.
        pre_grads: ``{layer: (B, h)}`` ``g_x = dl_x/dz_x`` of its output ``z``.
        outputs: ``{layer: (B, h)}`` its outputs ``z`` (the pre-activations).
        logits: ``(B, C)`` model outputs.
    """

    inputs: dict[str, torch.Tensor]
    pre_grads: dict[str, torch.Tensor]
    outputs: dict[str, torch.Tensor]
    logits: torch.Tensor


def linear_factors(
    model: nn.Module,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    layers: LayerSpec = nn.Linear,
    *,
    loss_fn: LossFn | None = None,
) -> LinearFactors:
    """Per-sample factors ``(a_x, g_x)`` of the selected linear layers' weight gradients.

    Runs in eval mode (flags restored) and refuses models whose batch statistics couple the
    samples; parameters' ``.grad`` are left untouched.

    Args:
        model: the network.
        inputs: ``(B, ...)`` a batch on the model's device and dtype.
        labels: ``(B,)`` labels.
        layers: the linear layers (default every ``nn.Linear``, in forward order).
        loss_fn: ``(logits, labels) -> (B,)`` per-sample losses; default cross-entropy.
    """
    names = linear_layer_names(model, layers)
    loss_fn = cross_entropy_per_sample if loss_fn is None else loss_fn
    with eval_mode(model), torch.enable_grad():
        check_independent_rows(model, allow_batch_coupling=False)
        with FeatureCapture(model, names, "both", detach=False) as cap:
            logits = model(inputs)
        losses = loss_fn(logits, labels)
        if not isinstance(losses, torch.Tensor) or losses.shape != (inputs.shape[0],):
            raise ValueError(f"loss_fn must return per-sample losses of shape ({inputs.shape[0]},)")
        targets = [cap.raw_outputs[n] for n in names]
        grads = torch.autograd.grad(losses.sum(), targets, allow_unused=True)
    grads = [torch.zeros_like(t) if g is None else g for t, g in zip(targets, grads, strict=True)]
    return LinearFactors(
        inputs={n: cap.inputs[n].detach() for n in names},
        pre_grads={n: flatten_batch(g.detach()) for n, g in zip(names, grads, strict=True)},
        outputs={n: cap.outputs[n].detach() for n in names},
        logits=logits.detach(),
    )
