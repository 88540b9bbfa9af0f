r"""Per-sample feature gradients of a whole batch from one backward pass (paper 000, R4-R5).

For a batch of B samples with per-sample losses ``l_i`` and layer features ``F_i`` (row i of
the layer's ``(B, D)`` output), the gradient of the *summed* loss with respect to row i is

``d(sum_j l_j)/dF_i = sum_j dl_j/dF_i = dl_i/dF_i``,

because ``l_j`` does not depend on ``F_i`` for ``j != i`` when the network treats the
samples independently. So one backward pass of ``sum_i l_i`` gives every sample's feature
gradient ``dl_i/dF_i`` as the rows of ``d(sum l)/dF``, exactly (not an approximation).

The independence fails when a layer mixes samples: batch normalisation with batch
statistics (training mode, or ``track_running_stats=False``). Then row i of the gradient
also collects ``dl_j/dF_i`` through the batch mean and variance. :func:`per_sample_gradients`
therefore runs the model in eval mode by default and refuses coupled batches unless told
otherwise (see :func:`collapselab.probe.batch_coupling_modules`).

For ReLU-type layers (``nn.ReLU``, ``nn.LeakyReLU``) it also returns the pre-activations
``z`` (the layer's input), the gating pattern ``D = 1[z > 0]`` and the pre-activation
gradients ``g = dl_i/dz_i`` (``= D * dl_i/dF_i`` for ReLU), the factors of paper 000's
per-sample weight change ``Delta W|_x = -eta g_x F_x^T`` (R5), never materialised.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from collapselab.checks import check_bool, check_choice
from collapselab.probe.capture import FeatureCapture, flatten_batch
from collapselab.probe.modes import batch_coupling_modules, eval_mode
from collapselab.probe.select import LayerSpec, resolve_layers

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``loss_fn(logits, labels) -> (B,)`` per-sample losses."""

GATED_TYPES: tuple[type[nn.Module], ...] = (nn.ReLU, nn.LeakyReLU)
"""Module types whose input is a pre-activation with a 0/1 gating pattern."""


def cross_entropy_per_sample(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``-log softmax(z_i)[y_i]`` for every sample, shape ``(B,)``."""
    return F.cross_entropy(logits, labels, reduction="none")


@dataclass
class GradientCapture:
    """What :func:`per_sample_gradients` returns; every tensor is detached, rows are samples.

    Attributes:
        features: ``{layer: (B, D)}`` layer outputs ``F``.
        gradients: ``{layer: (B, D)}`` per-sample feature gradients ``dl_i/dF_i``.
        preactivations: ``{layer: (B, D)}`` inputs ``z`` of the ReLU-type layers.
        preact_gradients: ``{layer: (B, D)}`` ``dl_i/dz_i`` of those layers.
        gates: ``{layer: (B, D)}`` bool gating pattern ``z > 0`` of those layers.
        logits: ``(B, C)`` model outputs.
        losses: ``(B,)`` per-sample losses.
        linear_inputs: ``{layer: (B, d)}`` inputs ``a_x`` of the ``linear_layers`` asked for.
        linear_pre_grads: ``{layer: (B, h)}`` ``g_x = dl_x/dz_x`` of their outputs ``z``:
            the rank-1 factors of each sample's weight gradient ``g_x a_xᵀ``, as
            :func:`~collapselab.probe.linear_factors` gives them.
    """

    features: dict[str, torch.Tensor]
    gradients: dict[str, torch.Tensor]
    preactivations: dict[str, torch.Tensor]
    preact_gradients: dict[str, torch.Tensor]
    gates: dict[str, torch.Tensor]
    logits: torch.Tensor
    losses: torch.Tensor
    linear_inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    linear_pre_grads: dict[str, torch.Tensor] = field(default_factory=dict)


def gated_layers(model: nn.Module, names: list[str]) -> list[str]:
    """The names among ``names`` whose module is ReLU-type (:data:`GATED_TYPES`)."""
    modules = dict(model.named_modules())
    return [n for n in names if isinstance(modules[n], GATED_TYPES)]


def check_not_inplace(model: nn.Module, names: list[str]) -> None:
    """ValueError if a ReLU-type layer among ``names`` works in place (its input is lost)."""
    modules = dict(model.named_modules())
    bad = [n for n in names if getattr(modules[n], "inplace", False)]
    if bad:
        raise ValueError(
            f"layers {bad} use inplace=True: their input (the pre-activation) is overwritten "
            "by the output, so it cannot be captured; build them with inplace=False"
        )


def linear_layer_names(model: nn.Module, layers: LayerSpec) -> list[str]:
    """The resolved names of ``layers``; ValueError unless every one is an ``nn.Linear``."""
    names = resolve_layers(model, layers)
    modules = dict(model.named_modules())
    bad = [n for n in names if not isinstance(modules[n], nn.Linear)]
    if bad:
        raise ValueError(f"layers {bad} are not nn.Linear; expected linear layers only")
    return names


def check_independent_rows(model: nn.Module, allow_batch_coupling: bool) -> None:
    """ValueError when samples are coupled (see the module docstring) and that is not allowed."""
    coupled = batch_coupling_modules(model)
    if coupled and not allow_batch_coupling:
        raise ValueError(
            f"modules {coupled[:5]} normalise with batch statistics, so a sample's loss depends "
            "on the other samples and the rows of d(sum loss)/dF are not per-sample gradients; "
            "use mode='eval' (BatchNorm with running statistics) or pass "
            "allow_batch_coupling=True to get the gradient of the summed batch loss"
        )


def _prepare_inputs(inputs: torch.Tensor) -> torch.Tensor:
    # A floating input that requires grad makes every captured tensor part of the graph,
    # even for a model with frozen parameters; autograd.grad below computes gradients only
    # for the captured tensors, so this costs nothing for the input itself.
    if inputs.is_floating_point() and not inputs.requires_grad:
        return inputs.detach().requires_grad_(True)
    return inputs


def per_sample_gradients(
    model: nn.Module,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    layers: LayerSpec,
    *,
    loss_fn: LossFn | None = None,
    preactivations: bool = True,
    mode: Literal["eval", "current"] = "eval",
    allow_batch_coupling: bool = False,
    linear_layers: LayerSpec | None = None,
) -> GradientCapture:
    r"""Features and per-sample feature gradients ``dl_i/dF_i`` of ``layers``, one backward.

    Runs ``logits = model(inputs)``, ``l = loss_fn(logits, labels)`` (``(B,)``), and
    ``torch.autograd.grad(l.sum(), captured tensors)``: gradients are computed only for the
    captured tensors (parameters' ``.grad`` are left untouched).

    Args:
        model: the network (its parameters are not modified).
        inputs: ``(B, ...)`` a batch on the model's device and dtype.
        labels: ``(B,)`` integer labels (whatever ``loss_fn`` expects).
        layers: layers whose outputs are the features (names, patterns or types; see
            :func:`collapselab.probe.resolve_layers`).
        loss_fn: ``(logits, labels) -> (B,)`` per-sample losses; default cross-entropy.
            Any per-sample scaling (e.g. MSE averaged over classes) scales the gradients.
        preactivations: also capture, for ReLU-type layers among ``layers``, the input
            ``z``, the gates ``z > 0`` and ``dl_i/dz_i``.
        mode: ``"eval"`` (default): run in eval mode (flags restored afterwards);
            ``"current"``: keep the model's train/eval flags.
        allow_batch_coupling: accept modules that mix samples (BatchNorm with batch
            statistics); the rows are then the gradient of the summed batch loss, not
            per-sample gradients.
        linear_layers: also the rank-1 factors ``(a_x, g_x)`` of these ``nn.Linear``
            layers' per-sample weight gradients, from the same backward pass (the gradient
            with respect to each one's output is one more target of it): the values of
            :func:`~collapselab.probe.linear_factors`, without its second pass.

    Raises:
        ValueError: batch coupling (unless allowed), in-place ReLU-type layers with
            ``preactivations``, or a loss that is not ``(B,)``.
        RuntimeError: no captured tensor depends on anything that requires grad.
    """
    check_choice("mode", mode, ("eval", "current"))
    check_bool("preactivations", preactivations)
    check_bool("allow_batch_coupling", allow_batch_coupling)
    if not isinstance(inputs, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise TypeError("inputs and labels must be torch tensors")
    if inputs.ndim == 0 or labels.shape[:1] != inputs.shape[:1]:
        raise ValueError(
            f"labels must have one entry per input row: inputs {tuple(inputs.shape)}, "
            f"labels {tuple(labels.shape)}"
        )
    loss_fn = cross_entropy_per_sample if loss_fn is None else loss_fn
    names = resolve_layers(model, layers)
    gated = gated_layers(model, names) if preactivations else []
    check_not_inplace(model, gated)
    linear = linear_layer_names(model, linear_layers) if linear_layers is not None else []
    with eval_mode(model) if mode == "eval" else nullcontext(), torch.enable_grad():
        check_independent_rows(model, allow_batch_coupling)
        out_cap = FeatureCapture(model, names, "output", detach=False)
        in_cap = FeatureCapture(model, gated, "input", detach=False) if gated else None
        lin_cap = FeatureCapture(model, linear, "both", detach=False) if linear else None
        try:
            logits = model(_prepare_inputs(inputs))
        finally:
            for cap in (out_cap, in_cap, lin_cap):
                if cap is not None:
                    cap.close()
        losses = loss_fn(logits, labels)
        if not isinstance(losses, torch.Tensor) or losses.shape != (inputs.shape[0],):
            shape = tuple(losses.shape) if isinstance(losses, torch.Tensor) else type(losses)
            raise ValueError(
                f"loss_fn must return per-sample losses of shape ({inputs.shape[0]},), got {shape}"
            )
        targets = [out_cap.raw_outputs[n] for n in names]
        if in_cap is not None:
            targets += [in_cap.raw_inputs[n] for n in gated]
        if lin_cap is not None:
            targets += [lin_cap.raw_outputs[n] for n in linear]
        missing = [t for t in targets if not t.requires_grad]
        if missing or not losses.requires_grad:
            raise RuntimeError(
                "the captured features do not depend on anything that requires grad; "
                "give the model a floating-point input or trainable parameters"
            )
        grads = torch.autograd.grad(losses.sum(), targets, allow_unused=True)
    grads = [torch.zeros_like(t) if g is None else g for t, g in zip(targets, grads, strict=True)]
    flat = [flatten_batch(g.detach()) for g in grads]
    k, k_gated = len(names), len(names) + len(gated)
    pre = {n: in_cap.inputs[n].detach() for n in gated} if in_cap is not None else {}
    return GradientCapture(
        features={n: out_cap.outputs[n].detach() for n in names},
        gradients=dict(zip(names, flat[:k], strict=True)),
        preactivations=pre,
        preact_gradients=dict(zip(gated, flat[k:k_gated], strict=True)),
        gates={n: z > 0 for n, z in pre.items()},
        logits=logits.detach(),
        losses=losses.detach(),
        linear_inputs={n: lin_cap.inputs[n].detach() for n in linear} if lin_cap else {},
        linear_pre_grads=dict(zip(linear, flat[k_gated:], strict=True)),
    )
