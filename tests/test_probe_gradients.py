"""Per-sample feature gradients from one backward pass against a per-sample loop."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from collapselab.models import MLP, ConvResNet
from collapselab.probe import FeatureCapture, eval_mode, per_sample_gradients


def loop_reference(model, x, y, names, gated, loss_fn):
    """One forward and one backward per sample (eval mode), float64."""
    feats = {n: [] for n in names}
    grads = {n: [] for n in names}
    pre_grads = {n: [] for n in gated}
    with eval_mode(model):
        for i in range(x.shape[0]):
            out = FeatureCapture(model, names, detach=False)
            inp = FeatureCapture(model, gated or names, "input", detach=False)
            xi = x[i : i + 1].clone().requires_grad_(True)
            loss = loss_fn(model(xi), y[i : i + 1]).sum()
            out.close()
            inp.close()
            targets = [out.raw_outputs[n] for n in names] + [inp.raw_inputs[n] for n in gated]
            gs = torch.autograd.grad(loss, targets)
            for n, g in zip(names, gs[: len(names)], strict=True):
                feats[n].append(out.outputs[n].detach())
                grads[n].append(g.reshape(1, -1))
            for n, g in zip(gated, gs[len(names) :], strict=True):
                pre_grads[n].append(g.reshape(1, -1))
    cat = lambda d: {k: torch.cat(v) for k, v in d.items()}  # noqa: E731
    return cat(feats), cat(grads), cat(pre_grads)


def ce(logits, y):
    return F.cross_entropy(logits, y, reduction="none")


def mse(logits, y):
    return (logits - F.one_hot(y, logits.shape[1]).to(logits.dtype)).pow(2).sum(dim=1)


@pytest.mark.parametrize("loss_fn", [ce, mse])
def test_mlp_with_batchnorm_matches_per_sample_loop(loss_fn):
    torch.manual_seed(0)
    m = MLP(6, 4, width=7, depth=4, norm="batchnorm", activation="leaky_relu").double()
    m.train()(torch.randn(32, 6, dtype=torch.float64))  # non-trivial running statistics
    x = torch.randn(9, 6, dtype=torch.float64)
    y = torch.randint(0, 4, (9,))
    names = [*m.feature_layers, "layers.1.linear"]
    res = per_sample_gradients(m, x, y, names, loss_fn=loss_fn)
    assert m.training  # flags restored
    feats, grads, pre_grads = loop_reference(m, x, y, names, m.feature_layers, loss_fn)
    assert set(res.preactivations) == set(m.feature_layers)  # the LeakyReLU modules only
    for n in names:
        torch.testing.assert_close(res.features[n], feats[n], rtol=0, atol=1e-12)
        torch.testing.assert_close(res.gradients[n], grads[n], rtol=0, atol=1e-12)
    for n in m.feature_layers:
        torch.testing.assert_close(res.preact_gradients[n], pre_grads[n], rtol=0, atol=1e-12)
        z = res.preactivations[n]
        assert torch.equal(res.gates[n], z > 0)
        # LeakyReLU: dl/dz = (1 on gates, slope elsewhere) * dl/dF. (PyTorch's backward
        # applies the slope 0.01 rounded to float32, hence the relative 1e-7.)
        slope = torch.where(res.gates[n], 1.0, 0.01).to(z.dtype)
        torch.testing.assert_close(
            res.preact_gradients[n], slope * res.gradients[n], rtol=1e-7, atol=0
        )
    torch.testing.assert_close(res.losses, loss_fn(res.logits, y), rtol=0, atol=0)
    assert all(p.grad is None for p in m.parameters())  # parameters untouched


def test_conv_features_and_frozen_parameters():
    torch.manual_seed(2)
    m = ConvResNet(2, 3, [(3, 2, 1)]).double().eval()
    for p in m.parameters():
        p.requires_grad_(False)
    x = torch.randn(5, 2, 6, 6, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 1, 0])
    names = m.feature_layers
    res = per_sample_gradients(m, x, y, names)
    feats, grads, _ = loop_reference(m, x, y, names, [], ce)
    for n in names:
        assert res.gradients[n].shape == (5, 3 * 6 * 6)
        torch.testing.assert_close(res.gradients[n], grads[n], rtol=0, atol=1e-12)
        torch.testing.assert_close(res.features[n], feats[n], rtol=0, atol=1e-12)
    assert res.preactivations == {}


def test_batch_coupling_is_refused_in_train_mode_and_explained():
    torch.manual_seed(3)
    m = MLP(4, 3, width=5, depth=3, norm="batchnorm").double().train()
    x = torch.randn(8, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (8,))
    with pytest.raises(ValueError, match="batch statistics"):
        per_sample_gradients(m, x, y, m.feature_layers, mode="current")
    # Allowed: the rows are then the gradient of the summed loss, which differs from the
    # per-sample gradients because BatchNorm mixes the rows.
    coupled = per_sample_gradients(
        m, x, y, m.feature_layers, mode="current", allow_batch_coupling=True
    )
    assert m.training
    with FeatureCapture(m, m.feature_layers, detach=False) as cap:
        total = ce(m(x), y).sum()
        expected = torch.autograd.grad(total, [cap.raw_outputs[n] for n in m.feature_layers])
    for n, g in zip(m.feature_layers, expected, strict=True):
        torch.testing.assert_close(coupled.gradients[n], g, rtol=0, atol=1e-13)
    _, single, _ = loop_reference(m.train(), x, y, m.feature_layers, [], ce)  # eval loop
    assert (coupled.gradients["layers.0.act"] - single["layers.0.act"]).abs().max() > 1e-6


def test_bad_arguments():
    m = MLP(4, 3, width=5, depth=3).double()
    x = torch.randn(4, 4, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 0])
    with pytest.raises(ValueError, match="per-sample losses of shape"):
        per_sample_gradients(m, x, y, "layers.0.act", loss_fn=lambda z, t: ce(z, t).mean())
    with pytest.raises(ValueError, match="one entry per input row"):
        per_sample_gradients(m, x, y[:3], "layers.0.act")
    with pytest.raises(ValueError, match="mode must be"):
        per_sample_gradients(m, x, y, "layers.0.act", mode="train")
    inplace = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 3)).double()
    with pytest.raises(ValueError, match="inplace=True"):
        per_sample_gradients(inplace, x, y, "1")
    # Without pre-activations an in-place ReLU output is fine.
    res = per_sample_gradients(inplace, x, y, "1", preactivations=False)
    assert res.gradients["1"].shape == (4, 4)
