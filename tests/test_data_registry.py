"""Datasets by name."""

import struct

import numpy as np
import pytest
import torch

from collapselab.data import (
    available_datasets,
    digits,
    frequency_dataset,
    gaussian_mixture,
    load_dataset,
    mnist1d,
    read_mnist,
    spectrum_gaussian,
)

FILE_BASED = ["mnist", "fashion_mnist", "cifar10", "cifar100", "svhn", "stl10", "tiny_imagenet"]


def _same(a, b) -> bool:
    return (
        torch.equal(a.train.x, b.train.x)
        and torch.equal(a.train.y, b.train.y)
        and (a.test is None) == (b.test is None)
        and (a.test is None or torch.equal(a.test.x, b.test.x))
    )


def test_available_datasets():
    assert available_datasets() == [
        "gaussian_mixture",
        "spectrum_gaussian",
        "frequency",
        "mnist1d",
        "digits",
        *FILE_BASED,
    ]


def test_generated_and_bundled_by_name_equal_direct_calls(tmp_path):
    gm = {"n_classes": 3, "dim": 4, "n_train_per_class": 5, "n_test_per_class": 2}
    assert _same(load_dataset("gaussian_mixture", seed=3, **gm), gaussian_mixture(**gm, seed=3))
    assert _same(
        load_dataset("spectrum_gaussian", seed=1, dim=6, n_train_per_class=4, signal="bottom"),
        spectrum_gaussian(dim=6, n_train_per_class=4, signal="bottom", seed=1),
    )
    assert _same(
        load_dataset("frequency", seed=2, n_train=50, n_test=10), frequency_dataset(50, 10, 2)
    )
    assert _same(load_dataset("MNIST-1D", seed=4, n_train=30, n_test=10), mnist1d(30, 10, seed=4))
    assert _same(load_dataset("digits", data_dir=tmp_path, n_per_class=20), digits(20))


def test_file_based_by_name(tmp_path):
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 20), ("t10k", 10)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = np.arange(n, dtype=np.uint8) % 10
        (tmp_path / f"{prefix}-images-idx3-ubyte").write_bytes(
            struct.pack(">IIII", 0x0803, n, 28, 28) + images.tobytes()
        )
        (tmp_path / f"{prefix}-labels-idx1-ubyte").write_bytes(
            struct.pack(">II", 0x0801, n) + labels.tobytes()
        )
    loaded = load_dataset("mnist", data_dir=tmp_path, seed=1, n_train_per_class=2)
    assert _same(loaded, read_mnist(tmp_path, n_train_per_class=2, seed=1))
    assert _same(load_dataset("Fashion-MNIST", data_dir=str(tmp_path)), read_mnist(tmp_path))


@pytest.mark.parametrize("name", FILE_BASED)
def test_file_based_without_data_dir_says_to_pass_it(name):
    with pytest.raises(ValueError, match="--data-dir"):
        load_dataset(name)


def test_bad_names_and_options():
    with pytest.raises(ValueError, match="available"):
        load_dataset("imagenet")
    with pytest.raises(TypeError):
        load_dataset(3)
    with pytest.raises(TypeError, match="unknown option"):
        load_dataset("frequency", n_samples=10)
    with pytest.raises(TypeError, match="unknown option"):
        load_dataset("cifar10", data_dir=".", label_type="fine")
    with pytest.raises(TypeError, match="requires the options"):
        load_dataset("gaussian_mixture", n_classes=2)
    with pytest.raises(TypeError, match="unknown mnist1d generator"):
        load_dataset("mnist1d", n_train=10, bogus=1)


def test_meta_is_json_serialisable(tmp_path):
    import json

    for name, options in (
        (
            "gaussian_mixture",
            {"n_classes": 2, "dim": 3, "n_train_per_class": 4, "clusters_per_class": 2},
        ),
        ("spectrum_gaussian", {"dim": 4, "n_train_per_class": 3}),
        ("frequency", {"n_train": 10, "n_test": 5}),
        ("mnist1d", {"n_train": 20, "n_test": 0}),
        ("digits", {"n_per_class": 10}),
    ):
        meta = load_dataset(name, **options).train.meta
        assert json.loads(json.dumps(meta)) == meta
