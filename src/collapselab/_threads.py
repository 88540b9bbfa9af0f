"""Running small-matrix loops on one thread."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from threadpoolctl import threadpool_limits


@contextlib.contextmanager
def serial_threads() -> Iterator[None]:
    """One BLAS/OpenMP thread (NumPy, SciPy) and one torch intra-op thread inside the block.

    Solvers and Monte-Carlo loops here work on small matrices thousands of times; threading
    them only adds synchronisation, and on a busy machine spinning worker threads made them
    10 to 100 times slower (measured on a 2-core machine). The previous settings are restored.
    """
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(torch_threads)


SMALL_WORK = 1 << 20
"""Entries (rows x columns) up to which a measurement runs on one thread."""


@contextlib.contextmanager
def small_work_threads(entries: int) -> Iterator[None]:
    """One torch intra-op thread inside the block when the work is small
    (``entries <= SMALL_WORK``), else nothing; the previous setting is restored.

    A measurement of a small feature matrix is many small torch calls; with torch's
    default threads each one waits for the pool, and with other jobs on the machine the
    waiting dominates: ``measure`` at N = 2,000, D = 64 took 0.9-1.0 s with 2 threads and
    0.06 s with one on a busy 2-core machine (benchmarks/README.md). Only torch's setting
    changes (the measurement is torch): :func:`serial_threads` also limits the BLAS pools of
    NumPy and SciPy, which costs about 0.6 ms a call.
    """
    if entries > SMALL_WORK:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
