"""Running small-matrix loops on one thread, and row streams on one thread each."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

import torch
from threadpoolctl import threadpool_limits

T = TypeVar("T")


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


# ------------------------------------------------------------------ row streams
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()

STREAM_MIN_ENTRIES = 1 << 19
"""Entries (rows x columns) each row stream must get: below this a stream's hand-over to a
worker thread (tens of microseconds) is not repaid."""


_streams = threading.local()


@contextlib.contextmanager
def thread_streams() -> Iterator[None]:
    """Inside the block torch runs on one intra-op thread, and :func:`stream_count` offers
    the threads it had as row streams; the setting is restored at the end.

    For a data pass whose heavy work runs in streams (:func:`run_streams`): its other
    operations (checks, label counts, the means between the passes) then never start
    torch's OpenMP team, whose idle thread spins for milliseconds after each parallel
    region, on the core a stream's worker needs (measured: about 27 ms of spinning per
    NC request at ``D = 512`` with two threads).
    """
    width = torch.get_num_threads()
    outer = getattr(_streams, "width", None)
    _streams.width = width
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(width)
        _streams.width = outer


@contextlib.contextmanager
def caller_threads() -> Iterator[None]:
    """Inside :func:`thread_streams`: torch's threads as the caller had them, for work that
    does not run in streams (families that read a batch's rows themselves); elsewhere
    nothing."""
    width = getattr(_streams, "width", None)
    if width is None:
        yield
        return
    _streams.width = None
    torch.set_num_threads(width)
    try:
        yield
    finally:
        torch.set_num_threads(1)
        _streams.width = width


def stream_count(entries: int, device: torch.device) -> int:
    """How many row streams :func:`run_streams` should split ``entries`` of work into:
    inside :func:`thread_streams` on CPU, the torch threads the block started with, at most
    one per :data:`STREAM_MIN_ENTRIES`; elsewhere 1.

    Streams are for a data pass that runs alone. Between the operations of a forward pass
    (a Monitor's hooks), torch's OpenMP team has just run a parallel region, and its idle
    thread spins on the core the second stream needs.
    """
    width = getattr(_streams, "width", None)
    if width is None or device.type != "cpu":
        return 1
    return max(1, min(width, entries // STREAM_MIN_ENTRIES))


def _one_torch_thread() -> None:
    """Worker set-up: one torch intra-op thread for this thread only. ``get_num_threads``
    first runs torch's lazy per-thread set-up, which would otherwise copy the process-wide
    setting over this one at the thread's first operation."""
    torch.get_num_threads()
    torch.set_num_threads(1)


def _forget_workers() -> None:
    """In a forked child: the parent's worker threads do not exist there (a pool that
    believes it has idle workers would never run a task); a new pool starts on demand."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_workers)


def _workers() -> ThreadPoolExecutor:
    with _pool_lock:
        global _pool
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=max(os.cpu_count() or 1, 1),
                thread_name_prefix="collapselab-stream",
                initializer=_one_torch_thread,
            )
        return _pool


def run_streams(tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Run ``tasks`` at once, each on one torch thread: the first on the calling thread, the
    others on worker threads (torch operations release the GIL); their results in order.

    Many small operations over cache-sized blocks scale badly under torch's intra-op
    threads: every operation splits its block between the threads and waits for all of
    them, and some (``index_add_``, row norms) barely use the second one. The NC request at
    ``D = 512`` took 126 ms with two intra-op threads and 86 ms with one on a quiet 2-core
    machine (benchmarks/README.md, issue 32). Independent streams of blocks, one per core,
    each accumulating into its own partial sums, need no synchronisation until the end.

    The calling thread's torch setting is set to one thread while its task runs and then
    restored (which also restores the process-wide default that new threads start from).
    A task's exception is raised here once every task has finished.
    """
    if len(tasks) <= 1:
        return [task() for task in tasks]
    pool = _workers()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        futures = [pool.submit(task) for task in tasks[1:]]
        try:
            first = tasks[0]()
        finally:
            wait(futures)
        return [first, *(f.result() for f in futures)]
    finally:
        torch.set_num_threads(threads)
