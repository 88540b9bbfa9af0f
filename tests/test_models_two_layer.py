"""TwoLayerReLU of paper 002: paired init is exactly linear, fixed readout, init law."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from collapselab.models import TwoLayerReLU, check_convention


def _brute_force(model: TwoLayerReLU, x: np.ndarray) -> np.ndarray:
    w = model.hidden.weight.detach().numpy()
    a = model.a.detach().numpy()
    out = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        for r in range(w.shape[0]):
            out[i] += a[r] * max(0.0, float(w[r] @ x[i]))
    return out


def test_paired_init_is_exactly_linear_float64() -> None:
    torch.manual_seed(0)
    model = TwoLayerReLU(10, 40).double()
    w = model.hidden.weight.detach().numpy()
    a = model.a.detach().numpy()
    # Pair structure, 1-based: w_{2i} = -w_{2i-1}, a_{2i} = -a_{2i-1}.
    np.testing.assert_array_equal(w[1::2], -w[0::2])
    np.testing.assert_array_equal(a[1::2], -a[0::2])
    # The linear map: sum over pairs of a_{2i-1} w_{2i-1}.
    v = np.zeros(10)
    for i in range(0, 40, 2):
        v += a[i] * w[i]
    x = torch.randn(64, 10, dtype=torch.float64)
    f = model(x).detach().numpy()[:, 0]
    np.testing.assert_allclose(f, x.numpy() @ v, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        model.effective_linear_weight().detach().numpy(), v, rtol=0, atol=1e-14
    )
    # Linearity itself: f(2x - 3y) = 2 f(x) - 3 f(y).
    y = torch.randn(64, 10, dtype=torch.float64)
    lhs = model(2 * x - 3 * y)
    torch.testing.assert_close(lhs, 2 * model(x) - 3 * model(y), rtol=0, atol=1e-12)


def test_forward_matches_brute_force_after_training_breaks_pairs() -> None:
    torch.manual_seed(1)
    model = TwoLayerReLU(6, 8).double()
    with torch.no_grad():
        model.hidden.weight.add_(0.3 * torch.randn_like(model.hidden.weight))
    x = torch.randn(5, 6, dtype=torch.float64)
    f = model(x).detach().numpy()[:, 0]
    np.testing.assert_allclose(f, _brute_force(model, x.numpy()), rtol=1e-13, atol=1e-13)
    # No longer odd: f(x) + f(-x) = sum_r a_r |w_r x| != 0 in general.
    assert float((model(x) + model(-x)).detach().abs().max()) > 1e-3


def test_unpaired_init_is_not_linear() -> None:
    torch.manual_seed(2)
    model = TwoLayerReLU(6, 31, paired=False).double()
    x = torch.randn(20, 6, dtype=torch.float64)
    assert float((model(x) + model(-x)).detach().abs().max()) > 1e-3


def test_readout_is_a_fixed_buffer() -> None:
    torch.manual_seed(3)
    model = TwoLayerReLU(4, 6)
    assert isinstance(model.classifier, nn.Linear)
    assert model.classifier.weight.shape == (1, 6) and model.classifier.bias is None
    param_names = {n for n, _ in model.named_parameters()}
    assert param_names == {"hidden.weight"}
    assert "classifier.weight" in dict(model.named_buffers())
    assert "classifier.weight" in model.state_dict()
    a0 = model.a.clone()
    w0 = model.hidden.weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.sign(torch.randn(8))
    loss = 0.5 * ((model(x)[:, 0] - y) ** 2).sum()
    loss.backward()
    opt.step()
    assert torch.equal(model.a, a0)
    assert not torch.equal(model.hidden.weight.detach(), w0)
    model.classifier.reset_parameters()  # must not redraw the fixed readout
    assert torch.equal(model.a, a0)
    assert model.double().a.dtype == torch.float64
    trainable = TwoLayerReLU(4, 6, train_output=True)
    assert {n for n, _ in trainable.named_parameters()} == {"hidden.weight", "classifier.weight"}


def test_init_distribution() -> None:
    torch.manual_seed(4)
    model = TwoLayerReLU(200, 2000)
    a = model.a.double()
    # magnitudes 1/sqrt(m), exactly (up to the float32 storage of the model)
    assert torch.equal(model.a.abs(), torch.full_like(model.a, 2000**-0.5))
    n_pos = int((a[0::2] > 0).sum())  # free signs: Binomial(1000, 1/2)
    assert abs(n_pos - 500) < 4 * (1000 * 0.25) ** 0.5
    w_free = model.hidden.weight.detach().double()[0::2]  # 200k free entries
    assert float(w_free.var()) == pytest.approx(1 / 200, rel=0.02)
    assert abs(float(w_free.mean())) < 0.01 * 200**-0.5
    custom = TwoLayerReLU(5, 4, a_scale=2.0, w_std=3.0)
    assert torch.equal(custom.a.abs(), torch.full((4,), 2.0))


def test_names_and_features() -> None:
    model = TwoLayerReLU(3, 4)
    assert {"hidden", "act", "classifier"} <= set(dict(model.named_modules()))
    assert model.feature_layers == ["act"] and model.penultimate == "act"
    check_convention(model)
    out = {}
    model.act.register_forward_hook(lambda _m, _i, o: out.__setitem__("act", o))
    assert model(torch.randn(2, 3)).shape == (2, 1)
    assert out["act"].shape == (2, 4) and float(out["act"].detach().min()) >= 0


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"width": 5}, ValueError, "even"),
        ({"width": 0, "paired": False}, ValueError, "width"),
        ({"a_scale": 0.0}, ValueError, "a_scale"),
        ({"w_std": -1.0}, ValueError, "w_std"),
        ({"paired": "yes"}, TypeError, "paired"),
    ],
)
def test_bad_arguments_raise(kwargs: dict, err: type, match: str) -> None:
    args = {"in_dim": 3, "width": 4, **kwargs}
    with pytest.raises(err, match=match):
        TwoLayerReLU(**args)


def test_wrong_input_raises() -> None:
    with pytest.raises(ValueError, match="in_dim=3"):
        TwoLayerReLU(3, 4)(torch.randn(2, 5))
