"""The Monitor against collapselab.measure (and the family functions) on hand-extracted features."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from collapselab.data.dataset import LabeledData
from collapselab.families import MSE, NC, PFC, Diversity, measure
from collapselab.metrics.diversity import (
    feature_cosine_similarity,
    gating_similarity,
    gradient_cosine_similarity,
)
from collapselab.metrics.layerwise import (
    effective_depth,
    mean_displacements,
    ot_regulariser,
    relative_positions,
    straightness,
)
from collapselab.models import MLP, ConvResNet, FCResNet
from collapselab.probe import FeatureCapture, eval_mode, per_sample_gradients
from collapselab.store import Run
from collapselab.track import Monitor

REL = 1e-10


def blobs(seed: int, n_per_class: int, n_test: int, shape: tuple[int, ...], C: int = 3):
    g = torch.Generator().manual_seed(seed)
    centres = 1.5 * torch.randn(C, *shape, generator=g, dtype=torch.float64)

    def draw(n):
        y = torch.arange(C).repeat_interleave(n)
        y = y[torch.randperm(len(y), generator=g)]
        x = centres[y] + torch.randn(len(y), *shape, generator=g, dtype=torch.float64)
        return LabeledData(x.float(), y, C)

    return draw(n_per_class), draw(n_test)


def warm_batchnorm(model: nn.Module, x: torch.Tensor) -> None:
    """A few train-mode passes so that the BatchNorm running statistics are not trivial."""
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(x)


def extract(model, layers, data, where="output"):
    """Explicit forward over the whole set in eval mode; one (N, D) matrix per layer."""
    with eval_mode(model), FeatureCapture(model, layers, where) as cap, torch.no_grad():
        model(data.x.to(torch.float64))
        return {n: t.clone() for n, t in cap.features.items()}


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))


def assert_matches_measure(model, monitor, train, test, lam=None, dense_max_dim=2048):
    results = monitor.measure_now(epoch=1)
    H = extract(model, monitor.layers, train)
    Ht = extract(model, monitor.layers, test)
    W = model.classifier.weight.detach()
    b = model.classifier.bias.detach()
    checked = 0
    for layer in monitor.layers:
        pen = layer == model.penultimate
        ref = measure(
            H[layer],
            train.y,
            W if pen else None,
            b if pen else None,
            lam if pen else None,
            test_features=Ht[layer],
            test_labels=test.y,
            dense_max_dim=dense_max_dim,
        )
        for key, value in ref.items():
            split, name = ("test", key[5:]) if key.startswith("test_") else ("train", key)
            got = results[split][layer][name]
            assert close(got, value), (layer, key, got, value)
            checked += 1
        nc_keys = {k for k in results["train"][layer] if k.startswith(("nc", "mse", "accuracy"))}
        assert nc_keys == {k for k in ref if not k.startswith("test_")}, layer
    return results, checked


def test_fc_resnet_every_layer_equals_measure_with_classifier_and_mse():
    torch.manual_seed(0)
    train, test = blobs(0, 20, 8, (6,))
    model = FCResNet(6, 8, 3, 3).double()
    warm_batchnorm(model, train.x.double())
    lam = 2.5e-3
    monitor = Monitor(model, train, test, families=["nc", MSE(lam=lam)], batch_size=7)
    assert monitor.layers == ["stem", "blocks.0", "blocks.1", "blocks.2"]
    results, checked = assert_matches_measure(model, monitor, train, test, lam=lam)
    assert checked >= 100
    pen = results["train"]["blocks.2"]
    assert {"nc1_snr", "mse_ls_perp", "nc3_self_duality", "accuracy"} <= set(pen)
    assert "accuracy" not in results["train"]["blocks.0"]  # W belongs to the penultimate layer
    # Model-level accuracy of the outputs equals the classifier accuracy on blocks.2.
    assert results["train"][""]["accuracy"] == pytest.approx(pen["accuracy"], abs=0)
    assert model.training  # flags restored


def test_conv_resnet_dense_and_projected_layers_equal_measure():
    torch.manual_seed(1)
    train, test = blobs(1, 20, 6, (2, 6, 6))
    model = ConvResNet(2, 3, [(3, 2, 1), (4, 2, 2)]).double()
    warm_batchnorm(model, train.x.double())
    monitor = Monitor(model, train, test, families=["nc", "pfc"], dense_max_dim=50, batch_size=16)
    assert monitor.layers == [*model.feature_layers, "flatten"]
    results, _ = assert_matches_measure(model, monitor, train, test, dense_max_dim=50)
    assert results["train"]["stem"]["nc1_dense"] == 0.0  # D = 108 > 50: projected
    assert results["train"]["stages.1.blocks.0"]["nc1_dense"] == 1.0  # D = 36
    # 'auto' path: the last run of equal-dimension layers, i.e. the last stage.
    assert monitor.path_layers == model.stage_layers(-1)


def test_batch_size_invariance():
    torch.manual_seed(2)
    train, test = blobs(2, 15, 6, (5,))
    model = MLP(5, 3, width=6, depth=4, bias=True).double()
    kwargs = {"families": ["nc", "pfc", Diversity(gradients=True)]}
    a = Monitor(model, train, test, batch_size=4, **kwargs).measure_now()
    b = Monitor(model, train, test, batch_size=45, **kwargs).measure_now()
    count = 0
    for split in a:
        for layer in a[split]:
            assert set(a[split][layer]) == set(b[split][layer])
            for k, v in a[split][layer].items():
                w = b[split][layer][k]
                assert math.isclose(v, w, rel_tol=1e-12, abs_tol=1e-14) or (
                    math.isnan(v) and math.isnan(w)
                ), (split, layer, k)
                count += 1
    assert count > 200


def test_pfc_path_metrics_equal_layerwise_functions():
    torch.manual_seed(3)
    train, test = blobs(3, 20, 6, (6,))
    model = FCResNet(6, 8, 4, 3, block="linear_relu").double()
    monitor = Monitor(model, train, test, families=[PFC(effective_depth_eps=0.2)], batch_size=11)
    res = monitor.measure_now()
    layers = model.feature_layers
    assert monitor.path_layers == layers
    for data, split in ((train, "train"), (test, "test")):
        H = extract(model, layers, data)
        hs = [H[n] for n in layers]
        pos = relative_positions(hs)
        steps = mean_displacements(hs)
        for i, name in enumerate(layers):
            assert close(res[split][name]["pfc_position"], float(pos[i]))
            if i:
                assert close(res[split][name]["mean_displacement"], float(steps[i - 1]))
            # Without the 'nc' family, PFC1-3 still come per layer.
            assert set(res[split][name]) >= {"nc1_trace_ratio", "nc2_etf_distance", "ncc_accuracy"}
            assert "nc1" not in res[split][name]
        assert close(res[split][""]["ot_regulariser"], ot_regulariser(hs))
        s = straightness(hs)
        assert close(res[split][""]["straightness"], float(np.mean(s[np.isfinite(s)])))
    H = extract(model, layers, train)
    depth = effective_depth([H[n] for n in layers], train.y, eps=0.2)
    got = res["train"][""]["effective_depth"]
    assert (depth is None and math.isnan(got)) or got == depth
    assert "effective_depth" not in res["test"][""]


def test_diversity_family_equals_metric_functions():
    torch.manual_seed(4)
    train, _ = blobs(4, 12, 5, (5,))
    model = MLP(5, 3, width=7, depth=4).double()
    monitor = Monitor(
        model, train, None, families=[Diversity(gradients=True)], batch_size=8, loss="mse"
    )
    res = monitor.measure_now()["train"]
    layers = model.feature_layers
    H = extract(model, layers, train)
    Z = extract(model, layers, train, where="input")
    mse = lambda z, t: (z - nn.functional.one_hot(t, 3).to(z.dtype)).pow(2).mean(1)  # noqa: E731
    g = per_sample_gradients(model, train.x.double(), train.y, layers, loss_fn=mse)
    for n in layers:
        expected = feature_cosine_similarity(H[n], train.y).as_dict("feature_cosine")
        expected |= gating_similarity(Z[n] > 0, train.y).as_dict("gating_cosine")
        expected |= gating_similarity(Z[n] > 0, train.y, measure="agreement").as_dict(
            "gating_agreement"
        )
        expected |= gradient_cosine_similarity(g.gradients[n], train.y).as_dict("gradient_cosine")
        expected |= gradient_cosine_similarity(g.preact_gradients[n], train.y).as_dict(
            "preact_gradient_cosine"
        )
        for k, v in expected.items():
            assert close(res[n][k], v), (n, k)
        assert res[n]["feature_zero_vectors"] == float((H[n].norm(dim=1) == 0).sum())
    assert set(res[""]) == {"accuracy"}


def test_eval_mode_is_used_and_training_flags_and_running_stats_survive():
    torch.manual_seed(5)
    train, _ = blobs(5, 10, 2, (4,))
    model = MLP(4, 3, width=5, depth=3, norm="batchnorm").double()
    warm_batchnorm(model, train.x.double())
    model.layers[1].norm.eval()  # mixed flags
    flags = {n: m.training for n, m in model.named_modules()}
    running = model.layers[0].norm.running_mean.clone()
    res = Monitor(model, train, families=["nc"]).measure_now()
    assert {n: m.training for n, m in model.named_modules()} == flags
    assert torch.equal(model.layers[0].norm.running_mean, running)
    # The values are those of the eval-mode features.
    H = extract(model, ["layers.1.act"], train)["layers.1.act"]
    assert close(res["train"]["layers.1.act"]["nc1"], measure(H, train.y)["nc1"])


def test_pattern_addressing_and_no_classifier_keys_without_penultimate():
    torch.manual_seed(6)
    train, _ = blobs(6, 10, 2, (6,))
    model = FCResNet(6, 8, 3, 3).double()
    monitor = Monitor(model, train, layers=re.compile(r"blocks\.[01]"), families=["nc"])
    assert monitor.layers == ["blocks.0", "blocks.1"]
    res = monitor.measure_now()
    assert "accuracy" not in res["train"]["blocks.1"]
    assert set(res["train"]) == {"blocks.0", "blocks.1", ""}
    monitor = Monitor(model, train, layers=nn.ReLU, families=["nc"])
    assert monitor.layers == [f"blocks.{i}.act{j}" for i in range(3) for j in (1, 2)]


def test_rows_are_written_in_long_format(tmp_path):
    torch.manual_seed(7)
    train, test = blobs(7, 10, 4, (4,))
    model = MLP(4, 3, width=5, depth=3).double()
    run = Run.create(tmp_path, "monitor-test")
    monitor = Monitor(model, train, test, run=run, schedule=[2], epochs=None)
    assert monitor.before_training() is not None
    assert monitor.after_epoch(1, step=10) is None  # not scheduled
    res = monitor.after_epoch(2, step=20)
    run.flush()
    rows = run.metrics()
    assert set(rows["epoch"]) == {0, 2} and set(rows["step"]) == {0, 20}
    last = rows[rows["epoch"] == 2]
    n_values = sum(len(v) for per_layer in res.values() for v in per_layer.values())
    assert len(last) == n_values
    row = last[(last.split == "test") & (last.layer == "layers.1.act") & (last.metric == "nc1")]
    assert row["value"].item() == res["test"]["layers.1.act"]["nc1"]
    assert run.manifest["durations"]["monitor_seconds"] > 0


def test_zero_error_epoch_on_a_separable_problem(tmp_path):
    torch.manual_seed(9)
    g = torch.Generator().manual_seed(9)
    y = torch.arange(3).repeat_interleave(20)
    centres = torch.tensor([[4.0, 0.0], [-2.0, 3.5], [-2.0, -3.5]])
    x = centres[y] + 0.6 * torch.randn(60, 2, generator=g)
    data = LabeledData(x, y, 3)
    model = MLP(2, 3, width=16, depth=3, bias=True, gamma=0.05)
    run = Run.create(tmp_path, "zero-error")
    odd = list(range(1, 21, 2))
    monitor = Monitor(model, data, run=run, schedule=odd, families=["nc"])
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    monitor.before_training()
    all_correct = {}
    step = 0
    for epoch in range(1, 21):
        for idx in torch.randperm(60, generator=g).split(10):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
            step += 1
        with torch.no_grad():
            all_correct[epoch] = bool((model(x).argmax(1) == y).all())
        monitor.after_epoch(epoch, step=step)
    first = next(e for e in all_correct if all_correct[e])
    expected = next(e for e in odd if all_correct[e])
    assert 1 < first < expected  # the first *measured* zero-error epoch is recorded
    assert monitor.zero_error_epoch == expected
    assert run.manifest["zero_error_epoch"] == expected
    run.flush()
    rows = run.metrics()
    zero = rows[rows.metric == "zero_error_epoch"]
    assert len(zero) == 1 and zero["value"].item() == expected and zero["epoch"].item() == expected


def test_degenerate_layer_is_skipped_with_a_warning():
    train, _ = blobs(9, 6, 2, (3,))
    model = MLP(3, 3, width=4, depth=3).double()
    with torch.no_grad():
        model.layers[0].linear.weight.fill_(-1.0)  # dead ReLU layer: all features zero
        train.x.abs_()
    monitor = Monitor(model, train, families=["nc", "diversity"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = monitor.measure_now()
    messages = [str(w.message) for w in caught]
    # Both hidden layers are zero (the second sees only zeros): each warns once.
    assert len(messages) == 2
    assert "layer 'layers.0.act', family 'nc' skipped: zero between-class scatter" in messages[0]
    assert "layer 'layers.1.act', family 'nc' skipped" in messages[1]
    assert not any(k.startswith("nc") for k in res["train"]["layers.0.act"])
    assert res["train"]["layers.0.act"]["feature_zero_vectors"] == 18.0


def test_bad_arguments():
    train, _ = blobs(10, 4, 2, (3,))
    model = MLP(3, 3, width=4, depth=3).double()
    with pytest.raises(ValueError, match="unknown metric family 'ncx'"):
        Monitor(model, train, families=["ncx"])
    with pytest.raises(ValueError, match="needs lam"):
        Monitor(model, train, families=["mse"])
    with pytest.raises(ValueError, match="gradients must be a bool"):
        Monitor(model, train, families=[Diversity(gradients="yes")])
    for kwargs, message in [
        ({"families": lambda: [MSE(lam=-1.0)]}, "lam must be"),
        ({"families": lambda: [NC(pairs="some")]}, "pairs must be"),
        ({"families": lambda: [Diversity(zero_vectors="drop")]}, "zero_vectors must be"),
        ({"families": lambda: [NC(ddof=-1)]}, "ddof must be"),
        ({"chunk_bytes": -5}, "chunk_bytes must be"),
        ({"distributed": True}, "distributed must be"),
        ({"loss": "hinge", "families": lambda: [Diversity(gradients=True)]}, "loss must be"),
        ({"schedule": [0, 2]}, "each scheduled epoch"),
    ]:
        with pytest.raises(ValueError, match=message):
            Monitor(model, train, **{k: v() if callable(v) else v for k, v in kwargs.items()})
    lazy = Monitor(model, train, schedule="log")  # the budget may come later
    assert lazy.before_training() is not None
    with pytest.raises(ValueError, match="pass epochs="):
        lazy.after_epoch(3)
    lazy.set_total_epochs(350)
    assert lazy.after_epoch(15) is None and lazy.after_epoch(16) is not None
    with pytest.raises(TypeError, match="one-shot iterator"):
        Monitor(model, iter([(train.x, train.y)]))
    with pytest.raises(ValueError, match="no feature_layers"):
        Monitor(nn.Sequential(nn.Linear(3, 3)), train)
    with pytest.raises(ValueError, match="n_classes is required"):
        Monitor(nn.Sequential(nn.Linear(3, 3)), train, layers="0")
    with pytest.raises(TypeError, match=r"\(inputs, labels\) pair"):
        Monitor(model, [train.x]).measure_now()
    with pytest.raises(ValueError, match="classifier weight has shape"):
        Monitor(model, train, penultimate="flatten", layers="flatten").measure_now()
    m = ConvResNet(2, 3, [(3, 1, 1), (4, 1, 2)]).double()
    data, _ = blobs(11, 4, 2, (2, 4, 4))
    with pytest.raises(ValueError, match="share one feature dimension"):
        Monitor(
            m, data, families=["nc", PFC(path_layers=["stem", "stages.1.transition"])]
        ).measure_now()
    with pytest.warns(UserWarning, match="no two consecutive measured layers"):
        Monitor(m, data, layers=["stem", "flatten"]).measure_now()
    twice = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3)).double()
    twice.forward = lambda x: twice[2](twice[2](twice[1](twice[0](x))))
    with pytest.raises(RuntimeError, match="called twice"):
        Monitor(twice, train, layers="2", n_classes=3).measure_now()
    skip = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3)).double()
    skip.forward = lambda x: skip[2](skip[0](x))
    with pytest.raises(ValueError, match=r"\['1'\] were not called"):
        Monitor(skip, train, layers=["0", "1"], n_classes=3).measure_now()
    with pytest.raises(ValueError, match="the model must return logits"):
        Monitor(model, train, n_classes=4, layers="layers.0.act").measure_now()


def test_imbalanced_classes_use_sample_weights_and_warn_once():
    torch.manual_seed(12)
    g = torch.Generator().manual_seed(12)
    y = torch.tensor([0] * 9 + [1] * 14 + [2] * 6)
    x = 2.0 * torch.randn(3, 4, generator=g)[y] + torch.randn(len(y), 4, generator=g)
    data = LabeledData(x, y, 3)
    model = MLP(4, 3, width=5, depth=3).double()
    monitor = Monitor(model, data, families=["nc"], batch_size=8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = monitor.measure_now()
        monitor.measure_now()
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "imbalanced classes" in messages[0]
    assert "sample-weighted" in messages[0]
    H = extract(model, monitor.layers, data)
    W, b = model.classifier.weight.detach(), model.classifier.bias
    for layer in monitor.layers:
        pen = layer == model.penultimate
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = measure(H[layer], y, W if pen else None, None)
        assert b is None
        for key, value in ref.items():
            assert close(res["train"][layer][key], value), (layer, key)
    balanced = Monitor(model, data, families=["nc"], weighting="balanced", batch_size=8)
    with pytest.warns(UserWarning, match="'balanced'-weighted variants as requested"):
        other = balanced.measure_now()
    assert other["train"]["layers.1.act"]["nc1"] != res["train"]["layers.1.act"]["nc1"]


class _CountForwards:
    """Counts the model's forward passes (a forward pre-hook on the root module)."""

    def __init__(self, model: nn.Module) -> None:
        self.n = 0
        self.handle = model.register_forward_pre_hook(self._count)

    def _count(self, module, args):
        self.n += 1


def _flat(results):
    return {
        (s, layer, k): v for s, r in results.items() for layer, m in r.items() for k, v in m.items()
    }


def test_feature_cache_saves_the_second_forward_pass_and_changes_nothing():
    torch.manual_seed(4)
    train, test = blobs(4, 16, 6, (2, 6, 6))
    model = ConvResNet(2, 3, [(3, 2, 1), (4, 2, 2)]).double()
    warm_batchnorm(model, train.x.double())
    counter = _CountForwards(model)
    batches = {"train": math.ceil(48 / 10), "test": math.ceil(18 / 10)}
    per_sweep = batches["train"] + batches["test"]
    kwargs = {"families": ["nc", "pfc", "diversity"], "batch_size": 10, "dense_max_dim": 50}
    mon = Monitor(model, train, test, **kwargs)
    cached = mon.measure_now()
    assert counter.n == per_sweep  # one forward per batch
    counter.n = 0
    twice = Monitor(model, train, test, cache_bytes=0, **kwargs).measure_now()
    assert counter.n == 2 * per_sweep
    counter.n = 0
    # A budget below the first split's features: dropped mid-pass, second forward pass.
    over = Monitor(model, train, test, cache_bytes=20_000, **kwargs).measure_now()
    assert counter.n == 2 * per_sweep
    a, b, c = _flat(cached), _flat(twice), _flat(over)
    assert a.keys() == b.keys() == c.keys() and len(a) > 150
    for key, v in b.items():
        for w in (a[key], c[key]):
            assert w == v or (math.isnan(v) and math.isnan(w)), key
    # The same with pass 1 taking per-sample gradients (features from autograd).
    counter.n = 0
    grads = {**kwargs, "families": ["nc", "pfc", Diversity(gradients=True)]}
    cached = _flat(Monitor(model, train, test, **grads).measure_now())
    assert counter.n == per_sweep
    twice = _flat(Monitor(model, train, test, cache_bytes=0, **grads).measure_now())
    assert cached.keys() == twice.keys() and any("gradient_cosine" in k[2] for k in cached)
    for key, v in twice.items():
        assert cached[key] == v or (math.isnan(v) and math.isnan(cached[key])), key
    counter.handle.remove()


class _InPlaceAfter(nn.Module):
    """A measured linear layer whose output the next module overwrites in place."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(5, 6)
        self.act = nn.ReLU(inplace=True)
        self.classifier = nn.Linear(6, 3)

    def forward(self, x):
        return self.classifier(self.act(self.hidden(x)))


def test_feature_cache_detects_outputs_modified_in_place():
    torch.manual_seed(5)
    train, _ = blobs(5, 12, 3, (5,))
    model = _InPlaceAfter().double()
    kwargs = {"layers": ["hidden"], "families": ["nc"], "batch_size": 9, "n_classes": 3}
    counter = _CountForwards(model)
    mon = Monitor(model, train, **kwargs)
    first = mon.measure_now()
    assert counter.n == 2 * 4  # the kept outputs were overwritten: second forward pass
    assert mon._cache_copies
    counter.n = 0
    second = mon.measure_now()
    assert counter.n == 4  # later sweeps keep copies
    with torch.no_grad():
        hidden = model.hidden(train.x.double())
    assert hidden.min() < 0  # the in-place ReLU would have changed the kept values
    ref = measure(hidden, train.y)
    for results in (first, second):
        got = results["train"]["hidden"]
        for key, value in ref.items():
            assert close(got[key], value), key
    counter.handle.remove()


def test_feature_cache_budget_counts_what_it_keeps_alive():
    from collapselab.track._cache import FeatureCache

    base = torch.zeros(100, 10)  # 4000 bytes of float32 storage
    cache = FeatureCache(1000)
    cache.start_batch(torch.zeros(2, dtype=torch.int64))
    cache.add("a", base[:20])  # 800 bytes, but a view keeps all 4000 alive
    assert not cache.active and cache.batches == []
    copies = FeatureCache(1000, copy=True)  # a copy keeps only its own 800 bytes
    copies.start_batch(torch.zeros(2, dtype=torch.int64))
    copies.add("a", base[:20])
    assert copies.active and copies.nbytes == 800
    copies.add("b", base[:20])  # 1600 > 1000: over budget, everything dropped
    assert not copies.active and copies.nbytes == 0


def test_a_run_given_as_a_path_is_refused_before_anything_is_measured(tmp_path):
    train, _ = blobs(10, 4, 2, (3,))
    model = MLP(3, 3, width=4, depth=3).double()
    with pytest.raises(TypeError, match=r"run must be a collapselab.store.Run or None, got str"):
        Monitor(model, train, run=str(tmp_path / "runs" / "x"))
    assert not (tmp_path / "runs").exists()
