"""``curvature-{mlp,conv}-{ce,mse}``: a real network trained on images, its curvature
measured on a schedule (paper 004 and Papyan on real networks).

One run trains one network (:func:`build_network`: a ReLU MLP or :class:`SmallConvNet`) with
one loss on the preset's images (:class:`~collapselab.experiments.dlufm.presets.NetworkPreset`,
its :class:`~collapselab.data.DataSpec` read by :func:`~collapselab.data.load_data`) and
records, with a :class:`~collapselab.track.Monitor`,

* at every epoch of ``curvature_epochs`` the whole :class:`~collapselab.families.Curvature`
  family on every measured weight layer (rows per layer, spectra in
  ``arrays/curvature_step*.npz``), on a fixed balanced subset of ``curvature_samples``
  training images;
* NC1 and the NCC accuracy of the feature layers at the same epochs and, with
  ``nc_every = n``, at every n-th epoch as well (the collapse the curvature structure is
  explained by, paper 004);
* the training loop's loss and accuracy every epoch.

The manifest records the data used (``curvature.data``), the class count ``K``, the
weight layers and whether the run entered the terminal phase
(:mod:`~collapselab.experiments.dlufm.terminal`: ``curvature.terminal_phase``, and its
one-line ``terminal_phase`` for the report), and how far the trained network is from a
critical point of its regularised objective (:func:`collapselab.train.stationarity`, in
total and of the two weights the claims read: ``curvature.stationarity``).
"""

from __future__ import annotations

import copy
import math
from typing import Any, ClassVar

import torch
from torch import nn

from collapselab.data import DataSplits, load_data
from collapselab.experiments.dlufm.presets import NetworkPreset
from collapselab.experiments.dlufm.terminal import terminal_phase
from collapselab.experiments.gpu_hours import Training, forward_flops
from collapselab.experiments.preset import sgd_config
from collapselab.experiments.registry import RunContext
from collapselab.families import NC
from collapselab.families.builtin import Curvature
from collapselab.models import MLP, vgg11
from collapselab.store import Run
from collapselab.track import Monitor, Schedule
from collapselab.train import seed_everything, stationarity, train

__all__ = [
    "SmallConvNet",
    "build_network",
    "measurement_epochs",
    "network_dry_run",
    "run_curvature",
]


class SmallConvNet(nn.Module):
    """``conv(5x5, c1) - ReLU - maxpool 2 - conv(5x5, c2) - ReLU - maxpool 2 - flatten -
    linear(width) - ReLU - classifier`` ('same' padding, biases everywhere).

    Layer convention: ``feature_layers = ["pool1", "pool2", "act3"]``, ``penultimate =
    "act3"``, ``classifier`` the last linear layer.
    """

    def __init__(self, in_shape: tuple[int, ...], n_classes: int, channels: list[int], width: int):
        super().__init__()
        c0, h, w = in_shape
        c1, c2 = channels
        self.conv1 = nn.Conv2d(c0, c1, 5, padding=2)
        self.act1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(c1, c2, 5, padding=2)
        self.act2 = nn.ReLU()
        self.pool2 = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(c2 * (h // 4) * (w // 4), width)
        self.act3 = nn.ReLU()
        self.classifier = nn.Linear(width, n_classes)

    feature_layers: ClassVar[list[str]] = ["pool1", "pool2", "act3"]
    penultimate = "act3"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool1(self.act1(self.conv1(x)))
        h = self.pool2(self.act2(self.conv2(h)))
        return self.classifier(self.act3(self.fc(self.flatten(h))))


def build_network(config: NetworkPreset, data: DataSplits) -> nn.Module:
    """The preset's network for ``data``: ``"mlp"``, ``depth`` linear layers of ``width``
    (3 is 784-width-width-K) with biases, ``"conv"``, :class:`SmallConvNet`, or
    ``"vgg11"``, :func:`~collapselab.models.vgg11` with BatchNorm (Papyan's network for
    Fashion-MNIST; images of at least 32 x 32)."""
    shape = data.input_shape
    if config.net == "mlp":
        return MLP(math.prod(shape), data.n_classes, width=config.width, depth=config.depth,
                   bias=True)  # fmt: skip
    if len(shape) != 3:
        raise ValueError(f"the {config.net} net needs image inputs (C, H, W), got {shape}")
    if config.net == "vgg11":
        return vgg11(shape[0], data.n_classes)
    return SmallConvNet(shape, data.n_classes, list(config.channels), config.width)


def run_curvature(run: Run, context: RunContext) -> None:
    """Train and measure (module docstring)."""
    config: NetworkPreset = context.config
    data = load_data(config.data, context.data_dir, context.seed)
    seed_everything(context.seed)
    model = build_network(config, data).to(context.device)
    K = data.n_classes
    keys, layers = config.curvature_keys, config.curvature_layers
    family = Curvature(
        None if keys is None else list(keys),
        schedule=Schedule.build(
            [e for e in config.curvature_epochs if e > 0], initial=0 in config.curvature_epochs
        ),
        density_steps=config.density_steps,
        samples=config.curvature_samples,
        batch_size=config.curvature_batch_size,
        centring=config.centring,
        fraction_k=config.fraction_k,
        tol=config.tol,
        layers="auto" if layers is None else list(layers),
    )
    weight_layers = [
        n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear | torch.nn.Conv2d)
    ]
    run.update_manifest(
        curvature={
            "data": {"dataset": config.data.name},
            "n_classes": K,
            "n_train": len(data.train),
            "weight_layers": weight_layers,
            "net": config.net,
            "loss": config.loss,
        }
    )
    monitor = Monitor(
        model,
        data.train,
        families=[NC(["nc1", "ncc_accuracy"]), family],
        schedule=measurement_epochs(config),
        epochs=config.epochs,
        initial=0 in config.curvature_epochs,
        run=run,
        loss=config.loss,
        batch_size=1024,
    )
    train_config = sgd_config(
        config,
        loss=config.loss,
        schedule="step",
        milestones=config.milestones,
        seed=context.seed,
        device=context.device,
        checkpoint_every=config.checkpoint_every,
    )
    threads = config.cpu_threads
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        train(
            model,
            data,
            train_config,
            [monitor.callback(), *context.callbacks],
            run=run,
            finish_run=False,
        )
    finally:
        torch.set_num_threads(previous)
    run.flush()
    record = terminal_phase(run.metrics(), model.penultimate, max(config.curvature_epochs))
    # the theorems' point is a critical point of the regularised objective: how far from it
    # the trained network is (float64 copy, the whole training set)
    distance = None  # relative to weight decay: none without it
    if train_config.weight_decay > 0:
        ratios = stationarity(copy.deepcopy(model).double(), data.train, train_config)
        weights = [f"{name}.weight" for name in weight_layers[-2:]]  # the claims' two
        distance = {k: ratios[k] for k in ("total", *weights)}
    run.update_manifest(
        curvature={
            **run.manifest["curvature"],
            "terminal_phase": record,
            "stationarity": distance,
        },
        terminal_phase=record["summary"],
    )


def network_dry_run(
    config: NetworkPreset, data_dir: str | None = None, seed: int = 0
) -> dict[str, Any]:
    """Build the run's data and network from the local files without training (the paper
    preset's check) and say what it would measure: the training set's size and class
    counts, the input shape, the weights of every measured layer (the dimension of its
    Hessian) and the eigenpairs per spectrum (``2K² + K``); one batch goes through the
    network."""
    data = load_data(config.data, data_dir, seed)
    model = build_network(config, data)
    modules = dict(model.named_modules())
    weighted = [n for n, m in modules.items() if isinstance(m, torch.nn.Linear | torch.nn.Conv2d)]
    layers = list(config.curvature_layers or weighted)
    unknown = [name for name in layers if name not in weighted]
    if unknown:
        raise ValueError(f"curvature_layers {unknown} are not weight layers of the "
                         f"{config.net} network; its weight layers: {weighted}")  # fmt: skip
    with torch.no_grad():
        model.eval()(data.train.x[: config.batch_size])
    K, n = data.n_classes, len(data.train)
    work = Training(  # training, and a pass over the training set at every NC measurement
        f"{config.net}, {config.data.name}", forward_flops(model, data.train.x[:1]), n,
        config.epochs, 1, n, len(measurement_epochs(config)) + 1)  # fmt: skip
    return {"dataset": config.data.name, "n_train": n, "net": config.net,
            "parameters": sum(p.numel() for p in model.parameters()),
            "train_class_counts": torch.bincount(data.train.y, minlength=K).tolist(),
            "input_shape": list(data.input_shape),
            "hessian_sizes": {name: modules[name].weight.numel() for name in layers},
            "eigenpairs": 2 * K * K + K, "epochs": config.epochs,
            "gpu_work": [work.to_dict()]}  # fmt: skip


def measurement_epochs(config: NetworkPreset) -> list[int]:
    """The Monitor's epochs after the start: the curvature epochs and, with ``nc_every =
    n``, every n-th epoch (where only NC is measured: the curvature family keeps to its
    own epochs)."""
    epochs = {e for e in config.curvature_epochs if e > 0}
    every = config.nc_every
    if every:
        epochs |= set(range(every, config.epochs + 1, every))
    return sorted(epochs)
