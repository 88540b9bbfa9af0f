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

import numpy as np

from collapselab._threads import serial_threads
from collapselab.data import gaussian_mixture
from collapselab.experiments.pfc.presets import MufmInstance, MufmPreset, SweepPreset
from collapselab.experiments.registry import RunContext
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

__all__ = ["mufm_data", "run_lambda_sweep", "run_mufm"]


def mufm_data(config: MufmInstance, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The §IV-B data ``X`` (``(d, N)``, columns sorted by class) and the labels ``(N,)``."""
    data = gaussian_mixture(config.n_classes, config.dim, config.n_per_class, seed=seed).train
    return data.x.double().numpy().T.copy(), data.y.numpy().copy()


def _solve(
    problem: MUFM, method: str, config: MufmPreset | SweepPreset, context: RunContext
) -> MUFMSolution:
    """The literal GD (``literal_steps`` steps) or the converged L-BFGS (at most
    ``max_iter`` iterations), with its progress row."""
    if method == "literal":
        total = config.literal_steps
        label, unit, solver = "literal GD", "steps", solve_literal
        options = {"lr": config.literal_lr, "steps": total}
    else:
        total = config.max_iter
        label, unit, solver = "L-BFGS (at most)", "iterations", solve_converged
        options = {"tol": config.tol, "max_iter": total}
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
    problems = {
        "ufm": ufm_model(y, X.shape[0], config.lambda_w, config.lam),
        "mufm": mufm_model(X, y, config.lambda_w, config.lam),
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
    lambda_w = config.lambda_w
    ratios = np.geomspace(config.ratio_min, config.ratio_max, config.n_points)
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
