"""One writing process per run directory: an advisory lock on ``<run>/.lock``.

A :class:`collapselab.store.Run` takes the lock before its first write (manifest, metric
table, checkpoint, any file) and keeps it until :meth:`~collapselab.store.Run.close` or
until the process ends; the operating system releases it when the process dies, even on
SIGKILL, so a stale lock never blocks a resume. A second *process* writing the same
directory gets a :class:`RunLockedError` naming the holder's process id. Within one
process any number of ``Run`` objects may write the same directory (the lock is counted
per process), as the experiments layer does when it reopens a run to write its report.

The lock is ``fcntl.flock`` on POSIX. Where ``fcntl`` does not exist (Windows) runs are not
locked. Readers (listing, queries, reports that only read) never take it.
"""

from __future__ import annotations

import datetime as _dt
import os
import threading
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".lock"

_held: dict[str, tuple[int, int]] = {}  # real path of the run directory -> (fd, count)
_guard = threading.Lock()


class RunLockedError(RuntimeError):
    """Another process is writing the run directory."""

    def __init__(self, path: Path, holder: str) -> None:
        self.path = path
        self.holder = holder
        super().__init__(
            f"run {path} is being written by another process ({holder}); wait for it to "
            "finish, or stop it, before writing this run again"
        )


def _key(run_dir: Path) -> str:
    return os.path.realpath(run_dir)


def acquire(run_dir: str | os.PathLike[str]) -> None:
    """Take (or count once more) this process's write lock on ``run_dir``.

    Raises :class:`RunLockedError` at once, without waiting, when another process holds it.
    """
    run_dir = Path(run_dir)
    key = _key(run_dir)
    with _guard:
        if key in _held:
            fd, count = _held[key]
            _held[key] = (fd, count + 1)
            return
        if fcntl is None:  # pragma: no cover - Windows
            _held[key] = (-1, 1)
            return
        fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunLockedError(run_dir, holder) from None
        stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {stamp}\n".encode(), 0)
        _held[key] = (fd, 1)


def release(run_dir: str | os.PathLike[str]) -> None:
    """Give back one count of this process's lock on ``run_dir`` (no-op when not held)."""
    key = _key(Path(run_dir))
    with _guard:
        if key not in _held:
            return
        fd, count = _held[key]
        if count > 1:
            _held[key] = (fd, count - 1)
            return
        del _held[key]
        if fd >= 0:
            os.close(fd)  # closing the descriptor releases the flock


def held(run_dir: str | os.PathLike[str]) -> bool:
    """True when this process holds the write lock on ``run_dir``."""
    return _key(Path(run_dir)) in _held


def holder_alive(run_dir: str | os.PathLike[str]) -> bool | None:
    """Whether the process that last took ``run_dir``'s lock still exists: ``False`` when
    its process id is gone (a run left ``running`` by a killed process is stale), ``None``
    when no lock names one. Read-only: the lock is not taken."""
    try:
        text = (Path(run_dir) / LOCK_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    parts = text.split()
    if len(parts) < 2 or parts[0] != "pid" or not parts[1].isdigit():
        return None
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "unknown process"
