"""``train.stationarity``: the distance to a critical point of ``L + (wd/2)‖θ‖²``, against
the closed-form ridge solution and an explicit per-sample loop."""

from __future__ import annotations

import pytest
import torch

from collapselab.data import LabeledData
from collapselab.models import MLP
from collapselab.train import TrainConfig, stationarity
from tests._curvature import blobs

_MSE = TrainConfig(epochs=1, lr=0.1, loss="mse", weight_decay=0.05)


def test_zero_at_the_ridge_solution_and_exact_off_it():
    """A bias-free linear model with ``nn.MSELoss()``: ``L = (1/(BC)) Σ‖Wx − y‖²`` has its
    critical point at ``W* = YᵀX (XᵀX + (wd B C/2) I)⁻¹``; at ``c W*`` the residual is
    ``(c − 1)(2/(BC)) YᵀX`` exactly, against the decay ``c wd W*``."""
    x, y = blobs(n=24, d=5)
    B, C, wd = x.shape[0], 3, _MSE.weight_decay
    Y = torch.nn.functional.one_hot(y, C).double()
    ridge = (wd * B * C / 2) * torch.eye(5, dtype=torch.float64)
    W_star = Y.T @ x @ torch.linalg.inv(x.T @ x + ridge)
    model = torch.nn.Linear(5, C, bias=False).double()
    for c in (1.0, 1.5):
        with torch.no_grad():
            model.weight.copy_(c * W_star)
        got = stationarity(model, LabeledData(x, y, C), _MSE, batch_size=7)
        residual = abs(c - 1) * (2 / (B * C) * Y.T @ x).norm()
        expected = float(residual / (c * wd * W_star.norm()))
        assert got["weight"] == pytest.approx(expected, abs=1e-12, rel=1e-10)
        assert got["total"] == pytest.approx(got["weight"], rel=1e-14)


def test_cross_entropy_equals_an_explicit_loop_over_samples_and_restores_train_mode():
    x, y = blobs(n=21, d=4)
    torch.manual_seed(0)
    model = MLP(4, 3, width=6, depth=3, bias=True).double().train()
    config = TrainConfig(epochs=1, lr=0.1, loss="ce", weight_decay=1e-2)
    got = stationarity(model, LabeledData(x, y, 3), config, batch_size=5)
    assert model.training
    params = dict(model.named_parameters())
    total = {k: torch.zeros_like(p) for k, p in params.items()}
    for i in range(len(y)):  # the mean loss's gradient, one sample at a time
        loss = torch.nn.functional.cross_entropy(model(x[i : i + 1]), y[i : i + 1])
        grads = torch.autograd.grad(loss, list(params.values()))
        for k, g in zip(params, grads, strict=True):
            total[k] += g / len(y)
    num = den = 0.0
    for k, p in params.items():
        r, d = (total[k] + 1e-2 * p.detach()).norm(), (1e-2 * p.detach()).norm()
        assert got[k] == pytest.approx(float(r / d), rel=1e-12)
        num, den = num + float(r) ** 2, den + float(d) ** 2
    assert got["total"] == pytest.approx((num / den) ** 0.5, rel=1e-12)


def test_bad_input_is_named():
    x, y = blobs()
    model = torch.nn.Linear(4, 3).double()
    no_decay = TrainConfig(epochs=1, lr=0.1, loss="mse")
    with pytest.raises(ValueError, match="weight_decay is 0"):
        stationarity(model, LabeledData(x, y, 3), no_decay)
    with pytest.raises(ValueError, match="batch_size"):
        stationarity(model, LabeledData(x, y, 3), _MSE, batch_size=0)
