r"""Learning curves on manipulated data (paper 002 §6): ``pcbias-amplification`` (Fig. 9,
PC amplification and the benefit of early stopping) and ``pcbias-separable`` (Fig. 11,
P-separable relabelling).

Both train ensembles of the MLP of ``pcbias-projections`` (and, for Fig. 9, its linear twin)
by minibatch SGD on cross-entropy (:class:`~collapselab.experiments.pcbias.projections.
MLPMember`) and keep the train and test accuracy after every epoch.

* Fig. 9: the top or the bottom 1.5% of the PCs (at least one) amplified by 10, then every
  channel renormalised (:class:`~collapselab.data.pca.PCAmplification`, fitted on the
  training inputs and applied to both splits), against the unmodified data; the early-stopping
  benefit :func:`~collapselab.metrics.pcbias.early_stopping_benefit` (peak minus final mean
  test accuracy) per condition.
* Fig. 11: labels replaced by those of a least-squares separator on the top ``P`` PCs
  (:class:`~collapselab.data.pca.SeparableRelabel`), starting from the true or from shuffled
  labels, for several ``P``; the first epoch at which the mean train accuracy reaches a
  level (:func:`~collapselab.metrics.pcbias.convergence_epoch`).

Stored: ``arrays/amplification.npz`` (``<kind>_<condition>_train``/``_test`` ``(N, E+1)``,
``benefit_<kind>_<condition>``) and ``arrays/separable.npz`` (``<labels>_P<p>_train``
``(N, E+1)``, ``pcs``, ``epoch_<labels>_P<p>``, ``changed_<labels>_P<p>`` the fraction of
training labels the relabelling changed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.experiments.pcbias._common import (
    data_variant,
    read_inputs,
    run_ensembles,
)
from collapselab.experiments.pcbias.presets import (
    AmplificationPreset,
    MLPPreset,
    SeparablePreset,
)
from collapselab.experiments.pcbias.projections import KINDS, MLPMember, member_fields
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pcbias import convergence_epoch, early_stopping_benefit
from collapselab.store import Run

__all__ = ["CONDITIONS", "LABELS", "LEVEL", "run_amplification", "run_separable"]

CONDITIONS = ("none", "top", "bottom")
LABELS = ("real", "shuffled")

LEVEL = 0.9
"""Train accuracy whose first crossing times the learning of a P-separable dataset."""


def _ensemble(preset: MLPPreset, context: RunContext, **fields: Any) -> list[MLPMember]:
    """An ensemble of ``preset``'s MLPs (``fields``: ``kind``, ``data``), scored on the
    plain test set only."""
    member = MLPMember.of(preset, discriminability=False, **member_fields(preset, context),
                          **fields)  # fmt: skip
    return member.ensemble(preset.members)


def run_amplification(run: Run, context: RunContext) -> None:
    """Natural, top- and bottom-amplified data, ReLU MLPs and linear twins."""
    preset: AmplificationPreset = context.config
    ensembles = {}
    for condition in CONDITIONS:
        amplify = {"fraction": preset.fraction, "factor": preset.factor, "which": condition}
        data = preset.data if condition == "none" else data_variant(preset.data, amplify=amplify)
        for kind in KINDS:
            ensembles[f"{kind}_{condition}"] = _ensemble(preset, context, kind=kind, data=data)
    with serial_threads():
        found = run_ensembles(ensembles, run, context, batched=preset.batched)
    arrays: dict[str, Any] = {"epochs": np.arange(preset.epochs + 1)}
    for label, results in found.items():
        test = np.stack([r["test_accuracy"] for r in results])
        arrays[f"{label}_train"] = np.stack([r["train_accuracy"] for r in results])
        arrays[f"{label}_test"] = test
        benefit, best = early_stopping_benefit(test.mean(0))
        arrays[f"benefit_{label}"] = np.float64(benefit)
        arrays[f"best_{label}"] = np.int64(best)
        run.log_dict(0, {"early_stopping_benefit": benefit, "best_epoch": float(best)},
                     split="amplification", layer=label)  # fmt: skip
    run.save_array("amplification", **arrays)
    run.flush()


def run_separable(run: Run, context: RunContext) -> None:
    """P-separable relabellings of the true and of shuffled labels, for every P."""
    preset: SeparablePreset = context.config
    data = {}
    for labels in LABELS:
        for p in preset.separable_pcs:
            shuffle = 1.0 if labels == "shuffled" else 0.0
            data[f"{labels}_P{p}"] = data_variant(preset.data, shuffle=shuffle, separable=p)
    ensembles = {label: _ensemble(preset, context, kind="nonlinear", data=spec)
                 for label, spec in data.items()}  # fmt: skip
    with serial_threads():
        found = run_ensembles(ensembles, run, context, batched=preset.batched)
        truth = read_inputs(preset.data, context.data_dir_text, context.seed).y
    arrays: dict[str, Any] = {"epochs": np.arange(preset.epochs + 1),
                              "pcs": np.asarray(preset.separable_pcs)}  # fmt: skip
    for label, results in found.items():
        train = np.stack([r["train_accuracy"] for r in results])
        arrays[f"{label}_train"] = train
        arrays[f"epoch_{label}"] = np.float64(convergence_epoch(train.mean(0), LEVEL, "above"))
        relabelled = read_inputs(data[label], context.data_dir_text, context.seed).y
        arrays[f"changed_{label}"] = np.float64(np.mean(relabelled != truth))
    run.save_array("separable", **arrays)
    run.flush()
