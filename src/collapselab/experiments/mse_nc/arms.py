"""One training arm of paper 003: a dataset, a network and a loss, measured on a schedule.

An arm trains one network with the paper's optimiser (SGD with momentum, weight decay on
every parameter, step schedule, mini-batches with ``drop_last``) and measures, at the
measurement epochs (note 003 §4.3, scaled to the budget), on the training and the test
split, the penultimate features of the network in eval mode with the two-pass
:class:`~collapselab.track.Monitor`:

* the NC catalogue (``nc1`` = ``Tr(Sigma_W Sigma_B^+)/C``, equinorm, equiangularity,
  maximal equiangularity, self-duality, NCC mismatch) and the output accuracy;
* for MSE arms the decomposition ``L = L_NC1 + L_NC2/3 + L_LS⊥`` with the paper's ``lam``
  equivalent to the training objective (:func:`collapselab.train.mse_lambda`: ``C wd / 2``
  for ``nn.MSELoss()``; note 003 §4.4);
* DeepFool robustness (:mod:`collapselab.probe.robustness`) on a balanced test subset.

Rows are returned in long format with the split prefixed by the arm's key,
``"<dataset>-<net>-<loss>/<split>"`` (e.g. ``"digits-mlp-mse/train"``), so that every arm
of an experiment lives in one run's metric table.

The arms of a :class:`~collapselab.experiments.mse_nc.presets.CollapsePreset` are
:func:`arms_of` it; their data is :func:`arm_data` (:func:`~collapselab.data.load_data`
of the preset's :class:`~collapselab.data.DataSpec`, kept per process: every arm of a
dataset, and every point of an arm's learning-rate sweep, trains on the same data).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from collapselab.data import DataSpec, DataSplits, balanced_subset, load_data
from collapselab.experiments.mse_nc.presets import CollapsePreset, Net, Robustness
from collapselab.families import MSE
from collapselab.models import build_model
from collapselab.probe.robustness import deepfool_robustness
from collapselab.track import Monitor
from collapselab.train import (
    TrainConfig,
    TrainResult,
    mse_lambda,
    seed_everything,
    train,
    train_ensemble,
)

NC_METRICS = (
    "nc1",
    "nc2_equinorm_means",
    "nc2_equinorm_classifiers",
    "nc2_equiangle_means",
    "nc2_equiangle_classifiers",
    "nc2_maxangle_means",
    "nc2_maxangle_classifiers",
    "nc3_self_duality",
    "nc4_ncc_mismatch",
)
"""The NC metrics every arm records on its penultimate features."""


def arm_key(dataset: str, net: str, loss: str) -> str:
    """``"<dataset>-<net>-<loss>"``: the arm's name and its split prefix."""
    return f"{dataset}-{net}-{loss}"


def split_name(key: str, split: str) -> str:
    """The split label of an arm's rows: ``"<key>/<split>"``."""
    return f"{key}/{split}"


@dataclass(frozen=True)
class Arm:
    """A (dataset, net, loss) combination of a configuration, with its learning rate rule.

    Attributes:
        dataset, net: keys into the preset's ``datasets`` and ``nets``.
        loss: ``"mse"`` or ``"ce"``.
        lr: a fixed learning rate, or ``None`` to select it by the sweep.
        epochs: the training budget of this arm.
    """

    dataset: str
    net: str
    loss: str
    lr: float | None
    epochs: int

    @property
    def key(self) -> str:
        return arm_key(self.dataset, self.net, self.loss)

    @property
    def pair(self) -> str:
        """``"<dataset>-<net>"``: what the MSE and CE arms of a combination share."""
        return f"{self.dataset}-{self.net}"

    def to_dict(self) -> dict[str, Any]:
        """The arm as plain data (the run's plan in its manifest; ``Arm(**d)`` reads it)."""
        return dataclasses.asdict(self)


def arms_of(config: CollapsePreset) -> list[Arm]:
    """The arms of a preset, in order (combination-major, then loss).

    Raises ``ValueError`` when two arms share a (dataset, net, loss) key.
    """
    out = [
        Arm(c.dataset, c.net, loss, c.rate(loss), config.epochs if c.epochs is None else c.epochs)
        for c in config.arms
        for loss in config.losses
    ]
    keys = [a.key for a in out]
    if len(set(keys)) != len(keys):
        raise ValueError(f"arms repeat a (dataset, net, loss) combination: {keys}")
    return out


# ---------------------------------------------------------------------------- data
def arm_data(spec: DataSpec, data_dir: str | None, seed: int) -> DataSplits:
    """The data of ``spec`` (:func:`~collapselab.data.load_data`), loaded once per process,
    spec, data directory and seed: every arm of a dataset and every point of an arm's sweep
    trains on the same data (:func:`load_arm_data`, cached)."""
    return _cached_data(_SpecKey(json.dumps(spec.to_dict(), sort_keys=True), spec), data_dir,
                        seed)  # fmt: skip


def load_arm_data(spec: DataSpec, data_dir: str | Path | None, seed: int) -> DataSplits:
    """The data of ``spec`` (:func:`~collapselab.data.load_data`). Paper 003 measures on the
    test split too: a dataset without one is refused."""
    data = load_data(spec, data_dir, seed)
    if data.test is None:
        raise ValueError(f"dataset {spec.name!r} has no test split; paper 003 needs one")
    return data


def forget_data() -> None:
    """Drop the data :func:`arm_data` keeps (a run calls it when it ends, so that the
    process does not hold its datasets afterwards)."""
    _cached_data.cache_clear()


@dataclass(frozen=True)
class _SpecKey:
    """A :class:`DataSpec` as a cache key: compared and hashed by its recorded text (its
    options are a dict, so the spec itself is not hashable)."""

    text: str
    spec: DataSpec = dataclasses.field(compare=False, hash=False)


@functools.lru_cache(maxsize=2)
def _cached_data(key: _SpecKey, data_dir: str | None, seed: int) -> DataSplits:
    return load_arm_data(key.spec, data_dir, seed)


# ------------------------------------------------------------------------- a network
def build_net(net: Net, input_shape: Sequence[int], n_classes: int) -> nn.Module:
    """The network ``net`` for inputs of ``input_shape`` and ``n_classes``.

    Vector models (``mlp``) get ``in_dim = prod(input_shape)``; convolutional ones get
    ``in_channels = input_shape[0]``.
    """
    kwargs = dict(net.kwargs)
    if net.name.lower() == "mlp":
        kwargs.setdefault("in_dim", int(math.prod(input_shape)))
    else:
        if len(input_shape) != 3:
            raise ValueError(
                f"net {net.name!r} needs images (C, H, W); the dataset gives inputs of shape "
                f"{tuple(input_shape)}"
            )
        kwargs.setdefault("in_channels", int(input_shape[0]))
    kwargs.setdefault("n_classes", int(n_classes))
    return build_model(net.name, **kwargs)


def seeded_net(config: CollapsePreset, arm: Arm, data: DataSplits, seed: int) -> nn.Module:
    """The arm's network initialised from ``seed`` alone (seeded right before it is built),
    so the MSE and CE arms of a combination, and every point of a sweep, start from the
    same weights."""
    seed_everything(seed)
    return build_net(config.nets[arm.net], data.input_shape, data.n_classes)


def train_config(
    config: CollapsePreset, arm: Arm, lr: float, seed: int, device: str
) -> TrainConfig:
    """The :class:`TrainConfig` of an arm: the preset's optimiser, the arm's loss and rate."""
    return TrainConfig(
        epochs=arm.epochs,
        lr=lr,
        batch_size=config.batch_size,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        loss=arm.loss,
        mse_reduction=config.mse_reduction,
        schedule=config.schedule,
        milestones=config.milestones,
        gamma=config.gamma,
        drop_last=config.drop_last,
        seed=seed,
        device=device,
        checkpoint_every=0,
        eval_every=arm.epochs,
        log_initial=False,
    )


def decomposition_lambda(config: CollapsePreset, n_classes: int) -> float:
    """The paper's ``lam`` equivalent to the training objective (note 003 §4.4)."""
    return mse_lambda(config.weight_decay, n_classes, config.mse_reduction)


# ------------------------------------------------------------------------ training
class _Recorder:
    """Training callback: measures at the scheduled epochs and collects prefixed rows."""

    def __init__(
        self,
        monitor: Monitor,
        key: str,
        robustness: Robustness | None,
        probe: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> None:
        self.monitor = monitor
        self.key = key
        self.robustness = robustness
        self.probe = probe
        self.rows: list[dict[str, Any]] = []
        self.final_epoch = 0

    def on_train_start(self, state: Any) -> None:
        self.monitor.set_total_epochs(state.config.epochs)
        self.final_epoch = state.config.epochs
        self._measure(state, 0)

    def on_epoch_end(self, state: Any) -> None:
        self._measure(state, state.epoch)

    def _add(
        self, step: int, epoch: int, split: str, layer: str, metric: str, value: float
    ) -> None:
        self.rows.append(
            {
                "step": step,
                "epoch": epoch,
                "split": split_name(self.key, split),
                "layer": layer,
                "metric": metric,
                "value": float(value),
            }
        )

    def _measure(self, state: Any, epoch: int) -> None:
        before = self.monitor.zero_error_epoch
        results = self.monitor.after_epoch(epoch, step=state.iteration)
        if results is None:
            return
        step = state.iteration
        for split, per_layer in results.items():
            for layer, values in per_layer.items():
                for metric, value in values.items():
                    self._add(step, epoch, split, layer, metric, value)
        self._add(step, epoch, "train", "", "lr", state.config.lr_at_epoch(max(epoch, 1)))
        zero = self.monitor.zero_error_epoch
        if before is None and zero is not None:
            self._add(step, epoch, "train", "", "zero_error_epoch", zero)
        if self._robustness_due(epoch, zero):
            x, y = self.probe
            rob = deepfool_robustness(
                state.model,
                x,
                y,
                overshoot=self.robustness.overshoot,
                max_iter=self.robustness.max_iter,
            )
            for metric, value in rob.as_dict().items():
                self._add(step, epoch, "test", "", metric, value)

    def _robustness_due(self, epoch: int, zero: int | None) -> bool:
        if self.robustness is None or self.probe is None:
            return False
        when = self.robustness.when
        if when == "never":
            return False
        if when == "all":
            return True
        if zero is None:
            return False
        if when == "tpt":
            return epoch >= zero
        return epoch == zero or epoch == self.final_epoch  # "ends"


@dataclass
class ArmOutcome:
    """What training one arm produced: its rows and a summary for the manifest."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any]


def robustness_probe(
    data: DataSplits, robustness: Robustness | None, seed: int
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The balanced test subset DeepFool is run on (``n_test_per_class`` per class)."""
    if robustness is None or robustness.when == "never":
        return None
    n = robustness.n_test_per_class
    test = data.test
    if n is not None:
        counts = test.class_counts()
        n = min(n, int(counts.min()))
        test = balanced_subset(test, n, seed=seed + 2)
    return test.x, test.y


def run_arm(
    config: CollapsePreset,
    arm: Arm,
    data: DataSplits,
    lr: float,
    *,
    seed: int,
    device: str,
    callbacks: Sequence[Any] = (),
) -> ArmOutcome:
    """Train one arm with measurements (from :func:`seeded_net`); its prefixed rows and a
    summary."""
    model = seeded_net(config, arm, data, seed)
    lam = decomposition_lambda(config, data.n_classes) if arm.loss == "mse" else None
    schedule = config.measure_schedule
    monitor = Monitor(
        model,
        data.train,
        data.test,
        layers=[model.penultimate],
        families=["nc", MSE(lam=lam)] if lam is not None else ["nc"],
        schedule=list(schedule) if isinstance(schedule, tuple) else schedule,
        epochs=arm.epochs,
        batch_size=config.measure_batch_size,
        weighting=config.weighting,
    )
    probe = robustness_probe(data, config.robustness, seed)
    recorder = _Recorder(monitor, arm.key, config.robustness, probe)
    cfg = train_config(config, arm, lr, seed, device)
    t0 = time.perf_counter()
    result = train(model, data, cfg, callbacks=[recorder, *callbacks])
    seconds = time.perf_counter() - t0
    if result.failed:
        raise RuntimeError(f"arm {arm.key} (lr={lr:g}) failed: {result.error}")
    final = result.final
    summary = {
        "dataset": arm.dataset,
        "net": arm.net,
        "loss": arm.loss,
        "lr": float(lr),
        "epochs": arm.epochs,
        "layer": model.penultimate,
        "feature_dim": int(model.classifier.in_features),
        "lam": lam,
        "zero_error_epoch": monitor.zero_error_epoch,
        "final_train_accuracy": final.get("train_accuracy"),
        "final_test_accuracy": final.get("test_accuracy"),
        "n_train": len(data.train),
        "n_test": len(data.test),
        "seconds": seconds,
    }
    return ArmOutcome(recorder.rows, summary)


def sweep_point(
    config: CollapsePreset,
    arm: Arm,
    data: DataSplits,
    lr: float,
    *,
    seed: int,
    device: str,
) -> dict[str, float]:
    """Train one sweep point without measurements; final train and test accuracy."""
    model = seeded_net(config, arm, data, seed)
    return _point(lr, train(model, data, train_config(config, arm, lr, seed, device)))


def sweep_points(
    config: CollapsePreset,
    arm: Arm,
    data: DataSplits,
    rates: Sequence[float],
    *,
    seed: int,
    device: str,
) -> list[dict[str, float]]:
    """:func:`sweep_point` at every rate of ``rates``, the networks trained together as one
    batched model (:func:`~collapselab.train.train_ensemble`: each its own rate, the same
    start and data order; float32, so equal to the lone trainings up to the rounding of
    the batched products, stated in docs/mse_nc.md); the points in order."""
    models = [seeded_net(config, arm, data, seed) for _ in rates]
    configs = [train_config(config, arm, lr, seed, device) for lr in rates]
    results = train_ensemble(models, data, configs)
    return [_point(lr, result) for lr, result in zip(rates, results, strict=True)]


def _point(lr: float, result: TrainResult) -> dict[str, float]:
    """A sweep point from its training: final train accuracy and test error, or NaN."""
    if result.failed:  # a diverging rate is a legitimate sweep outcome
        return {"lr": lr, "train_accuracy": math.nan, "test_error": math.nan, "diverged": 1.0}
    final = result.final
    return {
        "lr": lr,
        "train_accuracy": float(final["train_accuracy"]),
        "test_error": 1.0 - float(final["test_accuracy"]),
        "diverged": 0.0,
    }
