r"""The learning-order family: which examples the model classifies correctly at every
measurement, for accessibility and learning-order constancy from a tracked run (paper 002
§6, Fig. 6-7; note R15, R24).

A model procedure (``Needs(model=True)``): at each measurement it runs the model (eval
mode) over every split's loader, in the loader's order, and records the per-example
correctness

.. math::

    c_i = \mathbf 1[\arg\max_c f(x_i)_c = y_i] ,

as an array handed to the Monitor (:meth:`LearningOrder.take_arrays`:
``arrays/learning_order_step<step>.npz``, keys ``correct_<split>`` and ``labels_<split>``),
and the key ``correct_fraction``, the mean of ``c`` over the split. Accessibility, the mean
of ``c_i`` over the measurements and the networks of an ensemble
(:func:`collapselab.metrics.pcbias.accessibility`), and LOC between two ensembles
(:func:`collapselab.metrics.pcbias.loc_correlation`) are then computed from the stored
runs by :func:`collapselab.track.accessibility_from_runs`.

The loaders must yield the examples in the same order at every measurement (no shuffling):
the labels are stored with the correctness so that a reader can check it. The pass is one
forward pass per split besides the Monitor's own data pass.

Distributed mode ``"rank0"``: under ``torch.distributed`` every process runs the forward
pass over its own shard and rank 0 gathers the per-example correctness of every process in
the global data order (:func:`~collapselab.families.processes.global_order`: dataset
indices under a ``DistributedSampler``, else the shards rank by rank), so its arrays and
``correct_fraction`` are one process's on the whole data; the other processes receive the
values (the arrays, written by rank 0, stay there).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from collapselab.families.arrays import ensemble_runs, measurement_arrays
from collapselab.families.family import MODEL_LAYER, Family, Key, ModelAccess, Needs
from collapselab.families.processes import Processes, global_order, in_global_order
from collapselab.metrics.pcbias import accessibility
from collapselab.probe.inputs import model_inputs
from collapselab.store import Run

_SOURCE = "002 §6, Figs. 6-7: accessibility (Hacohen et al. 2020), note R15/R24"

KEYS = ("correct_fraction",)


class LearningOrder(Family):
    """Per-example correctness of the model's argmax decisions at every measurement.

    Args:
        keys: ``["correct_fraction"]`` (the only key; the arrays are its point).
        schedule: when the Monitor measures this family (a
            :class:`collapselab.track.Schedule`; default: the Monitor's schedule).
    """

    name = "learning_order"
    distributed = "rank0"
    keys = (
        Key(
            "correct_fraction",
            "mean over the split's examples of 1[argmax_c f(x)_c = y]; the per-example "
            "vector goes to arrays (correct_<split>, labels_<split>)",
            _SOURCE,
            Needs(model=True),
            where="model",
        ),
    )

    def __init__(
        self, keys: list[str] | tuple[str, ...] | None = None, *, schedule: Any = None
    ) -> None:
        super().__init__(keys, schedule=schedule)
        self._arrays: dict[str, np.ndarray] = {}

    def compute_model(
        self, keys: frozenset[str], access: ModelAccess
    ) -> dict[str, dict[str, dict[str, float]]]:
        self._arrays = {}
        out: dict[str, dict[str, dict[str, float]]] = {}
        for split, loader in access.data.items():
            correct, labels = example_correctness(access.model, loader, access.device)
            if access.processes.active:
                gathered = _on_rank0(loader, access.processes, correct, labels)
                if gathered is None:
                    continue  # not rank 0: the Monitor hands this process rank 0's values
                correct, labels = gathered
            self._arrays[f"correct_{split}"] = correct
            self._arrays[f"labels_{split}"] = labels
            out[split] = {MODEL_LAYER: {"correct_fraction": float(correct.mean())}}
        return out

    def take_arrays(self) -> dict[str, Any]:
        arrays, self._arrays = self._arrays, {}
        return arrays


def example_correctness(
    model: torch.nn.Module, loader: Any, device: torch.device | str = "cpu"
) -> tuple[np.ndarray, np.ndarray]:
    """``(correct, labels)``: ``uint8`` ``(n,)`` with ``1[argmax f(x) = y]`` and the integer
    labels ``(n,)``, over ``loader``'s ``(x, y, ...)`` batches in order (the model as it is:
    the Monitor puts it in eval mode; floating inputs in an ``nn.Module``'s dtype, as the
    Monitor's data pass gives them). The outputs must be ``(batch, K)`` logits."""
    correct, labels = [], []
    with torch.no_grad():
        for batch in loader:
            x, y = batch[0].to(device), batch[1].to(device)
            if isinstance(model, torch.nn.Module):
                x = model_inputs(model, x, device)
            out = model(x)
            if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != y.shape[0]:
                got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                raise ValueError(
                    f"learning_order needs the model's outputs as (batch, K) logits for a "
                    f"batch of {y.shape[0]}, got {got}"
                )
            correct.append((out.argmax(dim=1) == y).to(torch.uint8).cpu())
            labels.append(y.cpu())
    if not correct:
        raise ValueError("learning_order: the data loader yielded no batch")
    return torch.cat(correct).numpy(), torch.cat(labels).numpy().astype(np.int64)


def _on_rank0(
    loader: Any, processes: Processes, correct: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Every process's ``(correct, labels)`` on rank 0, in the global data order (``None``
    on the other processes)."""
    order = global_order(loader, processes)
    keys = [order(i) for i in range(correct.size)]
    parts = processes.gather((keys, list(zip(correct.tolist(), labels.tolist(), strict=True))))
    if parts is None:
        return None
    pairs = in_global_order(parts)
    return (
        np.array([c for c, _ in pairs], dtype=np.uint8),
        np.array([y for _, y in pairs], dtype=np.int64),
    )


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
    (:func:`collapselab.metrics.pcbias.checkpoint_weights`), default equal."""
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
