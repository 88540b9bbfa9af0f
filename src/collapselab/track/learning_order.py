r"""Accessibility and learning-order constancy from runs tracked with the
``learning_order`` family (paper 002 §4, Figs. 6-7; note R15, R24-R25).

Each measurement of :class:`~collapselab.metrics.families.LearningOrder` stores the
per-example correctness ``c_i^e`` of one network at measurement ``e``
(``arrays/learning_order_step<step>.npz``). For an ensemble of ``N`` runs on the same data,

.. math::

    \mathrm{acc}(x_i) = \frac{1}{N E} \sum_{r=1}^{N} \sum_{e=1}^{E} c_{i}^{r,e}

(:func:`collapselab.metrics.pc_bias.accessibility`, with per-measurement weights when the
measurements are not evenly spaced); LOC is the correlation of the accessibilities of two
independent ensembles (:func:`collapselab.metrics.pc_bias.loc_correlation`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from collapselab.metrics.pc_bias import accessibility
from collapselab.store import Run
from collapselab.track.measurements import ensemble_runs, measurement_arrays


def correctness_from_run(
    run: Run | str | os.PathLike[str], split: str = "train"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(steps (E,), correct (E, n), labels (n,))`` of one tracked run's ``split``, in step
    order. Raises when the run has no ``learning_order`` measurement of ``split`` or when
    the examples came in a different order at two measurements (a shuffling loader)."""
    run = run if isinstance(run, Run) else Run.open(run)
    loaded = [a for a in measurement_arrays(run, "learning_order") if f"correct_{split}" in a]
    if not loaded:
        raise ValueError(
            f"run {run.path} has no learning_order measurement of split {split!r}: track it "
            "with Monitor(families=[..., 'learning_order'])"
        )
    labels = loaded[0][f"labels_{split}"]
    for arrays in loaded[1:]:
        if not np.array_equal(arrays[f"labels_{split}"], labels):
            raise ValueError(
                f"run {run.path}: the {split!r} examples came in a different order at step "
                f"{int(arrays['step'])} than at step {int(loaded[0]['step'])}; accessibility "
                "needs a loader that keeps its order (shuffle=False)"
            )
    steps = np.array([int(a["step"]) for a in loaded])
    correct = np.stack([a[f"correct_{split}"] for a in loaded]).astype(np.float64)
    return steps, correct, labels


def accessibility_from_runs(
    runs: Sequence[Run | str | os.PathLike[str]],
    split: str = "train",
    weights: object | None = None,
) -> np.ndarray:
    """Accessibility ``(n,)`` of every example over an ensemble of tracked runs (module
    docstring). The runs must hold the same measurement steps and the same examples in the
    same order; ``weights`` ``(E,)``: what each measurement stands for
    (:func:`collapselab.metrics.pc_bias.checkpoint_weights`), default equal."""
    runs = ensemble_runs(runs)
    first_steps, first, labels = correctness_from_run(runs[0], split)
    stack = [first]
    for run in runs[1:]:
        steps, correct, other = correctness_from_run(run, split)
        if not np.array_equal(steps, first_steps) or not np.array_equal(other, labels):
            raise ValueError(
                f"the runs of an ensemble must measure the same steps on the same examples: "
                f"{run.path} has steps {steps.tolist()} and {other.size} examples, the first "
                f"run {first_steps.tolist()} and {labels.size}"
            )
        stack.append(correct)
    return accessibility(np.stack(stack), weights)


__all__ = ["accessibility_from_runs", "correctness_from_run"]
