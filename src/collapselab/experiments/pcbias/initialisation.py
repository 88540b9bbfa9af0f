r"""``pcbias-init``: Def. 3 against Glorot uniform for a wide one-hidden-layer linear net
(paper 002 Fig. 12, Def. 3, §3.6 of note 002 on the effective factor).

Two ensembles of the same two-layer linear network (one very wide hidden layer) are trained by
full-batch GD (:mod:`~collapselab.experiments.pcbias.training`) at the same step
``μ = lr / (L d_1)``: one initialised by Def. 3, one by Glorot uniform (the paper's
experiments). Their train and test accuracy curves are Fig. 12. Each ensemble is also held
against Eq. 10 with the effective factor ``c = Σ_l α_l β_l`` (``corrected``, Thm 3 at these
widths) and with the paper's ``c = L`` (``published``; both with the exponent ``s``, so only
the factor differs): under Def. 3 the two agree; under Glorot ``c ≠ L``.

The networks are the theory's own (linear, squared loss ``½‖W X − Y‖²``, exact full-batch
GD, no biases), so Eq. 10 predicts their learning curves too: the loss of note 002 §2.3
(``L(s) = L* + ½ Σ_j d_j λ_j^{2s} ‖w̃_j^0 − m_j/d_j‖²``,
:func:`~collapselab.theory.pcbias.predicted_loss`) and the accuracy of the predicted
compact matrix, both from each network's own initial weights; Fig. 12 draws them over the
measured curves (with ``c = Σ α_l β_l``).

The paper itself (App. C.1/D) trained its Fig. 12 networks otherwise: cross-entropy SGD, 0.5
dropout before the output layer, the learning rate grid-searched per initialisation. So each
initialisation is also trained that way (issue 35 item 4;
:mod:`~collapselab.experiments.pcbias.linear_sgd`): one network per rate of the preset's
``sgd_rates`` (one seed, ``seed + 1``, for the whole grid, so that the rates see the same
initial weights), the rate with the smallest test error after ``sgd_epochs`` chosen
(:func:`~collapselab.experiments.pcbias.linear_sgd.select_rate`), then an ensemble of
``members`` networks at that rate. Fig. 12's claims read these; the GD ensembles at one
``μ`` are the closed-form runs and the labelled equal-step controls (where the project's
own theory predicts Glorot is faster: its ``c = Σ α_l β_l`` exceeds Def. 3's ``L``).

Stored: ``arrays/<init>.npz`` for ``init`` in ``def3``, ``glorot_uniform`` (``steps``,
``train_accuracy``/``test_accuracy``/``loss`` ``(N, S)``, ``factor_<variant>``,
``error_<variant>`` ``(N, S)`` motion-relative errors, ``predicted_loss_<variant>``,
``predicted_train_accuracy_<variant>``, ``predicted_test_accuracy_<variant>`` ``(N, S)``
the curves Eq. 10 predicts; runs stored before those draw the measured curves alone); rows
of split ``<init>`` (ensemble-mean ``train_accuracy``, ``test_accuracy``, ``loss``);
``arrays/sgd_<init>.npz`` (``steps``, ``train_accuracy``/``test_accuracy``/``train_loss``
``(N, S)``, the grid ``rates``, their test ``errors`` and the ``chosen`` rate), rows of split
``sgd_<init>`` (ensemble-mean ``train_accuracy``, ``test_accuracy``, ``loss``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.experiments.pcbias._common import run_ensemble, run_ensembles, run_fields
from collapselab.experiments.pcbias.linear_sgd import LinearSGDMember, select_rate
from collapselab.experiments.pcbias.presets import INITS, InitPreset
from collapselab.experiments.pcbias.training import GDMember, classified_correctly, data_frame
from collapselab.experiments.registry import RunContext
from collapselab.store import Run
from collapselab.theory.pcbias import (
    VARIANTS,
    closed_form_columns,
    effective_factor,
    predicted_loss,
)

__all__ = ["run_init"]


def _accuracies(x_pc: np.ndarray, y: np.ndarray, w_pc: np.ndarray) -> np.ndarray:
    """Accuracy ``(N, S)`` of the compact matrices ``w_pc`` ``(S, N, K, q)`` on ``x_pc``."""
    return np.array([[np.mean(classified_correctly(x_pc, y, w)) for w in step] for step in w_pc]).T


def _factor_errors(member: GDMember, results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per factor variant: Eq. 10's motion-relative error, the factor, and the curves Eq. 10
    predicts from each member's initial weights (exponent ``s``): the loss (Eq. 5,
    :func:`~collapselab.theory.pcbias.predicted_loss`) and the train and test accuracy of
    the predicted compact matrix, ``(N, S)`` each."""
    frame, inputs = data_frame(member)
    sim = np.stack([r["w_pc"] for r in results], axis=1)  # (S, N, K, q)
    steps, mu = results[0]["steps"], float(results[0]["mu"])
    widths = member.widths(frame)
    motion = np.linalg.norm(sim - sim[:1], axis=(2, 3))
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        c = effective_factor(widths, member.init, variant)
        pred = closed_form_columns(frame, sim[0], mu, c, steps, "corrected")
        with np.errstate(invalid="ignore", divide="ignore"):
            out[f"error_{variant}"] = (np.linalg.norm(pred - sim, axis=(2, 3)) / motion).T
        out[f"factor_{variant}"] = np.float64(c)
        loss = predicted_loss(frame, sim[0], mu, c, steps, "corrected")  # (S, N)
        out[f"predicted_loss_{variant}"] = loss.T
        for split, x, y in (("train", inputs.x, inputs.y), ("test", inputs.x_test, inputs.y_test)):
            out[f"predicted_{split}_accuracy_{variant}"] = _accuracies(x @ frame.basis, y, pred)
    return out


def run_init(run: Run, context: RunContext) -> None:
    """Train the Def. 3 and the Glorot ensembles; store curves and closed-form errors."""
    preset: InitPreset = context.config
    first = {init: GDMember.of(preset, init=init, **run_fields(context)) for init in preset.inits}
    ensembles = {init: member.ensemble(preset.members) for init, member in first.items()}
    with serial_threads():
        found = run_ensembles(ensembles, run, context, batched=preset.batched)
    for init in preset.inits:
        results = found[init]
        arrays: dict[str, Any] = {"steps": results[0]["steps"]}
        for key in ("train_accuracy", "test_accuracy", "loss"):
            arrays[key] = np.stack([r[key] for r in results])
        with serial_threads():
            arrays |= _factor_errors(first[init], results)
        run.save_array(init, **arrays)
        for i, step in enumerate(arrays["steps"]):
            means = {k: float(arrays[k][:, i].mean())
                     for k in ("train_accuracy", "test_accuracy", "loss")}  # fmt: skip
            run.log_dict(int(step), means, split=init)
    run.flush()
    _run_sgd(preset, run, context)


def _sgd_member(
    preset: InitPreset, context: RunContext, init: str, lr: float, **fields: Any
) -> LinearSGDMember:
    """Member 0 of an ensemble trained by the paper's protocol with ``init`` at rate ``lr``;
    ``fields``: its ``seed`` in place of the run's, ``allow_divergence``."""
    return LinearSGDMember(
        data=preset.data, hidden=preset.hidden, init=init, dropout=preset.sgd_dropout, lr=lr,
        batch_size=preset.sgd_batch_size, epochs=preset.sgd_epochs,
        checkpoints=preset.sgd_checkpoints, **{**run_fields(context), **fields},
    )  # fmt: skip


def _run_sgd(preset: InitPreset, run: Run, context: RunContext) -> None:
    """Per initialisation: the rate search, then an ensemble at the chosen rate (module
    docstring); stores ``arrays/sgd_<init>.npz`` and the rows of split ``sgd_<init>``."""
    rates = preset.sgd_rates
    probes = [_sgd_member(preset, context, init, rate, seed=context.seed + 1,
                          allow_divergence=True)
              for init in INITS for rate in rates]  # fmt: skip
    with serial_threads():
        searched = run_ensemble(probes, run, context, "sgd_rates", batched=preset.batched)
    chosen, errors = {}, {}
    for i, init in enumerate(INITS):
        errors[init] = np.array(
            [r["test_error"] for r in searched[i * len(rates) : (i + 1) * len(rates)]]
        )
        chosen[init] = select_rate(rates, errors[init])
    first = [_sgd_member(preset, context, init, chosen[init]) for init in INITS]
    members = [m for member in first for m in member.ensemble(preset.members)]
    with serial_threads():
        found = run_ensemble(members, run, context, "sgd", batched=preset.batched)
    for i, init in enumerate(INITS):
        results = found[i * preset.members : (i + 1) * preset.members]
        arrays: dict[str, Any] = {
            "steps": results[0]["steps"], "rates": np.asarray(rates, dtype=np.float64),
            "errors": errors[init], "chosen": np.float64(chosen[init]),
        }  # fmt: skip
        for key in ("train_accuracy", "test_accuracy", "train_loss"):
            arrays[key] = np.stack([r[key] for r in results])
        run.save_array(f"sgd_{init}", **arrays)
        for j, step in enumerate(arrays["steps"]):
            means = {"train_accuracy": float(arrays["train_accuracy"][:, j].mean()),
                     "test_accuracy": float(arrays["test_accuracy"][:, j].mean()),
                     "loss": float(arrays["train_loss"][:, j].mean())}  # fmt: skip
            run.log_dict(int(step), means, split=f"sgd_{init}")
    run.flush()
