"""Seeding and saving/restoring the random number generators training touches."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and CUDA)."""
    random.seed(seed)
    # The legacy global generator is what user code calls; seeding it is the point.
    np.random.seed(seed % 2**32)  # noqa: NPY002
    torch.manual_seed(seed)


def epoch_seed(seed: int, epoch: int) -> int:
    """A 63-bit seed for the shuffle of ``epoch``, mixed from ``(seed, epoch)``.

    Independent of every global generator, so the batch order of an epoch does not depend
    on what ran before (which is what makes resumed runs identical).
    """
    state = np.random.SeedSequence([seed, epoch]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def epoch_permutation(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The sample order of ``epoch`` (a permutation of ``range(n)``, CPU int64)."""
    generator = torch.Generator().manual_seed(epoch_seed(seed, epoch))
    return torch.randperm(n, generator=generator)


def get_rng_state() -> dict[str, Any]:
    """Generator states as tensors and plain containers (loadable with weights_only)."""
    np_state = np.random.get_state(legacy=True)  # noqa: NPY002
    name, key, pos, has_gauss, cached = np_state
    return {
        "python": random.getstate(),
        "numpy": {
            "name": str(name),
            "key": torch.from_numpy(np.asarray(key, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore states saved by :func:`get_rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    np_state = state["numpy"]
    np.random.set_state(  # noqa: NPY002
        (
            np_state["name"],
            np_state["key"].numpy().astype(np.uint32),
            np_state["pos"],
            np_state["has_gauss"],
            np_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seeded_rng_state(seed: int) -> dict[str, Any]:
    """What :func:`get_rng_state` returns right after ``seed_everything(seed)``, computed
    without changing the generators (their states are restored)."""
    current = get_rng_state()
    try:
        seed_everything(seed)
        return get_rng_state()
    finally:
        set_rng_state(current)
