"""Random streams of the data generators (private)."""

from __future__ import annotations

import numpy as np


def numpy_rng(seed: int, stream: int = 0) -> np.random.Generator:
    """An independent numpy Generator for ``stream`` under ``seed``.

    Streams are ``SeedSequence(seed, spawn_key=(stream,))``, so e.g. the test samples of a generator
    do not change when the number of training samples does.
    """
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stream,)))
