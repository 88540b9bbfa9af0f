"""DataSpec, its steps and the one loader, against explicit float64 references."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from collapselab.data import DataSpec, DataSplits, LabeledData, load_data, load_dataset, steps


def _splits(seed: int = 0, n: int = 12, shape: tuple[int, ...] = (1, 4, 4)) -> DataSplits:
    g = torch.Generator().manual_seed(seed)

    def split(k: int) -> LabeledData:
        x = torch.randn(k, *shape, generator=g) * 3 + 1
        return LabeledData(x, torch.arange(k) % 3, 3, "toy")

    return DataSplits(split(n), split(n // 2))


MIXTURE = DataSpec("gaussian_mixture", {"n_classes": 3, "dim": 4, "n_train_per_class": 5})


def test_unknown_dataset_option_step_and_file_fallback_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown dataset 'imagenet'"):
        DataSpec("imagenet")
    with pytest.raises(ValueError, match=r"unknown loader option\(s\) \['widht'\]"):
        DataSpec("gaussian_mixture", {"widht": 3})
    with pytest.raises(ValueError, match="steps must be Step objects"):
        DataSpec("digits", steps=("flatten",))
    with pytest.raises(ValueError, match="fallback must be bundled or generated"):
        DataSpec("fashion_mnist", fallback=DataSpec("mnist"))


def test_names_are_canonical_and_the_record_is_plain_json() -> None:
    spec = DataSpec(
        "Fashion-MNIST",
        {"n_train_per_class": 5},
        steps=(steps.Flatten(), steps.Cast("float32")),
        fallback=DataSpec("digits", {"n_per_class": 5}),
    )
    assert spec.name == "fashion_mnist" and spec.reads_files and not spec.fallback.reads_files
    record = json.loads(json.dumps(spec.to_dict()))
    assert record["steps"] == [{"step": "flatten"}, {"step": "cast", "dtype": "float32"}]
    assert record["fallback"]["name"] == "digits"
    assert spec.describe() == "fashion_mnist(n_train_per_class=5) -> flatten -> cast"


def test_load_without_steps_is_the_registry_loader() -> None:
    direct = load_dataset("gaussian_mixture", seed=3, n_classes=3, dim=4, n_train_per_class=5)
    loaded = load_data(MIXTURE, seed=3)
    assert torch.equal(direct.train.x, loaded.train.x) and torch.equal(
        direct.train.y, loaded.train.y
    )


def test_standardize_scalar_is_one_mean_and_unbiased_std_of_the_training_entries() -> None:
    data = _splits()
    out = steps.StandardizeScalar().apply(data, seed=0)
    train = data.train.x.numpy().astype(np.float64).ravel()
    m = sum(train) / len(train)
    s = (sum((v - m) ** 2 for v in train) / (len(train) - 1)) ** 0.5
    for got, split in ((out.train, data.train), (out.test, data.test)):
        assert got.x.dtype == torch.float64
        want = (split.x.numpy().astype(np.float64) - m) / s
        np.testing.assert_allclose(got.x.numpy(), want, rtol=1e-12, atol=1e-12)


def test_standardize_channels_uses_the_training_split_per_channel_ddof0() -> None:
    data = _splits(shape=(2, 3, 3))
    out = steps.StandardizeChannels().apply(data, seed=0)
    x = data.train.x.numpy().astype(np.float64)
    for c in range(2):
        values = x[:, c].ravel()
        m = values.mean()
        s = np.sqrt(((values - m) ** 2).mean())
        want = (data.test.x.numpy()[:, c].astype(np.float64) - m) / s
        np.testing.assert_allclose(out.test.x.numpy()[:, c], want, rtol=1e-6, atol=1e-6)
    assert out.test.x.dtype == data.test.x.dtype


def test_flatten_cast_sort_and_drop_test() -> None:
    data = _splits()
    flat = steps.Flatten().apply(data, 0)
    assert flat.train.x.shape == (12, 16) and torch.equal(flat.train.x[5], data.train.x[5].ravel())
    cast = steps.Cast("float64").apply(flat, 0)
    assert cast.train.x.dtype == torch.float64
    ordered = steps.SortByClass().apply(flat, 0)
    want = sorted(range(12), key=lambda i: (int(data.train.y[i]), i))  # stable, class-major
    assert torch.equal(ordered.train.x, flat.train.x[want])
    assert ordered.train.y.tolist() == sorted(data.train.y.tolist())
    assert steps.DropTest().apply(data, 0).test is None
    with pytest.raises(ValueError, match="dtype must be"):
        steps.Cast("float16")


def test_keep_classes_relabels_in_the_order_given() -> None:
    data = _splits()
    kept = steps.KeepClasses((2, 0)).apply(data, 0)
    want_x = [data.train.x[i] for i in range(12) if int(data.train.y[i]) in (2, 0)]
    want_y = [
        {2: 0, 0: 1}[int(data.train.y[i])] for i in range(12) if int(data.train.y[i]) in (2, 0)
    ]
    assert kept.train.n_classes == 2 and kept.train.y.tolist() == want_y
    assert torch.equal(kept.train.x, torch.stack(want_x))


def test_pool_averages_factor_blocks() -> None:
    data = _splits(shape=(1, 4, 4))
    pooled = steps.Pool(2).apply(data, 0)
    x = data.train.x.numpy()
    assert pooled.train.x.shape == (12, 1, 2, 2)
    for i in range(2):
        for j in range(2):
            want = x[:, 0, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2].reshape(12, -1).mean(axis=1)
            np.testing.assert_allclose(pooled.train.x.numpy()[:, 0, i, j], want, rtol=1e-6)
    assert steps.Pool(1).apply(data, 0) is data
    with pytest.raises(ValueError, match="single-channel square"):
        steps.Pool(2).apply(_splits(shape=(2, 4, 4)), 0)


def test_pad_and_crop_shapes_and_values() -> None:
    data = _splits(shape=(1, 4, 4))
    padded = steps.Pad(6).apply(data, 0)
    assert padded.train.x.shape == (12, 1, 6, 6) and float(padded.train.x[:, :, 0].abs().sum()) == 0
    cropped = steps.CenterCrop(4).apply(padded, 0)
    assert torch.equal(cropped.train.x, data.train.x)


def test_balance_to_counts_and_to_the_smallest_class() -> None:
    x = torch.randn(10, 2)
    y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    data = DataSplits(LabeledData(x, y, 3), LabeledData(x, y, 3))
    smallest = steps.Balance("smallest").apply(data, seed=0)
    assert smallest.train.class_counts().tolist() == [3, 3, 3]
    two = steps.Balance(2, 1).apply(data, seed=0)
    assert two.train.class_counts().tolist() == [2, 2, 2] and two.test.class_counts().tolist() == [
        1,
        1,
        1,
    ]
    test_only = steps.Balance(None, 1).apply(data, seed=0)
    assert test_only.train is data.train and test_only.test.class_counts().tolist() == [1, 1, 1]
    with pytest.raises(ValueError, match="'smallest' or None"):
        steps.Balance("largest")


def test_shuffle_whiten_and_relabel() -> None:
    data = steps.Flatten().apply(_splits(n=60), 0)
    assert steps.ShuffleLabels(0.0).apply(data, 0) is data
    shuffled = steps.ShuffleLabels(1.0).apply(data, 0)
    assert sorted(shuffled.train.y.tolist()) == sorted(data.train.y.tolist())
    white = steps.WhitenZCA(1e-9).apply(steps.Cast("float64").apply(data, 0), 0)
    x = white.train.x.numpy()
    cov = (x - x.mean(0)).T @ (x - x.mean(0)) / len(x)
    np.testing.assert_allclose(cov, np.eye(16), atol=1e-6)
    relabelled = steps.RelabelSeparable(2).apply(data, 0)
    from collapselab.data import SeparableRelabel

    direct = SeparableRelabel(2).fit(data.train.x, data.train.y, 3)
    assert torch.equal(relabelled.train.y, direct.train_labels)
    assert torch.equal(relabelled.test.y, direct.predict(data.test.x))
