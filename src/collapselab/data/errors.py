"""The error raised for a missing or unreadable dataset file."""

from __future__ import annotations

from pathlib import Path


class DatasetFileError(FileNotFoundError, ValueError):
    """A dataset file is missing, or is not in its distribution's format.

    It is both a :class:`FileNotFoundError` and a :class:`ValueError`, so either ``except``
    clause catches it. The message names the file, every place looked (when the dataset was
    searched for, see :mod:`collapselab.data.locations`), the expected layout, and how to get
    the dataset (collapselab never downloads it).

    Attributes:
        path: the offending file or folder.
        looked_in: the places searched, each ``"<folder> (<how it was chosen>)"``.
        install: how to get the dataset (a sentence).
    """

    def __init__(
        self,
        path: str | Path,
        problem: str,
        layout: str,
        install: str,
        tried: tuple[str, ...] = (),
        looked_in: tuple[str, ...] = (),
    ) -> None:
        self.path = Path(path)
        self.looked_in = tuple(looked_in)
        self.install = install
        self._parts = (str(path), problem, layout, install, tuple(tried), self.looked_in)
        also = f"Also looked for: {', '.join(tried)}\n" if tried else ""
        places = f"Looked in: {'; '.join(looked_in)}\n" if looked_in else ""
        super().__init__(f"{problem}: {self.path}\n{places}{also}Expected: {layout}\n{install}")

    def __reduce__(self) -> tuple:
        # Exceptions pickle through ``args``; rebuild from the parts instead (multiprocessing).
        return (type(self), self._parts)
