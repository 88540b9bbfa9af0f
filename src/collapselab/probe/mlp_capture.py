"""Per-sample capture of a plain MLP for paper 000's analysis (R4, R5, A7).

:func:`capture_mlp_state` runs one forward and one backward pass of the summed per-sample
loss over a probe batch and returns a :class:`collapselab.probe.MLPState`: for every linear
layer of a :class:`collapselab.models.MLP`, its weight, input, pre-activation gradients and
gates, what the theorems of :mod:`collapselab.theory.diversity_trap` read.

:func:`single_sample_feature_changes` gives ``ΔF^(l-1)`` "made by the training sample x"
in the reading of a hypothetical SGD step on x alone (note A7, ``single_sample_step``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from collapselab.checks import ArrayLike, as_labels, as_tensor, check_float, check_int
from collapselab.probe.linear_factors import linear_factors
from collapselab.probe.mlp_state import MLPState
from collapselab.probe.modes import eval_mode

LossArg = str | Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _linears(model: nn.Module) -> tuple[list[str], list[nn.Module], bool]:
    """The MLP's linear layers' names in order, its activations, and whether it has norms."""
    layers = getattr(model, "layers", None)
    classifier = getattr(model, "classifier", None)
    if layers is None or not isinstance(classifier, nn.Linear):
        raise TypeError(
            f"model must be a collapselab.models.MLP (layers[i].linear, layers[i].act, "
            f"classifier), got {type(model).__name__}"
        )
    names = [f"layers.{i}.linear" for i in range(len(layers))] + ["classifier"]
    acts = [layer.act for layer in layers]
    has_norm = any(hasattr(layer, "norm") for layer in layers)
    return names, acts, has_norm


def _activation_slope(act: nn.Module, z: torch.Tensor) -> torch.Tensor:
    if isinstance(act, nn.ReLU):
        return (z > 0).to(z.dtype)
    if isinstance(act, nn.LeakyReLU):
        return torch.where(z > 0, torch.ones_like(z), torch.full_like(z, act.negative_slope))
    raise TypeError(f"activation must be ReLU or LeakyReLU, got {type(act).__name__}")


def _per_sample_loss(loss: LossArg) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    if callable(loss):
        return loss
    if loss == "ce":
        return lambda logits, y: F.cross_entropy(logits, y, reduction="none")
    raise ValueError(f"loss must be 'ce' or a callable (logits, labels) -> (B,), got {loss!r}")


def capture_mlp_state(
    model: nn.Module, inputs: ArrayLike, labels: ArrayLike, loss: LossArg = "ce"
) -> MLPState:
    """Capture every linear layer's per-sample signals on a probe batch (R4).

    One forward and one backward pass of ``sum_x ℓ(f(x), y_x)`` in eval mode
    (:func:`collapselab.probe.linear_factors`; flags restored, parameter gradients left as
    they were): the rows are independent, so the gradient of the sum with respect to a
    layer's output holds each sample's own gradient.

    Args:
        model: a :class:`collapselab.models.MLP`.
        inputs: ``(N, ...)`` probe inputs.
        labels: ``(N,)`` integer labels.
        loss: ``"ce"`` (cross-entropy) or a per-sample loss ``(logits, labels) -> (N,)``.
    """
    names, acts, has_norm = _linears(model)
    p0 = next(model.parameters())
    x = as_tensor("inputs", inputs, device=p0.device).to(p0.dtype)
    y, _ = as_labels("labels", labels, x.shape[0], None, p0.device)
    cap = linear_factors(model, x, y, names, loss_fn=_per_sample_loss(loss))
    f64 = torch.float64
    slopes = None
    if not has_norm:
        slopes = tuple(
            _activation_slope(act, cap.outputs[n]).to(f64)
            for act, n in zip(acts, names[:-1], strict=True)
        )
    modules = dict(model.named_modules())
    return MLPState(
        weights=tuple(modules[n].weight.detach().to(f64).clone() for n in names),
        inputs=tuple(cap.inputs[n].to(f64) for n in names),
        pre_grads=tuple(cap.pre_grads[n].to(f64) for n in names),
        slopes=slopes,
        logits=cap.logits.to(f64),
        labels=y,
    )


def single_sample_feature_changes(
    model: nn.Module,
    inputs: ArrayLike,
    labels: ArrayLike,
    layer: int,
    lr: float,
    loss: LossArg = "ce",
    samples: Sequence[int] | None = None,
) -> torch.Tensor:
    """``ΔF^(l-1)|_x`` after one plain SGD step on sample x alone (note A7, R15).

    For each sample x: ``θ' = θ - η ∇_θ ℓ(x)`` (its own loss, no momentum, no weight
    decay), ``ΔF = F^(l-1)(x; θ') - F^(l-1)(x; θ)``, the input of linear layer ``l``. The
    model is left exactly as it was (parameters restored, gradients untouched). One forward
    and backward pass per sample: meant for probe sets of hundreds of samples. Only the
    parameters before layer ``l`` are stepped and copied (the later ones cannot change its
    input), and the passes that read the input stop at the layer.

    Args:
        model: a :class:`collapselab.models.MLP` (eval mode is used, flags restored).
        inputs, labels: the probe batch.
        layer: l in 1..L (the paper's numbering); ``ΔF^(l-1)`` is the change of its input.
        lr: η.
        loss: as in :func:`capture_mlp_state`.
        samples: indices of the samples to step on (default all).

    Returns:
        ``(n, d_l)`` float64.
    """
    names, _, _ = _linears(model)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= len(names):
        raise ValueError(
            f"layer {layer!r} is out of range: this MLP has {len(names)} linear layers; "
            f"expected one of layers 1..{len(names)}"
        )
    target = dict(model.named_modules())[names[layer - 1]]
    lr = check_float("lr", lr)
    p0 = next(model.parameters())
    x = as_tensor("inputs", inputs, device=p0.device).to(p0.dtype)
    y, _ = as_labels("labels", labels, x.shape[0], None, p0.device)
    idx = range(x.shape[0]) if samples is None else [check_int("sample", i) for i in samples]
    fn = _per_sample_loss(loss)
    params = _parameters_before(model, layer)
    probe = _LayerInput(target)
    out = []
    try:
        with eval_mode(model):
            for i in idx:
                xi, yi = x[i : i + 1], y[i : i + 1]
                out.append(_single_step_change(model, params, xi, yi, fn, lr, probe))
    finally:
        probe.close()
    return torch.stack(out) if out else torch.zeros((0, target.in_features), dtype=torch.float64)


def _parameters_before(model: nn.Module, layer: int) -> list[nn.Parameter]:
    """The trainable parameters that the input of linear layer ``layer`` can depend on:
    every one but those of the hidden layers from ``layer`` on and of the classifier (the
    forward pass of an MLP runs its layers in order, so those come after that input)."""
    after = {id(p) for block in model.layers[layer - 1 :] for p in block.parameters()}
    after |= {id(p) for p in model.classifier.parameters()}
    return [p for p in model.parameters() if p.requires_grad and id(p) not in after]


class _Reached(Exception):
    """Raised by :class:`_LayerInput` to end a forward pass at the hooked layer."""


class _LayerInput:
    """A forward pre-hook on ``module`` keeping its latest input; :meth:`of` runs the model
    only up to that module (the layers after it cannot change its input)."""

    def __init__(self, module: nn.Module) -> None:
        self.value: torch.Tensor | None = None
        self._stop = False
        self._handle = module.register_forward_pre_hook(self._hook)

    def _hook(self, _module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        self.value = args[0]
        if self._stop:
            raise _Reached

    def of(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """The module's input for ``x``, flattened, in float64 (no gradient)."""
        self._stop = True
        try:
            with torch.no_grad():
                model(x)
        except _Reached:
            pass
        finally:
            self._stop = False
        assert self.value is not None, "the forward pass did not reach the measured layer"
        return self.value.reshape(-1).to(torch.float64)

    def close(self) -> None:
        self._handle.remove()


def _single_step_change(model, params, xi, yi, loss_fn, lr, probe: _LayerInput) -> torch.Tensor:
    """The hooked layer's input after one SGD step on ``(xi, yi)`` minus before it.

    Only ``params`` (those before the layer, :func:`_parameters_before`) are stepped, copied
    and put back exactly, even when a forward pass fails; the later ones cannot change the
    input, and the gradients of the earlier ones do not depend on whether autograd also
    computes the later ones'. Without any (the first layer, whose input is the sample) the
    change is zero."""
    before = probe.of(model, xi)
    if not params:
        return torch.zeros_like(before)
    with torch.enable_grad():
        grads = torch.autograd.grad(loss_fn(model(xi), yi).sum(), params, allow_unused=True)
    copies = [p.detach().clone() for p in params]
    with torch.no_grad():
        try:
            for p, g in zip(params, grads, strict=True):
                if g is not None:
                    p.sub_(lr * g)
            after = probe.of(model, xi)
        finally:
            for p, c in zip(params, copies, strict=True):
                p.copy_(c)
    return after - before
