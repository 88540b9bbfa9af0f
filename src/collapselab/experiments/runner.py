"""Running a registered experiment into the run store, resumably."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collapselab.experiments.registry import RunContext, get_experiment
from collapselab.store import Run


def run_id_for(experiment_id: str, preset: str, seed: int) -> str:
    """The deterministic directory name of a run, so re-running finds and resumes it."""
    return f"{experiment_id}-{preset}-seed{seed}"


def run_experiment(
    experiment_id: str,
    preset: str = "quick",
    root: str | Path = "collapselab-runs",
    seed: int = 0,
    device: str = "cpu",
    data_dir: str | Path | None = None,
    callbacks: Sequence[Any] = (),
) -> Run:
    """Run ``experiment_id`` with ``preset`` under ``root`` and return its :class:`Run`.

    A run that already completed is returned untouched; an interrupted or failed one is
    reopened and resumed from its last checkpoint (the training loop drops the metric rows
    recorded after that checkpoint, so nothing is counted twice). ``callbacks`` are handed
    to the experiment's training loops (a progress bar, say).
    """
    experiment = get_experiment(experiment_id)
    config = experiment.config(preset)
    run = Run.open_or_create(
        root, experiment.id, preset, config, seed, run_id=run_id_for(experiment.id, preset, seed)
    )
    if run.status == "completed":
        return run
    context = RunContext(
        preset=preset,
        config=config,
        seed=seed,
        device=device,
        data_dir=Path(data_dir) if data_dir is not None else None,
        callbacks=list(callbacks),
    )
    started = time.perf_counter()
    with run:
        run.set_status("running")
        experiment.run(run, context)
        run.flush()
        if run.status == "running":
            run.set_status("completed")
    run.add_duration("total_s", time.perf_counter() - started)
    return run
