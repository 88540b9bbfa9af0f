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


@pytest.fixture(scope="session", autouse=True)
def _built_in_experiments_write_each_key_once(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """After the session: no run of a built-in experiment (one whose run function is the
    package's) written under the session's temporary directories holds two rows of one key
    ``(step, split, layer, metric)``, not even an exact repeat, which the store accepts (a
    Monitor measuring one unchanged model twice at one step)."""
    yield
    import json

    import pandas as pd

    from collapselab.experiments import all_experiments
    from collapselab.store import METRICS_FILE, ROW_KEY

    built_in = {e.id for e in all_experiments() if e.run.__module__.startswith("collapselab.")}
    repeated = []
    for manifest in sorted(tmp_path_factory.getbasetemp().rglob("manifest.json")):
        try:
            experiment = json.loads(manifest.read_text())["experiment"]
            rows = pd.read_parquet(manifest.parent / METRICS_FILE)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # no table, or a run a test damaged on purpose
        if experiment in built_in and rows.duplicated(list(ROW_KEY)).any():
            repeated.append(f"{manifest.parent} ({experiment})")
    assert not repeated, f"runs of built-in experiments with a repeated row key: {repeated}"


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local two-CPU Ray instance for a test module (the module skips itself first when
    the ray extra is not installed), shut down after the module."""
    import ray  # the extra, imported only by the modules that use Ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
    try:
        yield
    finally:
        ray.shutdown()
