"""Every curvature operator against a dense float64 autograd reference."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from collapselab.curvature import (
    EmpiricalFisherOperator,
    GGNOperator,
    HessianOperator,
    LowRankOperator,
    Objective,
    gradient_covariance,
    resolve_loss,
)
from tests._curvature import batches, blobs, full_loss, jacobians, tanh_net, ufm_at_dnc

LOSSES = ["ce", "mse", "mse_sum", "mse_half"]


def _ggn_reference(obj: Objective, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    J = jacobians(obj, x)
    out = obj.forward(obj.theta, x)
    total = torch.zeros(obj.dim, obj.dim, dtype=torch.float64)
    for i in range(len(y)):
        hl = torch.autograd.functional.hessian(
            lambda f, i=i: obj.loss.value(f[None], y[i : i + 1]).sum(), out[i]
        )
        total += J[i].T @ hl @ J[i]
    return total / len(y) if obj.reduction == "mean" else total


def _per_sample_gradients(obj: Objective, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    def one(theta, xi, yi):
        return obj.loss.value(obj.forward(theta, xi[None]), yi[None]).sum()

    return torch.func.vmap(torch.func.grad(one), in_dims=(None, 0, 0))(obj.theta, x, y)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_hessian_ggn_and_fisher_equal_dense_autograd(loss, reduction):
    x, y = blobs()
    model = tanh_net()
    obj = Objective(model, loss, batches(x, y), reduction=reduction)
    dense_h = torch.autograd.functional.hessian(full_loss(obj, x, y), obj.theta)
    assert (HessianOperator(obj, block=4).dense() - dense_h).abs().max() < 1e-10
    assert (GGNOperator(obj).dense() - _ggn_reference(obj, x, y)).abs().max() < 1e-10
    g = _per_sample_gradients(obj, x, y)
    fisher = g.T @ g / (len(y) if reduction == "mean" else 1)
    assert (EmpiricalFisherOperator(obj).dense() - fisher).abs().max() < 1e-10
    V = torch.randn(obj.dim, 5, dtype=torch.float64)
    for op in (HessianOperator, GGNOperator, EmpiricalFisherOperator):
        cached, fresh = op(obj), op(obj, cache=False)
        assert (cached @ V - fresh @ V).abs().max() < 1e-13  # graphs kept or rebuilt
    # the smooth network's Hessian is not its GGN: the test would see a swap
    assert (dense_h - _ggn_reference(obj, x, y)).abs().max() > 1e-4


def test_the_loss_conventions():
    f = torch.randn(5, 4, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 3, 1])
    mse = resolve_loss("mse").value(f, y)
    target = nn.functional.one_hot(y, 4).double()
    assert torch.allclose(mse, ((f - target) ** 2).mean(1), rtol=1e-14)
    assert torch.allclose(resolve_loss(nn.MSELoss()).value(f, y), mse, rtol=0)
    assert torch.allclose(resolve_loss("mse_half").value(f, y), 0.5 * ((f - target) ** 2).sum(1))
    ce = resolve_loss(nn.CrossEntropyLoss()).value(f, y)
    assert torch.allclose(ce, nn.functional.cross_entropy(f, y, reduction="none"), rtol=1e-14)
    for name in LOSSES:  # the factors reproduce the output Hessian
        loss = resolve_loss(name)
        w, u = loss.factors(f)
        for i in range(5):
            dense = torch.autograd.functional.hessian(
                lambda z, i=i, loss=loss: loss.value(z[None], y[i : i + 1]).sum(), f[i]
            )
            built = sum(w[i, c] * torch.outer(u[c, i], u[c, i]) for c in range(4))
            assert (built - dense).abs().max() < 1e-13


def test_a_layer_group_is_the_block_of_the_full_hessian():
    x, y = blobs()
    model = tanh_net()
    whole = Objective(model, "ce", batches(x, y))
    layer = Objective(model, "ce", batches(x, y), params=model[2])
    assert layer.names == ["2.weight", "2.bias"] and layer.dim == 18
    full = torch.autograd.functional.hessian(full_loss(whole, x, y), whole.theta)
    start = whole.dim - layer.dim
    assert (HessianOperator(layer).dense() - full[start:, start:]).abs().max() < 1e-12
    by_name = Objective(model, "ce", batches(x, y), params=["2.weight"])
    assert torch.equal(by_name.theta, model[2].weight.detach().reshape(-1))


def test_the_deep_linear_ufm_layer_hessian_is_the_kronecker_formula():
    """Note 004 §3.8: H_l = (W_{L:l+1}ᵀ W_{L:l+1}) ⊗ (1/N) H_l H_lᵀ (row-major vec)."""
    model, x, y = ufm_at_dnc()
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():  # away from collapse: the formula holds at any parameters
        for layer in model.layers:
            layer.weight.add_(
                0.3 * torch.randn(layer.weight.shape, generator=g, dtype=torch.float64)
            )
    L = len(model.layers) - 1
    for m in range(1, L + 1):
        obj = Objective(model, "mse_half", [(x, y)], params=[model.layers[m].weight])
        left = torch.eye(3, dtype=torch.float64)
        for j in range(L, m, -1):
            left = left @ model.layers[j].weight.detach()
        feats = x @ model.layers[0].weight.detach().T
        for j in range(1, m):
            feats = feats @ model.layers[j].weight.detach().T
        formula = torch.kron(left.T @ left, feats.T @ feats / len(y))
        assert (HessianOperator(obj).dense() - formula).abs().max() < 1e-12, m
        assert (GGNOperator(obj).dense() - formula).abs().max() < 1e-12, m


def test_gradient_covariance_and_low_rank_operators():
    x, y = blobs()
    model = tanh_net()
    obj = Objective(model, "mse", batches(x, y))
    g = _per_sample_gradients(obj, x, y)
    centred = g - g.mean(0)
    assert (gradient_covariance(obj).dense() - centred.T @ centred / len(y)).abs().max() < 1e-12
    A = torch.randn(obj.dim, 3, dtype=torch.float64)
    w = torch.tensor([2.0, 0.5, 1.0], dtype=torch.float64)
    op = LowRankOperator(A, w)
    dense = A @ torch.diag(w) @ A.T
    assert (op.dense() - dense).abs().max() < 1e-12
    vals, vecs = op.eigenpairs()
    ref = torch.linalg.eigvalsh(dense).flip(0)[:3]
    assert (vals - ref).abs().max() < 1e-10 * ref[0]
    assert (dense @ vecs - vecs * vals).abs().max() < 1e-10 * ref[0]
    combo = (2.0 * op - op + op).dense()
    assert (combo - 2 * dense).abs().max() < 1e-12


def test_batchnorm_modes():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3)).double()
    x, y = blobs()
    model.train()
    with torch.no_grad():  # non-trivial running statistics
        model(x)
    running = model[1].running_mean.clone()
    with pytest.raises(ValueError, match="BatchNorm module '1' is in training mode"):
        HessianOperator(Objective(model, "ce", [(x, y)])).matvec(
            torch.ones(63, dtype=torch.float64)
        )
    # eval: the running statistics; the reference is the model in eval mode
    obj = Objective(model, "ce", [(x, y)], batchnorm="eval")
    model.eval()
    dense = torch.autograd.functional.hessian(full_loss(obj, x, y), obj.theta)
    model.train()
    assert (HessianOperator(obj).dense() - dense).abs().max() < 1e-10
    # batch: batch statistics, functional; the reference normalises by hand
    obj = Objective(model, "ce", [(x, y)], batchnorm="batch")
    bn = model[1]

    def by_hand(theta):
        p = obj.unflatten(theta)
        h = x @ p["0.weight"].T + p["0.bias"]
        h = (h - h.mean(0)) / torch.sqrt(h.var(0, unbiased=False) + bn.eps)
        h = torch.relu(h * p["1.weight"] + p["1.bias"])
        return obj.loss.value(h @ p["3.weight"].T + p["3.bias"], y).mean()

    dense = torch.autograd.functional.hessian(by_hand, obj.theta)
    assert (HessianOperator(obj).dense() - dense).abs().max() < 1e-10
    assert torch.equal(model[1].running_mean, running) and model[1].training


def test_bad_input_is_a_clear_error():
    x, y = blobs()
    model = tanh_net()
    with pytest.raises(ValueError, match="loss must be one of"):
        Objective(model, nn.NLLLoss(), [(x, y)])
    with pytest.raises(ValueError, match="label smoothing"):
        Objective(model, nn.CrossEntropyLoss(label_smoothing=0.1), [(x, y)])
    with pytest.raises(ValueError, match="not a submodule of the model"):
        Objective(model, "ce", [(x, y)], params=nn.Linear(2, 2))
    with pytest.raises(ValueError, match="not a parameter of the model"):
        Objective(model, "ce", [(x, y)], params=[torch.zeros(3, requires_grad=True)])
    with pytest.raises(ValueError, match="neither a parameter nor a submodule"):
        Objective(model, "ce", [(x, y)], params="head.weight")
    with pytest.raises(ValueError, match="data yielded no batch"):
        HessianOperator(Objective(model, "ce", [])).matvec(torch.ones(43, dtype=torch.float64))
    with pytest.raises(TypeError, match="re-iterable"):
        Objective(model, "ce", iter([(x, y)]))
    bad = x.clone()
    bad[0, 0] = float("nan")
    obj = Objective(model, "ce", [(bad, y)])
    for op in (HessianOperator(obj), GGNOperator(obj), EmpiricalFisherOperator(obj)):
        with pytest.raises(ValueError, match="NaN"):
            op.matvec(torch.ones(43, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"V must have shape \(43, m\)"):
        HessianOperator(Objective(model, "ce", [(x, y)])).matmat(torch.ones(5, 2))


def test_a_torch_data_loader_is_the_data():
    """A ``DataLoader`` (re-iterable) gives the operators of the same batches as a list."""
    from torch.utils.data import DataLoader, TensorDataset

    x, y = blobs()
    model = tanh_net()
    loader = DataLoader(TensorDataset(x, y), batch_size=7, shuffle=False)
    listed = Objective(model, "ce", batches(x, y))
    looped = Objective(model, "ce", loader)
    V = torch.randn(listed.dim, 3, dtype=torch.float64)
    for op in (HessianOperator, GGNOperator, EmpiricalFisherOperator):
        assert (op(looped) @ V - op(listed) @ V).abs().max() < 1e-14
    assert looped.passes == 3  # one pass per operator (graphs kept for later products)


@pytest.mark.parametrize("relu", [False, True])
def test_the_operators_equal_the_theory_layer_hessians_of_the_deep_ufm(relu):
    """Issue 13's cross-check against the theory package: on ``DeepUFM.as_module`` (paper
    004's UFM as an ``nn.Module``), the layer Hessian of the data term ``(1/2N)‖F − Y‖²``
    (``"mse_half"``, mean) equals ``layer_hessian`` of ``collapselab.theory.dlufm_layerwise``:
    the Kronecker formula for the linear model, the per-sample form for the ReLU one."""
    from collapselab.theory.dlufm import DeepLinearUFM, DeepReLUUFM
    from collapselab.theory.dlufm_layerwise import layer_hessian

    K, n = 3, 4
    kind = DeepReLUUFM if relu else DeepLinearUFM
    ufm = kind(K, n, 5, lambda_w=1e-3, lambda_h=1e-3, n_layers=3)
    point = ufm.random_point(seed=2, w_scale=1.0, h_scale=0.5)
    module = ufm.as_module(point)
    x = torch.eye(K * n, dtype=torch.float64)
    y = torch.arange(K).repeat_interleave(n)
    assert torch.equal(module.targets, torch.nn.functional.one_hot(y, K).double())
    for layer in range(1, 4):
        obj = Objective(
            module,
            "mse_half",
            [(x[:7], y[:7]), (x[7:], y[7:])],
            params=[module.layers[layer].weight],
        )
        method = "data" if relu else "kronecker"
        theory = torch.from_numpy(layer_hessian(ufm, point, layer, method=method))
        scale = float(theory.abs().max())
        assert (HessianOperator(obj).dense() - theory).abs().max() < 1e-12 * scale, layer
        assert (GGNOperator(obj).dense() - theory).abs().max() < 1e-12 * scale, layer
