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
