"""Where dataset files are looked for when a reader is not told a folder that holds them.

A file-based dataset is searched in three places, in this order, and read from the first
that holds it:

1. the folder given explicitly (``data_dir=...``, the command line's ``--data-dir``);
2. the folder named by the environment variable :data:`DATA_DIR_ENV`
   (``COLLAPSELAB_DATA_DIR``);
3. the folder a system package installs it to (:data:`SYSTEM_DATASETS`): Debian's
   ``dataset-fashion-mnist`` puts the original gzipped IDX files of Fashion-MNIST in
   ``/usr/share/datasets/fashion-mnist/``.

Nothing is ever downloaded. When no place holds a dataset, the reader's
:class:`~collapselab.data.errors.DatasetFileError` names every place looked and how to
install the dataset (:func:`install_hint`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DATA_DIR_ENV = "COLLAPSELAB_DATA_DIR"
"""Environment variable naming a folder of dataset files, searched after ``--data-dir``."""


@dataclass(frozen=True)
class SystemDataset:
    """A dataset that an operating-system package installs to a fixed folder."""

    path: Path
    package: str

    @property
    def origin(self) -> str:
        return f"Debian package {self.package}"


SYSTEM_DATASETS: dict[str, SystemDataset] = {
    "fashion_mnist": SystemDataset(
        Path("/usr/share/datasets/fashion-mnist"), "dataset-fashion-mnist"
    ),
}
"""Canonical dataset name -> where its Debian package installs the official files."""


@dataclass(frozen=True)
class Place:
    """One place a dataset is looked for.

    Attributes:
        path: the folder; ``None`` when the place is not configured (the environment
            variable is unset).
        origin: how the place was chosen: ``"--data-dir"``, ``"$COLLAPSELAB_DATA_DIR"`` or
            ``"Debian package <name>"``.
    """

    path: Path | None
    origin: str

    def describe(self) -> str:
        """``"<path> (<origin>)"``, or ``"<origin> (not set)"`` for an unset variable."""
        if self.path is None:
            return f"{self.origin} (not set)"
        return f"{self.path} ({self.origin})"


def search_places(name: str, data_dir: str | os.PathLike[str] | None = None) -> list[Place]:
    """The places dataset ``name`` (canonical, e.g. ``"fashion_mnist"``) is looked for, in order.

    ``data_dir`` (if given) first, then ``$COLLAPSELAB_DATA_DIR`` (listed with ``path=None``
    when unset, so that error messages can say so), then the dataset's system package folder
    (:data:`SYSTEM_DATASETS`), if it has one.
    """
    places = []
    if data_dir is not None:
        places.append(Place(Path(data_dir).expanduser(), "--data-dir"))
    env = os.environ.get(DATA_DIR_ENV, "").strip()
    places.append(Place(Path(env).expanduser() if env else None, f"${DATA_DIR_ENV}"))
    system = SYSTEM_DATASETS.get(name)
    if system is not None:
        places.append(Place(system.path, system.origin))
    return places


def install_hint(name: str, url: str) -> str:
    """How to get dataset ``name``: its system package (if any), else the official files."""
    files = (
        f"obtain the official files from {url} (collapselab never downloads data), unpack any "
        f"archive, and pass the folder that holds them as --data-dir (data_dir=...) or set "
        f"{DATA_DIR_ENV}."
    )
    system = SYSTEM_DATASETS.get(name)
    if system is None:
        return files[0].upper() + files[1:]
    return (
        f"On Debian/Ubuntu install it with `apt-get install {system.package}` (files in "
        f"{system.path}); or {files}"
    )
