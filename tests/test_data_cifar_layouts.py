"""CIFAR-10 and CIFAR-100 read from both distribution layouts (pickles and binary records),
exactly: tiny files written here, read back pixel for pixel and label for label."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.data import DatasetFileError
from collapselab.data.readers import read_cifar10, read_cifar100
from tests._cifar_files import LAYOUTS, SMALL_MAMMALS, write_cifar10, write_cifar100


def _images(data: np.ndarray) -> torch.Tensor:
    """The readers' float32 images of uint8 rows (1024 red, green, blue bytes, row-major)."""
    return torch.from_numpy(data.reshape(-1, 3, 32, 32).astype(np.float32) / np.float32(255))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cifar10_read_back_exactly(tmp_path, layout):
    written = write_cifar10(tmp_path, layout)
    splits = read_cifar10(tmp_path)
    for split, got in (("train", splits.train), ("test", splits.test)):
        data, labels = written[split]
        assert torch.equal(got.x, _images(data))
        assert got.y.tolist() == labels.tolist()
    assert splits.train.meta["class_names"][3] == "cat"
    pair = read_cifar10(tmp_path, classes=(3, 5))
    keep = np.isin(written["train"][1], (3, 5))
    assert torch.equal(pair.train.x, _images(written["train"][0][keep]))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cifar100_small_mammals_read_back_exactly(tmp_path, layout):
    written = write_cifar100(tmp_path, layout)
    fine = read_cifar100(tmp_path)
    assert torch.equal(fine.train.x, _images(written["train"][0]))
    assert fine.test.y.tolist() == written["test"][1].tolist()
    coarse = read_cifar100(tmp_path, label_type="coarse")
    assert coarse.train.y.tolist() == written["train"][2].tolist()
    mammals = read_cifar100(tmp_path, superclass="small_mammals")
    assert mammals.train.meta["class_names"] == ["hamster", "mouse", "rabbit", "shrew", "squirrel"]
    for split, got in (("train", mammals.train), ("test", mammals.test)):
        data, f, _ = written[split]
        keep = np.isin(f, SMALL_MAMMALS)
        assert torch.equal(got.x, _images(data[keep]))
        assert got.y.tolist() == [SMALL_MAMMALS.index(v) for v in f[keep]]


def test_both_layouts_give_the_same_images(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_cifar10(a, "python", seed=3)
    write_cifar10(b, "binary", seed=3)
    pa, pb = read_cifar10(a), read_cifar10(b)
    assert torch.equal(pa.train.x, pb.train.x) and torch.equal(pa.test.y, pb.test.y)


def test_missing_binary_file_names_path_and_layout(tmp_path):
    write_cifar10(tmp_path, "binary")
    missing = tmp_path / "cifar-10-batches-bin" / "data_batch_3.bin"
    missing.unlink()
    with pytest.raises(DatasetFileError) as info:
        read_cifar10(tmp_path)
    first, second = str(info.value).split("\n")[:2]
    assert str(missing) in first and "file not found" in first
    assert second.startswith("Expected:") and "cifar-10-batches-bin" in second


def test_malformed_binary_records(tmp_path):
    write_cifar100(tmp_path, "binary")
    path = tmp_path / "cifar-100-binary" / "test.bin"
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(DatasetFileError, match="records"):
        read_cifar100(tmp_path)
    row = np.zeros(3074, np.uint8)
    row[1] = 100  # a fine label outside 0..99
    path.write_bytes(row.tobytes())
    with pytest.raises(DatasetFileError, match="label byte 1"):
        read_cifar100(tmp_path)
