"""The run function of the training experiment: every arm, resumable arm by arm.

For each arm of the configuration (in order: combination, then loss):

1. skip it if the manifest already records it (a resumed run);
2. load its dataset (cached while consecutive arms share it);
3. if its rate is ``"sweep"``, train one network per grid rate without measurements and
   select by final test error (:mod:`collapselab.experiments.mse_nc.sweep`): the rates are
   the members of a sweep on the run's executor (a local process pool by default), each
   stored in ``members/<key>/`` as soon as it finishes, so an interrupted sweep resumes
   with the rates not yet trained; then every point is recorded in the manifest and
   logged as rows ``sweep_test_error`` / ``sweep_train_accuracy`` (split
   ``"<key>/sweep"``, ``step`` = grid index);
4. train it with measurements (:func:`~collapselab.experiments.mse_nc.arms.run_arm`), then
   write its rows and its summary together, so an arm is either complete in the run or
   absent from it.

Where several arms remain and the run's executor has more than one worker, step 4 trains
them side by side: the arms are the members of a sweep (:func:`arm_member`, stored in
``members/arms/`` as each finishes, so an interrupted run resumes with the arms not yet
trained), written to the run in arm order once all have finished. An arm trains from its
seed alone, on the threads the configuration gives it, in either way, so the rows are the
same (tested); side by side, the training loops' callbacks (a per-epoch progress bar) are
not called, and the progress shows the arms as members.

An interruption inside step 4 loses the progress of the arms being trained only
(within-arm checkpoints are not kept; the paper preset's arms are single GPU runs of
hours).
"""

from __future__ import annotations

from typing import Any

import torch

from collapselab.data import DataSplits
from collapselab.experiments.mse_nc.arms import (
    Arm,
    arms_of,
    build_data,
    run_arm,
    torch_threads,
)
from collapselab.experiments.mse_nc.results import PROGRESS_KEY
from collapselab.experiments.mse_nc.sweep import (
    arm_data,
    member_config,
    select_rate,
    sweep_member,
    sweep_rates,
)
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.store import Run


def _progress(run: Run) -> dict[str, Any]:
    state = dict(run.manifest.get(PROGRESS_KEY) or {})
    state.setdefault("arms", {})
    state.setdefault("sweeps", {})
    return state


def _sweep(
    run: Run,
    state: dict[str, Any],
    context: RunContext,
    arm: Arm,
) -> float:
    # The members rebuild the arm's data from its configuration entry (sweep_member).
    spec = context.config.get("lr_sweep")
    if not spec:
        raise ValueError(f"arm {arm.key} asks for a sweep but the configuration has no lr_sweep")
    record = state["sweeps"].setdefault(arm.key, {"points": {}})
    if "selected" in record:
        return float(record["selected"])
    split = f"{arm.key}/sweep"
    grid = sweep_rates(spec)
    members = [
        member_config(context.config, arm, lr, seed=context.seed, device=context.device,
                      data_dir=context.data_dir_text)
        for _, lr in grid
    ]  # fmt: skip
    # the members train with the threads the arm's training runs with here
    points = run_members(
        sweep_member, members, run, context, label=arm.key, threads=torch.get_num_threads()
    )
    for (index, lr), point in zip(grid, points, strict=True):
        if str(index) in record["points"]:  # logged by an earlier, interrupted run
            continue
        record["points"][str(index)] = point
        run.log(index, "sweep_lr", lr, None, split)
        run.log(index, "sweep_test_error", point["test_error"], None, split)
        run.log(index, "sweep_train_accuracy", point["train_accuracy"], None, split)
    run.flush()
    run.update_manifest(**{PROGRESS_KEY: state})
    points = [record["points"][str(i)] for i, _ in sweep_rates(spec)]
    lr, why = select_rate(points, spec)
    record["selected"], record["why"] = lr, why
    run.update_manifest(**{PROGRESS_KEY: state})
    return lr


def run_training(run: Run, context: RunContext) -> None:
    """Train and measure every arm of ``context.config`` into ``run`` (see module docstring)."""
    with torch_threads(context.config.get("torch_threads")):
        _run_arms(run, context)


def _run_arms(run: Run, context: RunContext) -> None:
    state = _progress(run)
    pending = [arm for arm in arms_of(context.config) if arm.key not in state["arms"]]
    if len(pending) > 1 and _side_by_side(context):
        _train_side_by_side(run, state, context, pending)
        return
    cached: tuple[str, DataSplits] | None = None
    for arm in pending:
        if cached is None or cached[0] != arm.dataset:
            spec = context.config["datasets"][arm.dataset]
            cached = (arm.dataset, build_data(spec, context.data_dir, context.seed))
        lr = arm.lr if arm.lr is not None else _sweep(run, state, context, arm)
        outcome = run_arm(
            context.config,
            arm,
            cached[1],
            lr,
            seed=context.seed,
            device=context.device,
            callbacks=context.callbacks,
        )
        _record(run, state, arm, outcome.rows, outcome.summary)


def _side_by_side(context: RunContext) -> bool:
    """Whether the run's executor can train arms in parallel (more than one worker)."""
    executor = context.executor
    name = executor if isinstance(executor, str) else executor.name
    return context.workers > 1 and name != "serial"


def _train_side_by_side(
    run: Run, state: dict[str, Any], context: RunContext, arms: list[Arm]
) -> None:
    rates = {arm.key: arm.lr if arm.lr is not None else _sweep(run, state, context, arm)
             for arm in arms}  # fmt: skip
    members = [
        member_config(context.config, arm, rates[arm.key], seed=context.seed,
                      device=context.device, data_dir=context.data_dir_text)
        for arm in arms
    ]  # fmt: skip
    outcomes = run_members(
        arm_member, members, run, context, label="arms", threads=torch.get_num_threads()
    )
    for arm, outcome in zip(arms, outcomes, strict=True):
        _record(run, state, arm, outcome["rows"], outcome["summary"])


def arm_member(member: dict[str, Any]) -> dict[str, Any]:
    """A sweep task: train one arm with measurements (:func:`~collapselab.experiments.
    mse_nc.arms.run_arm`) on the data its configuration entry builds; its rows and summary."""
    arm = Arm(**member["arm"])
    data = arm_data(member["config"], arm, member["data_dir"], member["seed"])
    outcome = run_arm(member["config"], arm, data, member["lr"], seed=member["seed"],
                      device=member["device"])  # fmt: skip
    return {"rows": outcome.rows, "summary": outcome.summary}


def _record(
    run: Run, state: dict[str, Any], arm: Arm, rows: list[dict[str, Any]], summary: dict[str, Any]
) -> None:
    """Write one arm's rows and summary together: an arm is complete in the run or absent."""
    run.log_many(rows)
    run.flush()
    state["arms"][arm.key] = summary
    run.update_manifest(**{PROGRESS_KEY: state})
