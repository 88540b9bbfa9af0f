"""The paper preset without training: build what one (dataset, network) run would use.

:func:`paper_dry_run` assembles, for one of the paper's combinations (note 003 §4.2), the
model, the preprocessed data read from local files, the optimiser and schedule, the
learning-rate grid, the measurement epochs and the decomposition's ``lam`` exactly as the
``paper`` preset's run would, and checks that they fit together (one forward pass of a
few training images through the model, the classifier's input dimension against the
measured layer). Nothing is trained; it is the configuration check for a GPU run.
:func:`dry_run_training` does the same for every arm of a whole configuration (the command
line's ``collapselab reproduce 003 --preset paper --dry-run``: the experiment's
``dry_run``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from collapselab.data import DataSplits
from collapselab.experiments.mse_nc.arms import (
    Arm,
    arms_of,
    build_net,
    decomposition_lambda,
    load_arm_data,
    train_config,
)
from collapselab.experiments.mse_nc.presets import COLLAPSE_PAPER, PAPER_TABLE, CollapsePreset
from collapselab.experiments.mse_nc.sweep import sweep_rates
from collapselab.track import log_spaced_epochs
from collapselab.train import TrainConfig


@dataclass
class PaperDryRun:
    """Everything one paper-preset arm is built from, before training.

    Attributes:
        dataset, net, loss: the combination.
        model: the network (untrained, on the CPU).
        data: the preprocessed training and test splits.
        train_config: the :class:`TrainConfig` at the first grid rate (the sweep changes
            only ``lr``).
        lr_grid: the swept learning rates (grid index, rate).
        milestones: the step schedule's milestones (epochs after which the rate drops).
        lr_schedule: the learning rate of every epoch 1..E at the first grid rate.
        measurement_epochs: the epochs measured (epoch 0, the initial model, is measured
            too).
        lam: the decomposition's ``lam`` (MSE; ``None`` for CE).
        input_shape: one input's shape; feature_dim: the penultimate dimension.
        config: the preset.
    """

    dataset: str
    net: str
    loss: str
    model: nn.Module
    data: DataSplits
    train_config: TrainConfig
    lr_grid: list[tuple[int, float]]
    milestones: tuple[int, ...]
    lr_schedule: list[float]
    measurement_epochs: list[int]
    lam: float | None
    input_shape: tuple[int, ...]
    feature_dim: int
    config: CollapsePreset


def paper_dry_run(
    dataset: str,
    family: str,
    data_dir: str | Path,
    *,
    loss: str = "mse",
    seed: int = 0,
    n_train_per_class: int | None = None,
    config: CollapsePreset = COLLAPSE_PAPER,
    forward: bool = True,
) -> PaperDryRun:
    """Build a paper-preset arm from local files without training it.

    Args:
        dataset: one of :data:`~collapselab.experiments.mse_nc.presets.PAPER_TABLE`'s keys.
        family: ``"vgg"``, ``"resnet"`` or ``"densenet"`` (the table gives the depth).
        data_dir: the directory holding the dataset's files (its standard layout).
        loss: ``"mse"`` or ``"ce"``.
        seed: seed of the subsampling and of the initialisation.
        n_train_per_class: overrides the preset's balanced subset size (small fixture files
            hold fewer images); ``None`` keeps the paper's value.
        config: the preset to use (default: the ``paper`` preset).
        forward: pass two training images through the model and check the logits.
    """
    if dataset not in PAPER_TABLE:
        raise ValueError(f"unknown dataset {dataset!r}; the paper's: {list(PAPER_TABLE)}")
    if family not in PAPER_TABLE[dataset]:
        raise ValueError(f"family must be one of {list(PAPER_TABLE[dataset])}, got {family!r}")
    net = PAPER_TABLE[dataset][family]
    spec = config.datasets[dataset]
    if n_train_per_class is not None:
        options = {**spec.options, "n_train_per_class": n_train_per_class}
        spec = dataclasses.replace(spec, options=options)
    data = load_arm_data(spec, data_dir, seed)
    torch.manual_seed(seed)
    model = build_net(config.nets[net], data.input_shape, data.n_classes)
    arm = Arm(dataset, net, loss, None, config.epochs)
    grid = sweep_rates(config.lr_sweep)
    tc = train_config(config, arm, grid[0][1], seed, "cpu")
    if forward:
        _check_logits(model, data, net)
    measured = _measured_epochs(config, config.epochs)
    return PaperDryRun(
        dataset=dataset,
        net=net,
        loss=loss,
        model=model,
        data=data,
        train_config=tc,
        lr_grid=grid,
        milestones=tc.step_milestones(),
        lr_schedule=[tc.lr_at_epoch(e) for e in range(1, config.epochs + 1)],
        measurement_epochs=measured,
        lam=decomposition_lambda(config, data.n_classes) if loss == "mse" else None,
        input_shape=tuple(data.input_shape),
        feature_dim=int(model.classifier.in_features),
        config=config,
    )


def dry_run_training(
    config: CollapsePreset, *, data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """Build every arm of a preset without training; summarise it.

    Each dataset is read (from local files where file-based) and preprocessed once; each
    (dataset, network) combination's model is built and passes two training images; each
    arm's optimiser schedule and measurement epochs are computed. Returns a JSON-serialisable
    summary: ``datasets`` (name -> ``n_train``, ``n_test``, ``input_shape``, ``n_classes``),
    ``arms`` (key -> ``net``, ``n_parameters``, ``feature_dim``, ``epochs``, ``lr``,
    ``milestones``, ``n_measurements``, ``lam``) and ``lr_grid`` (the swept rates, if any).

    Raises:
        DatasetFileError: a dataset file is missing or malformed.
        ValueError: the preset or a model does not fit the data.
    """
    arms = arms_of(config)
    datasets: dict[str, DataSplits] = {}
    summary: dict[str, Any] = {"datasets": {}, "arms": {}}
    grid = sweep_rates(config.lr_sweep) if config.lr_sweep is not None else []
    summary["lr_grid"] = [lr for _, lr in grid]
    models: dict[str, nn.Module] = {}
    for arm in arms:
        if arm.dataset not in datasets:
            data = load_arm_data(config.datasets[arm.dataset], data_dir, seed)
            datasets[arm.dataset] = data
            summary["datasets"][arm.dataset] = {
                "n_train": len(data.train),
                "n_test": len(data.test),
                "input_shape": list(data.input_shape),
                "n_classes": data.n_classes,
            }
        data = datasets[arm.dataset]
        if arm.pair not in models:
            torch.manual_seed(seed)
            models[arm.pair] = build_net(config.nets[arm.net], data.input_shape, data.n_classes)
            _check_logits(models[arm.pair], data, arm.net)
        model = models[arm.pair]
        lr = arm.lr if arm.lr is not None else grid[0][1]
        tc = train_config(config, arm, lr, seed, "cpu")
        summary["arms"][arm.key] = {
            "net": arm.net,
            "n_parameters": sum(p.numel() for p in model.parameters()),
            "feature_dim": int(model.classifier.in_features),
            "epochs": arm.epochs,
            "lr": "sweep" if arm.lr is None else arm.lr,
            "milestones": list(tc.step_milestones()),
            "n_measurements": len(_measured_epochs(config, arm.epochs)) + 1,
            "lam": decomposition_lambda(config, data.n_classes) if arm.loss == "mse" else None,
        }
    return summary


def _check_logits(model: nn.Module, data: DataSplits, net: str) -> None:
    """Two training images through ``model`` in eval mode: logits of the right shape."""
    model.eval()
    with torch.no_grad():
        logits = model(data.train.x[:2])
    if tuple(logits.shape) != (min(2, len(data.train)), data.n_classes):
        raise ValueError(f"{net} returned logits of shape {tuple(logits.shape)}")


def _measured_epochs(config: CollapsePreset, epochs: int) -> list[int]:
    """The measured epochs after epoch 0 of an arm of ``epochs`` (the preset's schedule)."""
    schedule = config.measure_schedule
    return list(log_spaced_epochs(epochs)) if schedule == "log" else sorted(schedule)
