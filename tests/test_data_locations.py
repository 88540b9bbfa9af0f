"""Where file-based datasets are found: --data-dir, then $COLLAPSELAB_DATA_DIR, then the
folder of a system package (Debian's dataset-fashion-mnist); and the real Debian files."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from collapselab.data import (
    DatasetFileError,
    load_dataset,
    locations,
    read_fashion_mnist,
    read_mnist,
)
from collapselab.data.registry import data_origin, is_file_dataset
from tests._idx_files import write_idx_dataset


@pytest.fixture
def debian(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for /usr/share/datasets/fashion-mnist holding small fixture files."""
    folder = tmp_path / "usr-share-datasets-fashion-mnist"
    monkeypatch.setattr(
        locations,
        "SYSTEM_DATASETS",
        {"fashion_mnist": locations.SystemDataset(folder, "dataset-fashion-mnist")},
    )
    return folder


def _labels(splits) -> list[int]:
    return splits.train.y.tolist()


def test_search_order_data_dir_then_environment_then_system(tmp_path, debian, monkeypatch):
    given, env = tmp_path / "given", tmp_path / "env"
    given.mkdir()
    write_idx_dataset(debian, n_train=20, seed=1)
    write_idx_dataset(env, n_train=30, seed=2)
    monkeypatch.setenv(locations.DATA_DIR_ENV, str(env))
    # The given folder lacks the dataset: the environment's folder is next.
    assert len(read_fashion_mnist(given).train) == 30
    assert data_origin("fashion_mnist", given).found_via == "$COLLAPSELAB_DATA_DIR"
    write_idx_dataset(given, n_train=40, seed=3)
    assert len(read_fashion_mnist(given).train) == 40
    origin = data_origin("fashion-mnist", given)
    assert (origin.folder, origin.found_via, origin.kind) == (str(given), "--data-dir", "files")
    monkeypatch.delenv(locations.DATA_DIR_ENV)
    splits = read_fashion_mnist(None)
    assert len(splits.train) == 20 and splits.train.meta["files"][0] == str(
        debian / "train-images-idx3-ubyte.gz"
    )
    origin = data_origin("fashion_mnist")
    assert origin.found_via == "Debian package dataset-fashion-mnist"
    assert origin.description == (
        f"Fashion-MNIST, files in {debian} (Debian package dataset-fashion-mnist)"
    )
    assert torch.equal(load_dataset("fashion_mnist").train.x, splits.train.x)


def test_missing_everywhere_names_every_place_and_how_to_install(tmp_path, debian, monkeypatch):
    given = tmp_path / "given"
    given.mkdir()
    monkeypatch.setenv(locations.DATA_DIR_ENV, str(tmp_path / "no-such-folder"))
    with pytest.raises(DatasetFileError) as info:
        read_fashion_mnist(given)
    message = str(info.value)
    assert f"{given} (--data-dir)" in message
    assert f"{tmp_path / 'no-such-folder'} ($COLLAPSELAB_DATA_DIR): does not exist" in message
    assert f"{debian} (Debian package dataset-fashion-mnist): does not exist" in message
    assert "apt-get install dataset-fashion-mnist" in message and "--data-dir" in message
    assert info.value.looked_in[0] == f"{given} (--data-dir)"
    assert str(pickle.loads(pickle.dumps(info.value))) == message
    # Without --data-dir and with the variable unset, the message says so.
    monkeypatch.delenv(locations.DATA_DIR_ENV)
    with pytest.raises(DatasetFileError, match=r"\$COLLAPSELAB_DATA_DIR \(not set\)") as info:
        data_origin("fashion_mnist")
    assert "--data-dir (not given)" in str(info.value)
    # A dataset without a system package is not said to have one.
    with pytest.raises(DatasetFileError) as info:
        read_mnist(None)
    assert "apt-get" not in str(info.value) and "yann.lecun.com" in str(info.value)


def test_a_given_data_dir_must_exist_even_when_the_system_has_the_dataset(tmp_path, debian):
    write_idx_dataset(debian)
    with pytest.raises(DatasetFileError, match="data_dir is not a folder"):
        read_fashion_mnist(tmp_path / "typo")


def test_origin_of_generated_and_bundled_datasets():
    assert data_origin("digits").kind == "bundled" and not is_file_dataset("digits")
    assert "scikit-learn" in data_origin("digits").description
    assert data_origin("mnist1d").kind == "generated" and data_origin("mnist1d").folder is None
    assert is_file_dataset("Fashion-MNIST") and is_file_dataset("cifar10")


def test_real_debian_fashion_mnist(fashion_mnist_dir):
    # The files exactly as Debian's dataset-fashion-mnist installs them (gzipped IDX).
    full = read_fashion_mnist(None)
    assert full.train.x.shape == (60000, 1, 28, 28) and full.test.x.shape == (10000, 1, 28, 28)
    assert full.train.class_counts().tolist() == [6000] * 10
    assert full.test.class_counts().tolist() == [1000] * 10
    assert full.train.x.dtype == torch.float32
    assert float(full.train.x.min()) == 0.0 and float(full.train.x.max()) == 1.0
    # The training images' mean pixel, a published property of the dataset (0.2860).
    assert float(full.train.x.mean(dtype=torch.float64)) == pytest.approx(0.2860, abs=5e-4)
    assert full.train.meta["class_names"][0] == "T-shirt/top"
    assert [Path(f).name for f in full.train.meta["files"]] == [
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    ]
    subset = load_dataset("fashion_mnist", n_train_per_class=7, n_test_per_class=3, seed=4)
    assert subset.train.class_counts().tolist() == [7] * 10
    assert subset.test.class_counts().tolist() == [3] * 10
    # Every subset image is one of the full set's images of the same class (candidates by a
    # random projection, then compared exactly).
    rows = full.train.x.reshape(60000, -1)
    direction = torch.rand(rows.shape[1], generator=torch.Generator().manual_seed(0))
    keys = rows @ direction
    for x, y in zip(subset.train.x.reshape(70, -1), subset.train.y, strict=True):
        near = torch.nonzero((keys - x @ direction).abs() < 1e-3).flatten()
        match = near[(rows[near] == x).all(dim=1)]
        assert len(match) >= 1 and np.all(full.train.y[match].numpy() == int(y))
    origin = data_origin("fashion_mnist")
    assert origin.folder == str(fashion_mnist_dir)
    assert origin.found_via == "Debian package dataset-fashion-mnist"
