r"""The objective curvature is taken of: a model, a loss, data, and a parameter group.

.. math::
    \mathcal{L}(\theta) = \rho \sum_{n=1}^{N} \ell\big(f(x_n; \theta), y_n\big),
    \qquad \rho = 1/N \;(\texttt{reduction="mean"}) \text{ or } 1 \;(\texttt{"sum"}),

over the ``N`` samples of a data loader, as a function of the parameters ``θ`` of one group
(a layer's weight, a block, every parameter); the other parameters and the buffers are
held at their values. ``θ`` is the concatenation of the group's tensors, each flattened in
PyTorch's row-major order (so the weight ``W (out, in)`` of a linear layer is
``vec_row(W)``, paper 004's convention, and ``∂(aᵀ W h)/∂θ = a ⊗ h``).

The functional forms (``forward(θ, x)``, ``loss(θ, x, y)``) are built on
:func:`torch.func.functional_call`, so every operator is matrix-free and differentiated
by :mod:`torch.func` transforms; the model itself is never modified.

**BatchNorm** (``batchnorm=``):

* ``None`` (default): the model is used in the mode it is in; a BatchNorm or Dropout
  module in training mode is an error, because every product would then update the
  running statistics in place (BatchNorm) or draw a new mask (Dropout);
* ``"eval"``: every module in eval mode during each pass (running statistics, no dropout),
  restored afterwards;
* ``"batch"``: eval mode, except that BatchNorm layers normalise with the statistics of
  each batch, functionally (their running estimates are neither used nor updated). The
  curvature then depends on how the data are batched, as training does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.func import functional_call
from torch.nn.modules.batchnorm import _BatchNorm

from collapselab.checks import ArgumentTypeError, check_choice, split_batch
from collapselab.curvature.losses import OutputLoss, loss_reduction, resolve_loss
from collapselab.probe import eval_mode

REDUCTIONS = ("mean", "sum")
BATCHNORM = (None, "eval", "batch")

ParamsArg = nn.Module | Sequence[Any] | Mapping[str, Any] | str | None


class Objective:
    """A loss over data as a function of one parameter group (see the module docstring).

    Args:
        model: the network; it returns ``(B, C)`` outputs.
        loss: ``"ce"``, ``"mse"``, ``"mse_sum"``, ``"mse_half"`` or a loss module
            (:func:`~collapselab.curvature.losses.resolve_loss`).
        data: a re-iterable of ``(inputs, labels)`` batches (a ``DataLoader``, a list). It
            is iterated once per product and must give the same samples every time (no
            shuffling, no random augmentation).
        params: the group: ``None`` (every parameter that requires a gradient), a submodule
            of ``model`` or its name, a list of submodules, parameter names or parameter
            tensors of ``model``, or a dict of them.
        reduction: ``"mean"`` (``ρ = 1/N``) or ``"sum"`` (``ρ = 1``); by default the loss
            module's own ``reduction`` (``"mean"`` for a loss given by name). A loss module
            with ``reduction="none"``, or one that disagrees with an explicit ``reduction``,
            is an error: the objective is one number.
        batchnorm: ``None``, ``"eval"`` or ``"batch"`` (module docstring).

    Attributes:
        names: the group's parameter names, in order; ``shapes`` their shapes.
        theta: the group's values as one flat vector (taken when the objective is made).
        dim: ``P``, the length of ``theta``.
        passes: how many passes over the data the objective has made.
    """

    def __init__(
        self,
        model: nn.Module,
        loss: object,
        data: Iterable[Any],
        params: ParamsArg = None,
        *,
        reduction: str | None = None,
        batchnorm: str | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise ArgumentTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.loss: OutputLoss = resolve_loss(loss)
        if isinstance(data, Iterator) or not isinstance(data, Iterable):
            raise ArgumentTypeError(
                f"data must be a re-iterable of (inputs, labels) batches (a DataLoader, a "
                f"list), got {type(data).__name__}: every product is one pass over it"
            )
        self.data = data
        self.reduction = _reduction(loss, reduction)
        if batchnorm not in BATCHNORM:
            raise ValueError(f"batchnorm must be None, 'eval' or 'batch', got {batchnorm!r}")
        self.batchnorm = batchnorm
        self.names = resolve_params(model, params)
        named = dict(model.named_parameters())
        tensors = [named[n].detach() for n in self.names]
        self.shapes = [t.shape for t in tensors]
        self.numels = [t.numel() for t in tensors]
        dtypes = {t.dtype for t in tensors}
        if len(dtypes) != 1 or not next(iter(dtypes)).is_floating_point:
            raise ValueError(
                f"the parameters of the group must share one floating dtype, got {dtypes}"
            )
        self.theta = torch.cat([t.reshape(-1) for t in tensors]).clone()
        self.dim = int(self.theta.numel())
        self.passes = 0
        self.n_outputs: int | None = None  # C, read off the model's outputs on first use

    # ------------------------------------------------------------------ basics
    @property
    def dtype(self) -> torch.dtype:
        return self.theta.dtype

    @property
    def device(self) -> torch.device:
        return self.theta.device

    def unflatten(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        """The group's tensors from a flat vector (views, differentiable)."""
        parts = torch.split(theta, self.numels)
        return {n: p.view(s) for n, p, s in zip(self.names, parts, self.shapes, strict=True)}

    def flatten(self, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """A flat vector from the group's tensors by name."""
        return torch.cat([tensors[n].reshape(-1) for n in self.names])

    def forward(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The model's outputs ``(B, C)`` at group values ``theta``."""
        return functional_call(self.model, self.unflatten(theta), (x,))

    def batch_loss(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``Σ_{n in batch} ℓ(f(x_n; θ), y_n)`` (unscaled; the passes apply ``ρ``)."""
        return self.loss.value(self.forward(theta, x), y).sum()

    # ------------------------------------------------------------------ passes
    @contextmanager
    def _mode(self) -> Iterator[None]:
        if self.batchnorm is None:
            _check_deterministic(self.model)
            yield
            return
        with eval_mode(self.model):
            if self.batchnorm == "eval":
                yield
                return
            with _batch_statistics(self.model):
                yield

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """One pass over the data: ``(x, y)`` on the group's device, ``x`` in its dtype,
        inside the chosen BatchNorm mode and ``torch.no_grad`` (the :mod:`torch.func`
        transforms differentiate regardless)."""
        count = 0
        with self._mode(), torch.no_grad():
            for batch in self.data:
                x, y = split_batch(batch)
                x = x.to(self.device)
                if x.is_floating_point():
                    x = x.to(self.dtype)
                y = y.to(self.device)
                if y.dtype != torch.long:
                    raise ArgumentTypeError(f"labels must be int64 (torch.long), got {y.dtype}")
                if self.n_outputs is None:
                    self.n_outputs = self._outputs_of(x, y)
                _check_labels(y, self.n_outputs)
                count += 1
                yield x, y
        if count == 0:
            raise ValueError("data yielded no batch: the objective needs at least one sample")
        self.passes += 1

    def _outputs_of(self, x: torch.Tensor, y: torch.Tensor) -> int:
        """``C``, from the model's outputs on one batch, which must be ``(B, C)`` logits:
        a tuple, a scalar or a 3-D output gives a raw torch error deep inside a product
        otherwise."""
        out = self.forward(self.theta, x)
        if not isinstance(out, torch.Tensor):
            raise ValueError(
                f"the model returns a {type(out).__name__}, not a tensor: curvature needs "
                "(batch, C) outputs (wrap the model so that it returns the logits alone)"
            )
        if out.ndim != 2 or out.shape[0] != y.shape[0]:
            raise ValueError(
                f"the model's outputs have shape {tuple(out.shape)} for a batch of "
                f"{y.shape[0]}: curvature needs (batch, C) outputs, one row of C logits per "
                "sample"
            )
        return int(out.shape[1])

    def accumulate(self, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """``ρ Σ_batches fn(x, y)`` over one pass (``fn`` returns per-batch sums)."""
        total: torch.Tensor | None = None
        n = 0
        for x, y in self.batches():
            part = fn(x, y)
            total = part if total is None else total + part
            n += int(y.shape[0])
        assert total is not None  # batches() raised otherwise
        return total / n if self.reduction == "mean" else total

    def value(self) -> float:
        """``L(θ)``, checked finite."""

        def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return check_finite_loss(self.batch_loss(self.theta, x, y))

        return float(self.accumulate(fn))

    def gradient(self) -> torch.Tensor:
        """``∇_θ L`` (one pass), checked finite."""
        grad_fn = torch.func.grad(self.batch_loss, has_aux=False)

        def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            g = grad_fn(self.theta, x, y)
            if not bool(torch.isfinite(g).all()):
                raise ValueError("the gradient of the loss is NaN or Inf on a batch")
            return g

        return self.accumulate(fn)

    def __repr__(self) -> str:
        return (
            f"Objective(loss={self.loss}, P={self.dim}, reduction={self.reduction!r}, "
            f"params={self.names[:3]}{'...' if len(self.names) > 3 else ''})"
        )


def _reduction(loss: object, reduction: str | None) -> str:
    """The objective's reduction: ``reduction`` if given, else the loss module's own."""
    own = loss_reduction(loss)
    if own == "none":
        raise ValueError(
            f"{loss!r} has reduction='none' (per-sample losses): the curvature is that of one "
            "number; give the module reduction='mean' or 'sum'"
        )
    if reduction is None:
        return own or "mean"
    check_choice("reduction", reduction, REDUCTIONS)
    if own is not None and own != reduction:
        raise ValueError(
            f"reduction={reduction!r} contradicts the loss module's own {loss!r}: give one of them"
        )
    return reduction


def _check_labels(y: torch.Tensor, n_outputs: int) -> None:
    """Labels in ``[0, C)``: an out-of-range label has an all-zero one-hot target, and
    the curvature would be that of a different loss, silently."""
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= n_outputs):
        raise ValueError(
            f"labels must be class indices in [0, {n_outputs}) for the model's {n_outputs} "
            f"outputs, got labels from {int(y.min())} to {int(y.max())}"
        )


def check_finite_loss(loss: torch.Tensor) -> torch.Tensor:
    """``loss`` unchanged, or a ``ValueError`` when it is NaN or Inf."""
    if not bool(torch.isfinite(loss).all()):
        raise ValueError(
            f"the loss is {float(loss.detach().sum())} on a batch: curvature is undefined "
            "(NaN or Inf in the model's outputs or the loss)"
        )
    return loss


def resolve_params(model: nn.Module, params: ParamsArg) -> list[str]:
    """Names (in ``model.named_parameters()``) of the parameter group ``params``.

    Raises:
        ValueError: a module, name or tensor that is not part of ``model``, or an empty group.
    """
    named = dict(model.named_parameters())
    by_id = {id(p): n for n, p in named.items()}
    modules = {id(m): n for n, m in model.named_modules()}
    if params is None:
        names = [n for n, p in named.items() if p.requires_grad]
    else:
        items: Iterable[Any]
        if isinstance(params, str | nn.Module | torch.Tensor):
            items = [params]
        elif isinstance(params, Mapping):
            items = list(params.values())
        else:
            items = list(params)
        names = []
        for item in items:
            names += _names_of(item, model, named, by_id, modules)
    if not names:
        raise ValueError(f"the parameter group {params!r} holds no parameter of the model")
    seen: list[str] = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return seen


def _names_of(
    item: Any,
    model: nn.Module,
    named: dict[str, nn.Parameter],
    by_id: dict[int, str],
    modules: dict[int, str],
) -> list[str]:
    if isinstance(item, nn.Module):
        if id(item) not in modules:
            raise ValueError(f"module {type(item).__name__} is not a submodule of the model")
        prefix = modules[id(item)]
        return [f"{prefix}.{n}" if prefix else n for n, _ in item.named_parameters()]
    if isinstance(item, torch.Tensor):
        if id(item) not in by_id:
            raise ValueError(
                f"a tensor of shape {tuple(item.shape)} in params is not a parameter of the model"
            )
        return [by_id[id(item)]]
    if isinstance(item, str):
        if item in named:
            return [item]
        sub = dict(model.named_modules())
        if item in sub:
            return _names_of(sub[item], model, named, by_id, modules)
        raise ValueError(
            f"params: {item!r} is neither a parameter nor a submodule of the model "
            f"(parameters: {list(named)[:6]}{'...' if len(named) > 6 else ''})"
        )
    raise ArgumentTypeError(
        f"params must hold modules, parameter names or parameter tensors, got {type(item).__name__}"
    )


def _check_deterministic(model: nn.Module) -> None:
    for name, module in model.named_modules():
        if module.training and isinstance(module, _BatchNorm):
            raise ValueError(
                f"BatchNorm module {name!r} is in training mode: every product would update "
                "its running statistics in place. Call model.eval() (running statistics), or "
                "pass batchnorm='eval' or batchnorm='batch' (batch statistics, functional)"
            )
        if module.training and isinstance(module, nn.modules.dropout._DropoutNd) and module.p > 0:
            raise ValueError(
                f"Dropout module {name!r} is in training mode: the loss would be random. Call "
                "model.eval() or pass batchnorm='eval'"
            )


@contextmanager
def _batch_statistics(model: nn.Module) -> Iterator[None]:
    """BatchNorm layers in training mode without running estimates: they normalise with
    each batch's statistics and update nothing (restored on exit)."""
    saved = []
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            saved.append(
                (
                    module,
                    module.training,
                    module.track_running_stats,
                    module.running_mean,
                    module.running_var,
                )
            )
            module.train()
            module.track_running_stats = False  # no num_batches_tracked update either
            module.running_mean = None
            module.running_var = None
    try:
        yield
    finally:
        for module, flag, track, mean, var in saved:
            module.running_mean, module.running_var = mean, var
            module.training, module.track_running_stats = flag, track


__all__ = ["BATCHNORM", "REDUCTIONS", "Objective", "check_finite_loss", "resolve_params"]
