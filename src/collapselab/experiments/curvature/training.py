"""The run: train a network on images, measuring its curvature on a schedule.

One run trains one network (:mod:`~collapselab.experiments.curvature.networks`) with one
loss and records, with a :class:`~collapselab.track.Monitor`,

* at every epoch of ``curvature_epochs`` the whole :class:`~collapselab.families.Curvature`
  family on every weight layer (rows per layer, spectra in ``arrays/curvature_step*.npz``),
  on a fixed balanced subset of ``curvature_samples`` training images;
* NC1 and the NCC accuracy of the feature layers at the same epochs and, with
  ``nc_every = n``, at every n-th epoch as well (the collapse the curvature structure is
  explained by, paper 004);
* the training loop's loss and accuracy every epoch.

The manifest records the data used (``curvature.data``), the class count ``K``, the
weight layers and whether the run entered the terminal phase
(:mod:`~collapselab.experiments.curvature.terminal`: ``curvature.terminal_phase``, and its
one-line ``terminal_phase`` for the report), and how far the trained network is from a
critical point of its regularised objective (:func:`collapselab.train.stationarity`, in
total and of the two weights the claims read: ``curvature.stationarity``).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from collapselab.experiments.curvature.networks import build_network, load_data
from collapselab.experiments.curvature.terminal import terminal_phase
from collapselab.experiments.registry import RunContext
from collapselab.families import NC
from collapselab.families.builtin import Curvature
from collapselab.store import Run
from collapselab.track import Monitor, Schedule
from collapselab.train import TrainConfig, seed_everything, stationarity, train


def run_curvature(run: Run, context: RunContext) -> None:
    """Train and measure (module docstring)."""
    config = context.config
    data, used = load_data(config, context.data_dir, context.seed)
    seed_everything(context.seed)
    model = build_network(config, data).to(context.device)
    K = data.n_classes
    curvature_epochs = [int(e) for e in config["curvature_epochs"]]
    family = Curvature(
        config.get("curvature_keys"),
        schedule=Schedule.build(
            [e for e in curvature_epochs if e > 0], initial=0 in curvature_epochs
        ),
        density_steps=int(config.get("density_steps", 40)),
        samples=int(config["curvature_samples"]),
        batch_size=int(config["curvature_batch_size"]),
        centring=config["centring"],
        fraction_k=config.get("fraction_k"),
        tol=float(config["tol"]),
        layers=config.get("curvature_layers") or "auto",
    )
    weight_layers = [
        n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear | torch.nn.Conv2d)
    ]
    run.update_manifest(
        curvature={
            "data": used,
            "n_classes": K,
            "n_train": len(data.train),
            "weight_layers": weight_layers,
            "net": config["net"],
            "loss": config["loss"],
        }
    )
    monitor = Monitor(
        model,
        data.train,
        families=[NC(["nc1", "ncc_accuracy"]), family],
        schedule=measurement_epochs(config),
        epochs=int(config["epochs"]),
        initial=0 in config["curvature_epochs"],
        run=run,
        loss=config["loss"],
        batch_size=1024,
    )
    train_config = TrainConfig(
        epochs=int(config["epochs"]),
        lr=float(config["lr"]),
        batch_size=int(config["batch_size"]),
        momentum=float(config["momentum"]),
        weight_decay=float(config["weight_decay"]),
        loss=config["loss"],
        schedule="step",
        milestones=tuple(config["milestones"]),
        seed=context.seed,
        device=context.device,
        checkpoint_every=int(config.get("checkpoint_every", 1)),
    )
    threads = config.get("cpu_threads")
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
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
    record = terminal_phase(run.metrics(), model.penultimate, max(config["curvature_epochs"]))
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


def curvature_dry_run(
    config: dict[str, Any], data_dir: str | None = None, seed: int = 0
) -> dict[str, Any]:
    """Build the run's data and network from the local files without training (the paper
    preset's check) and say what it would measure: the training set's size and class
    counts, the input shape, the weights of every measured layer (the dimension of its
    Hessian) and the eigenpairs per spectrum (``2K² + K``); one batch goes through the
    network."""
    data, used = load_data(config, data_dir, seed)
    model = build_network(config, data)
    modules = dict(model.named_modules())
    weighted = [n for n, m in modules.items() if isinstance(m, torch.nn.Linear | torch.nn.Conv2d)]
    layers = config.get("curvature_layers") or weighted
    unknown = [name for name in layers if name not in weighted]
    if unknown:
        raise ValueError(f"curvature_layers {unknown} are not weight layers of the "
                         f"{config['net']} network; its weight layers: {weighted}")  # fmt: skip
    with torch.no_grad():
        model.eval()(data.train.x[: int(config["batch_size"])])
    K = data.n_classes
    return {"dataset": used["dataset"], "n_train": len(data.train),
            "train_class_counts": torch.bincount(data.train.y, minlength=K).tolist(),
            "input_shape": list(data.input_shape),
            "hessian_sizes": {name: modules[name].weight.numel() for name in layers},
            "eigenpairs": 2 * K * K + K, "epochs": int(config["epochs"])}  # fmt: skip


def measurement_epochs(config: dict[str, Any]) -> list[int]:
    """The Monitor's epochs after the start: the curvature epochs and, with ``nc_every =
    n``, every n-th epoch (where only NC is measured: the curvature family keeps to its
    own epochs)."""
    epochs = {int(e) for e in config["curvature_epochs"] if e > 0}
    every = config.get("nc_every")
    if every:
        epochs |= set(range(int(every), int(config["epochs"]) + 1, int(every)))
    return sorted(epochs)


def final_value(results: Any, metric: str, layer: str) -> float:
    """The value of ``metric`` at ``layer`` at the largest step (train split)."""
    rows = results.rows(metric, "train", layer)
    return float(rows.sort_values("step", kind="stable")["value"].iloc[-1])
