"""The finished members of a sweep in a directory, so that a rerun resumes the sweep.

Member ``i`` of config hash ``h`` (:func:`~collapselab.experiments.sweeps.member.config_hash`)
is the file ``member-<i:05d>-<h>.json``: its index, config, hash, the attempts it took,
its plain values and the names of its arrays. The arrays are ``member-<i:05d>-<h>.npz``,
written (atomically, with :func:`collapselab.store.atomic_write`) before the JSON file,
so a member whose JSON file exists is complete. A rerun loads member ``i`` only when the
hash of its config matches: a changed config is recomputed, and the stale files of that
index are removed once the new result is stored.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from collapselab.experiments.sweeps.member import config_hash
from collapselab.store import atomic_write, to_jsonable

_NAME = re.compile(r"^member-(\d{5,})-([0-9a-f]{16})\.(json|npz)$")


class MemberRecords(Protocol):
    """Where a sweep finds finished members and records new ones (:class:`MemberStore`)."""

    def load(self, index: int, config: dict[str, Any]) -> tuple[dict[str, Any], int] | None:
        """Member ``index``'s result and attempts when it finished for ``config``."""
        ...

    def save(self, index: int, config: dict[str, Any], value: dict[str, Any], attempts: int) -> Any:
        """Record member ``index``'s result."""
        ...


class MemberStore:
    """Finished sweep members under ``directory`` (created when the first one is stored)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise NotADirectoryError(f"sweep store {self.directory} exists and is not a directory")

    def _path(self, index: int, digest: str, suffix: str) -> Path:
        return self.directory / f"member-{index:05d}-{digest}.{suffix}"

    def load(self, index: int, config: dict[str, Any]) -> tuple[dict[str, Any], int] | None:
        """The stored result of member ``index`` and the attempts it took, when it was
        stored for this very config; else ``None``."""
        digest = config_hash(config)
        path = self._path(index, digest, "json")
        if not path.is_file():
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
        value = dict(record["values"])
        if record["arrays"]:
            with np.load(self._path(index, digest, "npz"), allow_pickle=False) as arrays:
                for name in record["arrays"]:
                    value[name] = arrays[name]
        ordered = {name: value[name] for name in record["order"]}
        return ordered, int(record["attempts"])

    def save(
        self, index: int, config: dict[str, Any], value: dict[str, Any], attempts: int
    ) -> Path:
        """Store member ``index``'s normalised result ``value``; returns the JSON file."""
        digest = config_hash(config)
        arrays = {k: v for k, v in value.items() if isinstance(v, np.ndarray)}
        if arrays:
            buffer = io.BytesIO()
            np.savez(buffer, **arrays)
            atomic_write(self._path(index, digest, "npz"), buffer.getvalue())
        record = {
            "index": index,
            "config_hash": digest,
            "config": to_jsonable(config, "config"),
            "attempts": attempts,
            "order": list(value),
            "arrays": list(arrays),
            "values": {k: v for k, v in value.items() if k not in arrays},
        }
        # repr-exact floats: json writes the shortest text that reads back the same double
        text = json.dumps(record, indent=1, allow_nan=True) + "\n"
        path = atomic_write(self._path(index, digest, "json"), text)
        self._remove_stale(index, digest)
        return path

    def _remove_stale(self, index: int, digest: str) -> None:
        # Files of this index stored for an earlier config: no longer this sweep's member.
        for path in self.directory.glob(f"member-{index:05d}-*"):
            match = _NAME.match(path.name)
            if match and int(match.group(1)) == index and match.group(2) != digest:
                path.unlink(missing_ok=True)
