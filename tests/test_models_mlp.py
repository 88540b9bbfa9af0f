"""MLP of paper 000: forward pass against a NumPy reference, layer names, scaled Xavier init."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from collapselab.models import MLP, check_convention, xavier_normal_variance
from tests._hooks import capture_outputs


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def _reference_forward(model: MLP, x: np.ndarray, act: str, slope: float, norm: str):
    """Explicit NumPy forward pass (train-mode batch statistics for the norms)."""
    feats = []
    h = x.reshape(x.shape[0], -1)
    for layer in model.layers:
        w = _np(layer.linear.weight)
        z = np.stack([w @ row for row in h])  # one matrix-vector product per sample
        if layer.linear.bias is not None:
            z = z + _np(layer.linear.bias)
        if norm != "none":
            mu = z.mean(axis=0)
            var = ((z - mu) ** 2).mean(axis=0)  # biased, as BatchNorm normalises
            z = (z - mu) / np.sqrt(var + layer.norm.eps)
            if norm == "batchnorm":
                z = z * _np(layer.norm.weight) + _np(layer.norm.bias)
        h = np.maximum(z, 0.0) if act == "relu" else np.where(z > 0, z, slope * z)
        feats.append(h)
    w = _np(model.classifier.weight)
    logits = h @ w.T
    if model.classifier.bias is not None:
        logits = logits + _np(model.classifier.bias)
    return feats, logits


@pytest.mark.parametrize(
    ("activation", "norm", "bias"),
    [
        ("relu", "none", False),
        ("leaky_relu", "none", True),
        ("relu", "batchnorm", True),
        ("leaky_relu", "norm1", False),
    ],
)
def test_forward_matches_numpy_reference(activation: str, norm: str, bias: bool) -> None:
    torch.manual_seed(0)
    model = MLP(
        12, 3, width=7, depth=4, activation=activation, negative_slope=0.1, bias=bias, norm=norm
    ).double()
    # Non-trivial biases and affine parameters so every term of the formula is exercised.
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.normal_()
    x = torch.randn(5, 3, 4, dtype=torch.float64)  # flattened to 12 features
    names = model.feature_layers
    got = capture_outputs(model, names, x)
    feats, logits = _reference_forward(model, x.numpy(), activation, 0.1, norm)
    np.testing.assert_allclose(got["logits"].detach().numpy(), logits, rtol=1e-12, atol=1e-12)
    for name, ref in zip(names, feats, strict=True):
        assert got[name].shape == (5, 7)
        np.testing.assert_allclose(got[name].detach().numpy(), ref, rtol=1e-12, atol=1e-12)


def test_layer_names_and_convention() -> None:
    model = MLP(10, 4, width=6, depth=3, norm="norm1")
    names = dict(model.named_modules())
    for i in range(2):
        for part in ("linear", "norm", "act"):
            assert f"layers.{i}.{part}" in names
    assert "layers.2" not in names  # the third linear layer is the classifier
    assert isinstance(model.classifier, nn.Linear)
    assert model.classifier.weight.shape == (4, 6)
    assert model.feature_layers == ["layers.0.act", "layers.1.act"]
    assert model.penultimate == "layers.1.act"
    # norm1 is BatchNorm without affine parameters
    assert not model.layers[0].norm.affine and model.layers[0].norm.weight is None
    assert MLP(10, 4, 6, 3, norm="batchnorm").layers[0].norm.affine
    assert "layers.0.norm" not in dict(MLP(10, 4, 6, 3).named_modules())
    check_convention(model)


def test_bias_off_by_default() -> None:
    model = MLP(10, 4, width=6, depth=3)
    assert model.classifier.bias is None
    assert all(layer.linear.bias is None for layer in model.layers)
    n_weights = 10 * 6 + 6 * 6 + 6 * 4
    assert sum(p.numel() for p in model.parameters()) == n_weights
    biased = MLP(10, 4, width=6, depth=3, bias=True)
    assert sum(p.numel() for p in biased.parameters()) == n_weights + 6 + 6 + 4
    assert all(float(layer.linear.bias.detach().abs().max()) == 0.0 for layer in biased.layers)


def test_depth_one_is_a_linear_classifier() -> None:
    torch.manual_seed(1)
    model = MLP(5, 3, width=8, depth=1).double()
    assert model.feature_layers == [] and model.penultimate == "flatten"
    x = torch.randn(4, 5, dtype=torch.float64)
    expected = x.numpy() @ model.classifier.weight.detach().numpy().T
    np.testing.assert_allclose(model(x).detach().numpy(), expected, rtol=1e-13, atol=1e-13)


def _kurtosis(w: torch.Tensor) -> float:
    v = w.detach().double().flatten()
    v = v - v.mean()
    return float((v**4).mean() / (v**2).mean() ** 2)


@pytest.mark.parametrize("gamma", [0.25, 1.0, 2.0])
def test_xavier_normal_init_variance_scaled_by_gamma(gamma: float) -> None:
    torch.manual_seed(2)
    model = MLP(384, 256, width=640, depth=3, gamma=gamma)
    linears = [layer.linear for layer in model.layers] + [model.classifier]
    for lin in linears:
        fan_in, fan_out = lin.in_features, lin.out_features
        expected = gamma * 2.0 / (fan_in + fan_out)
        assert xavier_normal_variance(fan_in, fan_out, gamma) == pytest.approx(expected)
        w = lin.weight.detach().double()
        # >= 163k entries: relative standard error of the variance ~0.35%.
        assert float(w.var()) == pytest.approx(expected, rel=0.02)
        assert abs(float(w.mean())) < 0.01 * expected**0.5
        assert _kurtosis(w) == pytest.approx(3.0, abs=0.06)  # Gaussian, not uniform (1.8)


def test_gamma_scales_variance_not_std() -> None:
    torch.manual_seed(3)
    v1 = float(MLP(400, 10, width=400, depth=2, gamma=1.0).layers[0].linear.weight.detach().var())
    torch.manual_seed(3)
    v4 = float(MLP(400, 10, width=400, depth=2, gamma=4.0).layers[0].linear.weight.detach().var())
    assert v4 / v1 == pytest.approx(4.0, rel=1e-5)  # same draws, so the ratio is exact


def test_seeded_init_is_reproducible() -> None:
    torch.manual_seed(4)
    a = MLP(6, 2, 5, 3).state_dict()
    torch.manual_seed(4)
    b = MLP(6, 2, 5, 3).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"depth": 0}, ValueError, "depth"),
        ({"width": 0}, ValueError, "width"),
        ({"activation": "tanh"}, ValueError, "activation"),
        ({"norm": "layernorm"}, ValueError, "norm"),
        ({"gamma": 0.0}, ValueError, "gamma"),
        ({"gamma": float("nan")}, ValueError, "gamma"),
        ({"bias": 1}, TypeError, "bias"),
        ({"in_dim": 3.0}, TypeError, "in_dim"),
    ],
)
def test_bad_arguments_raise(kwargs: dict, err: type, match: str) -> None:
    args = {"in_dim": 6, "n_classes": 2, "width": 5, "depth": 3, **kwargs}
    with pytest.raises(err, match=match):
        MLP(**args)


def test_wrong_input_shape_raises() -> None:
    model = MLP(6, 2, 5, 3)
    with pytest.raises(ValueError, match="in_dim=6"):
        model(torch.randn(2, 7))
    with pytest.raises(ValueError, match="batch dimension"):
        model(torch.randn(6))
