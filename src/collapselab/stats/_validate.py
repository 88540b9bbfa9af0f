"""Input checks for class statistics: feature matrices, class counts, classifiers, weightings.

Built on :mod:`collapselab._checks` (labels, scalars and choices are checked there). Every
check raises ``ValueError`` (or ``TypeError`` for a non-array argument) whose message names
the offending argument and says what was expected.
"""

from __future__ import annotations

import torch

from collapselab import _checks
from collapselab._checks import as_real_tensor

WEIGHTINGS = ("auto", "balanced", "sample")
"""Class weightings: ``"balanced"`` (``pi_c = 1/C``), ``"sample"`` (``pi_c = n_c/N``) and
``"auto"`` (balanced when every class has the same count, where both coincide, else sample)."""
MODES = ("auto", "dense", "projected")

_SHOWN_COUNTS = 20


def check_features(x: object, name: str = "features", dim: int | None = None) -> torch.Tensor:
    """A finite real 2-D ``(n, D)`` tensor with ``D >= 1``, dtype unchanged; ``dim`` fixes ``D``."""
    t = as_real_tensor(name, x, ndim=2, layout="(n_samples, dim)")
    if t.shape[1] == 0:
        raise ValueError(f"{name} has zero columns; expected a feature dimension >= 1")
    if dim is not None and t.shape[1] != dim:
        raise ValueError(f"{name} has dimension {t.shape[1]}, expected {dim}")
    return t


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
    bias = _checks.as_tensor("b", b)
    if bias.shape != (c,):
        raise ValueError(f"b must have shape (n_classes,) = ({c},), got {tuple(bias.shape)}")
    bias = as_real_tensor("b", bias)
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
    weighting = _checks.check_choice("weighting", weighting, WEIGHTINGS)
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
