r"""Two sweeps of the deep linear UFM beyond the paper's figures (note 004 §7 R20-R21).

``dlufm-regularisation``
    ``λ = λ_W = λ_H`` of configuration A scaled so that ``β/β_c`` takes each configured
    ratio (condition (2) holds below 1, fails above); gradient descent from one start per
    ratio against the closed form: ``F*``, ``t*``, the parameters' norm (zero beyond the
    threshold) and DNC1. The ratios are the members of a sweep (the run's executor).
    Stored: ``arrays/regularisation.npz`` (one entry per ratio).
``dlufm-layers``
    Configurations with unequal ``λ_W(l)``, ``K ≠ 3``, unequal widths and several ``L``,
    each solved by gradient descent; at every layer the Hessian's ``K²`` outliers against
    the closed form ``λ_out(l)`` (proportional to ``λ_W(l)``), and
    :func:`~collapselab.theory.dlufm_theorems.verify_dlufm` on the endpoint. Stored:
    ``arrays/layers.npz`` (one entry per (configuration, layer)) and
    ``arrays/verify_<i>.npz`` per configuration.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collapselab.curvature import dense_spectrum
from collapselab.experiments.dlufm.linear import store_verification, verification_arrays
from collapselab.experiments.dlufm.presets import LayersPreset, RegularisationPreset, UFMConfig
from collapselab.experiments.dlufm.ufm import build_model, descend
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.store import Run
from collapselab.theory.dlufm import (
    DeepLinearUFM,
    closed_form,
    local_minimum_threshold,
    regularisation_threshold,
)
from collapselab.theory.dlufm_layerwise import dnc_metrics, feature_class_means, layer_hessian
from collapselab.theory.dlufm_theorems import verify_dlufm

__all__ = ["lambda_for_ratio", "layers_point", "regularisation_point", "run_layers",
           "run_regularisation"]  # fmt: skip


def lambda_for_ratio(config: UFMConfig, ratio: float) -> float:
    r"""The common ``λ = λ_W = λ_H`` with ``β = ratio · β_c``:
    ``β = K(L+1) n^{1/(L+1)} λ / κ`` (``κ = 1``, the default loss scale) for ``config``'s
    ``K``, ``n`` and ``L`` (one width)."""
    k, n, big_l = config.n_classes, config.n_per_class, config.n_layers
    beta = ratio * regularisation_threshold(big_l)
    return beta / (k * (big_l + 1) * n ** (1.0 / (big_l + 1)))


def run_regularisation(run: Run, context: RunContext) -> None:
    """Gradient descent at every ratio ``β/β_c`` against the closed form: the ratios are the
    members of a sweep on the run's executor (:func:`regularisation_point`), stored in
    ``members/`` as they finish."""
    c: RegularisationPreset = context.config
    big_l = c.n_layers
    members = [{"preset": c, "ratio": ratio, "seed": context.seed} for ratio in c.ratios]
    # small matrices: one thread (threads=1 by default, as collapselab._threads.serial_threads)
    rows: dict[str, list[float]] = {}
    for i, row in enumerate(run_members(regularisation_point, members, run, context)):
        for key, value in row.items():
            rows.setdefault(key, []).append(value)
        run.log_dict(i, row, split="regularisation")
    run.save_array(
        "regularisation",
        local_minimum_ratio=np.float64(
            local_minimum_threshold(big_l) / regularisation_threshold(big_l)
        ),
        **{key: np.asarray(v) for key, v in rows.items()},
    )
    run.flush()


def regularisation_point(member: dict[str, Any]) -> dict[str, float]:
    """A sweep task: gradient descent at ``member["ratio"]`` of ``β/β_c`` for the preset
    ``member["preset"]`` from the start of ``member["seed"]``, against the closed form;
    one row of ``arrays/regularisation.npz``."""
    c: RegularisationPreset = member["preset"]
    ratio = member["ratio"]
    big_l = c.n_layers
    lam = lambda_for_ratio(c, ratio)
    model = build_model(c.replace(lambda_w=lam, lambda_h=lam))
    assert isinstance(model, DeepLinearUFM)
    form = closed_form(model)
    traj = descend(model, c, steps=c.steps, checkpoints=1, seed=member["seed"])
    end = traj.final
    out_means = feature_class_means(model, model.features(end)[-1])  # (K, K): class k's mean f
    # classes fitted: singular values of the output class means above 1e-6
    fitted = int(np.sum(np.linalg.svd(out_means, compute_uv=False) > 1e-6))
    return {
        "ratio": ratio,
        "lambda": lam,
        "beta": form.beta,
        "t_star": form.t_star,
        "optimum": form.objective,
        "objective": float(traj.objective[-1]),
        "t_gd": float(np.mean(np.diag(out_means))),
        "fitted": float(fitted),
        "norm_start": traj.points[0].norm(),
        "norm_end": end.norm(),
        "grad_norm": float(traj.grad_norm[-1]),
        "dnc1": float(dnc_metrics(model, end)["dnc1"][big_l - 1]),
    }


def run_layers(run: Run, context: RunContext) -> None:
    """Every configuration solved by gradient descent; per layer the outliers, and the
    verification of every theorem. The configurations are the members of a sweep on the
    run's executor (:func:`layers_point`), stored in ``members/`` as they finish."""
    c: LayersPreset = context.config
    members = [
        {"config": config, "steps": c.steps, "tol": c.tol, "seed": context.seed}
        for config in c.configs
    ]
    rows: dict[str, list[float]] = {}  # one thread per member, as for the ratios above
    for i, point in enumerate(run_members(layers_point, members, run, context)):
        for row in point["rows"]:
            row = {"config": float(i), **row}
            for key, value in row.items():
                rows.setdefault(key, []).append(value)
            run.log_dict(i, row, split="layers", layer=f"config{i}:W{int(row['layer'])}")
        arrays = {key[len(VERIFY) :]: v for key, v in point.items() if key.startswith(VERIFY)}
        store_verification(run, arrays, point["worst"], f"verify_{i}", f"config{i}:")
    run.save_array("layers", **{key: np.asarray(v) for key, v in rows.items()})
    run.flush()


VERIFY = "verify_"
"""Prefix of the verification arrays in a :func:`layers_point` result."""


def layers_point(member: dict[str, Any]) -> dict[str, Any]:
    """A sweep task: solve ``member["config"]`` by gradient descent (``member["steps"]``,
    ``member["tol"]``) from the start of ``member["seed"]``; per layer the Hessian's outliers
    and the weights' spectrum against the closed form (``rows``), and
    :func:`~collapselab.theory.dlufm_theorems.verify_dlufm` on the endpoint (the arrays
    ``verify_<field>`` of :func:`verification_arrays` and the worst error per theorem)."""
    config: UFMConfig = member["config"]
    model = build_model(config)
    assert isinstance(model, DeepLinearUFM)
    form = closed_form(model)
    traj = descend(model, config, steps=member["steps"], checkpoints=1, tol=member["tol"],
                   seed=member["seed"])  # fmt: skip
    k = model.n_classes
    rows = []
    for ell in range(1, model.n_layers + 1):
        values = dense_spectrum(layer_hessian(model, traj.final, ell)).numpy()
        weights = np.linalg.eigvalsh(traj.final.W[ell - 1] @ traj.final.W[ell - 1].T)
        weights = weights[::-1]
        rows.append(
            {
                "layer": float(ell),
                "n_classes": float(k),
                "n_layers": float(model.n_layers),
                "lambda_w": model.lambda_w[ell - 1],
                "outlier": float(np.mean(values[: k * k])),
                "outlier_spread": float((values[0] - values[k * k - 1]) / values[0]),
                "bulk": float(np.max(np.abs(values[k * k :])) / values[0])
                if values.size > k * k
                else 0.0,
                "predicted": float(form.hessian_outlier[ell - 1]),
                "weight": float(np.mean(weights[:k])),
                "predicted_weight": float(form.sigma_w_sq[ell - 1]),
                "objective_gap": abs(float(traj.objective[-1]) - form.objective) / form.objective,
            }
        )
    check = verify_dlufm(model, traj.final)
    arrays = {VERIFY + key: value for key, value in verification_arrays(check).items()}
    return {"rows": rows, "worst": check.worst(), **arrays}
