"""The training loop: plain SGD over in-memory data, with callbacks, metrics and resume.

What one call of :func:`train` does, in order:

1. Validate the arguments; move the model and the training set to ``config.device`` (the
   inputs also to the model's floating dtype).
2. If ``run`` has a checkpoint, resume from it: restore model, optimizer, epoch, step,
   history and random-number states, and drop the run's metric rows recorded after the
   checkpoint (:meth:`collapselab.store.Run.truncate_after`). Otherwise seed Python, NumPy
   and torch with ``config.seed``, evaluate the initial model (epoch 0, step 0) and save a
   step-0 checkpoint.
3. For each epoch ``e``: set the learning rate of the schedule; visit the batches of the
   permutation seeded by ``(seed, e)``; per batch: forward, loss, stop if it is not
   finite, backward, optional clipping, ``optimizer.step()``, ``on_iteration_end``. Then
   evaluate train (and test) loss and accuracy in eval mode over the whole split, record
   them, call ``on_epoch_end``, flush the run and checkpoint.
4. Record the outcome in the run's manifest and set its status.

Metric rows written (``step`` = optimiser steps completed, ``epoch`` counted from 1, 0 for
the initial model; ``layer = ""``):

==============  ======  ==========================================================
metric          split   meaning
==============  ======  ==========================================================
loss, accuracy  train   over the whole training set, eval mode (``eval_every``)
loss, accuracy  test    over the test split when there is one
running_loss    train   mean batch loss over the epoch (train mode, before updates)
running_acc...  train   ``running_accuracy``: same for the batch accuracy
lr              train   learning rate used during the epoch
batch_loss      train   one batch's loss, every ``log_batch_loss_every`` steps
==============  ======  ==========================================================

The loop is the one writer of the model-level ``loss`` and ``accuracy`` rows of the splits it
evaluates (:attr:`TrainState.evaluated_splits`): a run holds one value per ``(step, split,
layer, metric)`` (:mod:`collapselab.store.row_keys`), and a Monitor driven by the loop on the
same run leaves these keys to it (its accuracy is class-weighted and measured only at its
scheduled epochs; the loop's is the plain fraction of the whole split at every evaluated
epoch, the series the zero-error epoch and the claims read). ``running_accuracy`` is a
different quantity under its own name: the batches' accuracy during the epoch, in train mode,
each before its update.

The zero-error epoch (``TrainResult.zero_error_epoch``, the manifest's field) is the first
evaluated epoch whose train accuracy is exactly 1.0: :func:`collapselab.store.first_zero_error`
on the evaluations in order, so it equals :func:`collapselab.store.zero_error_epoch` of the
loop's rows.

Determinism: on CPU, two calls with the same model initialisation, data and config give
bit-for-bit identical weights and metrics, and a run interrupted and resumed from a
checkpoint ends exactly like an uninterrupted one. (On CUDA some kernels are
non-deterministic unless ``torch.use_deterministic_algorithms(True)`` is set.)
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from collapselab.data.dataset import DataSplits
from collapselab.store import Run
from collapselab.store.mirrors import attach_mirrors
from collapselab.store.zero_error import first_zero_error
from collapselab.train._rng import epoch_permutation, get_rng_state, seed_everything, set_rng_state
from collapselab.train.callbacks import Callback, TrainState
from collapselab.train.config import TrainConfig
from collapselab.train.evaluate import _evaluate_tensors, _model_dtype, resolve_device
from collapselab.train.losses import training_loss

_CHECKPOINT_FORMAT = 1
FLUSH_SECONDS = 10.0
"""Between checkpoints, buffered metric rows are written to the run at most this often.
``Run.flush`` rewrites the whole metric table, so flushing after every epoch made a run of
many short epochs (full-batch training on a few hundred samples) quadratic in its length;
rows after the last checkpoint are dropped on resume anyway, and ``Run.metrics`` always
includes the buffered ones."""
_HOOKS = ("on_train_start", "on_iteration_end", "on_epoch_end", "on_train_end")

# history key -> (split, metric) of the rows recorded at an epoch's end
_ROW_NAMES = {
    "lr": ("train", "lr"),
    "running_loss": ("train", "running_loss"),
    "running_accuracy": ("train", "running_accuracy"),
    "train_loss": ("train", "loss"),
    "train_accuracy": ("train", "accuracy"),
    "test_loss": ("test", "loss"),
    "test_accuracy": ("test", "accuracy"),
}

NON_FINITE_LOSS = "non_finite_loss"
"""``TrainResult.stopped_reason`` when a training loss was NaN or infinite."""


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        model: the trained model (the object passed in, trained in place).
        config: the configuration used.
        epochs_completed: epochs fully completed (including those before a resume).
        iterations: optimiser steps taken in total.
        history: one dict per evaluated state: ``epoch``, ``step``, and when present
            ``lr``, ``running_loss``, ``running_accuracy``, ``train_loss``,
            ``train_accuracy``, ``test_loss``, ``test_accuracy``. Epoch 0 is the initial
            model (``log_initial``).
        zero_error_epoch: first evaluated epoch with training accuracy exactly 1.0
            (:func:`collapselab.store.zero_error_epoch` of the loop's rows).
        stopped_reason: ``None`` when all epochs ran; :data:`NON_FINITE_LOSS`; or
            ``"stop_requested: <reason>"`` from a callback.
        error: the message of a failed run (non-finite loss), else ``None``.
        resumed_from_step: the checkpoint step training resumed from, if it did.
        run: the run written to, if any.
    """

    model: nn.Module
    config: TrainConfig
    epochs_completed: int
    iterations: int
    history: list[dict[str, Any]] = field(default_factory=list)
    zero_error_epoch: int | None = None
    stopped_reason: str | None = None
    error: str | None = None
    resumed_from_step: int | None = None
    run: Run | None = None

    @property
    def failed(self) -> bool:
        """True when training stopped on a non-finite loss."""
        return self.stopped_reason == NON_FINITE_LOSS

    @property
    def final(self) -> dict[str, Any]:
        """The last history entry (empty dict when there is none)."""
        return dict(self.history[-1]) if self.history else {}


class _NonFiniteLoss(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ----------------------------------------------------------------------------- helpers
def _check_evaluated_loss(entry: dict[str, Any]) -> None:
    """Stop on a non-finite training loss in an epoch's evaluation. Every batch loss of the
    epoch was finite, but its last update can leave non-finite parameters, which only the
    evaluation after it sees."""
    value = entry.get("train_loss")
    if value is not None and not math.isfinite(value):
        raise _NonFiniteLoss(
            f"non-finite training loss {value} in the evaluation after epoch "
            f"{entry['epoch']} (step {entry['step']}): the last update left the outputs non-finite"
        )


def _call(callbacks: Sequence[Any], hook: str, state: TrainState) -> None:
    for cb in callbacks:
        fn = getattr(cb, hook, None)
        if fn is not None:
            fn(state)


def _validate(model: Any, data: Any, config: Any, callbacks: Any, run: Any) -> list[Any]:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model has no trainable parameters")
    if not isinstance(data, DataSplits):
        raise TypeError(f"data must be a DataSplits, got {type(data).__name__}")
    if len(data.train) == 0:
        raise ValueError("the training split is empty")
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    config.validate()
    if run is not None and not isinstance(run, Run):
        raise TypeError(f"run must be a collapselab.store.Run or None, got {type(run).__name__}")
    if isinstance(callbacks, Callback) or any(hasattr(callbacks, h) for h in _HOOKS):
        raise TypeError("callbacks must be a sequence of callbacks, e.g. [my_callback]")
    callbacks = list(callbacks)
    for i, cb in enumerate(callbacks):
        if not any(callable(getattr(cb, h, None)) for h in _HOOKS):
            raise TypeError(f"callbacks[{i}] ({type(cb).__name__}) has none of the hooks {_HOOKS}")
    return callbacks


def _iterations_per_epoch(n: int, config: TrainConfig) -> int:
    if config.full_batch:
        return 1
    if config.drop_last:
        if n < config.batch_size:
            raise ValueError(
                f"batch_size={config.batch_size} exceeds the {n} training samples with "
                "drop_last=True: no batch would be trained on"
            )
        return n // config.batch_size
    return math.ceil(n / config.batch_size)


def _make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.SGD:
    return torch.optim.SGD(
        [p for p in model.parameters() if p.requires_grad],
        lr=config.lr,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        nesterov=config.nesterov,
    )


def _check_logits(logits: Any, n_classes: int) -> None:
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"model must return a logits tensor, got {type(logits).__name__}")
    if logits.ndim != 2 or logits.shape[1] != n_classes:
        raise ValueError(
            f"model output has shape {tuple(logits.shape)}; expected (batch, {n_classes}) "
            f"for {n_classes} classes"
        )


def _set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def _loss_kwargs(config: TrainConfig) -> dict[str, Any]:
    return {
        "loss": config.loss,
        "mse_reduction": config.mse_reduction,
        "label_scale": config.label_scale,
    }


# -------------------------------------------------------------------------- the loop
class _Trainer:
    """Holds the tensors and state of one :func:`train` call."""

    def __init__(
        self,
        model: nn.Module,
        data: DataSplits,
        config: TrainConfig,
        callbacks: list[Any],
        run: Run | None,
    ) -> None:
        self.config = config
        self.callbacks = callbacks
        self.run = run
        device = resolve_device(config.device)
        model.to(device)
        dtype = _model_dtype(model)
        x = data.train.x.to(device)
        self.x = x.to(dtype) if dtype is not None and x.is_floating_point() else x
        self.y = data.train.y.to(device)
        self.n = len(data.train)
        self.n_classes = data.n_classes
        self.state = TrainState(
            model=model,
            optimizer=_make_optimizer(model, config),
            config=config,
            data=data,
            run=run,
            device=device,
            iterations_per_epoch=_iterations_per_epoch(self.n, config),
        )
        self.state.total_iterations = config.epochs * self.state.iterations_per_epoch
        test = data.test if "test" in self.state.evaluated_splits else None
        self.test_xy = None if test is None else (test.x.to(device), test.y.to(device))
        self.resumed_from: int | None = None
        self.epochs_completed = 0
        self.session_started = False  # True once an abort should keep the recorded rows
        self.flushed_at = time.monotonic()

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self) -> dict[str, Any]:
        state = self.state
        return {
            "format": _CHECKPOINT_FORMAT,
            "epoch": state.epoch,
            "iteration": state.iteration,
            "config": self.config.to_dict(),
            "model": state.model.state_dict(),
            "optimizer": state.optimizer.state_dict(),
            "rng": get_rng_state(),
            "history": state.history,
            "zero_error_epoch": state.zero_error_epoch,
            "callbacks": {key: cb.state_dict() for key, cb in self._stateful_callbacks().items()},
        }

    def _stateful_callbacks(self) -> dict[str, Any]:
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

    def save_checkpoint(self) -> None:
        if self.run is None or self.config.checkpoint_every == 0:
            return
        self.run.save_checkpoint(
            self.checkpoint_state(), self.state.iteration, keep_last=self.config.keep_checkpoints
        )

    def load_checkpoint(self, saved: dict[str, Any]) -> None:
        if saved.get("format") != _CHECKPOINT_FORMAT:
            raise ValueError(f"unsupported checkpoint format {saved.get('format')!r}")
        differing = self.config.resume_mismatch(saved["config"])
        if differing:
            raise ValueError(
                "cannot resume: the checkpoint was written with a different TrainConfig "
                f"(fields {differing}); use the original config or a new run"
            )
        stateful = self._stateful_callbacks()
        if set(saved["callbacks"]) != set(stateful):
            raise ValueError(
                "cannot resume: the checkpoint holds the state of callbacks "
                f"{sorted(saved['callbacks'])}, but this run has stateful callbacks "
                f"{sorted(stateful)}"
            )
        state = self.state
        state.model.load_state_dict(saved["model"])
        state.optimizer.load_state_dict(saved["optimizer"])
        state.epoch = int(saved["epoch"])
        state.iteration = int(saved["iteration"])
        state.history = list(saved["history"])
        state.zero_error_epoch = saved["zero_error_epoch"]
        evaluated = [h for h in state.history if "train_loss" in h]
        state.last_eval = _eval_part(evaluated[-1]) if evaluated else {}
        for key, cb in stateful.items():
            cb.load_state_dict(saved["callbacks"][key])
        state.resumed = True

    # ------------------------------------------------------------------- evaluation
    def evaluate(self) -> dict[str, float]:
        cfg = self.config
        kw = _loss_kwargs(cfg)
        train = _evaluate_tensors(
            self.state.model, self.x, self.y, batch_size=cfg.eval_batch_size, **kw
        )
        out = {"train_loss": train["loss"], "train_accuracy": train["accuracy"]}
        if self.test_xy is not None:
            res = _evaluate_tensors(
                self.state.model, *self.test_xy, batch_size=cfg.eval_batch_size, **kw
            )
            out.update(test_loss=res["loss"], test_accuracy=res["accuracy"])
        return out

    def record(self, entry: dict[str, Any]) -> None:
        state = self.state
        state.history.append(entry)
        if "train_accuracy" in entry:
            state.last_eval = _eval_part(entry)
            known = state.zero_error_epoch
            zero = first_zero_error(known, entry["epoch"], entry["train_accuracy"])
            state.zero_error_epoch = zero
            if known is None and zero is not None and self.run is not None:
                self.run.record_zero_error_epoch(zero)
        if self.run is not None:
            for key, (split, metric) in _ROW_NAMES.items():
                if key in entry:
                    self.run.log(
                        entry["step"], metric, entry[key], epoch=entry["epoch"], split=split
                    )

    # ------------------------------------------------------------------------ steps
    def batch_step(
        self, xb: torch.Tensor, yb: torch.Tensor
    ) -> tuple[float, torch.Tensor, torch.Tensor]:
        """Forward and backward of one batch.

        Returns the batch loss, the loss times the batch size and the number of correct
        predictions (before the update). A non-finite loss skips the backward pass.
        """
        logits = self.state.model(xb)
        _check_logits(logits, self.n_classes)
        loss = training_loss(logits, yb, **_loss_kwargs(self.config))
        value = float(loss.detach())  # the one host synchronisation per step
        if math.isfinite(value):
            loss.backward()
        correct = (logits.detach().argmax(dim=1) == yb).sum()
        return value, loss.detach().to(torch.float64) * yb.shape[0], correct

    def full_batch_step(self) -> tuple[float, torch.Tensor, torch.Tensor]:
        """Gradient of the mean loss over the whole training set, accumulated over chunks."""
        chunk = self.config.full_batch_chunk or self.n
        total = torch.zeros((), dtype=torch.float64, device=self.state.device)
        correct = torch.zeros((), dtype=torch.int64, device=self.state.device)
        for start in range(0, self.n, chunk):
            xb, yb = self.x[start : start + chunk], self.y[start : start + chunk]
            logits = self.state.model(xb)
            _check_logits(logits, self.n_classes)
            loss = training_loss(logits, yb, **_loss_kwargs(self.config))
            n_b = yb.shape[0]
            # The set mean is the chunk means weighted by chunk size; a single chunk gets an
            # exact factor 1, so full-batch training is plain GD on the mean loss.
            (loss * (n_b / self.n)).backward()
            total += loss.detach().to(torch.float64) * n_b
            correct += (logits.detach().argmax(dim=1) == yb).sum()
        return float(total) / self.n, total, correct

    def batches(self, epoch: int) -> list[torch.Tensor | None]:
        if self.config.full_batch:
            return [None]
        order = epoch_permutation(self.n, self.config.seed, epoch).to(self.state.device)
        bs = self.config.batch_size
        stop = self.state.iterations_per_epoch * bs if self.config.drop_last else self.n
        return [order[i : min(i + bs, stop)] for i in range(0, stop, bs)]

    def train_epoch(self, epoch: int) -> dict[str, Any] | None:
        """Train one epoch; returns its history entry, or None if a callback stopped it."""
        state, cfg = self.state, self.config
        state.epoch = epoch
        lr = cfg.lr_at_epoch(epoch)
        _set_lr(state.optimizer, lr)
        state.model.train()
        params = [p for g in state.optimizer.param_groups for p in g["params"]]
        loss_sum = torch.zeros((), dtype=torch.float64, device=state.device)
        correct = torch.zeros((), dtype=torch.int64, device=state.device)
        seen = 0
        for b, idx in enumerate(self.batches(epoch)):
            state.optimizer.zero_grad(set_to_none=True)
            if idx is None:
                value, batch_loss_sum, batch_correct = self.full_batch_step()
                n_b = self.n
            else:
                value, batch_loss_sum, batch_correct = self.batch_step(self.x[idx], self.y[idx])
                n_b = int(idx.shape[0])
            if not math.isfinite(value):
                raise _NonFiniteLoss(
                    f"non-finite training loss {value} at step {state.iteration + 1} "
                    f"(epoch {epoch}, batch {b + 1} of {state.iterations_per_epoch})"
                )
            if cfg.grad_clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip_norm)
            state.optimizer.step()
            state.iteration += 1
            state.batch_index = b
            state.loss = value
            loss_sum += batch_loss_sum
            correct += batch_correct
            seen += n_b
            every = cfg.log_batch_loss_every
            if self.run is not None and every and state.iteration % every == 0:
                self.run.log(state.iteration, "batch_loss", value, epoch=epoch, split="train")
            _call(self.callbacks, "on_iteration_end", state)
            if state.stop_reason is not None:
                return None
        entry: dict[str, Any] = {
            "epoch": epoch,
            "step": state.iteration,
            "lr": lr,
            "running_loss": float(loss_sum) / seen,
            "running_accuracy": int(correct) / seen,
        }
        if epoch % cfg.eval_every == 0 or epoch == cfg.epochs:
            entry.update(self.evaluate())
        return entry

    # -------------------------------------------------------------------------- run
    def prepare(self) -> dict[str, Any] | None:
        """Load and check the run's latest checkpoint, if any, before anything is changed in
        the run (so a mismatching config leaves the run's status as it was)."""
        run = self.run
        # The newest checkpoint that can be read: an unreadable newer one is set aside with
        # a warning rather than failing every rerun.
        found = run.resume_checkpoint(map_location="cpu") if run is not None else None
        if found is None:
            if run is not None and run.manifest.get("train_started"):
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

    def start(self, saved: dict[str, Any] | None) -> None:
        """Continue from a loaded checkpoint, or seed and record the initial state."""
        run, state, cfg = self.run, self.state, self.config
        if saved is not None and run is not None:
            run.truncate_after(int(saved["iteration"]))
            # The manifest may hold a detection from the discarded continuation.
            run.update_manifest(zero_error_epoch=state.zero_error_epoch)
            resumes = list(run.manifest.get("resumed_from") or [])
            resumes.append({"epoch": state.epoch, "step": state.iteration})
            run.update_manifest(resumed_from=resumes)
            self.begin_session(started=True)
            _call(self.callbacks, "on_train_start", state)
            # After on_train_start, so whatever it draws does not shift the trajectory.
            set_rng_state(saved["rng"])
            return
        if run is not None:
            run.flush()  # rows logged before training belong to the caller
        seed_everything(cfg.seed)
        # Without checkpoints nothing can be resumed: rows are kept whatever happens.
        self.begin_session(started=cfg.checkpoint_every == 0 or run is None)
        if cfg.log_initial:
            self.record({"epoch": 0, "step": 0, "lr": cfg.lr_at_epoch(1), **self.evaluate()})
        _call(self.callbacks, "on_train_start", state)
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

    def loop(self) -> None:
        state, cfg = self.state, self.config
        for epoch in range(state.epoch + 1, cfg.epochs + 1):
            entry = self.train_epoch(epoch)
            if entry is None:  # stopped from on_iteration_end
                return
            self.record(entry)
            self.epochs_completed = epoch
            _check_evaluated_loss(entry)  # before the callbacks measure non-finite features
            _call(self.callbacks, "on_epoch_end", state)
            every = cfg.checkpoint_every
            due = epoch == cfg.epochs or (every > 0 and epoch % every == 0)
            stopping = state.stop_reason is not None
            if self.run is not None and (
                due or stopping or time.monotonic() - self.flushed_at >= FLUSH_SECONDS
            ):
                self.run.flush()
                self.flushed_at = time.monotonic()
            if due or stopping:
                self.save_checkpoint()
            if state.stop_reason is not None:
                return

    def result(self, stopped_reason: str | None, error: str | None) -> TrainResult:
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


def _eval_part(entry: dict[str, Any]) -> dict[str, float]:
    keys = ("train_loss", "train_accuracy", "test_loss", "test_accuracy")
    return {k: entry[k] for k in keys if k in entry}


def train(
    model: nn.Module,
    data: DataSplits,
    config: TrainConfig,
    callbacks: Sequence[Any] = (),
    run: Run | None = None,
    *,
    finish_run: bool = True,
    mirrors: Sequence[Any] = (),
) -> TrainResult:
    """Train ``model`` on ``data.train`` with SGD as described by ``config``.

    See the module docstring for the exact sequence of operations and the metric rows.

    Args:
        model: maps inputs ``(B, ...)`` to logits ``(B, C)``; trained in place, moved to
            ``config.device``.
        data: training split (and an optional test split, evaluated alongside).
        config: hyper-parameters and conventions (:class:`TrainConfig`).
        callbacks: objects with any of the :class:`Callback` hooks.
        run: a :class:`collapselab.store.Run` to record metrics, checkpoints and status in.
            If it holds a checkpoint, training resumes from it.
        finish_run: set the run's status to ``"completed"`` at the end. Experiments that
            measure more after training pass ``False`` and complete the run themselves.
        mirrors: trackers that receive every metric row written to ``run`` during this
            call: names (``"tensorboard"``, ``"mlflow"``, ``"wandb"``) or
            :class:`collapselab.store.Mirror` objects; closed when training ends. Needs a run.

    Returns:
        A :class:`TrainResult`. A NaN or infinite training loss does not raise: training
        stops before applying that step, the run (if any) is marked ``"failed"`` with an
        error naming the step and the value, and the result has ``stopped_reason ==
        NON_FINITE_LOSS``. Any exception raised inside (including ``KeyboardInterrupt``)
        marks the run ``"failed"`` (``"interrupted"``), flushes its rows and propagates.
    """
    callbacks = _validate(model, data, config, callbacks, run)
    trainer = _Trainer(model, data, config, callbacks, run)
    saved = trainer.prepare()
    attached = attach_mirrors(run, mirrors)
    t0 = time.perf_counter()
    try:
        trainer.start(saved)
        try:
            trainer.loop()
            stopped = trainer.state.stop_reason
            reason = None if stopped is None else f"stop_requested: {stopped}"
            error = None
        except _NonFiniteLoss as err:
            trainer.state.stop_reason = reason = NON_FINITE_LOSS
            error = err.message
        _call(callbacks, "on_train_end", trainer.state)
        result = trainer.result(reason, error)
        trainer.finish(result, time.perf_counter() - t0)
    except BaseException as err:
        trainer.abort(err, time.perf_counter() - t0)
        raise
    finally:
        for mirror in attached:
            run.remove_mirror(mirror)
    if run is not None and finish_run and not result.failed:
        run.set_status("completed")
    return result
