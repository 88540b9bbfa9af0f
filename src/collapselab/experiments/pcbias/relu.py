r"""``pcbias-relu``: the PC-bias of the two-layer ReLU model (paper 002 §2.5, App. B.2,
Fig. 2 right; note 002 §3.8).

``f(x) = aᵀ ReLU(W x)`` with the paired initialisation (``w_{2i} = −w_{2i−1}``,
``a_{2i} = −a_{2i−1}``; :class:`~collapselab.models.TwoLayerReLU`) and ``a`` fixed, trained
by exact full-batch GD on ``½ Σ_i (f(x_i) − y_i)²`` with labels ±1
(:func:`~collapselab.theory.pcbias_relu.relu_gd_step`) on symmetric data: two Gaussian
classes with a power-law spectrum, each point's negation added with the opposite label, so
``P(x) = P(−x)`` holds exactly in the sample (§2.5's assumption 1). Training runs in the
principal frame of the inputs (``x U``, ``W U``; the paired Gaussian init is rotation
invariant). Per PC ``j`` the component of column ``w̃_j`` along ``a``,
``u_j = aᵀ w̃_j / ‖a‖`` (the direction the approximate dynamics move), is kept for every
member; its across-network std is held against the approximate dynamics' ratio
``1 − μ κ ‖a‖² d_j`` (:func:`~collapselab.theory.pcbias_relu.relu_pc_ratio`): ``κ = ¼``
(corrected) and ``½`` (as printed). On an exactly symmetric sample GD keeps the pairing
(row ``2i`` stays the negation of row ``2i − 1``), so the network stays linear,
``f(x) = ½ aᵀ W x``, and the ``κ = ¼`` ratio of the ``a``-component is exact, not only for
small ``s`` (measured at ``quick``: relative error 1e-14).

Stored: ``arrays/relu.npz`` (``steps``, ``eigenvalues``, ``std`` ``(S, q)``,
``std_<variant>`` predictions, ``ratio_<variant>`` ``(q,)``, ``mu``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.data import DataSpec, load_data
from collapselab.experiments.pcbias._common import Member, log_steps, run_ensemble
from collapselab.experiments.pcbias.presets import ReluPreset
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pc_frame import principal_frame
from collapselab.models import TwoLayerReLU
from collapselab.store import Run
from collapselab.theory.pcbias_relu import VARIANTS, relu_gd_step, relu_pc_ratio

__all__ = ["ReluMember", "relu_member", "run_relu", "symmetric_data"]


@dataclass(frozen=True, kw_only=True)
class ReluMember(Member):
    """One paired two-layer ReLU net (:func:`relu_member`): ``width`` hidden units, step
    ``lr`` (a fraction of the stability limit), ``steps`` GD steps, about ``checkpoints``
    log-spaced checkpoints."""

    width: int
    lr: float
    steps: int
    checkpoints: int

    def train(self) -> dict[str, Any]:
        return relu_member(self)


def symmetric_data(spec: DataSpec, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The training split of ``spec`` (two classes, labels ±1) and its negations:
    ``(x, y)``, float64."""
    data = load_data(spec, seed=seed).train
    x = data.x.double().numpy()
    y = data.y.numpy() * 2.0 - 1.0
    return np.concatenate([x, -x]), np.concatenate([y, -y])


def _mu(lr: float, a: np.ndarray, d1: float) -> float:
    """``lr / (¼ ‖a‖² d_1)``: ``lr`` a fraction of the corrected dynamics' stability limit."""
    return lr / (0.25 * float(a @ a) * d1)


def relu_member(member: ReluMember) -> dict[str, Any]:
    """Train ``member``; ``u`` ``(S, q)`` the components ``aᵀw̃_j/‖a‖`` at the checkpoints
    ``steps``, ``a_norm2`` ``‖a‖²`` and the step ``mu``."""
    x, y = symmetric_data(member.data, member.data_seed)
    frame = principal_frame(x, y[:, None])
    x_pc = x @ frame.basis
    torch.manual_seed(1000 * member.seed + member.member)
    net = TwoLayerReLU(x.shape[1], member.width, paired=True)
    w = net.hidden.weight.detach().double().numpy() @ frame.basis
    a = net.a.detach().double().numpy()
    mu = _mu(member.lr, a, float(frame.eigenvalues[0]))
    marks = log_steps(member.steps, member.checkpoints)
    u, step = [], 0
    for mark in marks:
        while step < mark:
            w = relu_gd_step(w, a, x_pc, y, mu)
            step += 1
        u.append(a @ w / np.linalg.norm(a))
    return {"u": np.asarray(u), "steps": marks, "a_norm2": float(a @ a), "mu": mu}


def run_relu(run: Run, context: RunContext) -> None:
    """Train the ensemble and store the per-PC std against both constants."""
    preset: ReluPreset = context.config
    member = ReluMember(data=preset.data, width=preset.width, lr=preset.lr, steps=preset.steps,
                        checkpoints=preset.checkpoints, seed=context.seed,
                        data_seed=context.seed)  # fmt: skip
    with serial_threads():
        results = run_ensemble(member.ensemble(preset.members), run, context, "relu")
        x, y = symmetric_data(preset.data, context.seed)
        frame = principal_frame(x, y[:, None])
    u = np.stack([r["u"] for r in results], axis=1)  # (S, N, q)
    steps = results[0]["steps"]
    std = u.std(1, ddof=1)
    # ‖a‖ is the same for every member (a_scale = 1/√m), so one ratio holds for all
    a_norm = np.full(1, np.sqrt(results[0]["a_norm2"]))
    mu = float(results[0]["mu"])
    arrays: dict[str, Any] = {"steps": steps, "eigenvalues": frame.eigenvalues, "std": std,
                              "mu": np.float64(mu)}  # fmt: skip
    for variant in VARIANTS:
        ratio = relu_pc_ratio(frame.eigenvalues, a_norm, mu, variant)
        arrays[f"ratio_{variant}"] = ratio
        arrays[f"std_{variant}"] = np.abs(ratio)[None, :] ** steps[:, None] * std[0]
    run.save_array("relu", **arrays)
    for i, step in enumerate(steps):
        run.log(int(step), "std_top_pc", float(std[i, 0]), split="relu")
    run.flush()
