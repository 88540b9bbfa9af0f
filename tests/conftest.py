"""Suite-wide test settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from collapselab._threads import serial_threads
from collapselab.data.locations import SYSTEM_DATASETS

_SYSTEM_DATASETS = dict(SYSTEM_DATASETS)  # before any test patches it


@pytest.fixture(autouse=True)
def _serial_threads() -> Iterator[None]:
    # Test tensors are tiny: torch's and BLAS's thread pools only add synchronisation, and on a
    # busy 2-core machine spinning workers made small loops 10-100x slower.
    with serial_threads():
        yield


@pytest.fixture(autouse=True)
def _no_machine_datasets(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests see only the data they are given: not $COLLAPSELAB_DATA_DIR, not the datasets a
    # system package installed. Tests of those real files ask for `system_datasets`.
    from collapselab.data import locations

    monkeypatch.delenv(locations.DATA_DIR_ENV, raising=False)
    monkeypatch.setattr(locations, "SYSTEM_DATASETS", {})


@pytest.fixture
def system_datasets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Restore the system package locations (Debian's /usr/share/datasets/...)."""
    from collapselab.data import locations

    monkeypatch.setattr(locations, "SYSTEM_DATASETS", _SYSTEM_DATASETS)


@pytest.fixture
def fashion_mnist_dir(system_datasets: None) -> Path:
    """The folder of the Debian package's Fashion-MNIST files; the test is skipped without it."""
    folder = _SYSTEM_DATASETS["fashion_mnist"].path
    if not (folder / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(
            f"needs the real Fashion-MNIST files in {folder}: install the Debian package "
            "dataset-fashion-mnist (`apt-get install dataset-fashion-mnist`)"
        )
    return folder
