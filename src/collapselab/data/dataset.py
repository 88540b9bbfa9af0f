"""Containers for labelled data: one split (:class:`LabeledData`) and a train/test pair."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from collapselab.checks import check_labels


@dataclass
class LabeledData:
    """Inputs and integer class labels held in memory.

    Attributes:
        x: inputs, shape ``(N, ...)``, float32 (``(N, D)`` for vectors, ``(N, C, H, W)``
            for images).
        y: labels, shape ``(N,)``, int64 in ``[0, n_classes)``.
        n_classes: number of classes (may exceed ``y.max() + 1`` for subsets).
        name: short description used in manifests and figures.
        meta: free-form provenance (generator parameters, file names).
    """

    x: torch.Tensor
    y: torch.Tensor
    n_classes: int
    name: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_labels("y", self.y, self.x.shape[0], self.n_classes, source="x", unit="sample")

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one input (without the batch dimension)."""
        return tuple(self.x.shape[1:])

    def class_counts(self) -> torch.Tensor:
        """Number of samples of each class, shape ``(n_classes,)``."""
        return torch.bincount(self.y, minlength=self.n_classes)

    def subset(self, index: torch.Tensor) -> LabeledData:
        """The samples at ``index`` (a LongTensor or boolean mask), same class count."""
        return LabeledData(self.x[index], self.y[index], self.n_classes, self.name, dict(self.meta))

    def loader(
        self,
        batch_size: int,
        shuffle: bool = False,
        seed: int = 0,
        drop_last: bool = False,
    ) -> DataLoader:
        """A DataLoader over ``(x, y)``; shuffling is seeded so epochs are reproducible."""
        generator = torch.Generator().manual_seed(seed) if shuffle else None
        return DataLoader(
            TensorDataset(self.x, self.y),
            batch_size=batch_size,
            shuffle=shuffle,
            generator=generator,
            drop_last=drop_last,
        )


@dataclass
class DataSplits:
    """A training split and an optional test split of the same task."""

    train: LabeledData
    test: LabeledData | None = None

    @property
    def n_classes(self) -> int:
        return self.train.n_classes

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.train.input_shape
