r"""``fd-directions``: the common-direction analysis over the detected phase 1 (paper 000,
Figs 4-7, Table 1, S-Fig. 25-27; R10-R18, R24), on the functions of
:mod:`collapselab.theory.diversity_trap` and :mod:`collapselab.metrics.diversity`.

1. The baseline run is trained and measured (:func:`~.training.measure`); its loss
   plateau gives the window ``[0, T_end]`` of phase 1 (note A8: the paper never states it).
   A run that never leaves phase 1 has no window: the analysis says so and stops.
2. The same training is replayed (deterministic: same seed, same batches) and the MLP's
   per-sample state (:func:`~collapselab.probe.capture_mlp_state`:
   inputs, pre-activation gradients, weights, logits of the probe set) is captured at
   ``captures`` evenly spaced steps ``t`` of the window and at ``t + 1`` (the actual
   mini-batch step, for the ``batch_step`` reading of ΔF and the whole-update ΔV).
3. At the end of the window: per-class accuracy of the probe set (Fig. 7); the two leading
   classes by it are analysed (the paper's "two categories with the highest training
   accuracies"):

   * Fig. 4: the top-5 common directions of the class's probe-mean weight changes at the
     analysis layer by deflation, and their strengths ``s_i`` (signed mean over t, the
     paper's formula; note A10);
   * Table 1: Theorem 1's ``S_primary`` and ``S_1..S_3`` of layers ``table_layers``
     through the next layer's common direction of the class (Eq. 5 on the class's
     per-sample changes over the window), mean ± std over samples and iterations;
   * Fig. 5: ``cos(α_c ΔV, F)`` of the class's samples with ``ΔV`` from the actual
     mini-batch update (the per-sample ΔV gives ±1 by construction, note A6);

   and over all probe samples: o^(l) (Fig. 6) in its three ΔF readings (note A7), Lemma 3's
   two terms at the window's end (S-Fig. 27), Theorem 2's within-class sign consistency,
   and the ε singular values and ``‖V‖`` of the analysis layer over the window (R12).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.data import load_data
from collapselab.experiments.fd.presets import Directions
from collapselab.experiments.fd.training import Job, build_model, probe_set, run_arms, train_config
from collapselab.experiments.registry import RunContext
from collapselab.metrics.diversity import (
    direction_strengths,
    dominant_classes,
    per_class_accuracy,
    residual_trajectory,
)
from collapselab.models import MLP
from collapselab.probe import MLPState, capture_mlp_state, single_sample_feature_changes
from collapselab.store import Run
from collapselab.theory.diversity_trap import (
    common_direction_of_window,
    delta_v_feature_cosine,
    lemma3_terms,
    o_statistic,
    theorem1_from_state,
    theorem1_table,
    theorem2_consistency,
)
from collapselab.train import train

__all__ = ["capture_window", "run_directions"]


class _Capture:
    """A training callback capturing the MLP's probe state at the given steps."""

    def __init__(self, model: torch.nn.Module, probe: Any, steps: set[int], stop: int) -> None:
        self.model, self.probe, self.steps, self.stop = model, probe, steps, stop
        self.states: dict[int, MLPState] = {}

    def _capture(self, step: int) -> None:
        if step in self.steps:
            self.states[step] = capture_mlp_state(self.model, self.probe.x, self.probe.y)

    def on_train_start(self, state: Any) -> None:
        self._capture(0)

    def on_iteration_end(self, state: Any) -> None:
        self._capture(state.iteration)
        if state.iteration >= self.stop:
            state.request_stop("captured the phase-1 window")


def capture_window(
    job: Job, end: int, captures: int
) -> tuple[list[int], dict[int, MLPState], Any, Any]:
    """Replay the training of ``job`` up to ``end + 1`` and capture the probe state at
    ``captures`` evenly spaced steps of ``[0, end]`` and one step after each. Returns the
    window's steps, the states by step, the probe set and the model at ``end + 1``."""
    member, seed = job.member, job.seed
    data = load_data(member.data, job.data_dir, seed)
    train_split = data.train
    probe = probe_set(train_split, member, seed)
    window = sorted({round(float(t)) for t in np.linspace(0, end, captures)})
    model = build_model(member.model, int(train_split.x.shape[1]), train_split.n_classes, seed)
    cap = _Capture(model, probe, set(window) | {t + 1 for t in window}, end + 1)
    cfg = train_config(member.training, int(train_split.y.numel()), seed, "cpu")
    with serial_threads():
        train(model, data, cfg, [cap], None)
    return window, cap.states, probe, model


def _class_mean_change(state: MLPState, layer: int, lr: float, c: int) -> torch.Tensor:
    """``ΔW̄ = -η/N_c Σ_{x ∈ X_c} g_x F_xᵀ`` of layer ``layer`` over the probe's class c."""
    sel = state.labels == c
    g, f = state.pre_grads[layer - 1][sel], state.inputs[layer - 1][sel]
    return -lr * g.T @ f / int(sel.sum())


def run_directions(run: Run, context: RunContext) -> None:
    """Train the baseline, detect phase 1, replay it with captures, analyse (module doc)."""
    config: Directions = context.config
    job = Job.of(context, "baseline", config.base)
    result = run_arms(run, context, [job], arms={"all": ["baseline"]})["baseline"]
    end = float(result["phase_plateau_end"])
    if end < 0:
        run.update_manifest(directions="the baseline never left phase 1: no window to analyse")
        run.flush()
        return
    with context.progress.task("common directions", 3, "stages") as done:
        window, states, probe, _ = capture_window(job, int(end), config.captures)
        done(1, 3)
        arrays = _analyse(window, states, probe, config)
        done(3, 3)
    run.save_array("directions", **arrays)
    run.update_manifest(directions=f"window [0, {int(end)}], {len(window)} captures")
    run.flush()


def _analyse(
    window: list[int], states: dict[int, MLPState], probe: Any, config: Directions
) -> dict[str, np.ndarray]:
    lr, layer = config.base.training.lr, config.analysis_layer
    n_classes = int(probe.n_classes)
    last = states[window[-1]]
    accuracy = per_class_accuracy(last.logits, last.labels, n_classes)
    leading = np.argsort(-accuracy, kind="stable")[:2]
    in_window = [states[t] for t in window]
    table_layers = [ell for ell in config.table_layers if 1 <= ell < last.depth]
    out: dict[str, Any] = {
        "window": np.asarray(window),
        "class_accuracy": accuracy,
        "leading": leading,
        "dominant": dominant_classes(accuracy),
        "table_layers": np.asarray(table_layers),
        "analysis_layer": np.int64(layer),
    }
    k, n_noise = config.top_k, config.n_noise
    strengths, prim, prim_sd, noise, noise_sd, m10_mean, m10_std = [], [], [], [], [], [], []
    for cls in leading:
        changes = [_class_mean_change(s, layer, lr, int(cls)) for s in in_window]
        strengths.append(direction_strengths(changes, k).strengths)
        rows = [[], [], [], []]
        for ell in table_layers:
            direction = common_direction_of_window(in_window, ell + 1, lr, classes=[int(cls)])
            parts = [theorem1_from_state(s, ell, direction.primary, lr) for s in in_window]
            table = theorem1_table(parts, [s.labels for s in in_window], n_classes, n_noise)
            for row, value in zip(
                rows,
                (table.primary_mean, table.primary_std, table.noise_mean, table.noise_std),
                strict=True,
            ):
                row.append(value[int(cls)])
        prim.append(rows[0]), prim_sd.append(rows[1]), noise.append(rows[2])
        noise_sd.append(rows[3])
        c_layer = common_direction_of_window(in_window, layer, lr, classes=[int(cls)]).primary
        means, stds = [], []
        for t in window:
            update = states[t + 1].weights[layer - 1] - states[t].weights[layer - 1]
            aligned = delta_v_feature_cosine(
                states[t].inputs[layer - 1], states[t].labels, c_layer, n_classes, delta_w=update
            )
            means.append(aligned.mean[int(cls)]), stds.append(aligned.std[int(cls)])
        m10_mean.append(means), m10_std.append(stds)
    out |= {
        "strengths": np.asarray(strengths),
        "s_primary": np.asarray(prim),
        "s_primary_std": np.asarray(prim_sd),
        "s_noise": np.asarray(noise),
        "s_noise_std": np.asarray(noise_sd),
        "m10_mean": np.asarray(m10_mean),
        "m10_std": np.asarray(m10_std),
    }
    out |= _all_samples(window, states, probe, lr, layer, n_classes)
    return out


def _all_samples(
    window: list[int],
    states: dict[int, MLPState],
    probe: Any,
    lr: float,
    layer: int,
    n_classes: int,
) -> dict[str, np.ndarray]:
    """o^(l) per ΔF mode, Lemma 3, Theorem 2 and the ε trajectory over all probe samples."""
    in_window = [states[t] for t in window]
    c_all = common_direction_of_window(in_window, layer, lr).primary
    modes: dict[str, list[np.ndarray]] = {}
    for t in window:
        s = states[t]
        # the single-sample step needs the model at step t: rebuilt from the captured weights
        model = _model_at(s)
        single = single_sample_feature_changes(model, probe.x, probe.y, layer, lr)
        values = o_statistic(
            s.inputs[layer - 1],
            s.pre_grads[layer - 1],
            s.weights[layer - 1],
            c_all,
            {"batch_step": s.feature_change_to(states[t + 1], layer), "single_sample_step": single},
        )
        for mode, v in values.items():
            modes.setdefault(mode, []).append(v)
    out: dict[str, np.ndarray] = {}
    for mode, per_t in modes.items():
        arr = np.stack(per_t)
        out[f"o_{mode}_mean"], out[f"o_{mode}_std"] = arr.mean(axis=1), arr.std(axis=1)
        out[f"o_{mode}_positive"] = (arr > 0).mean(axis=1)
    end = states[window[-1]]
    terms = lemma3_terms(
        end.inputs[layer - 1], end.pre_grads[layer - 1], end.weights[layer - 1], c_all, lr
    )
    out["lemma3_primary"], out["lemma3_noise"] = terms.primary, terms.noise
    check = theorem2_consistency(
        end.inputs[layer - 1], end.pre_grads[layer - 1], end.labels, c_all, n_classes
    )
    out["theorem2_hypothesis"], out["theorem2_conclusion"] = check.hypothesis, check.conclusion
    trajectory = residual_trajectory([s.weights[layer - 1] for s in in_window], c_all)
    out["eps_singular_values"] = np.asarray(trajectory.singular_values)[:, :8]
    out["v_norm"] = np.asarray(trajectory.v_norm)
    return out


def _model_at(state: MLPState) -> torch.nn.Module:
    """A bias-free ReLU MLP with the captured weights (float64), for a single-sample step."""
    weights = state.weights
    model = MLP(
        weights[0].shape[1], weights[-1].shape[0], width=weights[0].shape[0], depth=len(weights)
    ).double()
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for lin, w in zip(linears, weights, strict=True):
            lin.weight.copy_(w)
    return model
