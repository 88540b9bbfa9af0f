"""collapselab.track: the Monitor (schedule + probes + metric families + store) and its adapters.

Public API:

- :class:`Monitor`: measure metric families (:mod:`collapselab.metrics.families`) of every
  requested layer on a schedule, with exact two-pass statistics over data loaders, writing
  long-format rows to a run.
- :class:`MonitorCallback`: the monitor as a :func:`collapselab.train.train` callback
  (``monitor.callback()``).
- :class:`Schedule`, :func:`log_spaced_epochs`, :data:`PAPER_003_EPOCHS`: when to measure.
- :data:`MODEL_LAYER`: the ``layer`` of model-level rows.
- :func:`accessibility_from_runs`, :func:`correctness_from_run`: accessibility (paper 002)
  of every example over an ensemble of runs tracked with the ``learning_order`` family.
- :func:`compact_pc_from_runs`: the ``(E, N, K, q)`` compact matrices of an ensemble of runs
  tracked with the ``pcbias`` family, for the per-PC distance and ensemble std (paper 002).
- :func:`measurement_arrays`, :func:`array_name`: a family's stored arrays, in step order.
- ``CollapseCallback`` (module :mod:`collapselab.track.lightning`): a Lightning callback
  driving the same Monitor; needs the optional ``lightning`` package and is imported
  only when first used.
"""

from typing import Any

from collapselab.metrics.family import MODEL_LAYER
from collapselab.track.callbacks import MonitorCallback
from collapselab.track.learning_order import accessibility_from_runs, correctness_from_run
from collapselab.track.measurements import array_name, measurement_arrays
from collapselab.track.monitor import Monitor, Results
from collapselab.track.pc_convergence import compact_pc_from_runs
from collapselab.track.schedule import PAPER_003_EPOCHS, Schedule, log_spaced_epochs

__all__ = [
    "MODEL_LAYER",
    "PAPER_003_EPOCHS",
    "CollapseCallback",
    "Monitor",
    "MonitorCallback",
    "Results",
    "Schedule",
    "accessibility_from_runs",
    "array_name",
    "compact_pc_from_runs",
    "correctness_from_run",
    "log_spaced_epochs",
    "measurement_arrays",
]


def __getattr__(name: str) -> Any:
    # Importing lightning is slow and optional: only on first use of CollapseCallback.
    if name == "CollapseCallback":
        from collapselab.track.lightning import CollapseCallback

        return CollapseCallback
    raise AttributeError(f"module 'collapselab.track' has no attribute {name!r}")
