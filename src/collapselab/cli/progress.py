"""A Rich progress bar as a training callback."""

from __future__ import annotations

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from collapselab.train.callbacks import Callback, TrainState


class RichProgress(Callback):
    """Shows optimiser steps done / total, elapsed and remaining time, and the last metrics."""

    def __init__(self, description: str = "training") -> None:
        self.description = description
        self._progress: Progress | None = None
        self._task: int | None = None

    def on_train_start(self, state: TrainState) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task(
            self.description,
            total=state.total_iterations,
            completed=state.iteration,
            status="",
        )

    def on_iteration_end(self, state: TrainState) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=state.iteration)

    def on_epoch_end(self, state: TrainState) -> None:
        if self._progress is None or self._task is None:
            return
        shown = [
            f"{key.replace('_', ' ')} {value:.3g}"
            for key, value in state.last_eval.items()
            if key in ("train_loss", "train_accuracy", "test_accuracy")
        ]
        self._progress.update(self._task, status=f"epoch {state.epoch}  " + "  ".join(shown))

    def on_train_end(self, state: TrainState) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
