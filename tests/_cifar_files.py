"""Tiny CIFAR-10 / CIFAR-100 files in both distribution layouts, written by the tests.

``python``: the pickles of ``cifar-10-python.tar.gz`` / ``cifar-100-python.tar.gz``
(``cifar-10-batches-py/``, ``cifar-100-python/``); ``binary``: the records of
``cifar-10-binary.tar.gz`` / ``cifar-100-binary.tar.gz`` (``cifar-10-batches-bin/``,
``cifar-100-binary/``). Each writer returns what it wrote, so a test can read it back
exactly.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

LAYOUTS = ("python", "binary")
SMALL_MAMMALS = (36, 50, 65, 74, 80)
"""CIFAR-100's fine ids of hamster, mouse, rabbit, shrew, squirrel (superclass 16)."""
CIFAR10_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                 "ship", "truck")  # fmt: skip


def _dump(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        pickle.dump(obj, handle, protocol=2)


def _records(path: Path, labels: list[np.ndarray], data: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = np.concatenate([np.stack(labels, 1).astype(np.uint8), data], axis=1)
    path.write_bytes(rows.tobytes())


def write_cifar10(root: Path, layout: str, n: int = 10, seed: int = 0) -> dict[str, tuple]:
    """Five training batches and a test batch of ``n`` images each (labels cycle 0..9);
    returns ``{"train": (data (5n, 3072) uint8, labels), "test": (...)}``."""
    rng = np.random.default_rng(seed)
    batches = []
    for i in range(6):
        labels = np.array([(i + j) % 10 for j in range(n)], dtype=np.int64)
        batches.append((rng.integers(0, 256, (n, 3072), dtype=np.uint8), labels))
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    if layout == "python":
        folder = root / "cifar-10-batches-py"
        for name, (data, labels) in zip(names, batches, strict=True):
            _dump(folder / name, {b"data": data, b"labels": labels.tolist()})
        _dump(folder / "batches.meta", {b"label_names": [c.encode() for c in CIFAR10_NAMES]})
    else:
        folder = root / "cifar-10-batches-bin"
        for name, (data, labels) in zip(names, batches, strict=True):
            _records(folder / f"{name}.bin", [labels], data)
        (folder / "batches.meta.txt").write_text("\n".join(CIFAR10_NAMES) + "\n\n")
    train = (
        np.concatenate([b[0] for b in batches[:5]]),
        np.concatenate([b[1] for b in batches[:5]]),
    )
    return {"train": train, "test": batches[5]}


def write_cifar100(
    root: Path, layout: str, n_train: int = 40, n_test: int = 20, seed: int = 0
) -> dict[str, tuple]:
    """``train`` and ``test`` with every other image a small mammal (cycling through the
    five) and the rest other fine classes; returns ``{split: (data, fine, coarse)}``."""
    rng = np.random.default_rng(seed)
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        fine = np.array([SMALL_MAMMALS[j // 2 % 5] if j % 2 == 0 else (j * 3) % 100
                         for j in range(n)], dtype=np.int64)  # fmt: skip
        fine = np.where(np.isin(fine, SMALL_MAMMALS) & (np.arange(n) % 2 == 1), 1, fine)
        coarse = np.where(np.isin(fine, SMALL_MAMMALS), 16, fine % 16)
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        out[split] = (data, fine, coarse)
    fine_names = [f"fine{i}" for i in range(100)]
    for i, name in zip(SMALL_MAMMALS, ("hamster", "mouse", "rabbit", "shrew", "squirrel"),
                       strict=True):  # fmt: skip
        fine_names[i] = name
    coarse_names = [f"coarse{i}" for i in range(20)]
    coarse_names[16] = "small_mammals"
    if layout == "python":
        folder = root / "cifar-100-python"
        for split, (data, fine, coarse) in out.items():
            _dump(folder / split, {b"data": data, b"fine_labels": fine.tolist(),
                                   b"coarse_labels": coarse.tolist()})  # fmt: skip
        names = {b"fine_label_names": fine_names, b"coarse_label_names": coarse_names}
        _dump(folder / "meta", {key: [n.encode() for n in value] for key, value in names.items()})
    else:
        folder = root / "cifar-100-binary"
        for split, (data, fine, coarse) in out.items():
            _records(folder / f"{split}.bin", [coarse, fine], data)
        (folder / "fine_label_names.txt").write_text("\n".join(fine_names) + "\n")
        (folder / "coarse_label_names.txt").write_text("\n".join(coarse_names) + "\n")
    return out
