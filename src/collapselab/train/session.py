"""The bookkeeping of one training run: history and metric rows, callbacks, checkpoints,
resume and status (what :func:`collapselab.train.train` writes for its run and
:func:`collapselab.train.train_ensemble` for each member's).

A :class:`RunSession` knows nothing about how the weights are updated. The trainer that
owns it hands over three functions: ``snapshot()`` (the ``model``, ``optimizer`` and ``rng``
entries of a checkpoint), ``restore(saved)`` (load a checkpoint's model and optimizer) and,
in :meth:`RunSession.start`, how to seed, evaluate the initial model and restore the random
generators. One run's rows and checkpoints are thus the same whether it trained alone or as
a member of a batched ensemble.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from collapselab.store.zero_error import first_zero_error
from collapselab.train.callbacks import TrainState

if TYPE_CHECKING:
    from collapselab.store import Run
    from collapselab.train.loop import TrainResult

CHECKPOINT_FORMAT = 1
HOOKS = ("on_train_start", "on_iteration_end", "on_epoch_end", "on_train_end")

# history key -> (split, metric) of the rows recorded at an epoch's end
ROW_NAMES = {
    "lr": ("train", "lr"),
    "running_loss": ("train", "running_loss"),
    "running_accuracy": ("train", "running_accuracy"),
    "train_loss": ("train", "loss"),
    "train_accuracy": ("train", "accuracy"),
    "test_loss": ("test", "loss"),
    "test_accuracy": ("test", "accuracy"),
}


class NonFiniteLoss(Exception):
    """A training loss (of a batch or of the evaluation after an epoch) was NaN or infinite."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def check_evaluated_loss(entry: dict[str, Any]) -> None:
    """Stop on a non-finite training loss in an epoch's evaluation. Every batch loss of the
    epoch was finite, but its last update can leave non-finite parameters, which only the
    evaluation after it sees."""
    value = entry.get("train_loss")
    if value is not None and not math.isfinite(value):
        raise NonFiniteLoss(
            f"non-finite training loss {value} in the evaluation after epoch "
            f"{entry['epoch']} (step {entry['step']}): the last update left the outputs non-finite"
        )


def non_finite_batch(value: float, state: TrainState, epoch: int, batch: int) -> NonFiniteLoss:
    """The error for a non-finite loss of batch ``batch`` (from 0) of ``epoch``."""
    return NonFiniteLoss(
        f"non-finite training loss {value} at step {state.iteration + 1} "
        f"(epoch {epoch}, batch {batch + 1} of {state.iterations_per_epoch})"
    )


def call_hooks(callbacks: Sequence[Any], hook: str, state: TrainState) -> None:
    """Call ``hook`` of every callback that has it."""
    for cb in callbacks:
        fn = getattr(cb, hook, None)
        if fn is not None:
            fn(state)


def eval_part(entry: dict[str, Any]) -> dict[str, float]:
    """The evaluation values of a history entry."""
    keys = ("train_loss", "train_accuracy", "test_loss", "test_accuracy")
    return {k: entry[k] for k in keys if k in entry}


class RunSession:
    """History, rows, callbacks, checkpoints and status of one run being trained.

    Args:
        state: the run's :class:`TrainState` (model, optimizer, config, data, run, device).
        callbacks: its callbacks.
        snapshot: returns the checkpoint's ``model``, ``optimizer`` and ``rng`` entries
            (tensors that do not share storage with anything larger than themselves:
            :func:`torch.save` writes a view's whole storage).
        restore: loads a saved checkpoint's ``model`` and ``optimizer`` entries.
    """

    def __init__(
        self,
        state: TrainState,
        callbacks: list[Any],
        snapshot: Callable[[], dict[str, Any]],
        restore: Callable[[dict[str, Any]], None],
    ) -> None:
        self.state = state
        self.config = state.config
        self.run: Run | None = state.run
        self.callbacks = callbacks
        self.snapshot = snapshot
        self.restore = restore
        self.resumed_from: int | None = None
        self.epochs_completed = 0
        self.session_started = False  # True once an abort should keep the recorded rows
        self.flushed_at = time.monotonic()

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self) -> dict[str, Any]:
        """What a checkpoint holds (format :data:`CHECKPOINT_FORMAT`)."""
        state = self.state
        weights = self.snapshot()
        return {
            "format": CHECKPOINT_FORMAT,
            "epoch": state.epoch,
            "iteration": state.iteration,
            "config": self.config.to_dict(),
            "model": weights["model"],
            "optimizer": weights["optimizer"],
            "rng": weights["rng"],
            "history": state.history,
            "zero_error_epoch": state.zero_error_epoch,
            "callbacks": {key: cb.state_dict() for key, cb in self.stateful_callbacks().items()},
        }

    def stateful_callbacks(self) -> dict[str, Any]:
        """Callbacks with ``state_dict``, keyed by class name (and rank among equals).

        Stateless callbacks (a progress bar) are left out, so a run can be resumed with or
        without them.
        """
        keyed: dict[str, Any] = {}
        for cb in self.callbacks:
            if callable(getattr(cb, "state_dict", None)):
                name = type(cb).__name__
                rank = sum(1 for key in keyed if key.split("#")[0] == name)
                keyed[f"{name}#{rank}"] = cb
        return keyed

    def save_checkpoint(self, extra_kept: int = 0) -> None:
        """Checkpoint the run (if it has one and checkpoints are on), keeping the
        ``keep_checkpoints`` (plus ``extra_kept``) most recent."""
        if self.run is None or self.config.checkpoint_every == 0:
            return
        self.run.save_checkpoint(
            self.checkpoint_state(),
            self.state.iteration,
            keep_last=self.config.keep_checkpoints + extra_kept,
        )

    def load_checkpoint(self, saved: dict[str, Any]) -> None:
        """Restore a checkpoint's weights, counters, history and callback states."""
        if saved.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"unsupported checkpoint format {saved.get('format')!r}")
        differing = self.config.resume_mismatch(saved["config"])
        if differing:
            raise ValueError(
                "cannot resume: the checkpoint was written with a different TrainConfig "
                f"(fields {differing}); use the original config or a new run"
            )
        stateful = self.stateful_callbacks()
        if set(saved["callbacks"]) != set(stateful):
            raise ValueError(
                "cannot resume: the checkpoint holds the state of callbacks "
                f"{sorted(saved['callbacks'])}, but this run has stateful callbacks "
                f"{sorted(stateful)}"
            )
        state = self.state
        self.restore(saved)
        state.epoch = int(saved["epoch"])
        state.iteration = int(saved["iteration"])
        state.history = list(saved["history"])
        state.zero_error_epoch = saved["zero_error_epoch"]
        evaluated = [h for h in state.history if "train_loss" in h]
        state.last_eval = eval_part(evaluated[-1]) if evaluated else {}
        for key, cb in stateful.items():
            cb.load_state_dict(saved["callbacks"][key])
        state.resumed = True

    # ---------------------------------------------------------------------- records
    def record(self, entry: dict[str, Any]) -> None:
        """Append a history entry and write its rows (and a first zero-error epoch)."""
        state = self.state
        state.history.append(entry)
        if "train_accuracy" in entry:
            state.last_eval = eval_part(entry)
            known = state.zero_error_epoch
            zero = first_zero_error(known, entry["epoch"], entry["train_accuracy"])
            state.zero_error_epoch = zero
            if known is None and zero is not None and self.run is not None:
                self.run.record_zero_error_epoch(zero)
        if self.run is not None:
            for key, (split, metric) in ROW_NAMES.items():
                if key in entry:
                    self.run.log(
                        entry["step"], metric, entry[key], epoch=entry["epoch"], split=split
                    )

    def log_batch_loss(self, value: float) -> None:
        """Record the batch loss every ``log_batch_loss_every`` steps."""
        every = self.config.log_batch_loss_every
        if self.run is not None and every and self.state.iteration % every == 0:
            self.run.log(
                self.state.iteration, "batch_loss", value, epoch=self.state.epoch, split="train"
            )

    def end_epoch(self, entry: dict[str, Any], flush_seconds: float) -> bool:
        """Record an epoch's entry, stop on a non-finite evaluated loss
        (:class:`NonFiniteLoss`), call ``on_epoch_end`` and write the rows when due.

        Returns whether a checkpoint is due (every ``checkpoint_every`` epochs, the last
        epoch, or a callback's stop request); the caller saves it.
        """
        state, cfg = self.state, self.config
        epoch = int(entry["epoch"])
        self.record(entry)
        self.epochs_completed = epoch
        check_evaluated_loss(entry)  # before the callbacks measure non-finite features
        call_hooks(self.callbacks, "on_epoch_end", state)
        every = cfg.checkpoint_every
        due = epoch == cfg.epochs or (every > 0 and epoch % every == 0)
        stopping = state.stop_reason is not None
        if self.run is not None and (
            due or stopping or time.monotonic() - self.flushed_at >= flush_seconds
        ):
            self.run.flush()
            self.flushed_at = time.monotonic()
        return due or stopping

    # -------------------------------------------------------------------------- run
    def prepare(self, step: int | None = None) -> dict[str, Any] | None:
        """Load and check the run's latest checkpoint (or the one at ``step``), if any,
        before anything is changed in the run (so a mismatching config leaves the run's
        status as it was)."""
        run = self.run
        if run is None:
            return None
        if step is not None:
            ckpt = next(c for c in run.checkpoints() if c.step == step)
            found = (ckpt, ckpt.load(map_location="cpu"))
        else:
            # The newest checkpoint that can be read: an unreadable newer one is set aside
            # with a warning rather than failing every rerun.
            found = run.resume_checkpoint(map_location="cpu")
        if found is None:
            if run.manifest.get("train_started"):
                raise ValueError(
                    f"run {run.id} already holds a training session but no checkpoint to "
                    "resume from (checkpoint_every=0?); train into a new run"
                )
            return None
        ckpt, saved = found
        self.load_checkpoint(saved)
        self.resumed_from = ckpt.step
        self.epochs_completed = self.state.epoch
        return saved

    def start(
        self,
        saved: dict[str, Any] | None,
        reseed: Callable[[], None],
        evaluate: Callable[[], dict[str, float]],
        restore_rng: Callable[[dict[str, Any]], None],
    ) -> None:
        """Continue from a loaded checkpoint, or seed and record the initial state.

        Args:
            saved: the checkpoint :meth:`prepare` loaded, or ``None``.
            reseed: seeds the generators training draws from (a fresh run).
            evaluate: the initial model's evaluation (a fresh run with ``log_initial``).
            restore_rng: restores a checkpoint's ``rng`` entry (a resumed run).
        """
        run, state, cfg = self.run, self.state, self.config
        if saved is not None and run is not None:
            run.truncate_after(int(saved["iteration"]))
            # The manifest may hold a detection from the discarded continuation.
            run.update_manifest(zero_error_epoch=state.zero_error_epoch)
            resumes = list(run.manifest.get("resumed_from") or [])
            resumes.append({"epoch": state.epoch, "step": state.iteration})
            run.update_manifest(resumed_from=resumes)
            self.begin_session(started=True)
            call_hooks(self.callbacks, "on_train_start", state)
            # After on_train_start, so whatever it draws does not shift the trajectory.
            restore_rng(saved["rng"])
            return
        if run is not None:
            run.flush()  # rows logged before training belong to the caller
        reseed()
        # Without checkpoints nothing can be resumed: rows are kept whatever happens.
        self.begin_session(started=cfg.checkpoint_every == 0 or run is None)
        if cfg.log_initial:
            self.record({"epoch": 0, "step": 0, "lr": cfg.lr_at_epoch(1), **evaluate()})
        call_hooks(self.callbacks, "on_train_start", state)
        if run is not None:
            run.flush()
        self.save_checkpoint()
        if not self.session_started and run is not None:
            run.update_manifest(train_started=True)
        self.session_started = True

    def begin_session(self, started: bool) -> None:
        """Mark the run as running; ``started``: from now on an abort keeps the rows, which
        a resume from the step-0 (or later) checkpoint will truncate as needed."""
        run = self.run
        if run is not None:
            run.update_manifest(train_config=self.config.to_dict())
            run.set_status("running")
        if started and run is not None:
            run.update_manifest(train_started=True)
        self.session_started = started

    def result(self, stopped_reason: str | None, error: str | None) -> TrainResult:
        """The :class:`~collapselab.train.TrainResult` of the session so far."""
        from collapselab.train.loop import TrainResult

        state = self.state
        return TrainResult(
            model=state.model,
            config=self.config,
            epochs_completed=self.epochs_completed,
            iterations=state.iteration,
            history=list(state.history),
            zero_error_epoch=state.zero_error_epoch,
            stopped_reason=stopped_reason,
            error=error,
            resumed_from_step=self.resumed_from,
            run=self.run,
        )

    def finish(self, result: TrainResult, seconds: float) -> None:
        """Record the outcome in the run's manifest (and a failure in its status)."""
        run = self.run
        if run is None:
            return
        run.flush()
        run.record_zero_error_epoch(result.zero_error_epoch)
        run.update_manifest(
            epochs_completed=result.epochs_completed,
            iterations=result.iterations,
            stopped_reason=result.stopped_reason,
            final_metrics=result.final,
        )
        run.add_duration("train_seconds", seconds)
        if result.failed:
            run.set_status("failed", error=result.error)

    def abort(self, err: BaseException, seconds: float) -> None:
        """Record an exception (or Ctrl-C) in the run; rows of an unstarted session are dropped."""
        run = self.run
        if run is None:
            return
        if self.session_started:
            run.flush()
        else:
            run.discard_pending()
        run.add_duration("train_seconds", seconds)
        if isinstance(err, KeyboardInterrupt):
            run.set_status("interrupted", error=f"interrupted at step {self.state.iteration}")
        else:
            run.set_status("failed", error=f"{type(err).__name__}: {err}")
