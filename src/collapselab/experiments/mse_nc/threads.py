"""The torch thread count of a block (shared by both experiments of paper 003)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)`` (``None``: unchanged), then restore.

    The quick presets' networks are tiny: on a 2-core CPU shared with other work, torch's
    thread pool costs more in contention than it gains (a factor of several measured on
    128-wide layers), so they run single-threaded. Only torch's setting changes, not the
    BLAS pools of NumPy (the simulations' numbers stay those of the default pools).
    """
    if n is None:
        yield
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"torch_threads must be a positive int or None, got {n!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
