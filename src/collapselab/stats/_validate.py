"""Input checks for class statistics: features, labels, class counts.

Every check raises ``ValueError`` (or ``TypeError`` for a non-array argument) whose message
names the offending argument and says what was expected.
"""

from __future__ import annotations

import numpy as np
import torch

WEIGHTINGS = ("auto", "balanced", "sample")
"""Class weightings: ``"balanced"`` (``pi_c = 1/C``), ``"sample"`` (``pi_c = n_c/N``) and
``"auto"`` (balanced when every class has the same count, where both coincide, else sample)."""
MODES = ("auto", "dense", "projected")

_SHOWN_COUNTS = 20


def as_tensor(x: object, name: str) -> torch.Tensor:
    """``x`` as a tensor (numpy arrays are wrapped without a copy)."""
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")


def check_features(x: object, name: str = "features", dim: int | None = None) -> torch.Tensor:
    """A finite real 2-D ``(n, D)`` tensor, dtype unchanged; ``dim`` fixes ``D``."""
    t = as_tensor(x, name)
    if t.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, dim), got shape {tuple(t.shape)}")
    if t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{name} must be real numbers, got dtype {t.dtype}")
    if t.shape[1] == 0:
        raise ValueError(f"{name} has zero columns; expected a feature dimension >= 1")
    if dim is not None and t.shape[1] != dim:
        raise ValueError(f"{name} has dimension {t.shape[1]}, expected {dim}")
    if t.is_floating_point():
        bad = int((~torch.isfinite(t)).sum())
        if bad:
            raise ValueError(f"{name} contains {bad} NaN or Inf entries; expected finite values")
    return t


def check_labels(y: object, n_samples: int, n_classes: int, name: str = "labels") -> torch.Tensor:
    """Integer labels ``(n,)`` in ``[0, n_classes)`` as int64."""
    t = as_tensor(y, name)
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n_samples,), got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{name} must be integers (an integer dtype), got dtype {t.dtype}")
    if t.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {t.shape[0]} entries but the features have {n_samples} rows; "
            "expected one label per row"
        )
    t = t.to(torch.int64)
    if t.numel():
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi >= n_classes:
            raise ValueError(
                f"{name} must lie in [0, {n_classes}) for n_classes={n_classes}, "
                f"got range [{lo}, {hi}]"
            )
    return t


def check_n_classes(n_classes: object, name: str = "n_classes") -> int:
    """An integer ``C >= 2``."""
    if isinstance(n_classes, bool) or not isinstance(n_classes, int | np.integer):
        raise ValueError(f"{name} must be an integer, got {n_classes!r}")
    if n_classes < 2:
        raise ValueError(f"{name} must be at least 2 (fewer than two classes), got {n_classes}")
    return int(n_classes)


def check_choice(value: object, allowed: tuple[str, ...], name: str) -> str:
    """``value`` if it is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return str(value)


def check_class_counts(counts: torch.Tensor, minimum: int, what: str = "features") -> None:
    """Every class has at least ``minimum`` samples."""
    low = torch.nonzero(counts < minimum).flatten().tolist()
    if low:
        shown = ", ".join(f"class {c}: {int(counts[c])}" for c in low[:8])
        more = "" if len(low) <= 8 else f" and {len(low) - 8} more"
        raise ValueError(
            f"every class needs at least {minimum} samples in {what}; too few for {shown}{more}"
        )


def check_classifier(
    W: object, b: object | None, c: int, d: int, device: torch.device | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W (C, D), b (C,))`` as float64 on ``device``; ``b=None`` gives a zero bias."""
    w = check_features(W, "W")
    if w.shape != (c, d):
        raise ValueError(
            f"W must have shape (n_classes, dim) = ({c}, {d}), got {tuple(w.shape)}"
            + (f": {w.shape[0]} rows for {c} classes" if w.shape[0] != c else "")
        )
    w = w.to(device, torch.float64)
    if b is None:
        return w, torch.zeros(c, dtype=torch.float64, device=device)
    bias = as_tensor(b, "b")
    if bias.shape != (c,):
        raise ValueError(f"b must have shape (n_classes,) = ({c},), got {tuple(bias.shape)}")
    bias = check_features(bias.reshape(1, c), "b")[0]
    return w, bias.to(device, torch.float64)


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
    weighting = check_choice(weighting, WEIGHTINGS, "weighting")
    if weighting != "auto":
        return weighting
    return "balanced" if counts_balanced(counts) else "sample"


def _format_counts(counts: torch.Tensor) -> str:
    values = [int(n) for n in counts.tolist()]
    if len(values) <= _SHOWN_COUNTS:
        return f"counts {values}"
    return f"counts {min(values)}..{max(values)} over {len(values)} classes"


def imbalance_message(counts: dict[str, torch.Tensor], weighting: str) -> str | None:
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
