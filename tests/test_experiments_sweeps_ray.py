"""The Ray executor against a local Ray instance started here (one start for the module):
results identical to the local process pool, a dead worker retried and reported."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collapselab.experiments.sweeps import run_sweep
from tests import _sweep_tasks as tasks

ray = pytest.importorskip("ray", reason="the ray extra is not installed (CI installs it)")

CONFIGS = [{"seed": seed, "lr": lr} for seed in (0, 1) for lr in (0.05, 0.2)]


def test_ray_results_are_identical_to_the_local_pool(local_ray: None) -> None:
    local = run_sweep(tasks.train_linear, CONFIGS, executor="local", workers=2)
    on_ray = run_sweep(tasks.train_linear, CONFIGS, executor="ray")
    assert on_ray.executor == "ray" and on_ray.retries == []
    for a, b in zip(local.results, on_ray.results, strict=True):
        assert list(a) == list(b)
        assert a["loss"] == b["loss"] and a["noise"] == b["noise"] and a["name"] == b["name"]
        assert a["weights"].dtype == b["weights"].dtype
        np.testing.assert_array_equal(a["weights"], b["weights"])
    assert ray.is_initialized()  # a running instance is used, not shut down


def test_a_dead_ray_worker_is_retried_once_and_reported(local_ray: None, tmp_path: Path) -> None:
    configs = [{"index": i, "crash": 2, "marker": str(tmp_path / "crashed")} for i in range(3)]
    result = run_sweep(tasks.crash_once, configs, executor="ray", store=tmp_path / "m")
    assert result.results == [{"index": 0}, {"index": 1}, {"index": 2}]
    assert result.attempts == [1, 1, 2]
    assert [(r.index, r.attempt, r.crashed) for r in result.retries] == [(2, 1, True)]
    assert "Ray worker died while running member 2" in result.retries[0].error
    assert len(list((tmp_path / "m").glob("*.json"))) == 3
