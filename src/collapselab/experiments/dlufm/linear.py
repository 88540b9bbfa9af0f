r"""``dlufm-linear``: the deep linear UFM trained by gradient descent (paper 004 §5.1,
Figs 3-8 and 12-14; note 004 §5.2 configuration A).

Full-batch gradient descent from a normal initialisation (the paper's procedure) records
the point at log-spaced checkpoints; at each one, layer ``l``'s every spectrum, alignment
and coefficient (:func:`~collapselab.experiments.dlufm.ufm.layer_snapshot`). At the
end, :func:`~collapselab.theory.dlufm_theorems.verify_dlufm` holds every theorem against
the gradient-descent endpoint, and the closed form gives the values the figures mark.

Stored: ``arrays/dynamics.npz`` (``steps`` and every snapshot key with a leading
checkpoint axis, plus ``overlap_previous`` / ``overlap_final``: Gur-Ari's top-subspace
overlap), ``arrays/closed_form.npz`` (the predicted values), ``arrays/verify.npz`` (every
check of ``verify_dlufm``); rows of split ``"train"`` (``objective``, ``grad_norm``,
``f_top``, ``dnc1`` per checkpoint, ``step`` the gradient step) and of split ``"verify"``
(``worst_error`` per theorem, ``layer`` the theorem).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.experiments.dlufm.presets import LinearPreset
from collapselab.experiments.dlufm.ufm import build_model, descend, layer_snapshot, overlaps, stack
from collapselab.experiments.registry import RunContext
from collapselab.store import Run
from collapselab.theory.dlufm import ClosedForm, DeepLinearUFM, require_nontrivial
from collapselab.theory.dlufm_theorems import (
    DLUFMVerification,
    predict_extended_errors,
    predict_features,
    predict_gradient_covariance,
    verify_dlufm,
)

__all__ = [
    "closed_form_arrays",
    "run_linear",
    "save_verification",
    "store_verification",
    "verification_arrays",
]


def closed_form_arrays(model: DeepLinearUFM, form: ClosedForm, layer: int) -> dict[str, Any]:
    """The closed form's values that the figures and claims compare with."""
    k = model.n_classes
    return {
        "layer": np.int64(layer),
        "n_classes": np.int64(k),
        "t_star": np.float64(form.t_star),
        "objective": np.float64(form.objective),
        "beta": np.float64(form.beta),
        "threshold": np.float64(form.threshold),
        "hessian_outlier": form.hessian_outlier,
        "sigma_w_sq": form.sigma_w_sq,
        "gradient_coefficient": form.gradient_coefficient,
        "cosine": np.float64(math.copysign(1.0 / math.sqrt(k), form.gradient_coefficient[0])),
        "grad_covariance": predict_gradient_covariance(model, layer).eigenvalues,
        "extended_errors": predict_extended_errors(model, layer).eigenvalues,
        "features": np.array(
            [predict_features(model, j).eigenvalues[0] for j in range(1, model.n_layers + 2)]
        ),
        "lambda_w": np.asarray(model.lambda_w),
    }


def save_verification(
    run: Run, check: DLUFMVerification, name: str = "verify", label: str = ""
) -> None:
    """Store every check of ``verify_dlufm`` in ``arrays/<name>.npz`` and the worst error per
    theorem as rows of split ``"verify"`` (``layer`` ``label`` + the theorem, ``step`` 0)."""
    store_verification(run, verification_arrays(check), check.worst(), name, label)


def verification_arrays(check: DLUFMVerification) -> dict[str, np.ndarray]:
    """Every check of ``verify_dlufm`` as arrays (one entry per check), as stored."""
    checks = check.checks
    return {
        "theorem": np.array([c.theorem for c in checks]),
        "quantity": np.array([c.quantity for c in checks]),
        "layer": np.array([c.layer for c in checks]),
        "predicted": np.array([c.predicted for c in checks]),
        "measured": np.array([c.measured for c in checks]),
        "error": np.array([c.error for c in checks]),
        "published": np.array([c.variant == "published" for c in checks]),
    }


def store_verification(
    run: Run,
    arrays: Mapping[str, np.ndarray],
    worst: Mapping[str, float],
    name: str = "verify",
    label: str = "",
) -> None:
    """Write :func:`verification_arrays` and the worst error per theorem into ``run``
    (see :func:`save_verification`)."""
    run.save_array(name, **arrays)
    for theorem, value in worst.items():
        run.log(0, "worst_error", value, split="verify", layer=f"{label}{theorem}")


def run_linear(run: Run, context: RunContext) -> None:
    """Gradient descent, the snapshots at every checkpoint, the verification at the end."""
    c: LinearPreset = context.config
    model = build_model(c)
    assert isinstance(model, DeepLinearUFM)
    form = require_nontrivial(model, "dlufm-linear")
    layer = c.layer
    with serial_threads():
        with context.progress.task("gradient descent", c.steps, "steps") as progress:
            traj = descend(model, c, steps=c.steps, checkpoints=c.checkpoints,
                           seed=context.seed, progress=progress)  # fmt: skip
        snaps = []
        total = len(traj.points)
        with context.progress.task("layer-wise spectra", total, "checkpoints") as progress:
            for i, point in enumerate(traj.points):
                snaps.append(layer_snapshot(model, point, layer))
                progress(i + 1, total)
        dynamics = stack(snaps)
        previous, final = overlaps(dynamics.pop("top_vectors"))
        run.save_array(
            "dynamics", steps=traj.steps, overlap_previous=previous, overlap_final=final, **dynamics
        )
        run.save_array("closed_form", **closed_form_arrays(model, form, layer))
        save_verification(run, verify_dlufm(model, traj.final))
    for i, step in enumerate(traj.steps):
        run.log_dict(
            int(step),
            {
                "objective": float(dynamics["objective"][i]),
                "grad_norm": float(dynamics["grad_norm"][i]),
                "f_top": float(dynamics["f_top"][i]),
                "dnc1": float(dynamics["dnc1"][i, layer - 1]),
            },
        )
    run.update_manifest(solver=traj.stopped)
    run.flush()
