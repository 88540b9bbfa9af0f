"""The learning-rate sweep of paper 003 (note 003 §4.3): a log grid, selection by test error.

The paper (after PNAS) trains every network at 25 learning rates log-spaced in
``[1e-4, 0.25]`` and keeps the one with the best final test error. A sweep configuration::

    {"grid": {"low": 1e-4, "high": 0.25, "n": 25},   # the paper's grid
     "indices": None,                               # which grid points (None: all)
     "select": "final_test_error",
     "require_zero_error": True}

``require_zero_error`` (our addition, stated so it can be switched off) restricts the choice
to rates whose network classifies every training sample correctly at the end, so that the
selected run has a terminal phase to measure; when no rate qualifies, all are candidates.
Ties in test error go to the larger rate (it reaches the terminal phase sooner).

The grid's points are the members of a sweep (:func:`collapselab.experiments.sweeps.run_sweep`
with the run's executor): :func:`sweep_member` trains one point from its member config
(:func:`member_config`), rebuilding the arm's data from its configuration entry once per
worker process.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from collapselab.data import DataSplits
from collapselab.experiments.mse_nc.arms import Arm, build_data, sweep_point
from collapselab.experiments.mse_nc.presets import paper_lr_grid

SELECTIONS = ("final_test_error",)


def sweep_rates(spec: Mapping[str, Any]) -> list[tuple[int, float]]:
    """``(grid index, learning rate)`` pairs of a sweep configuration."""
    grid = spec.get("grid", {})
    rates = paper_lr_grid(
        float(grid.get("low", 1e-4)), float(grid.get("high", 0.25)), int(grid.get("n", 25))
    )
    indices = spec.get("indices")
    if indices is None:
        return list(enumerate(rates))
    chosen = []
    for i in indices:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(rates):
            raise ValueError(
                f"lr_sweep.indices must be grid indices in [0, {len(rates)}), got {i!r}"
            )
        chosen.append((i, rates[i]))
    if not chosen:
        raise ValueError("lr_sweep.indices selects no learning rate")
    return chosen


def select_rate(
    points: Sequence[Mapping[str, float]], spec: Mapping[str, Any]
) -> tuple[float, str]:
    """The selected learning rate among sweep ``points`` and a sentence saying why.

    Each point holds ``lr``, ``test_error`` and ``train_accuracy`` (NaN when the run
    diverged). Selection: smallest final test error among the finite points that reached
    zero training error (all finite points if ``require_zero_error`` is off or none did);
    ties go to the larger rate.
    """
    select = spec.get("select", "final_test_error")
    if select not in SELECTIONS:
        raise ValueError(f"lr_sweep.select must be one of {SELECTIONS}, got {select!r}")
    finite = [p for p in points if math.isfinite(p["test_error"])]
    if not finite:
        raise ValueError("every learning rate of the sweep diverged; nothing to select")
    pool, rule = finite, "all finite runs"
    if spec.get("require_zero_error", True):
        interpolating = [p for p in finite if p["train_accuracy"] == 1.0]
        if interpolating:
            pool, rule = interpolating, "runs that reached zero training error"
        else:
            rule = "all finite runs (none reached zero training error)"
    best = min(pool, key=lambda p: (p["test_error"], -p["lr"]))
    why = (
        f"lr={best['lr']:.4g}: lowest final test error {best['test_error']:.4g} among "
        f"{len(pool)} {rule} of {len(points)} swept"
    )
    return float(best["lr"]), why


def member_config(
    config: Mapping[str, Any],
    arm: Arm,
    lr: float,
    *,
    seed: int,
    device: str,
    data_dir: str | None,
) -> dict[str, Any]:
    """The sweep member that trains ``arm`` at ``lr`` (everything :func:`sweep_member` needs)."""
    return {
        "config": dict(config),
        "arm": dataclasses.asdict(arm),
        "lr": float(lr),
        "seed": int(seed),
        "device": device,
        "data_dir": data_dir,
    }


def sweep_member(member: dict[str, Any]) -> dict[str, float]:
    """A sweep task: train one point of the learning-rate grid (:func:`sweep_point`)."""
    arm = Arm(**member["arm"])
    data = arm_data(member["config"], arm, member["data_dir"], member["seed"])
    return sweep_point(
        member["config"], arm, data, member["lr"], seed=member["seed"], device=member["device"]
    )


def arm_data(config: Mapping[str, Any], arm: Arm, data_dir: str | None, seed: int) -> DataSplits:
    """The data of ``arm`` as a member process builds it from the configuration entry,
    once per process and dataset (every point of an arm trains on the same data)."""
    spec = config["datasets"][arm.dataset]
    return _data(json.dumps(spec, sort_keys=True), data_dir, seed)


@functools.lru_cache(maxsize=2)
def _data(spec_json: str, data_dir: str | None, seed: int) -> DataSplits:
    # Once per worker process and dataset: every point of an arm trains on the same data.
    return build_data(json.loads(spec_json), data_dir, seed)
