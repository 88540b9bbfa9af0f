"""The training state seen by callbacks, and the callback interface."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from collapselab.data.dataset import DataSplits
from collapselab.train.config import TrainConfig

if TYPE_CHECKING:
    from collapselab.store import Run


@dataclass
class TrainState:
    """Where training stands; passed to every callback.

    Attributes:
        model, optimizer, config, data, run, device: what is being trained, and how.
        epoch: the current epoch, counted from 1; in ``on_train_start`` the number of
            epochs already completed (0, or the checkpoint's epoch when resuming).
        iteration: optimiser steps completed so far (the global ``step`` of metric rows).
        batch_index: index of the last batch within the epoch, from 0.
        iterations_per_epoch, total_iterations: for progress bars.
        loss: loss of the last training batch (before its update), ``None`` before any.
        last_eval: the latest evaluation, e.g. ``{"train_loss": .., "train_accuracy": ..,
            "test_loss": .., "test_accuracy": ..}``.
        history: one dict per finished epoch (see :class:`collapselab.train.TrainResult`).
        zero_error_epoch: first evaluated epoch with train accuracy exactly 1.0, if any
            (:func:`collapselab.store.first_zero_error`).
        resumed: True when training continues from a checkpoint. Callbacks that record
            something in ``on_train_start`` should skip it then: it is already recorded.
    """

    model: nn.Module
    optimizer: torch.optim.Optimizer
    config: TrainConfig
    data: DataSplits
    run: Run | None
    device: torch.device
    epoch: int = 0
    iteration: int = 0
    batch_index: int = 0
    iterations_per_epoch: int = 0
    total_iterations: int = 0
    loss: float | None = None
    last_eval: dict[str, float] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    zero_error_epoch: int | None = None
    resumed: bool = False
    stop_reason: str | None = None

    @property
    def evaluated_splits(self) -> tuple[str, ...]:
        """The splits the loop evaluates at an epoch's end: ``"train"``, and ``"test"`` when
        the data has a non-empty test split. In a run, the loop is the one writer of their
        model-level ``loss`` and ``accuracy`` rows."""
        test = self.data.test
        return ("train", "test") if test is not None and len(test) > 0 else ("train",)

    @property
    def lr(self) -> float:
        """Learning rate of the first parameter group."""
        return float(self.optimizer.param_groups[0]["lr"])

    def request_stop(self, reason: str) -> None:
        """Ask the loop to stop: after this iteration (from ``on_iteration_end``) or after
        this epoch's checkpoint (from ``on_epoch_end``). The run still counts as completed.
        """
        self.stop_reason = str(reason)


class Callback:
    """Hooks called by :func:`collapselab.train.train`; override any subset.

    Any object with some of these methods works (missing ones are skipped). Call order at
    an epoch's end: evaluation and its metric rows, ``on_epoch_end``, flush, checkpoint;
    rows a callback logs at ``state.iteration`` in ``on_epoch_end`` are therefore part of the
    checkpointed run. A callback holding state across epochs may define ``state_dict()`` and
    ``load_state_dict(d)`` (tensors and plain containers only) to be checkpointed too.
    """

    def on_train_start(self, state: TrainState) -> None:
        """After set-up (and the initial evaluation), before the first step."""

    def on_iteration_end(self, state: TrainState) -> None:
        """After each optimiser step (``state.iteration`` already counts it)."""

    def on_epoch_end(self, state: TrainState) -> None:
        """After each epoch's evaluation and metric rows."""

    def on_train_end(self, state: TrainState) -> None:
        """Once at the end, also when training stopped on a non-finite loss."""


class LambdaCallback(Callback):
    """A callback made of plain functions, e.g. ``LambdaCallback(on_epoch_end=print_loss)``."""

    def __init__(
        self,
        on_train_start: Callable[[TrainState], None] | None = None,
        on_iteration_end: Callable[[TrainState], None] | None = None,
        on_epoch_end: Callable[[TrainState], None] | None = None,
        on_train_end: Callable[[TrainState], None] | None = None,
    ) -> None:
        for name, fn in (
            ("on_train_start", on_train_start),
            ("on_iteration_end", on_iteration_end),
            ("on_epoch_end", on_epoch_end),
            ("on_train_end", on_train_end),
        ):
            if fn is not None:
                if not callable(fn):
                    raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
                setattr(self, name, fn)
