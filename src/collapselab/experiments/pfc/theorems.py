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

import numpy as np

from collapselab._threads import serial_threads
from collapselab.experiments.pfc.mufm import mufm_data
from collapselab.experiments.pfc.presets import TheoremsPreset
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

__all__ = ["SPLIT", "run_theorems"]

SPLIT = "theory"
"""The split of the rows a run writes (its claims read them)."""


def _log(run: Run, layer: str, values: dict[str, float]) -> None:
    run.log_dict(0, values, split=SPLIT, layer=layer)


def run_theorems(run: Run, context: RunContext) -> None:
    """Run the four checks and record their numbers."""
    c = context.config
    seed = context.seed
    with serial_threads():
        with context.progress.task("Theorem 1", c.t1_trials, "trials") as progress:
            t1 = theorem1_monte_carlo(
                c.t1_trials,
                n_classes=c.t1_classes,
                dim=c.t1_dim,
                n_per_class=c.t1_per_class,
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
        t2_total = len(c.t2_scales) * c.t2_trials
        with context.progress.task("Theorem 2", t2_total, "trials") as progress:
            t2 = theorem2_study(
                c.t2_scales,
                c.t2_trials,
                n_classes=c.t1_classes,
                dim=c.t1_dim,
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
        big_l = c.t3_layers
        t3 = verify_theorem3(
            mufm_model(X, y, c.lambda_w, c.lam * big_l, n_layers=big_l), tol=c.tol, seed=seed
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


def _theorem4(run: Run, c: TheoremsPreset, X: np.ndarray, y: np.ndarray) -> None:
    """Lemma 1's flow (21) from X, and the MUFM minimisers at the large λ against it."""
    ts = np.linspace(0.0, c.t4_flow_end, c.t4_flow_points)
    flow = gradient_flow(mufm_model(X, y, c.lambda_w, 1.0), ts)
    lambdas = np.asarray(c.t4_lambdas, dtype=np.float64)
    errors, pfc1 = [], []
    for lam in lambdas:
        problem = mufm_model(X, y, c.lambda_w, float(lam))
        solution = solve_converged(problem, tol=c.tol)
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
