"""The fixes of the audit of the curvature claims (docs/curvature.md, "Audit of the failing
claims"), each against the independent float64 reference of ``tests/_curvature_reference.py``
(plain autograd, dense ``eigh``), and the reference itself against dense autograd Hessians."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.data import LabeledData
from collapselab.metrics.families import Curvature
from collapselab.models import MLP
from collapselab.track import Monitor
from tests import _curvature_reference as ref
from tests._curvature import blobs


def _relu_mlp(seed: int = 0) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """A 5-6-6-3 ReLU MLP with biases (float64) and 24 samples of three classes."""
    x, y = blobs(n=24, d=5)
    torch.manual_seed(seed)
    return MLP(5, 3, width=6, depth=3, bias=True).double(), x, y


def _dense_layer_hessian(model, layer, x, y, loss: str) -> torch.Tensor:
    """``∇²_W (1/N) Σ_n ℓ_n`` of one weight by autograd (``vec_row(W)`` order)."""
    weight = layer.weight
    original = weight.detach().clone()

    def total(w_flat: torch.Tensor) -> torch.Tensor:
        params = {"weight": w_flat.view_as(original), "bias": layer.bias}
        seen = {}

        def swap(_, inputs, output):
            seen["out"] = torch.nn.functional.linear(inputs[0], params["weight"], params["bias"])
            return seen["out"]

        handle = layer.register_forward_hook(swap)
        try:
            f = model(x)
        finally:
            handle.remove()
        return torch.stack([ref.per_sample_loss(loss, f[n], y[n]) for n in range(len(y))]).mean()

    return torch.autograd.functional.hessian(total, original.reshape(-1))


@pytest.mark.parametrize("loss", ["mse", "ce"])
@pytest.mark.parametrize("name", ["layers.1.linear", "classifier"])
def test_the_reference_gram_spectrum_is_the_dense_autograd_hessian(loss, name):
    model, x, y = _relu_mlp()
    layer = model.get_submodule(name)
    dense = _dense_layer_hessian(model, layer, x, y, loss)
    exact = torch.linalg.eigvalsh(dense).flip(0)
    system = ref.gram_system(ref.layer_samples(model, layer, x, y, loss), loss)
    eye = torch.eye(system.left.shape[0], dtype=torch.float64)
    got = ref.top_values(system.project(eye), exact.numel())
    assert np.allclose(got, exact.numpy(), atol=1e-12 * float(exact[0]))
    # B Bᵀ itself, entry by entry, from its Kronecker halves
    B = torch.stack(
        [torch.outer(a, r).reshape(-1) for a, r in zip(system.left, system.right, strict=True)]
    ).T
    assert torch.allclose(B @ B.T, dense, atol=1e-12 * float(dense.abs().max()))


def _post_activation_means(model, x, y, K):
    """Class means, by an explicit forward and explicit loops, of the input of
    ``layers.1.linear`` (``h^(l)``) and of ``relu(layers.1.linear(h^(l)))`` (``h^(l+1)``, the
    classifier's input), and of the pre-activation ``layers.1.linear(h^(l))``."""
    with torch.no_grad():
        h_in = torch.relu(model.layers[0].linear(x))
        pre = model.layers[1].linear(h_in)
        post = torch.relu(pre)
    means = {}
    for label, t in (("in", h_in), ("pre", pre), ("post", post)):
        means[label] = torch.stack([t[y == k].mean(0) for k in range(K)])
    return means


def _alignment(H: torch.Tensor, h_out: torch.Tensor, h_in: torch.Tensor) -> float:
    values = []
    for k in range(h_out.shape[0]):
        for kp in range(h_in.shape[0]):
            v = torch.outer(h_out[k], h_in[kp]).reshape(-1)
            Hv = H @ v
            values.append(float((Hv @ v) / (Hv.norm() * v.norm())))
    return float(np.mean(values))


@pytest.mark.parametrize("loss", ["mse", "ce"])
def test_kronecker_vectors_use_the_next_layers_input_not_the_pre_activation(loss):
    """Bug fixed by the audit: ``h^(l+1)`` of ``v_kk' = h̄^(l+1)_k ⊗ h̄^(l)_k'`` is the input
    of ``W_{l+1}`` (note 004 §2: ``σ(W_l h^(l))``), which the family read as the linear
    module's output (before the ReLU, with its bias)."""
    model, x, y = _relu_mlp()
    K = 3
    family = Curvature(["kronecker_alignment_mean"], samples=24, batch_size=24, tol=1e-12)
    monitor = Monitor(model, LabeledData(x, y, K), families=[family], schedule=None, loss=loss)
    got = monitor.measure_now(epoch=0)["train"]["layers.1.linear"]["kronecker_alignment_mean"]
    H = _dense_layer_hessian(model, model.layers[1].linear, x, y, loss)
    means = _post_activation_means(model, x, y, K)
    expected = _alignment(H, means["post"], means["in"])
    old = _alignment(H, means["pre"], means["in"])
    assert abs(expected - old) > 1e-2  # the two definitions differ here
    assert got == pytest.approx(expected, abs=1e-10)
