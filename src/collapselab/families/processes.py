r"""The processes a measurement runs on, and the distributed modes of metric families.

Under ``torch.distributed`` every process measures its own shard of the data. A family
declares how its values still come out as a single process's on the whole data (its
**distributed mode**, :attr:`collapselab.families.Family.distributed`, one of
:data:`DISTRIBUTED_MODES`):

* ``"reduced"``: the values are functions of sums over samples. The engine sums the
  family's accumulators over the processes before computing (the data pass does it); a
  model procedure sums its own with :meth:`Processes.sum`. Values of the weights alone are
  the same in every process anyway.
* ``"replicated"``: the model procedure reads only what every process holds identically
  (the weights; a fixed set of samples the family takes in the global data order), so every
  process computes the same values. The Monitor checks that the weights are the same in
  every process and gives every process rank 0's values.
* ``"rank0"``: every process runs the procedure over its own shard (a wrapped model's
  forward may run collectives, so every process takes the same passes) and the family
  gathers what it needs on rank 0 (:meth:`Processes.gather`), which computes the values;
  the Monitor sends them to the other processes.
* ``"refuse"``: the family cannot give the single-process answer there; the Monitor raises
  under ``torch.distributed`` naming the family.

The **global data order** (:func:`global_order`) is what a family that picks samples
(the curvature family's fixed subset) or records them one by one (the learning-order
family) reads as "the order of the data": with a ``DataLoader`` over a
``DistributedSampler``, the samples' dataset indices, the order of one unshuffled process
over the same dataset; otherwise the processes' data rank by rank (rank 0's samples in its
loader's order, then rank 1's, ...), the single-process order when each process holds a
contiguous block of the data in rank order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

from collapselab.stats.accumulator import sum_over_processes

DISTRIBUTED_MODES = ("reduced", "replicated", "rank0", "refuse")
"""How a family's values under ``torch.distributed`` equal one process's (module docstring)."""

OrderKey = tuple[int, int]
"""A sample's place in the global data order: ``(0, dataset index)`` or ``(rank, position)``."""


@dataclass(frozen=True)
class Processes:
    """The processes of a measurement: one (the default), or a ``torch.distributed`` group.

    Attributes:
        rank: this process's rank (0 for one process).
        size: the number of processes.
        active: the measurement runs under an initialised ``torch.distributed`` group (every
            method below is then a collective: every process calls it, in the same order).
    """

    rank: int = 0
    size: int = 1
    active: bool = False

    @classmethod
    def current(cls) -> Processes:
        """The initialised ``torch.distributed`` group, or one process without one."""
        if not (dist.is_available() and dist.is_initialized()):
            return cls()
        return cls(dist.get_rank(), dist.get_world_size(), True)

    def sum(self, tensors: Sequence[torch.Tensor]) -> None:
        """Replace each tensor by its element-wise sum over the processes, in place (sums
        over samples of each process's shard become sums over the whole data)."""
        if self.active:
            sum_over_processes(tensors)

    def gather(self, obj: Any) -> list[Any] | None:
        """Every process's ``obj`` (picklable), in rank order, on rank 0; ``None`` on the
        others. One process: ``[obj]``."""
        if not self.active:
            return [obj]
        out: list[Any] | None = [None] * self.size if self.rank == 0 else None
        dist.gather_object(obj, out, dst=0)
        return out

    def all_gather(self, obj: Any) -> list[Any]:
        """Every process's ``obj`` (picklable), in rank order, on every process."""
        if not self.active:
            return [obj]
        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` (picklable) on every process."""
        if not self.active:
            return obj
        box = [obj if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def same_everywhere(self, values: torch.Tensor) -> bool:
        """Whether the float64 tensor ``values`` (same shape in every process) has the same
        bits in every process (NaN included): a ``MIN`` and a ``MAX`` all-reduce of them."""
        if not self.active:
            return True
        bits = values.detach().to(torch.float64).contiguous().view(torch.int64).reshape(-1)
        low, high = bits.clone(), bits.clone()
        dist.all_reduce(low, op=dist.ReduceOp.MIN)
        dist.all_reduce(high, op=dist.ReduceOp.MAX)
        return bool(torch.equal(low, high))


def global_order(loader: Any, processes: Processes) -> Callable[[int], OrderKey]:
    """The key of the ``i``-th sample ``loader`` gives in the global data order (module
    docstring): ``(0, dataset index)`` under a ``DistributedSampler``, else ``(rank, i)``.
    For one process, ``(0, i)``: the loader's own order."""
    sampler = getattr(loader, "sampler", None)
    if (
        processes.active
        and isinstance(loader, DataLoader)
        and isinstance(sampler, DistributedSampler)
    ):
        indices = [int(i) for i in sampler]  # the order the loader iterates (one epoch)
        return lambda i: (0, indices[i])
    rank = processes.rank
    return lambda i: (rank, i)


def in_global_order(parts: Iterable[tuple[Sequence[OrderKey], Sequence[Any]]]) -> list[Any]:
    """The items of several processes' ``(keys, items)`` in the global data order, each
    key once (a ``DistributedSampler`` that pads repeats samples of the start)."""
    keyed: dict[OrderKey, Any] = {}
    for keys, items in parts:
        for key, item in zip(keys, items, strict=True):
            keyed.setdefault(tuple(key), item)
    return [keyed[key] for key in sorted(keyed)]
