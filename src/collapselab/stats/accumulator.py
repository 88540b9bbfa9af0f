"""The accumulator protocol: streaming, mergeable sums, and their one distributed reduction.

Every statistic collapselab collects over data is an :class:`Accumulator`: it is fed batch
by batch (:meth:`~Accumulator.update`), holds nothing but **sums over samples** as tensors
(:meth:`~Accumulator.state`), and two of them over disjoint data merge by adding those
tensors (:meth:`~Accumulator.merge`). That makes every result independent of the batch size,
of the order of the batches (up to floating-point summation order) and of the number of
processes: under ``torch.distributed`` the sums of all processes are added by one generic
reduction, :func:`all_reduce`, whatever the accumulator. Formulas that turn sums into
metrics live in :mod:`collapselab.metrics`, never here.

Writing an accumulator: keep the sums in ``self._sums`` (a dict of tensors, empty until the
first batch sizes them), implement :meth:`~Accumulator.update`, and, if two accumulators
can be incompatible (different class counts, say), :meth:`~Accumulator._check_compatible`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, TypeVar

import torch

A = TypeVar("A", bound="Accumulator")


class Accumulator(ABC):
    """Sums over samples, fed batch by batch; mergeable and reducible by addition."""

    def __init__(self) -> None:
        self._sums: dict[str, torch.Tensor] = {}

    @abstractmethod
    def update(self: A, *args: Any, **kwargs: Any) -> A:
        """Add one batch to the sums; returns ``self``."""

    def state(self) -> dict[str, torch.Tensor]:
        """The sums as named tensors (empty before the first batch).

        These are the accumulator's own tensors, not copies: :func:`all_reduce` sums them
        in place. Two accumulators over disjoint data merge by adding them key by key.
        """
        return self._sums

    @property
    def is_empty(self) -> bool:
        """Whether no batch has been added yet (the sums are not sized)."""
        return not self.state()

    settings: tuple[str, ...] = ()
    """The attributes two accumulators must share to merge (the class count, say)."""

    def _check_compatible(self, other: Accumulator) -> None:
        """Raise when ``other``'s sums cannot be added to these: ``TypeError`` for another
        kind of accumulator, ``ValueError`` for other :attr:`settings`."""
        if type(other) is not type(self):
            raise TypeError(f"other must be a {type(self).__name__}, got {type(other).__name__}")
        mine = tuple(getattr(self, name) for name in self.settings)
        theirs = tuple(getattr(other, name) for name in self.settings)
        if mine != theirs:
            raise ValueError(
                f"cannot merge {type(self).__name__}s with different "
                f"{' or '.join(self.settings)}: {mine} vs {theirs}"
            )

    def merge(self: A, other: A) -> A:
        """Add another accumulator's sums (of other data) into this one; returns ``self``."""
        self._check_compatible(other)
        theirs = other.state()
        if not theirs:
            return self
        mine = self.state()
        if not mine:
            self._sums = {key: value.clone() for key, value in theirs.items()}
            return self
        for key, value in theirs.items():
            if value.shape != mine[key].shape:
                raise ValueError(
                    f"cannot merge {type(self).__name__} sums of shape {tuple(value.shape)} "
                    f"into {tuple(mine[key].shape)} ({key!r}): different dimensions"
                )
            mine[key] += value.to(mine[key].device)
        return self

    def all_reduce(self, group: Any = None) -> None:
        """Sum this accumulator over a ``torch.distributed`` group (see :func:`all_reduce`)."""
        all_reduce([self], group)


def all_reduce(accumulators: Iterable[Accumulator], group: Any = None) -> None:
    """Sum the state of every accumulator over the processes of a ``torch.distributed`` group.

    The one reduction of collapselab: as every state tensor is a sum over samples, the
    statistics of the whole data set are the element-wise sums over processes. The tensors
    are packed into one flat buffer per dtype and device, so a data pass over many layers costs a
    handful of collectives, not one per tensor. Every process must call it with the same
    accumulators in the same order (it is a collective), each sized (fed at least one batch,
    or given its dimension up front). Call it once per pass: a second call adds the sums
    again. The tensors stay on their device: use a backend that supports it (gloo: CPU,
    nccl: CUDA).
    """
    _require_group()
    tensors: list[torch.Tensor] = []
    for acc in accumulators:
        state = acc.state()
        if not state:
            raise RuntimeError(
                f"this process fed no batch to a {type(acc).__name__} before the all-reduce; "
                "under torch.distributed every process must measure at least one batch of "
                "each split (or give the statistics their dimension up front)"
            )
        tensors += state.values()
    sum_over_processes(tensors, group)


def sum_over_processes(tensors: Iterable[torch.Tensor], group: Any = None) -> None:
    """Replace every tensor by its element-wise sum over the processes of a
    ``torch.distributed`` group, in place (the collective under :func:`all_reduce`).

    The tensors are packed into one flat buffer per dtype and device, one collective each.
    Every process must call it with tensors of the same shapes, dtypes and order.
    """
    import torch.distributed as dist

    _require_group()
    packs: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = defaultdict(list)
    for tensor in tensors:
        packs[(tensor.dtype, tensor.device)].append(tensor)
    for pack in packs.values():
        flat = torch.cat([t.reshape(-1) for t in pack])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
        offset = 0
        for t in pack:
            t.copy_(flat[offset : offset + t.numel()].view_as(t))
            offset += t.numel()


def _require_group() -> None:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("all_reduce() needs an initialised torch.distributed group")
