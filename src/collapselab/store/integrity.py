"""Damaged runs: detect a run directory whose files can no longer be trusted.

A run is *damaged* when

* ``manifest.json`` is not a readable JSON object with the run's required keys (a truncated
  or overwritten manifest), or
* ``metrics.parquet`` cannot be read as a metric table (truncated, overwritten, another
  schema), or
* ``metrics.parquet`` is missing or holds fewer rows than the manifest's ``metrics_rows``
  (the number of rows the run last wrote; :meth:`collapselab.store.Run.flush` keeps it), or
* (``thorough`` checks) a recorded file of a completed run is missing or changed: when a run
  completes, the SHA-256 of every file it recorded (the metric table, arrays, checkpoints,
  ensemble members: everything but the manifest, the lock and what is rebuilt from them,
  the figures, ``claims.json`` and ``report.html``) goes into the manifest's ``checksums``
  (:func:`file_checksums`), so bytes flipped inside a table whose footer is intact are
  found; or
* (``thorough`` checks) an unfinished run has checkpoints and none of them can be read, so
  it cannot resume.

The store's own writes never produce these states (every file is replaced atomically, and
``metrics_rows`` is written after the table grows and before it shrinks, so a crash between
the two leaves ``metrics_rows`` at most the table's row count). They come from outside:
a disk filling up, a copy interrupted, a file edited by hand.

:func:`run_problem` names what is wrong in one line (file, path, reason), or returns
``None`` for a sound run; :class:`DamagedRunError` carries that line. Listing and queries
skip damaged runs with one warning that counts them; ``collapselab run`` and ``reproduce``
start a damaged run again instead of trusting it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from collapselab.store import lock
from collapselab.store.checkpoints import readable_problem
from collapselab.store.metrics_table import METRIC_SCHEMA

MANIFEST_FILE = "manifest.json"
METRICS_FILE = "metrics.parquet"
DAMAGED_DIR = ".damaged"
"""Where :func:`set_aside` moves damaged runs, under the root (hidden: not searched)."""
REQUIRED_MANIFEST_KEYS = ("id", "experiment", "config", "status")

_WHAT_TO_DO = "re-run it (collapselab run/reproduce starts it again) or delete the run directory"


class DamagedRunError(ValueError):
    """A run directory whose manifest or metric table cannot be trusted.

    Attributes:
        path: the run directory.
        problem: what is wrong, naming the file (``"metrics.parquet is truncated ..."``).
    """

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"damaged run {self.path}: {problem}; {_WHAT_TO_DO}")


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of the run directory ``path``.

    Raises ``FileNotFoundError`` when ``path`` holds no ``manifest.json`` (not a run) and
    :class:`DamagedRunError` when it is not a JSON object with the required keys.
    """
    run_dir = Path(path)
    manifest_path = run_dir / MANIFEST_FILE
    if not manifest_path.is_file():
        raise FileNotFoundError(
            f"{manifest_path} not found: {run_dir} is not a run directory "
            "(expected a folder created by Run.create)"
        )
    try:
        with open(manifest_path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except UnicodeDecodeError as error:
        raise DamagedRunError(run_dir, f"{MANIFEST_FILE} is not UTF-8 text ({error})") from None
    except json.JSONDecodeError as error:
        raise DamagedRunError(
            run_dir, f"{MANIFEST_FILE} is not valid JSON (truncated? {error})"
        ) from None
    if not isinstance(manifest, dict):
        raise DamagedRunError(run_dir, f"{MANIFEST_FILE} is not a JSON object")
    missing = [key for key in REQUIRED_MANIFEST_KEYS if key not in manifest]
    if missing:
        raise DamagedRunError(run_dir, f"{MANIFEST_FILE} lacks the required keys {missing}")
    return manifest


def metrics_problem(
    run_dir: str | os.PathLike[str], expected_rows: int | None, thorough: bool = False
) -> str | None:
    """What is wrong with ``run_dir/metrics.parquet``, or ``None``.

    Args:
        run_dir: the run directory.
        expected_rows: the manifest's ``metrics_rows`` (``None``: not recorded, as in runs
            written before it was; then only a present file is checked).
        thorough: decode every page (reads the whole table) instead of only the footer and
            schema (reads a few kilobytes).
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        if expected_rows:
            return f"{METRICS_FILE} is missing (the manifest records {expected_rows} rows)"
        return None
    try:
        if thorough:
            n_rows = pq.read_table(path, schema=METRIC_SCHEMA).num_rows
        else:
            parquet = pq.ParquetFile(path)
            schema = parquet.schema_arrow
            if not schema.equals(METRIC_SCHEMA, check_metadata=False):
                return f"{METRICS_FILE} has columns {schema.names}, not a metric table"
            n_rows = parquet.metadata.num_rows
    except (OSError, pa.ArrowException) as error:
        return f"{METRICS_FILE} cannot be read ({_first_line(error)})"
    if expected_rows is not None and n_rows < expected_rows:
        return f"{METRICS_FILE} holds {n_rows} rows, the manifest records {expected_rows}"
    return None


DERIVED = ("manifest.json", lock.LOCK_FILE, "claims.json", "report.html", "figures")
"""What :func:`file_checksums` leaves out: the manifest that holds the checksums, the lock,
and what ``collapselab report`` rebuilds from the recorded results."""


def file_checksums(run_dir: str | os.PathLike[str]) -> dict[str, str]:
    """``relative path -> SHA-256`` of every file the run recorded (all but :data:`DERIVED`),
    in sorted order."""
    root = Path(run_dir)
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and relative.parts[0] not in DERIVED:
            found[relative.as_posix()] = _sha256(path)
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checksum_problem(run_dir: str | os.PathLike[str], recorded: Any) -> str | None:
    """The first recorded file that is missing or whose bytes changed, or ``None``."""
    if not isinstance(recorded, dict):
        return None
    root = Path(run_dir)
    for name, digest in sorted(recorded.items()):
        path = root / name
        if not path.is_file():
            return f"{name} is missing (recorded when the run completed)"
        if _sha256(path) != digest:
            return f"{name} changed after the run completed (its SHA-256 differs)"
    return None


def run_problem(path: str | os.PathLike[str], thorough: bool = False) -> str | None:
    """What is wrong with the run directory ``path`` in one line, or ``None`` when sound.

    ``thorough`` decodes the whole metric table instead of only its footer (see
    :func:`metrics_problem`), checks the recorded files of a completed run against their
    checksums and, for an unfinished run, that a checkpoint can be read. A directory
    without ``manifest.json`` raises ``FileNotFoundError``: it is not a run.
    """
    try:
        manifest = read_manifest(path)
    except DamagedRunError as error:
        return error.problem
    expected = manifest.get("metrics_rows")
    expected = expected if isinstance(expected, int) and not isinstance(expected, bool) else None
    problem = metrics_problem(path, expected, thorough=thorough)
    if problem is not None or not thorough:
        return problem
    if manifest.get("status") == "completed":
        return checksum_problem(path, manifest.get("checksums"))
    return readable_problem(path)


def check_run(path: str | os.PathLike[str], thorough: bool = False) -> None:
    """Raise :class:`DamagedRunError` when the run directory ``path`` is damaged."""
    problem = run_problem(path, thorough=thorough)
    if problem is not None:
        raise DamagedRunError(path, problem)


def set_aside(path: str | os.PathLike[str]) -> Path:
    """Move the run directory ``path`` to ``<root>/.damaged/<name>-<UTC time>`` and return
    the new path, so that the run can be started again under its own name while the damaged
    files stay available for inspection.

    Raises :class:`~collapselab.store.RunLockedError` when another process writes the run.
    """
    run_dir = Path(path)
    lock.acquire(run_dir)
    try:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
        target = run_dir.parent / DAMAGED_DIR / f"{run_dir.name}-{stamp}"
        target.parent.mkdir(exist_ok=True)
        run_dir.rename(target)
    finally:
        lock.release(run_dir)
    return target


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
