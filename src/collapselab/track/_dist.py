"""The few ``torch.distributed`` facts a monitor needs (the reduction itself is
:func:`collapselab.stats.all_reduce`)."""

from __future__ import annotations

import torch


def distributed_active() -> bool:
    """Whether a ``torch.distributed`` process group is initialised."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    """This process's rank (0 without a process group)."""
    import torch.distributed as dist

    return dist.get_rank() if distributed_active() else 0


def all_agree(flag: bool, device: torch.device) -> bool:
    """Whether ``flag`` holds on every process (a ``MIN`` all-reduce of 0/1)."""
    import torch.distributed as dist

    t = torch.tensor([1 if flag else 0], dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())
