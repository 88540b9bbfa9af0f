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
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from collapselab.data import DataSplits, Standardize, balanced_subset, load_dataset, pad_to_size
from collapselab.families import MSE
from collapselab.models import build_model
from collapselab.probe.robustness import deepfool_robustness
from collapselab.track import Monitor
from collapselab.train import TrainConfig, mse_lambda, seed_everything, train

LOSSES = ("mse", "ce")
ROBUSTNESS_WHEN = ("tpt", "all", "ends", "never")
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
DECOMPOSITION = ("mse_loss", "mse_nc1_term", "mse_nc23_term", "mse_ls_perp")


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)`` (``None``: unchanged), then restore.

    The quick presets' networks are tiny: on a 2-core CPU shared with other work, torch's
    thread pool costs more in contention than it gains (a factor of several measured on
    128-wide layers), so they run single-threaded.
    """
    if n is None:
        yield
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"torch_threads must be a positive int or None, got {n!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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
        dataset, net: keys into the configuration's ``datasets`` and ``nets``.
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


def _positive_float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{what} must be a positive number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return float(value)


def arms_of(config: Mapping[str, Any]) -> list[Arm]:
    """The arms of a training configuration, in order (combination-major, then loss).

    Raises ``ValueError`` naming the entry when a dataset, net, loss or rate is invalid.
    """
    for key in ("datasets", "nets", "arms", "losses", "train"):
        if key not in config:
            raise ValueError(f"the configuration lacks {key!r}")
    losses = list(config["losses"])
    bad = [loss for loss in losses if loss not in LOSSES]
    if bad or not losses:
        raise ValueError(f"losses must be a non-empty subset of {LOSSES}, got {losses}")
    out: list[Arm] = []
    for i, entry in enumerate(config["arms"]):
        where = f"arms[{i}]"
        dataset, net = entry.get("dataset"), entry.get("net")
        if dataset not in config["datasets"]:
            raise ValueError(
                f"{where}: unknown dataset {dataset!r}; defined: {list(config['datasets'])}"
            )
        if net not in config["nets"]:
            raise ValueError(f"{where}: unknown net {net!r}; defined: {list(config['nets'])}")
        epochs = entry.get("epochs", config["train"]["epochs"])
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise ValueError(f"{where}: epochs must be a positive int, got {epochs!r}")
        for loss in losses:
            rule = entry.get("lr")
            if isinstance(rule, Mapping):
                if loss not in rule:
                    raise ValueError(f"{where}: lr gives no rate for loss {loss!r}")
                rule = rule[loss]
            if rule == "sweep":
                lr = None
            else:
                lr = _positive_float(rule, f"{where}: lr")
            out.append(Arm(dataset, net, loss, lr, epochs))
    keys = [a.key for a in out]
    if len(set(keys)) != len(keys):
        raise ValueError(f"arms repeat a (dataset, net, loss) combination: {keys}")
    return out


# ---------------------------------------------------------------------------- data
def build_data(spec: Mapping[str, Any], data_dir: str | Path | None, seed: int) -> DataSplits:
    """Load and preprocess one dataset as its configuration entry describes.

    Order (note 003 §4.1): load (the file readers subsample balanced classes with
    ``options.n_train_per_class``), balanced subsets ``n_train_per_class`` /
    ``n_test_per_class`` when given, zero-padding to ``pad_to`` (before standardising, so
    the border takes the background value), then per-channel standardisation with the
    training statistics when ``standardize``.
    """
    data = load_dataset(spec["name"], data_dir=data_dir, seed=seed, **dict(spec.get("options", {})))
    n_train, n_test = spec.get("n_train_per_class"), spec.get("n_test_per_class")
    if n_train is not None:
        data = balanced_subset(data, n_train, seed=seed, n_test_per_class=n_test)
    elif n_test is not None and data.test is not None:
        data = DataSplits(data.train, balanced_subset(data.test, n_test, seed=seed + 1))
    if spec.get("pad_to") is not None:
        data = pad_to_size(data, int(spec["pad_to"]))
    if spec.get("standardize"):
        data = Standardize().fit_apply(data)
    if data.test is None:
        raise ValueError(f"dataset {spec['name']!r} has no test split; paper 003 needs one")
    return data


def build_net(spec: Mapping[str, Any], input_shape: Sequence[int], n_classes: int) -> nn.Module:
    """The network of a ``nets`` entry for inputs of ``input_shape`` and ``n_classes``.

    Vector models (``mlp``) get ``in_dim = prod(input_shape)``; convolutional ones get
    ``in_channels = input_shape[0]``.
    """
    kwargs = dict(spec.get("kwargs", {}))
    name = str(spec["name"])
    if name.lower() == "mlp":
        kwargs.setdefault("in_dim", int(math.prod(input_shape)))
    else:
        if len(input_shape) != 3:
            raise ValueError(
                f"net {name!r} needs images (C, H, W); the dataset gives inputs of shape "
                f"{tuple(input_shape)}"
            )
        kwargs.setdefault("in_channels", int(input_shape[0]))
    kwargs.setdefault("n_classes", int(n_classes))
    return build_model(name, **kwargs)


def train_config(
    config: Mapping[str, Any], arm: Arm, lr: float, seed: int, device: str
) -> TrainConfig:
    """The :class:`TrainConfig` of an arm: the shared ``train`` settings, its loss and rate."""
    t = config["train"]
    milestones = t.get("milestones")
    return TrainConfig(
        epochs=arm.epochs,
        lr=float(lr),
        batch_size=int(t["batch_size"]),
        momentum=float(t["momentum"]),
        weight_decay=float(t["weight_decay"]),
        loss=arm.loss,
        mse_reduction=t.get("mse_reduction", "mean"),
        schedule=t.get("schedule", "step"),
        milestones=None if milestones is None else tuple(milestones),
        gamma=float(t.get("gamma", 0.1)),
        drop_last=bool(t.get("drop_last", True)),
        seed=seed,
        device=device,
        checkpoint_every=0,
        eval_every=arm.epochs,
        log_initial=False,
    )


def decomposition_lambda(config: Mapping[str, Any], n_classes: int) -> float:
    """The paper's ``lam`` equivalent to the training objective (note 003 §4.4)."""
    t = config["train"]
    return mse_lambda(float(t["weight_decay"]), n_classes, t.get("mse_reduction", "mean"))


# ------------------------------------------------------------------------ training
class _Recorder:
    """Training callback: measures at the scheduled epochs and collects prefixed rows."""

    def __init__(
        self,
        monitor: Monitor,
        key: str,
        robustness: Mapping[str, Any] | None,
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
                overshoot=float(self.robustness["overshoot"]),
                max_iter=int(self.robustness["max_iter"]),
            )
            for metric, value in rob.as_dict().items():
                self._add(step, epoch, "test", "", metric, value)

    def _robustness_due(self, epoch: int, zero: int | None) -> bool:
        if self.robustness is None or self.probe is None:
            return False
        when = self.robustness.get("when", "tpt")
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
    data: DataSplits, spec: Mapping[str, Any] | None, seed: int
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The balanced test subset DeepFool is run on (``n_test_per_class`` per class)."""
    if spec is None or spec.get("when", "tpt") == "never":
        return None
    if spec.get("when", "tpt") not in ROBUSTNESS_WHEN:
        raise ValueError(f"robustness.when must be one of {ROBUSTNESS_WHEN}, got {spec['when']!r}")
    n = spec.get("n_test_per_class")
    test = data.test
    if n is not None:
        counts = test.class_counts()
        n = min(int(n), int(counts.min()))
        test = balanced_subset(test, n, seed=seed + 2)
    return test.x, test.y


def run_arm(
    config: Mapping[str, Any],
    arm: Arm,
    data: DataSplits,
    lr: float,
    *,
    seed: int,
    device: str,
    callbacks: Sequence[Any] = (),
) -> ArmOutcome:
    """Train one arm with measurements; returns its prefixed rows and a summary.

    The network is initialised from ``seed`` alone (seeded right before it is built), so the
    MSE and CE arms of a combination, and every point of a sweep, start from the same weights.
    """
    seed_everything(seed)
    model = build_net(config["nets"][arm.net], data.input_shape, data.n_classes)
    lam = decomposition_lambda(config, data.n_classes) if arm.loss == "mse" else None
    measure = config.get("measure", {})
    schedule = measure.get("schedule", "log")
    monitor = Monitor(
        model,
        data.train,
        data.test,
        layers=[model.penultimate],
        families=["nc", MSE(lam=lam)] if lam is not None else ["nc"],
        schedule=list(schedule) if isinstance(schedule, (list, tuple)) else schedule,
        epochs=arm.epochs,
        batch_size=int(measure.get("batch_size", 512)),
        weighting=config.get("weighting", "sample"),
    )
    probe = robustness_probe(data, config.get("robustness"), seed)
    recorder = _Recorder(monitor, arm.key, config.get("robustness"), probe)
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
    config: Mapping[str, Any],
    arm: Arm,
    data: DataSplits,
    lr: float,
    *,
    seed: int,
    device: str,
) -> dict[str, float]:
    """Train one sweep point without measurements; final train and test accuracy."""
    seed_everything(seed)
    model = build_net(config["nets"][arm.net], data.input_shape, data.n_classes)
    result = train(model, data, train_config(config, arm, lr, seed, device))
    if result.failed:  # a diverging rate is a legitimate sweep outcome
        return {"lr": lr, "train_accuracy": math.nan, "test_error": math.nan, "diverged": 1.0}
    final = result.final
    return {
        "lr": lr,
        "train_accuracy": float(final["train_accuracy"]),
        "test_error": 1.0 - float(final["test_accuracy"]),
        "diverged": 0.0,
    }
