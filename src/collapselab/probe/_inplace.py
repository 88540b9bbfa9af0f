"""Noticing kept tensors that a later in-place operation overwrote.

Hooks that keep a layer's output (or input) without copying it keep the very tensor the
graph goes on using; an in-place operation later in the pass (``nn.ReLU(inplace=True)``)
then changes the kept values. Every tensor carries a version counter that each in-place
operation on it, or on a view sharing its storage, increments: recording it when a tensor
is kept and comparing at the end of the pass tells whether the kept values are still the
layer's.
"""

from __future__ import annotations

from collections.abc import Hashable

import torch


class InPlaceGuard:
    """Records the version counters of kept tensors; :meth:`changed` lists the overwritten."""

    def __init__(self) -> None:
        self._watched: dict[Hashable, tuple[torch.Tensor, int]] = {}

    def watch(self, key: Hashable, tensor: torch.Tensor) -> None:
        self._watched[key] = (tensor, tensor._version)

    def changed(self) -> list[Hashable]:
        """Keys of the watched tensors modified in place since :meth:`watch`."""
        return [key for key, (t, version) in self._watched.items() if t._version != version]

    def clear(self) -> None:
        self._watched = {}
