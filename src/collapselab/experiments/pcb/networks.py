r"""Networks of paper 002's empirical experiments trained by minibatch SGD (§4, App. D).

The deep linear experiments train by exact full-batch GD in the PC frame
(:mod:`~collapselab.experiments.pcb.training`); Figs. 4d, 8, 9, 11 and 13 train ordinary
networks the way the paper did: plain SGD (no momentum, no weight decay), cross-entropy,
minibatches, a constant learning rate, through :func:`collapselab.train.train`. One
member of an ensemble is one call of :func:`train_network`; it records, at every epoch
``e = 1..E`` (and at ``e = 0``, the initialisation), the training and test accuracy and,
with ``record_correct``, which training examples are classified correctly (``(E, n)``: the
input of :func:`~collapselab.metrics.pc_bias.accessibility`, which averages over epochs
``1..E``).

A network is given by ``config["net"]``:

* ``{"kind": "mlp", "width": h, "depth": L}``: :class:`~collapselab.models.MLP` with biases;
* ``{"kind": "deep_linear", "hidden": [m, ...]}``: :class:`~collapselab.models.DeepLinear`
  (Glorot uniform, the paper's linear FC nets; no dropout, note 002 §7 item 10);
* ``{"kind": "st_vgg", "width_multiplier": w, "linear": False}``:
  :class:`~collapselab.models.StVGG` on the images (square, ``channels`` channels) whose
  flattened, standardised pixels the data holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from collapselab.data.dataset import DataSplits, LabeledData
from collapselab.experiments.pcb._common import Inputs
from collapselab.models import MLP, DeepLinear, StVGG
from collapselab.train import TrainConfig, seed_everything, train

__all__ = ["build_network", "image_shape", "member_seed", "train_network"]


def image_shape(q: int, channels: int) -> tuple[int, int, int]:
    """``(C, H, W)`` of square images with ``q`` flattened pixels over ``channels``."""
    side = math.isqrt(q // channels) if q % channels == 0 else 0
    if side * side * channels != q:
        raise ValueError(f"{q} inputs are not {channels}-channel square images")
    return channels, side, side


def build_network(spec: Mapping[str, Any], q: int, n_classes: int) -> nn.Module:
    """The network of ``spec`` (module docstring) for ``q`` inputs and ``n_classes``."""
    kind = spec["kind"]
    if kind == "mlp":
        return MLP(q, n_classes, int(spec["width"]), int(spec["depth"]), bias=True)
    if kind == "deep_linear":
        return DeepLinear([q, *[int(m) for m in spec["hidden"]], n_classes], init="glorot_uniform")
    if kind == "st_vgg":
        channels, side, _ = image_shape(q, int(spec.get("channels", 1)))
        return StVGG(
            n_classes,
            in_channels=channels,
            linear=bool(spec.get("linear", False)),
            input_size=side,
            width_multiplier=float(spec.get("width_multiplier", 1.0)),
        )
    raise ValueError(f"unknown network kind {kind!r}; expected mlp, deep_linear or st_vgg")


def member_seed(config: Mapping[str, Any]) -> int:
    """The initialisation and batch-order seed of ``config["member"]`` under run seed
    ``config["seed"]``."""
    return 1000 * int(config.get("seed", 0)) + int(config["member"])


def _tensors(x: np.ndarray, spec: Mapping[str, Any]) -> torch.Tensor:
    t = torch.as_tensor(x, dtype=torch.float32)
    if spec["kind"] == "st_vgg":
        t = t.reshape(len(t), *image_shape(x.shape[1], int(spec.get("channels", 1))))
    return t


class _Recorder:
    """Per-epoch accuracies (and training correctness) of the model being trained."""

    def __init__(self, x, y, x_test, y_test, record_correct: bool) -> None:
        self.data = (x, y, x_test, y_test)
        self.record_correct = record_correct
        self.train_accuracy: list[float] = []
        self.test_accuracy: list[float] = []
        self.correct: list[np.ndarray] = []

    def record(self, model: nn.Module, initial: bool = False) -> None:
        x, y, x_test, y_test = self.data
        was_training = model.training
        model.eval()
        with torch.no_grad():
            hit = (model(x).argmax(1) == y).numpy()
            test = float((model(x_test).argmax(1) == y_test).double().mean())
        model.train(was_training)
        self.train_accuracy.append(float(hit.mean()))
        self.test_accuracy.append(test)
        if self.record_correct and not initial:
            self.correct.append(hit)

    def on_epoch_end(self, state) -> None:
        self.record(state.model)


def train_network(
    config: Mapping[str, Any], inputs: Inputs, callbacks: Sequence[Any] = ()
) -> tuple[nn.Module, dict[str, Any]]:
    """Train member ``config["member"]`` (seed :func:`member_seed`) on ``inputs`` by plain
    SGD with cross-entropy: ``epochs``, ``lr``, ``batch_size`` of ``config``, the network
    ``config["net"]``. Returns the trained model (eval mode) and ``train_accuracy``,
    ``test_accuracy`` ``(E + 1,)`` (epoch 0 first) and, with ``record_correct``,
    ``correct`` ``(E, n)`` bool. ``callbacks`` get every epoch's end after the recording.
    A non-finite loss stops training: the epochs recorded so far are returned and
    ``stopped`` says why."""
    spec = config["net"]
    seed = member_seed(config)
    seed_everything(seed)
    model = build_network(spec, inputs.x.shape[1], inputs.n_classes)
    x, x_test = _tensors(inputs.x, spec), _tensors(inputs.x_test, spec)
    y, y_test = torch.as_tensor(inputs.y), torch.as_tensor(inputs.y_test)
    recorder = _Recorder(x, y, x_test, y_test, bool(config.get("record_correct")))
    recorder.record(model, initial=True)
    epochs = int(config["epochs"])
    data = DataSplits(
        LabeledData(x, y, inputs.n_classes, inputs.name, {}),
        LabeledData(x_test, y_test, inputs.n_classes, inputs.name, {}),
    )
    settings = TrainConfig(
        epochs=epochs,
        lr=float(config["lr"]),
        batch_size=int(config["batch_size"]),
        loss="ce",
        schedule="constant",
        seed=seed,
        checkpoint_every=0,
        eval_every=max(epochs, 1),
        log_initial=False,
    )
    result = train(model, data, settings, [recorder, *callbacks])
    model.eval()
    out: dict[str, Any] = {
        "train_accuracy": np.asarray(recorder.train_accuracy),
        "test_accuracy": np.asarray(recorder.test_accuracy),
        "stopped": result.stopped_reason or "",
    }
    if recorder.record_correct:
        out["correct"] = np.asarray(recorder.correct, dtype=bool).reshape(-1, len(inputs.y))
    return model, out
