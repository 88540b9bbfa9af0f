"""Argument checks and the imbalance warning shared by the NC and MSE metric families."""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from collapselab.stats import ClassStats
from collapselab.stats._validate import (
    WEIGHTINGS,
    check_choice,
    check_features,
    check_labels,
    check_n_classes,
    imbalance_message,
    resolve_weighting,
)

PAIRS = ("unordered", "ordered")


def infer_n_classes(labels: object, n_classes: int | None, name: str = "labels") -> int:
    """``n_classes`` if given, else ``max(labels) + 1`` (labels checked to be integers)."""
    if n_classes is not None:
        return check_n_classes(n_classes)
    t = labels if isinstance(labels, torch.Tensor) else None
    if isinstance(labels, np.ndarray):
        t = torch.from_numpy(labels)
    if t is None:
        raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(labels)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{name} must be integers (an integer dtype), got dtype {t.dtype}")
    if t.numel() == 0:
        raise ValueError(f"{name} is empty; expected at least two classes")
    return check_n_classes(int(t.max()) + 1, f"the number of classes (max({name}) + 1)")


def check_pair(features: object, labels: object, n_classes: int, prefix: str = "") -> None:
    """Shapes, dtypes, ranges and finiteness of a ``(features, labels)`` pair."""
    h = check_features(features, f"{prefix}features")
    check_labels(labels, h.shape[0], n_classes, f"{prefix}labels")


def check_ddof(ddof: object) -> int:
    """A non-negative integer ``ddof``."""
    if isinstance(ddof, bool) or not isinstance(ddof, int | np.integer) or ddof < 0:
        raise ValueError(f"ddof must be a non-negative integer, got {ddof!r}")
    return int(ddof)


def check_lambda(lam: object) -> float:
    """A finite ``lam >= 0``."""
    if isinstance(lam, bool) or not isinstance(lam, int | float | np.floating | np.integer):
        raise ValueError(f"lam must be a non-negative number, got {lam!r}")
    value = float(lam)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"lam must be finite and >= 0, got {lam!r}")
    return value


def require_between(stats: ClassStats) -> None:
    """ValueError when the class means coincide (zero between-class scatter)."""
    if stats.basis.shape[1] == 0:
        raise ValueError(
            "zero between-class scatter: all class means coincide (to rounding), so "
            "Sigma_B = 0 and the NC metrics that divide by it are undefined"
        )


def warn_if_imbalanced(splits: dict[str, ClassStats], stacklevel: int = 3) -> None:
    """One warning naming the class counts of every imbalanced split and the weighting used.

    The splits share one requested weighting (``"auto"`` resolves per split, to
    ``"sample"`` exactly on the imbalanced ones). ``stacklevel`` counts from this function
    (3: the caller of the caller).
    """
    if not splits:
        return
    weighting = next(iter(splits.values())).requested_weighting
    counts = {name: st.counts for name, st in splits.items()}
    warn_imbalanced_counts(counts, weighting, stacklevel + 1)


def warn_imbalanced_counts(
    counts: dict[str, torch.Tensor], weighting: str, stacklevel: int = 3
) -> None:
    """One ``UserWarning`` when any of ``counts`` (per-class counts by split) is imbalanced.

    ``weighting`` is the requested one (see
    :func:`collapselab.stats._validate.imbalance_message`); ``stacklevel`` counts from this
    function.
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
    weighting = check_choice(weighting, WEIGHTINGS, "weighting")
    counts = torch.bincount(labels.flatten().to(torch.int64))
    warn_imbalanced_counts({name: counts}, weighting, stacklevel + 1)
    return resolve_weighting(weighting, counts)
