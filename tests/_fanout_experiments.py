"""Module-level run functions and sweep tasks of the fan-out tests (Ray workers import them)."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import torch

from collapselab.experiments import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.store import Run

KILL_REQUEST = "kill-here"
"""A file at the root: the first run of :func:`members_then_wait` stops between its sweeps
and waits to be killed, after writing its process id to :data:`KILLED`."""
KILLED = "killed"
COMPUTED = "computed.log"
"""A file at the root: every member appends its index as it is computed."""


def square_member(config: dict[str, Any]) -> dict[str, Any]:
    """Logs its index, then returns numbers drawn from its own seed (torch and NumPy)."""
    with open(config["log"], "a", encoding="utf-8") as handle:
        handle.write(f"{config['i']}\n")
    generator = torch.Generator().manual_seed(config["i"])
    x = torch.randn(16, 4, generator=generator, dtype=torch.float64)
    return {
        "i": config["i"],
        "value": float((x.T @ x).trace()),
        "draw": float(np.random.default_rng(config["i"]).standard_normal()),
    }


def members_then_wait(run: Run, context: RunContext) -> None:
    """Two sweeps of members; between them, the first run asked to (a kill request at the
    root) records its process id and waits to be killed."""
    root = run.path.parent
    log = str(root / COMPUTED)
    first = run_members(square_member, [{"i": i, "log": log} for i in range(3)], run, context,
                        label="a")  # fmt: skip
    if (root / KILL_REQUEST).exists() and not (root / KILLED).exists():
        (root / KILLED).write_text(str(os.getpid()))
        time.sleep(120)  # the test kills this process here
    second = run_members(square_member, [{"i": i, "log": log} for i in range(3, 5)], run,
                         context, label="b")  # fmt: skip
    for row in first + second:
        run.log(step=row["i"], metric="trace", value=row["value"], split="train")
        run.log(step=row["i"], metric="draw", value=row["draw"], split="train")
