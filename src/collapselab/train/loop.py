"""The training loop: SGD (or Adam) over in-memory data, with callbacks, metrics and resume.

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

The bookkeeping of steps 2 and 4 and of the records (rows, checkpoints, resume, status) is
:class:`collapselab.train.session.RunSession`, shared with the batched ensembles of
:mod:`collapselab.train.ensemble`.

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
from collapselab.train._rng import epoch_permutation, get_rng_state, seed_everything, set_rng_state
from collapselab.train.callbacks import Callback, TrainState
from collapselab.train.config import TrainConfig
from collapselab.train.evaluate import _evaluate_tensors, _model_dtype, resolve_device
from collapselab.train.losses import training_loss
from collapselab.train.session import (
    HOOKS,
    NonFiniteLoss,
    RunSession,
    call_hooks,
    non_finite_batch,
)

FLUSH_SECONDS = 10.0
"""Between checkpoints, buffered metric rows are written to the run at most this often.
``Run.flush`` rewrites the whole metric table, so flushing after every epoch made a run of
many short epochs (full-batch training on a few hundred samples) quadratic in its length;
rows after the last checkpoint are dropped on resume anyway, and ``Run.metrics`` always
includes the buffered ones."""

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


# ----------------------------------------------------------------------------- helpers
def check_callbacks(callbacks: Any) -> list[Any]:
    """``callbacks`` as a list, each with at least one of the hooks."""
    if isinstance(callbacks, Callback) or any(hasattr(callbacks, h) for h in HOOKS):
        raise TypeError("callbacks must be a sequence of callbacks, e.g. [my_callback]")
    callbacks = list(callbacks)
    for i, cb in enumerate(callbacks):
        if not any(callable(getattr(cb, h, None)) for h in HOOKS):
            raise TypeError(f"callbacks[{i}] ({type(cb).__name__}) has none of the hooks {HOOKS}")
    return callbacks


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
    return check_callbacks(callbacks)


def iterations_per_epoch(n: int, config: TrainConfig) -> int:
    """Optimiser steps per epoch on ``n`` training samples."""
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


def make_optimizer(params: Sequence[torch.Tensor], config: TrainConfig) -> torch.optim.Optimizer:
    """The configured optimiser (:class:`torch.optim.SGD` or :class:`torch.optim.Adam`)."""
    if config.optimizer == "adam":
        return torch.optim.Adam(
            params,
            lr=config.lr,
            betas=config.betas,
            eps=config.eps,
            weight_decay=config.weight_decay,
        )
    return torch.optim.SGD(
        params,
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


def loss_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The loss arguments of ``config``."""
    return {
        "loss": config.loss,
        "mse_reduction": config.mse_reduction,
        "label_scale": config.label_scale,
    }


# -------------------------------------------------------------------------- the loop
class _Trainer:
    """Holds the tensors and state of one :func:`train` call; its run's bookkeeping is a
    :class:`RunSession`."""

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
            optimizer=make_optimizer([p for p in model.parameters() if p.requires_grad], config),
            config=config,
            data=data,
            run=run,
            device=device,
            iterations_per_epoch=iterations_per_epoch(self.n, config),
        )
        self.state.total_iterations = config.epochs * self.state.iterations_per_epoch
        test = data.test if "test" in self.state.evaluated_splits else None
        self.test_xy = None if test is None else (test.x.to(device), test.y.to(device))
        self.session = RunSession(self.state, callbacks, self.snapshot, self.restore)

    def snapshot(self) -> dict[str, Any]:
        state = self.state
        return {
            "model": state.model.state_dict(),
            "optimizer": state.optimizer.state_dict(),
            "rng": get_rng_state(),
        }

    def restore(self, saved: dict[str, Any]) -> None:
        self.state.model.load_state_dict(saved["model"])
        self.state.optimizer.load_state_dict(saved["optimizer"])

    # ------------------------------------------------------------------- evaluation
    def evaluate(self) -> dict[str, float]:
        cfg = self.config
        kw = loss_kwargs(cfg)
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
        loss = training_loss(logits, yb, **loss_kwargs(self.config))
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
            loss = training_loss(logits, yb, **loss_kwargs(self.config))
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
                raise non_finite_batch(value, state, epoch, b)
            if cfg.grad_clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip_norm)
            state.optimizer.step()
            state.iteration += 1
            state.batch_index = b
            state.loss = value
            loss_sum += batch_loss_sum
            correct += batch_correct
            seen += n_b
            self.session.log_batch_loss(value)
            call_hooks(self.callbacks, "on_iteration_end", state)
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
    def start(self, saved: dict[str, Any] | None) -> None:
        self.session.start(
            saved,
            reseed=lambda: seed_everything(self.config.seed),
            evaluate=self.evaluate,
            restore_rng=set_rng_state,
        )

    def loop(self) -> None:
        state, cfg = self.state, self.config
        for epoch in range(state.epoch + 1, cfg.epochs + 1):
            entry = self.train_epoch(epoch)
            if entry is None:  # stopped from on_iteration_end
                return
            if self.session.end_epoch(entry, FLUSH_SECONDS):
                self.session.save_checkpoint()
            if state.stop_reason is not None:
                return


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
    """Train ``model`` on ``data.train`` with SGD (or Adam) as described by ``config``.

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
    session = trainer.session
    saved = session.prepare()
    attached = attach_mirrors(run, mirrors)
    t0 = time.perf_counter()
    try:
        trainer.start(saved)
        try:
            trainer.loop()
            stopped = trainer.state.stop_reason
            reason = None if stopped is None else f"stop_requested: {stopped}"
            error = None
        except NonFiniteLoss as err:
            trainer.state.stop_reason = reason = NON_FINITE_LOSS
            error = err.message
        call_hooks(callbacks, "on_train_end", trainer.state)
        result = session.result(reason, error)
        session.finish(result, time.perf_counter() - t0)
    except BaseException as err:
        session.abort(err, time.perf_counter() - t0)
        raise
    finally:
        for mirror in attached:
            run.remove_mirror(mirror)
    if run is not None and finish_run and not result.failed:
        run.set_status("completed")
    return result
