r"""One measured training run of paper 000's MLP, as a function of a plain config (a sweep
member), and its phase detection.

A config (every preset entry of :mod:`collapselab.experiments.fd.presets`) holds:

* data: ``dataset`` (``"fashion_mnist"`` from local files, ``"mnist"``, ``"cifar10"``,
  ``"tiny_imagenet"``, ``"digits"`` bundled, or ``"clustered"``: a Gaussian mixture with
  ``clusters`` clusters per class in ``dim`` dimensions, means on a sphere of radius
  ``mean_scale``, unit noise), ``n_per_class`` training samples per class (``None``: all),
  optionally ``class_names`` (a class subset of a file dataset that names its classes:
  Tiny-ImageNet's 50 of the paper, A.3) and ``crop`` (the central ``crop x crop`` pixels:
  the paper's 32 x 32 crops of Tiny-ImageNet); inputs flattened and standardised with one
  scalar mean and standard deviation of the training set;
* model (R1): ``depth`` linear layers, ``width``, ``activation`` (``relu`` /
  ``leaky_relu`` with ``negative_slope``), ``norm`` (``none`` / ``batchnorm`` / ``norm1``),
  ``gamma`` (variance multiplier of the Xavier-normal init), no bias (Eq. 1);
* training (R2): ``lr``, ``momentum``, ``l2`` (the paper's ``λ`` of ``L + λ‖W‖²``: PyTorch's
  weight decay ``2λ``), ``batch_size``, ``iterations``;
* measurement: ``every``, ``dense_every``, ``half_window`` (:mod:`.measurement`),
  ``probe_per_class``, ``loss_per_class`` (0: the loss and accuracy of the probe set, from
  the Monitor's forward pass, see :class:`.measurement.DiversityRecorder`),
  ``phase_layer`` (the linear layer ``l`` whose output ``F^(l)`` decides the boundary; the
  paper's "third linear layer"),
  ``smooth`` (odd moving-average window in points), ``loss_drop`` (δ as a fraction of the
  initial loss: the plateau ends at the first step where the loss is below ``(1 - δ)`` times
  its initial value).

Phase detection (M5, R9, note A14): the end of phase 1 is read twice, as the peak of the
smoothed M2 (cross-class feature cosine) of ``phase_layer`` and as the end of the loss
plateau. A run whose loss never leaves the plateau within the budget never left phase 1:
``left_phase1`` is False, no boundary is invented, and its phase-1 length is reported as
censored at the budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.data import (
    DataSplits,
    LabeledData,
    center_crop,
    digits,
    gaussian_mixture,
    load_dataset,
)
from collapselab.experiments.fd.measurement import (
    DIVERSITY_KEYS,
    M4_SOURCES,
    Trajectory,
    as_arrays,
    class_stratified,
    measure_training,
    probe_indices,
)
from collapselab.metrics.diversity import detect_phases
from collapselab.models import MLP
from collapselab.train import TrainConfig, seed_everything

__all__ = [
    "FILE_DATASETS",
    "build_model",
    "detect",
    "load_data",
    "run_member",
    "subset",
    "train_config",
]

FILE_DATASETS = ("fashion_mnist", "mnist", "cifar10", "tiny_imagenet")
"""Datasets read from local files (never downloaded)."""

M2_KEY = "feature_cosine_cross_class"
M3_KEY = "gradient_cosine_within_class"


def load_data(config: Mapping[str, Any], data_dir: str | Path | None, seed: int) -> DataSplits:
    """The configured training data, flattened and standardised (one scalar mean and std)."""
    name, n = config["dataset"], config.get("n_per_class")
    if name in FILE_DATASETS:  # n_per_class None: the whole training set
        subset_of = {"class_names": config["class_names"]} if config.get("class_names") else {}
        data = load_dataset(
            name, data_dir=data_dir, seed=seed, n_train_per_class=n, n_test_per_class=1, **subset_of
        )
    elif name == "digits":
        data = digits(n_per_class=n, test_fraction=0.0, seed=seed, standardize=False)
    elif n is None:
        raise ValueError("n_per_class must be given for generated clustered data")
    elif name == "clustered":
        data = gaussian_mixture(
            int(config.get("n_classes", 10)),
            int(config["dim"]),
            int(n),
            clusters_per_class=int(config["clusters"]),
            mean_scale=float(config["mean_scale"]),
            seed=seed,
        )
    else:
        raise ValueError(
            f"dataset must be one of {[*FILE_DATASETS, 'digits', 'clustered']}, got {name!r}"
        )
    if config.get("crop"):
        data = center_crop(data, int(config["crop"]))
    train = data.train
    x = train.x.reshape(train.x.shape[0], -1).double()
    x = ((x - x.mean()) / x.std()).float()
    return DataSplits(LabeledData(x, train.y, train.n_classes, train.name, dict(train.meta)))


def subset(data: LabeledData, index: torch.Tensor, name: str) -> LabeledData:
    """The rows ``index`` of ``data`` as a new :class:`LabeledData`."""
    return LabeledData(data.x[index], data.y[index], data.n_classes, name, dict(data.meta))


def build_model(config: Mapping[str, Any], in_dim: int, n_classes: int, seed: int) -> MLP:
    """The configured bias-free MLP, its initial weights drawn after seeding with ``seed``."""
    seed_everything(seed)
    return MLP(
        in_dim,
        n_classes,
        width=int(config["width"]),
        depth=int(config["depth"]),
        activation=config.get("activation", "relu"),
        negative_slope=float(config.get("negative_slope", 0.01)),
        norm=config.get("norm", "none"),
        gamma=float(config.get("gamma", 1.0)),
    )


def train_config(config: Mapping[str, Any], n_train: int, seed: int, device: str) -> TrainConfig:
    """Plain SGD (momentum, the paper's L2 as weight decay ``2λ``) for ``iterations`` steps
    (the epochs that cover them; the recorder stops at the budget); no checkpoints, one
    evaluation at the end."""
    bs = int(config["batch_size"])
    epochs = max(1, math.ceil(int(config["iterations"]) / math.ceil(n_train / bs)))
    return TrainConfig(
        epochs=epochs,
        lr=float(config["lr"]),
        batch_size=bs,
        momentum=float(config.get("momentum", 0.0)),
        weight_decay=2.0 * float(config.get("l2", 0.0)),
        seed=seed,
        device=device,
        checkpoint_every=0,
        eval_every=epochs,
        log_initial=False,
    )


def _phase_layer(config: Mapping[str, Any], depth: int) -> str:
    layer = int(config["phase_layer"])
    if not 1 <= layer <= depth - 1:
        raise ValueError(
            f"phase_layer must be a hidden linear layer in [1, {depth - 1}] (depth {depth}), "
            f"got {layer}"
        )
    return f"layers.{layer - 1}.act"


def detect(trajectory: Trajectory, config: Mapping[str, Any]) -> dict[str, float]:
    """Phase detection on a trajectory (module docstring): ``m2_peak_step``,
    ``plateau_end`` (-1: never), ``left_phase1`` (0/1), ``phase1_length`` (the plateau end,
    or the last measured step when the run never left phase 1), ``m2_peak_step`` (the
    smoothed M2 maximum), ``m2_peak_then_fell`` (0/1: M2 fell after it, the library's M2
    criterion of a phase-1 end), and M2/M3 at the start, at their peak and at the end."""
    layer = _phase_layer(config, int(config["depth"]))
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
        s,
        m,
        lo,
        window=int(config.get("smooth", 3)),
        loss_drop=float(config["loss_drop"]),
        relative=True,
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
        "budget": float(config["iterations"]),
    }


def _loss_set(train: LabeledData, per_class: int, seed: int) -> LabeledData | None:
    """The fixed loss subset, or ``None`` for ``per_class == 0`` (the probe's loss)."""
    if per_class == 0:
        return None
    indices = class_stratified(train.y, per_class, seed + 2, "the loss subset")
    return subset(train, indices, "loss subset")


def run_member(config: Mapping[str, Any]) -> dict[str, Any]:
    """Train and measure one configuration (a sweep task: a module-level function of a
    plain dict). Returns a flat dict: the trajectory's arrays
    (:func:`~.measurement.as_arrays`), the phase detection as ``phase_<key>`` floats
    (:func:`detect`), ``layers`` and ``linears`` (the measured layer names) and ``stopped``
    (why training stopped early, ``""`` when it did not)."""
    seed = int(config.get("seed", 0))
    data = load_data(config, config.get("data_dir"), seed)
    train = data.train
    depth = int(config["depth"])
    _phase_layer(config, depth)  # a bad layer index fails before training
    probe = subset(train, probe_indices(train, int(config["probe_per_class"]), seed + 1), "probe")
    loss_set = _loss_set(train, int(config["loss_per_class"]), seed)
    cfg = train_config(config, int(train.y.numel()), seed, str(config.get("device", "cpu")))
    layers = [f"layers.{i}.act" for i in range(depth - 1)]
    linears = [f"layers.{i}.linear" for i in range(depth - 1)]

    def make() -> MLP:
        return build_model(config, int(train.x.shape[1]), train.n_classes, seed)

    def locate(first: Trajectory) -> int | None:
        found = detect(first, config)
        return int(found["m2_peak_step"]) if found["left_phase1"] else None

    with serial_threads():
        trajectory, _ = measure_training(
            make,
            data,
            cfg,
            probe,
            loss_set,
            every=int(config["every"]),
            dense_every=int(config["dense_every"]),
            half_window=int(config["half_window"]),
            locate=locate,
            stop=int(config["iterations"]),
        )
    keys = {k: layers for k in DIVERSITY_KEYS} | {k: linears for k in M4_SOURCES}
    phases = {f"phase_{k}": float(v) for k, v in detect(trajectory, config).items()}
    return {
        **as_arrays(trajectory, keys),
        **phases,
        "layers": layers,
        "linears": linears,
        "stopped": trajectory.stopped or "",
    }


def dry_run(
    config: Mapping[str, Any], data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """Build what a run of an experiment config (``base`` and ``arms``) would use, without
    training: every arm's data (from local files where it reads them), probe and loss sets,
    model (one forward pass of a batch), optimiser settings and measurement schedule.
    Returns a JSON-serialisable summary per arm; errors (a missing file, a class without
    samples, a bad ``phase_layer``) propagate with their message."""
    summary: dict[str, Any] = {}
    loaded: dict[tuple, DataSplits] = {}
    for arm, changes in config["arms"].items():
        c = {**config["base"], **changes}
        key = tuple(str(c.get(k)) for k in ("dataset", "n_per_class", "dim", "class_names", "crop"))
        if key not in loaded:
            loaded[key] = load_data(c, data_dir, seed)
        train = loaded[key].train
        depth = int(c["depth"])
        layer = _phase_layer(c, depth)
        probe = probe_indices(train, int(c["probe_per_class"]), seed + 1)
        loss_set = _loss_set(train, int(c["loss_per_class"]), seed)
        model = build_model(c, int(train.x.shape[1]), train.n_classes, seed)
        with torch.no_grad():
            logits = model(train.x[: int(c["batch_size"])])
        cfg = train_config(c, int(train.y.numel()), seed, "cpu")
        summary[arm] = {
            "dataset": c["dataset"],
            "n_train": int(train.y.numel()),
            "train_class_counts": torch.bincount(train.y, minlength=train.n_classes).tolist(),
            "class_names": list(train.meta.get("class_names") or []),
            "input_dim": int(train.x.shape[1]),
            "depth": depth,
            "width": int(c["width"]),
            "norm": c.get("norm", "none"),
            "gamma": float(c.get("gamma", 1.0)),
            "logits_shape": list(logits.shape),
            "lr": cfg.lr,
            "momentum": cfg.momentum,
            "weight_decay": cfg.weight_decay,
            "batch_size": cfg.batch_size,
            "iterations": int(c["iterations"]),
            "epochs": cfg.epochs,
            "probe_size": int(probe.numel()),
            "loss_set_size": int(probe.numel() if loss_set is None else len(loss_set)),
            "phase_layer": layer,
            "schedule": {
                "every": int(c["every"]),
                "dense_every": int(c["dense_every"]),
                "half_window": int(c["half_window"]),
            },
        }
    return summary


def dry_run_directions(
    config: Mapping[str, Any], data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """:func:`dry_run` of ``fd-directions``'s baseline, with its analysis settings."""
    summary = dry_run({"base": config["base"], "arms": {"baseline": {}}}, data_dir, seed)
    depth = int(config["base"]["depth"])
    for ell in (*config["table_layers"], config["analysis_layer"]):
        if not 1 <= int(ell) < depth:
            raise ValueError(f"analysed layers must be in [1, {depth - 1}], got {ell}")
    keys = ("analysis_layer", "table_layers", "captures", "top_k", "n_noise")
    return summary | {"analysis": {k: config[k] for k in keys}}
