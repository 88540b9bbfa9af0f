"""The paper's linear FC nets trained by SGD with dropout (experiments.pcb.linear_sgd): one
step against an explicit float64 gradient, a whole run against a numpy loop, the batch
order, and the rate search's choice."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from collapselab.experiments.pcbias._common import pcb_data, read_inputs
from collapselab.experiments.pcbias.linear_sgd import (
    LinearSGDMember,
    linear_sgd_member,
    minibatches,
    select_rate,
)
from collapselab.experiments.pcbias.training import sgd_step
from collapselab.models import DeepLinear


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _cross_entropy_grads(ws, x, y, scale):
    """Mean cross-entropy of ``W_L diag(scale) W_{L-1}...W_1`` rows and its gradients, by hand
    (float64): ``scale`` ``(B, m_{L-1})`` is the dropout's mask times ``1/(1−p)``."""
    h = [x]
    for w in ws[:-1]:
        h.append(h[-1] @ w.T)
    dropped = h[-1] * scale
    p = _softmax(dropped @ ws[-1].T)
    onehot = np.eye(ws[-1].shape[0])[y]
    loss = -np.mean(np.log(p[np.arange(len(y)), y]))
    g = (p - onehot) / len(y)  # d loss / d logits
    grads = [g.T @ dropped]
    back = (g @ ws[-1]) * scale  # d loss / d (last hidden output)
    for i in range(len(ws) - 2, -1, -1):
        grads.insert(0, back.T @ h[i])
        back = back @ ws[i]
    return loss, grads


@pytest.mark.parametrize("widths", [[6, 3], [6, 9, 3], [6, 8, 7, 3]])
def test_one_sgd_step_with_dropout_is_the_explicit_float64_step(widths):
    """sgd_step on a float64 DeepLinear in training mode (dropout 0.5 before the output
    layer, on the inputs when L = 1) equals W_l − η ∂CE/∂W_l computed by hand with the mask
    the dropout drew (read from a forward hook)."""
    torch.manual_seed(3)
    net = DeepLinear(widths, init="glorot_uniform", dropout=0.5).double()
    seen = {}
    net.dropout.register_forward_hook(lambda m, i, o: seen.update(inp=i[0], out=o))
    x = torch.randn(20, widths[0], dtype=torch.float64)
    y = torch.randint(0, widths[-1], (20,))
    before = [layer.weight.detach().numpy().copy() for layer in net.layers]
    optimiser = torch.optim.SGD(net.parameters(), lr=0.3)
    loss = sgd_step(net, x, y, optimiser)
    kept = seen["out"].detach().numpy() != 0
    assert 0.3 < kept.mean() < 0.7  # dropout acted
    ref_loss, grads = _cross_entropy_grads(before, x.numpy(), y.numpy(), kept / 0.5)
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    for layer, w, g in zip(net.layers, before, grads, strict=True):
        np.testing.assert_allclose(layer.weight.detach().numpy(), w - 0.3 * g, rtol=0, atol=1e-13)


def test_minibatches_run_through_a_fresh_permutation_every_epoch():
    order = torch.Generator().manual_seed(5)
    got = minibatches(10, 4, order)
    batches = [next(got).tolist() for _ in range(6)]  # two epochs of 4 + 4 + 2
    reference = torch.Generator().manual_seed(5)
    expected = []
    for _ in range(2):
        perm = torch.randperm(10, generator=reference).tolist()
        expected += [perm[:4], perm[4:8], perm[8:]]
    assert batches == expected


def test_a_full_batch_run_without_dropout_follows_a_numpy_gradient_descent_loop():
    """batch_size = n and dropout 0: SGD is full-batch GD on the mean cross-entropy; the
    recorded training loss and accuracy at the log-spaced checkpoints equal a float64 numpy
    loop from the same initial weights (float32 training: to 1e-5), and so does which test
    images it classifies correctly (wherever the top two logits differ by > 1e-4)."""
    spec = pcb_data("digits", {"n_per_class": 20, "test_fraction": 0.25})
    config = LinearSGDMember(data=spec, hidden=(16,), init="glorot_uniform", dropout=0.0,
                             lr=0.05, batch_size=10_000, epochs=40, checkpoints=8, seed=2,
                             member=1, record_correct=True)  # fmt: skip
    out = linear_sgd_member(config)
    data = read_inputs(spec, None, 0)
    torch.manual_seed(2 * 2001)  # the member's init: seed 1000 * 2 + 1
    ws = [layer.weight.detach().double().numpy() for layer in
          DeepLinear([64, 16, 10], init="glorot_uniform").layers]  # fmt: skip
    x = data.x.astype(np.float32).astype(np.float64)
    ones = np.ones((len(x), 16))
    x_test = data.x_test.astype(np.float32).astype(np.float64)
    losses, accuracies, step, clear = [], [], 0, 0
    for mark in out["steps"]:
        while step < mark:
            _, grads = _cross_entropy_grads(ws, x, data.y, ones)
            ws = [w - 0.05 * g for w, g in zip(ws, grads, strict=True)]
            step += 1
        loss, _ = _cross_entropy_grads(ws, x, data.y, ones)
        losses.append(loss)
        accuracies.append(np.mean((x @ ws[0].T @ ws[1].T).argmax(1) == data.y))
        logits = x_test @ ws[0].T @ ws[1].T
        top2 = np.sort(logits, axis=1)[:, -2:]
        sure = top2[:, 1] - top2[:, 0] > 1e-4
        recorded = out["test_correct"][len(losses) - 1]
        np.testing.assert_array_equal(recorded[sure], (logits.argmax(1) == data.y_test)[sure])
        clear += int(sure.sum())
    assert out["steps"][-1] == 40 and out["steps_per_epoch"] == 1
    np.testing.assert_allclose(out["train_loss"], losses, rtol=1e-5)
    np.testing.assert_allclose(out["train_accuracy"], accuracies, atol=1.5 / len(x))
    assert out["correct"].shape == (len(out["steps"]), len(x)) and not out["diverged"]
    assert clear >= 0.95 * out["test_correct"].size  # nearly every comparison is decided
    np.testing.assert_array_equal(out["test_correct"].mean(1), out["test_accuracy"])
    assert out["test_error"] == pytest.approx(1 - out["test_accuracy"][-1])


def test_a_diverging_rate_is_reported_only_when_allowed():
    spec = pcb_data("digits", {"n_per_class": 10, "test_fraction": 0.25})
    config = LinearSGDMember(data=spec, hidden=(8, 8), init="glorot_uniform", dropout=0.5,
                             lr=1e6, batch_size=10, epochs=5, checkpoints=4, member=0)  # fmt: skip
    with pytest.raises(FloatingPointError, match="lr too large"):
        linear_sgd_member(config)
    out = linear_sgd_member(dataclasses.replace(config, allow_divergence=True))
    assert out == {"diverged": True, "test_error": 1.0, "lr": 1e6}


def test_the_rate_search_takes_the_smallest_error_and_the_smaller_rate_on_a_tie():
    assert select_rate([1e-3, 1e-2, 1e-1], [0.3, 0.2, 0.25]) == 1e-2
    assert select_rate([1e-1, 1e-3, 1e-2], [0.2, 0.3, 0.2]) == 1e-2
    assert select_rate([1.0, 1e-1], [1.0, 1.0]) == 1e-1
    with pytest.raises(ValueError, match="one finite error per rate"):
        select_rate([1e-2, 1e-1], [0.2])
