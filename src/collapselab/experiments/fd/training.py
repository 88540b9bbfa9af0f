r"""One measured training run of paper 000's MLP (a sweep member), its phase detection, and
every arm of an experiment run through the sweep executor.

A run is a :class:`Job`: a :class:`~.presets.Member` (data, model, training, measurement;
:mod:`.presets`) with the run's seed, ``--data-dir`` and device, named after its arm.
:func:`measure` trains and measures it; :func:`run_member` is the same as a sweep task (a
module-level function of a dict, the executor's contract); :func:`run_arms` runs a list of
jobs on the run's executor and stores each.

Phase detection (M5, R9, note A14): the end of phase 1 is read twice, as the peak of the
smoothed M2 (cross-class feature cosine) of ``phase_layer`` and as the end of the loss
plateau. A run whose loss never leaves the plateau within the budget never left phase 1:
``left_phase1`` is False, no boundary is invented, and its phase-1 length is reported as
censored at the budget.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.data import DataSpec, DataSplits, LabeledData, load_data
from collapselab.experiments.fd.measurement import (
    DIVERSITY_KEYS,
    M4_SOURCES,
    Trajectory,
    as_arrays,
    class_stratified,
    measure_training,
    probe_indices,
)
from collapselab.experiments.fd.presets import Arms, Directions, Member, Model, Training
from collapselab.experiments.fd.results import store_member
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.metrics.diversity import detect_phases
from collapselab.models import MLP
from collapselab.store import Run
from collapselab.train import TrainConfig, seed_everything

__all__ = [
    "Job",
    "build_model",
    "detect",
    "dry_run",
    "dry_run_directions",
    "measure",
    "run_arms",
    "run_member",
    "subset",
    "train_config",
]

M2_KEY = "feature_cosine_cross_class"
M3_KEY = "gradient_cosine_within_class"


@dataclass(frozen=True)
class Job:
    """One measured run: ``member`` trained with ``seed``, its files read from ``data_dir``,
    on ``device``; ``arm`` names it in the run (``arrays/traj_<arm>.npz``)."""

    member: Member
    arm: str = ""
    seed: int = 0
    data_dir: str | None = None
    device: str = "cpu"

    @classmethod
    def of(cls, context: RunContext, arm: str, member: Member, seed_offset: int = 0) -> Job:
        """The job of ``arm`` in a run: the run's seed (plus ``seed_offset`` for a further
        seed of a repeated arm), data folder and device."""
        return cls(member, arm, context.seed + seed_offset, context.data_dir_text, context.device)

    def config(self) -> dict[str, Any]:
        """The job as a sweep member's config: its fields by name (:func:`run_member`)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def subset(data: LabeledData, index: torch.Tensor, name: str) -> LabeledData:
    """The rows ``index`` of ``data`` as a new :class:`LabeledData`."""
    return LabeledData(data.x[index], data.y[index], data.n_classes, name, dict(data.meta))


def build_model(model: Model, in_dim: int, n_classes: int, seed: int) -> MLP:
    """The bias-free MLP of ``model``, its initial weights drawn after seeding with ``seed``."""
    seed_everything(seed)
    return MLP(
        in_dim,
        n_classes,
        width=model.width,
        depth=model.depth,
        activation=model.activation,
        negative_slope=model.negative_slope,
        norm=model.norm,
        gamma=model.gamma,
    )


def train_config(training: Training, n_train: int, seed: int, device: str) -> TrainConfig:
    """Plain SGD (momentum, the paper's L2 as weight decay ``2λ``) for ``iterations`` steps
    (the epochs that cover them; the recorder stops at the budget); no checkpoints, one
    evaluation at the end."""
    bs = training.batch_size
    epochs = max(1, math.ceil(training.iterations / math.ceil(n_train / bs)))
    return TrainConfig(
        epochs=epochs,
        lr=training.lr,
        batch_size=bs,
        momentum=training.momentum,
        weight_decay=2.0 * training.l2,
        seed=seed,
        device=device,
        checkpoint_every=0,
        eval_every=epochs,
        log_initial=False,
    )


def detect(trajectory: Trajectory, member: Member) -> dict[str, float]:
    """Phase detection on a trajectory (module docstring): ``m2_peak_step``,
    ``plateau_end`` (-1: never), ``left_phase1`` (0/1), ``phase1_length`` (the plateau end,
    or the last measured step when the run never left phase 1), ``m2_peak_step`` (the
    smoothed M2 maximum), ``m2_peak_then_fell`` (0/1: M2 fell after it, the library's M2
    criterion of a phase-1 end), and M2/M3 at the start, at their peak and at the end."""
    layer, measurement = member.phase_layer_name, member.measurement
    steps, loss = trajectory.steps, trajectory.curve("loss")
    m2 = trajectory.curve(M2_KEY, layer)
    m3 = trajectory.curve(M3_KEY, layer)
    finite = np.isfinite(loss) & np.isfinite(m2)
    if finite.sum() < 2:
        return {
            "left_phase1": 0.0,
            "plateau_end": -1.0,
            "m2_peak_step": float("nan"),
            "phase1_length": float(steps[-1]) if steps.size else float("nan"),
        }
    s, lo, m = steps[finite], loss[finite], m2[finite]
    found = detect_phases(
        s, m, lo, window=measurement.smooth, loss_drop=measurement.loss_drop, relative=True
    )
    left = found.left_phase1
    peak = float(s[int(np.argmax(found.smoothed))])
    m3f = np.nan_to_num(m3[finite], nan=-np.inf)
    return {
        "left_phase1": float(left),
        "plateau_end": float(found.plateau_end) if left else -1.0,
        "m2_peak_step": peak,
        "m2_peak_then_fell": float(found.phase1_end is not None),
        "phase1_length": float(found.plateau_end) if left else float(s[-1]),
        "m2_start": float(m[0]),
        "m2_peak": float(np.max(found.smoothed)),
        "m2_end": float(m[-1]),
        "m3_start": float(m3[finite][0]),
        "m3_peak_step": float(s[int(np.argmax(m3f))]),
        "m3_peak": float(np.max(m3f)),
        "m3_end": float(m3[finite][-1]),
        "loss_start": float(lo[0]),
        "loss_end": float(lo[-1]),
        "budget": float(member.training.iterations),
    }


def _loss_set(train: LabeledData, per_class: int, seed: int) -> LabeledData | None:
    """The fixed loss subset, or ``None`` for ``per_class == 0`` (the probe's loss)."""
    if per_class == 0:
        return None
    indices = class_stratified(train.y, per_class, seed + 2, "the loss subset")
    return subset(train, indices, "loss subset")


def probe_set(train: LabeledData, member: Member, seed: int) -> LabeledData:
    """The fixed class-stratified probe set of ``member`` (drawn with ``seed + 1``)."""
    per_class = member.measurement.probe_per_class
    return subset(train, probe_indices(train, per_class, seed + 1), "probe")


def measure(job: Job) -> dict[str, Any]:
    """Train and measure one job. Returns a flat dict: the trajectory's arrays
    (:func:`~.measurement.as_arrays`), the phase detection as ``phase_<key>`` floats
    (:func:`detect`), ``layers`` and ``linears`` (the measured layer names) and ``stopped``
    (why training stopped early, ``""`` when it did not)."""
    member, seed, measurement = job.member, job.seed, job.member.measurement
    data = load_data(member.data, job.data_dir, seed)
    train = data.train
    depth = member.model.depth
    probe = probe_set(train, member, seed)
    loss_set = _loss_set(train, measurement.loss_per_class, seed)
    cfg = train_config(member.training, int(train.y.numel()), seed, job.device)
    layers = [f"layers.{i}.act" for i in range(depth - 1)]
    linears = [f"layers.{i}.linear" for i in range(depth - 1)]

    def make() -> MLP:
        return build_model(member.model, int(train.x.shape[1]), train.n_classes, seed)

    def locate(first: Trajectory) -> int | None:
        found = detect(first, member)
        return int(found["m2_peak_step"]) if found["left_phase1"] else None

    with serial_threads():
        trajectory, _ = measure_training(
            make,
            data,
            cfg,
            probe,
            loss_set,
            every=measurement.every,
            dense_every=measurement.dense_every,
            half_window=measurement.half_window,
            locate=locate,
            stop=member.training.iterations,
        )
    keys = {k: layers for k in DIVERSITY_KEYS} | {k: linears for k in M4_SOURCES}
    phases = {f"phase_{k}": float(v) for k, v in detect(trajectory, member).items()}
    return {
        **as_arrays(trajectory, keys),
        **phases,
        "layers": layers,
        "linears": linears,
        "stopped": trajectory.stopped or "",
    }


def run_member(config: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep task: :func:`measure` of the :class:`Job` whose fields ``config`` holds
    (:meth:`Job.config`)."""
    return measure(Job(**config))


def run_arms(
    run: Run, context: RunContext, jobs: Sequence[Job], **manifest: Any
) -> dict[str, dict[str, Any]]:
    """Train and measure every job through the sweep executor, store each
    (:func:`~.results.store_member`), record ``manifest`` and the base's phase layer in the
    run's manifest; returns the results by arm."""
    results = run_members(run_member, [job.config() for job in jobs], run, context)
    for job, result in zip(jobs, results, strict=True):
        store_member(run, job.arm, result)
    phase_layer = context.config.base.measurement.phase_layer
    run.update_manifest(phase_layer=phase_layer, **manifest)
    run.flush()
    return {job.arm: result for job, result in zip(jobs, results, strict=True)}


def dry_run(config: Arms, data_dir: str | Path | None = None, seed: int = 0) -> dict[str, Any]:
    """Build what a run of ``config`` would use, without training: every arm's data (from
    local files where it reads them), probe and loss sets, model (one forward pass of a
    batch), optimiser settings and measurement schedule. Returns a JSON-serialisable summary
    per arm; errors (a missing file, a class without samples) propagate with their
    message."""
    summary: dict[str, Any] = {}
    loaded: list[tuple[DataSpec, DataSplits]] = []
    for arm in config.arms:
        member = config.member(arm)
        model, training, measurement = member.model, member.training, member.measurement
        cached = [data for spec, data in loaded if spec == member.data]
        if not cached:
            cached = [load_data(member.data, data_dir, seed)]
            loaded.append((member.data, cached[0]))
        train = cached[0].train
        probe = probe_set(train, member, seed)
        loss_set = _loss_set(train, measurement.loss_per_class, seed)
        net = build_model(model, int(train.x.shape[1]), train.n_classes, seed)
        with torch.no_grad():
            logits = net(train.x[: training.batch_size])
        cfg = train_config(training, int(train.y.numel()), seed, "cpu")
        summary[arm] = {
            "dataset": member.data.name,
            "n_train": int(train.y.numel()),
            "train_class_counts": torch.bincount(train.y, minlength=train.n_classes).tolist(),
            "class_names": list(train.meta.get("class_names") or []),
            "input_dim": int(train.x.shape[1]),
            "depth": model.depth,
            "width": model.width,
            "norm": model.norm,
            "gamma": model.gamma,
            "logits_shape": list(logits.shape),
            "lr": cfg.lr,
            "momentum": cfg.momentum,
            "weight_decay": cfg.weight_decay,
            "batch_size": cfg.batch_size,
            "iterations": training.iterations,
            "epochs": cfg.epochs,
            "probe_size": len(probe),
            "loss_set_size": len(probe if loss_set is None else loss_set),
            "phase_layer": member.phase_layer_name,
            "schedule": {
                "every": measurement.every,
                "dense_every": measurement.dense_every,
                "half_window": measurement.half_window,
            },
        }
    return summary


def dry_run_directions(
    config: Directions, data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """:func:`dry_run` of ``fd-directions``'s baseline, with its analysis settings."""
    summary = dry_run(Arms(base=config.base, arms={"baseline": {}}), data_dir, seed)
    fields = ("analysis_layer", "table_layers", "captures", "top_k", "n_noise")
    return summary | {"analysis": {name: getattr(config, name) for name in fields}}
