"""Summing a monitor's partial statistics over a ``torch.distributed`` group.

Every accumulator a monitor keeps holds plain sums, so the statistics of the whole data set
are the element-wise sums over processes: one ``all_reduce(SUM)`` per tensor. Class
statistics reduce themselves (:meth:`collapselab.stats.ClassStats.all_reduce`); the
metric-family accumulators of :mod:`collapselab.metrics` are reduced here, field by field.
"""

from __future__ import annotations

from typing import Any

import torch

from collapselab.metrics.diversity import CosineSimilarityAccumulator, GatingSimilarityAccumulator
from collapselab.metrics.layerwise import LayerPathAccumulator


def distributed_active() -> bool:
    """Whether a ``torch.distributed`` process group is initialised."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    """This process's rank (0 without a process group)."""
    import torch.distributed as dist

    return dist.get_rank() if distributed_active() else 0


def _sum_(tensor: torch.Tensor) -> None:
    import torch.distributed as dist

    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)


def _require(value: Any, what: str) -> None:
    if value is None:
        raise RuntimeError(
            f"this process saw no batch for the {what} before the all-reduce; under "
            "torch.distributed every process must measure at least one batch of each split"
        )


def all_agree(flag: bool, device: torch.device) -> bool:
    """Whether ``flag`` holds on every process (a ``MIN`` all-reduce of 0/1)."""
    import torch.distributed as dist

    t = torch.tensor([1 if flag else 0], dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())


def all_reduce_tensor(tensor: torch.Tensor) -> None:
    """Sum ``tensor`` in place over all processes."""
    _sum_(tensor)


def all_reduce_cosine(acc: CosineSimilarityAccumulator) -> None:
    """Sum a :class:`CosineSimilarityAccumulator`'s per-class sums over all processes."""
    _require(acc.unit_sums, "pairwise-cosine statistics")
    for tensor in (acc.unit_sums, acc.sq_norms, acc.n_nonzero, acc.n_zero):
        _sum_(tensor)


def all_reduce_gating(acc: GatingSimilarityAccumulator) -> None:
    """Sum a :class:`GatingSimilarityAccumulator` over all processes.

    Its cosine part is a :class:`CosineSimilarityAccumulator` kept in the private ``_cos``
    attribute (the metrics module offers no reduction of its own yet).
    """
    _require(acc.on_sums, "gating statistics")
    all_reduce_cosine(acc._cos)
    for tensor in (acc.on_sums, acc.on_counts, acc.counts):
        _sum_(tensor)


def all_reduce_path(acc: LayerPathAccumulator) -> None:
    """Sum a :class:`LayerPathAccumulator` (tensors and scalar counters) over all processes."""
    _require(acc.lengths, "layer-path statistics")
    _sum_(acc.lengths)
    _sum_(acc.sq_lengths)
    scalars = torch.tensor(
        [acc.n_samples, acc.straightness_sum, acc.n_straight],
        dtype=torch.float64,
        device=acc.lengths.device,
    )
    _sum_(scalars)
    # Counts are integers far below 2**53, so the float64 round trip is exact.
    acc.n_samples = int(scalars[0])
    acc.straightness_sum = float(scalars[1])
    acc.n_straight = int(scalars[2])
