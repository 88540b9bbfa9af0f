r"""Linear fully connected networks trained as paper 002 trains them in its experiments.

§3.1 and App. D ("Linear fully connected network"): an ``L``-layered network (``L − 1``
hidden layers of 1024 units, no biases), Glorot uniform init, "0.5 dropout is used before
the output layer", "an SGD optimizer, without momentum or L_2 regularization", the
cross-entropy loss (§3.1: "in this empirical evaluation we use the more prevalent
cross-entropy loss"), the learning rate "coarsely grid-searched to minimize a validation
error" per experimental setup (§3.1, App. D). The batch size of the linear nets is not
given; the configuration's ``batch_size`` (100, the batch the paper gives for st-VGG).

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
fixed.

Unlike the exact full-batch GD of :mod:`~collapselab.experiments.pcbias.training`, none of this
follows the closed form (Eq. 10) exactly (note 002 §7 item 10): it serves the experiments
whose claims are empirical (Figs. 7a and 10), not the closed-form comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from collapselab.checks import check_choice
from collapselab.experiments.pcbias._common import log_steps, read_dataset
from collapselab.experiments.pcbias.evaluation import set_accuracies, transformed_sets
from collapselab.experiments.pcbias.training import sgd_step
from collapselab.models import DeepLinear, DeepReLU

__all__ = ["ACTIVATIONS", "linear_sgd_member", "minibatches", "select_rate", "sgd_checkpoints"]

ACTIVATIONS = ("none", "relu")
"""The members' ``activation``: the linear net, or its ReLU counterpart."""


def minibatches(n: int, batch_size: int, order: torch.Generator) -> Iterator[torch.Tensor]:
    """Index batches without end: each epoch a fresh permutation of ``0..n−1`` drawn from
    ``order``, split into ``batch_size`` consecutive chunks (the last may be smaller)."""
    while True:
        yield from torch.randperm(n, generator=order).split(int(batch_size))


def sgd_checkpoints(config: dict[str, Any], n: int) -> tuple[np.ndarray, int]:
    """Log-spaced steps (:func:`log_steps`, ``checkpoints`` of them) up to ``epochs`` epochs
    of ``ceil(n / batch_size)`` steps, and the steps per epoch."""
    per_epoch = math.ceil(n / int(config["batch_size"]))
    return log_steps(int(config["epochs"]) * per_epoch, int(config["checkpoints"])), per_epoch


def _score(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[np.ndarray, float]:
    with torch.no_grad():
        logits = net(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        return (logits.argmax(1) == y).numpy(), float(loss)


def linear_sgd_member(config: dict[str, Any]) -> dict[str, Any]:
    """Train member ``config["member"]`` (widths ``[q, *hidden, K]``, ``init``, ``dropout``,
    ``lr``, ``batch_size``, ``epochs``; ``activation`` ``"none"`` or ``"relu"``) by SGD;
    returns, at the checkpoints ``steps``: ``train_accuracy``, ``train_loss`` (mean
    cross-entropy, evaluation mode), ``test_accuracy``; with ``record_correct``
    ``correct`` ``(S, n)`` and ``test_correct`` ``(S, n_test)``, which training and test
    examples the network classifies correctly;
    with ``eval_transforms`` (:mod:`~collapselab.experiments.pcbias.evaluation`)
    ``eval_accuracy`` ``(S, len)``, the test accuracies on the transformed copies; and
    ``test_error``, one minus the last test accuracy (the validation error of the rate
    search).

    Seeds: ``s = 1000 seed + member``; torch's generator ``2 s`` draws the init and the
    dropout masks, a separate generator ``2 s + 1`` the batch order, so two ensembles of
    different ``seed`` differ in all three. With ``allow_divergence`` a non-finite loss ends
    the training and returns ``diverged`` true and ``test_error`` 1 (a rate of the grid
    search that is too large); otherwise it raises."""
    data = read_dataset(config["datasets"]["main"], config.get("data_dir"),
                        int(config.get("data_seed", 0)))  # fmt: skip
    x, y = torch.from_numpy(data.x).float(), torch.from_numpy(data.y).long()
    x_test, y_test = torch.from_numpy(data.x_test).float(), torch.from_numpy(data.y_test).long()
    extra_test = transformed_sets(config.get("eval_transforms", []), x, x_test, y_test)
    seed = 1000 * int(config.get("seed", 0)) + int(config["member"])
    torch.manual_seed(2 * seed)
    widths = [x.shape[1], *[int(w) for w in config.get("hidden", [])], data.n_classes]
    activation = check_choice("activation", config.get("activation", "none"), ACTIVATIONS)
    network = DeepReLU if activation == "relu" else DeepLinear
    net = network(widths, init=str(config["init"]), dropout=float(config["dropout"]))
    optimiser = torch.optim.SGD(net.parameters(), lr=float(config["lr"]))
    order = torch.Generator().manual_seed(2 * seed + 1)
    batches = minibatches(len(y), int(config["batch_size"]), order)
    marks, per_epoch = sgd_checkpoints(config, len(y))
    record: dict[str, list] = {}
    step = 0
    for mark in marks:
        net.train()
        try:
            while step < mark:
                idx = next(batches)
                sgd_step(net, x[idx], y[idx], optimiser)
                step += 1
        except FloatingPointError:
            if not config.get("allow_divergence"):
                raise
            return {"diverged": True, "test_error": 1.0, "lr": float(config["lr"])}
        net.eval()
        correct, loss = _score(net, x, y)
        test_correct = _score(net, x_test, y_test)[0]
        values = {"train_accuracy": float(correct.mean()), "train_loss": loss,
                  "test_accuracy": float(test_correct.mean())}  # fmt: skip
        if config.get("record_correct"):
            values["correct"] = correct
            values["test_correct"] = test_correct
        if extra_test:
            values["eval_accuracy"] = set_accuracies(net, extra_test)
        for key, value in values.items():
            record.setdefault(key, []).append(value)
    out = {k: np.asarray(v) for k, v in record.items()}
    error = 1.0 - float(out["test_accuracy"][-1])
    return {**out, "steps": marks, "steps_per_epoch": per_epoch, "diverged": False,
            "test_error": error, "lr": float(config["lr"])}  # fmt: skip


def select_rate(rates: Sequence[float], errors: Sequence[float]) -> float:
    """The grid-searched rate: the smallest validation error, a tie to the smaller rate."""
    r, e = np.asarray(rates, dtype=np.float64), np.asarray(errors, dtype=np.float64)
    if r.shape != e.shape or r.size == 0 or np.isnan(e).any():
        raise ValueError(f"need one finite error per rate, got rates {r} and errors {e}")
    return float(r[np.lexsort((r, e))[0]])
