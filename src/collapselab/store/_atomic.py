"""Atomic file writes: write a hidden temporary file in the target directory, fsync, rename.

``os.replace`` is atomic on POSIX and Windows when source and target lie on the same file
system, which is why the temporary file lives next to the target. A reader therefore sees
either the old file or the complete new one, never a partial write; a crash mid-write
leaves at most a hidden ``.<name>.<random>.tmp`` file, which no glob for ``*.parquet``,
``*.json`` or ``*.pt`` matches.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from collapselab.checks import check_choice

TMP_SUFFIX = ".tmp"


def _tmp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}{TMP_SUFFIX}")


def _fsync_dir(directory: Path) -> None:
    # Persist the rename itself; not possible (nor needed) on every platform.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file that replaces ``path`` when the ``with`` block succeeds.

    On an exception the temporary file is removed and ``path`` is left untouched.

    Args:
        path: the final file name; its directory must exist.
        mode: ``"wb"`` or ``"w"`` (text, UTF-8).
    """
    check_choice("mode", mode, ("wb", "w"))
    path = Path(path)
    tmp = _tmp_path(path)
    encoding = "utf-8" if mode == "w" else None
    try:
        with open(tmp, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically, creating its directory; returns
    ``path``. The file gets the usual mode for new files (0644 under the common umask 022),
    like every other file of a run."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "w" if isinstance(data, str) else "wb") as handle:
        handle.write(data)
    return path


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_open(path, "w") as handle:
        handle.write(text)


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically (``allow_nan`` keeps NaN readable)."""
    text = json.dumps(obj, indent=2, sort_keys=False, allow_nan=True)
    atomic_write_text(path, text + "\n")
