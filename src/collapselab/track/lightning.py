"""``CollapseCallback``: the Monitor as a Lightning (2.x) callback.

Lightning is an optional dependency (``pip install 'collapselab[lightning]'``). This module
imports it only when ``CollapseCallback`` is first accessed, so importing
:mod:`collapselab.track` never needs it. Both ``lightning.pytorch`` and the older
``pytorch_lightning`` package name are accepted.

The callback drives the same :class:`~collapselab.track.Monitor` code as the plain loop and
the :func:`collapselab.train.train` adapter:

* ``setup(trainer, pl_module, stage)`` (or ``on_train_start`` if it comes first): builds the
  Monitor on the module (or on ``getattr(pl_module, model_attr)``), before Lightning
  restores a checkpoint into the callback;
* ``on_train_start(trainer, pl_module)``: gives the Monitor ``epochs = trainer.max_epochs``
  for the log-spaced schedule, and measures the initial model (epoch 0) on a fresh fit;
* ``on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)``: measures every
  ``every_iterations`` optimiser steps (``trainer.global_step``);
* ``on_train_epoch_end(trainer, pl_module)``: measures the scheduled epochs. Lightning's
  ``trainer.current_epoch`` is the 0-based index of the epoch that just ended, so the
  Monitor's epoch (counted from 1, like :func:`collapselab.train.train`) is
  ``current_epoch + 1``; rows are written at ``step = trainer.global_step``.

The Monitor owns the zero-training-error epoch; the callback's checkpoint state is the
Monitor's (:meth:`~collapselab.track.Monitor.state_dict`). Under DDP every process runs the
hooks; the Monitor sums the statistics of all processes
(each iterating its shard of the loader) and only rank 0 writes to the run. Without an
explicit ``train_loader`` the trainer's training loader is used: it must give the same
samples in both passes of a measurement (no random augmentation, no ``drop_last`` with
shuffling); a dedicated, unshuffled loader is the safe choice.
"""

from __future__ import annotations

from typing import Any

_CLASS: type | None = None


def _callback_base() -> type:
    try:
        from lightning.pytorch.callbacks import Callback
    except ImportError:
        try:
            from pytorch_lightning.callbacks import Callback
        except ImportError as err:
            raise ImportError(
                "CollapseCallback needs the optional 'lightning' package: "
                "pip install 'collapselab[lightning]'"
            ) from err
    return Callback


def _flatten(results: dict[str, dict[str, dict[str, float]]], prefix: str) -> dict[str, float]:
    return {
        f"{prefix}/{split}/{layer or 'model'}/{metric}": value
        for split, per_layer in results.items()
        for layer, values in per_layer.items()
        for metric, value in values.items()
    }


def _build() -> type:
    from collapselab.track.monitor import Monitor

    base = _callback_base()

    class CollapseCallback(base):  # type: ignore[misc, valid-type]
        """Measure collapse metrics of a LightningModule's layers during ``trainer.fit``.

        Args:
            train_loader: data to measure on (default: ``trainer.train_dataloader``).
            test_loader: optional held-out data.
            model_attr: measure ``getattr(pl_module, model_attr)`` instead of the module
                itself (e.g. ``"model"`` for a module wrapping a collapselab network).
            log_to_logger: also send the values to ``trainer.logger.log_metrics`` (rank 0)
                under ``"collapse/<split>/<layer or 'model'>/<metric>"``.
            **monitor_kwargs: everything else of :class:`~collapselab.track.Monitor`
                (``families``, ``layers``, ``schedule``, ``run``, ...).

        Attributes:
            monitor: the :class:`~collapselab.track.Monitor`, built at ``on_train_start``.
        """

        def __init__(
            self,
            train_loader: Any = None,
            test_loader: Any = None,
            *,
            model_attr: str | None = None,
            log_to_logger: bool = False,
            **monitor_kwargs: Any,
        ) -> None:
            super().__init__()
            self.train_loader = train_loader
            self.test_loader = test_loader
            self.model_attr = model_attr
            self.log_to_logger = bool(log_to_logger)
            self.monitor_kwargs = monitor_kwargs
            self.monitor: Monitor | None = None
            # A checkpoint's state that arrives before the Monitor exists (handed over to
            # it when it is built).
            self._pending_state: dict[str, Any] | None = None
            self._last_step: int | None = None

        def _target(self, pl_module: Any) -> Any:
            if self.model_attr is None:
                return pl_module
            try:
                return getattr(pl_module, self.model_attr)
            except AttributeError:
                raise ValueError(
                    f"model_attr={self.model_attr!r}: {type(pl_module).__name__} has no such "
                    "attribute"
                ) from None

        def _build(self, trainer: Any, pl_module: Any) -> Monitor:
            if self.monitor is None:
                loader = self.train_loader
                if loader is None:
                    loader = trainer.train_dataloader
                self.monitor = Monitor(
                    self._target(pl_module), loader, self.test_loader, **self.monitor_kwargs
                )
                if self._pending_state is not None:
                    self.monitor.load_state_dict(self._pending_state)
                    self._pending_state = None
            return self.monitor

        def setup(self, trainer: Any, pl_module: Any, stage: str | None = None) -> None:
            if self.train_loader is not None:  # the trainer's loader exists only later
                self._build(trainer, pl_module)

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            monitor = self._build(trainer, pl_module)
            max_epochs = trainer.max_epochs
            if max_epochs is not None and max_epochs > 0:
                monitor.set_total_epochs(int(max_epochs))
            if trainer.global_step == 0 and trainer.current_epoch == 0:
                self._report(trainer, monitor.before_training(step=0))

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            step = int(trainer.global_step)
            if self.monitor is None or step == self._last_step:
                return  # gradient accumulation: several batches per optimiser step
            self._last_step = step
            epoch = int(trainer.current_epoch) + 1
            self._report(trainer, self.monitor.after_iteration(step, epoch=epoch))

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            if self.monitor is None:
                return
            epoch = int(trainer.current_epoch) + 1
            results = self.monitor.after_epoch(epoch, step=int(trainer.global_step))
            self._report(trainer, results)

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            if self.monitor is not None:
                self.monitor.close()

        def _report(self, trainer: Any, results: Any) -> None:
            if results is None or not self.log_to_logger:
                return
            logger = getattr(trainer, "logger", None)
            if logger is not None and trainer.is_global_zero:
                logger.log_metrics(_flatten(results, "collapse"), step=int(trainer.global_step))

        def state_dict(self) -> dict[str, Any]:
            if self.monitor is not None:
                return self.monitor.state_dict()
            return dict(self._pending_state or {"zero_error_epoch": -1})

        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            if self.monitor is not None:
                self.monitor.load_state_dict(state_dict)
            else:
                self._pending_state = dict(state_dict)

    CollapseCallback.__module__ = __name__
    return CollapseCallback


def __getattr__(name: str) -> Any:
    global _CLASS
    if name == "CollapseCallback":
        if _CLASS is None:
            _CLASS = _build()
        return _CLASS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
