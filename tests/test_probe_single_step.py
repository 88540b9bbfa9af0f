"""The single-sample step of ``single_sample_feature_changes`` steps only the layers before
the measured one: its values equal, bit for bit, those of a step of every parameter.

Reference: a deep copy of the model per sample, every trainable parameter stepped by its
gradient of the sample's own loss (autograd over all of them), then a full forward pass
read at the measured layer's input, in float64.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch.nn import functional as F

from collapselab.models import MLP
from collapselab.probe import single_sample_feature_changes

LR = 0.1


def _every_parameter_step(model: MLP, x: torch.Tensor, y: torch.Tensor, layer: int):
    """ΔF^(l-1) per sample with every parameter stepped (the computation before trimming)."""
    name = f"layers.{layer - 1}.linear" if layer <= len(model.layers) else "classifier"
    out = []
    for i in range(x.shape[0]):
        twin = copy.deepcopy(model).eval()
        seen: list[torch.Tensor] = []

        def keep(_module, args, _output, seen=seen):
            seen.append(args[0].detach().clone())

        dict(twin.named_modules())[name].register_forward_hook(keep)
        xi, yi = x[i : i + 1], y[i : i + 1]
        with torch.no_grad():
            twin(xi)
        params = [p for p in twin.parameters() if p.requires_grad]
        loss = F.cross_entropy(twin(xi), yi, reduction="none").sum()
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                if g is not None:
                    p.sub_(LR * g)
            twin(xi)
        out.append(seen[-1].reshape(-1).double() - seen[0].reshape(-1).double())
    return torch.stack(out)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"activation": "leaky_relu", "negative_slope": 0.1},
        {"norm": "batchnorm", "bias": True},
        {"norm": "norm1"},
    ],
    ids=["relu", "leaky_relu", "batchnorm_bias", "norm1"],
)
def test_trimmed_step_equals_the_step_of_every_parameter(options):
    torch.manual_seed(3)
    depth = 5
    model = MLP(6, 4, width=9, depth=depth, **options).double()
    with torch.no_grad():  # BatchNorm's running statistics away from their initial values
        for block in model.layers:
            if hasattr(block, "norm"):
                block.norm.running_mean.normal_()
                block.norm.running_var.uniform_(0.5, 2.0)
    x = torch.randn(7, 6, dtype=torch.float64)
    y = torch.arange(7) % 4
    before = [p.detach().clone() for p in model.parameters()]
    for layer in range(1, depth + 1):
        got = single_sample_feature_changes(model, x, y, layer, LR)
        ref = _every_parameter_step(model, x, y, layer)
        assert got.shape == ref.shape == (7, 6 if layer == 1 else 9)
        assert torch.equal(got, ref), f"layer {layer}: {float((got - ref).abs().max())}"
        if layer == 1:  # the first layer's input is the sample itself
            assert torch.equal(got, torch.zeros_like(got))
        else:
            assert float(got.abs().max()) > 0
    for p, q in zip(model.parameters(), before, strict=True):
        assert torch.equal(p.detach(), q)  # the model is left exactly as it was
        assert p.grad is None


def test_trimmed_step_of_selected_samples_and_float32():
    torch.manual_seed(4)
    model = MLP(5, 3, width=8, depth=4)
    x = torch.randn(6, 5)
    y = torch.arange(6) % 3
    got = single_sample_feature_changes(model, x, y, 3, LR, samples=[4, 1])
    ref = _every_parameter_step(model, x[[4, 1]], y[[4, 1]], 3)
    assert got.dtype == torch.float64
    assert torch.equal(got, ref)
