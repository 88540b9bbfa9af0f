"""A run: one directory holding everything a training or theory experiment produced.

Layout (docs/store.md, "A run directory")::

    <root>/<run id>/
        manifest.json      id, experiment, preset, config, seed, versions, status, timings
        metrics.parquet    long-format metric table (see :mod:`collapselab.store.metrics_table`)
        arrays/<name>.npz  spectra, trajectories, any array data
        figures/<name>.png
        checkpoints/step-<step>.pt
        claims.json        written by the experiments layer through :meth:`Run.write_json`
        report.html        written by the report layer through :meth:`Run.write_text`

Every file is written atomically (temporary file in the same directory, fsync, rename), so a
crash never leaves a half-written manifest, metric table or checkpoint.

Metric rows are buffered in memory by :meth:`Run.log` and written by :meth:`Run.flush`,
which rewrites ``metrics.parquet`` whole (runs record at most a few million rows, for which
this is cheap), records the row count in the manifest (``metrics_rows``, so that a lost or
truncated table is detected: :mod:`collapselab.store.integrity`) and forwards the rows to
the run's mirrors (TensorBoard, MLflow, W&B: :mod:`collapselab.store.mirrors`).

One value per key: a run holds at most one value per ``(step, split, layer, metric)``
(:mod:`collapselab.store.row_keys`). :meth:`Run.log` refuses a second, different value for a
key this ``Run`` object (one session) holds, written or buffered, with a
:class:`~collapselab.store.DuplicateRowError` naming the key, at the call that writes it (so
the buffer never holds a contradiction and the traceback points at the second writer). A key
written by an earlier session of a run that is not completed is superseded instead: a
restarted run recomputes what the stopped one recorded.

A run directory has one writing process at a time: the first write takes a lock
(:mod:`collapselab.store.lock`) that a second process cannot get. Any number of readers
may open it.

Resuming: a training loop that restarts from the checkpoint at step ``s`` calls
:meth:`Run.truncate_after` ``(s)``, which drops the metric rows with ``step > s`` (they will
be recorded again) and the checkpoints after ``s``, so the resumed run ends with exactly the
rows an uninterrupted run would have.
"""

from __future__ import annotations

import copy
import datetime as _dt
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import warnings
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa

from collapselab._version import __version__
from collapselab.checks import check_choice, check_int
from collapselab.store import lock
from collapselab.store._atomic import atomic_open, atomic_write_json, atomic_write_text
from collapselab.store._json import json_equal, to_jsonable
from collapselab.store.checkpoints import Checkpoint, checkpoints, newest_readable
from collapselab.store.integrity import (
    DamagedRunError,
    file_checksums,
    metrics_problem,
    read_manifest,
)
from collapselab.store.layout import (
    ARRAYS_DIR,
    CHECKPOINTS_DIR,
    FIGURES_DIR,
    MANIFEST_FILE,
    METRICS_FILE,
)
from collapselab.store.metrics_table import (
    MetricRow,
    empty_frame,
    frame_from_rows,
    make_row,
    read_metrics,
    rows_from_records,
    write_metrics,
)
from collapselab.store.row_keys import RunKeys

RunStatus = Literal["created", "running", "completed", "failed", "interrupted"]
RUN_STATUSES: tuple[str, ...] = ("created", "running", "completed", "failed", "interrupted")
_TERMINAL = ("completed", "failed", "interrupted")


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_RESERVED_FILES = (MANIFEST_FILE, METRICS_FILE, lock.LOCK_FILE)


MAX_NAME = 200
"""Longest run id or experiment name: a directory name (file systems take 255 bytes; the
lock and the temporary files of atomic writes add to it)."""


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name) or ".." in name:
        raise ValueError(
            f"{what} must be a non-empty name of letters, digits, '.', '_' or '-' "
            f"starting with a letter or digit, got {name!r}"
        )
    if len(name) > MAX_NAME:
        raise ValueError(f"{what} is {len(name)} characters long; at most {MAX_NAME}")
    return name


def _strip_suffix(name: str, suffix: str) -> str:
    return name[: -len(suffix)] if name.endswith(suffix) else name


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def collect_versions() -> dict[str, str]:
    """Versions of Python, the platform and the numerical stack, for the manifest."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": _package_version("torch"),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "collapselab": __version__,
    }


class Run:
    """A run directory; create with :meth:`create`, reopen with :meth:`open`.

    Example::

        run = Run.create("runs", "mse-nc", preset="quick", config={"lr": 0.01}, seed=0)
        run.log(step=10, metric="loss", value=0.3, epoch=1)
        run.flush()
        run.set_status("completed")
    """

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        # Private: use Run.create, Run.open or Run.open_or_create.
        self._path = path
        self._manifest = manifest
        self._table: pd.DataFrame | None = None  # rows on disk, loaded lazily
        self._pending: list[MetricRow] = []
        self._keys: RunKeys | None = None  # the keys held, built at the first write
        self._mirrors: list[Any] = []
        self._locked = False  # holds this process's write lock on the directory
        self._running_here = False  # this object set the status "running"

    # ----------------------------------------------------------------- construction
    @classmethod
    def create(
        cls,
        root: str | os.PathLike[str],
        experiment: str,
        preset: str = "",
        config: Mapping[str, Any] | Any = None,
        seed: int = 0,
        run_id: str | None = None,
    ) -> Run:
        """Create a new run directory under ``root`` (created if needed).

        Args:
            root: the directory holding runs.
            experiment: experiment name (letters, digits, ``._-``).
            preset: preset name, ``""`` for none.
            config: the run's configuration: a JSON-serialisable mapping or a dataclass.
            seed: the seed, recorded in the manifest.
            run_id: the directory name; default
                ``<experiment>[-<preset>]-<UTC yyyymmdd-HHMMSS>-<6 hex of config hash>``.
                An existing ``run_id`` raises ``FileExistsError`` (use :meth:`open_or_create`
                to resume it).
        """
        _check_name(experiment, "experiment")
        if preset:
            _check_name(preset, "preset")
        seed = check_int("seed", seed)
        config_json = to_jsonable({} if config is None else config, "config")
        if not isinstance(config_json, dict):
            raise TypeError(f"config must be a mapping or dataclass, got {type(config).__name__}")
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        created = _now()
        if run_id is None:
            path = cls._make_unique_dir(root, experiment, preset, config_json, int(seed))
        else:
            _check_name(run_id, "run_id")
            path = root / run_id
            try:
                path.mkdir()
            except FileExistsError:
                raise FileExistsError(
                    f"run directory {path} already exists; use Run.open_or_create to resume it"
                ) from None
        manifest = {
            "id": path.name,
            "experiment": experiment,
            "preset": preset,
            "config": config_json,
            "seed": int(seed),
            "status": "created",
            "error": None,
            "versions": collect_versions(),
            "timings": {"created": created, "started": None, "finished": None},
            "durations": {},
        }
        run = cls(path, manifest)
        run._write_manifest()
        return run

    @staticmethod
    def _make_unique_dir(
        root: Path, experiment: str, preset: str, config: dict[str, Any], seed: int
    ) -> Path:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
        digest = hashlib.sha1(
            json.dumps([config, seed], sort_keys=True).encode(), usedforsecurity=False
        ).hexdigest()[:6]
        stem = "-".join(p for p in (experiment, preset, stamp, digest) if p)
        for k in range(1, 10_000):
            path = root / (stem if k == 1 else f"{stem}-{k}")
            try:
                path.mkdir()  # atomic: two processes never get the same directory
                return path
            except FileExistsError:
                continue
        raise RuntimeError(f"could not find a free run directory name for {stem} under {root}")

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Run:
        """Open an existing run directory (the one holding ``manifest.json``).

        Raises ``FileNotFoundError`` when ``path`` is not a run directory and
        :class:`~collapselab.store.DamagedRunError` when its manifest is unreadable (the
        metric table is checked when it is first read).
        """
        path = Path(path)
        return cls(path, read_manifest(path))

    @classmethod
    def open_or_create(
        cls,
        root: str | os.PathLike[str],
        experiment: str,
        preset: str = "",
        config: Mapping[str, Any] | Any = None,
        seed: int = 0,
        *,
        run_id: str,
    ) -> Run:
        """Open run ``root/run_id`` if it exists (to resume it), else create it.

        An existing run must have the same experiment, preset, config and seed; otherwise a
        ``ValueError`` lists the differing fields, because resuming under another
        configuration would silently mix two experiments in one run.
        """
        _check_name(run_id, "run_id")
        path = Path(root) / run_id
        if not (path / MANIFEST_FILE).is_file():
            return cls.create(root, experiment, preset, config, seed, run_id=run_id)
        run = cls.open(path)
        wanted = {
            "experiment": experiment,
            "preset": preset,
            "config": to_jsonable({} if config is None else config, "config"),
            "seed": int(seed),
        }
        differing = [k for k, v in wanted.items() if not json_equal(run._manifest.get(k), v)]
        if differing:
            raise ValueError(
                f"run {path} exists with different {', '.join(differing)}; "
                "use another run_id or the same settings to resume it"
            )
        return run

    # ------------------------------------------------------------------- accessors
    @property
    def path(self) -> Path:
        """The run directory."""
        return self._path

    @property
    def id(self) -> str:
        """The run id (the directory name)."""
        return str(self._manifest["id"])

    @property
    def experiment(self) -> str:
        return str(self._manifest["experiment"])

    @property
    def preset(self) -> str:
        return str(self._manifest.get("preset", ""))

    @property
    def seed(self) -> int:
        return int(self._manifest.get("seed", 0))

    @property
    def config(self) -> dict[str, Any]:
        """A copy of the recorded configuration."""
        return copy.deepcopy(self._manifest["config"])

    @property
    def status(self) -> str:
        return str(self._manifest["status"])

    @property
    def manifest(self) -> dict[str, Any]:
        """A copy of the manifest."""
        return copy.deepcopy(self._manifest)

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, status={self.status!r}, path={str(self._path)!r})"

    # ------------------------------------------------------------- writing, locking
    def _acquire(self) -> None:
        """Take the directory's write lock before the first write of this object."""
        if not self._locked:
            lock.acquire(self._path)
            self._locked = True
            self._release = weakref.finalize(self, lock.release, self._path)

    def close(self) -> None:
        """Flush, close the mirrors and release the write lock (reopened on the next write).

        Not needed for correctness (the lock goes with the process), but lets another
        process write this run while this object is still alive.
        """
        self.flush()
        mirrors, self._mirrors = self._mirrors, []
        for mirror in mirrors:
            _call_mirror(mirror, "close")
        if self._locked:
            self._release()
            self._locked = False

    # -------------------------------------------------------------------- manifest
    def _write_manifest(self) -> None:
        self._acquire()
        atomic_write_json(self._path / MANIFEST_FILE, self._manifest)

    def update_manifest(self, **fields: Any) -> None:
        """Set top-level manifest fields (JSON-serialisable) and rewrite the manifest.

        ``id`` cannot be changed; use :meth:`set_status` for the status.
        """
        for key in ("id", "status"):
            if key in fields:
                raise ValueError(f"manifest field {key!r} cannot be set by update_manifest")
        for key, value in fields.items():
            self._manifest[key] = to_jsonable(value, key)
        self._write_manifest()

    def record_zero_error_epoch(self, epoch: int | None) -> None:
        """Record the first epoch with zero training error, keeping the earliest one known.

        Every detection applies the one rule of :mod:`collapselab.store.zero_error` (train
        accuracy exactly 1.0 at an epoch's end) to the evaluations its writer sees: the
        training loop to its evaluated epochs, a Monitor to its measured epochs. Where the
        loop evaluates every epoch a Monitor measures (the default, ``eval_every=1``) the
        loop's detection is the earliest and equals :func:`~collapselab.store.zero_error_epoch`
        of the run's rows; with a sparser ``eval_every`` a Monitor can see zero error first,
        and that earlier detection is kept. The field is written even when both are ``None``.
        """
        known = self._manifest.get("zero_error_epoch")
        self.update_manifest(zero_error_epoch=_earliest(known, epoch))

    def set_status(self, status: RunStatus, error: str | None = None) -> None:
        """Set the status (one of :data:`RUN_STATUSES`) and the matching timings.

        ``"running"`` records ``timings.started`` the first time and appends to
        ``timings.resumed`` when a stopped run starts again (not when already running);
        ``"completed"``, ``"failed"`` and ``"interrupted"`` record ``timings.finished``.
        ``error`` is stored for failed or interrupted runs and cleared otherwise.
        """
        check_choice("status", status, RUN_STATUSES)
        if error is not None and not isinstance(error, str):
            raise TypeError(f"error must be a str or None, got {type(error).__name__}")
        timings = self._manifest.setdefault("timings", {})
        now = _now()
        if status == "running" and self._running_here and self.status == "running":
            pass  # nested set-ups (an experiment, then its training loop): one session
        elif status == "running":
            # A manifest left "running" by a killed process is a stopped run too.
            if timings.get("started") is None:
                timings["started"] = now
            else:
                timings.setdefault("resumed", []).append(now)
            timings["finished"] = None
            self._running_here = True
        elif status in _TERMINAL:
            timings["finished"] = now
        self._manifest["status"] = status
        self._manifest["error"] = error if status in ("failed", "interrupted") else None
        if status == "completed":
            self._manifest["checksums"] = file_checksums(self._path)
        else:
            self._manifest.pop("checksums", None)
        self._write_manifest()

    def add_duration(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to ``durations[name]`` (accumulates over resumed sessions)."""
        durations = self._manifest.setdefault("durations", {})
        durations[name] = float(durations.get(name, 0.0)) + float(seconds)
        self._write_manifest()

    # --------------------------------------------------------------------- metrics
    def log(
        self,
        step: int,
        metric: str,
        value: float,
        epoch: int | None = None,
        split: str = "train",
        layer: str = "",
    ) -> None:
        """Buffer one metric row (see :mod:`collapselab.store.metrics_table`); call
        :meth:`flush` to write it.

        Raises :class:`~collapselab.store.DuplicateRowError` when this session already
        holds a different value (or epoch) for ``(step, split, layer, metric)``
        (:mod:`collapselab.store.row_keys`); nothing is buffered then. The row of an earlier
        session with that key is superseded (dropped at the next :meth:`flush`), unless the
        run is completed."""
        self._admit([make_row(step, metric, value, epoch, split, layer)])

    def log_dict(
        self,
        step: int,
        values: Mapping[str, float],
        epoch: int | None = None,
        split: str = "train",
        layer: str = "",
    ) -> None:
        """Buffer one row per ``metric: value`` item, all at the same step/epoch/split/layer."""
        self._admit([make_row(step, m, v, epoch, split, layer) for m, v in values.items()])

    def log_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Buffer rows given as dicts with keys step, metric, value [, epoch, split, layer].

        All rows are validated, and checked against the run's keys, before any is buffered.
        """
        self._admit(rows_from_records(rows))

    def _admit(self, rows: list[MetricRow]) -> None:
        """Buffer validated rows after checking their keys (:class:`RunKeys`): a second value
        for a key this session holds is refused; an earlier session's row is superseded,
        unless the run is completed."""
        table = self._committed()
        if self._keys is None:
            self._keys = RunKeys(table, self._pending)
        self._keys.admit(rows, table, f"run {self.id}", supersede=self.status != "completed")
        self._pending.extend(rows)

    def _live(self) -> pd.DataFrame:
        """The written rows this session has not superseded."""
        table = self._committed()
        if self._keys is None or not self._keys.superseded:
            return table
        return table.drop(index=table.index[sorted(self._keys.superseded)])

    def _committed(self) -> pd.DataFrame:
        if self._table is None:
            expected = self._manifest.get("metrics_rows")
            problem = metrics_problem(self._path, expected if isinstance(expected, int) else None)
            if problem is None:
                try:
                    self._table = read_metrics(self._path / METRICS_FILE)
                except (OSError, pa.ArrowException) as error:
                    problem = f"{METRICS_FILE} cannot be read ({str(error).strip()[:200]})"
            if problem is not None:
                raise DamagedRunError(self._path, problem)
        return self._table

    def _write_table(self, table: pd.DataFrame) -> None:
        """Replace ``metrics.parquet`` by ``table`` and keep ``metrics_rows`` a lower bound
        of its row count at every instant (written after a growing table, before a
        shrinking one), so that a crash in between is never mistaken for damage."""
        self._acquire()
        shrinking = len(table) < int(self._manifest.get("metrics_rows") or 0)
        if shrinking:
            self._manifest["metrics_rows"] = len(table)
            self._write_manifest()
        write_metrics(self._path / METRICS_FILE, table)
        self._table = table
        if not shrinking:
            self._manifest["metrics_rows"] = len(table)
            self._write_manifest()

    def flush(self) -> None:
        """Write buffered rows: rewrite ``metrics.parquet`` atomically with all rows, then
        hand the new rows to the mirrors."""
        if not self._pending:
            return
        table = self._concat(self._live(), frame_from_rows(self._pending))
        self._write_table(table)
        written, self._pending = self._pending, []
        if self._keys is not None:
            self._keys.flushed(written, table)
        self._mirror_rows(written)

    # --------------------------------------------------------------------- mirrors
    def add_mirror(self, mirror: Any) -> None:
        """Forward every metric row this run writes from now on to ``mirror`` too.

        ``mirror`` is a :class:`collapselab.store.mirrors.Mirror` (TensorBoard, MLflow,
        W&B, or your own): its ``open(run)`` is called now, ``write(rows)`` after every
        :meth:`flush` with the rows written, ``close()`` by :meth:`close`. A mirror that
        raises is detached with a warning; the run itself goes on (the store is the record).
        """
        for hook in ("open", "write", "close"):
            if not callable(getattr(mirror, hook, None)):
                raise TypeError(
                    f"a mirror needs the methods open(run), write(rows) and close(); "
                    f"{type(mirror).__name__} has no {hook}()"
                )
        if _call_mirror(mirror, "open", self):
            self._mirrors.append(mirror)

    def remove_mirror(self, mirror: Any) -> None:
        """Flush (so ``mirror`` gets every row logged so far), then close and detach it."""
        self.flush()
        if mirror in self._mirrors:
            self._mirrors.remove(mirror)
            _call_mirror(mirror, "close")

    @property
    def mirrors(self) -> list[Any]:
        """The attached mirrors."""
        return list(self._mirrors)

    def _mirror_rows(self, rows: list[MetricRow]) -> None:
        for mirror in list(self._mirrors):
            if not _call_mirror(mirror, "write", rows):
                self._mirrors.remove(mirror)

    @staticmethod
    def _concat(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
        if len(a) == 0:
            return b.reset_index(drop=True)
        if len(b) == 0:
            return a.reset_index(drop=True)
        return pd.concat([a, b], ignore_index=True)

    def discard_pending(self) -> int:
        """Drop the buffered rows not yet written; returns how many were dropped."""
        n = len(self._pending)
        self._pending = []
        if self._keys is not None:
            self._keys.discard_pending()
        return n

    def metrics(self) -> pd.DataFrame:
        """All rows of this run, written and still buffered, in the order they were logged."""
        pending = frame_from_rows(self._pending) if self._pending else empty_frame()
        return self._concat(self._live(), pending).copy()

    def truncate_after(self, step: int) -> int:
        """Drop metric rows and checkpoints with ``step`` greater than ``step``.

        Used when resuming from the checkpoint at ``step``: what was recorded after it will
        be recorded again. Returns the number of metric rows dropped.
        """
        step = check_int("step", step, minimum=0)
        table = self._live()
        keep = table["step"].to_numpy() <= step
        dropped = int((~keep).sum())
        if dropped or len(table) < len(self._committed()):
            self._write_table(table[keep].reset_index(drop=True))
        n_pending = len(self._pending)
        self._pending = [r for r in self._pending if r[0] <= step]
        dropped += n_pending - len(self._pending)
        self._keys = None  # rebuilt at the next write: the kept rows are a stopped session's
        for ckpt in self.checkpoints():
            if ckpt.step > step:
                self._acquire()
                ckpt.path.unlink()
        return dropped

    # ---------------------------------------------------------------- arrays/files
    def _subdir(self, name: str) -> Path:
        self._acquire()  # every file written under the run goes through here or _file
        path = self._path / name
        path.mkdir(exist_ok=True)
        return path

    def save_array(self, name: str, **arrays: Any) -> Path:
        """Save named arrays (NumPy arrays, tensors, lists) to ``arrays/<name>.npz``."""
        name = _check_name(_strip_suffix(name, ".npz"), "array name")
        if not arrays:
            raise ValueError("save_array needs at least one array, e.g. save_array('x', a=...)")
        converted = {}
        for key, value in arrays.items():
            if hasattr(value, "detach"):
                value = value.detach().cpu().numpy()
            arr = np.asarray(value)
            if arr.dtype == object:
                raise TypeError(f"array {key!r} has dtype object; expected a numeric array")
            converted[key] = arr
        path = self._subdir(ARRAYS_DIR) / f"{name}.npz"
        with atomic_open(path, "wb") as handle:
            np.savez(handle, **converted)
        return path

    def load_array(self, name: str) -> dict[str, np.ndarray]:
        """Load ``arrays/<name>.npz`` as a dict of arrays."""
        name = _check_name(_strip_suffix(name, ".npz"), "array name")
        path = self._path / ARRAYS_DIR / f"{name}.npz"
        if not path.is_file():
            raise FileNotFoundError(
                f"array file {path} not found; saved arrays: {self.array_names()}"
            )
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}

    def array_names(self) -> list[str]:
        """Names of the saved array files (without ``.npz``)."""
        directory = self._path / ARRAYS_DIR
        if not directory.is_dir():
            return []
        return sorted(p.stem for p in directory.glob("*.npz"))

    def figure_path(self, name: str) -> Path:
        """The path ``figures/<name>.png`` (directory created) for a figure."""
        name = _check_name(_strip_suffix(name, ".png"), "figure name")
        return self._subdir(FIGURES_DIR) / f"{name}.png"

    def save_figure(self, fig: Any, name: str, **savefig_kwargs: Any) -> Path:
        """Save a matplotlib figure to :meth:`figure_path` ``(name)`` atomically."""
        path = self.figure_path(name)
        with atomic_open(path, "wb") as handle:
            fig.savefig(handle, format="png", **savefig_kwargs)
        return path

    def _file(self, name: str, suffix: str) -> Path:
        filename = _check_name(name if name.endswith(suffix) else name + suffix, "file name")
        if filename in _RESERVED_FILES:
            raise ValueError(f"{filename} is managed by the run itself and cannot be overwritten")
        self._acquire()
        return self._path / filename

    def write_json(self, name: str, obj: Any) -> Path:
        """Write ``obj`` as JSON to ``<run>/<name>.json`` atomically (e.g. ``claims``)."""
        path = self._file(name, ".json")
        atomic_write_json(path, to_jsonable(obj, name))
        return path

    def read_json(self, name: str) -> Any:
        """Read ``<run>/<name>.json``."""
        path = self._path / (name if name.endswith(".json") else name + ".json")
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found")
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)

    def write_text(self, name: str, text: str) -> Path:
        """Write a text file (e.g. ``report.html``) in the run directory atomically."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        path = self._file(name, "")
        atomic_write_text(path, text)
        return path

    # ----------------------------------------------------------------- checkpoints
    def save_checkpoint(
        self, state: Mapping[str, Any], step: int, keep_last: int = 2
    ) -> Checkpoint:
        """Save ``state`` with :func:`torch.save` as ``checkpoints/step-<step>.pt``, atomically.

        Keeps the ``keep_last`` most recent checkpoints. Checkpoints after ``step`` belong
        to an abandoned continuation and are removed.
        """
        import torch

        step = check_int("step", step, minimum=0)
        keep_last = check_int("keep_last", keep_last, minimum=1)
        if not isinstance(state, Mapping):
            raise TypeError(f"state must be a dict, got {type(state).__name__}")
        path = self._subdir(CHECKPOINTS_DIR) / f"step-{int(step):010d}.pt"
        with atomic_open(path, "wb") as handle:
            torch.save(dict(state), handle)
        existing = self.checkpoints()
        for ckpt in existing:
            if ckpt.step > step:
                ckpt.path.unlink()
        older = [c for c in existing if c.step <= step]
        for ckpt in older[:-keep_last]:
            ckpt.path.unlink()
        return Checkpoint(int(step), path)

    def checkpoints(self) -> list[Checkpoint]:
        """The run's checkpoints, sorted by step."""
        return checkpoints(self._path)

    def latest_checkpoint(self) -> Checkpoint | None:
        """The checkpoint with the largest step, or ``None``."""
        found = self.checkpoints()
        return found[-1] if found else None

    def resume_checkpoint(self, map_location: Any = "cpu") -> tuple[Checkpoint, dict] | None:
        """The newest checkpoint that can be read and its state (an unreadable newer one is
        set aside with a warning, :func:`~collapselab.store.checkpoints.newest_readable`);
        ``None`` without checkpoints. Raises
        :class:`~collapselab.store.checkpoints.CheckpointError` when none can be read."""
        return newest_readable(self._path, map_location=map_location)

    def record_checksums(self) -> None:
        """Record the SHA-256 of every file the run recorded in the manifest's ``checksums``
        (:func:`~collapselab.store.integrity.file_checksums`); a thorough check finds any
        of them missing or changed later."""
        self.update_manifest(checksums=file_checksums(self._path))

    # ------------------------------------------------------------- context manager
    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """Flush buffered rows; on an exception mark an unfinished run failed/interrupted."""
        self.flush()
        if exc_type is not None and self.status in ("created", "running"):
            if issubclass(exc_type, KeyboardInterrupt):
                self.set_status("interrupted", error=interruption(exc))
            else:
                self.set_status("failed", error=f"{exc_type.__name__}: {exc}")


def interruption(error: BaseException | None) -> str:
    """What stopped a run, in words: ``"interrupted by SIGTERM"`` when the command line
    turned a signal into the ``KeyboardInterrupt`` (its argument names the signal), else
    ``"interrupted by SIGINT (Ctrl-C)"``."""
    name = error.args[0] if error is not None and error.args else ""
    if isinstance(name, str) and name.startswith("SIG"):
        return f"interrupted by {name}"
    return "interrupted by SIGINT (Ctrl-C)"


def _call_mirror(mirror: Any, hook: str, *args: Any) -> bool:
    """Call ``mirror.<hook>(*args)``; on an exception warn and return False (detach it)."""
    try:
        getattr(mirror, hook)(*args)
    except Exception as error:
        warnings.warn(
            f"mirror {type(mirror).__name__} failed in {hook}() and is detached "
            f"({type(error).__name__}: {error}); the run store still has every row",
            stacklevel=3,
        )
        return False
    return True


def _earliest(*epochs: int | None) -> int | None:
    """The earliest of the known epochs (``None`` when none is known)."""
    known = [e for e in epochs if e is not None]
    return min(known) if known else None
