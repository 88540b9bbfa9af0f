"""Test helper: a small dataset in the MNIST / Fashion-MNIST IDX format."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np


def idx_bytes(array: np.ndarray) -> bytes:
    """An unsigned-byte IDX file: magic ``00 00 08 ndim``, big-endian int32 sizes, data."""
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_idx_dataset(
    root: Path, n_train: int = 30, n_test: int = 20, gz: bool = True, seed: int = 0
) -> dict[str, np.ndarray]:
    """The four IDX files (gzipped, named as Debian's package names them when ``gz``) in
    ``root``, labels cycling through 0..9; returns the arrays by file stem."""
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        # in int64 first: a uint8 arange wraps at 256, and the labels stopped cycling
        "train-labels-idx1-ubyte": (np.arange(n_train) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": (np.arange(n_test) * 7 % 10).astype(np.uint8),
    }
    root.mkdir(parents=True, exist_ok=True)
    for stem, array in arrays.items():
        payload = idx_bytes(array)
        if gz:
            (root / f"{stem}.gz").write_bytes(gzip.compress(payload))
        else:
            (root / stem).write_bytes(payload)
    return arrays
