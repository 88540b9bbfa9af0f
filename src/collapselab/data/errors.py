"""The error raised for a missing or unreadable dataset file."""

from __future__ import annotations

from pathlib import Path


class DatasetFileError(FileNotFoundError, ValueError):
    """A dataset file is missing, or is not in its distribution's format.

    It is both a :class:`FileNotFoundError` and a :class:`ValueError`, so either ``except``
    clause catches it. The message names the file, the expected layout, and where the
    official files can be obtained (collapselab never downloads them).

    Attributes:
        path: the offending file or folder.
    """

    def __init__(
        self,
        path: str | Path,
        problem: str,
        layout: str,
        source: str,
        tried: tuple[str, ...] = (),
    ) -> None:
        self.path = Path(path)
        self._parts = (str(path), problem, layout, source, tuple(tried))
        also = f"Also looked for: {', '.join(tried)}\n" if tried else ""
        super().__init__(
            f"{problem}: {self.path}\n"
            f"{also}"
            f"Expected: {layout}\n"
            f"Obtain the official files from {source} (collapselab never downloads data), "
            "unpack any archive, and pass the folder that holds them as --data-dir "
            "(data_dir=...)."
        )

    def __reduce__(self) -> tuple:
        # Exceptions pickle through ``args``; rebuild from the parts instead (multiprocessing).
        return (type(self), self._parts)
