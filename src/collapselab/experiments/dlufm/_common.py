"""Helpers shared by paper 004's experiment modules (private to the package)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from collapselab.curvature import subspace_overlap
from collapselab.experiments.claims import CheckFn, claim_from_check
from collapselab.theory.dlufm import (
    DeepLinearUFM,
    DeepReLUUFM,
    DeepUFM,
    UFMParameters,
    gradient_descent,
)

PAPER = "004"
SOURCE = "Garrod & Keating, Unifying low dimensional observations ... deep linear UFM (v1)"

Check = CheckFn
"""A claim's core: results -> (holds, the numbers, the numeric threshold, one sentence)."""

claim = claim_from_check
"""Paper 004's claims are built by :func:`collapselab.experiments.claims.claim_from_check`."""


def build_model(
    config: Mapping[str, Any], *, relu: bool = False, width: int | None = None
) -> DeepUFM:
    """The deep (linear or ReLU) UFM of a configuration (``n_classes``, ``n_per_class``,
    ``width`` or ``widths``, ``n_layers``, ``lambda_w``, ``lambda_h``)."""
    widths = config.get("widths", config.get("width")) if width is None else width
    cls = DeepReLUUFM if relu else DeepLinearUFM
    return cls(
        int(config["n_classes"]),
        int(config["n_per_class"]),
        widths,
        config["lambda_w"],
        float(config["lambda_h"]),
        n_layers=config.get("n_layers") if isinstance(widths, int) else None,  # a list says L
    )


def descend(
    model: DeepUFM,
    config: Mapping[str, Any],
    progress: Callable[[int, int], None] | None = None,
    *,
    seed: int = 0,
    steps: int | None = None,
    checkpoints: int | None = None,
    init: UFMParameters | None = None,
) -> Any:
    """The paper's full-batch gradient descent with the configuration's ``lr``, ``steps``,
    ``checkpoints``, ``w_scale`` and ``h_scale``
    (:func:`~collapselab.theory.dlufm.gradient_descent`)."""
    return gradient_descent(
        model,
        float(config["lr"]),
        int(config["steps"] if steps is None else steps),
        init=init,
        seed=seed,
        w_scale=float(config.get("w_scale", 1.0)),
        h_scale=float(config.get("h_scale", 1.0)),
        checkpoints=int(config.get("checkpoints", 2) if checkpoints is None else checkpoints),
        tol=float(config.get("tol", 0.0)),
        progress=progress,
    )


def relative_spread(values: Sequence[float] | np.ndarray) -> float:
    """``(max − min)/max`` of positive values (0 when all are equal)."""
    values = np.asarray(values, dtype=np.float64)
    top = float(np.max(values))
    return float((top - np.min(values)) / top) if top > 0 else float("nan")


def first_step(steps: np.ndarray, condition: np.ndarray) -> int:
    """The first step at which ``condition`` holds and keeps holding to the end (-1: never)."""
    condition = np.asarray(condition, dtype=bool)
    if not condition[-1]:
        return -1
    failing = np.flatnonzero(~condition)
    return int(steps[0] if failing.size == 0 else steps[failing[-1] + 1])


def overlaps(top_vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gur-Ari's top-subspace overlap ``Tr(P_t P_t')/k``
    (:func:`~collapselab.curvature.subspace_overlap`) of each checkpoint's top space
    (``(T, P, k)`` orthonormal columns) with the previous checkpoint's and with the last's."""
    last = top_vectors[-1]
    with_last = np.array([subspace_overlap(v, last) for v in top_vectors])
    with_prev = np.array(
        [np.nan] + [subspace_overlap(a, b) for a, b in itertools.pairwise(top_vectors)]
    )
    return with_prev, with_last
