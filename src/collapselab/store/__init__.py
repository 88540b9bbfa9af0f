"""The run store: run directories, Parquet metric tables and DuckDB queries (DESIGN.md).

Public API:

- :class:`Run`: create/open a run directory, log metrics, save arrays, figures, JSON,
  checkpoints; set the status.
- :class:`Checkpoint`: a saved checkpoint (step, path, ``load()``).
- :func:`list_runs`, :func:`query`, :func:`connect`: find runs under a root and query their
  metrics and manifests with DuckDB SQL.
- :data:`METRIC_COLUMNS`, :data:`NO_EPOCH`, :data:`RUN_COLUMNS`, :data:`RUN_STATUSES`.
"""

from collapselab.store.catalog import RUN_COLUMNS, connect, list_runs, query
from collapselab.store.metrics_table import METRIC_COLUMNS, NO_EPOCH
from collapselab.store.run import RUN_STATUSES, Checkpoint, Run, RunStatus

__all__ = [
    "METRIC_COLUMNS",
    "NO_EPOCH",
    "RUN_COLUMNS",
    "RUN_STATUSES",
    "Checkpoint",
    "Run",
    "RunStatus",
    "connect",
    "list_runs",
    "query",
]
