r"""The compact (end-to-end) matrix of any model, read off the identity basis (paper 002
§3.3 and App. D; note 002 R11, §7 item 11).

For an affine model ``f(x) = W x + c`` with inputs of ``q = prod(input_shape)`` entries
and ``K`` outputs, column ``j`` of the compact matrix ``W`` (``K x q``) is

.. math::

    W e_j = f(e_j) - f(0),

``e_j`` the ``j``-th identity basis vector reshaped to ``input_shape``. This is the exact
Jacobian of a linear or affine model (deep linear nets, convolutions, average pooling,
eval-mode BatchNorm, flattening, padding). For a non-linear network the paper reads the
same matrix off its linearisation, "ignoring any non-linear activation" (§3.3): a copy in
which every supported elementwise activation is the identity and max-pooling is average
pooling (App. D's linear st-VGG: "average pooling with a similar stride").

* :func:`linearised_copy` builds that copy;
* :func:`compact_representation` returns ``W`` (``method="exact"`` for a model that is
  already affine, ``"ignore_nonlinearities"`` for the paper's linearisation).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import torch
from torch import nn

from collapselab.checks import check_choice, check_float, check_int
from collapselab.models.modes import eval_mode

__all__ = [
    "BIAS_MODES",
    "IDENTITY_ACTIVATIONS",
    "MAX_POOL_MODES",
    "METHODS",
    "compact_representation",
    "linearised_copy",
]

METHODS = ("exact", "ignore_nonlinearities")
"""How :func:`compact_representation` treats the model."""

MAX_POOL_MODES = ("average", "keep")
"""What :func:`linearised_copy` does with max-pooling."""

BIAS_MODES = ("keep", "drop")
"""What :func:`compact_representation` does with biases."""

IDENTITY_ACTIVATIONS: tuple[type[nn.Module], ...] = (
    nn.ReLU,
    nn.LeakyReLU,
    nn.PReLU,
    nn.ELU,
    nn.GELU,
    nn.SiLU,
    nn.Tanh,
)
"""Activations :func:`linearised_copy` replaces by the identity: those with slope 1 where
they pass the signal (the ReLU family: ReLU, LeakyReLU, PReLU, ELU, GELU, SiLU, all ``x``
for large ``x``) or at the origin (Tanh, ``tanh x = x + O(x^3)``). Others (Sigmoid,
Softplus, Softmax, ...) have no such identity part and are left in place, so the copy is
then not affine and :func:`compact_representation` says so."""

_MAX_POOLS = {nn.MaxPool1d: nn.AvgPool1d, nn.MaxPool2d: nn.AvgPool2d, nn.MaxPool3d: nn.AvgPool3d}
_ADAPTIVE_MAX_POOLS = {
    nn.AdaptiveMaxPool1d: nn.AdaptiveAvgPool1d,
    nn.AdaptiveMaxPool2d: nn.AdaptiveAvgPool2d,
    nn.AdaptiveMaxPool3d: nn.AdaptiveAvgPool3d,
}


def _average_pool(pool: nn.Module) -> nn.Module:
    """The average pool over the same windows as the max pool ``pool``."""
    if getattr(pool, "return_indices", False):
        raise ValueError(f"{pool} returns indices: it has no average-pooling counterpart")
    if type(pool) in _ADAPTIVE_MAX_POOLS:
        return _ADAPTIVE_MAX_POOLS[type(pool)](pool.output_size)
    dilation = pool.dilation if isinstance(pool.dilation, tuple) else (pool.dilation,)
    if any(d != 1 for d in dilation):
        raise ValueError(
            f"{pool} has dilation={pool.dilation}; average pooling has no dilation, so "
            "max_pool='average' needs dilation 1 (use max_pool='keep')"
        )
    return _MAX_POOLS[type(pool)](
        pool.kernel_size, pool.stride, pool.padding, pool.ceil_mode, count_include_pad=False
    )


def _replacement(module: nn.Module, max_pool: str) -> nn.Module | None:
    """The module that replaces ``module`` in the linearised copy, or None to keep it."""
    if isinstance(module, IDENTITY_ACTIVATIONS):
        return nn.Identity()
    if max_pool == "average" and type(module) in {**_MAX_POOLS, **_ADAPTIVE_MAX_POOLS}:
        return _average_pool(module)
    return None


def linearised_copy(model: nn.Module, max_pool: str = "average") -> nn.Module:
    """A copy of ``model`` with its non-linearities ignored (paper 002 §3.3), in eval mode.

    Every module of :data:`IDENTITY_ACTIVATIONS` becomes ``nn.Identity``; with
    ``max_pool="average"`` every ``MaxPool{1,2,3}d`` becomes ``AvgPool{1,2,3}d`` with the
    same ``kernel_size``, ``stride``, ``padding`` and ``ceil_mode`` (``count_include_pad=False``:
    like the max, the average runs over the input entries of each window, never the padding;
    dilation must be 1) and every ``AdaptiveMaxPool`` the ``AdaptiveAvgPool`` of the same
    ``output_size``; ``"keep"`` keeps the max pools. Eval mode turns dropout off and makes
    BatchNorm the affine map of its running statistics. ``model`` itself is not changed.
    Activations called as functions in ``forward`` (``F.relu``) cannot be replaced.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    max_pool = check_choice("max_pool", max_pool, MAX_POOL_MODES)
    twin = copy.deepcopy(model)
    root = _replacement(twin, max_pool)
    if root is not None:
        return root.eval()
    for parent in list(twin.modules()):
        for name, child in list(parent.named_children()):
            new = _replacement(child, max_pool)
            if new is not None:
                setattr(parent, name, new)
    return twin.eval()


def _input_shape(input_shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(input_shape, int) and not isinstance(input_shape, bool):
        input_shape = (input_shape,)
    if not isinstance(input_shape, Sequence) or not input_shape:
        raise ValueError(
            f"input_shape must be a positive int or a non-empty sequence of them (the shape "
            f"of one input, without the batch), got {input_shape!r}"
        )
    return tuple(check_int(f"input_shape[{i}]", s, minimum=1) for i, s in enumerate(input_shape))


def _dtype_device(model: nn.Module) -> tuple[torch.dtype, torch.device]:
    """The dtype and device of the model's first floating-point parameter or buffer."""
    for t in [*model.parameters(), *model.buffers()]:
        if t.is_floating_point():
            return t.dtype, t.device
    return torch.get_default_dtype(), torch.device("cpu")


def _forward(model: nn.Module, batch: torch.Tensor, input_shape: tuple[int, ...]) -> torch.Tensor:
    """``model(batch)``, checked to be ``(batch, K)``; a failing call names ``input_shape``."""
    try:
        out = model(batch)
    except (RuntimeError, ValueError, TypeError) as err:
        raise ValueError(
            f"the model does not accept inputs of input_shape={input_shape} (batches of shape "
            f"{tuple(batch.shape)}): {err}"
        ) from err
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != batch.shape[0]:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(
            f"the model's output must have shape (batch, K) = ({batch.shape[0]}, K), got {got}"
        )
    return out


def _check_affine(
    model: nn.Module, input_shape: tuple[int, ...], dtype: torch.dtype, device, rtol: float
) -> None:
    """Additivity on two random probes: ``f(a + b) - f(0) = (f(a) - f(0)) + (f(b) - f(0))``
    up to ``rtol`` times the size of the terms. Seeded privately: the global RNG is left as
    it was."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, *input_shape, generator=gen, dtype=torch.float64).to(dtype)
    probes = torch.stack([torch.zeros_like(a), a, b, a + b]).to(device)
    f0, fa, fb, fab = _forward(model, probes, input_shape).to(torch.float64)
    defect = float(torch.linalg.norm((fab - f0) - (fa - f0) - (fb - f0)))
    scale = sum(float(torch.linalg.norm(v)) for v in (fa - f0, fb - f0, fab - f0, f0))
    if defect > rtol * scale:
        raise ValueError(
            f"the model is not affine: on random inputs a, b, f(a+b) - f(0) differs from "
            f"(f(a) - f(0)) + (f(b) - f(0)) by {defect / scale:.3g} relative to their size "
            f"(rtol={rtol:.3g}); method='exact' needs a linear or affine model, "
            f"method='ignore_nonlinearities' replaces only "
            f"{', '.join(c.__name__ for c in IDENTITY_ACTIVATIONS)} (as modules, not "
            f"functional calls) and max-pooling"
        )


def _zero_biases(model: nn.Module) -> None:
    with torch.no_grad():
        for m in model.modules():
            bias = getattr(m, "bias", None)
            if isinstance(bias, torch.Tensor):
                bias.zero_()


def _columns(
    model: nn.Module, input_shape: tuple[int, ...], dtype, device, chunk_size: int
) -> torch.Tensor:
    """``[f(e_j) - f(0)]_j`` as a float64 ``(K, q)`` CPU tensor, ``chunk_size`` basis
    vectors (and the zero input) per forward pass."""
    q = math.prod(input_shape)
    cols: list[torch.Tensor] = []
    for start in range(0, q, chunk_size):
        n = min(chunk_size, q - start)
        batch = torch.zeros(n + 1, q, dtype=dtype, device=device)
        batch[torch.arange(n), torch.arange(start, start + n)] = 1.0
        out = _forward(model, batch.reshape(n + 1, *input_shape), input_shape)
        cols.append((out[:-1] - out[-1:]).to(device="cpu", dtype=torch.float64))
    return torch.cat(cols).T.contiguous()


def compact_representation(
    model: nn.Module,
    input_shape: int | Sequence[int],
    method: str = "exact",
    max_pool: str = "average",
    bias: str = "keep",
    chunk_size: int = 256,
    rtol: float | None = None,
) -> torch.Tensor:
    r"""The compact matrix ``W`` (``K x q``, float64, CPU) of ``model`` (paper 002 §3.3,
    App. D; note 002 R11): column ``j`` is :math:`W e_j = f(e_j) - f(0)`.

    ``e_j`` is the ``j``-th identity basis vector of ``q = prod(input_shape)`` entries,
    reshaped to ``input_shape`` (one input without its batch dimension, e.g. ``(C, H, W)``;
    column ``j`` belongs to entry ``j`` of the flattened input). The model runs in eval mode
    (dropout off), under ``no_grad``, in its own dtype and on its own device, on
    ``chunk_size`` basis vectors at a time plus the zero input (memory bounded by
    ``chunk_size + 1`` inputs); the result does not depend on ``chunk_size`` beyond
    rounding.

    Args:
        model: any ``nn.Module`` mapping ``(batch, *input_shape)`` to ``(batch, K)``.
        input_shape: the shape of one input.
        method: ``"exact"``: the Jacobian of a model that is affine (linear layers,
            convolutions, average pooling, eval-mode BatchNorm); ``"ignore_nonlinearities"``:
            the paper's linearisation, the matrix of :func:`linearised_copy`.
        max_pool: for ``"ignore_nonlinearities"``: ``"average"`` (max-pooling becomes
            average pooling, the paper's linear st-VGG) or ``"keep"``.
        bias: ``"keep"``: the Jacobian only, ``f(e_j) - f(0)`` on the model as it is;
            ``"drop"``: every ``bias`` parameter set to 0 in a copy first (the constant
            offsets that remain, e.g. BatchNorm's running mean, still cancel in
            ``f(e_j) - f(0)``). For an affine model (``"exact"``, or the linearisation with
            ``max_pool="average"``) the two agree up to rounding: a bias moves ``f(0)``,
            not the slope. They can differ only when the copy keeps max pools
            (``max_pool="keep"``) and a bias varies inside a pooling window (a per-unit
            ``Linear`` bias before a max over units); a per-channel conv bias commutes with
            the max.
        chunk_size: basis vectors per forward pass, ``>= 1``.
        rtol: tolerance of the affinity check, relative to the size of the outputs;
            default ``sqrt(eps)`` of the model's dtype (1.5e-8 in float64, 3.5e-4 in
            float32).

    Before the basis is read, the model (or the linearised copy, unless it keeps max
    pools) is checked to be affine on two random probes ``a, b`` (a private generator:
    the global torch RNG is not consumed): ``‖f(a+b) − f(a) − f(b) + f(0)‖`` must not
    exceed ``rtol`` times the size of the terms, else a ``ValueError`` says so. With
    ``max_pool="keep"`` the copy is not affine and the result is the finite difference
    ``f(e_j) - f(0)`` of the copy, not a linear map's matrix.

    Raises:
        ValueError: a bad choice or size, a model that is not affine, an ``input_shape``
            the model does not accept, or an output that is not ``(batch, K)``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    shape = _input_shape(input_shape)
    method = check_choice("method", method, METHODS)
    max_pool = check_choice("max_pool", max_pool, MAX_POOL_MODES)
    bias = check_choice("bias", bias, BIAS_MODES)
    chunk_size = check_int("chunk_size", chunk_size, minimum=1)
    dtype, device = _dtype_device(model)
    if rtol is None:
        rtol = math.sqrt(torch.finfo(dtype).eps)
    rtol = check_float("rtol", rtol, minimum=0.0)
    if method == "ignore_nonlinearities":
        work = linearised_copy(model, max_pool)
    else:
        work = copy.deepcopy(model) if bias == "drop" else model
    if bias == "drop":
        _zero_biases(work)
    check = method == "exact" or max_pool == "average"
    with torch.no_grad(), eval_mode(work):
        if check:
            _check_affine(work, shape, dtype, device, rtol)
        return _columns(work, shape, dtype, device, chunk_size)
