"""Datasets from installed packages: scikit-learn's digits and the mnist1d generator."""

import random
import socket

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from collapselab.data import digits, mnist1d

# -------------------------------------------------------------------------- digits


def test_digits_balanced_stratified_split():
    s = digits(n_per_class=40, test_fraction=0.25, seed=0)
    assert s.train.x.shape == (300, 64) and s.test.x.shape == (100, 64)
    assert s.train.x.dtype == torch.float32 and s.train.y.dtype == torch.int64
    assert s.train.class_counts().tolist() == [30] * 10
    assert s.test.class_counts().tolist() == [10] * 10


def test_digits_all_images_and_image_layout():
    s = digits(test_fraction=0.2, flatten=False, standardize=False)
    assert len(s.train) + len(s.test) == 1797
    assert s.train.x.shape[1:] == (1, 8, 8)
    counts = np.bincount(load_digits().target)
    assert torch.equal(s.train.class_counts() + s.test.class_counts(), torch.from_numpy(counts))


def test_digits_values_are_the_sklearn_images():
    s = digits(n_per_class=20, seed=3, standardize=False)
    ref = load_digits()
    table = {
        tuple((row / 16.0).astype(np.float32)): int(t)
        for row, t in zip(ref.data, ref.target, strict=True)
    }
    for split in (s.train, s.test):
        for x, y in zip(split.x.numpy(), split.y.tolist(), strict=True):
            assert table[tuple(x)] == y  # each row is an sklearn image with its own label
    assert float(s.train.x.min()) >= 0.0 and float(s.train.x.max()) <= 1.0
    # Train and test are disjoint.
    train_rows = {tuple(r) for r in s.train.x.numpy()}
    assert not any(tuple(r) in train_rows for r in s.test.x.numpy())


def test_digits_standardised_with_train_statistics():
    raw = digits(n_per_class=50, seed=2, standardize=False)
    std = digits(n_per_class=50, seed=2, standardize=True)
    x = raw.train.x.double()
    mean, sd = x.mean(), x.std(unbiased=False)
    assert float(std.train.x.double().mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(std.train.x.double().std(unbiased=False)) == pytest.approx(1.0, abs=1e-6)
    torch.testing.assert_close(
        std.test.x.double(), (raw.test.x.double() - mean) / sd, rtol=0, atol=1e-6
    )


def test_digits_deterministic_and_seeded():
    a, b, c = digits(30, seed=1), digits(30, seed=1), digits(30, seed=2)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.y, b.test.y)
    assert not torch.equal(a.train.x, c.train.x)
    assert digits(30, test_fraction=0.0).test is None


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"n_per_class": 175}, ValueError),
        ({"n_per_class": 0}, ValueError),
        ({"test_fraction": 1.0}, ValueError),
        ({"test_fraction": -0.1}, ValueError),
        ({"n_per_class": 2, "test_fraction": 0.9}, ValueError),
        ({"n_per_class": "10"}, TypeError),
    ],
)
def test_digits_bad_inputs(kwargs, error):
    with pytest.raises(error):
        digits(**kwargs)


# ------------------------------------------------------------------------- mnist1d


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    import mnist1d.data

    monkeypatch.setattr(mnist1d.data, "get_dataset", refuse)


def test_mnist1d_matches_the_package_generator(no_network):
    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args()
    args.num_samples, args.train_split, args.seed = 100, 0.8, 3
    ref = make_dataset(args)
    s = mnist1d(n_train=80, n_test=20, seed=3)
    np.testing.assert_array_equal(s.train.x.numpy(), ref["x"].astype(np.float32))
    np.testing.assert_array_equal(s.test.x.numpy(), ref["x_test"].astype(np.float32))
    np.testing.assert_array_equal(s.train.y.numpy(), ref["y"])
    np.testing.assert_array_equal(s.test.y.numpy(), ref["y_test"])
    assert s.train.x.shape == (80, 40) and s.train.y.dtype == torch.int64
    assert s.n_classes == 10


def test_mnist1d_deterministic_seeded_and_leaves_global_rng_alone(no_network):
    # The package draws from the legacy global generators; they must be left as found.
    np.random.seed(123)  # noqa: NPY002
    random.seed(123)
    expected_np, expected_py = np.random.random(), random.random()  # noqa: NPY002
    np.random.seed(123)  # noqa: NPY002
    random.seed(123)
    a = mnist1d(n_train=45, n_test=12, seed=5)  # 57 -> 60 generated, the rest discarded
    assert np.random.random() == expected_np and random.random() == expected_py  # noqa: NPY002
    b = mnist1d(n_train=45, n_test=12, seed=5)
    c = mnist1d(n_train=45, n_test=12, seed=6)
    assert a.train.x.shape == (45, 40) and a.test.x.shape == (12, 40)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.y, b.test.y)
    assert not torch.equal(a.train.x, c.train.x)


def test_mnist1d_options(no_network):
    s = mnist1d(n_train=30, n_test=0, seed=1, channel_dim=True, final_seq_length=24)
    assert s.train.x.shape == (30, 1, 24) and s.test is None
    with pytest.raises(TypeError, match="url"):
        mnist1d(n_train=10, url="https://example.invalid")
    with pytest.raises(ValueError):
        mnist1d(n_train=0)
