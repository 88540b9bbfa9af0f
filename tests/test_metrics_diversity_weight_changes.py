"""M4 from its three weight-change sources through the Monitor (paper 000, R8, note A5).

References: explicit per-sample gradients by autograd, one sample at a time, and explicit
loops over pseudo-neuron pairs; the actual SGD update of a real optimiser step."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from collapselab.data import LabeledData
from collapselab.families.builtin import Diversity
from collapselab.models import MLP
from collapselab.probe import linear_factors
from collapselab.track import Monitor

LR = 0.1
LINEARS = ("layers.0.linear", "layers.1.linear", "layers.2.linear", "classifier")


def _m4_loop(dw: np.ndarray) -> float:
    """mean over ordered pairs i != j of cos(column i, column j), zero columns left out."""
    cols = [dw[:, i] for i in range(dw.shape[1]) if np.linalg.norm(dw[:, i]) > 0]
    cos = [
        a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) for a, b in itertools.permutations(cols, 2)
    ]
    return float(np.mean(cos)) if cos else float("nan")


def _data():
    g = torch.Generator().manual_seed(0)
    y = torch.arange(3).repeat_interleave(6)
    x = 2.0 * torch.randn(3, 5, generator=g, dtype=torch.float64)[y]
    x = x + torch.randn(len(y), 5, generator=g, dtype=torch.float64)
    return LabeledData(x, y, 3)


def _per_sample_grads(model, x, y, name):
    lin = dict(model.named_modules())[name]
    return [
        torch.autograd.grad(F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]), lin.weight)[
            0
        ].numpy()
        for i in range(x.shape[0])
    ]


def test_m4_three_sources_against_brute_force():
    torch.manual_seed(0)
    model = MLP(5, 3, width=6, depth=4).double()
    data = _data()
    fam = Diversity(weight_changes=True)
    assert "pseudo_neuron_cosine_update" in fam.requested
    assert "pseudo_neuron_cosine_update" not in Diversity().requested  # opt-in
    monitor = Monitor(model, data, families=[fam], batch_size=7, every_iterations=1)
    first = monitor.measure_now(step=4)["train"]
    for name in LINEARS:
        assert "pseudo_neuron_cosine_update" not in first[name]  # no previous weights yet
    before = {n: dict(model.named_modules())[n].weight.detach().clone() for n in LINEARS}
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    opt.zero_grad()
    F.cross_entropy(model(data.x[:10]), data.y[:10]).backward()
    opt.step()
    res = monitor.measure_now(step=5)["train"]
    for name in LINEARS:
        grads = _per_sample_grads(model, data.x, data.y, name)
        per = [_m4_loop(-LR * gr) for gr in grads]
        per = [v for v in per if not np.isnan(v)]
        vals = res[name]
        assert vals["pseudo_neuron_cosine_per_sample"] == pytest.approx(np.mean(per), abs=1e-12)
        mean_change = -LR * np.mean(grads, axis=0)
        assert vals["pseudo_neuron_cosine_probe_mean"] == pytest.approx(
            _m4_loop(mean_change), abs=1e-12
        )
        update = (dict(model.named_modules())[name].weight.detach() - before[name]).numpy()
        assert vals["pseudo_neuron_cosine_update"] == pytest.approx(_m4_loop(update), abs=1e-12)
        assert vals["weight_change_steps"] == 1.0
    # note A5: post-ReLU inputs make the per-sample form exactly 1 above the first layer
    assert res["layers.1.linear"]["pseudo_neuron_cosine_per_sample"] == pytest.approx(1.0)
    assert res["classifier"]["pseudo_neuron_cosine_per_sample"] == pytest.approx(1.0)
    # the feature keys are still there, computed from the sweep
    assert "feature_cosine_cross_class" in res["layers.0.act"]


def test_m4_update_spans_the_steps_since_the_last_measurement():
    torch.manual_seed(1)
    model = MLP(5, 3, width=6, depth=3).double()
    data = _data()
    fam = Diversity(["pseudo_neuron_cosine_update", "weight_change_steps"])
    monitor = Monitor(model, data, families=[fam], batch_size=9)
    monitor.measure_now(step=0)
    w0 = model.classifier.weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(model(data.x), data.y).backward()
        opt.step()
    res = monitor.measure_now(step=3)["train"]["classifier"]
    assert res["weight_change_steps"] == 3.0
    update = (model.classifier.weight.detach() - w0).numpy()
    assert res["pseudo_neuron_cosine_update"] == pytest.approx(_m4_loop(update), abs=1e-12)
    assert set(res) == {"pseudo_neuron_cosine_update", "weight_change_steps"}


def test_linear_factors_are_per_sample_gradient_factors():
    torch.manual_seed(2)
    model = MLP(5, 3, width=4, depth=3).double()
    data = _data()
    cap = linear_factors(model, data.x, data.y)
    assert list(cap.inputs) == ["layers.0.linear", "layers.1.linear", "classifier"]
    for name in cap.inputs:
        grads = _per_sample_grads(model, data.x, data.y, name)
        for i, gr in enumerate(grads):
            np.testing.assert_allclose(
                np.outer(cap.pre_grads[name][i], cap.inputs[name][i]), gr, atol=1e-13
            )
    assert model.classifier.weight.grad is None
    with pytest.raises(ValueError, match=r"are not nn\.Linear"):
        linear_factors(model, data.x, data.y, ["layers.0.act"])


def _count_forwards(model):
    """``(calls, handle)``: ``calls[0]`` counts the forward passes until ``handle.remove()``."""
    calls = [0]

    def hook(*_):
        calls[0] += 1

    return calls, model.register_forward_pre_hook(hook)


@pytest.mark.parametrize("norm", ["none", "batchnorm"])
def test_m4_from_the_gradient_sweep_equals_its_own_pass_and_brute_force(norm):
    # With gradients=True the sweep's backward pass also gives the linear layers' factors
    # (one forward pass per batch in all); its M4 must equal the family's own pass (an
    # independent forward and backward pass per batch: cache_bytes=0 keeps no factors)
    # bit for bit, and the brute-force per-sample gradients to round-off.
    torch.manual_seed(3)
    model = MLP(5, 3, width=6, depth=4, norm=norm).double().eval()
    data = _data()
    keys = ["pseudo_neuron_cosine_per_sample", "pseudo_neuron_cosine_probe_mean"]

    def measure(cache_bytes: int):
        fam = Diversity([*keys, "gradient_cosine_all"], gradients=True)
        monitor = Monitor(model, data, families=[fam], batch_size=7, cache_bytes=cache_bytes)
        calls, handle = _count_forwards(model)
        res = monitor.measure_now(step=0)["train"]
        handle.remove()
        return res, calls[0]

    shared, shared_calls = measure(1 << 30)
    own, own_calls = measure(0)
    assert (shared_calls, own_calls) == (3, 6)  # 18 samples in batches of 7: 3 batches
    for name in LINEARS:
        for key in keys:
            assert shared[name][key] == own[name][key], (name, key)
        grads = _per_sample_grads(model, data.x, data.y, name)
        per = [v for v in (_m4_loop(-LR * gr) for gr in grads) if not np.isnan(v)]
        assert shared[name][keys[0]] == pytest.approx(np.mean(per), abs=1e-12)
        probe_mean = _m4_loop(-LR * np.mean(grads, axis=0))
        assert shared[name][keys[1]] == pytest.approx(probe_mean, abs=1e-12)


def test_per_sample_gradients_linear_factors_equal_linear_factors():
    from collapselab.probe import per_sample_gradients

    torch.manual_seed(4)
    model = MLP(5, 3, width=6, depth=3, activation="leaky_relu").double()
    data = _data()
    ref = linear_factors(model, data.x, data.y)
    got = per_sample_gradients(
        model, data.x, data.y, model.feature_layers, linear_layers=torch.nn.Linear
    )
    assert list(got.linear_inputs) == list(ref.inputs)
    for name in ref.inputs:
        assert torch.equal(got.linear_inputs[name], ref.inputs[name])
        assert torch.equal(got.linear_pre_grads[name], ref.pre_grads[name])
    # the feature gradients are those of a call without the extra targets
    plain = per_sample_gradients(model, data.x, data.y, model.feature_layers)
    for name in model.feature_layers:
        assert torch.equal(got.gradients[name], plain.gradients[name])
    assert plain.linear_inputs == {} and plain.linear_pre_grads == {}
    with pytest.raises(ValueError, match=r"are not nn\.Linear"):
        per_sample_gradients(
            model, data.x, data.y, ["layers.0.act"], linear_layers=["layers.0.act"]
        )


def test_m4_own_pass_gives_float32_inputs_to_a_float64_model_as_the_sweep_does():
    # The family's own pass (no gradient sweep to share) casts the inputs to the model's
    # dtype like the sweep does (it used to hand float32 inputs to a float64 model).
    torch.manual_seed(5)
    model = MLP(5, 3, width=6, depth=3).double()
    data = _data()
    data32 = LabeledData(data.x.float(), data.y, 3)
    keys = ["pseudo_neuron_cosine_probe_mean"]
    own = Monitor(model, data32, families=[Diversity(keys)], batch_size=7)
    shared = Monitor(model, data32, families=[Diversity(keys, gradients=True)], batch_size=7)
    a, b = own.measure_now(step=0)["train"], shared.measure_now(step=0)["train"]
    names = [n for n, values in a.items() if keys[0] in values]
    assert names == ["layers.0.linear", "layers.1.linear", "classifier"]
    for name in names:
        assert a[name][keys[0]] == b[name][keys[0]]
