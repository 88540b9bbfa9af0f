"""Local-file readers: tiny fixtures written in each dataset's real distribution format."""

import collections
import gzip
import json
import pickle
import struct

import numpy as np
import pytest
import scipy.io
import torch

from collapselab.data import (
    DatasetFileError,
    read_cifar10,
    read_cifar100,
    read_fashion_mnist,
    read_mnist,
    read_stl10,
    read_svhn,
)

RNG = np.random.default_rng(0)


def _as_float(u8: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(u8).to(torch.float32) / 255.0


# ---------------------------------------------------------------------- IDX fixtures


def _idx_bytes(array: np.ndarray) -> bytes:
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


def _write(path, payload: bytes, gz: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        with gzip.open(f"{path}.gz", "wb") as handle:
            handle.write(payload)
    else:
        path.write_bytes(payload)


def _write_mnist(root, gz: bool, n_train=30, n_test=20):
    arrays = {
        "train-images-idx3-ubyte": RNG.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": np.arange(n_train, dtype=np.uint8) % 10,
        "t10k-images-idx3-ubyte": RNG.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": (np.arange(n_test, dtype=np.uint8) * 7) % 10,
    }
    for name, array in arrays.items():
        _write(root / name, _idx_bytes(array), gz)
    return arrays


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("reader", [read_mnist, read_fashion_mnist])
def test_idx_round_trip(tmp_path, gz, reader):
    arrays = _write_mnist(tmp_path, gz)
    s = reader(tmp_path)
    assert s.train.x.shape == (30, 1, 28, 28) and s.train.x.dtype == torch.float32
    assert torch.equal(s.train.x, _as_float(arrays["train-images-idx3-ubyte"])[:, None])
    assert torch.equal(s.test.x, _as_float(arrays["t10k-images-idx3-ubyte"])[:, None])
    assert s.train.y.tolist() == arrays["train-labels-idx1-ubyte"].tolist()
    assert s.test.y.tolist() == arrays["t10k-labels-idx1-ubyte"].tolist()
    assert s.train.y.dtype == torch.int64 and s.n_classes == 10
    assert 0.0 <= float(s.train.x.min()) and float(s.train.x.max()) <= 1.0


def test_idx_torchvision_folder_and_gzip_without_suffix(tmp_path):
    arrays = _write_mnist(tmp_path / "MNIST" / "raw", gz=False)
    assert torch.equal(
        read_mnist(tmp_path).train.y, torch.from_numpy(arrays["train-labels-idx1-ubyte"]).long()
    )
    # A gzip stream is recognised by its magic bytes whatever the file is called.
    raw = tmp_path / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    raw.write_bytes(gzip.compress(raw.read_bytes()))
    assert read_mnist(tmp_path).test.y.tolist() == arrays["t10k-labels-idx1-ubyte"].tolist()


def test_idx_class_subset_and_balanced_subsample(tmp_path):
    arrays = _write_mnist(tmp_path, gz=False, n_train=60, n_test=40)
    s = read_mnist(tmp_path, classes=(7, 2), n_train_per_class=4, n_test_per_class=3, seed=1)
    assert s.n_classes == 2 and s.train.class_counts().tolist() == [4, 4]
    assert s.test.class_counts().tolist() == [3, 3]
    assert s.train.meta["class_ids"] == [7, 2] and s.train.meta["class_names"] == ["7", "2"]
    images, labels = arrays["train-images-idx3-ubyte"], arrays["train-labels-idx1-ubyte"]
    for x, y in zip(s.train.x, s.train.y.tolist(), strict=True):
        matches = [i for i in range(len(images)) if torch.equal(_as_float(images[i]), x[0])]
        assert len(matches) == 1 and labels[matches[0]] == (7, 2)[y]
    again = read_mnist(tmp_path, classes=(7, 2), n_train_per_class=4, n_test_per_class=3, seed=1)
    assert torch.equal(again.train.x, s.train.x)
    with pytest.raises(ValueError):
        read_mnist(tmp_path, classes=(3, 3))
    with pytest.raises(ValueError):
        read_mnist(tmp_path, classes=(10,))
    with pytest.raises(ValueError, match="n_per_class"):
        read_mnist(tmp_path, n_train_per_class=7)  # only 6 of each class


def _expect_file_error(call, path_part: str, url_part: str):
    with pytest.raises(DatasetFileError) as info:
        call()
    err = info.value
    assert isinstance(err, FileNotFoundError) and isinstance(err, ValueError)
    message = str(err)
    assert path_part in message and url_part in message and "--data-dir" in message
    assert str(pickle.loads(pickle.dumps(err))) == message  # survives multiprocessing
    return err


def test_idx_missing_and_corrupt_files(tmp_path):
    _write_mnist(tmp_path, gz=False)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    _expect_file_error(lambda: read_mnist(tmp_path), "t10k-labels-idx1-ubyte", "lecun.com")
    # Wrong magic number (a label file where images are expected).
    _write(tmp_path / "t10k-labels-idx1-ubyte", _idx_bytes(np.zeros(20, np.uint8)), gz=False)
    _write(tmp_path / "t10k-images-idx3-ubyte", _idx_bytes(np.zeros(20, np.uint8)), gz=False)
    err = _expect_file_error(lambda: read_mnist(tmp_path), "t10k-images-idx3-ubyte", "lecun.com")
    assert "magic" in str(err)
    # Truncated payload.
    _write(
        tmp_path / "t10k-images-idx3-ubyte",
        _idx_bytes(np.zeros((20, 28, 28), np.uint8))[:-5],
        gz=False,
    )
    assert "data bytes" in str(
        _expect_file_error(lambda: read_mnist(tmp_path), "t10k-images", "lecun")
    )
    # Broken gzip stream.
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    assert "gzip" in str(_expect_file_error(lambda: read_mnist(tmp_path), "t10k-images", "lecun"))
    # Label count does not match the images; labels out of range.
    _write(
        tmp_path / "t10k-images-idx3-ubyte", _idx_bytes(np.zeros((21, 28, 28), np.uint8)), gz=False
    )
    _expect_file_error(lambda: read_mnist(tmp_path), "t10k-labels", "lecun")
    _write(
        tmp_path / "t10k-images-idx3-ubyte", _idx_bytes(np.zeros((20, 28, 28), np.uint8)), gz=False
    )
    _write(tmp_path / "t10k-labels-idx1-ubyte", _idx_bytes(np.full(20, 12, np.uint8)), gz=False)
    _expect_file_error(lambda: read_mnist(tmp_path), "t10k-labels", "lecun")
    # Wrong image size.
    _write(
        tmp_path / "train-images-idx3-ubyte", _idx_bytes(np.zeros((30, 32, 32), np.uint8)), gz=False
    )
    _expect_file_error(lambda: read_fashion_mnist(tmp_path), "train-images", "zalandoresearch")


def test_data_dir_errors(tmp_path):
    with pytest.raises(ValueError, match="--data-dir"):
        read_cifar10(None)
    _expect_file_error(lambda: read_stl10(tmp_path / "nowhere"), "nowhere", "stanford.edu")
    with pytest.raises(TypeError):
        read_mnist(3)


# -------------------------------------------------------------------------- CIFAR


def _cifar_dict(n: int, label_keys: dict) -> tuple[dict, np.ndarray]:
    data = RNG.integers(0, 256, (n, 3072), dtype=np.uint8)
    return {b"data": data, **{k.encode(): v for k, v in label_keys.items()}}, data


def _dump(path, obj, protocol=2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        pickle.dump(obj, handle, protocol=protocol)


def _write_cifar10(root, n=6):
    folder = root / "cifar-10-batches-py"
    batches = []
    for i, name in enumerate([f"data_batch_{j}" for j in range(1, 6)] + ["test_batch"]):
        labels = [(i + j) % 10 for j in range(n)]
        batch, data = _cifar_dict(n, {"labels": labels})
        _dump(folder / name, batch, protocol=2 if i % 2 else 4)
        batches.append((data, labels))
    names = [
        b"airplane",
        b"automobile",
        b"bird",
        b"cat",
        b"deer",
        b"dog",
        b"frog",
        b"horse",
        b"ship",
        b"truck",
    ]
    _dump(folder / "batches.meta", {b"label_names": names, b"num_vis": 3072})
    return folder, batches


def test_cifar10_round_trip(tmp_path):
    _, batches = _write_cifar10(tmp_path)
    s = read_cifar10(tmp_path)
    assert s.train.x.shape == (30, 3, 32, 32) and s.test.x.shape == (6, 3, 32, 32)
    for i, (data, labels) in enumerate(batches[:5]):
        rows = slice(6 * i, 6 * (i + 1))
        # Row layout: 1024 red, 1024 green, 1024 blue bytes, each plane row-major.
        for j in range(6):
            r, g, b = data[j, :1024], data[j, 1024:2048], data[j, 2048:]
            expected = np.stack([r.reshape(32, 32), g.reshape(32, 32), b.reshape(32, 32)])
            assert torch.equal(s.train.x[rows][j], _as_float(expected))
        assert s.train.y[rows].tolist() == labels
    assert s.test.y.tolist() == batches[5][1]
    assert s.train.meta["class_names"][3] == "cat"
    assert json.loads(json.dumps(s.train.meta)) == s.train.meta
    cats_dogs = read_cifar10(tmp_path, classes=(3, 5))
    assert cats_dogs.n_classes == 2 and cats_dogs.train.meta["class_names"] == ["cat", "dog"]
    assert set(cats_dogs.train.y.tolist()) == {0, 1}
    # The batches folder itself may be given.
    assert torch.equal(read_cifar10(tmp_path / "cifar-10-batches-py").test.x, s.test.x)


def test_cifar10_missing_and_corrupt(tmp_path):
    folder, _ = _write_cifar10(tmp_path)
    (folder / "test_batch").unlink()
    _expect_file_error(lambda: read_cifar10(tmp_path), "test_batch", "cifar-10-python.tar.gz")
    _dump(folder / "test_batch", {b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]})
    _expect_file_error(lambda: read_cifar10(tmp_path), "test_batch", "cifar-10")
    _dump(folder / "test_batch", {b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]})
    _expect_file_error(lambda: read_cifar10(tmp_path), "test_batch", "cifar-10")
    _dump(folder / "test_batch", {b"data": np.zeros((2, 3072), np.uint8)})
    _expect_file_error(lambda: read_cifar10(tmp_path), "test_batch", "cifar-10")
    (folder / "test_batch").write_bytes(b"not a pickle at all")
    _expect_file_error(lambda: read_cifar10(tmp_path), "test_batch", "cifar-10")
    # Globals other than numpy's array machinery are refused, so a tampered file runs no code.
    _dump(folder / "test_batch", collections.OrderedDict(data=1))
    err = _expect_file_error(lambda: read_cifar10(tmp_path), "test_batch", "cifar-10")
    assert "refusing" in str(err)


def _write_cifar100(root, n_train=40, n_test=20):
    folder = root / "cifar-100-python"
    small_mammals = [36, 50, 65, 74, 80]  # hamster, mouse, rabbit, shrew, squirrel
    splits = {}
    for name, n in (("train", n_train), ("test", n_test)):
        fine = np.array([small_mammals[j % 5] if j % 2 == 0 else (j * 3) % 100 for j in range(n)])
        coarse = np.where(np.isin(fine, small_mammals), 16, fine % 16)
        batch, data = _cifar_dict(
            n, {"fine_labels": fine.tolist(), "coarse_labels": coarse.tolist()}
        )
        _dump(folder / name, batch)
        splits[name] = (data, fine, coarse)
    fine_names = [f"fine{i}".encode() for i in range(100)]
    for i, name in zip(
        small_mammals, [b"hamster", b"mouse", b"rabbit", b"shrew", b"squirrel"], strict=True
    ):
        fine_names[i] = name
    coarse_names = [f"coarse{i}".encode() for i in range(20)]
    coarse_names[16] = b"small_mammals"
    _dump(folder / "meta", {b"fine_label_names": fine_names, b"coarse_label_names": coarse_names})
    return splits


def test_cifar100_fine_coarse_and_superclass(tmp_path):
    splits = _write_cifar100(tmp_path)
    fine = read_cifar100(tmp_path)
    assert fine.n_classes == 100 and fine.train.x.shape == (40, 3, 32, 32)
    assert fine.train.y.tolist() == splits["train"][1].tolist()
    assert torch.equal(fine.test.x, _as_float(splits["test"][0].reshape(-1, 3, 32, 32)))
    coarse = read_cifar100(tmp_path, label_type="coarse")
    assert coarse.n_classes == 20 and coarse.test.y.tolist() == splits["test"][2].tolist()
    mammals = read_cifar100(tmp_path, superclass="small mammals")
    assert mammals.n_classes == 5
    assert mammals.train.meta["class_names"] == ["hamster", "mouse", "rabbit", "shrew", "squirrel"]
    data, f, c = splits["train"]
    keep = c == 16
    lookup = {36: 0, 50: 1, 65: 2, 74: 3, 80: 4}
    assert mammals.train.y.tolist() == [lookup[v] for v in f[keep]]
    assert torch.equal(mammals.train.x, _as_float(data[keep].reshape(-1, 3, 32, 32)))
    assert torch.equal(read_cifar100(tmp_path, superclass=16).train.y, mammals.train.y)
    pair = read_cifar100(tmp_path, superclass="small_mammals", classes=(4, 0))
    assert pair.train.meta["class_names"] == ["squirrel", "hamster"]
    with pytest.raises(ValueError, match="superclass"):
        read_cifar100(tmp_path, superclass="dragons")
    with pytest.raises(ValueError):
        read_cifar100(tmp_path, superclass=20)
    with pytest.raises(ValueError):
        read_cifar100(tmp_path, label_type="coarse", superclass=16)
    with pytest.raises(ValueError):
        read_cifar100(tmp_path, label_type="medium")


def test_cifar100_bad_labels(tmp_path):
    _write_cifar100(tmp_path)
    batch, _ = _cifar_dict(3, {"fine_labels": [0, 1, 100], "coarse_labels": [0, 0, 0]})
    _dump(tmp_path / "cifar-100-python" / "test", batch)
    _expect_file_error(lambda: read_cifar100(tmp_path), "test", "cifar-100-python.tar.gz")


# --------------------------------------------------------------------------- SVHN


def _write_svhn(root, name, n, labels=None):
    x = RNG.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
    y = np.array(labels if labels is not None else [(j % 10) + 1 for j in range(n)], dtype=np.uint8)
    scipy.io.savemat(root / name, {"X": x, "y": y.reshape(-1, 1)})
    return x, y


def test_svhn_round_trip(tmp_path):
    x_tr, y_tr = _write_svhn(tmp_path, "train_32x32.mat", 12)
    x_te, y_te = _write_svhn(tmp_path, "test_32x32.mat", 7)
    s = read_svhn(tmp_path)
    assert s.train.x.shape == (12, 3, 32, 32)
    for i in range(12):
        assert torch.equal(s.train.x[i], _as_float(x_tr[:, :, :, i].transpose(2, 0, 1).copy()))
    assert s.train.y.tolist() == [int(v) % 10 for v in y_tr]  # label 10 is digit 0
    assert 0 in s.train.y.tolist() and s.test.y.tolist() == [int(v) % 10 for v in y_te]
    assert torch.equal(s.test.x, _as_float(x_te.transpose(3, 2, 0, 1).copy()))
    x_ex, _ = _write_svhn(tmp_path, "extra_32x32.mat", 5)
    extra = read_svhn(tmp_path, include_extra=True)
    assert len(extra.train) == 17
    assert torch.equal(extra.train.x[12:], _as_float(x_ex.transpose(3, 2, 0, 1).copy()))


def test_svhn_missing_and_corrupt(tmp_path):
    _write_svhn(tmp_path, "train_32x32.mat", 4)
    _expect_file_error(lambda: read_svhn(tmp_path), "test_32x32.mat", "ufldl.stanford.edu")
    (tmp_path / "test_32x32.mat").write_bytes(b"MATLAB garbage" * 20)
    _expect_file_error(lambda: read_svhn(tmp_path), "test_32x32.mat", "ufldl")
    scipy.io.savemat(tmp_path / "test_32x32.mat", {"X": np.zeros((32, 32, 3, 2), np.uint8)})
    _expect_file_error(lambda: read_svhn(tmp_path), "test_32x32.mat", "ufldl")
    _write_svhn(tmp_path, "test_32x32.mat", 2, labels=[0, 11])
    _expect_file_error(lambda: read_svhn(tmp_path), "test_32x32.mat", "ufldl")
    scipy.io.savemat(
        tmp_path / "test_32x32.mat", {"X": np.zeros((28, 28, 1, 2), np.uint8), "y": np.ones((2, 1))}
    )
    _expect_file_error(lambda: read_svhn(tmp_path), "test_32x32.mat", "ufldl")


# ------------------------------------------------------------------------- STL-10


def _write_stl(folder, prefix, n):
    folder.mkdir(parents=True, exist_ok=True)
    images = RNG.integers(0, 256, (n, 3, 96, 96), dtype=np.uint8)
    labels = np.array([(j % 10) + 1 for j in range(n)], dtype=np.uint8)
    # The distribution stores each 96 x 96 channel column-major: byte c * 96 + r is pixel (r, c).
    (folder / f"{prefix}_X.bin").write_bytes(images.transpose(0, 1, 3, 2).tobytes())
    (folder / f"{prefix}_y.bin").write_bytes(labels.tobytes())
    return images, labels


def test_stl10_round_trip(tmp_path):
    folder = tmp_path / "stl10_binary"
    x_tr, y_tr = _write_stl(folder, "train", 6)
    x_te, y_te = _write_stl(folder, "test", 4)
    s = read_stl10(tmp_path)
    assert s.train.x.shape == (6, 3, 96, 96)
    assert torch.equal(s.train.x, _as_float(x_tr)) and torch.equal(s.test.x, _as_float(x_te))
    assert s.train.y.tolist() == (y_tr.astype(int) - 1).tolist()
    assert s.test.y.tolist() == (y_te.astype(int) - 1).tolist()
    # Byte-level check of the column-major convention on one pixel.
    raw = np.frombuffer((folder / "train_X.bin").read_bytes(), np.uint8)
    assert s.train.x[1, 2, 5, 7] == raw[1 * 27648 + 2 * 9216 + 7 * 96 + 5] / 255.0
    assert s.train.meta["class_names"][7] == "monkey"


def test_stl10_missing_and_corrupt(tmp_path):
    folder = tmp_path / "stl10_binary"
    _write_stl(folder, "train", 3)
    _expect_file_error(lambda: read_stl10(tmp_path), "test_X.bin", "stl10_binary.tar.gz")
    _write_stl(folder, "test", 2)
    (folder / "test_X.bin").write_bytes(b"\x00" * 1000)
    _expect_file_error(lambda: read_stl10(tmp_path), "test_X.bin", "stanford")
    _write_stl(folder, "test", 2)
    (folder / "test_y.bin").write_bytes(bytes([1, 2, 3]))
    _expect_file_error(lambda: read_stl10(tmp_path), "test_y.bin", "stanford")
    (folder / "test_y.bin").write_bytes(bytes([0, 2]))
    _expect_file_error(lambda: read_stl10(tmp_path), "test_y.bin", "stanford")
