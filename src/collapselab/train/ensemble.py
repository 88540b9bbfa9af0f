r"""Ensembles of one architecture trained as one batched model: :func:`train_ensemble`.

E members, each with its own initialisation (the module passed in), seed (data order and
dropout masks), learning rate, schedule, momentum, weight decay, Adam betas and gradient
clipping (its :class:`TrainConfig`), train in one process: one batched forward and backward
per step (:class:`~collapselab.train.batched.BatchedModel`: batched products, grouped
convolutions) and one update of all members with their own hyper-parameters
(:class:`~collapselab.train.batched_optim.BatchedOptimizer`).

Each member is a single run, as :func:`collapselab.train.train` would make it: per step,
member ``e`` takes the batch its own ``(seed, epoch)`` permutation gives it and its own
dropout masks, and its loss is its batch loss alone (the batched backward of
``sum_e L_e`` gives every member exactly the gradient of its own ``L_e``: no parameter is
shared). Its metric rows, history, callbacks, checkpoints (model, optimizer in PyTorch's
format, random-generator states of a run seeded with its seed), resume and status go through
the same :class:`~collapselab.train.session.RunSession` as a single run's, in its own
:class:`~collapselab.store.Run`. A member's run can be resumed by :func:`train` alone, and a
single run's checkpoint by an ensemble.

Equal to one-by-one training up to rounding: the batched products, grouped convolutions and
per-member loss reductions sum in other orders than the single-network kernels, and a
hyper-parameter that differs between members is applied as a tensor (a multiply then an add
where PyTorch fuses them). In float64 every recorded value agrees to 1e-10 after the tested
runs; in float32 to the accumulated rounding stated in docs/training.md (tested).

Shared by all members (they step together): ``epochs``, ``batch_size``, ``optimizer``, the
loss and its reduction and scale, ``full_batch`` and its chunk, ``drop_last``, ``device``,
``checkpoint_every``, ``keep_checkpoints``, ``eval_every``, ``eval_batch_size``,
``log_initial``, ``log_batch_loss_every``. Per member: everything else.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from collapselab.data.dataset import DataSplits
from collapselab.store import Run
from collapselab.train import loop
from collapselab.train._rng import epoch_permutation, seeded_rng_state
from collapselab.train.batched import ArchitectureError, BatchedModel, repeat_rows
from collapselab.train.batched_optim import BatchedOptimizer
from collapselab.train.callbacks import TrainState
from collapselab.train.config import TrainConfig
from collapselab.train.evaluate import _model_dtype, resolve_device
from collapselab.train.loop import (
    NON_FINITE_LOSS,
    TrainResult,
    check_callbacks,
    iterations_per_epoch,
    loss_kwargs,
    make_optimizer,
)
from collapselab.train.losses import per_sample_loss
from collapselab.train.session import NonFiniteLoss, RunSession, call_hooks, non_finite_batch

SHARED_FIELDS = (
    "epochs",
    "batch_size",
    "optimizer",
    "loss",
    "mse_reduction",
    "label_scale",
    "full_batch",
    "full_batch_chunk",
    "drop_last",
    "device",
    "checkpoint_every",
    "keep_checkpoints",
    "eval_every",
    "eval_batch_size",
    "log_initial",
    "log_batch_loss_every",
)
""":class:`TrainConfig` fields all members of a batched ensemble must share."""


@dataclass
class _Member:
    """One member: its module (live view of its slice), state, session and outcome."""

    index: int
    state: TrainState
    session: RunSession
    callbacks: list[Any]
    rng: dict[str, Any]
    active: bool = True
    result: TrainResult | None = None
    values: dict[str, torch.Tensor] | None = None  # its tensors when it stopped early


# ------------------------------------------------------------------------ checks
def _check_configs(configs: Any, size: int) -> list[TrainConfig]:
    if isinstance(configs, TrainConfig) or not isinstance(configs, Sequence):
        raise TypeError("configs must be a sequence of TrainConfig, one per member")
    configs = list(configs)
    if len(configs) != size:
        raise ValueError(f"got {len(configs)} configs for {size} members; give one per member")
    for i, config in enumerate(configs):
        if not isinstance(config, TrainConfig):
            raise TypeError(f"configs[{i}] must be a TrainConfig, got {type(config).__name__}")
        config.validate()
    for name in SHARED_FIELDS:
        values = [getattr(c, name) for c in configs]
        if any(v != values[0] for v in values):
            raise ValueError(
                f"the members of a batched ensemble share {name!r} (they step together); "
                f"got {values}"
            )
    return configs


def _check_runs(runs: Any, size: int) -> list[Run | None]:
    if runs is None:
        return [None] * size
    runs = list(runs)
    if len(runs) != size or not all(isinstance(r, Run) for r in runs):
        raise TypeError(
            f"runs must be None or {size} collapselab.store.Run objects, one per member"
        )
    if len({str(r.path) for r in runs}) != size:
        raise ValueError("each member needs a run of its own; two members share a run")
    return runs


def _check_arguments(
    models: Any, data: Any, configs: Any, callbacks: Any, runs: Any
) -> tuple[list[nn.Module], list[TrainConfig], list[list[Any]], list[Run | None]]:
    if isinstance(models, nn.Module) or not isinstance(models, Sequence) or not models:
        raise TypeError("models must be a non-empty sequence of torch.nn.Module, one per member")
    models = list(models)
    for i, model in enumerate(models):
        if not isinstance(model, nn.Module):
            raise TypeError(f"models[{i}] must be a torch.nn.Module, got {type(model).__name__}")
        if not any(p.requires_grad for p in model.parameters()):
            raise ValueError(f"models[{i}] has no trainable parameters")
    if not isinstance(data, DataSplits):
        raise TypeError(f"data must be a DataSplits, got {type(data).__name__}")
    if len(data.train) == 0:
        raise ValueError("the training split is empty")
    configs = _check_configs(configs, len(models))
    if callbacks is None:
        callbacks = [[] for _ in models]
    elif len(callbacks) != len(models):
        raise ValueError(f"got {len(callbacks)} callback lists for {len(models)} members")
    callbacks = [check_callbacks(cbs) for cbs in callbacks]
    return models, configs, callbacks, _check_runs(runs, len(models))


def _clone_tensors(obj: Any) -> Any:
    """``obj`` with every tensor cloned (a view would save its whole storage)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _clone_tensors(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clone_tensors(v) for v in obj]
    return obj


# ---------------------------------------------------------------------- ensemble
class _Ensemble:
    """The tensors, the batched model and optimizer, and the members of one call."""

    def __init__(
        self,
        models: list[nn.Module],
        data: DataSplits,
        configs: list[TrainConfig],
        callbacks: list[list[Any]],
        runs: list[Run | None],
    ) -> None:
        self.configs = configs
        self.size = len(models)
        self.device = resolve_device(configs[0].device)
        for model in models:
            model.to(self.device)
        dtype = _model_dtype(models[0])
        x = data.train.x.to(self.device)
        self.x = x.to(dtype) if dtype is not None and x.is_floating_point() else x
        self.y = data.train.y.to(self.device)
        test = data.test if data.test is not None and len(data.test) > 0 else None
        self.test_xy = None if test is None else (test.x.to(self.device), test.y.to(self.device))
        if self.test_xy is not None and dtype is not None and self.test_xy[0].is_floating_point():
            self.test_xy = (self.test_xy[0].to(dtype), self.test_xy[1])
        self.n = len(data.train)
        self.n_classes = data.n_classes
        self.generators = [torch.Generator(device=self.device) for _ in models]
        self.batched = BatchedModel(models, self.generators)
        self.optimizer = BatchedOptimizer(self.batched.trainable(), configs)
        self.batched.attach()
        try:
            probe = self.x[:2]
            self.batched.check_equivalent(probe)
            self.batched.check_no_global_draws(probe)
        except BaseException:
            self.batched.release()
            raise
        ipe = iterations_per_epoch(self.n, configs[0])
        self.members = [
            self._member(i, model, data, configs[i], callbacks[i], runs[i], ipe)
            for i, model in enumerate(models)
        ]
        self._installed = False
        self._initial: list[dict[str, float]] | None = None
        self.t0 = time.perf_counter()

    def _member(
        self,
        i: int,
        model: nn.Module,
        data: DataSplits,
        config: TrainConfig,
        callbacks: list[Any],
        run: Run | None,
        ipe: int,
    ) -> _Member:
        trainable = [p for p in model.parameters() if p.requires_grad]
        state = TrainState(
            model=model,
            optimizer=make_optimizer(trainable, config),
            config=config,
            data=data,
            run=run,
            device=self.device,
            iterations_per_epoch=ipe,
            total_iterations=config.epochs * ipe,
        )
        session = RunSession(
            state,
            callbacks,
            snapshot=lambda: self.snapshot(i),
            restore=lambda saved: self.restore(i, saved),
        )
        return _Member(i, state, session, callbacks, seeded_rng_state(config.seed))

    @property
    def active(self) -> list[_Member]:
        return [m for m in self.members if m.active]

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    # ---------------------------------------------------------- member state
    def _install_views(self) -> None:
        """Give each member's optimizer views of its slice of the batched state, once the
        batched optimizer holds state (so ``state.optimizer`` is live, as in a single run)."""
        if self._installed or not self.optimizer.started:
            return
        for member in self.members:
            opt = member.state.optimizer
            params = [p for g in opt.param_groups for p in g["params"]]
            for j, entry in self.optimizer.member_state(member.index).items():
                opt.state[params[j]] = entry
        self._installed = True

    def snapshot(self, i: int) -> dict[str, Any]:
        member = self.members[i]
        self._install_views()
        rng = dict(member.rng)
        generator = self.generators[i]
        if self.device.type == "cuda":
            cuda = list(rng["cuda"])
            if cuda:
                cuda[self.device.index or 0] = generator.get_state()
            rng["cuda"] = cuda
        else:
            rng["torch"] = generator.get_state()
        return {
            "model": _clone_tensors(dict(member.state.model.state_dict())),
            "optimizer": _clone_tensors(member.state.optimizer.state_dict()),
            "rng": rng,
        }

    def restore(self, i: int, saved: dict[str, Any]) -> None:
        state = self.members[i].state
        state.model.load_state_dict(saved["model"])
        self.optimizer.load_member_state(i, saved["optimizer"])
        state.optimizer.param_groups[0]["lr"] = saved["optimizer"]["param_groups"][0]["lr"]

    def restore_rng(self, i: int, rng: dict[str, Any]) -> None:
        if self.device.type == "cuda":
            states = rng.get("cuda") or []
            index = self.device.index or 0
            if index < len(states):
                self.generators[i].set_state(states[index])
        else:
            self.generators[i].set_state(rng["torch"])

    # -------------------------------------------------------------- evaluation
    @torch.no_grad()
    def _evaluate_split(self, x: torch.Tensor, y: torch.Tensor) -> tuple[list[float], list[float]]:
        """Mean loss and accuracy of every member on ``(x, y)`` (eval mode), per-sample
        losses summed in float64 as :func:`collapselab.train.evaluate` does."""
        size, n = self.size, int(y.shape[0])
        chunk = max(1, self.configs[0].eval_batch_size // size)
        loss_sum = torch.zeros(size, dtype=torch.float64, device=self.device)
        correct = torch.zeros(size, dtype=torch.int64, device=self.device)
        module = self.batched.module
        module.eval()
        try:
            for start in range(0, n, chunk):
                yb = repeat_rows(y[start : start + chunk], size)
                logits = self.batched.forward_shared(x[start : start + chunk])
                per = per_sample_loss(logits, yb, **loss_kwargs(self.configs[0]))
                loss_sum += per.to(torch.float64).view(-1, size).sum(0)
                correct += (logits.argmax(dim=1) == yb).view(-1, size).sum(0)
        finally:
            module.train()
        return [float(v) / n for v in loss_sum.tolist()], [int(c) / n for c in correct.tolist()]

    def evaluate(self) -> list[dict[str, float]]:
        """Every member's train (and test) loss and accuracy."""
        loss, acc = self._evaluate_split(self.x, self.y)
        out = [{"train_loss": a, "train_accuracy": b} for a, b in zip(loss, acc, strict=True)]
        if self.test_xy is not None:
            loss, acc = self._evaluate_split(*self.test_xy)
            for entry, a, b in zip(out, loss, acc, strict=True):
                entry.update(test_loss=a, test_accuracy=b)
        return out

    def initial(self, i: int) -> dict[str, float]:
        """Member ``i``'s initial evaluation (all members evaluated at the first call)."""
        if self._initial is None:
            self._initial = self.evaluate()
        return self._initial[i]

    # ------------------------------------------------------------------- steps
    def _batch_losses(
        self, logits: torch.Tensor, yb: torch.Tensor
    ) -> tuple[torch.Tensor, int, torch.Tensor]:
        """Per-member mean losses ``(E,)``, the rows per member and the correct counts
        ``(E,)`` of a folded batch's logits and labels."""
        if logits.ndim != 2 or logits.shape[1] != self.n_classes:
            raise ValueError(
                f"the batched model's output has shape {tuple(logits.shape)}; expected "
                f"(rows, {self.n_classes})"
            )
        per = per_sample_loss(logits, yb, **loss_kwargs(self.configs[0])).view(-1, self.size)
        correct = (logits.detach().argmax(dim=1) == yb).view(-1, self.size).sum(0)
        return per.mean(0), per.shape[0], correct

    def batch_step(self, idx: torch.Tensor) -> tuple[list[float], torch.Tensor, torch.Tensor]:
        """Forward and backward of one batch per member (``idx`` ``(E, B)``): each member's
        batch loss, loss times batch size and correct count. A member with a non-finite loss
        gets no gradient."""
        rows = idx.t().reshape(-1)  # sample-major: row b E + e is member e's sample b
        losses, n_b, correct = self._batch_losses(self.batched.module(self.x[rows]), self.y[rows])
        values = losses.detach().tolist()  # the one host synchronisation per step
        finite = [m.index for m in self.active if math.isfinite(values[m.index])]
        if finite:
            losses[finite].sum().backward()
        return values, losses.detach().to(torch.float64) * n_b, correct

    def full_batch_step(self) -> tuple[list[float], torch.Tensor, torch.Tensor]:
        """Every member's gradient of its mean loss over the whole training set."""
        chunk = self.configs[0].full_batch_chunk or self.n
        total = torch.zeros(self.size, dtype=torch.float64, device=self.device)
        correct = torch.zeros(self.size, dtype=torch.int64, device=self.device)
        active = [m.index for m in self.active]
        for start in range(0, self.n, chunk):
            logits = self.batched.forward_shared(self.x[start : start + chunk])
            yb = repeat_rows(self.y[start : start + chunk], self.size)
            losses, n_b, batch_correct = self._batch_losses(logits, yb)
            # chunk means weighted by chunk size, an exact factor 1 for a single chunk
            (losses[active] * (n_b / self.n)).sum().backward()
            total += losses.detach().to(torch.float64) * n_b
            correct += batch_correct
        return (total / self.n).tolist(), total, correct

    def batches(self, epoch: int) -> list[torch.Tensor | None]:
        """Index matrices ``(E, B)`` of the epoch's batches (each member's own order)."""
        cfg = self.configs[0]
        if cfg.full_batch:
            return [None]
        orders = torch.stack([epoch_permutation(self.n, c.seed, epoch) for c in self.configs])
        orders = orders.to(self.device)
        bs, ipe = cfg.batch_size, self.members[0].state.iterations_per_epoch
        stop = ipe * bs if cfg.drop_last else self.n
        return [orders[:, i : min(i + bs, stop)] for i in range(0, stop, bs)]

    def _zero_grad(self) -> None:
        for p in self.batched.trainable():
            p.grad = None

    def _after_step(self, b: int, values: list[float]) -> None:
        for member in self.active:
            state = member.state
            state.iteration += 1
            state.batch_index = b
            state.loss = values[member.index]
            member.session.log_batch_loss(state.loss)
            call_hooks(member.callbacks, "on_iteration_end", state)
            if state.stop_reason is not None:
                self.stop(member, f"stop_requested: {state.stop_reason}", None)

    def train_epoch(self, epoch: int) -> dict[int, dict[str, Any]]:
        """Train one epoch; the history entries of the members still training at its end."""
        lrs = [c.lr_at_epoch(epoch) for c in self.configs]
        self.optimizer.set_lrs(lrs)
        for member in self.active:
            member.state.epoch = epoch
            member.state.optimizer.param_groups[0]["lr"] = lrs[member.index]
        self.batched.module.train()
        loss_sum = torch.zeros(self.size, dtype=torch.float64, device=self.device)
        correct = torch.zeros(self.size, dtype=torch.int64, device=self.device)
        seen = 0
        for b, idx in enumerate(self.batches(epoch)):
            self._zero_grad()
            if idx is None:
                values, batch_loss_sum, batch_correct = self.full_batch_step()
                n_b = self.n
            else:
                values, batch_loss_sum, batch_correct = self.batch_step(idx)
                n_b = int(idx.shape[1])
            for member in self.active:
                if not math.isfinite(values[member.index]):
                    err = non_finite_batch(values[member.index], member.state, epoch, b)
                    self.stop(member, NON_FINITE_LOSS, err.message)
            if not self.active:
                return {}
            self.optimizer.clip_grad_norms()
            self.optimizer.step()
            self._install_views()
            loss_sum += batch_loss_sum
            correct += batch_correct
            seen += n_b
            self._after_step(b, values)
        return self._entries(epoch, lrs, loss_sum, correct, seen)

    def _entries(
        self,
        epoch: int,
        lrs: list[float],
        loss_sum: torch.Tensor,
        correct: torch.Tensor,
        seen: int,
    ) -> dict[int, dict[str, Any]]:
        cfg = self.configs[0]
        losses, counts = loss_sum.tolist(), correct.tolist()
        entries = {
            m.index: {
                "epoch": epoch,
                "step": m.state.iteration,
                "lr": lrs[m.index],
                "running_loss": losses[m.index] / seen,
                "running_accuracy": int(counts[m.index]) / seen,
            }
            for m in self.active
        }
        if entries and (epoch % cfg.eval_every == 0 or epoch == cfg.epochs):
            evaluated = self.evaluate()
            for i, entry in entries.items():
                entry.update(evaluated[i])
        return entries

    # --------------------------------------------------------------------- run
    def prepare(self) -> list[dict[str, Any] | None]:
        """Load the members' checkpoints at the latest step they all hold (members that
        stopped in an earlier call stay stopped); ``None`` for a fresh member."""
        runs = [m.state.run for m in self.members]
        if all(run is None for run in runs):
            return [None] * self.size
        stopped = [m for m in self.members if _stopped_before(m.state.run)]
        for member in stopped:
            self._load_stopped(member)
        live = [m for m in self.members if m.active]
        steps = [{c.step for c in m.state.run.checkpoints()} for m in live]
        if not any(steps):
            return [m.session.prepare() if m.active else None for m in self.members]
        common = set.intersection(*steps)
        if not common:
            held = {m.index: sorted(s) for m, s in zip(live, steps, strict=True)}
            raise ValueError(
                "cannot resume the ensemble: its members' runs hold no checkpoint at a common "
                f"step (member: steps {held}); resume them one by one with train()"
            )
        step = max(common)
        return [m.session.prepare(step) if m.active else None for m in self.members]

    def _load_stopped(self, member: _Member) -> None:
        """A member that stopped in an earlier call: its latest checkpoint's weights, and a
        result rebuilt from its run (history up to that checkpoint)."""
        run = member.state.run
        found = run.resume_checkpoint(map_location="cpu")
        if found is not None:
            member.state.model.load_state_dict(found[1]["model"])
            member.state.history = list(found[1]["history"])
        manifest = run.manifest
        member.values = _clone_tensors(self.batched.member_values(member.index))
        member.active = False
        member.result = TrainResult(
            model=member.state.model,
            config=member.state.config,
            epochs_completed=int(manifest.get("epochs_completed") or 0),
            iterations=int(manifest.get("iterations") or 0),
            history=list(member.state.history),
            zero_error_epoch=manifest.get("zero_error_epoch"),
            stopped_reason=manifest.get("stopped_reason"),
            error=manifest.get("error"),
            run=run,
        )

    def start(self, saved: list[dict[str, Any] | None]) -> None:
        for member in self.active:
            i = member.index
            member.session.start(
                saved[i],
                reseed=lambda i=i: self.generators[i].manual_seed(self.configs[i].seed),
                evaluate=lambda i=i: self.initial(i),
                restore_rng=lambda rng, i=i: self.restore_rng(i, rng),
            )
            if member.state.run is not None:
                member.state.run.update_manifest(batched_ensemble={"size": self.size, "member": i})
        self._install_views()

    def save_checkpoints(self, members: list[_Member]) -> None:
        """Checkpoint ``members``, pruning old checkpoints only once all are written, so an
        interruption in between leaves a step every member holds."""
        for member in members:
            member.session.save_checkpoint(extra_kept=1)
        for member in members:
            run, keep = member.state.run, member.state.config.keep_checkpoints
            if run is not None:
                for ckpt in run.checkpoints()[:-keep]:
                    ckpt.path.unlink()

    def loop(self) -> None:
        first = self.active[0].state.epoch + 1 if self.active else 1
        for epoch in range(first, self.configs[0].epochs + 1):
            if not self.active:
                return
            due = []
            for i, entry in self.train_epoch(epoch).items():
                member = self.members[i]
                try:
                    if member.session.end_epoch(entry, loop.FLUSH_SECONDS):
                        due.append(member)
                except NonFiniteLoss as err:
                    self.stop(member, NON_FINITE_LOSS, err.message)
            self.save_checkpoints([m for m in due if m.active])
            for member in self.active:
                if member.state.stop_reason is not None:
                    self.stop(member, f"stop_requested: {member.state.stop_reason}", None)

    def stop(
        self, member: _Member, reason: str | None, error: str | None, early: bool = True
    ) -> None:
        """End a member's training: call ``on_train_end`` and record it; ``early`` (the
        others go on): keep a copy of its tensors, which later steps would change."""
        member.active = False
        if early:
            member.values = _clone_tensors(self.batched.member_values(member.index))
        if reason == NON_FINITE_LOSS:
            member.state.stop_reason = NON_FINITE_LOSS
        call_hooks(member.callbacks, "on_train_end", member.state)
        member.result = member.session.result(reason, error)
        member.session.finish(member.result, self.elapsed())

    def finish(self) -> list[TrainResult]:
        for member in self.active:
            self.stop(member, None, None, early=False)
        return [m.result for m in self.members]  # type: ignore[misc]

    def abort(self, err: BaseException) -> None:
        for member in self.active:
            member.session.abort(err, self.elapsed())

    def release(self) -> None:
        self.batched.release({m.index: m.values for m in self.members if m.values is not None})


def _stopped_before(run: Run | None) -> bool:
    """Whether ``run`` stopped early (non-finite loss, a callback) in an earlier call."""
    return run is not None and run.manifest.get("stopped_reason") is not None


def train_ensemble(
    models: Sequence[nn.Module],
    data: DataSplits,
    configs: Sequence[TrainConfig],
    callbacks: Sequence[Sequence[Any]] | None = None,
    runs: Sequence[Run] | None = None,
    *,
    finish_run: bool = True,
) -> list[TrainResult]:
    """Train E members of one architecture on ``data`` as one batched model.

    Member ``e`` trains as ``train(models[e], data, configs[e], callbacks[e], runs[e])``
    would, to rounding (module docstring): its own data order and dropout masks (seeded by
    ``configs[e].seed``), learning rate and schedule, momentum or Adam betas, weight decay
    and gradient clipping; its own rows, checkpoints and status in ``runs[e]``. Give the
    runs back to resume: every member resumes from the latest checkpoint step all of them
    hold (a member that stopped early in an earlier call stays stopped).

    Args:
        models: the members, built and initialised by the caller (one seed each), all of one
            architecture: same module types, hyper-parameters and tensor shapes, with layers
            of the types :data:`collapselab.train.batched.SUPPORTED`. Trained in place: during
            the call each member's tensors are views of its slice of the batched ones (so
            callbacks and monitors built on the member see it live); afterwards they are the
            member's own again, holding the trained values.
        data: the training split (and an optional test split) all members train on.
        configs: one :class:`TrainConfig` per member; the fields of :data:`SHARED_FIELDS`
            must agree.
        callbacks: one list of callbacks per member, each called with that member's
            :class:`TrainState` (its module, a torch optimizer whose state is a view of the
            member's slice of the batched state, its config and run).
        runs: ``None`` or one :class:`collapselab.store.Run` per member.
        finish_run: set each member's run to ``"completed"`` at the end (unless it failed).

    Returns:
        One :class:`TrainResult` per member. A member whose loss turns non-finite stops
        there (its run ``"failed"``), as a single run would; the others continue.

    Raises:
        ArchitectureError: the members differ in architecture or hold a layer that cannot
            be batched (train them one by one with :func:`collapselab.train.train`); raised
            before any run is touched.
    """
    models, configs, callbacks, runs = _check_arguments(models, data, configs, callbacks, runs)
    ensemble = _Ensemble(models, data, configs, callbacks, runs)
    try:
        saved = ensemble.prepare()
        ensemble.t0 = time.perf_counter()
        try:
            ensemble.start(saved)
            ensemble.loop()
            results = ensemble.finish()
        except BaseException as err:
            ensemble.abort(err)
            raise
    finally:
        ensemble.release()
    for result in results:
        if result.run is not None and finish_run and not result.failed:
            result.run.set_status("completed")
    return results


__all__ = ["SHARED_FIELDS", "ArchitectureError", "train_ensemble"]
