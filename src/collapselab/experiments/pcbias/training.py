r"""One deep linear network trained by exact full-batch gradient descent (paper 002 §2-3).

The loss is the **summed** squared loss ``½‖W X − Y‖_F²`` of Eq. 5 with one-hot targets and
the step is ``μ = lr / (L d_1)`` (``d_1`` the largest eigenvalue of the uncentred
``Σ_XX = XᵀX``), the theory's convention (note 002 §7.5), so the closed form's
``λ_j = 1 − μ c d_j`` applies unchanged.

By Lemma 1 the gradient depends on the data only through ``Σ_XX`` and ``Σ_YX``. The network
is therefore trained in the principal coordinate system, where ``Σ_XX = D`` is diagonal and
``Σ_YX = M`` (:func:`pc_gd_step`): every step is the step on the real data, rotated, at a
cost independent of the number of examples. The first layer is drawn in input
coordinates by :class:`~collapselab.models.DeepLinear` (Def. 3, Glorot, ...) and rotated,
``W_1 U``, so the compact matrix is ``W̃ = W U`` from the first step.

A member of such an ensemble is a :class:`GDMember` (``pcbias-convergence``,
``pcbias-scales``, ``pcbias-init``). The module also holds the minibatch SGD step and epoch
on cross-entropy that the SGD-trained networks of the other experiments share
(:func:`sgd_step`, :func:`sgd_epoch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse.linalg
import torch

from collapselab.experiments.pcbias._common import Inputs, Member, log_steps, one_hot
from collapselab.experiments.pcbias.evaluation import set_accuracies, transformed_sets
from collapselab.experiments.pcbias.presets import GDPreset
from collapselab.metrics.pc_frame import PCFrame, principal_frame
from collapselab.metrics.pcbias import gradient_scale_statistics
from collapselab.models import DeepLinear
from collapselab.theory.pcbias import compact_matrix, expected_scales, gradient_scale_matrices

__all__ = [
    "GDMember",
    "classified_correctly",
    "deep_linear_batch",
    "deep_linear_member",
    "initial_weights",
    "linear_dry_run",
    "pc_gd_step",
    "sgd_epoch",
    "sgd_step",
    "step_size",
]


@dataclass(frozen=True, kw_only=True)
class GDMember(Member):
    """One deep linear network trained by exact full-batch GD (:func:`deep_linear_member`).

    Attributes:
        hidden: hidden widths; init: :class:`~collapselab.models.DeepLinear`'s init.
        lr: ``μ = lr / (L d_1)``; steps, checkpoints: GD steps and about that many
            log-spaced checkpoints (:func:`~collapselab.experiments.pcbias._common.log_steps`).
        record_correct: also record which examples are classified correctly.
        scale_layers: 1-based layers whose gradient-scale statistics are recorded.
        eval_transforms: transformed test sets scored at every checkpoint
            (:mod:`~collapselab.experiments.pcbias.evaluation`).
    """

    hidden: tuple[int, ...]
    init: str
    lr: float
    steps: int
    checkpoints: int
    record_correct: bool = False
    scale_layers: tuple[int, ...] = ()
    eval_transforms: tuple[str, ...] = ()

    @classmethod
    def of(cls, preset: GDPreset, **fields: Any) -> GDMember:
        """Member 0 of an ensemble of ``preset``: its data, widths, rate and checkpoints,
        and ``fields`` (``init``, the run's seeds and folder, what differs from the preset,
        what to record)."""
        base = {"data": preset.data, "hidden": preset.hidden, "lr": preset.lr,
                "steps": preset.steps, "checkpoints": preset.checkpoints}  # fmt: skip
        return cls(**{**base, **fields})

    def widths(self, frame: PCFrame) -> list[int]:
        """``[q, *hidden, K]`` of the data's frame."""
        return [frame.n_pcs, *self.hidden, frame.n_outputs]

    def train(self) -> dict[str, Any]:
        return deep_linear_member(self)

    @classmethod
    def train_batch(cls, members: Sequence[Member]) -> list[dict[str, Any] | None]:
        return deep_linear_batch(list(members))  # type: ignore[arg-type]


def data_frame(member: Member) -> tuple[PCFrame, Inputs]:
    """The principal frame of the member's training data and the data itself."""
    inputs = member.inputs()
    return principal_frame(inputs.x, one_hot(inputs.y, inputs.n_classes)), inputs


def initial_weights(widths: list[int], init: str, seed: int, basis: np.ndarray) -> list[np.ndarray]:
    """``[W_1 U, W_2, ..., W_L]`` in float64: :class:`DeepLinear`'s init ``init`` drawn with
    torch seed ``seed``, the first layer rotated into PC coordinates."""
    torch.manual_seed(seed)
    net = DeepLinear(widths, init=init)
    ws = [layer.weight.detach().double().numpy().copy() for layer in net.layers]
    ws[0] = ws[0] @ basis
    return ws


def step_size(frame: PCFrame, n_layers: int, lr: float) -> float:
    """``μ = lr / (L d_1)``."""
    return lr / (n_layers * float(frame.eigenvalues[0]))


def pc_gd_step(ws: list[np.ndarray], frame: PCFrame, mu: float) -> list[np.ndarray]:
    r"""One exact full-batch GD step of Eq. 5 in PC coordinates (Lemma 1 with
    ``Σ_XX = D``): ``W_l ← W_l − μ (W_L⋯W_{l+1})ᵀ (W̃ D − M) (W_{l−1}⋯W_1)ᵀ``, ``ws[0]``
    acting on PC coordinates. Equal to :func:`collapselab.theory.pcbias.gd_step` on the
    square-root data (tested).

    Every product is taken with a ``K``-row factor, never between two weight matrices:
    ``W_L⋯W_{l+1}`` is built from the top (``K x m_l``), ``Er (W_{l−1}⋯W_1)ᵀ`` from the
    bottom (``K x m_{l−1}``), and each gradient is their ``m_l x m_{l−1}`` product of rank
    ``K``: ``O(K Σ_l m_l m_{l−1})`` operations per step instead of the
    ``O(q Σ_l m_l m_{l−1})`` of forming ``W_l⋯W_1``. (Standard ``pcbias-scales``, 5 layers,
    width 1024, ``q = 196``, ``K = 10``: 14 ms per step instead of 31 ms on one core,
    measured at load 3; the ``m x m`` updates themselves now dominate.)

    A batch of E networks steps at once when every ``ws[l]`` is stacked ``(E, m_l,
    m_{l−1})``: NumPy's ``matmul`` takes one BLAS product per member and matrix, the same
    call as for one network, so each member's step is bit-for-bit its step alone (tested),
    with one Python step for all members."""
    above = [np.eye(frame.n_outputs)]  # the products W_L ... W_{l+1}, built from the top
    for w in ws[:0:-1]:
        above.append(above[-1] @ w)
    above.reverse()  # above[i]: the product of the layers above ws[i], K x m_i
    err = (above[0] @ ws[0]) * frame.eigenvalues - frame.class_sums  # (K, q)
    left = err  # Er (product of the layers below ws[i])^T, built from the bottom
    grads = []
    for a, w in zip(above, ws, strict=True):
        grads.append(np.swapaxes(a, -1, -2) @ left)
        left = left @ np.swapaxes(w, -1, -2)
    return [w - mu * g for w, g in zip(ws, grads, strict=True)]


def classified_correctly(x_pc: np.ndarray, y: np.ndarray, w_pc: np.ndarray) -> np.ndarray:
    """Which examples ``x_pc`` ``(n, q)`` the compact matrix ``w_pc`` ``(K, q)`` (the same
    coordinates) classifies as their labels ``y``: ``argmax(W x) = y``, ``(n,)`` booleans."""
    return (x_pc @ w_pc.T).argmax(1) == y


def _linear_map(w: np.ndarray):
    """The logits ``x Wᵀ`` of float64 inputs, as a function."""
    weight = torch.from_numpy(w)
    return lambda x: x @ weight.T


class _Recorder:
    """What a deep linear member records at its checkpoints (:func:`deep_linear_member`):
    the data, the frame and the transformed test sets, shared by the members of a batch."""

    def __init__(self, member: GDMember) -> None:
        self.frame, self.inputs = data_frame(member)
        self.widths = member.widths(self.frame)
        self.x_train = self.inputs.x @ self.frame.basis
        self.x_test = self.inputs.x_test @ self.frame.basis
        inputs = self.inputs
        self.extra_test = transformed_sets(member.eval_transforms, torch.from_numpy(inputs.x),
                                           torch.from_numpy(inputs.x_test),
                                           torch.from_numpy(inputs.y_test))  # fmt: skip
        self.alpha, self.beta = expected_scales(self.widths, member.init)

    def initial(self, member: GDMember) -> list[np.ndarray]:
        """The member's initial layers (seed ``1000 seed + member``), first in PC frame."""
        seed = 1000 * member.seed + member.member
        return initial_weights(self.widths, member.init, seed, self.frame.basis)

    def values(self, member: GDMember, ws: list[np.ndarray], step: int) -> dict[str, Any]:
        """The member's measurements of the layers ``ws`` reached at ``step``; raises
        ``FloatingPointError`` for non-finite layers (divergence)."""
        frame, inputs = self.frame, self.inputs
        # the layers first: compact_matrix rejects a non-finite layer as bad input
        finite = all(np.all(np.isfinite(layer)) for layer in ws)
        w = compact_matrix(ws) if finite else None
        if w is None or not np.all(np.isfinite(w)):
            raise FloatingPointError(f"gradient descent diverged by step {step} (lr too large)")
        correct = classified_correctly(self.x_train, inputs.y, w)
        test_correct = classified_correctly(self.x_test, inputs.y_test, w)
        values = {
            "w_pc": w,
            "loss": float(frame.loss(w)),
            "train_accuracy": float(np.mean(correct)),
            "test_accuracy": float(np.mean(test_correct)),
        }
        if member.record_correct:
            values["correct"] = correct
            values["test_correct"] = test_correct
        if self.extra_test:
            model = _linear_map(frame.unrotate(w))  # input coordinates
            values["eval_accuracy"] = set_accuracies(model, self.extra_test)
        layers = [ell - 1 for ell in member.scale_layers]
        if layers:
            a, b = gradient_scale_matrices(ws)
            b = [frame.basis @ m @ frame.basis.T for m in b]
            for name, mats, scale in (("a", a, self.alpha), ("b", b, self.beta)):
                stats = gradient_scale_statistics([mats[i] for i in layers], scale[layers])
                values[f"{name}_diagonal"] = stats.diagonal_mean
                values[f"{name}_diagonal_std"] = stats.diagonal_std
                values[f"{name}_offdiagonal"] = stats.offdiagonal_abs_mean
        return values


def _gd_steps(ws: list[np.ndarray], frame: PCFrame, mu: float, count: int) -> list[np.ndarray]:
    """``count`` steps of :func:`pc_gd_step` (one network or a stacked batch)."""
    with np.errstate(over="ignore", invalid="ignore"):  # divergence is checked by the caller
        for _ in range(count):
            ws = pc_gd_step(ws, frame, mu)
    return ws


def _finish(record: dict[str, list], marks: np.ndarray, mu: float) -> dict[str, Any]:
    out = {k: np.asarray(v) for k, v in record.items()}
    return {**out, "steps": marks, "mu": mu}


def deep_linear_member(member: GDMember) -> dict[str, Any]:
    """Train ``member``; returns, at the checkpoints ``steps`` (log-spaced,
    :func:`~collapselab.experiments.pcbias._common.log_steps` of ``steps``/``checkpoints``):
    ``w_pc`` ``(S, K, q)`` the compact matrix in PC coordinates, ``loss`` (Eq. 5),
    ``train_accuracy`` and ``test_accuracy``; with ``record_correct`` ``correct`` ``(S, n)``
    and ``test_correct`` ``(S, n_test)``, which training and test examples the network
    classifies correctly; with ``scale_layers`` (1-based) the entry
    statistics of the gradient-scale matrices ``A_l`` and ``B_l`` (Eq. 7; ``B_l`` in input
    coordinates, ``U B̃_l Uᵀ``) against Thm 3's ``α_l``, ``β_l``
    (:func:`~collapselab.metrics.pcbias.gradient_scale_statistics`), ``(S, len)`` each:
    ``a_diagonal``/``b_diagonal`` (mean ``|M_ii − s|``), ``a_diagonal_std``/``b_diagonal_std``
    and ``a_offdiagonal``/``b_offdiagonal`` (mean ``|M_ij|``, ``i ≠ j``); with
    ``eval_transforms`` (:mod:`~collapselab.experiments.pcbias.evaluation`) ``eval_accuracy``
    ``(S, len)``, the test accuracies on the transformed copies (float64)."""
    recorder = _Recorder(member)
    ws = recorder.initial(member)
    mu = step_size(recorder.frame, len(ws), member.lr)
    marks = log_steps(member.steps, member.checkpoints)
    record: dict[str, list] = {}
    step = 0
    for mark in marks:
        ws = _gd_steps(ws, recorder.frame, mu, int(mark) - step)
        step = int(mark)
        for key, value in recorder.values(member, ws, step).items():
            record.setdefault(key, []).append(value)
    return _finish(record, marks, mu)


def deep_linear_batch(members: list[GDMember]) -> list[dict[str, Any] | None]:
    """Train ``members`` (all fields equal but ``member``) at once: their layers stacked
    ``(E, m_l, m_{l−1})``, one batched :func:`pc_gd_step` per step for all. Each member's
    results are bit-for-bit those of :func:`deep_linear_member` (tested); a member whose
    layers turn non-finite is ``None`` from its first such checkpoint on (trained alone
    again by the caller, where it raises as before)."""
    recorder = _Recorder(members[0])
    ws = [np.stack(layers) for layers in zip(*(recorder.initial(m) for m in members), strict=True)]
    mu = step_size(recorder.frame, len(ws), members[0].lr)
    marks = log_steps(members[0].steps, members[0].checkpoints)
    records: list[dict[str, list] | None] = [{} for _ in members]
    step = 0
    for mark in marks:
        ws = _gd_steps(ws, recorder.frame, mu, int(mark) - step)
        step = int(mark)
        for e, member in enumerate(members):
            record = records[e]
            if record is None:
                continue
            try:
                values = recorder.values(member, [layer[e] for layer in ws], step)
            except FloatingPointError:
                records[e] = None
                continue
            for key, value in values.items():
                record.setdefault(key, []).append(value)
    return [None if r is None else _finish(r, marks, mu) for r in records]


def sgd_epoch(
    net: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    optimiser: torch.optim.Optimizer,
    batch_size: int,
    order: torch.Generator,
) -> None:
    """One epoch of minibatch SGD on cross-entropy, batches in a random order drawn from
    ``order``; a non-finite loss stops it with a clear error, and so do parameters that the
    epoch's last step left non-finite (every batch loss can be finite then) (R14: no
    momentum, no weight decay unless the optimiser has them)."""
    for idx in torch.randperm(len(y), generator=order).split(int(batch_size)):
        sgd_step(net, x[idx], y[idx], optimiser)
    state = [*net.parameters(), *(b for b in net.buffers() if b.is_floating_point())]
    if not all(bool(torch.isfinite(t).all()) for t in state):  # BatchNorm's statistics too
        raise FloatingPointError("the parameters became non-finite in the epoch's last step "
                                 "(lr too large?)")  # fmt: skip


def sgd_step(
    net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, optimiser: torch.optim.Optimizer
) -> float:
    r"""One optimiser step on the batch's mean cross-entropy
    ``−(1/B) Σ_i log softmax(f(x_i))_{y_i}`` (the net in whatever mode it is: dropout acts in
    training mode); returns the batch loss. A non-finite loss raises before the step."""
    optimiser.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(x), y)
    if not torch.isfinite(loss):
        raise FloatingPointError(f"the loss became {float(loss.detach())} (lr too large?)")
    loss.backward()
    optimiser.step()
    return float(loss.detach())


def batched_sgd_step(
    module: torch.nn.Module,
    params: Sequence[torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    size: int,
    lr: float,
) -> list[float]:
    r"""One plain SGD step (``θ ← θ − lr ∇``) of every member of a batched model
    (:class:`~collapselab.train.batched.BatchedModel`), each on the mean cross-entropy of its
    own rows (row ``b E + e`` of ``x``, ``y``: member ``e``'s sample ``b``, ``E = size``);
    returns each member's batch loss before the step. A non-finite loss does not stop the
    step: the caller decides what a diverged member becomes."""
    per = torch.nn.functional.cross_entropy(module(x), y, reduction="none")
    losses = per.view(-1, size).mean(0)
    for p in params:
        p.grad = None
    losses.sum().backward()
    with torch.no_grad():
        for p in params:
            p.add_(p.grad, alpha=-lr)
    return losses.detach().tolist()


def linear_dry_run(
    config: GDPreset, data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """Build what a deep linear experiment of ``config`` would train, without training (the
    paper preset's check on local files): read and standardise the data, compute the largest
    eigenvalue of ``Σ_XX`` (for ``μ``) and build one member's network per init. Returns the
    data's size, the widths, the parameter count, ``μ`` and ``d_1``."""
    folder = None if data_dir is None else str(data_dir)
    inputs = Member(data=config.data, data_seed=seed, data_dir=folder).inputs()
    q, k = inputs.x.shape[1], inputs.n_classes
    widths = [q, *config.hidden, k]
    # the largest eigenvalue of Σ_XX only: a dry run does not diagonalise a q x q matrix
    d1 = float(scipy.sparse.linalg.svds(inputs.x, k=1, return_singular_vectors=False)[0]) ** 2
    mu = config.lr / ((len(widths) - 1) * d1)
    torch.manual_seed(seed)
    nets = [DeepLinear(widths, init=init) for init in config.inits]
    return {
        "dataset": config.data.name,
        "n_train": int(inputs.x.shape[0]),
        "n_test": int(inputs.x_test.shape[0]),
        "widths": widths,
        "inits": list(config.inits),
        "parameters": sum(p.numel() for p in nets[0].parameters()),
        "members": config.members,
        "steps": config.steps,
        "mu": mu,
        "largest_eigenvalue": d1,
    }
