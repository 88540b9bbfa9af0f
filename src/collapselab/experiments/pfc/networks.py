"""Networks, data and protocol of paper 001's deep-network experiments (§IV-A, Table I).

A :class:`~collapselab.experiments.pfc.presets.TrainingPreset` describes a training
experiment completely: the dataset and its preprocessing (a
:class:`~collapselab.data.DataSpec`, read by :func:`~collapselab.data.load_data`), the
network (a :class:`FCResNet` / :class:`ConvResNet` of any size, or a Table I network), the
optimiser and learning-rate schedule, and the measurement epochs.
:func:`build_network_setup` turns it into the objects a run needs (:class:`NetworkSetup`);
:func:`dry_run` does the same without training and summarises what a run would do, so that
the paper-scale configurations can be checked on a laptop against small fixture files in the
datasets' real formats.

The measured layers are those of 001 §IV-A: the constant-width stream of the FC ResNet
(``stem`` = "layer0", then every block), or the last stage of a conv ResNet
(``model.stage_layers(-1)``: the input of its first block, then every block output), all
flattened to one dimension.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from collapselab.data import DataSplits, load_data
from collapselab.experiments.pfc.presets import TrainingPreset
from collapselab.experiments.preset import sgd_config
from collapselab.models import (
    ConvResNet,
    FCResNet,
    pfc_cifar10,
    pfc_cifar100,
    pfc_fashion_mnist,
    pfc_mnist,
    pfc_stl10,
)
from collapselab.probe import eval_mode
from collapselab.track import log_spaced_epochs
from collapselab.train import TrainConfig

__all__ = ["NetworkSetup", "build_network_setup", "dry_run", "measured_layers"]

_TABLE_I_MODELS = {
    "pfc_mnist": pfc_mnist,
    "pfc_fashion_mnist": pfc_fashion_mnist,
    "pfc_cifar10": pfc_cifar10,
    "pfc_stl10": pfc_stl10,
    "pfc_cifar100": pfc_cifar100,
}


@dataclass
class NetworkSetup:
    """Everything a PFC training run needs, built from a configuration.

    Attributes:
        model: the network (untrained).
        data: the training split (balanced, standardised as configured) and the test split.
        train_config: optimiser, schedule and batching.
        layers: the measured layers in depth order: "layer0", then each block's output.
        measure_epochs: epochs (counted from 1) at whose end the layers are measured; the
            initial model (epoch 0) is measured too.
        config: the preset it was built from.
    """

    model: nn.Module
    data: DataSplits
    train_config: TrainConfig
    layers: list[str]
    measure_epochs: list[int]
    config: TrainingPreset


def _build_model(config: TrainingPreset, data: DataSplits) -> nn.Module:
    shape = data.input_shape
    if config.model == "fc_resnet":
        return FCResNet(
            in_dim=math.prod(shape),
            n_classes=data.n_classes,
            width=config.width,
            n_blocks=config.n_blocks,
        )
    if config.model == "conv_resnet":
        if len(shape) != 3:
            raise ValueError(
                f"model 'conv_resnet' needs image inputs (C, H, W), got input shape {shape}; "
                "load the dataset without flattening"
            )
        return ConvResNet(shape[0], data.n_classes, list(config.stages))
    return _TABLE_I_MODELS[config.model](n_classes=data.n_classes)


def measured_layers(model: nn.Module) -> list[str]:
    """The layers 001 measures (§IV-A): the FC stream or a conv net's last stage.

    ``FCResNet``: ``["stem", "blocks.0", ...]`` (its ``feature_layers``); ``ConvResNet``:
    ``model.stage_layers(-1)``, the input of the last stage's first block ("layer0") and
    each of its block outputs. All have one flattened dimension.
    """
    if isinstance(model, ConvResNet):
        return model.stage_layers(-1)
    if isinstance(model, FCResNet):
        return list(model.feature_layers)
    raise TypeError(f"expected an FCResNet or ConvResNet, got {type(model).__name__}")


def _measure_epochs(measure: str | tuple[int, ...], epochs: int) -> list[int]:
    """The epochs of :attr:`TrainingPreset.measure` within a budget of ``epochs``."""
    if epochs <= 0:
        return []
    if measure == "log":
        return log_spaced_epochs(epochs)
    if measure == "all":
        return list(range(1, epochs + 1))
    return sorted({e for e in measure if e <= epochs} | {epochs})


def build_network_setup(
    config: TrainingPreset,
    *,
    data_dir: str | Path | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> NetworkSetup:
    """Build model, data, training configuration and measurement plan from ``config``.

    Args:
        config: a PFC training preset.
        data_dir: the folder holding local dataset files (file-based datasets only).
        seed: seeds data generation / subsampling and the training loop.
        device: the training device (``"cpu"``, ``"cuda"``, ...).

    Raises:
        TypeError: ``config`` is not a :class:`TrainingPreset`.
        ValueError: a network that does not fit the data; a dataset file that is missing or
            corrupt (:class:`collapselab.data.DatasetFileError`, naming the file).
    """
    if not isinstance(config, TrainingPreset):
        raise TypeError(f"config must be a TrainingPreset, got {type(config).__name__}")
    data = load_data(config.data, data_dir, seed)
    model = _build_model(config, data)
    train_config = sgd_config(
        config,
        schedule="step",
        milestones=config.milestones or None,
        seed=seed,
        device=device,
        checkpoint_every=config.checkpoint_every,
        eval_batch_size=config.eval_batch_size,
    )
    return NetworkSetup(
        model=model,
        data=data,
        train_config=train_config,
        layers=measured_layers(model),
        measure_epochs=_measure_epochs(config.measure, config.epochs),
        config=config,
    )


def _feature_shapes(model: nn.Module, layers: list[str], x: torch.Tensor) -> dict[str, list[int]]:
    """Unflattened output shape (without the batch) of every layer on one batch."""
    shapes: dict[str, list[int]] = {}
    modules = dict(model.named_modules())

    def keep(name: str):
        def hook(module: nn.Module, args: Any, output: torch.Tensor) -> None:
            shapes[name] = list(output.shape[1:])

        return hook

    handles = [modules[name].register_forward_hook(keep(name)) for name in layers]
    try:
        with eval_mode(model), torch.no_grad():
            logits = model(x)
    finally:
        for handle in handles:
            handle.remove()
    if logits.ndim != 2 or logits.shape[0] != x.shape[0]:
        raise ValueError(f"the model returned logits of shape {tuple(logits.shape)}")
    dims = {name: math.prod(shape) for name, shape in shapes.items()}
    if len(set(dims.values())) != 1:
        raise ValueError(f"the measured layers must share one flattened dimension, got {dims}")
    return shapes


def dry_run(
    config: TrainingPreset,
    *,
    data_dir: str | Path | None = None,
    seed: int = 0,
    device: str = "cpu",
    batch: int = 2,
) -> dict[str, Any]:
    """Build a training experiment without training it and summarise what it would do.

    Loads the data (from ``data_dir`` for file-based datasets), builds the model, the
    optimiser configuration and the measurement plan, and runs one forward pass of
    ``batch`` training samples to read the measured layers' feature shapes.

    Returns:
        A JSON-serialisable summary: ``dataset``, ``n_classes``, ``input_shape``,
        ``n_train``, ``n_test``, ``train_class_counts``, ``model``, ``n_parameters``,
        ``layers``, ``feature_shapes`` (by layer), ``feature_dim``, ``epochs``, ``lr``,
        ``milestones``, ``momentum``, ``weight_decay``, ``batch_size``,
        ``lr_per_epoch`` (learning rate at the first epoch and just after each milestone),
        ``measure_epochs``.
    """
    setup = build_network_setup(config, data_dir=data_dir, seed=seed, device=device)
    train = setup.data.train
    x = train.x[: max(1, min(batch, len(train)))]
    shapes = _feature_shapes(setup.model, setup.layers, x)
    cfg = setup.train_config
    milestones = list(cfg.step_milestones())
    at = [1, *(m + 1 for m in milestones)]
    return {
        "dataset": setup.config.data.name,
        "n_classes": setup.data.n_classes,
        "input_shape": list(setup.data.input_shape),
        "n_train": len(train),
        "n_test": 0 if setup.data.test is None else len(setup.data.test),
        "train_class_counts": train.class_counts().tolist(),
        "model": type(setup.model).__name__,
        "n_parameters": sum(p.numel() for p in setup.model.parameters()),
        "layers": list(setup.layers),
        "feature_shapes": shapes,
        "feature_dim": math.prod(shapes[setup.layers[0]]),
        "epochs": cfg.epochs,
        "lr": cfg.lr,
        "milestones": milestones,
        "momentum": cfg.momentum,
        "weight_decay": cfg.weight_decay,
        "batch_size": cfg.batch_size,
        "lr_per_epoch": {int(e): cfg.lr_at_epoch(e) for e in at},
        "measure_epochs": list(setup.measure_epochs),
    }
