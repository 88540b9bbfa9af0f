"""Check a preset without running it: plan its data, build its pipelines, models and schedules.

``collapselab reproduce 003 --preset paper --dry-run`` calls :func:`dry_run_experiment` for
every experiment of the paper: the data plan locates every dataset (a missing one is a
one-line error naming the places looked and how to install it), then the experiment's own
``dry_run`` function reads the local files, builds the models and the optimiser schedules
and passes a batch through each model, and stops. Experiments that read no files and build
nothing (the theory experiments) only get their data plan checked. Nothing is written.

Where an experiment's dry run reports the network trainings it would do (``gpu_work`` in its
summary), the result carries the estimated GPU hours
(:mod:`~collapselab.experiments.gpu_hours`: measured forward FLOPs per sample x 3 x samples
x epochs, plus the evaluations, at an assumed sustained throughput), and the CLI prints them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from collapselab.data import DatasetFileError
from collapselab.experiments.data_plan import DataDirError, MissingDataError, plan_data
from collapselab.experiments.gpu_hours import gpu_hours
from collapselab.experiments.registry import Experiment
from collapselab.experiments.seeding import base, move_seeds


@dataclass
class DryRunResult:
    """What a dry run of one experiment found.

    Attributes:
        experiment: its id.
        preset: the preset checked (the requested one, or its fallback).
        data: the data it would read, in one line.
        built: the experiment's dry-run summary (datasets, models, schedules); ``None`` when
            it builds nothing from files.
        error: one line saying what is wrong (missing or malformed files, a configuration
            that does not fit); ``None`` when everything was built.
        notes: remarks of the data plan (a fallback preset, an unused ``--data-dir``).
    """

    experiment: str
    preset: str
    data: str
    built: dict[str, Any] | None = None
    error: str | None = None
    notes: list[str] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def gpu_hours(self) -> float | None:
        """The estimated GPU hours of the trainings its dry run reported (``None``: none
        reported; :mod:`~collapselab.experiments.gpu_hours`)."""
        work = (self.built or {}).get("gpu_work")
        return gpu_hours(work) if work else None


def dry_run_experiment(
    experiment: Experiment,
    preset: str,
    data_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
) -> DryRunResult:
    """Plan and build ``experiment`` at ``preset`` without training (see the module docstring).

    Never raises for missing or malformed data or a configuration that does not fit: the
    result's ``error`` says what failed, in one line.
    """
    try:
        plan = plan_data(experiment, preset, data_dir)
    except MissingDataError as error:
        return DryRunResult(experiment.id, preset, "missing", error=error.one_line())
    except DataDirError as error:
        return DryRunResult(experiment.id, preset, "missing", error=str(error))
    result = DryRunResult(experiment.id, plan.preset, plan.summary(), notes=plan.notes())
    if experiment.dry_run is None:
        return result
    config = move_seeds(experiment.config(plan.preset), seed)
    try:
        result.built = experiment.dry_run(config, data_dir=data_dir, seed=base(seed))
    except DatasetFileError as error:
        result.error = " ".join(str(error).split("\n")[:2])
    except (ValueError, TypeError, KeyError, RuntimeError) as error:
        result.error = f"{type(error).__name__}: {error}".split("\n")[0]
    return result
