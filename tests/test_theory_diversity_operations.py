"""Paper 000's momentum and L2 update rules (App. M.2-M.4, notes A19-A20) against
PyTorch's optimiser and explicit loops."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.theory.diversity_operations import (
    effective_learning_rate,
    l2_step,
    l2_weight_decay,
    momentum_coefficients,
    momentum_displacement,
)

LR = 0.1


def _sgd_trajectory(momentum: float, steps: int = 6, weight_decay: float = 0.0):
    """Real torch SGD on a small nonlinear loss; returns W_0, the gradients met, W_{T+1}."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3, 4, dtype=torch.float64))
    a = torch.randn(5, 3, dtype=torch.float64)
    b = torch.randn(5, 4, dtype=torch.float64)
    opt = torch.optim.SGD([w], lr=LR, momentum=momentum, weight_decay=weight_decay)
    w0, grads = w.detach().clone(), []
    for _ in range(steps):
        opt.zero_grad()
        torch.tanh(a @ w - b).pow(2).sum().backward()
        grads.append(w.grad.detach().clone())
        opt.step()
    return w0, grads, w.detach().clone()


@pytest.mark.parametrize("m", [0.0, 0.5, 0.9])
def test_corrected_eq28_is_torch_heavy_ball_and_published_has_the_wrong_sign(m):
    w0, grads, w_end = _sgd_trajectory(m)
    corrected = momentum_displacement(grads, LR, m, "corrected")
    np.testing.assert_allclose(corrected.numpy(), (w_end - w0).numpy(), atol=1e-12)
    published = momentum_displacement(grads, LR, m, "published")
    np.testing.assert_allclose(published.numpy(), -corrected.numpy(), atol=1e-15)
    if m > 0:
        assert np.abs(published.numpy() - (w_end - w0).numpy()).max() > 1e-3


def test_eq27_lookback_against_its_loop():
    rng = np.random.default_rng(0)
    grads = [rng.normal(size=(2, 3)) for _ in range(5)]
    m = 0.9
    w = np.zeros((2, 3))
    for t, g in enumerate(grads):
        w = w - LR * g - (m * grads[t - 1] if t >= 1 else 0.0)
    np.testing.assert_allclose(momentum_displacement(grads, LR, m, "eq27").numpy(), w, atol=1e-14)


def test_momentum_coefficients_decrease():
    c = momentum_coefficients(4, 0.5)  # T = 3: (1 - 0.5^{4-t}) / 0.5
    np.testing.assert_allclose(c, [1.875, 1.75, 1.5, 1.0])
    np.testing.assert_allclose(momentum_coefficients(3, 0.0), [1.0, 1.0, 1.0])
    assert effective_learning_rate(0.01, 0.9) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="momentum must be < 1"):
        effective_learning_rate(0.1, 1.0)


def test_l2_step_is_torch_weight_decay_two_lambda():
    lam = 0.03
    w0, grads, w_end = _sgd_trajectory(0.0, steps=1, weight_decay=l2_weight_decay(lam))
    np.testing.assert_allclose(l2_step(w0, grads[0], LR, lam).numpy(), w_end.numpy(), atol=1e-14)
    assert l2_weight_decay(lam) == pytest.approx(0.06)
