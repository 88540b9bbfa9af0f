"""Discover the runs under a root directory and query them together with DuckDB.

:func:`query` exposes two views (read-only: statements that write or attach are refused,
:data:`READ_ONLY_STATEMENTS`):

``metrics``
    every run's ``metrics.parquet``, with a ``run_id`` column first:
    ``run_id, step, epoch, split, layer, metric, value``.
``runs``
    one row per run manifest (see :data:`RUN_COLUMNS`); ``config`` holds the
    configuration as a JSON string (use DuckDB's ``json_extract`` on it).

Damaged runs (:mod:`collapselab.store.integrity`) are listed by :func:`list_runs` with the
status ``"damaged"`` and the problem as their ``error``; both views leave them out, with one
:class:`DamagedRunsWarning` that counts and names them. Directories whose name starts with
``.`` (such as ``.damaged/``, where damaged runs are moved before being run again) are not
searched.

Example::

    query("runs", "SELECT run_id, max(value) FROM metrics "
                  "WHERE metric = 'accuracy' AND split = 'test' GROUP BY run_id")
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pandas as pd

from collapselab.store.integrity import (
    MANIFEST_FILE,
    METRICS_FILE,
    DamagedRunError,
    metrics_problem,
    read_manifest,
)
from collapselab.store.lock import holder_alive

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

DAMAGED = "damaged"
"""The status :func:`list_runs` gives a damaged run (never stored in a manifest)."""

READ_ONLY_STATEMENTS = (
    "SELECT (also WITH, FROM-first, VALUES, DESCRIBE, SHOW, SUMMARIZE)",
    "PIVOT / UNPIVOT",
    "EXPLAIN [ANALYZE] of those",
)
"""What :func:`query` runs; anything else (COPY, ATTACH, CREATE, INSERT, SET, INSTALL, ...)
is refused, so that a query never writes a file or changes a database."""


class QueryError(ValueError):
    """A query that DuckDB could not run, or that :func:`query` refuses (it would write)."""


class DamagedRunsWarning(UserWarning):
    """Damaged runs were left out of a query; ``damaged`` lists ``(path, problem)``."""

    def __init__(self, damaged: list[tuple[str, str]]) -> None:
        self.damaged = list(damaged)
        named = "; ".join(f"{path}: {problem}" for path, problem in self.damaged)
        super().__init__(
            f"skipped {len(self.damaged)} damaged run(s) (re-run them or delete them): {named}"
        )


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


def check_root(root: str | os.PathLike[str]) -> Path:
    """``root`` as a path; ``FileNotFoundError`` / ``NotADirectoryError`` when it is not a
    directory."""
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"run root {root} does not exist")
    if not root.is_dir():
        raise NotADirectoryError(f"run root {root} is a file, not a directory of runs")
    return root


STALE = "stale"
"""The ``status`` the ``runs`` view shows for a run whose manifest says ``running`` while
the process that wrote it is gone (killed: its lock names a process id that no longer
exists). The manifest is left as it is; the next run of the experiment resumes it."""


class RootError(ValueError):
    """The folder for new runs cannot be made or written."""


def prepare_root(root: str | os.PathLike[str]) -> Path:
    """The folder that will hold new runs, created when missing.

    Raises:
        NotADirectoryError: ``root`` is a file.
        RootError: it cannot be created or written (a read-only or virtual file system, a
            name too long), with the system's reason in one line.
    """
    path = Path(root).expanduser()
    try:
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(
                f"run root {root} is a file, not a folder: give a folder for the runs "
                "(it is created when missing)"
            )
        path.mkdir(parents=True, exist_ok=True)
    except NotADirectoryError:
        raise
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise RootError(f"cannot create the folder for the runs, {root}: {reason}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise RootError(f"cannot write runs into {root}: permission denied")
    return path


def _manifest_paths(root: Path) -> list[Path]:
    found = []
    for directory, subdirs, files in os.walk(check_root(root)):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        if MANIFEST_FILE in files:
            found.append(Path(directory) / MANIFEST_FILE)
    return sorted(found)


def _manifest_row(path: Path) -> dict[str, Any]:
    run_dir = path.parent
    try:
        manifest = read_manifest(run_dir)
    except (DamagedRunError, OSError) as error:
        problem = getattr(error, "problem", f"{MANIFEST_FILE} cannot be read ({error})")
        return _damaged_row(run_dir, {}, problem)
    expected = manifest.get("metrics_rows")
    problem = metrics_problem(run_dir, expected if isinstance(expected, int) else None)
    if problem is not None:
        return _damaged_row(run_dir, manifest, problem)
    timings = manifest.get("timings") or {}
    status = manifest.get("status")
    if status == "running" and holder_alive(run_dir) is False:
        status = STALE  # its writer was killed: the next run of it resumes it
    return {
        "run_id": str(manifest["id"]),
        "experiment": manifest.get("experiment"),
        "preset": manifest.get("preset", ""),
        "status": status,
        "seed": manifest.get("seed"),
        "created": timings.get("created"),
        "started": timings.get("started"),
        "finished": timings.get("finished"),
        "error": manifest.get("error"),
        "zero_error_epoch": manifest.get("zero_error_epoch"),
        "config": json.dumps(manifest.get("config", {}), sort_keys=True),
        "path": str(run_dir),
    }


def _damaged_row(run_dir: Path, manifest: dict[str, Any], problem: str) -> dict[str, Any]:
    timings = manifest.get("timings") if isinstance(manifest.get("timings"), dict) else {}
    return {
        "run_id": str(manifest.get("id", run_dir.name)),
        "experiment": manifest.get("experiment"),
        "preset": manifest.get("preset", ""),
        "status": DAMAGED,
        "seed": manifest.get("seed") if isinstance(manifest.get("seed"), int) else None,
        "created": timings.get("created"),
        "started": timings.get("started"),
        "finished": timings.get("finished"),
        "error": problem,
        "zero_error_epoch": None,
        "config": json.dumps(manifest.get("config", {}), sort_keys=True, default=str),
        "path": str(run_dir),
    }


def list_runs(root: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per run found under ``root`` (searched recursively), sorted by creation time.

    Columns: :data:`RUN_COLUMNS`. A damaged run has the status :data:`DAMAGED` and its
    problem (file and reason) as ``error``. A root without runs gives an empty frame with
    these columns; a root that is not a directory raises ``FileNotFoundError`` or
    ``NotADirectoryError``.
    """
    rows = [_manifest_row(p) for p in _manifest_paths(Path(root))]
    frame = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    frame["seed"] = frame["seed"].astype("Int64")
    frame["zero_error_epoch"] = frame["zero_error_epoch"].astype("Int64")
    for col in RUN_COLUMNS:
        if col not in ("seed", "zero_error_epoch"):
            frame[col] = frame[col].astype(object)
    return frame.sort_values(["created", "run_id"], kind="stable").reset_index(drop=True)


def connect(root: str | os.PathLike[str]) -> Any:
    """An in-memory DuckDB connection with the ``metrics`` and ``runs`` views over ``root``.

    The views reflect the files at the time of the call. Damaged runs are left out, with a
    :class:`DamagedRunsWarning`. The connection itself is not restricted: :func:`query`
    is the read-only entry.
    """
    return _connect(root, excluded=())


def _connect(root: str | os.PathLike[str], excluded: Collection[str]) -> Any:
    import duckdb

    runs = list_runs(root)
    bad = (runs["status"] == DAMAGED) | runs["path"].isin(list(excluded))
    if bad.any():
        damaged = [
            (str(path), str(error))
            for path, error in zip(runs.loc[bad, "path"], runs.loc[bad, "error"], strict=True)
        ]
        warnings.warn(DamagedRunsWarning(damaged), stacklevel=3)
        runs = runs[~bad].reset_index(drop=True)
    # No extension is installed or loaded behind the user's back (no network access).
    con = duckdb.connect(
        database=":memory:",
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False},
    )
    con.register("_runs_frame", runs)
    con.execute(f"CREATE VIEW runs AS SELECT {_RUNS_SELECT} FROM _runs_frame")
    files = [
        (run_id, str((Path(path) / METRICS_FILE).resolve()))
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
        sql: read-only DuckDB SQL (:data:`READ_ONLY_STATEMENTS`), e.g.
            ``"SELECT run_id, avg(value) FROM metrics WHERE metric='loss' GROUP BY run_id"``.

    Returns:
        the result of the last statement as a pandas DataFrame.

    Raises:
        QueryError: the SQL does not parse, names an unknown column or table, fails, or
            would write (COPY, ATTACH, CREATE, INSERT, SET, ...); the message is DuckDB's
            first line plus what to do.
        FileNotFoundError, NotADirectoryError: ``root`` is not a directory.

    Damaged runs are left out with a :class:`DamagedRunsWarning`: those detected from their
    manifest and the metric table's footer at once, and, when DuckDB fails on a table whose
    pages are damaged, those found by decoding every table, after which the query is run
    again without them.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise QueryError("the SQL is empty; e.g. SELECT * FROM runs")
    check_root(root)
    import duckdb

    with warnings.catch_warnings(record=True) as first_warnings:
        warnings.simplefilter("always")
        con = _connect(root, excluded=())
    _confine(con, root)
    try:
        _refuse_writes(con, sql)
        try:
            result = con.execute(sql).df()
        except duckdb.Error as error:
            damaged = [] if _is_users_mistake(error) else _damaged_tables(con)
            if not damaged:
                _replay(first_warnings)
                raise QueryError(_query_message(error)) from None
        else:
            _replay(first_warnings)
            return result
        con.close()
        con = _connect(root, excluded=damaged)  # warns once, about every damaged run
        _confine(con, root)
        try:
            return con.execute(sql).df()
        except duckdb.Error as error:
            raise QueryError(_query_message(error)) from None
    finally:
        con.close()


def _confine(con: Any, root: str | os.PathLike[str]) -> None:
    """No file outside ``root`` for the user's SQL: the views read the run tables under it,
    and ``read_csv('/etc/passwd')``, ``read_text`` or ``glob`` elsewhere are refused
    (DuckDB's ``allowed_directories`` with external access off, which cannot be turned back
    on while the connection is open)."""
    folder = str(Path(root).resolve()) + os.sep
    con.execute(f"SET allowed_directories = [{_sql_string(folder)}]")
    con.execute("SET enable_external_access = false")


def _replay(caught: list[warnings.WarningMessage]) -> None:
    for message in caught:
        warnings.warn(message.message, stacklevel=3)


_VIEWS_HINT = (
    "views: metrics(run_id, step, epoch, split, layer, metric, value) and "
    f"runs({', '.join(RUN_COLUMNS)})"
)


def _query_message(error: Exception) -> str:
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    first = lines[0] if lines else type(error).__name__
    hint = next((line for line in lines[1:] if line.startswith("Candidate")), None)
    text = f"query failed: {first}"
    if hint:
        text += f" ({hint})"
    if "disabled by configuration" in first:
        text += " (query reads the runs under its root only)"
    return f"{text}; {_VIEWS_HINT}"


def _refuse_writes(con: Any, sql: str) -> None:
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as error:
        raise QueryError(_query_message(error)) from None
    for statement in statements:
        refused = _refused_kind(statement.type.name, statement.query)
        if refused:
            raise QueryError(
                f"collapselab queries are read-only: {refused} statements are refused (allowed: "
                f"{'; '.join(READ_ONLY_STATEMENTS)}); to save a result, use --format csv "
                "and redirect the output"
            )


_EXPLAIN = re.compile(r"^\s*explain\s+(analyze\s+)?", re.IGNORECASE)
_PIVOT = re.compile(r"^\s*(un)?pivot\b", re.IGNORECASE)


def _refused_kind(kind: str, text: str) -> str | None:
    """The statement kind when it is refused, else ``None`` (see READ_ONLY_STATEMENTS)."""
    if kind == "SELECT":
        return None
    if kind == "MULTI" and _PIVOT.match(text):  # PIVOT runs as several statements
        return None
    if kind == "EXPLAIN":
        inner = _EXPLAIN.sub("", text, count=1)
        if inner == text:
            return kind
        import duckdb

        try:
            statements = duckdb.connect(":memory:").extract_statements(inner)
        except duckdb.Error:
            return kind
        for statement in statements:
            refused = _refused_kind(statement.type.name, statement.query)
            if refused:
                return f"EXPLAIN {refused}"
        return None
    return text.split(None, 1)[0].upper() if text.strip() else kind


def _is_users_mistake(error: Exception) -> bool:
    """Errors of the SQL itself, raised before any file is read."""
    import duckdb

    return isinstance(
        error, (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException)
    )


def _damaged_tables(con: Any) -> list[str]:
    """Run directories whose metric table fails a full decode (the files of the view)."""
    try:
        files = con.execute("SELECT filename FROM _metric_files").fetchall()
    except Exception:  # no metric file at all: the error was not about one
        return []
    return [
        str(Path(name).parent)
        for (name,) in files
        if metrics_problem(Path(name).parent, None, thorough=True) is not None
    ]
