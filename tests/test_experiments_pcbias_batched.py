"""Paper 002's ensembles trained batched (``batched=True``, the default) against one by one:
the deep linear nets (float64) bit for bit, the MLPs (float32) to the rounding measured here
(none on the CPU with one thread, as the experiments train), and whole tiny runs with the
same metric rows, claim verdicts and member records."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from collapselab._threads import serial_threads
from collapselab.experiments import get_experiment
from collapselab.experiments.pcbias._common import train_networks
from collapselab.experiments.pcbias.linear_sgd import (
    LinearSGDMember,
    linear_sgd_batch,
    linear_sgd_member,
)
from collapselab.experiments.pcbias.projections import MLPMember, _sgd_alone, _sgd_batched
from collapselab.experiments.pcbias.training import (
    GDMember,
    deep_linear_batch,
    deep_linear_member,
)
from collapselab.experiments.runner import run_experiment
from collapselab.experiments.sweeps.batched import chunk_task
from collapselab.store import Run

MLP_BOUND = 1e-6
"""Largest float32 gap allowed between a batched and a lone MLP's weights after the tiny
preset's 4 epochs, relative to the weights' largest entry. Measured with one thread: 0
(bit-identical) for 2 or 3 members, 2.4e-7 for 8 members (from 4 members on, the output
bias gradient, a batch sum over a strided layout, is reduced in another order: 1e-8).
Over long runs plain SGD amplifies such rounding like any perturbation: 5e-3 after one
epoch of 600 steps of 196-256-256-256-10 MLPs (benchmarks/README.md), so long runs agree
in their accuracies and claims, not bit for bit."""


def _gd_members(size: int, **fields) -> list[GDMember]:
    preset = get_experiment("pcbias-scales").presets["tiny"]
    member = GDMember.of(preset, init=preset.init, scale_layers=preset.scale_layers, **fields)
    return member.ensemble(size)


def test_batched_deep_linear_gd_is_bit_for_bit_the_lone_gd():
    members = _gd_members(3, record_correct=True)
    with serial_threads():
        batch = deep_linear_batch(members)
        alone = [deep_linear_member(m) for m in members]
    for b, a in zip(batch, alone, strict=True):
        assert b is not None and list(b) == list(a)
        for key in a:
            assert np.array_equal(np.asarray(b[key]), np.asarray(a[key])), key
    gap = max(
        float(np.max(np.abs(b["w_pc"] - a["w_pc"]))) for b, a in zip(batch, alone, strict=True)
    )
    assert gap <= 1e-10


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_diverging_deep_linear_member_is_left_to_the_lone_training():
    members = _gd_members(2, lr=1e4)
    with serial_threads():
        assert deep_linear_batch(members) == [None, None]
        with pytest.raises(FloatingPointError, match="diverged"):
            deep_linear_member(members[0])
        out = chunk_task(train_networks, {"members": [{"network": m} for m in members]})
    assert out == {"failed": [0, 1]}


@pytest.mark.parametrize("kind", ["nonlinear", "linear"])
def test_batched_mlps_equal_the_lone_mlps_to_rounding(kind):
    preset = get_experiment("pcbias-projections").presets["tiny"]
    members = MLPMember.of(preset, kind=kind, pcs=preset.pcs, seed=1).ensemble(8)
    with serial_threads():
        batch = _sgd_batched(members)
        alone = [_sgd_alone(m) for m in members]
    for b, a in zip(batch, alone, strict=True):
        assert b is not None
        for (name, wa), (_, wb) in zip(
            a.net.state_dict().items(), b.net.state_dict().items(), strict=True
        ):
            gap = float((wa - wb).abs().max())
            assert gap <= MLP_BOUND * float(wa.abs().max()), name
        ra, rb = a.result(), b.result()
        assert list(ra) == list(rb)
        np.testing.assert_array_equal(ra["train_accuracy"], rb["train_accuracy"])
        np.testing.assert_array_equal(ra["test_accuracy"], rb["test_accuracy"])
        np.testing.assert_array_equal(ra["correct"], rb["correct"])
        np.testing.assert_allclose(ra["projected"], rb["projected"], rtol=0, atol=0)
    # the batched nets hold their own tensors again, trained (not the initial weights)
    first = next(batch[0].net.parameters())  # type: ignore[union-attr]
    assert first.untyped_storage().nbytes() == first.numel() * first.element_size()
    torch.manual_seed(1000 * members[0].seed)
    untrained = members[0].network(preset_inputs(members[0]), 10)
    assert not torch.equal(first, next(untrained.parameters()))


def preset_inputs(member: MLPMember) -> int:
    return member.inputs().x.shape[1]


def _members(run: Run) -> dict[str, dict]:
    out = {}
    for path in sorted(run.path.rglob("member-*.json")):
        record = json.loads(path.read_text())
        out[str(path.relative_to(run.path))] = record["values"]
    return out


@pytest.mark.parametrize("experiment_id", ["pcbias-scales", "pcbias-projections", "pcbias-loc"])
def test_a_batched_tiny_run_is_the_one_by_one_run(tmp_path, experiment_id):
    """Same metric rows (exactly), claim verdicts and details, and member records (same
    files: index and config hash, so a run resumes from either way of training)."""
    runs = {}
    for batched in (False, True):
        with serial_threads():
            runs[batched] = run_experiment(experiment_id, "tiny", root=tmp_path / str(batched),
                                           executor="serial",
                                           overrides={"batched": batched})  # fmt: skip
    alone, batch = runs[False], runs[True]
    rows = [pd.read_parquet(r.path / "metrics.parquet") for r in (alone, batch)]
    pd.testing.assert_frame_equal(rows[0], rows[1])
    claims = [json.loads((r.path / "claims.json").read_text())["claims"] for r in (alone, batch)]
    assert [(c["name"], c["verdict"], c.get("values")) for c in claims[0]] == [
        (c["name"], c["verdict"], c.get("values")) for c in claims[1]
    ]
    assert _members(alone) == _members(batch) and _members(alone)
    assert not alone.manifest["config"]["batched"] and batch.manifest["config"]["batched"]


@pytest.mark.parametrize(("activation", "hidden"), [("none", ()), ("relu", (16,))])
def test_batched_linear_sgd_nets_with_dropout_equal_the_lone_nets(activation, hidden):
    """pcbias-loc's networks: dropout masks from each member's own generator, continuing
    the seeded stream as the lone run's global generator does."""
    preset = get_experiment("pcbias-loc").presets["tiny"]
    member = LinearSGDMember(data=preset.data, hidden=hidden, activation=activation,
                             init=preset.init, dropout=preset.dropout, lr=0.05,
                             batch_size=preset.batch_size, epochs=2, checkpoints=6,
                             record_correct=True, eval_transforms=("zca",))  # fmt: skip
    members = member.ensemble(3)
    with serial_threads():
        batch = linear_sgd_batch(members)
        alone = [linear_sgd_member(m) for m in members]
    for b, a in zip(batch, alone, strict=True):
        assert b is not None and list(b) == list(a)
        for key in a:
            x, y = np.asarray(a[key]), np.asarray(b[key])
            if x.dtype.kind == "f":
                # the scored losses are float32 means, to MLP_BOUND; accuracies exactly
                np.testing.assert_allclose(y, x, rtol=MLP_BOUND, atol=0, err_msg=key)
            else:
                np.testing.assert_array_equal(y, x, err_msg=key)
        np.testing.assert_array_equal(b["train_accuracy"], a["train_accuracy"])
        np.testing.assert_array_equal(b["test_accuracy"], a["test_accuracy"])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_diverging_rate_probe_diverges_batched_as_alone():
    preset = get_experiment("pcbias-loc").presets["tiny"]
    member = LinearSGDMember(data=preset.data, init=preset.init, dropout=preset.dropout,
                             lr=1e38, batch_size=preset.batch_size, epochs=1, checkpoints=4,
                             allow_divergence=True)  # fmt: skip
    with serial_threads():
        alone = linear_sgd_member(member)
        batch = linear_sgd_batch(member.ensemble(2))
    assert alone == {"diverged": True, "test_error": 1.0, "lr": 1e38}
    assert batch[0] == alone and batch[1]["diverged"] is True
