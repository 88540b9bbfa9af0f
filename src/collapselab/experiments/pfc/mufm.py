"""Figs 4-5 of paper 001: the UFM, the MUFM and the data; the λ/λ_W sweep (§IV-B).

Data as in §IV-B: ``x_{k,i} ~ N(μ_k, I_d)`` with ``μ_k`` uniform on the unit sphere
(:func:`collapselab.data.gaussian_mixture`), K = 5 classes, d = 20, n = 100 per class, MSE
loss, ``λ_W = 0.005``. The UFM is the MUFM "without sampling X" (Eq. 13 with ``X = 0``;
:func:`collapselab.theory.ufm.ufm_model`, note §7.3). Every model is solved twice:

* ``literal``: the paper's plain full-batch gradient descent (learning rate 0.1,
  ``5 x 10^4`` steps, ``N(0, 1)`` initialisation; :func:`~collapselab.theory.ufm.solve_literal`);
* ``converged``: L-BFGS to a gradient norm of ``1e-9``
  (:func:`~collapselab.theory.ufm.solve_converged`), which note §5.2 found necessary:
  with the paper's mean-normalised losses the literal procedure stops far from the optimum.

Rows (``split="train"``, ``step`` 0 for Fig. 4, the sweep index for Fig. 5) carry PFC1-3 of
the solution's features, the alignment ``||H/||H||_F - X/||X||_F||_F`` (MUFM), the objective,
the gradient norm and the iteration count; ``layer`` names the solution
(``"data"``, ``"ufm_literal"``, ``"ufm_converged"``, ``"mufm_literal"``, ``"mufm_converged"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.data import gaussian_mixture
from collapselab.experiments.claims import Claim, ClaimResult, Erratum, NotEvaluable, RunResults
from collapselab.experiments.pfc._common import row_value, spearman
from collapselab.experiments.registry import RunContext
from collapselab.metrics import PFC_KEYS
from collapselab.store import Run
from collapselab.theory.ufm import (
    MUFM,
    MUFMSolution,
    alignment,
    column_pfc,
    mufm_model,
    solve_converged,
    solve_literal,
    ufm_model,
    verify_mufm,
)

__all__ = [
    "EXACT_PFC1",
    "EXACT_PFC2",
    "MUFM_CLAIMS",
    "NOT_COLLAPSED",
    "SWEEP_CLAIMS",
    "SWEEP_RHO",
    "mufm_data",
    "run_lambda_sweep",
    "run_mufm",
]

EXACT_PFC1 = 1e-8
"""PFC1 below which a solution counts as exactly collapsed (NC1). The data's PFC1 is of order
10; the solver stops at a gradient norm of 1e-9, and PFC1, a ratio of squared norms, is
second order in the remaining feature error."""

EXACT_PFC2 = 1e-4
"""PFC2 below which the class means count as an exact simplex ETF. PFC2 is a norm of the
normalised Gram matrix's deviation, first order in the remaining feature error, hence a
looser bound than PFC1's (the data's PFC2 is of order 0.1-1)."""

NOT_COLLAPSED = 0.01
"""PFC1 and PFC2 at or above which an MUFM optimum is "not exact collapse" (Fig. 4a)."""

SWEEP_RHO = 0.9
"""Spearman correlation with λ/λ_W a sweep trend must reach (|rho|; 1 is monotone)."""


def mufm_data(config: dict[str, Any], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The §IV-B data ``X`` (``(d, N)``, columns sorted by class) and the labels ``(N,)``."""
    data = gaussian_mixture(
        int(config["n_classes"]), int(config["dim"]), int(config["n_per_class"]), seed=seed
    ).train
    return data.x.double().numpy().T.copy(), data.y.numpy().copy()


def _solve(problem: MUFM, method: str, config: dict[str, Any], context: RunContext) -> MUFMSolution:
    """The literal GD (``literal_steps`` steps) or the converged L-BFGS (at most
    ``max_iter`` iterations), with its progress row."""
    if method == "literal":
        total = int(config["literal_steps"])
        label, unit, solver = "literal GD", "steps", solve_literal
        options = {"lr": float(config["literal_lr"]), "steps": total}
    else:
        total = int(config["max_iter"])
        label, unit, solver = "L-BFGS (at most)", "iterations", solve_converged
        options = {"tol": float(config["tol"]), "max_iter": total}
    with context.progress.task(label, total, unit) as progress:
        return solver(problem, seed=context.seed, progress=progress, **options)


def _solution_values(
    problem: MUFM, solution: MUFMSolution, X: np.ndarray | None
) -> dict[str, float]:
    values = dict(column_pfc(solution.H, problem.labels))
    values |= {
        "objective": solution.objective,
        "grad_norm": solution.grad_norm,
        "iterations": float(solution.iterations),
        "converged": float(solution.converged),
    }
    if X is not None:
        values["alignment"] = alignment(solution.H, X)
        values["first_order_residual"] = verify_mufm(problem, solution).first_order
    return values


def run_mufm(run: Run, context: RunContext) -> None:
    """Solve the UFM and the MUFM at the Fig. 4 λ with both solvers; record the metrics."""
    config = context.config
    X, y = mufm_data(config, context.seed)
    lambda_w, lam = float(config["lambda_w"]), float(config["lam"])
    problems = {
        "ufm": ufm_model(y, X.shape[0], lambda_w, lam),
        "mufm": mufm_model(X, y, lambda_w, lam),
    }
    run.log_dict(0, column_pfc(X, y), split="train", layer="data")
    features = {"X": X, "labels": y}
    solves = [(name, method) for name in problems for method in ("literal", "converged")]
    with serial_threads(), context.progress.task("UFM/MUFM optima", len(solves), "solves") as done:
        for i, (name, method) in enumerate(solves):
            problem = problems[name]
            solution = _solve(problem, method, config, context)
            values = _solution_values(problem, solution, X if name == "mufm" else None)
            run.log_dict(0, values, split="train", layer=f"{name}_{method}")
            features[f"{name}_{method}"] = solution.H
            done(i + 1, len(solves))
    run.save_array("solutions", **features)
    run.flush()


def run_lambda_sweep(run: Run, context: RunContext) -> None:
    """Solve the MUFM over λ/λ_W from ``ratio_min`` to ``ratio_max`` (log-spaced), both solvers."""
    config = context.config
    X, y = mufm_data(config, context.seed)
    lambda_w = float(config["lambda_w"])
    ratios = np.geomspace(
        float(config["ratio_min"]), float(config["ratio_max"]), int(config["n_points"])
    )
    data = column_pfc(X, y)
    run.log_dict(0, data, split="train", layer="data")
    table: dict[str, list[float]] = {}
    points = len(ratios)
    with serial_threads(), context.progress.task("λ/λ_W sweep", points, "points") as done:
        for i, ratio in enumerate(ratios):
            problem = mufm_model(X, y, lambda_w, float(ratio * lambda_w))
            for method in ("literal", "converged"):
                solution = _solve(problem, method, config, context)
                values = _solution_values(problem, solution, X)
                values |= {"lambda": problem.lam, "lambda_ratio": float(ratio)}
                run.log_dict(i, values, split="train", layer=f"mufm_{method}")
                for key, value in values.items():
                    table.setdefault(f"{method}_{key}", []).append(value)
            done(i + 1, points)
    run.save_array(
        "sweep",
        ratio=ratios,
        lam=ratios * lambda_w,
        **{k: np.asarray(v) for k, v in table.items()},
        **{f"data_{k}": np.float64(v) for k, v in data.items()},
    )
    run.flush()


# ---------------------------------------------------------------------------------------
# Fig. 4 claims


def _exact_collapse(method: str) -> Any:
    def evaluate(results: RunResults) -> ClaimResult:
        layer = f"ufm_{method}"
        v = {k: row_value(results, k, layer) for k in PFC_KEYS}
        ok = (
            v["nc1_trace_ratio"] <= EXACT_PFC1
            and v["nc2_etf_distance"] <= EXACT_PFC2
            and v["ncc_accuracy"] == 1.0
        )
        detail = (
            f"UFM ({method} solver): PFC1 {v['nc1_trace_ratio']:.3g} (<= {EXACT_PFC1:g}?), "
            f"PFC2 {v['nc2_etf_distance']:.3g} (<= {EXACT_PFC2:g}?), "
            f"PFC3 {v['ncc_accuracy']:.6g} (== 1?)"
        )
        return ClaimResult("holds" if ok else "does not hold", v, EXACT_PFC1, detail)

    return evaluate


def _more_collapsed(pfc: dict[str, float], data: dict[str, float]) -> tuple[bool, str]:
    ok = (
        pfc["nc1_trace_ratio"] < data["nc1_trace_ratio"]
        and pfc["nc2_etf_distance"] < data["nc2_etf_distance"]
        and pfc["ncc_accuracy"] > data["ncc_accuracy"]
    )
    text = (
        f"PFC1 {pfc['nc1_trace_ratio']:.4g} vs data {data['nc1_trace_ratio']:.4g}, "
        f"PFC2 {pfc['nc2_etf_distance']:.4g} vs {data['nc2_etf_distance']:.4g}, "
        f"PFC3 {pfc['ncc_accuracy']:.4g} vs {data['ncc_accuracy']:.4g}"
    )
    return ok, text


def _mufm_vs_data(method: str) -> Any:
    def evaluate(results: RunResults) -> ClaimResult:
        data = {k: row_value(results, k, "data") for k in PFC_KEYS}
        pfc = {k: row_value(results, k, f"mufm_{method}") for k in PFC_KEYS}
        ok, text = _more_collapsed(pfc, data)
        values = {f"mufm_{k}": v for k, v in pfc.items()} | {
            f"data_{k}": v for k, v in data.items()
        }
        detail = f"MUFM ({method} solver): {text}; all three must be more collapsed"
        return ClaimResult("holds" if ok else "does not hold", values, None, detail)

    return evaluate


def _mufm_not_collapsed(results: RunResults) -> ClaimResult:
    pfc1 = row_value(results, "nc1_trace_ratio", "mufm_converged")
    pfc2 = row_value(results, "nc2_etf_distance", "mufm_converged")
    ok = pfc1 >= NOT_COLLAPSED and pfc2 >= NOT_COLLAPSED
    detail = f"converged MUFM: PFC1 {pfc1:.4g}, PFC2 {pfc2:.4g}; both >= {NOT_COLLAPSED:g}?"
    values = {"nc1_trace_ratio": pfc1, "nc2_etf_distance": pfc2}
    return ClaimResult("holds" if ok else "does not hold", values, NOT_COLLAPSED, detail)


def _converged_below_literal(results: RunResults) -> ClaimResult:
    values, parts, ok = {}, [], True
    for name in ("ufm", "mufm"):
        conv = row_value(results, "objective", f"{name}_converged")
        lit = row_value(results, "objective", f"{name}_literal")
        values[f"{name}_converged"], values[f"{name}_literal"] = conv, lit
        ok &= conv < lit
        parts.append(f"{name.upper()} {conv:.6g} vs {lit:.6g}")
    detail = "objective, converged vs literal: " + "; ".join(parts)
    return ClaimResult("holds" if ok else "does not hold", values, None, detail)


MUFM_CLAIMS: list[Claim] = [
    Claim(
        name="ufm-exact-collapse",
        statement="The UFM optimum is (numerically) exact neural collapse: PFC metrics many "
        "orders of magnitude below the data's (Fig. 4, log scale).",
        source="001 §IV-B, Fig. 4",
        threshold=(f"converged UFM: PFC1 <= {EXACT_PFC1:g}, PFC2 <= {EXACT_PFC2:g} and PFC3 == 1"),
        evaluate=_exact_collapse("converged"),
    ),
    Claim(
        name="ufm-exact-collapse-literal-solver",
        statement="The same with the paper's own solver (plain GD, lr 0.1, 5e4 steps).",
        source="001 §IV-B, Fig. 4",
        threshold=f"literal UFM: PFC1 <= {EXACT_PFC1:g}, PFC2 <= {EXACT_PFC2:g}, PFC3 == 1",
        evaluate=_exact_collapse("literal"),
        erratum=Erratum(subject="solver"),
    ),
    Claim(
        name="mufm-more-collapsed-than-data",
        statement="MUFM optima are more collapsed than the data on all three metrics "
        "(PFC1, PFC2 below X's, PFC3 above).",
        source="001 §IV-B, Fig. 4; Theorem 4",
        threshold="converged MUFM: PFC1 < PFC1(X), PFC2 < PFC2(X) and PFC3 > PFC3(X)",
        evaluate=_mufm_vs_data("converged"),
    ),
    Claim(
        name="mufm-more-collapsed-than-data-literal-solver",
        statement="The same with the paper's own solver.",
        source="001 §IV-B, Fig. 4",
        threshold="literal MUFM: PFC1 < PFC1(X), PFC2 < PFC2(X) and PFC3 > PFC3(X)",
        evaluate=_mufm_vs_data("literal"),
        erratum=Erratum(subject="solver"),
    ),
    Claim(
        name="mufm-not-exact-collapse",
        statement="MUFM optima are not exact neural collapse (unlike the UFM's).",
        source="001 §IV-B, Fig. 4a",
        threshold=f"converged MUFM: PFC1 >= {NOT_COLLAPSED:g} and PFC2 >= {NOT_COLLAPSED:g}",
        evaluate=_mufm_not_collapsed,
    ),
    Claim(
        name="converged-below-literal",
        statement="The converged solver reaches a lower objective than the paper's literal "
        "gradient descent (note §5.2: the literal procedure is not converged).",
        source="note 001 §5.2 (on §IV-B's solver)",
        threshold="objective(converged) < objective(literal) for the UFM and the MUFM",
        evaluate=_converged_below_literal,
        erratum=Erratum(confirmed_when="holds", subject="solver"),
    ),
]


# ---------------------------------------------------------------------------------------
# Fig. 5 claims


def _sweep_trend(key: str, direction: str) -> Any:
    def evaluate(results: RunResults) -> ClaimResult:
        ratio = results.array("sweep", "ratio")
        values = results.array("sweep", f"converged_{key}")
        if ratio.size < 3:
            raise NotEvaluable(f"{ratio.size} λ values; a trend needs at least 3")
        rho = spearman(ratio, values)
        if not np.isfinite(rho):
            raise NotEvaluable(f"{key} is constant over the sweep")
        signed = rho if direction == "increasing" else -rho
        ok = signed >= SWEEP_RHO
        bound = SWEEP_RHO if direction == "increasing" else -SWEEP_RHO
        detail = (
            f"Spearman rho({key}, λ/λ_W) = {rho:.4g} over {ratio.size} values from "
            f"{ratio[0]:.3g} to {ratio[-1]:.3g}; {key} from {values[0]:.4g} to {values[-1]:.4g} "
            f"(need {'>=' if direction == 'increasing' else '<='} {bound:g})"
        )
        out = {"spearman": rho, "first": float(values[0]), "last": float(values[-1])}
        return ClaimResult("holds" if ok else "does not hold", out, bound, detail)

    return evaluate


def _sweep_vs_data(results: RunResults) -> ClaimResult:
    ratio = results.array("sweep", "ratio")
    data = {k: float(results.array("sweep", f"data_{k}")) for k in PFC_KEYS}
    failing = []
    for i, r in enumerate(ratio):
        pfc = {k: float(results.array("sweep", f"converged_{k}")[i]) for k in PFC_KEYS}
        ok, _ = _more_collapsed(pfc, data)
        if not ok:
            failing.append(float(r))
    values = {f"data_{k}": v for k, v in data.items()} | {"n_failing": float(len(failing))}
    detail = (
        f"converged MUFM more collapsed than X on all three metrics at "
        f"{ratio.size - len(failing)} of {ratio.size} λ values"
        + (f"; not at λ/λ_W = {', '.join(f'{r:.3g}' for r in failing)}" if failing else "")
    )
    return ClaimResult("holds" if not failing else "does not hold", values, 0.0, detail)


def _sweep_converged_below(results: RunResults) -> ClaimResult:
    conv = results.array("sweep", "converged_objective")
    lit = results.array("sweep", "literal_objective")
    worse = int(np.sum(conv >= lit))
    ratio = conv / lit
    values = {"max_objective_ratio": float(np.max(ratio)), "n_not_lower": float(worse)}
    detail = (
        f"objective(converged)/objective(literal) between {np.min(ratio):.3g} and "
        f"{np.max(ratio):.3g} over {conv.size} λ values; not lower at {worse}"
    )
    return ClaimResult("holds" if worse == 0 else "does not hold", values, 1.0, detail)


SWEEP_CLAIMS: list[Claim] = [
    Claim(
        name="sweep-pfc1-increases-with-lambda",
        statement="As λ/λ_W grows the MUFM optimum moves away from neural collapse: PFC1 "
        "increases.",
        source="001 §IV-B, Fig. 5",
        threshold=f"Spearman rho(PFC1 of the converged MUFM, λ/λ_W) >= {SWEEP_RHO:g}",
        evaluate=_sweep_trend("nc1_trace_ratio", "increasing"),
    ),
    Claim(
        name="sweep-pfc2-increases-with-lambda",
        statement="As λ/λ_W grows PFC2 increases.",
        source="001 §IV-B, Fig. 5",
        threshold=f"Spearman rho(PFC2 of the converged MUFM, λ/λ_W) >= {SWEEP_RHO:g}",
        evaluate=_sweep_trend("nc2_etf_distance", "increasing"),
    ),
    Claim(
        name="sweep-alignment-decreases-with-lambda",
        statement="As λ/λ_W grows the MUFM optimum moves towards the data: the alignment "
        "distance ||H/||H||_F - X/||X||_F||_F decreases.",
        source="001 §IV-B, Fig. 5 (third panel)",
        threshold=f"Spearman rho(alignment of the converged MUFM, λ/λ_W) <= -{SWEEP_RHO:g}",
        evaluate=_sweep_trend("alignment", "decreasing"),
    ),
    Claim(
        name="sweep-more-collapsed-than-data",
        statement="At every λ the MUFM optimum stays more collapsed than the data.",
        source="001 §IV-B ('more collapsed than the data', Theorem 4)",
        threshold="converged MUFM: PFC1, PFC2 below X's and PFC3 above at every λ of the grid",
        evaluate=_sweep_vs_data,
    ),
    Claim(
        name="sweep-converged-below-literal",
        statement="At every λ the converged solver reaches a lower objective than the paper's "
        "literal gradient descent.",
        source="note 001 §5.2",
        threshold="objective(converged) < objective(literal) at every λ of the grid",
        evaluate=_sweep_converged_below,
        erratum=Erratum(confirmed_when="holds", subject="solver"),
    ),
]
