"""Input conventions of the diversity and layer-wise metric families (private).

Every public function of those families accepts ``torch.Tensor`` or ``numpy.ndarray``
inputs and converts them to float64 tensors on the input's device: detached (metrics are
statistics, not part of a training graph), with booleans (ReLU gating patterns) counting as
0/1. Malformed input is rejected by the shared checks of :mod:`collapselab._checks`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from collapselab._checks import ArgumentTypeError, as_real_array, as_real_tensor, check_labels

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
    """A finite 2-D float64 tensor ``(rows, cols)``."""
    return _as_real(name, x, 2, device)


def as_vector(name: str, x: object, device: torch.device | None = None) -> torch.Tensor:
    """A finite 1-D float64 tensor."""
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
