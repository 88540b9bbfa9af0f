"""The diversity family's layers of equal shape, done together, equal the layer-wise path.

The stacked path (``update_stacked``, ``stacked_mean_cosine_similarity``,
``column_cosine_means``, ``stacked_per_sample_pseudo_neuron_values``, and the family's
``update_signal`` / ``compute_layers`` / M4 on stacks) must give the same numbers as one layer
at a time, bit for bit: every kernel is row-wise, a row-by-row ``index_add_`` or a batched
product whose batches are the layer-wise products. References: the accumulators updated one
at a time; the public layer-wise functions; the base Family's layer-wise engine path; M4 from
``linear_factors`` with the layer-wise public functions. Random float64 data, unequal widths.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from torch import nn

from collapselab.data import LabeledData
from collapselab.families.builtin import Diversity
from collapselab.families.family import Family
from collapselab.metrics.diversity import (
    column_cosine_means,
    mean_cosine_similarity,
    per_sample_pseudo_neuron_values,
    pseudo_neuron_similarities,
    pseudo_neuron_similarity,
    stacked_mean_cosine_similarity,
    stacked_per_sample_pseudo_neuron_values,
)
from collapselab.probe import linear_factors
from collapselab.stats import CosineSimilarityAccumulator, scratch
from collapselab.stats.pairwise import stacked_sums, update_stacked
from collapselab.track import Monitor

C = 3


def _blocks(gen, n_layers, n, d, zero_rows=()):
    """Random float64 blocks ``(n, d)``, ReLU-like (non-negative, some exact zeros), with
    whole rows set to zero in the layers ``zero_rows``."""
    out = []
    for i in range(n_layers):
        b = torch.randn(n, d, generator=gen, dtype=torch.float64).clamp_min(-0.3)
        if i in zero_rows:
            b[::3] = 0.0
        out.append(b)
    return out


def _same_similarity(a, b):
    assert (a.n_zero, a.n_excluded) == (b.n_zero, b.n_excluded)
    for field in ("cross_class", "within_class", "within_class_pooled", "all_pairs"):
        x, y = getattr(a, field), getattr(b, field)
        assert x == y or (np.isnan(x) and np.isnan(y)), field
    np.testing.assert_array_equal(a.per_class, b.per_class)
    np.testing.assert_array_equal(a.counts, b.counts)


@pytest.mark.parametrize("zero_atol", [0.0, 0.5])
def test_update_stacked_equals_one_accumulator_at_a_time(zero_atol):
    gen = torch.Generator().manual_seed(0)
    n_layers, d = 4, 7
    stacked = [CosineSimilarityAccumulator(C, zero_atol) for _ in range(n_layers)]
    single = [CosineSimilarityAccumulator(C, zero_atol) for _ in range(n_layers)]
    for n in (9, 5, 1):  # batches of several sizes, one with a single row
        blocks = _blocks(gen, n_layers, n, d, zero_rows=(1, 3))
        y = torch.randint(0, C, (n,), generator=gen)
        update_stacked(stacked, blocks, y)
        for acc, b in zip(single, blocks, strict=True):
            acc.update(b, y)
    sums = stacked_sums(stacked)
    assert sums is not None and sums["unit_sums"].shape == (n_layers, C, d)
    for a, b in zip(stacked, single, strict=True):
        assert a.state().keys() == b.state().keys()
        for key in a.state():
            assert torch.equal(a.state()[key], b.state()[key]), key
    assert int(stacked[1].state()["n_zero"].sum()) > 0  # the zero-row path was taken
    for rule in ("exclude", "zero_cosine"):
        together = stacked_mean_cosine_similarity(sums, "", rule)
        for got, acc in zip(together, single, strict=True):
            _same_similarity(got, mean_cosine_similarity(acc, rule))


def test_update_stacked_of_gates_and_float32_blocks():
    # Bool gates and float32 features are converted to float64 as the layer-wise update does.
    gen = torch.Generator().manual_seed(1)
    y = torch.randint(0, C, (8,), generator=gen)
    for blocks in (
        [torch.rand(8, 6, generator=gen) > 0.5 for _ in range(3)],
        [torch.randn(8, 6, generator=gen) for _ in range(3)],
    ):
        stacked = [CosineSimilarityAccumulator(C) for _ in blocks]
        update_stacked(stacked, blocks, y)
        for acc, b in zip(stacked, blocks, strict=True):
            ref = CosineSimilarityAccumulator(C).update(b, y)
            for key in ref.state():
                assert torch.equal(acc.state()[key], ref.state()[key])


def test_update_stacked_falls_back_to_one_at_a_time():
    gen = torch.Generator().manual_seed(2)
    y = torch.randint(0, C, (6,), generator=gen)
    # unequal widths: each accumulator on its own, no stack
    accs = [CosineSimilarityAccumulator(C) for _ in range(2)]
    blocks = [torch.randn(6, 4, generator=gen), torch.randn(6, 5, generator=gen)]
    update_stacked(accs, blocks, y)
    assert stacked_sums(accs) is None
    for acc, b in zip(accs, blocks, strict=True):
        ref = CosineSimilarityAccumulator(C).update(b, y)
        assert torch.equal(acc.state()["unit_sums"], ref.state()["unit_sums"])
    # a NaN: the layer-wise update's error
    accs = [CosineSimilarityAccumulator(C) for _ in range(2)]
    bad = [torch.randn(6, 4, generator=gen), torch.full((6, 4), float("nan"))]
    with pytest.raises(ValueError, match="vectors contains NaN or Inf"):
        update_stacked(accs, bad, y)
    # a stack member merged into (in place) stays a stack member; a merge into an empty
    # member gives it sums of its own, and the next updates go one at a time, correctly
    accs = [CosineSimilarityAccumulator(C) for _ in range(3)]
    blocks = _blocks(gen, 3, 6, 4)
    update_stacked(accs, blocks, y)
    other = CosineSimilarityAccumulator(C).update(blocks[0], y)
    accs[0].merge(other)
    assert stacked_sums(accs) is not None
    assert torch.equal(accs[0].state()["sq_norms"], 2 * other.state()["sq_norms"])
    fresh = [CosineSimilarityAccumulator(C) for _ in range(2)]
    update_stacked(fresh, blocks[:2], y)
    lone = CosineSimilarityAccumulator(C)
    lone.merge(fresh[0])
    mixed = [lone, fresh[1]]
    assert stacked_sums(mixed) is None
    update_stacked(mixed, blocks[:2], y)
    ref = CosineSimilarityAccumulator(C).update(blocks[0], y).update(blocks[0], y)
    assert torch.equal(lone.state()["unit_sums"], ref.state()["unit_sums"])


def test_stacked_m4_functions_equal_the_layer_wise_ones():
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(4, 6, 5, generator=gen, dtype=torch.float64)
    w[1, :, 2] = 0.0  # a zero column
    w[2, :, :4] = 0.0  # one counted column only: NaN under "exclude"
    for rule in ("exclude", "zero_cosine"):
        got = column_cosine_means(w, rule)
        ref = [pseudo_neuron_similarity(m, rule) for m in w]
        assert len(got) == 4
        for x, r in zip(got, ref, strict=True):
            assert x == r or (np.isnan(x) and np.isnan(r))
        assert np.isnan(got[2]) == (rule == "exclude")
    g = torch.randn(3, 9, 6, generator=gen, dtype=torch.float64)
    a = torch.randn(3, 9, 5, generator=gen, dtype=torch.float64).clamp_min(0.0)
    g[0, 2] = 0.0  # a zero gradient: no column counted
    for rule in ("exclude", "zero_cosine"):
        got = stacked_per_sample_pseudo_neuron_values(g, a, rule)
        for i in range(3):
            ref = per_sample_pseudo_neuron_values(g[i], a[i], rule)
            assert torch.equal(torch.isnan(got[i]), torch.isnan(ref))
            assert torch.equal(got[i][~torch.isnan(ref)], ref[~torch.isnan(ref)])


def test_pseudo_neuron_similarities_of_named_changes_equal_one_at_a_time():
    gen = torch.Generator().manual_seed(4)
    changes = {
        "a": torch.randn(6, 5, generator=gen),  # float32, as a recorder's update
        "b": torch.randn(4, 6, generator=gen),
        "c": torch.randn(6, 5, generator=gen),
        "d": torch.randn(6, 5, generator=gen, dtype=torch.float64),  # float64 among float32s
        "e": torch.randn(6, 5, generator=gen),
    }
    changes["c"][:, 1] = 0.0
    for rule in ("exclude", "zero_cosine"):
        got = pseudo_neuron_similarities(changes, rule)
        assert list(got) == list(changes)
        for name, w in changes.items():
            assert got[name] == pseudo_neuron_similarity(w, rule), name
    bad = dict(changes, c=torch.full((6, 5), float("inf")))
    with pytest.raises(ValueError, match=r"delta_w contains NaN or Inf \(30 of 30 entries\)"):
        pseudo_neuron_similarities(bad)
    with pytest.raises(ValueError, match="delta_w"):
        pseudo_neuron_similarities({"x": torch.ones(3)})


class _Uneven(nn.Module):
    """Linear layers 5→6, 6→6, 6→6, 6→4, 4→6 and a classifier 6→3, each hidden one followed
    by a ReLU: hidden widths 6, 6, 6, 4, 6 and two linear layers of equal shape."""

    def __init__(self) -> None:
        super().__init__()
        dims = [5, 6, 6, 6, 4, 6]
        self.lin = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        self.act = nn.ModuleList(nn.ReLU() for _ in dims[1:])
        self.classifier = nn.Linear(dims[-1], C)

    def forward(self, x):
        for lin, act in zip(self.lin, self.act, strict=True):
            x = act(lin(x))
        return self.classifier(x)


class _LayerWise(Diversity):
    """The family on the engine's layer-wise path (the base Family's defaults)."""

    update_signal = Family.update_signal
    compute_layers = Family.compute_layers


_LINEARS = ["lin.0", "lin.1", "lin.2", "lin.3", "lin.4", "classifier"]


def _m4_reference(model, data, batch_size, lr_names):
    """Per-sample and probe-mean M4 of every linear layer, one layer at a time, from
    ``linear_factors`` of each batch."""
    sums = {n: [0.0, 0] for n in lr_names}
    means: dict[str, torch.Tensor] = {}
    # the Monitor's batches (a slice of data.x at another offset may round differently)
    for x, y in data.loader(batch_size=batch_size, shuffle=False):
        cap = linear_factors(model, x, y, lr_names)
        for n in lr_names:
            g, a = cap.pre_grads[n].double(), cap.inputs[n].double()
            vals = per_sample_pseudo_neuron_values(g, a)
            ok = ~torch.isnan(vals)
            sums[n][0] += float(vals[ok].sum())
            sums[n][1] += int(ok.sum())
            # into a given output, as the family does (matmul with out= and without may
            # round differently)
            product = torch.empty(g.shape[1], a.shape[1], dtype=torch.float64)
            torch.matmul(g.T, a, out=product)
            means[n] = product if n not in means else means[n].add_(product)
    return {
        n: {
            "pseudo_neuron_cosine_per_sample": sums[n][0] / sums[n][1],
            "pseudo_neuron_cosine_probe_mean": pseudo_neuron_similarity(means[n].div_(len(data.y))),
        }
        for n in lr_names
    }


def test_in_stacks_splits_by_bytes(monkeypatch):
    monkeypatch.setattr(scratch, "STACK_BYTES", 100)
    assert scratch.in_stacks(list("abcde"), 40) == [["a", "b"], ["c", "d"], ["e"]]
    assert scratch.in_stacks(list("abc"), 1000) == [["a"], ["b"], ["c"]]
    assert scratch.in_stacks([], 10) == []


def test_stacks_by_groups_by_key_in_order_of_first_appearance(monkeypatch):
    monkeypatch.setattr(scratch, "STACK_BYTES", 100)
    items = [("a", 3), ("b", 5), ("c", 3), ("d", 3), ("e", 5), ("f", 3)]
    stacks = scratch.stacks_by(items, key=lambda item: item[1], item_bytes=lambda k: 10 * k)
    # width 3: 30 bytes, three per stack; width 5: 50 bytes, two per stack
    assert [[name for name, _ in stack] for stack in stacks] == [
        ["a", "c", "d"],
        ["f"],
        ["b", "e"],
    ]
    assert scratch.stacks_by([], key=len, item_bytes=lambda k: 1) == []


@pytest.mark.parametrize(
    ("agreement", "stack_bytes"),
    [(False, None), (True, None), (False, 700)],
    ids=["cosines", "with_agreement", "stacks_of_two"],
)
def test_monitor_values_equal_the_layer_wise_path(agreement, stack_bytes, monkeypatch):
    if stack_bytes is not None:  # 7-row blocks of width 6: two layers per stack
        monkeypatch.setattr(scratch, "STACK_BYTES", stack_bytes)
    torch.manual_seed(0)
    model = _Uneven().double()
    gen = torch.Generator().manual_seed(5)
    y = torch.arange(C).repeat_interleave(6)
    x = torch.randn(C, 5, generator=gen, dtype=torch.float64)[y] * 2.0
    data = LabeledData(x + torch.randn(len(y), 5, generator=gen, dtype=torch.float64), y, C)
    layers = [f"act.{i}" for i in range(5)]
    keys = [
        f"{p}_{s}"
        for p in ("feature_cosine", "gating_cosine", "gradient_cosine", "preact_gradient_cosine")
        for s in ("cross_class", "within_class", "within_class_pooled", "all")
    ] + ["feature_zero_vectors"]
    if agreement:
        keys.append("gating_agreement_all")
    m4 = ["pseudo_neuron_cosine_per_sample", "pseudo_neuron_cosine_probe_mean"]

    def measure(family):
        monitor = Monitor(model, data, families=[family], layers=layers, batch_size=7)
        return monitor.measure_now(step=0)["train"]

    got = measure(Diversity([*keys, *m4], gradients=True))
    ref = measure(_LayerWise(keys, gradients=True))
    for layer in layers:
        assert set(got[layer]) == set(ref[layer]) == set(keys)
        for key, value in ref[layer].items():
            assert got[layer][key] == value or (np.isnan(value) and np.isnan(got[layer][key]))
    m4_ref = _m4_reference(model, data, 7, _LINEARS)
    for name in _LINEARS:
        for key in m4:
            assert got[name][key] == m4_ref[name][key], (name, key)
