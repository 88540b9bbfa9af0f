"""mse-nc-collapse's learning-rate sweep trained batched (``batched=True``, the default: the
points of an arm train as one batched model) against one by one: every point's weights
after training to the float32 rounding measured here, the same final accuracies, and a
whole tiny run with the same metric rows, claim verdicts and member records."""

from __future__ import annotations

import json

import pandas as pd
import torch

from collapselab._threads import serial_threads
from collapselab.experiments import get_experiment
from collapselab.experiments.mse_nc.arms import (
    arm_data,
    arms_of,
    seeded_net,
    sweep_point,
    sweep_points,
    train_config,
)
from collapselab.experiments.runner import run_experiment
from collapselab.store import Run
from collapselab.train import train, train_ensemble

BOUND = 1e-6
"""Largest float32 gap allowed between a batched and a lone sweep point's tensors after the
tiny preset's 10 epochs, relative to the network's largest entry. Measured with one thread:
1.4e-7 (the BatchNorm running variance, 1.2e-6 on 8.8; weights 1.6e-7 on 0.55): the
batched products and the per-member batch-norm statistics sum in other orders."""

RATES = (0.01, 0.1302501827396728, 0.25, 1.0)
"""Points of the tiny arm's grid (0.13, 0.25), a slow rate and one that diverges."""


def _arm():
    preset = get_experiment("mse-nc-collapse").presets["tiny"]
    arm = next(a for a in arms_of(preset) if a.lr is None)
    return preset, arm, arm_data(preset.datasets[arm.dataset], None, 0)


def test_batched_sweep_points_equal_the_lone_points_to_rounding():
    preset, arm, data = _arm()
    with serial_threads():
        models = [seeded_net(preset, arm, data, 0) for _ in RATES]
        configs = [train_config(preset, arm, lr, 0, "cpu") for lr in RATES]
        batch = train_ensemble(models, data, configs)
        for lr, model, result in zip(RATES, models, batch, strict=True):
            lone = seeded_net(preset, arm, data, 0)
            alone = train(lone, data, train_config(preset, arm, lr, 0, "cpu"))
            assert result.failed == alone.failed and result.failed == (lr == 1.0)
            if alone.failed:
                continue
            top = max(float(t.abs().max()) for t in lone.state_dict().values())
            for (name, a), b in zip(lone.state_dict().items(), model.state_dict().values(),
                                    strict=True):  # fmt: skip
                if a.is_floating_point():
                    assert float((a - b).abs().max()) <= BOUND * top, (lr, name)
                else:
                    assert torch.equal(a, b), (lr, name)
            for key in ("train_accuracy", "test_accuracy"):
                assert result.final[key] == alone.final[key], (lr, key)
        batch_points = sweep_points(preset, arm, data, RATES, seed=0, device="cpu")
        lone_points = [sweep_point(preset, arm, data, lr, seed=0, device="cpu") for lr in RATES]
    assert json.dumps(batch_points) == json.dumps(lone_points)


def _members(run: Run) -> dict[str, dict]:
    out = {}
    for path in sorted(run.path.rglob("member-*.json")):
        out[str(path.relative_to(run.path))] = json.loads(path.read_text())["values"]
    return out


def test_a_batched_tiny_run_is_the_one_by_one_run(tmp_path):
    """Same metric rows (exactly), claim verdicts and details, and member records (same
    files: index and config hash, so a run resumes from either way of training)."""
    runs = {}
    for batched in (False, True):
        with serial_threads():
            runs[batched] = run_experiment("mse-nc-collapse", "tiny",
                                           root=tmp_path / str(batched), executor="serial",
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
