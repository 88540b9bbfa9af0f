"""The Monitor as a callback of :func:`collapselab.train.train`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from collapselab.track._families import MODEL_LAYER

if TYPE_CHECKING:
    from collapselab.track.monitor import Monitor
    from collapselab.train import TrainState


class MonitorCallback:
    """Drives a :class:`~collapselab.track.Monitor` from the training loop's hooks.

    * ``on_train_start``: adopt the training run when the monitor has none and the loop's
      epoch budget for ``schedule="log"`` when it was not given; measure the
      initial model (epoch 0, step 0) if scheduled, except when training resumes from a
      checkpoint (those rows are already in the run).
    * ``on_iteration_end``: measure every ``every_iterations`` steps (row epoch: the epoch
      in progress).
    * ``on_epoch_end``: measure the scheduled epochs at ``step = state.iteration``; the loop
      flushes the rows and checkpoints right after, so they survive a resume.

    The zero-training-error epoch is kept across a resume through :meth:`state_dict` /
    :meth:`load_state_dict`, and, failing that, read back from the run's rows.

    Create it with :meth:`Monitor.callback`.
    """

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor

    def on_train_start(self, state: TrainState) -> None:
        monitor = self.monitor
        monitor.set_total_epochs(state.config.epochs)
        if monitor.run is None and state.run is not None:
            monitor.run = state.run
        if state.resumed:
            if monitor.zero_error_epoch is None:
                monitor.zero_error_epoch = _recorded_zero_error(monitor)
            return
        monitor.after_epoch(0, step=state.iteration)

    def on_iteration_end(self, state: TrainState) -> None:
        self.monitor.after_iteration(state.iteration, epoch=state.epoch)

    def on_epoch_end(self, state: TrainState) -> None:
        self.monitor.after_epoch(state.epoch, step=state.iteration)

    def state_dict(self) -> dict[str, Any]:
        """``{"zero_error_epoch": int or -1}`` (plain values, for the checkpoint)."""
        zero = self.monitor.zero_error_epoch
        return {"zero_error_epoch": -1 if zero is None else int(zero)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        zero = int(state.get("zero_error_epoch", -1))
        self.monitor.zero_error_epoch = None if zero < 0 else zero


def _recorded_zero_error(monitor: Monitor) -> int | None:
    """The ``zero_error_epoch`` row already in the monitor's run, if any."""
    if monitor.run is None:
        return None
    rows = monitor.run.metrics()
    hit = rows[
        (rows["metric"] == "zero_error_epoch")
        & (rows["split"] == "train")
        & (rows["layer"] == MODEL_LAYER)
    ]
    return None if hit.empty else int(hit["value"].min())
