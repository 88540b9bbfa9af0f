"""Capture layer inputs/outputs (and their gradients) with forward hooks.

A :class:`FeatureCapture` hooks the selected layers of a model; after every forward pass
it holds each layer's output and/or input for that pass, flattened to ``(batch, D)`` with
``D`` the product of the non-batch dimensions (a ``(B, C, H, W)`` feature map becomes
``(B, C*H*W)``, in ``reshape`` order). With ``gradients=True`` it also registers tensor
hooks so that, after a backward pass, it holds the gradient of the differentiated scalar
with respect to each captured tensor, flattened the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import torch
from torch import nn

from collapselab.checks import check_bool, check_choice
from collapselab.probe._inplace import InPlaceGuard
from collapselab.probe.select import LayerSpec, resolve_layers

Where = Literal["output", "input", "both"]
_WHERE = ("output", "input", "both")


def flatten_batch(t: torch.Tensor) -> torch.Tensor:
    """``t`` as ``(batch, D)`` (``reshape``: a view when the memory layout allows)."""
    if t.ndim == 0:
        raise ValueError(
            "cannot flatten a 0-d tensor into (batch, D); a layer must keep a batch dim"
        )
    return t.reshape(t.shape[0], -1) if t.ndim != 2 else t


class FeatureCapture:
    """Forward hooks that keep the flattened inputs/outputs of some layers of one forward pass.

    Args:
        model: the network.
        layers: which layers (see :func:`collapselab.probe.resolve_layers`): names, glob
            patterns, compiled regexes or module types.
        where: capture each layer's ``"output"``, its ``"input"`` (the first positional
            argument of its ``forward``) or ``"both"``.
        detach: store detached tensors (passes over features; nothing holds the graph). Set
            ``False`` to differentiate with respect to the captured tensors: then
            :attr:`raw_outputs` / :attr:`raw_inputs` also hold them unflattened, exactly as
            the graph saw them (differentiate with respect to these, not the flattened
            views, which the loss does not depend on).
        gradients: register tensor hooks on the captured tensors (which must require
            grad, so the forward must run with autograd enabled); after ``backward()``,
            :attr:`output_grads` / :attr:`input_grads` hold ``d(scalar)/d(tensor)``. For a
            loss that is a *mean* over the batch, and samples that do not interact, these
            are the per-sample gradients divided by the batch size; see
            :func:`collapselab.probe.per_sample_gradients` for the exact per-sample version.
        sink: instead of keeping the tensors, call ``sink(layer, kind, tensor)`` from the
            hook with each flattened, detached tensor (``kind`` is ``"output"`` or
            ``"input"``) as soon as the layer has computed it: streaming consumers then
            process features while they are still in cache and memory is not held for
            the whole pass. The dictionaries stay empty, and the twice-called check does
            not apply, nor do ``copy`` and the in-place check below: the sink runs before
            any later operation of the pass.
        copy: keep copies of the captured tensors. By default the dictionaries hold the
            tensors the layers returned (or received); if a later operation of the same
            pass modifies one in place (an ``nn.ReLU(inplace=True)`` after a captured
            layer, or the captured layer itself for ``where="input"``), the end of the pass
            raises ``RuntimeError`` instead of leaving overwritten values; ``copy=True``
            keeps the values as the layer saw them. Only with ``detach=True``: a copy is
            not on the loss's path, so nothing could be differentiated with respect to it.

    Every forward pass of ``model`` (a pre-hook on the model itself) starts a new capture,
    so the dictionaries always describe the latest pass. A hooked layer called twice in
    one pass raises ``RuntimeError``: its features would be ambiguous.

    Use as a context manager (hooks are removed on exit) or call :meth:`close`::

        with FeatureCapture(model, ["blocks.0", "blocks.1"]) as cap, torch.no_grad():
            model(x)
            h = cap.outputs["blocks.1"]          # (B, D)
    """

    def __init__(
        self,
        model: nn.Module,
        layers: LayerSpec,
        where: Where = "output",
        *,
        detach: bool = True,
        gradients: bool = False,
        sink: Callable[[str, str, torch.Tensor], None] | None = None,
        copy: bool = False,
    ) -> None:
        check_choice("where", where, _WHERE)
        if check_bool("gradients", gradients) and check_bool("detach", detach):
            raise ValueError("gradients=True needs detach=False (detached tensors have no grad)")
        if sink is not None and (gradients or not detach):
            raise ValueError("a sink receives detached tensors; use it with the defaults")
        if check_bool("copy", copy) and not detach:
            raise ValueError(
                "copy=True needs detach=True: a copy is not on the loss's path, so gradients "
                "with respect to it do not exist"
            )
        self.model = model
        self.layers = resolve_layers(model, layers)
        self.where = where
        self.detach = check_bool("detach", detach)
        self.gradients = check_bool("gradients", gradients)
        self.sink = sink
        self.copy = check_bool("copy", copy)
        self._guard = InPlaceGuard()
        self.outputs: dict[str, torch.Tensor] = {}
        self.inputs: dict[str, torch.Tensor] = {}
        self.raw_outputs: dict[str, torch.Tensor] = {}
        self.raw_inputs: dict[str, torch.Tensor] = {}
        self.output_grads: dict[str, torch.Tensor] = {}
        self.input_grads: dict[str, torch.Tensor] = {}
        self.n_forwards = 0
        self._handles: list[Any] = []
        self._open()

    # ---------------------------------------------------------------- hook plumbing
    def _open(self) -> None:
        self._handles.append(self.model.register_forward_pre_hook(self._start_pass))
        self._handles.append(self.model.register_forward_hook(self._end_pass))
        modules = dict(self.model.named_modules())
        for name in self.layers:
            module = modules[name]
            if self.where in ("input", "both"):
                self._handles.append(module.register_forward_pre_hook(self._pre_hook_for(name)))
            if self.where in ("output", "both"):
                self._handles.append(module.register_forward_hook(self._hook_for(name)))

    def _start_pass(self, module: nn.Module, args: Any) -> None:
        self.n_forwards += 1
        self.outputs, self.inputs = {}, {}
        self.raw_outputs, self.raw_inputs = {}, {}
        self.output_grads, self.input_grads = {}, {}
        self._guard.clear()

    def _end_pass(self, module: nn.Module, args: Any, output: Any) -> None:
        changed = [f"{kind} of {name!r}" for kind, name in self._guard.changed()]
        self._guard.clear()
        if changed:
            raise RuntimeError(
                f"the captured {', '.join(changed)} was modified in place later in the "
                "forward pass (e.g. by nn.ReLU(inplace=True)), so the kept tensor no longer "
                "holds the layer's values; pass copy=True to FeatureCapture, use a sink, or "
                "make that operation out-of-place"
            )

    def _keep(self, name: str, t: Any, kind: str) -> None:
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"layer {name!r}: its {kind} is a {type(t).__name__}, not a tensor; "
                "capture a layer whose forward takes and returns a single tensor"
            )
        store = self.outputs if kind == "output" else self.inputs
        if self.sink is not None:
            self.sink(name, kind, flatten_batch(t.detach()))
            return
        if name in store:
            raise RuntimeError(
                f"layer {name!r} was called twice in one forward pass; its {kind} is "
                "ambiguous (capture a module that runs once per pass)"
            )
        if self.gradients:
            if not t.requires_grad:
                raise RuntimeError(
                    f"layer {name!r}: its {kind} does not require grad; run the forward pass "
                    "with autograd enabled (and an input or parameter that requires grad)"
                )
            grads = self.output_grads if kind == "output" else self.input_grads
            t.register_hook(self._grad_hook(grads, name))
        kept = t.detach() if self.detach else t
        if self.copy:
            kept = kept.clone()
        else:
            self._guard.watch((kind, name), kept)
        store[name] = flatten_batch(kept)
        if not self.detach:
            raw = self.raw_outputs if kind == "output" else self.raw_inputs
            raw[name] = kept

    @staticmethod
    def _grad_hook(grads: dict[str, torch.Tensor], name: str):
        def hook(grad: torch.Tensor) -> None:
            grads[name] = flatten_batch(grad.detach())

        return hook

    def _pre_hook_for(self, name: str):
        # Inputs are taken before the layer runs: a layer that works in place (ReLU with
        # inplace=True) would otherwise hand over its output as its input.
        def pre_hook(module: nn.Module, args: tuple[Any, ...]) -> None:
            if not args:
                raise TypeError(
                    f"layer {name!r} was called without positional arguments; "
                    "where='input' captures the first positional argument"
                )
            self._keep(name, args[0], "input")

        return pre_hook

    def _hook_for(self, name: str):
        def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            self._keep(name, output, "output")

        return hook

    # ------------------------------------------------------------------ public API
    @property
    def features(self) -> dict[str, torch.Tensor]:
        """The captured tensors of the last pass: outputs, or inputs for ``where="input"``."""
        return self.inputs if self.where == "input" else self.outputs

    def close(self) -> None:
        """Remove every hook (idempotent)."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __enter__(self) -> FeatureCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
