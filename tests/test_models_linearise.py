"""The compact matrix of any model (collapselab.models.linearise, note 002 R11) against
independent references in float64: autograd Jacobians, explicit products of weight
matrices, hand-built average-pool twins evaluated one basis vector at a time."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from collapselab.models import MLP, compact_representation, linearised_copy

DT = torch.float64


def _jacobian(model: nn.Module, shape: tuple[int, ...]) -> np.ndarray:
    """``df/dx`` ``(K, q)`` by reverse-mode autograd at a random point (any point: affine)."""
    x = torch.randn(shape, dtype=DT, generator=torch.Generator().manual_seed(5))
    model.eval()
    jac = torch.func.jacrev(lambda v: model(v.reshape(1, *shape))[0])(x.reshape(-1))
    return jac.detach().numpy()


def _one_at_a_time(model: nn.Module, shape: tuple[int, ...]) -> np.ndarray:
    """``[f(e_j) - f(0)]_j`` by an explicit loop, one basis vector per forward pass."""
    q = int(np.prod(shape))
    model.eval()
    with torch.no_grad():
        f0 = model(torch.zeros(1, *shape, dtype=DT))[0]
        cols = []
        for j in range(q):
            e = torch.zeros(q, dtype=DT)
            e[j] = 1.0
            cols.append((model(e.reshape(1, *shape))[0] - f0).numpy())
    return np.stack(cols, axis=1)


def _mlp(act: type[nn.Module], widths=(12, 9, 7, 4), bias=True, seed=0) -> nn.Sequential:
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1], bias=bias))
        if i < len(widths) - 2:
            layers.append(act())
    return nn.Sequential(*layers).to(DT)


def _conv_net(act: type[nn.Module], pool: nn.Module, adaptive: nn.Module, seed=0) -> nn.Sequential:
    """(2, 6, 6) -> conv -> act -> pool -> BatchNorm -> conv -> act -> adaptive -> fc 3."""
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1),
        act(),
        pool,
        nn.BatchNorm2d(4),
        nn.Conv2d(4, 3, 2),
        act(),
        adaptive,
        nn.Dropout(0.5),
        nn.Flatten(),
        nn.Linear(3 * 2 * 2, 3),
    ).to(DT)
    bn = net[3]
    with torch.no_grad():  # non-trivial eval-mode statistics
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.normal_()
        bn.bias.normal_()
    return net


def test_exact_equals_the_autograd_jacobian_of_linear_mlp_and_conv_net():
    mlp = _mlp(nn.Identity)
    w = compact_representation(mlp, 12)
    assert w.dtype == DT and w.shape == (4, 12)
    err = np.abs(w.numpy() - _jacobian(mlp, (12,))).max()
    assert err < 1e-10  # measured 2e-16
    conv = _conv_net(nn.Identity, nn.AvgPool2d(2, stride=2, padding=1), nn.AdaptiveAvgPool2d(2))
    conv.train()
    w = compact_representation(conv, (2, 6, 6), chunk_size=7)
    assert conv.training and conv[7].training  # the caller's modes are restored
    np.testing.assert_allclose(w.numpy(), _jacobian(conv, (2, 6, 6)), rtol=0, atol=1e-10)
    for chunk in (1, 72, 1000):  # chunking changes nothing beyond rounding
        again = compact_representation(conv, (2, 6, 6), chunk_size=chunk)
        np.testing.assert_allclose(again.numpy(), w.numpy(), rtol=0, atol=1e-13)


def test_bias_drop_and_keep_agree_for_an_affine_model():
    conv = _conv_net(nn.Identity, nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(2))
    keep = compact_representation(conv, (2, 6, 6), bias="keep")
    drop = compact_representation(conv, (2, 6, 6), bias="drop")
    np.testing.assert_allclose(drop.numpy(), keep.numpy(), rtol=0, atol=1e-12)
    assert float(conv[0].bias.detach().abs().max()) > 0  # the model's own biases are untouched


@pytest.mark.parametrize("act", [nn.ReLU, nn.GELU, nn.Tanh, nn.LeakyReLU])
@pytest.mark.parametrize("bias", ["keep", "drop"])
def test_ignore_nonlinearities_of_an_mlp_is_the_product_of_its_weights(act, bias):
    mlp = _mlp(act)
    w1, w2, w3 = (mlp[i].weight.detach().numpy() for i in (0, 2, 4))
    product = w3 @ (w2 @ w1)
    got = compact_representation(mlp, 12, "ignore_nonlinearities", bias=bias)
    np.testing.assert_allclose(got.numpy(), product, rtol=0, atol=1e-12)  # measured 1e-16
    assert isinstance(mlp[1], act)  # the model itself keeps its activations


def test_ignore_nonlinearities_of_the_library_mlp():
    torch.manual_seed(3)
    net = MLP(10, 3, width=8, depth=4, bias=True).to(DT)
    weights = [layer.linear.weight.detach().numpy() for layer in net.layers]
    product = net.classifier.weight.detach().numpy()
    for w in reversed(weights):
        product = product @ w
    got = compact_representation(net, (10,), "ignore_nonlinearities")
    np.testing.assert_allclose(got.numpy(), product, rtol=0, atol=1e-12)


def test_max_pool_becomes_the_average_pool_of_the_same_windows():
    net = _conv_net(nn.ReLU, nn.MaxPool2d(2, stride=2, padding=1), nn.AdaptiveMaxPool2d(2))
    twin = _conv_net(
        nn.Identity,
        nn.AvgPool2d(2, stride=2, padding=1, count_include_pad=False),
        nn.AdaptiveAvgPool2d(2),
    )
    twin.load_state_dict(net.state_dict())
    copy = linearised_copy(net)
    assert not copy.training
    assert [type(m).__name__ for m in copy] == [type(m).__name__ for m in twin]
    assert isinstance(net[2], nn.MaxPool2d)  # the original is unchanged
    reference = _one_at_a_time(twin, (2, 6, 6))
    got = compact_representation(net, (2, 6, 6), "ignore_nonlinearities", chunk_size=10)
    np.testing.assert_allclose(got.numpy(), reference, rtol=0, atol=1e-12)
    # max_pool="keep": the copy keeps its max pools, so it is the finite difference of the
    # ReLU-free copy with max-pooling, not an affine map's matrix.
    kept = linearised_copy(net, max_pool="keep")
    assert isinstance(kept[2], nn.MaxPool2d) and isinstance(kept[1], nn.Identity)
    keep = compact_representation(net, (2, 6, 6), "ignore_nonlinearities", max_pool="keep")
    np.testing.assert_allclose(keep.numpy(), _one_at_a_time(kept, (2, 6, 6)), atol=1e-12)


def test_bias_drop_and_keep_differ_only_where_biases_move_a_kept_max():
    # Per-unit biases before a max over units change which unit wins: drop != keep.
    torch.manual_seed(4)
    net = nn.Sequential(
        nn.Linear(12, 8), nn.Unflatten(1, (1, 8)), nn.MaxPool1d(2), nn.Flatten(), nn.Linear(4, 3)
    ).to(DT)
    with torch.no_grad():
        net[0].bias.mul_(10.0)
    args = (net, 12, "ignore_nonlinearities")
    keep = compact_representation(*args, max_pool="keep", bias="keep").numpy()
    drop = compact_representation(*args, max_pool="keep", bias="drop").numpy()
    zeroed = linearised_copy(net, max_pool="keep")
    with torch.no_grad():
        zeroed[0].bias.zero_()
        zeroed[4].bias.zero_()
    np.testing.assert_allclose(drop, _one_at_a_time(zeroed, (12,)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(keep, _one_at_a_time(net, (12,)), rtol=0, atol=1e-12)
    assert np.abs(drop - keep).max() > 0.1
    # A per-channel constant (conv bias) commutes with the max: there they agree.
    conv = _conv_net(nn.ReLU, nn.MaxPool2d(2), nn.AdaptiveMaxPool2d(2))
    both = [
        compact_representation(conv, (2, 6, 6), "ignore_nonlinearities", max_pool="keep", bias=b)
        for b in ("keep", "drop")
    ]
    np.testing.assert_allclose(both[0].numpy(), both[1].numpy(), rtol=0, atol=1e-12)


def test_the_global_rng_is_not_consumed():
    net = _mlp(nn.ReLU)
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    compact_representation(net, 12, "ignore_nonlinearities")
    assert torch.equal(torch.rand(3), expected)


def test_bad_input_gets_clear_errors():
    relu = _mlp(nn.ReLU)
    with pytest.raises(ValueError, match="not affine"):
        compact_representation(relu, 12)  # exact on a ReLU net
    with pytest.raises(ValueError, match=r"not affine.*replaces only ReLU"):
        compact_representation(_mlp(nn.Sigmoid), 12, "ignore_nonlinearities")
    with pytest.raises(ValueError, match=r"input_shape=\(5,\)"):
        compact_representation(_mlp(nn.Identity), 5)
    with pytest.raises(ValueError, match=r"output must have shape \(batch, K\) = \(4, K\), got"):
        compact_representation(nn.Conv1d(1, 2, 3).to(DT), (1, 8))  # (batch, 2, 6)
    with pytest.raises(ValueError, match="method must be one of"):
        compact_representation(relu, 12, method="jacobian")
    with pytest.raises(ValueError, match="max_pool must be one of"):
        compact_representation(relu, 12, "ignore_nonlinearities", max_pool="min")
    with pytest.raises(ValueError, match="bias must be one of"):
        compact_representation(relu, 12, bias="zero")
    with pytest.raises(ValueError, match="chunk_size must be"):
        compact_representation(relu, 12, chunk_size=0)
    with pytest.raises(ValueError, match="input_shape"):
        compact_representation(relu, (12, 0))
    with pytest.raises(ValueError, match="dilation"):
        linearised_copy(nn.Sequential(nn.MaxPool1d(2, dilation=2)))
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        compact_representation(lambda x: x, 3)
