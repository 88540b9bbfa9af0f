"""dlufm-relu's sweep trained batched (``batched=True``, the default: the seeds of a width
descend as one batched model) against one by one: the endpoints bit for bit, and whole tiny
runs with the same metric rows, arrays, claim verdicts and member records."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from collapselab._threads import serial_threads
from collapselab.experiments import get_experiment
from collapselab.experiments.dlufm.relu import relu_endpoint, relu_endpoints
from collapselab.experiments.runner import run_experiment
from collapselab.store import Run


def test_batched_endpoints_are_the_lone_endpoints():
    preset = get_experiment("dlufm-relu").presets["tiny"]
    members = [{"preset": preset, "width": preset.widths[0], "seed": s} for s in preset.seeds]
    with serial_threads():
        batch = relu_endpoints(members)
        alone = [relu_endpoint(m) for m in members]
    for b, a in zip(batch, alone, strict=True):
        assert b is not None and list(b) == list(a)
        for key in a:
            np.testing.assert_array_equal(np.asarray(b[key]), np.asarray(a[key]), err_msg=key)


def test_a_diverging_batch_is_left_to_the_lone_descents():
    preset = get_experiment("dlufm-relu").presets["tiny"].replace(lr=1e3)
    members = [{"preset": preset, "width": preset.widths[0], "seed": s} for s in preset.seeds]
    assert relu_endpoints(members) == [None] * len(members)


def _members(run: Run) -> dict[str, dict]:
    out = {}
    for path in sorted(run.path.rglob("member-*.json")):
        out[str(path.relative_to(run.path))] = json.loads(path.read_text())["values"]
    return out


def test_a_batched_tiny_run_is_the_one_by_one_run(tmp_path):
    """Same metric rows and arrays (exactly), claim verdicts and details, and member records
    (same files: index and config hash, so a run resumes from either way of training)."""
    runs = {}
    for batched in (False, True):
        with serial_threads():
            runs[batched] = run_experiment("dlufm-relu", "tiny", root=tmp_path / str(batched),
                                           executor="serial",
                                           overrides={"batched": batched})  # fmt: skip
    alone, batch = runs[False], runs[True]
    rows = [pd.read_parquet(r.path / "metrics.parquet") for r in (alone, batch)]
    pd.testing.assert_frame_equal(rows[0], rows[1])
    for name in ("sweep", "dynamics"):
        a, b = (np.load(r.path / "arrays" / f"{name}.npz") for r in (alone, batch))
        assert sorted(a) == sorted(b)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{name}:{key}")
    claims = [json.loads((r.path / "claims.json").read_text())["claims"] for r in (alone, batch)]
    assert [(c["name"], c["verdict"], c.get("values")) for c in claims[0]] == [
        (c["name"], c["verdict"], c.get("values")) for c in claims[1]
    ]
    assert _members(alone) == _members(batch) and _members(alone)
    assert not alone.manifest["config"]["batched"] and batch.manifest["config"]["batched"]
