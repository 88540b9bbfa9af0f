"""Batched full-batch gradient descent of deep UFMs (theory.dlufm_batched) against the lone
descent (theory.dlufm.gradient_descent): every recorded step, objective, gradient norm and
point bit for bit (float64; the issue's bound is 1e-10), for ReLU and linear models, with
biases, heavy-ball momentum and a tolerance that stops members at different steps."""

from __future__ import annotations

import numpy as np
import pytest

from collapselab.theory.dlufm import DeepLinearUFM, DeepReLUUFM, gradient_descent
from collapselab.theory.dlufm_batched import batched_gradient, batched_gradient_descent

SEEDS = (0, 1, 2)


def _models():
    return {
        "relu": (DeepReLUUFM(3, 4, 6, 5e-3, 5e-3, n_layers=4), 0.3),
        "relu-features": (DeepReLUUFM(3, 4, 6, 5e-3, 5e-3, n_layers=3, relu_on_features=True), 0.3),
        "linear": (DeepLinearUFM(3, 4, 6, 5e-3, 5e-3, n_layers=3), 0.05),
        "linear-bias": (
            DeepLinearUFM(3, 4, 5, 5e-3, 5e-3, n_layers=2, bias=True, lambda_b=1e-3),
            0.1,
        ),
    }


def _assert_same(lone, batch):
    assert lone.stopped == batch.stopped and lone.method == batch.method == "literal"
    np.testing.assert_array_equal(lone.steps, batch.steps)
    np.testing.assert_array_equal(lone.objective, batch.objective)
    np.testing.assert_array_equal(lone.grad_norm, batch.grad_norm)
    assert len(lone.points) == len(batch.points)
    for p, q in zip(lone.points, batch.points, strict=True):
        np.testing.assert_array_equal(p.flat(), q.flat())
    assert float(np.max(np.abs(lone.final.flat() - batch.final.flat()))) <= 1e-10


@pytest.mark.parametrize("name", ["relu", "relu-features", "linear", "linear-bias"])
@pytest.mark.parametrize("momentum", [0.0, 0.5])
def test_batched_descent_is_the_lone_descent_bit_for_bit(name, momentum):
    model, lr = _models()[name]
    batch = batched_gradient_descent(model, lr, 400, seeds=SEEDS, w_scale=1.0, h_scale=1.0,
                                     momentum=momentum, checkpoints=7)  # fmt: skip
    for seed, traj in zip(SEEDS, batch, strict=True):
        lone = gradient_descent(model, lr, 400, seed=seed, momentum=momentum, checkpoints=7)
        _assert_same(lone, traj)


def test_members_stop_at_their_own_tolerance_step_and_the_others_go_on():
    model, lr = _models()["linear"][0], 0.2
    lone = [gradient_descent(model, lr, 2000, seed=s, checkpoints=5, tol=2e-2) for s in SEEDS]
    stops = [int(t.steps[-1]) for t in lone]
    assert len(set(stops)) > 1 and max(stops) < 2000  # stop at different steps, all early
    batch = batched_gradient_descent(model, lr, 2000, seeds=SEEDS, checkpoints=5, tol=2e-2)
    for a, b in zip(lone, batch, strict=True):
        _assert_same(a, b)


def test_the_batched_gradient_is_each_members_gradient():
    model, _ = _models()["relu"]
    points = [model.random_point(s) for s in SEEDS]
    blocks = (
        np.stack([p.H for p in points]),
        [np.stack(w) for w in zip(*(p.W for p in points), strict=True)],
        [],
    )
    gh, gw, _ = batched_gradient(model, blocks)
    for e, p in enumerate(points):
        g = model.gradient(p)
        np.testing.assert_array_equal(gh[e], g.H)
        for a, b in zip(gw, g.W, strict=True):
            np.testing.assert_array_equal(a[e], b)


def test_a_diverging_batch_raises_as_the_lone_descent_does():
    model, _ = _models()["linear"]
    with pytest.raises(FloatingPointError, match="diverged"):
        gradient_descent(model, 50.0, 100, seed=0)
    with pytest.raises(FloatingPointError, match="diverged"):
        batched_gradient_descent(model, 50.0, 100, seeds=SEEDS)


def test_refuses_no_seeds():
    model, lr = _models()["relu"]
    with pytest.raises(ValueError, match="seeds is empty"):
        batched_gradient_descent(model, lr, 10, seeds=[])
