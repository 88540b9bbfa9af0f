"""Curvature never answers a malformed question: labels out of range, a loss module's
reduction, outputs that are not (batch, C) logits. Each gives one clear error or the right
number, never the curvature of another objective."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from collapselab.curvature import HessianOperator, Objective, top_eigenpairs
from tests._curvature import batches, blobs, tanh_net


@pytest.mark.parametrize("loss", ["ce", "mse", nn.CrossEntropyLoss(), nn.MSELoss()])
@pytest.mark.parametrize("shift", [3, 10, 1000, -1])
def test_labels_out_of_range_are_refused(loss, shift) -> None:
    x, y = blobs()
    y = y.clone()
    y[4] = shift  # 3 classes: labels 0..2
    obj = Objective(tanh_net(), loss, batches(x, y))
    with pytest.raises(ValueError, match=r"labels must be class indices in \[0, 3\)"):
        top_eigenpairs(HessianOperator(obj), 2)


def _dense_hessian(model: nn.Module, x, y, reduction: str) -> torch.Tensor:
    """The Hessian of torch's own cross-entropy with ``reduction``, by autograd: an
    independent reference."""
    params = [p for p in model.parameters()]
    shapes = [p.shape for p in params]
    theta = torch.cat([p.detach().reshape(-1) for p in params])

    def loss(flat: torch.Tensor) -> torch.Tensor:
        parts, i = [], 0
        for s in shapes:
            n = s.numel()
            parts.append(flat[i : i + n].view(s))
            i += n
        h = torch.tanh(x @ parts[0].T + parts[1])
        out = h @ parts[2].T + parts[3]
        return nn.functional.cross_entropy(out, y, reduction=reduction)

    return torch.autograd.functional.hessian(loss, theta)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_a_loss_modules_reduction_is_honoured(reduction) -> None:
    x, y = blobs()
    model = tanh_net()
    obj = Objective(model, nn.CrossEntropyLoss(reduction=reduction), batches(x, y))
    assert obj.reduction == reduction
    dense = _dense_hessian(model, x, y, reduction)
    top = top_eigenpairs(HessianOperator(obj), 3, tol=1e-10).values
    want = torch.linalg.eigvalsh(dense).flip(0)[:3]
    assert torch.allclose(top, want, rtol=1e-8, atol=1e-10)
    # "sum" is N times "mean": the old behaviour (treated as mean) is 18 times too small
    if reduction == "sum":
        mean = torch.linalg.eigvalsh(_dense_hessian(model, x, y, "mean")).flip(0)[:3]
        assert torch.allclose(top, len(y) * mean, rtol=1e-8)


def test_mse_module_sum_is_the_sum_over_entries() -> None:
    x, y = blobs()
    model = tanh_net()
    obj = Objective(model, nn.MSELoss(reduction="sum"), batches(x, y))
    target = nn.functional.one_hot(y, 3).double()
    with torch.no_grad():
        out = model(x)
    want = nn.functional.mse_loss(out, target, reduction="sum")
    assert obj.value() == pytest.approx(float(want), rel=1e-12)
    mean = Objective(model, nn.MSELoss(), batches(x, y))
    want_mean = nn.functional.mse_loss(out, target)
    assert mean.value() == pytest.approx(float(want_mean), rel=1e-12)


def test_reduction_none_and_contradictions_are_refused() -> None:
    x, y = blobs()
    with pytest.raises(ValueError, match="reduction='none'"):
        Objective(tanh_net(), nn.CrossEntropyLoss(reduction="none"), batches(x, y))
    with pytest.raises(ValueError, match="contradicts the loss module"):
        Objective(tanh_net(), nn.CrossEntropyLoss(reduction="sum"), batches(x, y),
                  reduction="mean")  # fmt: skip
    assert Objective(tanh_net(), "ce", batches(x, y), reduction="sum").reduction == "sum"


class _Tuple(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = tanh_net()

    def forward(self, x):
        return self.net(x), x


class _Shape(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.net, self.how = tanh_net(), how

    def forward(self, x):
        out = self.net(x)
        return out.sum() if self.how == "scalar" else out[:, None, :]


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (_Tuple(), "returns a tuple, not a tensor"),
        (_Shape("scalar"), r"outputs have shape \(\) for a batch of 7"),
        (_Shape("3d"), r"outputs have shape \(7, 1, 3\) for a batch of 7"),
    ],
)
def test_outputs_that_are_not_logits_are_refused(model, message) -> None:
    x, y = blobs()
    obj = Objective(model, "ce", batches(x, y))
    with pytest.raises(ValueError, match=message):
        obj.value()
