"""Discover the runs under a root directory and query them together with DuckDB.

:func:`query` exposes two views:

``metrics``
    every run's ``metrics.parquet``, with a ``run_id`` column first:
    ``run_id, step, epoch, split, layer, metric, value``.
``runs``
    one row per run manifest (see :data:`RUN_COLUMNS`); ``config`` holds the
    configuration as a JSON string (use DuckDB's ``json_extract`` on it).

Example::

    query("runs", "SELECT run_id, max(value) FROM metrics "
                  "WHERE metric = 'accuracy' AND split = 'test' GROUP BY run_id")
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from collapselab.store.run import MANIFEST_FILE, METRICS_FILE

RUN_COLUMNS: tuple[str, ...] = (
    "run_id",
    "experiment",
    "preset",
    "status",
    "seed",
    "created",
    "started",
    "finished",
    "error",
    "zero_error_epoch",
    "config",
    "path",
)
"""Columns of :func:`list_runs` and of the ``runs`` view."""

_EMPTY_METRICS_SQL = (
    "SELECT CAST(NULL AS VARCHAR) AS run_id, CAST(NULL AS BIGINT) AS step, "
    "CAST(NULL AS BIGINT) AS epoch, CAST(NULL AS VARCHAR) AS split, "
    "CAST(NULL AS VARCHAR) AS layer, CAST(NULL AS VARCHAR) AS metric, "
    "CAST(NULL AS DOUBLE) AS value WHERE false"
)

_RUN_TYPES = {"seed": "BIGINT", "zero_error_epoch": "BIGINT"}
# Explicit casts: all-NULL pandas columns would otherwise get DuckDB's NULL type.
_RUNS_SELECT = ", ".join(
    f"CAST({col} AS {_RUN_TYPES.get(col, 'VARCHAR')}) AS {col}" for col in RUN_COLUMNS
)


def _manifest_paths(root: Path) -> list[Path]:
    if not root.exists():
        raise FileNotFoundError(f"run root {root} does not exist")
    if not root.is_dir():
        raise NotADirectoryError(f"run root {root} is not a directory")
    return sorted(root.rglob(MANIFEST_FILE))


def _manifest_row(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, json.JSONDecodeError) as err:
        warnings.warn(f"skipping unreadable run manifest {path}: {err}", stacklevel=3)
        return None
    if not isinstance(manifest, dict) or "id" not in manifest or "experiment" not in manifest:
        return None  # a manifest.json that is not ours
    timings = manifest.get("timings") or {}
    return {
        "run_id": str(manifest["id"]),
        "experiment": manifest.get("experiment"),
        "preset": manifest.get("preset", ""),
        "status": manifest.get("status"),
        "seed": manifest.get("seed"),
        "created": timings.get("created"),
        "started": timings.get("started"),
        "finished": timings.get("finished"),
        "error": manifest.get("error"),
        "zero_error_epoch": manifest.get("zero_error_epoch"),
        "config": json.dumps(manifest.get("config", {}), sort_keys=True),
        "path": str(path.parent),
    }


def list_runs(root: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per run found under ``root`` (searched recursively), sorted by creation time.

    Columns: :data:`RUN_COLUMNS`. A root without runs gives an empty frame with these columns.
    """
    rows = [r for p in _manifest_paths(Path(root)) if (r := _manifest_row(p)) is not None]
    frame = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    frame["seed"] = frame["seed"].astype("Int64")
    frame["zero_error_epoch"] = frame["zero_error_epoch"].astype("Int64")
    for col in RUN_COLUMNS:
        if col not in ("seed", "zero_error_epoch"):
            frame[col] = frame[col].astype(object)
    return frame.sort_values(["created", "run_id"], kind="stable").reset_index(drop=True)


def connect(root: str | os.PathLike[str]) -> Any:
    """An in-memory DuckDB connection with the ``metrics`` and ``runs`` views over ``root``.

    The views reflect the files at the time of the call.
    """
    import duckdb

    runs = list_runs(root)
    con = duckdb.connect(database=":memory:")
    con.register("_runs_frame", runs)
    con.execute(f"CREATE VIEW runs AS SELECT {_RUNS_SELECT} FROM _runs_frame")
    files = [
        (run_id, str(Path(path) / METRICS_FILE))
        for run_id, path in zip(runs["run_id"], runs["path"], strict=True)
        if (Path(path) / METRICS_FILE).is_file()
    ]
    if not files:
        con.execute(f"CREATE VIEW metrics AS {_EMPTY_METRICS_SQL}")
        return con
    con.register("_metric_files", pd.DataFrame(files, columns=["run_id", "filename"]))
    file_list = "[" + ", ".join(_sql_string(f) for _, f in files) + "]"
    con.execute(
        "CREATE VIEW metrics AS "
        "SELECT f.run_id, m.step, m.epoch, m.split, m.layer, m.metric, m.value "
        f"FROM read_parquet({file_list}, filename = true) AS m "
        "JOIN _metric_files AS f ON m.filename = f.filename"
    )
    return con


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def query(root: str | os.PathLike[str], sql: str) -> pd.DataFrame:
    """Run DuckDB ``sql`` over the views ``metrics`` and ``runs`` of every run under ``root``.

    Args:
        root: directory holding runs (searched recursively for ``manifest.json``).
        sql: a DuckDB SQL statement, e.g.
            ``"SELECT run_id, avg(value) FROM metrics WHERE metric='loss' GROUP BY run_id"``.

    Returns:
        the result as a pandas DataFrame.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise ValueError("sql must be a non-empty SQL string")
    con = connect(root)
    try:
        return con.execute(sql).df()
    finally:
        con.close()
