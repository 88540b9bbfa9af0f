"""The run store: run directories, Parquet metric tables and DuckDB queries (docs/store.md).

Public API:

- :class:`Run`: create/open a run directory, log metrics, save arrays, figures, JSON,
  checkpoints; set the status; :meth:`Run.add_mirror` forwards its rows to a tracker.
- :class:`Checkpoint`: a saved checkpoint (step, path, ``load()``).
- :func:`list_runs`, :func:`query`, :func:`connect`: find runs under a root and query their
  metrics and manifests with DuckDB SQL (:func:`query` is read-only; :class:`QueryError`).
- Damaged runs: :func:`run_problem`, :func:`check_run`, :func:`set_aside`,
  :class:`DamagedRunError`, :class:`DamagedRunsWarning`, :data:`DAMAGED`.
- One writing process per run: :class:`RunLockedError`.
- One value per row key ``(step, split, layer, metric)``: :data:`ROW_KEY`,
  :class:`DuplicateRowError` (:mod:`collapselab.store.row_keys`).
- The zero-error epoch, one definition: :func:`zero_error_epoch` (from a metric table),
  :func:`first_zero_error` and :func:`reaches_zero_error` (one evaluation at a time),
  :data:`ZERO_ERROR_METRIC` (:mod:`collapselab.store.zero_error`).
- Mirrors: :class:`Mirror`, :func:`make_mirror`, :func:`attach_mirrors`, :data:`MIRROR_NAMES`,
  :class:`TensorBoardMirror`, :class:`MLflowMirror`, :class:`WandbMirror`, :func:`metric_tag`.
- :func:`atomic_write`: the store's atomic file write, for the layers above.
- :func:`to_jsonable`: configs and results as plain JSON values (how the store records them).
- :data:`METRIC_COLUMNS`, :data:`NO_EPOCH`, :data:`RUN_COLUMNS`, :data:`RUN_STATUSES`.
- The names of a run directory's files: :data:`MANIFEST_FILE`, :data:`METRICS_FILE`,
  :data:`CLAIMS_FILE`, :data:`REPORT_FILE`, :data:`ARRAYS_DIR`, :data:`FIGURES_DIR`,
  :data:`CHECKPOINTS_DIR`.
"""

from collapselab.store._atomic import atomic_write
from collapselab.store._json import to_jsonable
from collapselab.store.catalog import (
    DAMAGED,
    RUN_COLUMNS,
    STALE,
    DamagedRunsWarning,
    QueryError,
    RootError,
    check_root,
    connect,
    list_runs,
    prepare_root,
    query,
)
from collapselab.store.checkpoints import Checkpoint, CheckpointError
from collapselab.store.integrity import (
    DamagedRunError,
    check_run,
    read_manifest,
    run_problem,
    set_aside,
)
from collapselab.store.layout import (
    ARRAYS_DIR,
    CHECKPOINTS_DIR,
    CLAIMS_FILE,
    FIGURES_DIR,
    MANIFEST_FILE,
    METRICS_FILE,
    REPORT_FILE,
)
from collapselab.store.lock import RunLockedError
from collapselab.store.metrics_table import METRIC_COLUMNS, NO_EPOCH
from collapselab.store.mirrors import (
    MIRROR_NAMES,
    Mirror,
    MLflowMirror,
    TensorBoardMirror,
    WandbMirror,
    attach_mirrors,
    check_mirror_available,
    make_mirror,
    metric_tag,
)
from collapselab.store.row_keys import ROW_KEY, DuplicateRowError
from collapselab.store.run import RUN_STATUSES, Run, RunStatus, interruption
from collapselab.store.zero_error import (
    ZERO_ERROR_METRIC,
    first_zero_error,
    reaches_zero_error,
    zero_error_epoch,
)

__all__ = [
    "ARRAYS_DIR",
    "CHECKPOINTS_DIR",
    "CLAIMS_FILE",
    "DAMAGED",
    "FIGURES_DIR",
    "MANIFEST_FILE",
    "METRICS_FILE",
    "METRIC_COLUMNS",
    "MIRROR_NAMES",
    "NO_EPOCH",
    "REPORT_FILE",
    "ROW_KEY",
    "RUN_COLUMNS",
    "RUN_STATUSES",
    "STALE",
    "ZERO_ERROR_METRIC",
    "Checkpoint",
    "CheckpointError",
    "DamagedRunError",
    "DamagedRunsWarning",
    "DuplicateRowError",
    "MLflowMirror",
    "Mirror",
    "QueryError",
    "RootError",
    "Run",
    "RunLockedError",
    "RunStatus",
    "TensorBoardMirror",
    "WandbMirror",
    "atomic_write",
    "attach_mirrors",
    "check_mirror_available",
    "check_root",
    "check_run",
    "connect",
    "first_zero_error",
    "interruption",
    "list_runs",
    "make_mirror",
    "metric_tag",
    "prepare_root",
    "query",
    "reaches_zero_error",
    "read_manifest",
    "run_problem",
    "set_aside",
    "to_jsonable",
    "zero_error_epoch",
]
