"""Counts of (label, decision) pairs: a confusion matrix summed over batches."""

from __future__ import annotations

import torch

from collapselab.checks import as_tensor, check_int, check_labels, check_ndim
from collapselab.stats.accumulator import Accumulator


class ConfusionCounts(Accumulator):
    """``counts[c, k]``: samples of label ``c`` decided as class ``k`` (rows: labels).

    Sized at construction (``(C, C)`` int64 zeros on ``device``), so every process of a
    distributed run can take part in the reduction even without a batch.
    """

    settings = ("n_classes",)

    def __init__(self, n_classes: int, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.n_classes = check_int("n_classes", n_classes, minimum=1)
        c = self.n_classes
        self._sums = {"counts": torch.zeros(c, c, dtype=torch.int64, device=device)}

    @property
    def counts(self) -> torch.Tensor:
        """The ``(C, C)`` counts."""
        return self._sums["counts"]

    def update(self, labels: object, decisions: object) -> ConfusionCounts:
        """Add a batch of labels and decisions (both ``(B,)`` integers in ``[0, C)``)."""
        c = self.n_classes
        device = self.counts.device
        y = as_tensor("labels", labels, device=device)
        check_ndim("labels", y, 1, "(n_samples,)")
        y = check_labels("labels", y, y.shape[0], c)
        k = check_labels(
            "decisions", decisions, y.shape[0], c, device=device, source="labels", unit="entry"
        )
        self._sums["counts"] += torch.bincount(y * c + k, minlength=c * c).view(c, c)
        return self

    @property
    def all_correct(self) -> bool:
        """Whether every counted sample was decided as its label (zero error)."""
        return int(torch.diagonal(self.counts).sum()) == int(self.counts.sum())
