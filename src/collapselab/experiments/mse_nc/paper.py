"""The paper preset without training: build what one (dataset, network) run would use.

:func:`paper_dry_run` assembles, for one of the paper's combinations (note 003 §4.2), the
model, the preprocessed data read from local files, the optimiser and schedule, the
learning-rate grid, the measurement epochs and the decomposition's ``lam`` exactly as the
``paper`` preset's run would, and checks that they fit together (one forward pass of a
few training images through the model, the classifier's input dimension against the
measured layer). Nothing is trained; it is the configuration check for a GPU run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from collapselab.data import DataSplits
from collapselab.experiments.mse_nc.arms import (
    Arm,
    build_data,
    build_net,
    decomposition_lambda,
    train_config,
)
from collapselab.experiments.mse_nc.presets import COLLAPSE_PAPER, PAPER_TABLE
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
        config: the preset's configuration.
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
    config: dict[str, Any]


def paper_dry_run(
    dataset: str,
    family: str,
    data_dir: str | Path,
    *,
    loss: str = "mse",
    seed: int = 0,
    n_train_per_class: int | None = None,
    config: Mapping[str, Any] | None = None,
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
        config: the configuration to use (default: the ``paper`` preset).
        forward: pass two training images through the model and check the logits.
    """
    cfg = dict(COLLAPSE_PAPER if config is None else config)
    if dataset not in PAPER_TABLE:
        raise ValueError(f"unknown dataset {dataset!r}; the paper's: {list(PAPER_TABLE)}")
    if family not in PAPER_TABLE[dataset]:
        raise ValueError(f"family must be one of {list(PAPER_TABLE[dataset])}, got {family!r}")
    net = PAPER_TABLE[dataset][family]
    spec = dict(cfg["datasets"][dataset])
    if n_train_per_class is not None:
        spec["options"] = {**spec.get("options", {}), "n_train_per_class": n_train_per_class}
    data = build_data(spec, data_dir, seed)
    torch.manual_seed(seed)
    model = build_net(cfg["nets"][net], data.input_shape, data.n_classes)
    epochs = int(cfg["train"]["epochs"])
    arm = Arm(dataset, net, loss, None, epochs)
    grid = sweep_rates(cfg["lr_sweep"])
    tc = train_config(cfg, arm, grid[0][1], seed, "cpu")
    if forward:
        model.eval()
        with torch.no_grad():
            logits = model(data.train.x[:2])
        if tuple(logits.shape) != (min(2, len(data.train)), data.n_classes):
            raise ValueError(f"{net} returned logits of shape {tuple(logits.shape)}")
    schedule = cfg.get("measure", {}).get("schedule", "log")
    epochs_measured = log_spaced_epochs(epochs) if schedule == "log" else sorted(schedule)
    return PaperDryRun(
        dataset=dataset,
        net=net,
        loss=loss,
        model=model,
        data=data,
        train_config=tc,
        lr_grid=grid,
        milestones=tc.step_milestones(),
        lr_schedule=[tc.lr_at_epoch(e) for e in range(1, epochs + 1)],
        measurement_epochs=list(epochs_measured),
        lam=decomposition_lambda(cfg, data.n_classes) if loss == "mse" else None,
        input_shape=tuple(data.input_shape),
        feature_dim=int(model.classifier.in_features),
        config=cfg,
    )
