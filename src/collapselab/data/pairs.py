r"""The class pair a linear classifier confuses most: a binary problem chosen by a stated rule.

Paper 002 runs its binary experiments (Fig. 7a in the text, Figs. 10 and 12) on CIFAR-10's
cats and dogs, the pair of CIFAR-10 classes that classifiers confuse most. On another
dataset the analogue is chosen by this rule, stated before any experiment ran on the pair:

1. ``W_opt = Σ_YX Σ_XX^+`` (paper 002 §2.1, Def. 2, with the inverse the print omits; note
   002 §7 item 1): the least-squares linear map, without bias, from the training inputs
   (``Σ_XX = Xᵀ X`` uncentred, ``Σ_YX = Yᵀ X``, ``Y`` one-hot) to their labels: the
   solution every linear network of the paper converges to;
2. ``C[a, b]``: the number of training examples of class ``a`` that ``argmax_k (W_opt x)_k``
   assigns to ``b`` (the training confusion counts);
3. the pair ``{a, b}``, ``a < b``, with the largest ``C[a, b] + C[b, a]``; a tie goes to the
   smallest ``a``, then the smallest ``b``.

All in float64; ``Σ_XX`` is accumulated in blocks of rows, so no copy of the data is made
beyond one block. The pseudo-inverse drops eigenvalues below ``D · eps_float64`` of the
largest (a constant input feature gives a zero eigenvalue).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from collapselab.checks import check_int
from collapselab.data.registry import load_dataset
from collapselab.data.transforms import Standardize

__all__ = ["dataset_confused_pair", "least_squares_confusion", "most_confused_pair"]

_BLOCK = 8192
"""Rows per block when accumulating ``Σ_XX`` and scoring."""


def _labels(y: object, n: int, n_classes: int) -> np.ndarray:
    labels = np.asarray(y)
    if labels.shape != (n,):
        raise ValueError(f"y must have one label per row of x ({n}), got shape {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(f"labels must lie in [0, {n_classes}), got {labels.min()}..{labels.max()}")
    return labels.astype(np.int64)


def least_squares_confusion(x: object, y: object, n_classes: int) -> np.ndarray:
    r"""Training confusion counts ``C`` (``K x K``, rows the true class) of the least-squares
    classifier ``W_opt = Σ_YX Σ_XX^+`` fitted on ``x`` ``(n, D)`` (rows are examples) and
    integer labels ``y`` ``(n,)``, scored on the same ``x``."""
    k = check_int("n_classes", n_classes, minimum=2)
    data = np.asarray(x)
    if data.ndim != 2 or data.shape[0] == 0:
        raise ValueError(f"x must be a non-empty (n, D) array, got shape {data.shape}")
    labels = _labels(y, data.shape[0], k)
    sxx = np.zeros((data.shape[1], data.shape[1]))
    syx = np.zeros((k, data.shape[1]))
    for start in range(0, len(data), _BLOCK):
        block = data[start : start + _BLOCK].astype(np.float64)
        sxx += block.T @ block
        np.add.at(syx, labels[start : start + _BLOCK], block)
    values, vectors = np.linalg.eigh(sxx)
    keep = values > data.shape[1] * np.finfo(np.float64).eps * values.max()
    w_opt = (syx @ vectors[:, keep]) / values[keep] @ vectors[:, keep].T  # (K, D)
    predicted = np.concatenate([
        (data[start : start + _BLOCK].astype(np.float64) @ w_opt.T).argmax(1)
        for start in range(0, len(data), _BLOCK)
    ])  # fmt: skip
    return np.bincount(labels * k + predicted, minlength=k * k).reshape(k, k)


def most_confused_pair(confusion: object) -> tuple[int, int]:
    """The pair ``(a, b)``, ``a < b``, with the largest ``C[a, b] + C[b, a]`` of a square
    confusion matrix ``C``; ties to the smallest ``a``, then ``b`` (module docstring)."""
    c = np.asarray(confusion, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] != c.shape[1] or c.shape[0] < 2:
        raise ValueError(f"confusion must be a square matrix of at least 2 classes, got {c.shape}")
    mixed = np.triu(c + c.T, k=1)
    pairs = np.argwhere(np.triu(np.ones_like(c, dtype=bool), k=1))  # row-major: a, then b
    best = pairs[np.argmax(mixed[pairs[:, 0], pairs[:, 1]])]  # argmax: the first maximum
    return int(best[0]), int(best[1])


def dataset_confused_pair(
    name: str, data_dir: str | Path | None = None, **options: Any
) -> tuple[tuple[int, int], np.ndarray]:
    """The rule applied to a dataset: its whole training split (``options`` passed to
    :func:`~collapselab.data.load_dataset`), standardised per channel as paper 002's
    experiments standardise it (App. D.3), flattened. Returns the pair and ``C``."""
    train = load_dataset(name, data_dir=data_dir, **options).train
    x = Standardize().fit(train.x).apply(train.x.double())
    confusion = least_squares_confusion(x.reshape(len(x), -1).numpy(), train.y.numpy(),
                                        train.n_classes)  # fmt: skip
    return most_confused_pair(confusion), confusion
