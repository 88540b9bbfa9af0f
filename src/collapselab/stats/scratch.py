"""Reusable work buffers for the per-chunk float64 copies of the accumulators.

Accumulating a large matrix chunk by chunk makes a float64 copy of every chunk (and a
deviation matrix in pass 2). A fresh multi-MiB tensor per chunk costs an allocation and, when
the allocator hands the memory back to the system in between, page faults on every touch;
reusing one buffer per purpose avoids both. Buffers are per thread, grow to the largest
chunk seen, and are kept for the life of the thread (at most a few chunks' worth, each
bounded by the chunk size, 64 MiB at most by default).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

import torch

_local = threading.local()
T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def scratch(name: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """A float64 buffer of ``shape`` on ``like``'s device, reused across calls with ``name``.

    Its content is undefined; a caller owns it until its next call with the same ``name``.
    """
    buffers: dict[tuple[str, torch.device], torch.Tensor] = _local.__dict__.setdefault(
        "buffers", {}
    )
    key = (name, like.device)
    n = math.prod(shape)
    buf = buffers.get(key)
    if buf is None or buf.numel() < n:
        buf = torch.empty(max(n, 1), dtype=torch.float64, device=like.device)
        buffers[key] = buf
    return buf[:n].view(shape)


def as_float64(name: str, x: torch.Tensor) -> torch.Tensor:
    """``x`` in float64: ``x`` itself when it already is, else a copy in a reused buffer."""
    if x.dtype == torch.float64:
        return x
    out = scratch(name, tuple(x.shape), x)
    out.copy_(x)
    return out


def stacked_float64(name: str, blocks: Sequence[torch.Tensor]) -> torch.Tensor:
    """The equal-shape ``blocks`` as one float64 stack ``(L, *shape)`` in a reused buffer
    (booleans as 0/1; the same values as :func:`as_float64` of each). Detached."""
    out = scratch(name, (len(blocks), *blocks[0].shape), blocks[0])
    for row, block in zip(out, blocks, strict=True):
        row.copy_(block.detach())
    return out


STACK_BYTES = 2 << 20
"""The most bytes of float64 blocks the stacked paths (several layers in one kernel) put in
one stack: beyond the cache a larger stack costs more than the per-layer calls it saves
(measured: M4 of 7 stacked 512 x 512 updates, 4.5 ms, one at a time 3.3 ms; 7 at
128 x 128 together, faster)."""


def in_stacks(items: Sequence[T], item_bytes: int) -> list[list[T]]:
    """``items`` in consecutive stacks of as many as fit in :data:`STACK_BYTES` (at least
    one each), for items of ``item_bytes`` bytes."""
    size = max(1, STACK_BYTES // max(1, item_bytes))
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def stacks_by(
    items: Iterable[T], key: Callable[[T], K], item_bytes: Callable[[K], int]
) -> list[list[T]]:
    """``items`` grouped by ``key`` (the groups in order of first appearance, the items in
    order), each group in consecutive stacks of :func:`in_stacks` for items of
    ``item_bytes(key)`` bytes: the stacks of equal-shape blocks the stacked paths take."""
    groups: dict[K, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return [stack for k, group in groups.items() for stack in in_stacks(group, item_bytes(k))]
