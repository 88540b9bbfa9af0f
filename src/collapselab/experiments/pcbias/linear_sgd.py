r"""Linear fully connected networks trained as paper 002 trains them in its experiments.

§3.1 and App. D ("Linear fully connected network"): an ``L``-layered network (``L − 1``
hidden layers of 1024 units, no biases), Glorot uniform init, "0.5 dropout is used before
the output layer", "an SGD optimizer, without momentum or L_2 regularization", the
cross-entropy loss (§3.1: "in this empirical evaluation we use the more prevalent
cross-entropy loss"), the learning rate "coarsely grid-searched to minimize a validation
error" per experimental setup (§3.1, App. D). The batch size of the linear nets is not
given; the preset's ``batch_size`` (100, the batch the paper gives for st-VGG).

The network is :class:`~collapselab.models.DeepLinear` (its dropout sits before the last
layer: on the hidden output for ``L = 2``, on the inputs for ``L = 1``, where the output
layer is the only one). One step (:func:`~collapselab.experiments.pcbias.training.sgd_step`)
is

.. math::

    W_l \leftarrow W_l - \eta\, \partial_{W_l} \Bigl(-\tfrac1B \textstyle\sum_{i\in\text{batch}}
    \log \operatorname{softmax}\bigl(W_L\, \tfrac{m_i}{1-p} \odot (W_{L-1}\cdots W_1 x_i)
    \bigr)_{y_i}\Bigr),

``m_i`` the dropout mask (Bernoulli ``1 − p``). The batches run epoch after epoch through a
fresh permutation of the training set (:func:`minibatches`); the network is scored in
evaluation mode (no dropout) at log-spaced steps.

``activation="relu"`` trains the non-linear counterpart instead
(:class:`~collapselab.models.DeepReLU`: the same layers, init and dropout with a ReLU after
every hidden layer), the analogue of Fig. 7b's non-linear nets with everything else held
fixed. ``network="vgg19"`` trains the paper's own non-linear network of Fig. 7b instead,
VGG-19 (:mod:`~collapselab.experiments.pcbias.image_nets`; ``hidden``, ``activation``,
``init`` and ``dropout`` then unused) on the member's ``device``, with the same SGD, batches,
checkpoints and rate search.

Unlike the exact full-batch GD of :mod:`~collapselab.experiments.pcbias.training`, none of this
follows the closed form (Eq. 10) exactly (note 002 §7 item 10): it serves the experiments
whose claims are empirical (Figs. 7a and 10), not the closed-form comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from collapselab.checks import check_choice
from collapselab.experiments.pcbias._common import Member, log_steps
from collapselab.experiments.pcbias.evaluation import set_accuracies, transformed_sets
from collapselab.experiments.pcbias.image_nets import chunked_logits, image_network
from collapselab.experiments.pcbias.training import batched_sgd_step, sgd_step
from collapselab.models import DeepLinear, DeepReLU
from collapselab.train.batched import BatchedModel

__all__ = [
    "LinearSGDMember",
    "linear_sgd_batch",
    "linear_sgd_member",
    "minibatches",
    "select_rate",
    "sgd_checkpoints",
]


@dataclass(frozen=True, kw_only=True)
class LinearSGDMember(Member):
    """One linear FC net (or its ReLU counterpart) trained by SGD (:func:`linear_sgd_member`).

    Attributes:
        hidden: hidden widths (``()``: one layer); activation: ``"none"`` (the linear net) or
            ``"relu"`` (:class:`~collapselab.models.DeepReLU`).
        init, dropout: the init and the dropout before the output layer.
        lr, batch_size, epochs: SGD; checkpoints: about that many log-spaced checkpoints.
        record_correct: also record which examples are classified correctly.
        eval_transforms: transformed test sets scored at every checkpoint
            (:mod:`~collapselab.experiments.pcbias.evaluation`).
        allow_divergence: a non-finite loss ends the training with ``diverged`` (a rate of
            the grid search) instead of raising.
        network: ``"fc"`` (the fields above) or ``"vgg19"`` (Fig. 7b's VGG-19 on the rows
            as images); device: where a VGG-19 trains (FC nets train on the CPU).
    """

    hidden: tuple[int, ...] = ()
    activation: Literal["none", "relu"] = "none"
    init: str
    dropout: float
    lr: float
    batch_size: int
    epochs: int
    checkpoints: int
    record_correct: bool = False
    eval_transforms: tuple[str, ...] = ()
    allow_divergence: bool = False
    network: Literal["fc", "vgg19"] = "fc"
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_choice("activation", self.activation, ("none", "relu"))
        check_choice("network", self.network, ("fc", "vgg19"))

    def train(self) -> dict[str, Any]:
        return linear_sgd_member(self)

    @classmethod
    def train_batch(cls, members: Sequence[Member]) -> list[dict[str, Any] | None]:
        return linear_sgd_batch(members)  # type: ignore[arg-type]

    def batch_key(self) -> Member | None:
        """None for VGG-19s (the batched trainer stacks FC nets only): they train one by one."""
        return None if self.network != "fc" else super().batch_key()


def minibatches(n: int, batch_size: int, order: torch.Generator) -> Iterator[torch.Tensor]:
    """Index batches without end: each epoch a fresh permutation of ``0..n−1`` drawn from
    ``order``, split into ``batch_size`` consecutive chunks (the last may be smaller)."""
    while True:
        yield from torch.randperm(n, generator=order).split(int(batch_size))


def sgd_checkpoints(
    epochs: int, batch_size: int, checkpoints: int, n: int
) -> tuple[np.ndarray, int]:
    """Log-spaced steps (:func:`~collapselab.experiments.pcbias._common.log_steps`,
    ``checkpoints`` of them) up to ``epochs`` epochs of ``ceil(n / batch_size)`` steps, and
    the steps per epoch."""
    per_epoch = math.ceil(n / batch_size)
    return log_steps(epochs * per_epoch, checkpoints), per_epoch


def _score(
    net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, chunked: bool = False
) -> tuple[np.ndarray, float]:
    """Which rows ``net`` classifies correctly and its mean cross-entropy; ``chunked``: an
    image network, evaluated by chunks on its device (:func:`chunked_logits`)."""
    with torch.no_grad():
        logits = chunked_logits(net, x) if chunked else net(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        return (logits.argmax(1) == y).numpy(), float(loss)


def linear_sgd_member(member: LinearSGDMember) -> dict[str, Any]:
    """Train ``member`` (widths ``[q, *hidden, K]``) by SGD; returns, at the checkpoints
    ``steps``: ``train_accuracy``, ``train_loss`` (mean cross-entropy, evaluation mode),
    ``test_accuracy``; with ``record_correct`` ``correct`` ``(S, n)`` and ``test_correct``
    ``(S, n_test)``, which training and test examples the network classifies correctly;
    with ``eval_transforms`` (:mod:`~collapselab.experiments.pcbias.evaluation`)
    ``eval_accuracy`` ``(S, len)``, the test accuracies on the transformed copies; and
    ``test_error``, one minus the last test accuracy (the validation error of the rate
    search).

    Seeds: ``s = 1000 seed + member``; torch's generator ``2 s`` draws the init and the
    dropout masks, a separate generator ``2 s + 1`` the batch order, so two ensembles of
    different ``seed`` differ in all three. With ``allow_divergence`` a non-finite loss ends
    the training and returns ``diverged`` true and ``test_error`` 1 (a rate of the grid
    search that is too large); otherwise it raises."""
    data = _Data(member)
    net = _network(member, data)
    optimiser = torch.optim.SGD(net.parameters(), lr=member.lr)
    batches = minibatches(len(data.y), member.batch_size, _order(member))
    scores = _Scores(member, data)
    step = 0
    for mark in scores.marks:
        net.train()
        try:
            while step < mark:
                idx = next(batches)
                sgd_step(net, data.x_train[idx], data.y_train[idx], optimiser)
                step += 1
        except FloatingPointError:
            if not member.allow_divergence:
                raise
            return _diverged(member)
        scores.score(net)
    return scores.result()


def linear_sgd_batch(members: Sequence[LinearSGDMember]) -> list[dict[str, Any] | None]:
    """Train ``members`` (all fields equal but ``member``) as one batched network
    (:class:`~collapselab.train.batched.BatchedModel`): each member draws its init, its
    batch order and (from its own generator, continuing torch's seeded stream after the
    init as the lone run's global generator does) its dropout masks exactly as
    :func:`linear_sgd_member`; its loss is its own batch mean and its step the element-wise
    SGD step; it is scored by its own network (a view of its slice, evaluation mode).
    Equal to one-by-one training up to float32 rounding (tested; none measured with one
    thread). A member whose loss turns non-finite gives the ``diverged`` result with
    ``allow_divergence``, else ``None`` (trained alone again by the caller, which raises)."""
    data = _Data(members[0])
    nets, generators = [], []
    for member in members:
        nets.append(_network(member, data))
        generator = torch.Generator()
        generator.set_state(torch.get_rng_state())  # the lone run's dropout draws follow here
        generators.append(generator)
    batched = BatchedModel(nets, generators)
    batched.attach()
    try:
        return _train_attached(list(members), batched, data)
    finally:
        batched.release()


def _train_attached(
    members: list[LinearSGDMember], batched: BatchedModel, data: _Data
) -> list[dict[str, Any] | None]:
    size, lr = len(members), members[0].lr
    streams = [minibatches(len(data.y), m.batch_size, _order(m)) for m in members]
    scores: list[_Scores | None] = [_Scores(m, data) for m in members]
    out: list[dict[str, Any] | None] = [None] * size
    params = batched.trainable()
    step = 0
    for mark in scores[0].marks:  # type: ignore[union-attr]
        batched.module.train()
        while step < mark and any(s is not None for s in scores):
            rows = torch.stack([next(stream) for stream in streams], 1).reshape(-1)
            losses = batched_sgd_step(batched.module, params, data.x[rows], data.y[rows], size, lr)
            for e, value in enumerate(losses):
                if scores[e] is not None and not math.isfinite(value):
                    scores[e] = None
                    out[e] = _diverged(members[e]) if members[e].allow_divergence else None
            step += 1
        for s, net in zip(scores, batched.members, strict=True):
            if s is not None:
                s.score(net)
    return [o if s is None else s.result() for o, s in zip(out, scores, strict=True)]


class _Data:
    """A member's data as float32 tensors and its transformed test sets (shared by the
    members of a batch)."""

    def __init__(self, member: LinearSGDMember) -> None:
        data = member.inputs()
        self.x, self.y = torch.from_numpy(data.x).float(), torch.from_numpy(data.y).long()
        self.x_test = torch.from_numpy(data.x_test).float()
        self.y_test = torch.from_numpy(data.y_test).long()
        self.extra_test = transformed_sets(member.eval_transforms, self.x, self.x_test,
                                           self.y_test)  # fmt: skip
        self.n_classes = data.n_classes
        # what the training steps index: on the device of an image network, once
        device = "cpu" if member.network == "fc" else member.device
        self.x_train, self.y_train = self.x.to(device), self.y.to(device)


def _network(member: LinearSGDMember, data: _Data) -> torch.nn.Module:
    """The member's untrained network, drawn after seeding torch with ``2 s`` (a VGG-19 then
    moved to the member's device)."""
    torch.manual_seed(2 * (1000 * member.seed + member.member))
    if member.network != "fc":
        return image_network(member.network, data.x.shape[1], data.n_classes).to(member.device)
    widths = [data.x.shape[1], *member.hidden, data.n_classes]
    network = DeepReLU if member.activation == "relu" else DeepLinear
    return network(widths, init=member.init, dropout=member.dropout)


def _order(member: LinearSGDMember) -> torch.Generator:
    """The generator of the member's batch order, seeded ``2 s + 1``."""
    return torch.Generator().manual_seed(2 * (1000 * member.seed + member.member) + 1)


def _diverged(member: LinearSGDMember) -> dict[str, Any]:
    return {"diverged": True, "test_error": 1.0, "lr": member.lr}


class _Scores:
    """What a member records at its checkpoints (:func:`linear_sgd_member`)."""

    def __init__(self, member: LinearSGDMember, data: _Data) -> None:
        self.member, self.data = member, data
        self.marks, self.per_epoch = sgd_checkpoints(member.epochs, member.batch_size,
                                                     member.checkpoints, len(data.y))  # fmt: skip
        self.record: dict[str, list] = {}

    def score(self, net: torch.nn.Module) -> None:
        """Score ``net`` (in evaluation mode, left so) at the next checkpoint."""
        net.eval()
        data, chunked = self.data, self.member.network != "fc"
        correct, loss = _score(net, data.x, data.y, chunked)
        test_correct = _score(net, data.x_test, data.y_test, chunked)[0]
        values = {"train_accuracy": float(correct.mean()), "train_loss": loss,
                  "test_accuracy": float(test_correct.mean())}  # fmt: skip
        if self.member.record_correct:
            values["correct"] = correct
            values["test_correct"] = test_correct
        if data.extra_test:
            model = (lambda x: chunked_logits(net, x)) if chunked else net
            values["eval_accuracy"] = set_accuracies(model, data.extra_test)
        for key, value in values.items():
            self.record.setdefault(key, []).append(value)

    def result(self) -> dict[str, Any]:
        out = {k: np.asarray(v) for k, v in self.record.items()}
        error = 1.0 - float(out["test_accuracy"][-1])
        return {**out, "steps": self.marks, "steps_per_epoch": self.per_epoch,
                "diverged": False, "test_error": error, "lr": self.member.lr}  # fmt: skip


def select_rate(rates: Sequence[float], errors: Sequence[float]) -> float:
    """The grid-searched rate: the smallest validation error, a tie to the smaller rate."""
    r, e = np.asarray(rates, dtype=np.float64), np.asarray(errors, dtype=np.float64)
    if r.shape != e.shape or r.size == 0 or np.isnan(e).any():
        raise ValueError(f"need one finite error per rate, got rates {r} and errors {e}")
    return float(r[np.lexsort((r, e))[0]])
