"""The run store: run directories, Parquet metric tables and DuckDB queries (DESIGN.md).

Public API:

- :class:`Run`: create/open a run directory, log metrics, save arrays, figures, JSON,
  checkpoints; set the status.
- :class:`Checkpoint`: a saved checkpoint (step, path, ``load()``).
- :func:`list_runs`, :func:`query`, :func:`connect`: find runs under a root and query their
  metrics and manifests with DuckDB SQL.
- :data:`METRIC_COLUMNS`, :data:`NO_EPOCH`, :data:`RUN_COLUMNS`, :data:`RUN_STATUSES`.
- The names of a run directory's files: :data:`MANIFEST_FILE`, :data:`METRICS_FILE`,
  :data:`CLAIMS_FILE`, :data:`REPORT_FILE`, :data:`ARRAYS_DIR`, :data:`FIGURES_DIR`,
  :data:`CHECKPOINTS_DIR`.
"""

from collapselab.store.catalog import RUN_COLUMNS, connect, list_runs, query
from collapselab.store.metrics_table import METRIC_COLUMNS, NO_EPOCH
from collapselab.store.run import (
    ARRAYS_DIR,
    CHECKPOINTS_DIR,
    CLAIMS_FILE,
    FIGURES_DIR,
    MANIFEST_FILE,
    METRICS_FILE,
    REPORT_FILE,
    RUN_STATUSES,
    Checkpoint,
    Run,
    RunStatus,
)

__all__ = [
    "ARRAYS_DIR",
    "CHECKPOINTS_DIR",
    "CLAIMS_FILE",
    "FIGURES_DIR",
    "MANIFEST_FILE",
    "METRICS_FILE",
    "METRIC_COLUMNS",
    "NO_EPOCH",
    "REPORT_FILE",
    "RUN_COLUMNS",
    "RUN_STATUSES",
    "Checkpoint",
    "Run",
    "RunStatus",
    "connect",
    "list_runs",
    "query",
]
