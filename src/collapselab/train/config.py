"""Training configuration and the learning-rate schedule.

Conventions (all explicit, matching the papers' protocols where they state one):

* **Optimiser**: ``"sgd"`` (default) is :class:`torch.optim.SGD` on every trainable
  parameter, PyTorch's momentum form ``v <- m v + g``, ``w <- w - lr v`` (paper 000, R2);
  ``nesterov=True`` uses PyTorch's Nesterov variant. ``"adam"`` is :class:`torch.optim.Adam`
  with ``betas = (b1, b2)`` and ``eps``: ``m <- b1 m + (1 - b1) g``,
  ``v <- b2 v + (1 - b2) g^2``, ``w <- w - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)``
  at step t, its weight decay added to ``g`` as for SGD (L2, not AdamW).
* **Weight decay**: PyTorch adds ``weight_decay * w`` to the gradient of every parameter
  (biases and normalisation parameters included, as in paper 003's notebook), i.e. it
  minimises ``loss + (weight_decay / 2) ||w||^2``. To compare with a paper's lambda use
  :func:`collapselab.train.mse_lambda` (paper 003, Eq. 2) or
  :func:`collapselab.train.l2_lambda` (paper 000, ``L + lambda ||W||^2``).
* **Losses**: ``"ce"`` is the cross-entropy averaged over the batch. ``"mse"`` regresses
  the logits on ``label_scale * one_hot(y)`` with ``mse_reduction``:

  - ``"mean"`` (default): ``nn.MSELoss()``, the mean over batch **and** classes,
    ``(1/(B C)) sum_i ||z_i - y_i||^2`` (paper 003's notebook, note 003 §4.3);
  - ``"sum_classes"``: the mean over the batch of the sum over classes,
    ``(1/B) sum_i ||z_i - y_i||^2``.
* **Schedule**: ``"step"`` multiplies the learning rate by ``gamma`` (0.1) after
  ``floor(E/3)`` and ``floor(2E/3)`` completed epochs, as paper 003's
  ``MultiStepLR(milestones=[E//3, 2*E//3])`` stepped once per epoch: with E = 350, epochs
  1-116 use ``lr``, 117-233 ``lr/10`` and 234-350 ``lr/100`` (epochs counted from 1).
  ``milestones`` overrides the default milestones. ``"constant"`` keeps ``lr``.
* **Batches**: each epoch visits a permutation of the training set drawn from a generator
  seeded by ``(seed, epoch)``, so a resumed run sees the same batches; ``drop_last=True``
  skips the incomplete final batch (paper 003's loop does). ``full_batch=True`` takes one
  gradient-descent step per epoch on the whole training set.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from collapselab.checks import check_choice, check_float, check_int, check_seed

LossName = Literal["ce", "mse"]
MSEReduction = Literal["mean", "sum_classes"]
ScheduleName = Literal["step", "constant"]
OptimizerName = Literal["sgd", "adam"]

LOSSES: tuple[str, ...] = ("ce", "mse")
MSE_REDUCTIONS: tuple[str, ...] = ("mean", "sum_classes")
SCHEDULES: tuple[str, ...] = ("step", "constant")
OPTIMIZERS: tuple[str, ...] = ("sgd", "adam")

# Fields that may change between a run and its resumption without changing the trajectory.
_RESUME_SAFE_FIELDS = frozenset(
    {"device", "checkpoint_every", "keep_checkpoints", "eval_batch_size", "epochs"}
)
# Fields added after checkpoints were first written, with the value an older checkpoint
# (which lacks them) trained with.
_ADDED_FIELDS = {"optimizer": "sgd", "betas": [0.9, 0.999], "eps": 1e-8}


@dataclass
class TrainConfig:
    """Hyper-parameters of :func:`collapselab.train.train` (see the module docstring).

    Args:
        epochs: number of epochs E (passes over the training set; one step each when
            ``full_batch``).
        lr: initial learning rate.
        batch_size: mini-batch size (ignored when ``full_batch``).
        momentum: SGD momentum m.
        weight_decay: PyTorch weight decay (penalty ``(weight_decay/2)||w||^2``).
        nesterov: Nesterov momentum (needs ``momentum > 0``).
        optimizer: ``"sgd"`` or ``"adam"`` (then ``momentum`` must be 0: Adam's moments
            are set by ``betas``).
        betas: Adam's ``(b1, b2)``, each in ``[0, 1)``.
        eps: Adam's ``eps`` (> 0).
        loss: ``"ce"`` or ``"mse"``.
        mse_reduction: ``"mean"`` (``nn.MSELoss()``) or ``"sum_classes"``.
        label_scale: MSE target is ``label_scale * one_hot(y)``; must be 1 for CE.
        schedule: ``"step"`` or ``"constant"``.
        milestones: completed-epoch counts after which the step schedule multiplies the
            learning rate by ``gamma``; default ``(E // 3, 2 * E // 3)``.
        gamma: step-schedule factor.
        full_batch: gradient descent on the whole training set, one step per epoch.
        full_batch_chunk: in full-batch mode, accumulate the gradient over chunks of this
            many samples (same gradient up to rounding; batch-norm statistics then come
            per chunk). ``None``: one forward pass over the whole set.
        drop_last: skip the final incomplete mini-batch of each epoch.
        seed: seeds Python, NumPy and torch at the start and the per-epoch shuffles.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ... or ``"auto"`` (CUDA when present).
        checkpoint_every: save a checkpoint every this many epochs (and at step 0 and the
            last epoch) when a run is given; 0 disables checkpoints.
        keep_checkpoints: number of most recent checkpoints kept.
        grad_clip_norm: clip the total gradient 2-norm to this value; ``None``: no clipping.
        eval_every: evaluate train (and test) loss/accuracy every this many epochs, and at
            the last epoch.
        eval_batch_size: batch size of the evaluation passes.
        log_initial: evaluate and record the metrics of the initial model (epoch 0, step 0).
        log_batch_loss_every: record the mini-batch loss every this many steps (metric
            ``batch_loss``); 0 disables it.
    """

    epochs: int
    lr: float
    batch_size: int = 128
    momentum: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False
    optimizer: OptimizerName = "sgd"
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    loss: LossName = "ce"
    mse_reduction: MSEReduction = "mean"
    label_scale: float = 1.0
    schedule: ScheduleName = "constant"
    milestones: tuple[int, ...] | None = None
    gamma: float = 0.1
    full_batch: bool = False
    full_batch_chunk: int | None = None
    drop_last: bool = False
    seed: int = 0
    device: str = "cpu"
    checkpoint_every: int = 1
    keep_checkpoints: int = 2
    grad_clip_norm: float | None = None
    eval_every: int = 1
    eval_batch_size: int = 1024
    log_initial: bool = True
    log_batch_loss_every: int = 0

    def __post_init__(self) -> None:
        if self.milestones is not None:
            self.milestones = tuple(self.milestones)
        if isinstance(self.betas, list):
            self.betas = tuple(self.betas)
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError``/``TypeError`` naming the first invalid field."""
        check_int("epochs", self.epochs, minimum=0)
        check_float("lr", self.lr, minimum=0.0, strict=True)
        check_int("batch_size", self.batch_size, minimum=1)
        check_float("momentum", self.momentum, minimum=0.0)
        check_float("weight_decay", self.weight_decay, minimum=0.0)
        if self.nesterov and self.momentum == 0:
            raise ValueError("nesterov=True needs momentum > 0")
        self._validate_adam()
        check_choice("loss", self.loss, LOSSES)
        check_choice("mse_reduction", self.mse_reduction, MSE_REDUCTIONS)
        check_float("label_scale", self.label_scale, minimum=0.0, strict=True)
        if self.loss == "ce" and self.label_scale != 1.0:
            raise ValueError(
                f"label_scale applies to the MSE loss only; got {self.label_scale} with loss='ce'"
            )
        check_choice("schedule", self.schedule, SCHEDULES)
        if self.milestones is not None:
            for m in self.milestones:
                check_int("milestones entries", m, minimum=1)
            if list(self.milestones) != sorted(self.milestones):
                raise ValueError(f"milestones must be increasing, got {self.milestones}")
        check_float("gamma", self.gamma, minimum=0.0, strict=True)
        if self.full_batch_chunk is not None:
            check_int("full_batch_chunk", self.full_batch_chunk, minimum=1)
        check_seed("seed", self.seed)
        if not isinstance(self.device, str) or not self.device:
            raise TypeError(f"device must be a non-empty str such as 'cpu', got {self.device!r}")
        check_int("checkpoint_every", self.checkpoint_every, minimum=0)
        check_int("keep_checkpoints", self.keep_checkpoints, minimum=1)
        if self.grad_clip_norm is not None:
            check_float("grad_clip_norm", self.grad_clip_norm, minimum=0.0, strict=True)
        check_int("eval_every", self.eval_every, minimum=1)
        check_int("eval_batch_size", self.eval_batch_size, minimum=1)
        check_int("log_batch_loss_every", self.log_batch_loss_every, minimum=0)

    def _validate_adam(self) -> None:
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        if not isinstance(self.betas, tuple) or len(self.betas) != 2:
            raise ValueError(f"betas must be a pair (b1, b2), got {self.betas!r}")
        for i, beta in enumerate(self.betas):
            check_float(f"betas[{i}]", beta, minimum=0.0)
            if beta >= 1:
                raise ValueError(f"betas[{i}] must be < 1, got {beta}")
        check_float("eps", self.eps, minimum=0.0, strict=True)
        if self.optimizer == "adam" and self.momentum != 0:
            raise ValueError(
                f"momentum={self.momentum} applies to optimizer='sgd'; Adam's moments are set "
                "by betas"
            )

    def step_milestones(self) -> tuple[int, ...]:
        """Milestones of the step schedule: ``milestones`` or ``(E // 3, 2 * E // 3)``."""
        if self.milestones is not None:
            return self.milestones
        return (self.epochs // 3, 2 * self.epochs // 3)

    def lr_at_epoch(self, epoch: int) -> float:
        """Learning rate used during ``epoch`` (counted from 1).

        Step schedule: ``lr * gamma ** #{m in milestones : 0 < m < epoch}``, i.e. the rate
        drops after ``m`` completed epochs (PyTorch ``MultiStepLR`` stepped per epoch).
        """
        if self.schedule == "constant":
            return float(self.lr)
        lr = float(self.lr)
        for m in self.step_milestones():
            if 0 < m < epoch:
                lr *= self.gamma  # repeated products, bit-identical to MultiStepLR
        return lr

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain Python values (tuples become lists)."""
        out = dataclasses.asdict(self)
        if out["milestones"] is not None:
            out["milestones"] = list(out["milestones"])
        out["betas"] = list(out["betas"])
        return out

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """Build a config from :meth:`to_dict` output; unknown keys raise ``ValueError``."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown TrainConfig fields {sorted(unknown)}")
        return cls(**values)

    def resume_mismatch(self, saved: dict[str, Any]) -> list[str]:
        """Fields of a saved config (``to_dict``) that differ in a way that changes training.

        ``epochs`` may change (to extend a run) unless the step schedule derives its
        milestones from it.
        """
        current = self.to_dict()
        saved = {**_ADDED_FIELDS, **saved}
        differing = [
            k
            for k in sorted(set(current) | set(saved))
            if k not in _RESUME_SAFE_FIELDS and current.get(k) != saved.get(k)
        ]
        if (
            current["epochs"] != saved.get("epochs")
            and self.schedule == "step"
            and self.milestones is None
        ):
            differing.append("epochs (the step schedule's milestones depend on it)")
        return differing
