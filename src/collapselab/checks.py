"""Conventions and input checks shared by every layer of collapselab.

The bottom of the package: it imports only numpy and torch, so any subpackage may use it,
and so may user code (a user-defined metric family checks its inputs the same way).

Conventions of the checks:

* the argument's name comes first, then the value, then the constraints
  (``check_int("depth", depth, minimum=1)``);
* a check returns the validated value, converted where its docstring says so
  (``check_int`` gives a Python ``int`` for a numpy integer);
* every error names the argument and says what was expected, e.g.
  ``depth must be an integer >= 1, got 0``;
* a value of the wrong type (or dtype) raises :class:`ArgumentTypeError`, a value of the
  right type outside its domain (range, shape, NaN/Inf) a ``ValueError``.

Conventions of the statistics (docs/catalogue.md): features are ``(N, D)``, one row per sample;
labels are ``(N,)`` integers in ``[0, C)``; class weights follow :data:`WEIGHTINGS`
(``"balanced"``: ``pi_c = 1/C``; ``"sample"``: ``pi_c = n_c/N``; ``"auto"``: balanced for
equal class counts, else sample-weighted with one warning, :func:`imbalance_message`); the
within-class scatter is kept dense or projected (:data:`MODES`); pairwise statistics of
per-class vectors use unordered or ordered pairs (:data:`PAIRS`).

Sections: scalars; arrays and tensors; class labels; feature matrices and classifiers;
class weighting; per-layer feature lists and series.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from numbers import Integral, Real

import numpy as np
import torch

__all__ = [
    "MODES",
    "PAIRS",
    "WEIGHTINGS",
    "ArgumentTypeError",
    "ArrayLike",
    "as_float",
    "as_label_array",
    "as_labels",
    "as_layers",
    "as_matrix",
    "as_real_array",
    "as_real_tensor",
    "as_series",
    "as_tensor",
    "as_vector",
    "check_between_rank",
    "check_bool",
    "check_choice",
    "check_class_counts",
    "check_classifier",
    "check_features",
    "check_finite",
    "check_float",
    "check_int",
    "check_labels",
    "check_ndim",
    "check_probability",
    "check_real",
    "check_seed",
    "check_shape",
    "counts_balanced",
    "feature_array",
    "feature_tensor",
    "imbalance_message",
    "infer_n_classes",
    "resolve_for_labels",
    "resolve_weighting",
    "split_batch",
    "to_f64",
    "warn_imbalanced_counts",
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
    ``device`` moves it. A tensor on the ``meta`` device (shape only, no data) is rejected.
    """
    if isinstance(x, torch.Tensor):
        if x.is_meta:
            raise ArgumentTypeError(
                f"{name} is a tensor on the 'meta' device (a shape without data); "
                "expected a tensor with values (CPU or CUDA)"
            )
        t = x.detach() if detach else x
    elif isinstance(x, np.ndarray):
        # torch shares no memory with negative strides (a reversed view, x[::-1]): copy those
        t = torch.from_numpy(x if min(x.strides, default=0) >= 0 else x.copy())
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


def check_finite_stack(name: str, stack: torch.Tensor) -> None:
    """Every matrix of a stack ``(L, ...)`` holds no NaN or Inf: one sum for the whole
    stack, and only when it is not finite :func:`check_finite` of each matrix in turn (the
    error of the first bad one, as checking them one at a time gives)."""
    if not bool(torch.isfinite(stack.sum())):
        for item in stack:
            check_finite(name, item)


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
    finite: bool = True,
) -> torch.Tensor:
    """``x`` as a tensor of real, finite numbers (see :func:`as_tensor` for the arguments).

    ``ndim`` fixes the number of dimensions (``layout`` names them in the error); ``dtype``
    converts after the checks (``None`` keeps the input's dtype); ``finite=False`` leaves
    the NaN/Inf test to the caller (who checks the data elsewhere).
    """
    t = as_tensor(name, x, device=device, detach=detach)
    if ndim is not None:
        check_ndim(name, t, ndim, layout)
    check_real(name, t, allow_bool=allow_bool)
    if dtype is not None:
        t = t.to(dtype)
    if finite:
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


def infer_n_classes(labels: object, n_classes: int | None, name: str = "labels") -> int:
    """``n_classes`` if given, else ``max(labels) + 1`` (labels checked to be integers)."""
    if n_classes is not None:
        return check_int("n_classes", n_classes, minimum=2)
    t = as_tensor(name, labels)
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ArgumentTypeError(f"{name} must be integers (an integer dtype), got dtype {t.dtype}")
    if t.numel() == 0:
        raise ValueError(f"{name} is empty; expected at least two classes")
    c = int(t.max()) + 1
    if c < 2:
        raise ValueError(
            f"{name} hold fewer than two classes (max({name}) + 1 = {c}); expected >= 2"
        )
    return c


def as_label_array(
    name: str,
    y: object,
    n_samples: int,
    n_classes: int | None = None,
    *,
    source: str = "features",
    unit: str = "row",
) -> np.ndarray:
    """:func:`check_labels` as an int64 numpy array on the CPU (for NumPy-based solvers)."""
    return check_labels(
        name, y, n_samples, n_classes, device="cpu", source=source, unit=unit
    ).numpy()


# ---------------------------------------------------------------------------------------
# feature matrices and classifiers


def check_features(
    x: object,
    name: str = "features",
    dim: int | None = None,
    *,
    finite: bool = True,
    detach: bool = False,
) -> torch.Tensor:
    """A finite real 2-D ``(n, D)`` tensor with ``D >= 1``, dtype unchanged; ``dim`` fixes ``D``
    (``finite=False``: NaN/Inf not tested here; ``detach``: cut from the autograd graph)."""
    t = as_real_tensor(name, x, ndim=2, layout="(n_samples, dim)", finite=finite, detach=detach)
    if t.shape[1] == 0:
        raise ValueError(f"{name} has zero columns; expected a feature dimension >= 1")
    if dim is not None and t.shape[1] != dim:
        raise ValueError(f"{name} has dimension {t.shape[1]}, expected {dim}")
    return t


def feature_array(name: str, x: object) -> np.ndarray:
    """A new float64 numpy array of finite ``(N, D)`` features (for NumPy-based solvers)."""
    return as_real_array(name, x, ndim=2, layout="(N, D)")


def feature_tensor(name: str, x: object, dim: int | None = None) -> torch.Tensor:
    """:func:`check_features` detached and in float64 (for the float64 theory solvers)."""
    return check_features(x, name, dim).detach().to(torch.float64)


def check_class_counts(counts: torch.Tensor, minimum: int, what: str = "features") -> None:
    """Every class has at least ``minimum`` samples."""
    low = torch.nonzero(counts < minimum).flatten().tolist()
    if low:
        shown = ", ".join(f"class {c}: {int(counts[c])}" for c in low[:8])
        more = "" if len(low) <= 8 else f" and {len(low) - 8} more"
        raise ValueError(
            f"every class needs at least {minimum} samples in {what}; too few for {shown}{more}"
        )


def check_between_rank(rank: int) -> None:
    """ValueError when the between-class scatter has rank 0 (all class means coincide)."""
    if rank == 0:
        raise ValueError(
            "zero between-class scatter: all class means coincide (to rounding), so "
            "Sigma_B = 0 and the NC metrics that divide by it are undefined"
        )


def check_classifier(
    W: object, b: object | None, c: int, d: int, device: torch.device | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W (C, D), b (C,))`` as float64 on ``device``, detached; ``b=None`` gives a zero bias."""
    w = check_features(W, "W", detach=True)
    if w.shape != (c, d):
        raise ValueError(
            f"W must have shape (n_classes, dim) = ({c}, {d}), got {tuple(w.shape)}"
            + (f": {w.shape[0]} rows for {c} classes" if w.shape[0] != c else "")
        )
    w = w.to(device, torch.float64)
    if b is None:
        return w, torch.zeros(c, dtype=torch.float64, device=device)
    bias = as_tensor("b", b, detach=True)
    if bias.shape != (c,):
        raise ValueError(f"b must have shape (n_classes,) = ({c},), got {tuple(bias.shape)}")
    bias = as_real_tensor("b", bias)
    return w, bias.to(device, torch.float64)


# ---------------------------------------------------------------------------------------
# class weighting and the other conventions of the statistics

WEIGHTINGS = ("auto", "balanced", "sample")
"""Class weightings: ``"balanced"`` (``pi_c = 1/C``), ``"sample"`` (``pi_c = n_c/N``) and
``"auto"`` (balanced when every class has the same count, where both coincide, else sample)."""

MODES = ("auto", "dense", "projected")
"""Within-class scatter: the dense ``D x D`` matrix, its block on the span of the centred
means, or ``"auto"`` (dense up to a dimension threshold)."""

PAIRS = ("unordered", "ordered")
"""Pairs of per-class vectors in cosine statistics: each pair once, or both orders."""

_SHOWN_COUNTS = 20


def counts_balanced(counts: torch.Tensor) -> bool:
    """Whether every class that has samples has the same number of them."""
    present = counts[counts > 0]
    return bool((present == present[0]).all()) if present.numel() else True


def resolve_weighting(weighting: str, counts: torch.Tensor) -> str:
    """The weighting ``"auto"`` stands for, given the class counts; others are returned as is.

    ``"auto"`` is ``"balanced"`` when :func:`counts_balanced` (both weightings then give the
    same class weights) and ``"sample"`` otherwise. The rule reads only the counts, so every
    process that holds the same (all-reduced) counts resolves it the same way.
    """
    weighting = check_choice("weighting", weighting, WEIGHTINGS)
    if weighting != "auto":
        return weighting
    return "balanced" if counts_balanced(counts) else "sample"


def _format_counts(counts: torch.Tensor) -> str:
    values = [int(n) for n in counts.tolist()]
    if len(values) <= _SHOWN_COUNTS:
        return f"counts {values}"
    return f"counts {min(values)}..{max(values)} over {len(values)} classes"


def imbalance_message(counts: Mapping[str, torch.Tensor], weighting: str) -> str | None:
    """The warning for imbalanced class counts, or ``None`` when every entry is balanced.

    Args:
        counts: per-class counts by split name (``""`` for an unnamed one).
        weighting: the *requested* weighting; for ``"auto"`` the message says that the
            sample-weighted variants are used and how to force the balanced ones.
    """
    bad = {name: c for name, c in counts.items() if not counts_balanced(c)}
    if not bad:
        return None
    where = "; ".join(f"{name} {_format_counts(c)}".strip() for name, c in bad.items())
    head = f"imbalanced classes ({where}): "
    if weighting == "auto":
        return head + (
            "weighting='auto' uses the sample-weighted variants (class weights "
            "pi_c = n_c/N); pass weighting='balanced' to force the class-balanced "
            "(pi_c = 1/C) definitions of the papers"
        )
    if weighting == "balanced":
        return head + (
            "using the 'balanced'-weighted variants as requested (class weights 1/C, "
            "whatever the class sizes); weighting='auto' or 'sample' weights classes by n_c/N"
        )
    return head + (
        "using the 'sample'-weighted variants as requested (class weights pi_c = n_c/N); "
        "the papers' definitions assume balanced classes"
    )


def warn_imbalanced_counts(
    counts: Mapping[str, torch.Tensor], weighting: str, stacklevel: int = 3
) -> None:
    """One ``UserWarning`` when any of ``counts`` (per-class counts by split) is imbalanced.

    ``weighting`` is the requested one (see :func:`imbalance_message`); ``stacklevel``
    counts from this function.
    """
    message = imbalance_message(counts, weighting)
    if message is not None:
        warnings.warn(message, UserWarning, stacklevel=stacklevel)


def resolve_for_labels(
    labels: torch.Tensor, weighting: str, name: str = "", stacklevel: int = 3
) -> str:
    """Resolve ``weighting`` from the counts of ``labels`` and warn once if they are imbalanced.

    For functions that compute one weighting for a whole call (several layers, several
    points of a line). Classes absent from ``labels`` are ignored. ``stacklevel`` counts
    from this function.
    """
    weighting = check_choice("weighting", weighting, WEIGHTINGS)
    counts = torch.bincount(labels.flatten().to(torch.int64))
    warn_imbalanced_counts({name: counts}, weighting, stacklevel + 1)
    return resolve_weighting(weighting, counts)


# ---------------------------------------------------------------------------------------
# per-layer feature lists, vectors and series
#
# The diversity, layer-wise and common-direction functions accept torch tensors or numpy
# arrays and work on float64 tensors on the input's device: detached (metrics are
# statistics, not part of a training graph), with booleans (ReLU gating patterns) as 0/1.

ArrayLike = torch.Tensor | np.ndarray


def _as_real(
    name: str,
    x: object,
    ndim: int,
    device: torch.device | None,
    dtype: torch.dtype | None = torch.float64,
    layout: str = "",
) -> torch.Tensor:
    return as_real_tensor(
        name, x, ndim=ndim, layout=layout, dtype=dtype, device=device, detach=True, allow_bool=True
    )


def as_matrix(name: str, x: object, device: torch.device | None = None) -> torch.Tensor:
    """A finite 2-D float64 tensor ``(rows, cols)``, detached; booleans as 0/1."""
    return _as_real(name, x, 2, device)


def as_vector(name: str, x: object, device: torch.device | None = None) -> torch.Tensor:
    """A finite 1-D float64 tensor, detached; booleans as 0/1."""
    return _as_real(name, x, 1, device)


def as_series(name: str, x: object) -> np.ndarray:
    """A finite 1-D float64 numpy array from a tensor, an array or a list of numbers."""
    return as_real_array(name, x, ndim=1, numbers=True, allow_bool=True)


def as_labels(
    name: str,
    y: object,
    n_samples: int,
    n_classes: int | None = None,
    device: torch.device | None = None,
) -> tuple[torch.Tensor, int]:
    """Integer labels ``(N,)`` as int64 and the class count.

    ``n_classes`` defaults to ``max(labels) + 1``; labels must lie in ``[0, n_classes)``.
    """
    t = check_labels(name, y, n_samples, n_classes, device=device)
    if n_classes is not None:
        return t, int(n_classes)
    return t, int(t.max()) + 1 if t.numel() else 0


def as_layers(
    name: str, layers: object, same_dim: bool = True, min_layers: int = 1
) -> list[torch.Tensor]:
    """Per-layer feature matrices, checked, on the device of the first layer.

    The matrices keep their dtype (converting every layer to float64 at once would double
    the memory); callers convert one or two layers at a time with :func:`to_f64`.

    Args:
        name: the argument's name, for errors (``layers[2] ...``).
        layers: a list or tuple ``[H_0, ..., H_L]`` of ``(N, D_l)`` matrices whose rows are
            the same samples in the same order.
        same_dim: also require every ``D_l`` to be equal (needed for displacements).
        min_layers: the smallest acceptable number of layers.
    """
    if isinstance(layers, torch.Tensor | np.ndarray) or not isinstance(layers, Sequence):
        raise ArgumentTypeError(
            f"{name} must be a list or tuple of (N, D) feature matrices, "
            f"got {type(layers).__name__}"
        )
    if len(layers) < min_layers:
        raise ValueError(f"{name} must hold at least {min_layers} layer(s), got {len(layers)}")
    out: list[torch.Tensor] = []
    for i, h in enumerate(layers):
        device = out[0].device if out else None
        t = _as_real(f"{name}[{i}]", h, 2, device, dtype=None, layout="(N, D)")
        if out:
            if t.shape[0] != out[0].shape[0]:
                raise ValueError(
                    f"{name}[{i}] has {t.shape[0]} rows but {name}[0] has {out[0].shape[0]}; "
                    "every layer must hold the same samples in the same order"
                )
            if same_dim and t.shape[1] != out[0].shape[1]:
                raise ValueError(
                    f"{name}[{i}] has dimension {t.shape[1]} but {name}[0] has "
                    f"{out[0].shape[1]}; this metric needs every layer in the same space"
                )
        out.append(t)
    return out


def to_f64(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float64 (no copy when it already is)."""
    return t.to(torch.float64)


def as_float(value: torch.Tensor) -> float:
    """A 0-d tensor as a Python float."""
    return float(value.item())


def split_batch(batch: object) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inputs, labels)`` of a data loader's batch (its first two entries, both tensors)."""
    if isinstance(batch, Sequence) and len(batch) >= 2:
        x, y = batch[0], batch[1]
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            return x, y
    raise ArgumentTypeError(
        "each batch must be an (inputs, labels) pair of tensors, as a TensorDataset loader "
        f"yields; got {type(batch).__name__}"
    )
