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
from collapselab.experiments.claims import Claim, Erratum, NotEvaluable, RunResults
from collapselab.experiments.pcbias._common import member_base, run_ensembles, verdict, whitened
from collapselab.experiments.pcbias.training import data_frame, deep_linear_member
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pcbias import pc_distance, pc_ensemble_std
from collapselab.store import Run
from collapselab.theory.pcbias import (
    VARIANTS,
    closed_form_columns,
    effective_factor,
)

__all__ = ["CONDITIONS", "CONVERGENCE_CLAIMS", "FOLLOWS", "ensemble_arrays", "run_convergence"]

CONDITIONS = ("natural", "whitened")

FOLLOWS = 0.2
"""Largest motion-relative error of the corrected closed form, mean over members, at which
it follows GD (note 002 §3.6: 0.05 at step 10 to 0.19 at step 400 for Def. 3, q = 20,
width 512, L = 3)."""

FLAT = 2.0
"""Largest ratio of the 90th to the 10th percentile over PCs of ``std_j^s / std_j^0`` at
which the per-PC convergence counts as flat (Fig. 4c)."""

SPREAD = 10.0
"""Smallest such ratio at which it counts as PC-biased (Fig. 4a)."""


def ensemble_arrays(config: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-PC curves of one ensemble and Eq. 10's predictions of them (module
    docstring)."""
    frame, _ = data_frame(config)
    sim = np.stack([r["w_pc"] for r in results], axis=1)  # (S, N, K, q)
    steps, mu = results[0]["steps"], float(results[0]["mu"])
    widths = [frame.n_pcs, *[int(w) for w in config["hidden"]], frame.n_outputs]
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
        c = effective_factor(widths, str(config["init"]), variant)
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
    c = context.config
    base = member_base(context)
    spec = c["datasets"]["main"]
    ensembles = {
        condition: {**base, "datasets": {"main": spec if condition == "natural"
                                         else whitened(spec, float(c["zca_eps"]))}}
        for condition in CONDITIONS
    }  # fmt: skip
    with serial_threads():
        found = run_ensembles(deep_linear_member, ensembles, run, context)
    for condition in CONDITIONS:
        with serial_threads():
            arrays = ensemble_arrays(ensembles[condition], found[condition])
        run.save_array(condition, **arrays)
        for i, step in enumerate(arrays["steps"]):
            means = {"loss": float(arrays["loss"][:, i].mean()),
                     "train_accuracy": float(arrays["train_accuracy"][:, i].mean())}  # fmt: skip
            run.log_dict(int(step), means, split=condition)
    run.flush()


# ---------------------------------------------------------------------------------------
# claims


def _moving(eigenvalues: np.ndarray) -> np.ndarray:
    """PCs with a non-zero eigenvalue (the others never move)."""
    return eigenvalues > 0


def _follows(condition: str):
    def evaluate(results: RunResults):
        error = results.array(condition, "error_corrected")[:, 1:]
        steps = results.array(condition, "steps")[1:]
        mean = np.nanmean(error, axis=0)
        worst = int(np.nanargmax(mean))
        values = {
            "max_error": float(mean[worst]),
            "at_step": float(steps[worst]),
            "first_error": float(mean[0]),
            "last_error": float(mean[-1]),
            "factor": float(results.array(condition, "factor_corrected")),
        }
        detail = (
            f"{condition} data: motion-relative error of Eq. 10 (c = Σα_lβ_l = "
            f"{values['factor']:.4g}) mean over {error.shape[0]} members: {mean[0]:.3g} at step "
            f"{steps[0]}, {mean[-1]:.3g} at step {steps[-1]}, largest {mean[worst]:.3g} at "
            f"step {steps[worst]} (<= {FOLLOWS:g})"
        )
        return verdict(mean[worst] <= FOLLOWS, values, FOLLOWS, detail)

    return evaluate


def decay_ratios(results: RunResults, condition: str) -> tuple[np.ndarray, int, np.ndarray]:
    """``std_j^s / std_j^0`` of the moving PCs at the checkpoint where the median ratio first
    falls to 0.1 (the last checkpoint when it never does), that step, and the eigenvalues."""
    std = results.array(condition, "std")
    d = results.array(condition, "eigenvalues")
    steps = results.array(condition, "steps")
    keep = _moving(d)
    ratios = std[:, keep] / std[0, keep]
    reached = np.flatnonzero(np.median(ratios, axis=1) <= 0.1)
    at = int(reached[0]) if reached.size else len(steps) - 1
    if at == 0:
        raise NotEvaluable("no checkpoint after step 0")
    return ratios[at], int(steps[at]), d[keep]


def _spread(ratios: np.ndarray) -> float:
    low, high = np.percentile(ratios, [10, 90])
    return float(high / low) if low > 0 else float("inf")


def _flat(results: RunResults):
    ratios, step, _ = decay_ratios(results, "whitened")
    spread = _spread(ratios)
    detail = (
        f"whitened data at step {step}: std_j^s/std_j^0 over {ratios.size} PCs from "
        f"{ratios.min():.3g} to {ratios.max():.3g}; 90th/10th percentile {spread:.3g} "
        f"(<= {FLAT:g})"
    )
    return verdict(
        spread <= FLAT,
        {"spread": spread, "step": float(step), "median": float(np.median(ratios))},
        FLAT,
        detail,
    )


def _biased(results: RunResults):
    from scipy import stats

    ratios, step, d = decay_ratios(results, "natural")
    spread = _spread(ratios)
    rho = float(stats.spearmanr(d, ratios).statistic)
    ok = spread >= SPREAD and rho <= -0.8
    detail = (
        f"natural data at step {step}: std_j^s/std_j^0 from {ratios.min():.3g} (top PCs) to "
        f"{ratios.max():.3g}; 90th/10th percentile {spread:.3g} (>= {SPREAD:g}); Spearman "
        f"with d_j {rho:.3g} (<= -0.8: larger eigenvalue, faster)"
    )
    return verdict(ok, {"spread": spread, "spearman": rho, "step": float(step)}, SPREAD, detail)


def _whitening_drops_spread(results: RunResults):
    natural = _spread(decay_ratios(results, "natural")[0])
    white = _spread(decay_ratios(results, "whitened")[0])
    detail = (
        f"90th/10th percentile of std_j^s/std_j^0: natural {natural:.3g}, whitened {white:.3g} "
        f"(whitened <= natural / {SPREAD:g})"
    )
    ok = white <= natural / SPREAD
    return verdict(ok, {"natural": natural, "whitened": white}, SPREAD, detail)


def _printed_first_step(results: RunResults):
    error = results.array("natural", "error_published")[:, 1]
    step = int(results.array("natural", "steps")[1])
    mean = float(np.mean(error))
    detail = (
        f"Eq. 10 as printed (c = L, exponent s − 1) at step {step}: motion-relative error "
        f"{mean:.3g} mean over {error.size} members (<= {FOLLOWS:g} would follow GD)"
    )
    return verdict(mean <= FOLLOWS, {"error": mean, "step": float(step)}, FOLLOWS, detail)


_SOURCE = "002 §2.3, Eqs. 4 and 10"

CONVERGENCE_CLAIMS: list[Claim] = [
    Claim(
        "closed-form-follows-gd",
        "Eq. 10: with Def. 3 init and wide layers, each PC column of the compact matrix "
        "converges geometrically with ratio λ_j = 1 − μ c d_j (note: within 0.05-0.19 for "
        "q = 20, width 512, L = 3).",
        _SOURCE + "; note 002 §3.6",
        f"largest motion-relative error of the corrected Eq. 10, mean over members, over the "
        f"checkpoints <= {FOLLOWS:g} (natural data)",
        _follows("natural"),
    ),
    Claim(
        "closed-form-follows-gd-whitened",
        "Eq. 10 holds on whitened data too (there all d_j are equal).",
        _SOURCE + ", Fig. 4c",
        f"same as closed-form-follows-gd on the ZCA-whitened data (<= {FOLLOWS:g})",
        _follows("whitened"),
    ),
    Claim(
        "top-pcs-converge-first",
        "Figs. 2 and 4a: the across-model std (and the distance to the optimum) shrinks first "
        "along the leading principal components.",
        "002 §3.2, Figs. 2 and 4a",
        f"at the checkpoint where the median std_j^s/std_j^0 first reaches 0.1 (else the last): "
        f"90th/10th percentile over PCs >= {SPREAD:g} and Spearman(d_j, ratio) <= -0.8",
        _biased,
    ),
    Claim(
        "whitening-flattens-convergence",
        "Fig. 4c: after ZCA whitening all PCs converge alike (the PC-bias disappears).",
        "002 §3.2, Fig. 4c",
        f"whitened: 90th/10th percentile of std_j^s/std_j^0 over PCs <= {FLAT:g}",
        _flat,
    ),
    Claim(
        "whitening-drops-the-spread",
        "Whitening removes the per-PC differences of the convergence rate.",
        "002 §3.2, Figs. 4a vs 4c",
        f"spread (90th/10th percentile) whitened <= natural / {SPREAD:g}",
        _whitening_drops_spread,
    ),
    Claim(
        "printed-eq10-at-step-one",
        "Eq. 10 as printed, w^{s+1} = λ^s w^0 + (1 − λ^s) w_opt with c = L, follows GD "
        "(erratum: the exponent is shifted by one, note 002 §7 item 2; at step 1 it predicts "
        "no motion).",
        _SOURCE + "; note 002 §7 item 2",
        f"motion-relative error of the printed Eq. 10 at the first checkpoint after 0 <= "
        f"{FOLLOWS:g}",
        _printed_first_step,
        erratum=Erratum(),
    ),
]
"""The claims of ``pcbias-convergence``."""
