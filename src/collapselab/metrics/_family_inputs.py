"""Input checks shared by the diversity and layer-wise metric families.

Every public function of those families accepts ``torch.Tensor`` or ``numpy.ndarray``
inputs, converts them to float64 tensors on the input's device and rejects malformed
input with an error that names the argument and what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

ArrayLike = torch.Tensor | np.ndarray


def as_tensor(x: object, name: str, device: torch.device | None = None) -> torch.Tensor:
    """``x`` as a tensor without copying when possible; TypeError for anything else."""
    if isinstance(x, torch.Tensor):
        t = x.detach()  # metrics are statistics, not part of a training graph
    elif isinstance(x, np.ndarray):
        t = torch.from_numpy(x)
    else:
        raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")
    if device is not None:
        t = t.to(device)
    return t


def check_finite(t: torch.Tensor, name: str) -> None:
    """ValueError when ``t`` holds NaN or Inf."""
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or Inf; expected finite values")


def as_matrix(x: object, name: str, device: torch.device | None = None) -> torch.Tensor:
    """A finite 2-D float64 tensor ``(rows, cols)``."""
    t = as_tensor(x, name, device)
    if t.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
    if t.is_complex():
        raise TypeError(f"{name} must be real-valued, got dtype {t.dtype}")
    t = t.to(torch.float64)
    check_finite(t, name)
    return t


def as_vector(x: object, name: str, device: torch.device | None = None) -> torch.Tensor:
    """A finite 1-D float64 tensor."""
    t = as_tensor(x, name, device)
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(t.shape)}")
    if t.is_complex():
        raise TypeError(f"{name} must be real-valued, got dtype {t.dtype}")
    t = t.to(torch.float64)
    check_finite(t, name)
    return t


def as_series(x: object, name: str) -> np.ndarray:
    """A finite 1-D float64 numpy array from a tensor, an array or a list of numbers."""
    if isinstance(x, torch.Tensor):
        a = x.detach().cpu().numpy()
    elif isinstance(x, np.ndarray | list | tuple):
        try:
            a = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be a sequence of numbers: {err}") from None
    else:
        raise TypeError(
            f"{name} must be a torch.Tensor, numpy.ndarray or list of numbers, "
            f"got {type(x).__name__}"
        )
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if np.iscomplexobj(a):
        raise TypeError(f"{name} must be real-valued, got dtype {a.dtype}")
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or Inf; expected finite values")
    return a


def as_labels(
    y: object,
    n_samples: int,
    n_classes: int | None = None,
    device: torch.device | None = None,
    name: str = "labels",
) -> tuple[torch.Tensor, int]:
    """Integer labels ``(N,)`` as int64 and the class count.

    ``n_classes`` defaults to ``max(labels) + 1``; labels must lie in ``[0, n_classes)``.
    """
    t = as_tensor(y, name, device)
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D (N,), got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must have an integer dtype, got {t.dtype}")
    if t.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {t.shape[0]} entries but the features have {n_samples} rows; "
            "expected one label per row"
        )
    t = t.to(torch.int64)
    lo = int(t.min()) if t.numel() else 0
    hi = int(t.max()) if t.numel() else -1
    if n_classes is None:
        n_classes = hi + 1
    elif not isinstance(n_classes, int | np.integer) or n_classes < 1:
        raise ValueError(f"n_classes must be a positive integer, got {n_classes!r}")
    if lo < 0 or hi >= n_classes:
        raise ValueError(f"{name} must lie in [0, {n_classes}), got range [{lo}, {hi}]")
    return t, int(n_classes)


def as_layers(
    layers: object, name: str = "layers", same_dim: bool = True, min_layers: int = 1
) -> list[torch.Tensor]:
    """Per-layer feature matrices, checked, on the device of the first layer.

    The matrices keep their dtype (converting every layer to float64 at once would double
    the memory); callers convert one or two layers at a time with :func:`to_f64`.

    Args:
        layers: a list or tuple ``[H_0, ..., H_L]`` of ``(N, D_l)`` matrices whose rows are
            the same samples in the same order.
        same_dim: also require every ``D_l`` to be equal (needed for displacements).
        min_layers: the smallest acceptable number of layers.
    """
    if isinstance(layers, torch.Tensor | np.ndarray) or not isinstance(layers, Sequence):
        raise TypeError(
            f"{name} must be a list or tuple of (N, D) feature matrices, "
            f"got {type(layers).__name__}"
        )
    if len(layers) < min_layers:
        raise ValueError(f"{name} must hold at least {min_layers} layer(s), got {len(layers)}")
    out: list[torch.Tensor] = []
    for i, h in enumerate(layers):
        t = as_tensor(h, f"{name}[{i}]", out[0].device if out else None)
        if t.ndim != 2:
            raise ValueError(f"{name}[{i}] must be 2-D (N, D), got shape {tuple(t.shape)}")
        if t.is_complex():
            raise TypeError(f"{name}[{i}] must be real-valued, got dtype {t.dtype}")
        check_finite(t, f"{name}[{i}]")
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
