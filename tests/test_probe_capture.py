"""Layer addressing, feature capture with forward hooks, and eval-mode control."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from collapselab.models import MLP, ConvResNet, FCResNet
from collapselab.probe import FeatureCapture, batch_coupling_modules, eval_mode, resolve_layers


def conv_net() -> ConvResNet:
    torch.manual_seed(0)
    return ConvResNet(3, 4, [(4, 2, 1), (6, 2, 2)]).double()


# ------------------------------------------------------------------------- addressing
def test_resolve_by_name_glob_regex_and_type():
    m = conv_net()
    assert resolve_layers(m, "stem") == ["stem"]
    assert resolve_layers(m, ["stages.1.blocks.0", "stem"]) == ["stages.1.blocks.0", "stem"]
    assert resolve_layers(m, "stages.?.blocks.?") == [
        "stages.0.blocks.0",
        "stages.0.blocks.1",
        "stages.1.blocks.0",
        "stages.1.blocks.1",
    ]
    assert resolve_layers(m, re.compile(r"stages\.1\.blocks\.\d+")) == [
        "stages.1.blocks.0",
        "stages.1.blocks.1",
    ]
    convs = resolve_layers(m, nn.Conv2d)
    assert convs[0] == "stem" and len(convs) == 1 + 4 * 2 + 1  # stem, 2 per block, transition
    # Mixed items keep their order; duplicates are kept once.
    assert resolve_layers(m, ["stem", nn.Linear, "stem"]) == ["stem", "classifier"]


def test_resolve_rejects_bad_selections():
    m = conv_net()
    with pytest.raises(ValueError, match=r"'stage\.0' matches no submodule"):
        resolve_layers(m, "stage.0")
    with pytest.raises(ValueError, match="matches no submodule"):
        resolve_layers(m, nn.LSTM)
    with pytest.raises(ValueError, match="empty"):
        resolve_layers(m, [])
    with pytest.raises(TypeError, match="module name"):
        resolve_layers(m, [3])
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        resolve_layers("not a model", "stem")


# --------------------------------------------------------------------------- capture
def test_capture_outputs_and_inputs_flattened_match_manual_forward():
    m = conv_net().eval()
    x = torch.randn(5, 3, 8, 8, dtype=torch.float64)
    with FeatureCapture(m, [*m.feature_layers, "flatten"], where="both") as cap:
        with torch.no_grad():
            logits = m(x)
    # Manual forward through the same modules.
    with torch.no_grad():
        h0 = m.stem(x)
        h = m.stages[0].blocks[0](h0)
        h = m.stages[0].blocks[1](h)
        t = m.stages[1].transition(h)
        b = m.stages[1].blocks[0](t)
    assert cap.n_forwards == 1
    assert torch.equal(cap.outputs["stem"], h0.reshape(5, -1))
    assert torch.equal(cap.inputs["stem"], x.reshape(5, -1))
    assert torch.equal(cap.outputs["stages.1.transition"], t.reshape(5, -1))
    assert torch.equal(cap.inputs["stages.1.blocks.0"], t.reshape(5, -1))
    assert torch.equal(cap.outputs["stages.1.blocks.0"], b.reshape(5, -1))
    assert cap.outputs["stem"].shape == (5, 4 * 8 * 8)
    assert cap.outputs["stages.1.blocks.1"].shape == (5, 6 * 4 * 4)
    # The classifier's input equals the captured penultimate features.
    W, bias = m.classifier.weight, m.classifier.bias
    assert torch.allclose(cap.outputs["flatten"] @ W.T + bias, logits, rtol=0, atol=1e-13)
    # Hooks are gone after the context.
    with torch.no_grad():
        m(x[:2])
    assert cap.n_forwards == 1 and cap.outputs["stem"].shape[0] == 5


def test_each_forward_starts_a_new_capture_and_detach():
    m = FCResNet(6, 5, 2, 3).double().eval()
    cap = FeatureCapture(m, "blocks.*", where="output")
    assert cap.layers == [
        "blocks.0",
        *[f"blocks.0.{s}" for s in ("norm1", "act1", "linear1", "norm2", "act2", "linear2")],
        "blocks.1",
        *[f"blocks.1.{s}" for s in ("norm1", "act1", "linear1", "norm2", "act2", "linear2")],
    ]
    m(torch.randn(4, 6, dtype=torch.float64))
    m(torch.randn(3, 6, dtype=torch.float64))
    assert cap.n_forwards == 2
    assert all(t.shape[0] == 3 for t in cap.features.values())
    assert not any(t.requires_grad for t in cap.features.values())
    cap.close()
    cap.close()  # idempotent


def test_gradient_hooks_capture_dloss_dfeature():
    torch.manual_seed(1)
    m = MLP(4, 3, width=5, depth=3).double()
    x = torch.randn(6, 4, dtype=torch.float64)
    with FeatureCapture(m, m.feature_layers, detach=False, gradients=True) as cap:
        loss = m(x).pow(2).sum()
        feats = [cap.raw_outputs[n] for n in m.feature_layers]
        expected = torch.autograd.grad(loss, feats, retain_graph=True)
        loss.backward()
    for name, g in zip(m.feature_layers, expected, strict=True):
        assert torch.equal(cap.output_grads[name], g)


def test_capture_errors():
    m = MLP(4, 3, width=5, depth=3).double()
    with pytest.raises(ValueError, match="where must be"):
        FeatureCapture(m, "classifier", where="middle")
    with pytest.raises(ValueError, match="detach=False"):
        FeatureCapture(m, "classifier", gradients=True)
    with (
        FeatureCapture(m, "layers.0.act", detach=False, gradients=True),
        torch.no_grad(),
        pytest.raises(RuntimeError, match="does not require grad"),
    ):
        m(torch.randn(2, 4, dtype=torch.float64))

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(self.lin(x))

    t = Twice()
    with FeatureCapture(t, "lin"), pytest.raises(RuntimeError, match="called twice"):
        t(torch.randn(2, 3))


# ------------------------------------------------------------------------- eval mode
def test_eval_mode_restores_every_flag_even_on_error():
    m = MLP(4, 3, width=5, depth=3, norm="batchnorm")
    m.train()
    m.layers[1].norm.eval()  # a frozen BatchNorm inside a training model
    before = {n: mod.training for n, mod in m.named_modules()}
    assert batch_coupling_modules(m) == ["layers.0.norm"]
    with eval_mode(m):
        assert not any(mod.training for mod in m.modules())
        assert batch_coupling_modules(m) == []
    assert {n: mod.training for n, mod in m.named_modules()} == before
    with pytest.raises(KeyError), eval_mode(m):
        raise KeyError("boom")
    assert {n: mod.training for n, mod in m.named_modules()} == before


def test_batch_statistics_without_running_estimates_couple_even_in_eval():
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3, track_running_stats=False))
    with eval_mode(m):
        assert batch_coupling_modules(m) == ["1"]


def test_sink_streams_each_layer_as_it_is_computed():
    m = conv_net().eval()
    x = torch.randn(4, 3, 8, 8, dtype=torch.float64)
    seen = []
    with FeatureCapture(m, m.feature_layers) as kept, torch.no_grad():
        sink = lambda name, kind, t: seen.append((name, kind, t.clone()))  # noqa: E731
        with FeatureCapture(m, m.feature_layers, sink=sink) as streamed:
            m(x)
        assert streamed.outputs == {}
    # In execution order, flattened, equal to the kept features.
    assert [s[0] for s in seen] == m.feature_layers
    for name, kind, t in seen:
        assert kind == "output" and torch.equal(t, kept.outputs[name])
    with pytest.raises(ValueError, match="sink receives detached"):
        FeatureCapture(m, "stem", detach=False, sink=sink)


def test_outputs_overwritten_in_place_raise_unless_copied():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(inplace=True), nn.Linear(5, 2)).double()
    x = torch.randn(6, 4, dtype=torch.float64)
    with torch.no_grad():
        pre = model[0](x)
    assert pre.min() < 0  # so that the in-place ReLU really changes the kept output
    with FeatureCapture(model, "0") as cap, torch.no_grad():
        with pytest.raises(RuntimeError, match=r"output of '0' was modified in place.*copy=True"):
            model(x)
    with FeatureCapture(model, "0", copy=True) as cap, torch.no_grad():
        model(x)
        assert torch.equal(cap.outputs["0"], pre)
    # The input of an in-place ReLU is overwritten by the ReLU itself.
    with FeatureCapture(model, "1", "input") as cap, torch.no_grad():
        with pytest.raises(RuntimeError, match=r"input of '1' was modified in place"):
            model(x)
    with FeatureCapture(model, "1", "input", copy=True) as cap, torch.no_grad():
        model(x)
        assert torch.equal(cap.inputs["1"], pre)
    with pytest.raises(ValueError, match="copy=True needs detach=True"):
        FeatureCapture(model, "0", detach=False, copy=True)
    # Out-of-place models are unaffected and keep no copies.
    plain = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)).double()
    with FeatureCapture(plain, "1", "input") as cap, torch.no_grad():
        plain(x)
        assert cap.inputs["1"].min() < 0
