"""The zero-error epoch: when a network first classifies every training sample correctly.

The terminal phase of training (TPT; Papyan, Han & Donoho 2020, PNAS 117(40), §2) starts at
the epoch where the training error vanishes. This module is the one definition of that epoch,
used by the training loop, the Monitor, the store's manifest field, the claims and the
curvature experiments' terminal-phase record.

**Zero error** at an evaluation: the model-level accuracy ``a`` of ``argmax(model(x))`` over
the whole split is **exactly** ``1.0`` (:func:`reaches_zero_error`); no tolerance. An accuracy
is a ratio of integer counts, ``#correct / n`` or, class-weighted,
``sum_c pi_c correct_c / n_c``; it equals ``1.0`` in floating point exactly when every sample
is correct: with every sample correct each term is exact, and one wrong sample lowers the sum
by at least ``min_c pi_c / n_c``, far above its rounding error (about ``C 2^-53`` for ``C``
classes) for any data set with ``C^2 max_c n_c < 2^50``.

**The rows.** In a run's metric table the evaluations are the rows with ``metric =
"accuracy"``, ``layer = ""`` (model level), ``split = "train"`` (or the split asked for) and
an epoch ``>= 0`` (rows with ``NO_EPOCH = -1`` are not tied to an epoch and are ignored).
A run holds one value per ``(step, split, layer, metric)`` (:mod:`collapselab.store.row_keys`),
and in a run trained by :func:`collapselab.train.train` the training loop is the one writer of
these rows (every evaluated epoch; ``epoch = 0`` is the initial model).

**The epoch** (:func:`zero_error_epoch`) is an epoch number as the training loop counts them
(``1`` for the first epoch, ``0`` for the initial model), never a step:

* ``sustained=False`` (the start of the TPT as the papers mark it): the smallest epoch of a
  row with zero error;
* ``sustained=True`` (zero error *from then on*): the epoch of the first row, in step order,
  after the last row without zero error; the first row's epoch when every row has zero
  error. ``None`` when the last row is not at zero error.

Both are ``None`` when no row reaches zero error (or there is no row). Ties: two rows of one
epoch (a measurement within the epoch and the one at its end) count as that epoch; the step
orders them for ``sustained``. A resumed run holds exactly the rows of an uninterrupted one
(:meth:`collapselab.store.Run.truncate_after` drops the rows after the checkpoint), so both
definitions give the same epoch for the two.

:func:`first_zero_error` is the same rule for a loop that sees its evaluations one at a time
(the training loop, the Monitor).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

ACCURACY = "accuracy"
"""The metric whose model-level rows the zero-error epoch is read from."""

ZERO_ERROR_METRIC = "zero_error_epoch"
"""The row a Monitor writes once, at the measurement that found zero error (value: the epoch)."""


def reaches_zero_error(accuracy: float) -> bool:
    """Whether an accuracy means zero error: exactly ``1.0`` (module docstring)."""
    return float(accuracy) == 1.0


def first_zero_error(known: int | None, epoch: int, accuracy: float) -> int | None:
    """The zero-error epoch after one more evaluation, at the end of ``epoch``.

    ``known`` (the epoch found so far, or ``None``) is kept once set; otherwise ``epoch`` when
    ``accuracy`` is exactly ``1.0``. Fed the evaluations in order, this gives
    :func:`zero_error_epoch` ``(sustained=False)`` of their rows.
    """
    if known is not None or not reaches_zero_error(accuracy):
        return known
    return int(epoch)


def accuracy_rows(metrics: pd.DataFrame, split: str = "train") -> pd.DataFrame:
    """The model-level accuracy rows of ``split`` tied to an epoch, in step order (logging
    order within a step): the rows :func:`zero_error_epoch` reads."""
    rows = metrics[
        (metrics["metric"] == ACCURACY)
        & (metrics["split"] == split)
        & (metrics["layer"] == "")
        & (metrics["epoch"] >= 0)
    ]
    return rows.sort_values("step", kind="stable")


def zero_error_epoch(
    metrics: pd.DataFrame, split: str = "train", *, sustained: bool = False
) -> int | None:
    """The zero-error epoch of a metric table (module docstring for the exact definition).

    Args:
        metrics: a run's long-format metric table (``step, epoch, split, layer, metric,
            value``).
        split: the split whose accuracy is read (``"train"``; an mse_nc arm's rows use
            ``"<arm>/train"``).
        sustained: ``False``: the first epoch with zero error; ``True``: the first epoch from
            which every later evaluation has zero error.

    Returns:
        The epoch, or ``None`` when it is not reached (or the table has no such rows).
    """
    rows = accuracy_rows(metrics, split)
    epochs = rows["epoch"].to_numpy(dtype=np.int64)
    zero = rows["value"].to_numpy(dtype=np.float64) == 1.0  # reaches_zero_error, vectorised
    if not zero.any():
        return None
    if not sustained:
        return int(epochs[zero].min())
    if not zero[-1]:
        return None
    below = np.flatnonzero(~zero)
    return int(epochs[below[-1] + 1]) if below.size else int(epochs[0])
