"""Argument checks shared by every layer of collapselab (private).

The bottom layer: it imports only numpy and torch, so any subpackage may use it.

Conventions:

* the argument's name comes first, then the value, then the constraints
  (``check_int("depth", depth, minimum=1)``);
* a check returns the validated value, converted where its docstring says so
  (``check_int`` gives a Python ``int`` for a numpy integer);
* every error names the argument and says what was expected, e.g.
  ``depth must be an integer >= 1, got 0``;
* a value of the wrong type (or dtype) raises :class:`ArgumentTypeError`, a value of the
  right type outside its domain (range, shape, NaN/Inf) a ``ValueError``.

Layer-specific checks (input shapes of a model, class counts of a statistic, run names of
the store) stay in their layers, built on these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral, Real

import numpy as np
import torch

__all__ = [
    "ArgumentTypeError",
    "as_real_array",
    "as_real_tensor",
    "as_tensor",
    "check_bool",
    "check_choice",
    "check_finite",
    "check_float",
    "check_int",
    "check_labels",
    "check_ndim",
    "check_probability",
    "check_real",
    "check_seed",
    "check_shape",
]


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type or dtype.

    A ``TypeError`` as Python's convention asks, and also a ``ValueError``: before the checks
    were shared, the statistics, metric and theory layers reported a wrong type as a
    ``ValueError`` and the data, model and training layers as a ``TypeError``, so callers
    that catch either keep working.
    """


# ---------------------------------------------------------------------------------------
# scalars


def _num(x: float) -> str:
    """``0`` for ``0.0`` (bounds read as in the docs), ``0.5`` and ``16`` unchanged."""
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


def _interval(minimum: float | None, maximum: float | None, strict: bool = False) -> str:
    """`` >= 1``, `` > 0``, `` in [0, 1]``, `` in (0, 1]`` or ``""``: the allowed range."""
    if minimum is not None and maximum is not None:
        return f" in {'(' if strict else '['}{_num(minimum)}, {_num(maximum)}]"
    if minimum is not None:
        return f" {'>' if strict else '>='} {_num(minimum)}"
    if maximum is not None:
        return f" <= {_num(maximum)}"
    return ""


def _got(value: object) -> str:
    return f"got {type(value).__name__} {value!r}"


def check_int(
    name: str, value: object, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` as a Python ``int`` in ``[minimum, maximum]`` (either bound optional).

    Any :class:`numbers.Integral` (numpy integers included) is accepted; ``bool`` is not.
    """
    expected = f"an integer{_interval(minimum, maximum)}"
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ArgumentTypeError(f"{name} must be {expected}, {_got(value)}")
    out = int(value)
    if (minimum is not None and out < minimum) or (maximum is not None and out > maximum):
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return out


def check_float(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict: bool = False,
    finite: bool = True,
) -> float:
    """``value`` as a Python ``float`` in ``[minimum, maximum]`` (either bound optional).

    Any real number (:class:`numbers.Real`: ints, numpy scalars) is accepted; ``bool`` is
    not. ``strict`` excludes ``minimum`` itself (``> 0`` rather than ``>= 0``). ``finite``
    rejects ``±inf``; NaN is always rejected.
    """
    kind = "a finite number" if finite else "a number"
    expected = f"{kind}{_interval(minimum, maximum, strict)}"
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ArgumentTypeError(f"{name} must be {expected}, {_got(value)}")
    out = float(value)
    bad = math.isnan(out) or (finite and math.isinf(out))
    if minimum is not None:
        bad = bad or out < minimum or (strict and out == minimum)
    if maximum is not None:
        bad = bad or out > maximum
    if bad:
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return out


def check_probability(name: str, value: object, *, allow_one: bool = True) -> float:
    """A probability in ``[0, 1]``, or ``[0, 1)`` when ``allow_one`` is false (dropout)."""
    p = check_float(name, value)
    if p < 0 or p > 1 or (p == 1 and not allow_one):
        raise ValueError(
            f"{name} must be a probability in [0, 1{']' if allow_one else ')'}, got {p}"
        )
    return p


def check_bool(name: str, value: object) -> bool:
    """``value`` if it is a ``bool`` (ints such as 0 and 1 are rejected)."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be a bool, {_got(value)}")
    return value


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """``value`` (as a plain ``str``) if it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return str(value)


def check_seed(name: str, value: object) -> int:
    """A seed: an integer >= 0 (numpy's ``SeedSequence`` rejects negative ones)."""
    return check_int(name, value, minimum=0)


# ---------------------------------------------------------------------------------------
# arrays and tensors

Array = torch.Tensor | np.ndarray


def as_tensor(
    name: str, x: object, *, device: torch.device | str | None = None, detach: bool = False
) -> torch.Tensor:
    """``x`` (a ``torch.Tensor`` or ``numpy.ndarray``) as a tensor, sharing memory if it can.

    ``detach`` cuts it from the autograd graph (statistics are not part of training);
    ``device`` moves it.
    """
    if isinstance(x, torch.Tensor):
        t = x.detach() if detach else x
    elif isinstance(x, np.ndarray):
        t = torch.from_numpy(x)
    else:
        raise ArgumentTypeError(
            f"{name} must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}"
        )
    return t if device is None else t.to(device)


def _shape(x: Array) -> tuple[int, ...]:
    return tuple(x.shape)


def check_ndim(name: str, x: Array, ndim: int, layout: str = "") -> None:
    """``x`` has ``ndim`` dimensions; ``layout`` (e.g. ``"(N, D)"``) names them in the error."""
    if x.ndim != ndim:
        what = f"{ndim}-D {layout}".rstrip()
        raise ValueError(f"{name} must be {what}, got shape {_shape(x)}")


def _format_shape(shape: Sequence[int | None]) -> str:
    parts = ["*" if s is None else str(s) for s in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def check_shape(name: str, x: Array, shape: Sequence[int | None]) -> None:
    """``x`` has shape ``shape``; a ``None`` entry matches any size (shown as ``*``)."""
    ok = x.ndim == len(shape) and all(
        s is None or s == e for s, e in zip(shape, x.shape, strict=True)
    )
    if not ok:
        raise ValueError(f"{name} must have shape {_format_shape(shape)}, got {_shape(x)}")


def check_real(name: str, x: Array, *, allow_bool: bool = False) -> None:
    """``x`` holds real numbers: an integer or floating dtype (``bool`` if ``allow_bool``)."""
    if isinstance(x, torch.Tensor):
        ok = not x.is_complex() and (allow_bool or x.dtype != torch.bool)
    else:
        kinds = "iuf" + ("b" if allow_bool else "")
        ok = x.dtype.kind in kinds
    if not ok:
        raise ArgumentTypeError(f"{name} must hold real numbers, got dtype {x.dtype}")


_COUNT_BLOCK = 2**20
"""Entries per block when counting the bad entries of a tensor (bounds the masks' memory)."""


def _count_nonfinite(x: torch.Tensor) -> int:
    """Number of NaN/Inf entries of ``x``, counted in blocks of leading-axis slices."""
    if x.ndim == 0:
        return int(not bool(torch.isfinite(x)))
    rows = max(1, _COUNT_BLOCK // max(1, x[:1].numel()))
    return sum(int((~torch.isfinite(x[i : i + rows])).sum()) for i in range(0, len(x), rows))


def check_finite(name: str, x: Array) -> None:
    """``x`` holds no NaN or Inf (integer and bool arrays always pass).

    For a tensor, the fast path tests ``x.sum()`` in ``x``'s own dtype: a NaN or Inf entry
    makes the sum NaN or infinite, and the reduction allocates nothing, unlike
    ``torch.isfinite(x)`` (a mask, and a float copy, about 1.7x the input). Only when the
    sum is not finite (a bad entry, or a finite sum that overflowed) are the entries tested
    one by one, in blocks, to count the bad ones.
    """
    if isinstance(x, torch.Tensor):
        if not x.is_floating_point() or bool(torch.isfinite(x.sum())):
            return
        bad = _count_nonfinite(x)
        if not bad:  # the sum overflowed, every entry is finite
            return
    else:
        if x.dtype.kind != "f" or np.isfinite(x).all():
            return
        bad = int(np.count_nonzero(~np.isfinite(x)))
    total = math.prod(x.shape)
    raise ValueError(
        f"{name} contains NaN or Inf ({bad} of {total} entries); expected finite values"
    )


def as_real_tensor(
    name: str,
    x: object,
    *,
    ndim: int | None = None,
    layout: str = "",
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    detach: bool = False,
    allow_bool: bool = False,
) -> torch.Tensor:
    """``x`` as a tensor of real, finite numbers (see :func:`as_tensor` for the arguments).

    ``ndim`` fixes the number of dimensions (``layout`` names them in the error); ``dtype``
    converts after the checks (``None`` keeps the input's dtype).
    """
    t = as_tensor(name, x, device=device, detach=detach)
    if ndim is not None:
        check_ndim(name, t, ndim, layout)
    check_real(name, t, allow_bool=allow_bool)
    if dtype is not None:
        t = t.to(dtype)
    check_finite(name, t)
    return t


def as_real_array(
    name: str,
    x: object,
    *,
    ndim: int | None = None,
    layout: str = "",
    shape: Sequence[int | None] | None = None,
    numbers: bool = False,
    allow_bool: bool = False,
) -> np.ndarray:
    """``x`` as a new float64 numpy array of finite real numbers.

    ``x`` is a ``torch.Tensor`` (detached and copied to the CPU) or a ``numpy.ndarray``;
    with ``numbers`` also a Python number or a (nested) list or tuple of numbers. ``ndim``
    or ``shape`` (``None`` entries match any size) fix its layout; ``allow_bool`` accepts
    booleans as 0/1. The result never shares memory with ``x``, so callers may modify it.
    """
    if isinstance(x, torch.Tensor):
        a = x.detach().cpu().numpy()
    elif isinstance(x, np.ndarray):
        a = x
    elif numbers and isinstance(x, Real | list | tuple) and not isinstance(x, bool):
        try:
            a = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            raise ArgumentTypeError(
                f"{name} must be a number or a sequence of numbers, got {x!r}"
            ) from None
    else:
        accepted = "a torch.Tensor or numpy.ndarray" + (
            ", a number or a sequence of numbers" if numbers else ""
        )
        raise ArgumentTypeError(f"{name} must be {accepted}, got {type(x).__name__}")
    if ndim is not None:
        check_ndim(name, a, ndim, layout)
    if shape is not None:
        check_shape(name, a, shape)
    check_real(name, a, allow_bool=allow_bool)
    a = np.array(a, dtype=np.float64)
    check_finite(name, a)
    return a


# ---------------------------------------------------------------------------------------
# class labels


def check_labels(
    name: str,
    y: object,
    n_samples: int,
    n_classes: int | None,
    *,
    device: torch.device | str | None = None,
    source: str = "features",
    unit: str = "row",
) -> torch.Tensor:
    """Class labels ``(n_samples,)`` of an integer dtype in ``[0, n_classes)``, as int64.

    ``n_classes=None`` only requires labels ``>= 0``. A length mismatch is reported as
    "``name`` has k entries but ``source`` has ``n_samples`` ``unit``-s" (``source``: the
    argument the labels belong to). ``device`` moves the labels.
    """
    c = None if n_classes is None else check_int("n_classes", n_classes, minimum=1)
    t = as_tensor(name, y, device=device)
    check_ndim(name, t, 1, "(n_samples,)")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ArgumentTypeError(f"{name} must be integers (an integer dtype), got dtype {t.dtype}")
    if t.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {t.shape[0]} entries but {source} has {n_samples} {unit}s; "
            f"expected one label per {unit}"
        )
    t = t.to(torch.int64)
    if not t.numel():
        return t
    lo, hi = int(t.min()), int(t.max())
    if c is None:
        if lo < 0:
            raise ValueError(f"{name} must be class indices >= 0, got minimum {lo}")
    elif lo < 0 or hi >= c:
        raise ValueError(f"{name} must lie in [0, {c}) for n_classes={c}, got range [{lo}, {hi}]")
    return t
