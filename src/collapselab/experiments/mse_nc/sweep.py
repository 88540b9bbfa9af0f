"""The learning-rate sweep of paper 003 (note 003 §4.3): a log grid, selection by test error.

The paper (after PNAS) trains every network at 25 learning rates log-spaced in
``[1e-4, 0.25]`` and keeps the one with the best final test error. A preset's
:class:`~collapselab.experiments.mse_nc.presets.RateSweep` gives the grid
(``low``, ``high``, ``n``), the grid points to train (``indices``; ``None``: all), the
selection (``"final_test_error"``) and ``require_zero_error`` (our addition, stated so it can
be switched off): the choice is restricted to rates whose network classifies every training
sample correctly at the end, so that the selected run has a terminal phase to measure; when
no rate qualifies, all are candidates. Ties in test error go to the larger rate (it reaches
the terminal phase sooner).

The grid's points are the members of a sweep (:func:`collapselab.experiments.sweeps.run_members`
on the run's executor): :func:`sweep_member` trains one point from its member config
(:func:`member_config`: the preset, the arm, the rate, the seed), on the arm's data loaded
once per worker process (:func:`~collapselab.experiments.mse_nc.arms.arm_data`).
With the preset's ``batched`` (the default) the points of an arm, one architecture at
different rates, train together as one batched model (:func:`sweep_members`, in chunks
of :func:`~collapselab.experiments.sweeps.batched.run_batched_members`, each point stored
as one-by-one training stores it). :func:`sweep_arm` runs an arm's sweep in a run,
resumably, and records every point.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from collapselab.data import DataSplits
from collapselab.experiments.mse_nc.arms import Arm, arm_data, sweep_point, sweep_points
from collapselab.experiments.mse_nc.presets import CollapsePreset, RateSweep, paper_lr_grid
from collapselab.experiments.mse_nc.results import PROGRESS_KEY
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.experiments.sweeps.batched import run_batched_members
from collapselab.store import Run


def sweep_rates(spec: RateSweep) -> list[tuple[int, float]]:
    """``(grid index, learning rate)`` pairs of a sweep."""
    rates = paper_lr_grid(spec.low, spec.high, spec.n)
    if spec.indices is None:
        return list(enumerate(rates))
    return [(i, rates[i]) for i in spec.indices]


def select_rate(points: Sequence[Mapping[str, float]], spec: RateSweep) -> tuple[float, str]:
    """The selected learning rate among sweep ``points`` and a sentence saying why.

    Each point holds ``lr``, ``test_error`` and ``train_accuracy`` (NaN when the run
    diverged). Selection (``spec.select == "final_test_error"``): smallest final test error
    among the finite points that reached zero training error (all finite points if
    ``require_zero_error`` is off or none did); ties go to the larger rate.
    """
    finite = [p for p in points if math.isfinite(p["test_error"])]
    if not finite:
        raise ValueError("every learning rate of the sweep diverged; nothing to select")
    pool, rule = finite, "all finite runs"
    if spec.require_zero_error:
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


# ------------------------------------------------------------------------- members
def member_config(
    config: CollapsePreset,
    arm: Arm,
    lr: float,
    *,
    seed: int,
    device: str,
    data_dir: str | None,
) -> dict[str, Any]:
    """The member that trains ``arm`` at ``lr``: a sweep point (:func:`sweep_member`) or, side
    by side, a whole arm (:func:`~collapselab.experiments.mse_nc.collapse.arm_member`).
    The preset travels typed (pickled to the worker; recorded and hashed as its fields)."""
    return {
        "config": config,
        "arm": arm.to_dict(),
        "lr": float(lr),
        "seed": int(seed),
        "device": device,
        "data_dir": data_dir,
    }


def member_arm(member: Mapping[str, Any]) -> tuple[CollapsePreset, Arm, DataSplits]:
    """The preset, the arm and the arm's data of a member (:func:`member_config`)."""
    config, arm = member["config"], Arm(**member["arm"])
    return config, arm, arm_data(config.datasets[arm.dataset], member["data_dir"], member["seed"])


def sweep_member(member: dict[str, Any]) -> dict[str, float]:
    """A sweep task: train one point of the learning-rate grid (:func:`sweep_point`)."""
    config, arm, data = member_arm(member)
    return sweep_point(config, arm, data, member["lr"], seed=member["seed"],
                       device=member["device"])  # fmt: skip


def sweep_members(members: list[dict[str, Any]]) -> list[dict[str, float]]:
    """A batched sweep task: the points ``members`` of one arm (:func:`member_config`, all
    fields equal but ``lr``) trained as one batched model
    (:func:`~collapselab.experiments.mse_nc.arms.sweep_points`)."""
    config, arm, data = member_arm(members[0])
    return sweep_points(config, arm, data, [m["lr"] for m in members],
                        seed=members[0]["seed"], device=members[0]["device"])  # fmt: skip


def _point_key(member: dict[str, Any]) -> str:
    """The batch key of a sweep point: its arm (the points of an arm differ in ``lr``)."""
    return Arm(**member["arm"]).key


# ------------------------------------------------------------------------ in a run
def sweep_arm(run: Run, state: dict[str, Any], context: RunContext, arm: Arm) -> float:
    """The rate of a swept ``arm``: every grid point trained (the members of a sweep on the
    run's executor, stored in ``members/<arm key>/``, so an interrupted sweep resumes with
    the points not yet trained), recorded in the manifest's progress ``state`` and logged as
    rows ``sweep_lr`` / ``sweep_test_error`` / ``sweep_train_accuracy`` (split
    ``"<key>/sweep"``, ``step`` = grid index); then the selection (:func:`select_rate`)."""
    spec = context.config.lr_sweep
    record = state["sweeps"].setdefault(arm.key, {"points": {}})
    if "selected" in record:
        return float(record["selected"])
    split = f"{arm.key}/sweep"
    grid = sweep_rates(spec)
    # how the points train is not part of what they are: one config (and hash) either way
    preset = context.config.replace(batched=True)
    members = [
        member_config(preset, arm, lr, seed=context.seed, device=context.device,
                      data_dir=context.data_dir_text)
        for _, lr in grid
    ]  # fmt: skip
    # the members train with the threads the arm's training runs with here
    threads = torch.get_num_threads()
    if context.config.batched:
        points = run_batched_members(
            sweep_member, sweep_members, members, run, context,
            batch_key=_point_key, label=arm.key, threads=threads,
        )  # fmt: skip
    else:
        points = run_members(sweep_member, members, run, context, label=arm.key, threads=threads)
    for (index, lr), point in zip(grid, points, strict=True):
        if str(index) in record["points"]:  # logged by an earlier, interrupted run
            continue
        record["points"][str(index)] = point
        run.log(index, "sweep_lr", lr, None, split)
        run.log(index, "sweep_test_error", point["test_error"], None, split)
        run.log(index, "sweep_train_accuracy", point["train_accuracy"], None, split)
    run.flush()
    run.update_manifest(**{PROGRESS_KEY: state})
    points = [record["points"][str(i)] for i, _ in grid]
    lr, why = select_rate(points, spec)
    record["selected"], record["why"] = lr, why
    run.update_manifest(**{PROGRESS_KEY: state})
    return lr
