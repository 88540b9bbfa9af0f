"""The Monitor as a callback of :func:`collapselab.train.train`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collapselab.track.monitor import Monitor
    from collapselab.train import TrainState


class MonitorCallback:
    """Drives a :class:`~collapselab.track.Monitor` from the training loop's hooks.

    * ``on_train_start``: adopt the training run when the monitor has none and the loop's
      epoch budget for ``schedule="log"`` when it was not given; when the monitor writes to
      the training run, leave the model-level ``accuracy`` rows of the splits the loop
      evaluates to the loop (:meth:`Monitor.leave_accuracy_rows`: one writer per row key,
      and the loop's rows cover every evaluated epoch); measure the
      initial model (epoch 0, step 0) if scheduled, except when training resumes from a
      checkpoint (those rows are already in the run, and the monitor restores its
      zero-error epoch from them, :meth:`Monitor.restore`).
    * ``on_iteration_end``: measure every ``every_iterations`` steps (row epoch: the epoch
      in progress).
    * ``on_epoch_end``: measure the scheduled epochs at ``step = state.iteration``; the loop
      flushes the rows and checkpoints right after, so they survive a resume.
    * ``on_train_end``: :meth:`Monitor.close` (detach the monitor's mirrors).

    The monitor owns the zero-training-error epoch; this callback's checkpoint state is the
    monitor's (:meth:`Monitor.state_dict`). Create it with :meth:`Monitor.callback`.
    """

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor

    def on_train_start(self, state: TrainState) -> None:
        monitor = self.monitor
        monitor.set_total_epochs(state.config.epochs)
        if monitor.run is None and state.run is not None:
            monitor.run = state.run
        if _same_run(monitor.run, state.run):
            monitor.leave_accuracy_rows(state.evaluated_splits)
        if state.resumed:
            monitor.restore()
            return
        monitor.after_epoch(0, step=state.iteration)

    def on_iteration_end(self, state: TrainState) -> None:
        self.monitor.after_iteration(state.iteration, epoch=state.epoch)

    def on_epoch_end(self, state: TrainState) -> None:
        self.monitor.after_epoch(state.epoch, step=state.iteration)

    def on_train_end(self, state: TrainState) -> None:
        self.monitor.close()

    def state_dict(self) -> dict[str, Any]:
        """The monitor's :meth:`~collapselab.track.Monitor.state_dict`."""
        return self.monitor.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.monitor.load_state_dict(state)


def _same_run(a: Any, b: Any) -> bool:
    """Whether two ``Run`` objects (or ``None``) write the same run directory."""
    return a is not None and b is not None and (a is b or a.path == b.path)
