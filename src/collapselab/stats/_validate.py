"""Input checks for class statistics: features, labels, class counts.

Every check raises ``ValueError`` (or ``TypeError`` for a non-array argument) whose message
names the offending argument and says what was expected.
"""

from __future__ import annotations

import numpy as np
import torch

WEIGHTINGS = ("balanced", "sample")
MODES = ("auto", "dense", "projected")


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
