r"""``pcbias-convergence``: per-PC convergence of deep linear ensembles against the closed form
(paper 002 Fig. 2 left, Fig. 4a, Fig. 4c; note 002 §2.3, §3.6, §5 items 1-2).

An ensemble of deep linear networks (Def. 3 init) is trained by full-batch GD
(:mod:`~collapselab.experiments.pcbias.training`) on the natural data and on its ZCA-whitened
copy. At log-spaced checkpoints every member's compact matrix ``W̃^s`` (PC coordinates) is
kept; from them, per PC ``j`` (:mod:`collapselab.metrics.pcbias`): the across-member std
of the column ``w̃_j`` (norm of the per-entry stds, ddof 1) and the mean distance
``|W̃_{0j} − W̃^{opt}_{0j}|`` of row 0 (Fig. 4's "w_1"); and Eq. 10's predictions of both from
the members' own ``W̃^0``,
``corrected`` (``c = Σ α_l β_l``, exponent ``s``) and ``published`` (``c = L``, exponent
``s − 1``). The closed form's error is ``‖W̃^s_{pred} − W̃^s‖_F / ‖W̃^s − W̃^0‖_F`` per member
(the motion-relative error of :func:`~collapselab.theory.pcbias.verify_pcbias`).

Stored: ``arrays/natural.npz`` and ``arrays/whitened.npz`` (``steps``, ``eigenvalues``,
``std``, ``distance`` ``(S, q)``, their predictions ``std_<variant>``,
``distance_<variant>``, ``error_<variant>`` ``(N, S)``, ``factor_<variant>``, ``mu``,
``train_accuracy`` ``(N, S)``); rows of split ``natural`` / ``whitened`` (``loss``,
``train_accuracy``: ensemble means per checkpoint, ``step`` the GD step).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.experiments.pcbias._common import data_variant, run_ensembles, run_fields
from collapselab.experiments.pcbias.presets import ConvergencePreset
from collapselab.experiments.pcbias.training import GDMember, data_frame
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pcbias import pc_distance, pc_ensemble_std
from collapselab.store import Run
from collapselab.theory.pcbias import (
    VARIANTS,
    closed_form_columns,
    effective_factor,
)

__all__ = ["CONDITIONS", "ensemble_arrays", "run_convergence"]

CONDITIONS = ("natural", "whitened")


def ensemble_arrays(member: GDMember, results: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-PC curves of one ensemble (``member`` one of its members) and Eq. 10's
    predictions of them (module docstring)."""
    frame, _ = data_frame(member)
    sim = np.stack([r["w_pc"] for r in results], axis=1)  # (S, N, K, q)
    steps, mu = results[0]["steps"], float(results[0]["mu"])
    widths = member.widths(frame)
    w_opt = frame.optimum("corrected")
    motion = np.linalg.norm(sim - sim[:1], axis=(2, 3))  # (S, N)
    out: dict[str, Any] = {
        "steps": steps,
        "eigenvalues": frame.eigenvalues,
        "mu": np.float64(mu),
        "std": pc_ensemble_std(sim),
        "distance": pc_distance(sim, w_opt, row=0),
        "train_accuracy": np.stack([r["train_accuracy"] for r in results]),
        "loss": np.stack([r["loss"] for r in results]),
    }
    for variant in VARIANTS:
        c = effective_factor(widths, member.init, variant)
        pred = closed_form_columns(frame, sim[0], mu, c, steps, variant)
        with np.errstate(invalid="ignore", divide="ignore"):
            error = np.linalg.norm(pred - sim, axis=(2, 3)) / motion
        out[f"factor_{variant}"] = np.float64(c)
        out[f"error_{variant}"] = error.T  # (N, S); NaN at step 0 (no motion yet)
        # Eq. 10 is affine in W̃^0, so the metrics of the predicted trajectories are the
        # predicted metrics (std_j^s = |λ_j|^s std_j^0, the same for the distance)
        out[f"std_{variant}"] = pc_ensemble_std(pred)
        out[f"distance_{variant}"] = pc_distance(pred, w_opt, row=0)
    return out


def run_convergence(run: Run, context: RunContext) -> None:
    """Train the natural and the whitened ensembles; store their per-PC curves."""
    preset: ConvergencePreset = context.config
    data = {"natural": preset.data, "whitened": data_variant(preset.data, whiten=preset.zca_eps)}
    first = {condition: GDMember.of(preset, data=data[condition], init=preset.init,
                                    **run_fields(context))
             for condition in CONDITIONS}  # fmt: skip
    ensembles = {condition: member.ensemble(preset.members) for condition, member in first.items()}
    with serial_threads():
        found = run_ensembles(ensembles, run, context, batched=preset.batched)
    for condition in CONDITIONS:
        with serial_threads():
            arrays = ensemble_arrays(first[condition], found[condition])
        run.save_array(condition, **arrays)
        for i, step in enumerate(arrays["steps"]):
            means = {"loss": float(arrays["loss"][:, i].mean()),
                     "train_accuracy": float(arrays["train_accuracy"][:, i].mean())}  # fmt: skip
            run.log_dict(int(step), means, split=condition)
    run.flush()
