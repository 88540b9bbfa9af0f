"""Numerical checks of paper 001's Theorems 1-4 (§III) on random and solved instances.

* **Theorem 1** (PFC1 decreases along the straight line when ``S >= 0``): Monte-Carlo over
  random starts and collapsed simplex-ETF end points of random scale
  (:func:`collapselab.theory.geodesic.theorem1_monte_carlo`). Beyond the paper: since
  ``dPFC1/dt(0)`` has the sign of ``-S`` (Appendix A), curves with ``S < 0`` rise at first.
* **Theorem 2** (PFC2 decreases near the end point): starts at growing distances ε from an
  exact ETF (:func:`~collapselab.theory.geodesic.theorem2_study`); the statement is local
  (note §3.3): monotone on some final interval always, on the whole line for small ε.
* **Theorem 3** (the multilayer MUFM Eq. 12 reduces to Eq. 13 with equally spaced layers):
  Eq. 12 solved directly with all L layers free, compared with the published reduction
  (coefficient λ) and the corrected one (λ/L, note §3.5 erratum)
  (:func:`~collapselab.theory.ufm.verify_theorem3`). The multilayer λ is ``L`` times the
  configured ``lam`` so that the corrected reduction is the Fig. 4 MUFM.
* **Theorem 4 / Lemma 1**: along the gradient flow Eq. 21 from X, ``Tr Σ_W`` decreases and
  ``Tr Σ_B`` increases; for large λ the MUFM minimiser ``H_{1/λ}`` is the flow at
  ``t = 1/λ`` up to a relative error O(1/λ), and is more collapsed than X
  (:func:`~collapselab.theory.ufm.gradient_flow`).

Results: rows with ``split="theory"`` and ``layer`` naming the theorem, and
``arrays/theorem1.npz`` ... ``arrays/theorem4.npz``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.experiments.claims import Claim, ClaimResult, Erratum, RunResults
from collapselab.experiments.pfc._common import row_value
from collapselab.experiments.pfc.mufm import mufm_data
from collapselab.experiments.registry import RunContext
from collapselab.store import Run
from collapselab.theory.geodesic import theorem1_monte_carlo, theorem2_study
from collapselab.theory.ufm import (
    column_pfc,
    gradient_flow,
    mufm_model,
    solve_converged,
    verify_theorem3,
)

__all__ = ["SAME_SOLUTION", "THEOREM_CLAIMS", "run_theorems"]

SPLIT = "theory"

SAME_SOLUTION = 1e-3
"""Relative feature error below which two solved instances are the same optimum (three
digits; the solvers stop at gradient norm 1e-10 on objectives of order 1e-3, and the MUFM
objective is flat in some directions)."""

SPACING = 1e-4
"""Theorem 3's equal spacing: ``max_l ||Δ_l - Δ̄||_F / ||Δ̄||_F`` at most this."""

OBJECTIVE_GAP = 1e-8
"""Relative gap between optimal objective values that counts as equal."""

FLOW_RATIO = (1.5, 2.5)
"""Theorem 4 is first order in 1/λ: doubling λ must divide the relative error by about 2."""


def _log(run: Run, layer: str, values: dict[str, float]) -> None:
    run.log_dict(0, values, split=SPLIT, layer=layer)


def run_theorems(run: Run, context: RunContext) -> None:
    """Run the four checks and record their numbers."""
    c = context.config
    seed = context.seed
    with serial_threads():
        with context.progress.task("Theorem 1", int(c["t1_trials"]), "trials") as progress:
            t1 = theorem1_monte_carlo(
                int(c["t1_trials"]),
                n_classes=int(c["t1_classes"]),
                dim=int(c["t1_dim"]),
                n_per_class=int(c["t1_per_class"]),
                seed=seed,
                progress=progress,
            )
        run.save_array("theorem1", s=t1.s, monotone=t1.monotone, max_rise=t1.max_rise, ts=t1.ts)
        _log(
            run,
            "theorem1",
            {
                "n_trials": float(t1.s.size),
                "n_s_nonnegative": float(t1.n_s_nonnegative),
                "fraction_monotone_given_s_nonnegative": t1.fraction_monotone_given_s_nonnegative,
                "n_s_negative": float(t1.n_s_negative),
                "fraction_nonmonotone_given_s_negative": t1.fraction_nonmonotone_given_s_negative,
            },
        )
        t2_total = len(c["t2_scales"]) * int(c["t2_trials"])
        with context.progress.task("Theorem 2", t2_total, "trials") as progress:
            t2 = theorem2_study(
                tuple(c["t2_scales"]),
                int(c["t2_trials"]),
                n_classes=int(c["t1_classes"]),
                dim=int(c["t1_dim"]),
                seed=seed,
                progress=progress,
            )
        run.save_array(
            "theorem2",
            scales=t2.scales,
            transport_cost=t2.transport_cost,
            monotone=t2.monotone,
            monotone_interval=t2.monotone_interval,
            fraction_monotone=t2.fraction_monotone,
            min_monotone_interval=t2.min_monotone_interval,
            curvature=t2.curvature,
        )
        X, y = mufm_data(c, seed)
        lambda_w, lam, big_l = float(c["lambda_w"]), float(c["lam"]), int(c["t3_layers"])
        t3 = verify_theorem3(
            mufm_model(X, y, lambda_w, lam * big_l, n_layers=big_l), tol=float(c["tol"]), seed=seed
        )
        _log(
            run,
            "theorem3",
            {
                "n_layers": float(t3.n_layers),
                "spacing_error": t3.spacing_error,
                "corrected_feature_error": t3.corrected_feature_error,
                "published_feature_error": t3.published_feature_error,
                "corrected_objective_gap": t3.corrected_objective_gap,
                "published_objective_gap": t3.published_objective_gap,
                "max_grad_norm": float(max(t3.grad_norms)),
            },
        )
        _theorem4(run, c, X, y)
    run.flush()


def _theorem4(run: Run, c: dict[str, Any], X: np.ndarray, y: np.ndarray) -> None:
    lambda_w = float(c["lambda_w"])
    ts = np.linspace(0.0, float(c["t4_flow_end"]), int(c["t4_flow_points"]))
    flow = gradient_flow(mufm_model(X, y, lambda_w, 1.0), ts)
    lambdas = np.asarray(c["t4_lambdas"], dtype=np.float64)
    errors, pfc1 = [], []
    for lam in lambdas:
        problem = mufm_model(X, y, lambda_w, float(lam))
        solution = solve_converged(problem, tol=float(c["tol"]))
        at = gradient_flow(problem, [1.0 / lam]).H[-1]
        errors.append(np.linalg.norm(solution.H - at) / np.linalg.norm(solution.H - X))
        pfc1.append(column_pfc(solution.H, y)["nc1_trace_ratio"])
    run.save_array(
        "theorem4",
        ts=ts,
        trace_within=flow.trace_within,
        trace_between=flow.trace_between,
        pfc1=flow.pfc1,
        lambdas=lambdas,
        relative_error=np.asarray(errors),
        minimiser_pfc1=np.asarray(pfc1),
        data_pfc1=np.float64(column_pfc(X, y)["nc1_trace_ratio"]),
    )
    _log(
        run,
        "theorem4",
        {
            "data_pfc1": column_pfc(X, y)["nc1_trace_ratio"],
            "flow_end_pfc1": float(flow.pfc1[-1]),
            "largest_lambda_relative_error": float(errors[-1]),
        },
    )


# ---------------------------------------------------------------------------------------
# claims


def _verdict(ok: bool) -> str:
    return "holds" if ok else "does not hold"


def _theorem1(results: RunResults) -> ClaimResult:
    n = row_value(results, "n_s_nonnegative", "theorem1", SPLIT)
    frac = row_value(results, "fraction_monotone_given_s_nonnegative", "theorem1", SPLIT)
    ok = frac >= 1.0
    detail = f"PFC1 monotone in {frac:.4%} of the {n:g} random instances with S >= 0 (need all)"
    return ClaimResult(_verdict(ok), {"fraction": frac, "n": n}, 1.0, detail)


def _theorem2_small(results: RunResults) -> ClaimResult:
    scales = results.array("theorem2", "scales")
    fraction = results.array("theorem2", "fraction_monotone")
    i = int(np.argmin(scales))
    ok = fraction[i] >= 1.0
    values = {"scale": float(scales[i]), "fraction_monotone": float(fraction[i])}
    values |= {f"fraction_at_{s:g}": float(f) for s, f in zip(scales, fraction, strict=True)}
    detail = (
        "fraction of instances with PFC2 monotone on [0, 1] per start distance ε: "
        + ", ".join(f"ε={s:g}: {f:.3g}" for s, f in zip(scales, fraction, strict=True))
        + f"; need 1 at the smallest ε = {scales[i]:g}"
    )
    return ClaimResult(_verdict(ok), values, 1.0, detail)


def _theorem2_local(results: RunResults) -> ClaimResult:
    interval = results.array("theorem2", "min_monotone_interval")
    curvature = results.array("theorem2", "curvature")
    ok = bool(np.all(interval > 0) and np.all(curvature > 0))
    values = {"min_interval": float(interval.min()), "min_curvature": float(curvature.min())}
    detail = (
        f"shortest final interval on which PFC2 decreases: {interval.min():.3g} (> 0?); "
        f"smallest d²PFC2~/dt² at t = 1: {curvature.min():.3g} (> 0?)"
    )
    return ClaimResult(_verdict(ok), values, 0.0, detail)


def _theorem3(variant: str) -> Any:
    def evaluate(results: RunResults) -> ClaimResult:
        spacing = row_value(results, "spacing_error", "theorem3", SPLIT)
        feature = row_value(results, f"{variant}_feature_error", "theorem3", SPLIT)
        gap = row_value(results, f"{variant}_objective_gap", "theorem3", SPLIT)
        ok = spacing <= SPACING and feature <= SAME_SOLUTION and gap <= OBJECTIVE_GAP
        values = {"spacing_error": spacing, "feature_error": feature, "objective_gap": gap}
        detail = (
            f"multilayer optimum: spacing error {spacing:.3g} (<= {SPACING:g}); vs the "
            f"{variant} reduction: feature error {feature:.3g} (<= {SAME_SOLUTION:g}), "
            f"objective gap {gap:.3g} (<= {OBJECTIVE_GAP:g})"
        )
        return ClaimResult(_verdict(ok), values, SAME_SOLUTION, detail)

    return evaluate


def _theorem4_flow(results: RunResults) -> ClaimResult:
    within = results.array("theorem4", "trace_within")
    between = results.array("theorem4", "trace_between")
    pfc1 = results.array("theorem4", "pfc1")
    dw, db, dp = np.diff(within), np.diff(between), np.diff(pfc1)
    ok = bool(np.all(dw < 0) and np.all(db > 0) and np.all(dp < 0))
    values = {
        "max_step_trace_within": float(dw.max()),
        "min_step_trace_between": float(db.min()),
        "pfc1_start": float(pfc1[0]),
        "pfc1_end": float(pfc1[-1]),
    }
    detail = (
        f"along Eq. 21 on {pfc1.size} times: Tr Σ_W steps <= {dw.max():.3g} (< 0?), "
        f"Tr Σ_B steps >= {db.min():.3g} (> 0?), PFC1 {pfc1[0]:.4g} -> {pfc1[-1]:.4g}"
    )
    return ClaimResult(_verdict(ok), values, 0.0, detail)


def _theorem4_minimiser(results: RunResults) -> ClaimResult:
    lambdas = results.array("theorem4", "lambdas")
    errors = results.array("theorem4", "relative_error")
    pfc1 = results.array("theorem4", "minimiser_pfc1")
    data = float(results.array("theorem4", "data_pfc1"))
    ratios = errors[:-1] / errors[1:] * (lambdas[:-1] / lambdas[1:]) * 2.0
    lo, hi = FLOW_RATIO
    first_order = bool(np.all((ratios >= lo) & (ratios <= hi))) if ratios.size else True
    collapsed = bool(np.all(pfc1 < data))
    ok = first_order and collapsed
    values = {"largest_lambda_error": float(errors[-1]), "max_minimiser_pfc1": float(pfc1.max())}
    values |= {"data_pfc1": data}
    detail = (
        "relative error of the flow at t = 1/λ vs the minimiser: "
        + ", ".join(f"λ={lam:g}: {e:.3g}" for lam, e in zip(lambdas, errors, strict=True))
        + f" (per doubling of λ divided by {lo:g}-{hi:g}?); PFC1 of the minimisers "
        f"<= {pfc1.max():.5g} vs data {data:.5g} (below?)"
    )
    return ClaimResult(_verdict(ok), values, None, detail)


THEOREM_CLAIMS: list[Claim] = [
    Claim(
        name="theorem1-monotone-when-s-nonnegative",
        statement="Theorem 1: along the straight line to collapsed end points, PFC1 decreases "
        "monotonically whenever S = Σ_k <h̃_k^(0), h̃_k^(1)> >= 0.",
        source="001 §III-B, Theorem 1, Appendix A",
        threshold="every random instance with S >= 0 has a non-increasing PFC1 on the t grid",
        evaluate=_theorem1,
    ),
    Claim(
        name="theorem2-monotone-for-small-transport-cost",
        statement="Theorem 2: PFC2 decreases monotonically along the line when the class-mean "
        "transport cost is small.",
        source="001 §III-B, Theorem 2, Appendix B",
        threshold="all instances at the smallest start distance ε are monotone on [0, 1]",
        evaluate=_theorem2_small,
    ),
    Claim(
        name="theorem2-local-near-end",
        statement="Theorem 2's proof is local: near an exact ETF end point PFC2 always "
        "decreases (positive curvature of the surrogate at t = 1).",
        source="001 Appendix B; note 001 §3.3",
        threshold="every instance decreases on some final interval (length > 0) and has "
        "d²PFC2~/dt²(1) > 0",
        evaluate=_theorem2_local,
    ),
    Claim(
        name="theorem3-reduction-as-published",
        statement="Theorem 3 as printed: the multilayer MUFM (12) is equivalent to (13) with "
        "the same λ, its optimal layers equally spaced.",
        source="001 §III-C, Theorem 3, Eq. 14",
        threshold=(
            f"spacing error <= {SPACING:g}; published reduction: feature error <= "
            f"{SAME_SOLUTION:g}, objective gap <= {OBJECTIVE_GAP:g}"
        ),
        evaluate=_theorem3("published"),
        erratum=Erratum(),
    ),
    Claim(
        name="theorem3-reduction-corrected",
        statement="Theorem 3 with the Cauchy-Schwarz factor: (12) is equivalent to (13) with "
        "λ/L, its optimal layers equally spaced.",
        source="note 001 §3.5 (erratum of Eq. 14)",
        threshold=(
            f"spacing error <= {SPACING:g}; corrected reduction: feature error <= "
            f"{SAME_SOLUTION:g}, objective gap <= {OBJECTIVE_GAP:g}"
        ),
        evaluate=_theorem3("corrected"),
    ),
    Claim(
        name="theorem4-lemma1-flow",
        statement="Lemma 1: along the gradient flow (21) from non-collapsed data, Tr Σ_W "
        "decreases and Tr Σ_B increases, so PFC1 decreases.",
        source="001 Appendix C, Lemma 1",
        threshold="strictly monotone on every step of the time grid",
        evaluate=_theorem4_flow,
    ),
    Claim(
        name="theorem4-large-lambda",
        statement="Theorem 4: for large λ the MUFM minimiser H_{1/λ} follows the flow (21) at "
        "t = 1/λ to first order and is more collapsed than the data (PFC1 below X's).",
        source="001 §III-C, Theorem 4, Appendix C",
        threshold=(
            f"relative error divided by {FLOW_RATIO[0]:g}-{FLOW_RATIO[1]:g} per doubling of λ; "
            "PFC1(H_{1/λ}) < PFC1(X) at every λ"
        ),
        evaluate=_theorem4_minimiser,
    ),
]
