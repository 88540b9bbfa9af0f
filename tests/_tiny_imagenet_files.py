"""Test helper: a small Tiny-ImageNet folder (``tiny-imagenet-200``) in the official layout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from PIL import Image


def write_tiny_imagenet(
    root: Path,
    words: Mapping[str, str],
    n_train: int = 3,
    n_val: int = 2,
    size: int = 8,
    suffix: str = ".png",
    extra_words: Sequence[str] = (),
    seed: int = 0,
) -> dict[str, dict[str, np.ndarray]]:
    """``root/tiny-imagenet-200`` with ``wnids.txt`` (the keys of ``words`` in order),
    ``words.txt`` (``words``' names, plus ``extra_words`` lines of ids not in the dataset, as
    the official file lists every ImageNet id), ``n_train`` images per class under
    ``train/<wnid>/images`` and ``n_val`` per class under ``val/images`` with
    ``val/val_annotations.txt``. Images are ``size x size`` RGB with random pixels (PNG:
    lossless; ``.JPEG``: lossy). Returns the pixels ``(N, 3, H, W)`` by split and wnid."""
    rng = np.random.default_rng(seed)
    folder = root / "tiny-imagenet-200"
    (folder / "val" / "images").mkdir(parents=True, exist_ok=True)
    (folder / "wnids.txt").write_text("".join(f"{w}\n" for w in words))
    lines = [f"{w}\t{names}" for w, names in words.items()] + list(extra_words)
    (folder / "words.txt").write_text("\n".join(lines) + "\n")
    pixels: dict[str, dict[str, np.ndarray]] = {"train": {}, "val": {}}
    annotations = []
    fmt = "PNG" if suffix.lower() == ".png" else "JPEG"
    for c, wnid in enumerate(words):
        images = folder / "train" / wnid / "images"
        images.mkdir(parents=True)
        train = rng.integers(0, 256, (n_train, size, size, 3), dtype=np.uint8)
        for i, array in enumerate(train):
            Image.fromarray(array).save(images / f"{wnid}_{i}{suffix}", format=fmt)
        val = rng.integers(0, 256, (n_val, size, size, 3), dtype=np.uint8)
        for i, array in enumerate(val):
            name = f"val_{c * n_val + i}{suffix}"
            Image.fromarray(array).save(folder / "val" / "images" / name, format=fmt)
            annotations.append(f"{name}\t{wnid}\t0\t0\t{size - 1}\t{size - 1}")
        pixels["train"][wnid] = train.transpose(0, 3, 1, 2)
        pixels["val"][wnid] = val.transpose(0, 3, 1, 2)
    (folder / "val" / "val_annotations.txt").write_text("\n".join(annotations) + "\n")
    return pixels
