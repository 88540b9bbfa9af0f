"""Loss conventions, evaluation and the weight-decay/lambda converters against manual formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from collapselab.data.dataset import LabeledData
from collapselab.train import (
    evaluate,
    l2_lambda,
    l2_weight_decay,
    mse_gradient_scale,
    mse_lambda,
    mse_weight_decay,
    per_sample_loss,
    training_loss,
)


def _logits_labels(b: int = 9, c: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, c, generator=g, dtype=torch.float64), torch.randint(
        0, c, (b,), generator=g
    )


def _manual_loss(
    z: torch.Tensor, y: torch.Tensor, loss: str, reduction: str, scale: float
) -> float:
    """Explicit loops over samples and classes."""
    b, c = z.shape
    total = 0.0
    for i in range(b):
        if loss == "ce":
            denom = sum(math.exp(float(z[i, k])) for k in range(c))
            total += -math.log(math.exp(float(z[i, y[i]])) / denom)
        else:
            for k in range(c):
                target = scale if k == int(y[i]) else 0.0
                total += (float(z[i, k]) - target) ** 2
    if loss == "mse" and reduction == "mean":
        return total / (b * c)
    return total / b


@pytest.mark.parametrize(
    ("loss", "reduction", "scale"),
    [("ce", "mean", 1.0), ("mse", "mean", 1.0), ("mse", "mean", 5.0), ("mse", "sum_classes", 2.0)],
)
def test_training_loss_matches_explicit_formula(loss: str, reduction: str, scale: float) -> None:
    z, y = _logits_labels()
    got = training_loss(z, y, loss, reduction, scale)
    assert float(got) == pytest.approx(_manual_loss(z, y, loss, reduction, scale), rel=1e-13)
    per = per_sample_loss(z, y, loss, reduction, scale)
    assert per.shape == (9,)
    assert float(per.mean()) == pytest.approx(float(got), rel=1e-13)


def test_mse_mean_is_exactly_nn_mseloss() -> None:
    z, y = _logits_labels()
    onehot = torch.nn.functional.one_hot(y, 4).to(z.dtype)
    assert torch.equal(training_loss(z, y, "mse"), nn.MSELoss()(z, onehot))


def test_training_loss_rejects_bad_inputs() -> None:
    z, y = _logits_labels()
    with pytest.raises(ValueError, match="loss must be one of"):
        training_loss(z, y, "hinge")
    with pytest.raises(ValueError, match="mse_reduction"):
        training_loss(z, y, "mse", "sum")
    with pytest.raises(ValueError, match=r"\(batch, n_classes\)"):
        training_loss(z[:, 0], y)
    with pytest.raises(ValueError, match="labels must have shape"):
        training_loss(z, y[:-1])
    with pytest.raises(TypeError, match="int64"):
        training_loss(z, y.float())


@pytest.mark.parametrize(
    ("loss", "reduction"), [("ce", "mean"), ("mse", "mean"), ("mse", "sum_classes")]
)
def test_evaluate_is_the_full_set_mean_whatever_the_batch_size(loss: str, reduction: str) -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(23, 5, generator=g)
    data = LabeledData(x, torch.randint(0, 3, (23,), generator=g), 3)
    model = nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.5), nn.Linear(8, 3)).double()
    model.train()
    with torch.no_grad():
        z = model.eval()(x.double())
    model.train()
    want_loss = _manual_loss(z, data.y, loss, reduction, 1.0)
    want_acc = float((z.argmax(1) == data.y).double().mean())
    for batch_size in (1, 7, 1000):
        res = evaluate(model, data, loss, batch_size, mse_reduction=reduction)
        assert res["loss"] == pytest.approx(want_loss, rel=1e-12)
        assert res["accuracy"] == want_acc
    assert model.training  # the mode is restored
    with pytest.raises(TypeError, match="LabeledData"):
        evaluate(model, (x, data.y), loss)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size"):
        evaluate(model, data, loss, 0)


# ----------------------------------------------------------------- lambda conventions
def _sgd_update(model: nn.Module, loss: torch.Tensor, weight_decay: float) -> list[torch.Tensor]:
    """The change one plain SGD step (lr = 1) makes, i.e. -(grad + wd * w)."""
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.0, weight_decay=weight_decay)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return [p.detach() - w for p, w in zip(model.parameters(), before, strict=True)]


@pytest.mark.parametrize("reduction", ["mean", "sum_classes"])
def test_mse_lambda_reproduces_paper003_gradient(reduction: str) -> None:
    """PyTorch MSE + SGD weight decay steps along -scale * grad of paper 003's Eq. 2."""
    n, p, c, wd = 17, 6, 5, 3e-2
    g = torch.Generator().manual_seed(2)
    h = torch.randn(n, p, generator=g, dtype=torch.float64)
    y = torch.randint(0, c, (n,), generator=g)
    model = nn.Linear(p, c).double()
    w0, b0 = model.weight.detach().clone(), model.bias.detach().clone()
    delta = _sgd_update(model, training_loss(model(h), y, "mse", reduction), wd)

    lam = mse_lambda(wd, c, reduction)
    w = w0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    onehot = torch.nn.functional.one_hot(y, c).double()
    residual = h @ w.T + b - onehot
    paper = 0.5 * (residual**2).sum(1).mean() + 0.5 * lam * (w.square().sum() + b.square().sum())
    gw, gb = torch.autograd.grad(paper, (w, b))
    scale = mse_gradient_scale(c, reduction)
    torch.testing.assert_close(delta[0], -scale * gw, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(delta[1], -scale * gb, rtol=1e-12, atol=1e-14)
    # The other normalisation's lambda is off by the factor C (note 003 §4.4).
    wrong = mse_lambda(wd, c, "sum_classes" if reduction == "mean" else "mean")
    assert wrong != pytest.approx(lam)


def test_mse_lambda_values_and_inverse() -> None:
    # note 003 §4.4: weight decay 5e-4 with nn.MSELoss and C = 10 is lambda = 2.5e-3
    assert mse_lambda(5e-4, 10) == pytest.approx(2.5e-3, rel=1e-15)
    assert mse_lambda(5e-4, 10, "sum_classes") == pytest.approx(2.5e-4, rel=1e-15)
    assert (
        mse_gradient_scale(10) == pytest.approx(0.2)
        and mse_gradient_scale(10, "sum_classes") == 2.0
    )
    for reduction in ("mean", "sum_classes"):
        assert mse_weight_decay(mse_lambda(1e-3, 7, reduction), 7, reduction) == pytest.approx(
            1e-3, rel=1e-15
        )
    with pytest.raises(ValueError, match="n_classes"):
        mse_lambda(1e-3, 0)
    with pytest.raises(ValueError, match="weight_decay"):
        mse_lambda(-1.0, 3)
    with pytest.raises(ValueError, match="reduction"):
        mse_lambda(1e-3, 3, "sum")


def test_l2_lambda_reproduces_paper000_gradient() -> None:
    """CE + SGD weight decay equals gradient descent on L_CE + lambda ||W||^2 (paper 000)."""
    n, p, c, wd = 13, 4, 3, 0.05
    g = torch.Generator().manual_seed(3)
    h = torch.randn(n, p, generator=g, dtype=torch.float64)
    y = torch.randint(0, c, (n,), generator=g)
    model = nn.Linear(p, c, bias=False).double()
    w0 = model.weight.detach().clone()
    delta = _sgd_update(model, training_loss(model(h), y, "ce"), wd)
    w = w0.clone().requires_grad_(True)
    lam = l2_lambda(wd)
    paper = torch.nn.functional.cross_entropy(h @ w.T, y) + lam * w.square().sum()
    (gw,) = torch.autograd.grad(paper, (w,))
    torch.testing.assert_close(delta[0], -gw, rtol=1e-12, atol=1e-14)
    assert l2_weight_decay(lam) == pytest.approx(wd) and lam == pytest.approx(0.025)
    assert np.isfinite(lam)
