"""Argument checks and the imbalance warning shared by the NC and MSE metric families."""

from __future__ import annotations

import warnings

import torch

from collapselab._checks import ArgumentTypeError, as_tensor, check_choice, check_int
from collapselab.stats import ClassStats
from collapselab.stats._validate import WEIGHTINGS, imbalance_message, resolve_weighting

PAIRS = ("unordered", "ordered")


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
    weighting = check_choice("weighting", weighting, WEIGHTINGS)
    counts = torch.bincount(labels.flatten().to(torch.int64))
    warn_imbalanced_counts({name: counts}, weighting, stacklevel + 1)
    return resolve_weighting(weighting, counts)
