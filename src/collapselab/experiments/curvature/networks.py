"""The networks and data of the curvature experiments."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from collapselab.data import DataSplits, LabeledData, load_dataset
from collapselab.models import MLP


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


def build_network(config: dict[str, Any], data: DataSplits) -> nn.Module:
    """The configured network (``net``: ``"mlp"``, ``depth`` linear layers of ``width``
    (default 3), or ``"conv"``) for ``data``."""
    shape = data.input_shape
    if config["net"] == "mlp":
        depth = int(config.get("depth", 3))  # linear layers: 3 is 784-width-width-K
        return MLP(math.prod(shape), data.n_classes, width=config["width"], depth=depth, bias=True)
    if config["net"] == "conv":
        if len(shape) != 3:
            raise ValueError(f"the conv net needs image inputs (C, H, W), got {shape}")
        return SmallConvNet(shape, data.n_classes, list(config["channels"]), config["width"])
    raise ValueError(f"net must be 'mlp' or 'conv', got {config['net']!r}")


def _keep_classes(data: LabeledData, classes: list[int]) -> LabeledData:
    lookup = torch.full((data.n_classes,), -1, dtype=torch.long)
    lookup[torch.tensor(classes)] = torch.arange(len(classes))
    keep = lookup[data.y] >= 0
    return LabeledData(data.x[keep], lookup[data.y[keep]], len(classes), name=data.name)


def load_data(
    config: dict[str, Any], data_dir: str | Path | None, seed: int
) -> tuple[DataSplits, dict[str, Any]]:
    """The configured data and a record of it (``{"dataset": name}``). Fashion-MNIST is
    found by :func:`collapselab.data.load_dataset` (``data_dir``, ``$COLLAPSELAB_DATA_DIR``,
    then Debian's ``dataset-fashion-mnist`` folder); when it is missing, the registry runs
    the quick preset's fallback, ``quick-bundled`` (digits), before this is called."""
    classes = config.get("classes")
    if config["dataset"] == "digits":
        return _digits(config, classes, seed), {"dataset": "digits"}
    data = load_dataset(
        config["dataset"],
        data_dir=data_dir,
        seed=seed,
        classes=classes,
        n_train_per_class=config["n_train_per_class"],
        n_test_per_class=config["n_test_per_class"],
    )
    return data, {"dataset": config["dataset"]}


def _digits(config: dict[str, Any], classes: list[int] | None, seed: int) -> DataSplits:
    flatten = config["net"] == "mlp"
    n = config.get("n_per_class", config["n_train_per_class"])
    data = load_dataset("digits", seed=seed, n_per_class=min(int(n), 170), flatten=flatten)
    if classes is None:
        return data
    test = None if data.test is None else _keep_classes(data.test, classes)
    return DataSplits(_keep_classes(data.train, classes), test)
