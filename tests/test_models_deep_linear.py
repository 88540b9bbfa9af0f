"""DeepLinear of paper 002: end-to-end product, Def. 3 / Glorot / He initialisation; DeepReLU."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from collapselab.models import DeepLinear, DeepReLU, check_convention, def3_variances


def _kurtosis(w: torch.Tensor) -> float:
    v = w.detach().double().flatten()
    v = v - v.mean()
    return float((v**4).mean() / (v**2).mean() ** 2)


def test_product_equals_network_function() -> None:
    torch.manual_seed(0)
    model = DeepLinear([7, 9, 11, 6, 4]).double()
    weights = [layer.weight.detach().numpy() for layer in model.layers]
    # Explicit chain W_L ... W_1 in NumPy, applied sample by sample.
    ref = np.eye(7)
    for w in weights:
        ref = w @ ref
    w_end = model.product().detach().numpy()
    assert w_end.shape == (4, 7)
    np.testing.assert_allclose(w_end, ref, rtol=1e-13, atol=1e-14)
    x = torch.randn(6, 7, dtype=torch.float64)
    expected = np.stack([ref @ row for row in x.numpy()])
    np.testing.assert_allclose(model(x).detach().numpy(), expected, rtol=1e-12, atol=1e-13)


def test_product_is_differentiable() -> None:
    torch.manual_seed(1)
    model = DeepLinear([3, 5, 2]).double()
    model.product().sum().backward()
    # d/dW_1 sum(W_2 W_1) = W_2^T 1 1^T
    w2 = model.layers[1].weight.detach()
    expected = w2.T @ torch.ones(2, 3, dtype=torch.float64)
    torch.testing.assert_close(model.layers[0].weight.grad, expected, rtol=1e-13, atol=1e-13)


def test_def3_variances_formula() -> None:
    widths = [4, 6, 8, 5, 3]
    expected = [1 / 6, 2 / (6 + 8), 2 / (8 + 5), 1 / 5]
    assert def3_variances(widths) == pytest.approx(expected, rel=1e-15)
    assert def3_variances([4, 6, 3]) == pytest.approx([1 / 6, 1 / 6])  # L = 2
    assert def3_variances([4, 3]) == pytest.approx([2 / 7])  # L = 1: Glorot rule


WIDTHS = [400, 600, 500, 300]


@pytest.mark.parametrize(
    ("init", "variances", "kurtosis"),
    [
        ("def3", [1 / 600, 2 / 1100, 1 / 500], 3.0),
        ("def3_uniform", [1 / 600, 2 / 1100, 1 / 500], 1.8),
        ("glorot_normal", [2 / 1000, 2 / 1100, 2 / 800], 3.0),
        ("glorot_uniform", [2 / 1000, 2 / 1100, 2 / 800], 1.8),
        ("he", [2 / 400, 2 / 600, 2 / 500], 3.0),
    ],
)
def test_init_statistics(init: str, variances: list[float], kurtosis: float) -> None:
    torch.manual_seed(2)
    model = DeepLinear(WIDTHS, init=init)
    for layer, var in zip(model.layers, variances, strict=True):
        w = layer.weight.detach().double()
        assert w.shape == (layer.out_features, layer.in_features)
        # >= 150k entries per layer: the sample variance is within ~0.4% (1 s.e.).
        assert float(w.var()) == pytest.approx(var, rel=0.02)
        assert abs(float(w.mean())) < 0.01 * var**0.5
        assert _kurtosis(w) == pytest.approx(kurtosis, abs=0.06)
        if init.endswith("uniform"):
            bound = (3 * var) ** 0.5
            assert float(w.abs().max()) <= bound
            assert float(w.abs().max()) > 0.999 * bound


def test_names_features_and_classifier() -> None:
    torch.manual_seed(3)
    model = DeepLinear([5, 8, 7, 3])
    names = dict(model.named_modules())
    assert {"layers.0", "layers.1", "layers.2"} <= set(names)
    assert model.feature_layers == ["layers.0", "layers.1"]
    assert model.classifier is model.layers[2]
    assert model.classifier.bias is None
    assert all(layer.bias is None for layer in model.layers)
    assert model.penultimate == "dropout"
    check_convention(model)
    outs: dict[str, torch.Tensor] = {}
    for n in model.feature_layers:
        model.get_submodule(n).register_forward_hook(lambda _m, _i, o, n=n: outs.__setitem__(n, o))
    model(torch.randn(2, 5))
    assert outs["layers.0"].shape == (2, 8) and outs["layers.1"].shape == (2, 7)


def test_dropout_only_in_training_mode() -> None:
    torch.manual_seed(4)
    model = DeepLinear([6, 50, 3], dropout=0.5).double()
    x = torch.randn(4, 6, dtype=torch.float64)
    model.eval()
    torch.testing.assert_close(model(x), x @ model.product().T, rtol=1e-12, atol=1e-12)
    model.train()
    assert not torch.allclose(model(x), x @ model.product().T)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"widths": [5]}, ValueError, "at least 2"),
        ({"widths": [5, 0, 3]}, ValueError, r"widths\[1\]"),
        ({"widths": "53"}, TypeError, "widths"),
        ({"widths": [5, 3], "init": "xavier"}, ValueError, "init"),
        ({"widths": [5, 3], "dropout": 1.0}, ValueError, "dropout"),
    ],
)
def test_bad_arguments_raise(kwargs: dict, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        DeepLinear(**kwargs)


def test_wrong_input_raises() -> None:
    with pytest.raises(ValueError, match="in_dim=5"):
        DeepLinear([5, 3])(torch.randn(2, 4))
    assert isinstance(DeepLinear([5, 3]).classifier, nn.Linear)


def test_deep_relu_is_the_same_network_with_relus() -> None:
    """DeepReLU draws the same weights as DeepLinear from the same seed; its output is
    W_3 relu(W_2 relu(W_1 x)) computed entry by entry in float64 (eval mode: no dropout);
    it names its ReLUs as features and has no compact matrix."""
    torch.manual_seed(3)
    relu = DeepReLU([4, 6, 5, 3], init="glorot_uniform", dropout=0.5).double().eval()
    torch.manual_seed(3)
    linear = DeepLinear([4, 6, 5, 3], init="glorot_uniform", dropout=0.5).double()
    for a, b in zip(relu.parameters(), linear.parameters(), strict=True):
        assert torch.equal(a, b)
    x = torch.randn(7, 4, dtype=torch.float64)
    ws = [layer.weight.detach().tolist() for layer in relu.layers]
    for i in range(7):
        h = x[i].tolist()
        for depth, w in enumerate(ws):
            h = [sum(row[j] * h[j] for j in range(len(h))) for row in w]
            if depth < len(ws) - 1:
                h = [max(v, 0.0) for v in h]
        assert relu(x[i : i + 1])[0].tolist() == pytest.approx(h, rel=1e-12, abs=1e-14)
    assert relu.feature_layers == ["acts.0", "acts.1"]
    assert not torch.allclose(relu(x), linear.eval()(x))
    with pytest.raises(TypeError, match=r"not linear.*compact_representation"):
        relu.product()
