"""The run function of ``mse-nc-collapse``: every arm of the preset, resumable arm by arm.

The run records its plan (the arms of the preset, :func:`~collapselab.experiments.mse_nc.
arms.arms_of`) in the manifest, then for each arm (in order: combination, then loss):

1. skip it if the manifest already records it (a resumed run);
2. load its dataset (:func:`~collapselab.experiments.mse_nc.arms.arm_data`: once while
   arms share it);
3. if its rate is ``"sweep"``, train one network per grid rate without measurements and
   select by final test error (:func:`~collapselab.experiments.mse_nc.sweep.sweep_arm`:
   the rates are the members of a sweep on the run's executor, a local process pool by
   default, so an interrupted sweep resumes with the rates not yet trained);
4. train it with measurements (:func:`~collapselab.experiments.mse_nc.arms.run_arm`), then
   write its rows and its summary together, so an arm is either complete in the run or
   absent from it.

Where several arms remain and the run's executor has more than one worker, step 4 trains
them side by side: the arms are the members of a sweep (:func:`arm_member`, stored in
``members/arms/`` as each finishes, so an interrupted run resumes with the arms not yet
trained), written to the run in arm order once all have finished. An arm trains from its
seed alone, on the threads the preset gives it (``torch_threads``), in either way, so the
rows are the same (tested); side by side, the training loops' callbacks (a per-epoch
progress bar) are not called, and the progress shows the arms as members.

An interruption inside step 4 loses the progress of the arms being trained only
(within-arm checkpoints are not kept; the paper preset's arms are single GPU runs of
hours).
"""

from __future__ import annotations

from typing import Any

import torch

from collapselab.experiments.mse_nc.arms import Arm, arm_data, arms_of, forget_data, run_arm
from collapselab.experiments.mse_nc.results import PROGRESS_KEY
from collapselab.experiments.mse_nc.sweep import member_arm, member_config, sweep_arm
from collapselab.experiments.mse_nc.threads import torch_threads
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.store import Run


def run_collapse(run: Run, context: RunContext) -> None:
    """Train and measure every arm of ``context.config`` into ``run`` (see the module
    docstring)."""
    try:
        with torch_threads(context.config.torch_threads):
            _run_arms(run, context)
    finally:
        forget_data()


def _run_arms(run: Run, context: RunContext) -> None:
    arms = arms_of(context.config)
    state = dict(run.manifest.get(PROGRESS_KEY) or {})
    state.setdefault("arms", {})
    state.setdefault("sweeps", {})
    state["plan"] = [arm.to_dict() for arm in arms]
    run.update_manifest(**{PROGRESS_KEY: state})
    pending = [arm for arm in arms if arm.key not in state["arms"]]
    if len(pending) > 1 and _side_by_side(context):
        _train_side_by_side(run, state, context, pending)
        return
    for arm in pending:
        data = arm_data(context.config.datasets[arm.dataset], context.data_dir_text, context.seed)
        lr = arm.lr if arm.lr is not None else sweep_arm(run, state, context, arm)
        outcome = run_arm(
            context.config,
            arm,
            data,
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
    rates = {arm.key: arm.lr if arm.lr is not None else sweep_arm(run, state, context, arm)
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
    mse_nc.arms.run_arm`) on its data (:func:`~collapselab.experiments.mse_nc.sweep.
    member_arm`); its rows and summary."""
    config, arm, data = member_arm(member)
    outcome = run_arm(config, arm, data, member["lr"], seed=member["seed"],
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
