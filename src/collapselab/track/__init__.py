"""collapselab.track: the Monitor (schedule + probes + metric families + store) and its adapters.

Public API:

- :class:`Monitor`: measure metric families (:mod:`collapselab.families.builtin`) of every
  requested layer on a schedule, with exact two-pass statistics over data loaders, writing
  long-format rows to a run.
- :class:`MonitorCallback`: the monitor as a :func:`collapselab.train.train` callback
  (``monitor.callback()``).
- :class:`Schedule`, :func:`log_spaced_epochs`, :data:`PAPER_003_EPOCHS`, :func:`dense_window`:
  when to measure (the Monitor's schedule and each family's).
- :data:`MODEL_LAYER`: the ``layer`` of model-level rows.
- Reading what a family stored is the family's business: :mod:`collapselab.families`
  (``measurement_arrays``, ``accessibility_from_runs``, ``compact_pc_from_runs``).
- ``CollapseCallback`` (module :mod:`collapselab.track.lightning`): a Lightning callback
  driving the same Monitor; needs the optional ``lightning`` package and is imported
  only when first used.
"""

from typing import Any

from collapselab.families.family import MODEL_LAYER
from collapselab.track.callbacks import MonitorCallback
from collapselab.track.monitor import Monitor, Results
from collapselab.track.schedule import PAPER_003_EPOCHS, Schedule, dense_window, log_spaced_epochs

__all__ = [
    "MODEL_LAYER",
    "PAPER_003_EPOCHS",
    "CollapseCallback",
    "Monitor",
    "MonitorCallback",
    "Results",
    "Schedule",
    "dense_window",
    "log_spaced_epochs",
]


def __getattr__(name: str) -> Any:
    # Importing lightning is slow and optional: only on first use of CollapseCallback.
    if name == "CollapseCallback":
        from collapselab.track.lightning import CollapseCallback

        return CollapseCallback
    raise AttributeError(f"module 'collapselab.track' has no attribute {name!r}")
