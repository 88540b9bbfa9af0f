"""Argument validation shared by the data modules (private)."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import torch


def check_int(name: str, value: object, minimum: int | None = None) -> int:
    """``value`` as a Python int, rejecting bools, floats and values below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_float(
    name: str,
    value: object,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_min: bool = False,
) -> float:
    """``value`` as a finite float in ``[minimum, maximum]`` (``(minimum, ...`` if strict)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and (value <= minimum if strict_min else value < minimum):
        relation = ">" if strict_min else ">="
        raise ValueError(f"{name} must be {relation} {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_seed(seed: object) -> int:
    """A seed is a non-negative int (numpy's SeedSequence rejects negatives)."""
    return check_int("seed", seed, minimum=0)


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_finite_tensor(
    name: str, x: object, min_ndim: int = 2, allow_empty: bool = False
) -> torch.Tensor:
    """``x`` as a floating tensor with a batch dimension and only finite entries."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions (N, ...), got shape {tuple(x.shape)}"
        )
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.shape[0] == 0 and not allow_empty:
        raise ValueError(f"{name} must contain at least one sample, got shape {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or Inf values")
    return x


def numpy_rng(seed: int, stream: int = 0) -> np.random.Generator:
    """An independent numpy Generator for ``stream`` under ``seed``.

    Streams are ``SeedSequence(seed, spawn_key=(stream,))``, so e.g. the test samples of a generator
    do not change when the number of training samples does.
    """
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stream,)))
