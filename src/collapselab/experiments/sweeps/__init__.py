"""Sweeps: one task over a list of configs (seed ensembles, grids), on a pluggable executor.

Public API:

- :func:`run_sweep`, :class:`SweepResult`, :class:`SweepError`, :class:`Retry`: run a
  module-level ``task(config) -> dict`` over ``configs`` (results in the configs' order),
  resumably in a store directory, retrying failed members (also dead workers);
  :func:`run_members`: the same inside an experiment's run (its executor, ``members/``).
- :class:`Executor` (the protocol a backend implements), :class:`SerialExecutor`,
  :class:`LocalExecutor` (a process pool, the default), ``RayExecutor`` (in
  :mod:`collapselab.experiments.sweeps.ray_executor`, extra ``ray``),
  :func:`make_executor`, :data:`EXECUTOR_NAMES`, :func:`default_workers`.
- :class:`Job`, :class:`Outcome`, :func:`run_member`, :func:`attempt`, :func:`config_hash`:
  what an executor runs and reports.

Unrelated to :func:`collapselab.track.data_pass` (a pass over a data set).
"""

from collapselab.experiments.sweeps.executors import (
    EXECUTOR_NAMES,
    Executor,
    LocalExecutor,
    SerialExecutor,
    default_workers,
    make_executor,
)
from collapselab.experiments.sweeps.member import (
    Job,
    Outcome,
    attempt,
    config_hash,
    run_member,
)
from collapselab.experiments.sweeps.sweep import (
    Retry,
    SweepError,
    SweepResult,
    run_members,
    run_sweep,
)

__all__ = [
    "EXECUTOR_NAMES",
    "Executor",
    "Job",
    "LocalExecutor",
    "Outcome",
    "Retry",
    "SerialExecutor",
    "SweepError",
    "SweepResult",
    "attempt",
    "config_hash",
    "default_workers",
    "make_executor",
    "run_member",
    "run_members",
    "run_sweep",
]
