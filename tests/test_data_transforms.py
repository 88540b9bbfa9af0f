"""Standardisation, padding, balanced subsets and label shuffling."""

import numpy as np
import pytest
import torch

import collapselab.data.transforms as transforms_module
from collapselab.data import (
    DataSplits,
    LabeledData,
    Standardize,
    balanced_subset,
    pad_to_size,
    shuffle_labels,
)


def _images(n=40, c=3, h=5, w=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    offsets = torch.tensor([3.0, -2.0, 0.5, 7.0])[:c].reshape(1, c, 1, 1)
    scales = torch.tensor([2.0, 0.3, 5.0, 1.0])[:c].reshape(1, c, 1, 1)
    return (torch.randn(n, c, h, w, generator=g, dtype=torch.float64) * scales + offsets).to(dtype)


def _labelled(n_per_class=(5, 7, 6), dim=3, seed=0):
    y = torch.cat([torch.full((k,), c, dtype=torch.int64) for c, k in enumerate(n_per_class)])
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(y), dim, generator=g)
    x[:, 0] = torch.arange(len(y), dtype=torch.float32)  # identifies each row
    return LabeledData(x, y, len(n_per_class), "toy")


# ----------------------------------------------------------------------- Standardize


def test_standardize_per_channel_matches_explicit_loops():
    x = _images()
    scaler = Standardize().fit(x)
    arr = x.numpy()
    for c in range(3):
        values = arr[:, c].ravel()
        assert float(scaler.mean[c]) == pytest.approx(values.mean(), abs=1e-12)
        assert float(scaler.std[c]) == pytest.approx(values.std(), abs=1e-12)
    out = scaler.apply(x)
    assert out.dtype == torch.float64 and out.shape == x.shape
    for c in range(3):
        assert float(out[:, c].mean()) == pytest.approx(0.0, abs=1e-12)
        assert float(out[:, c].std(unbiased=False)) == pytest.approx(1.0, abs=1e-12)


def test_standardize_float32_and_test_split_uses_train_statistics():
    train, test = _images(seed=1, dtype=torch.float32), _images(n=9, seed=2, dtype=torch.float32)
    s = Standardize().fit_apply(
        DataSplits(
            LabeledData(train, torch.zeros(40, dtype=torch.int64), 1),
            LabeledData(test, torch.zeros(9, dtype=torch.int64), 1),
        )
    )
    assert s.train.x.dtype == torch.float32
    per_channel = s.train.x.double().transpose(0, 1).reshape(3, -1)
    torch.testing.assert_close(
        per_channel.mean(1), torch.zeros(3, dtype=torch.float64), rtol=0, atol=1e-6
    )
    torch.testing.assert_close(
        per_channel.std(1, unbiased=False), torch.ones(3, dtype=torch.float64), rtol=0, atol=1e-6
    )
    t = train.double()
    mean = t.mean(dim=(0, 2, 3), keepdim=True)
    std = t.std(dim=(0, 2, 3), keepdim=True, unbiased=False)
    torch.testing.assert_close(s.test.x.double(), (test.double() - mean) / std, rtol=0, atol=1e-5)
    assert s.train.meta["transforms"] == ["Standardize(eps=1e-12)"]


def test_standardize_vectors_constant_channels_and_blocks(monkeypatch):
    x = torch.randn(50, 4, dtype=torch.float64) * torch.tensor([1.0, 2.0, 3.0, 4.0])
    x[:, 2] = 5.0  # constant feature: centred only
    full = Standardize().fit(x)
    out = full.apply(x)
    assert torch.equal(out[:, 2], torch.zeros(50, dtype=torch.float64))
    torch.testing.assert_close(
        out[:, [0, 1, 3]].std(0, unbiased=False), torch.ones(3, dtype=torch.float64)
    )
    monkeypatch.setattr(transforms_module, "_BLOCK_ELEMENTS", 7)  # many small blocks
    blocked = Standardize().fit(x)
    torch.testing.assert_close(blocked.mean, full.mean, rtol=0, atol=1e-14)
    torch.testing.assert_close(blocked.apply(x), out, rtol=0, atol=1e-14)


def test_standardize_bad_inputs():
    with pytest.raises(RuntimeError, match="fit"):
        Standardize().apply(torch.zeros(2, 3))
    scaler = Standardize().fit(torch.randn(5, 3))
    with pytest.raises(ValueError, match="channels"):
        scaler.apply(torch.randn(5, 4))
    with pytest.raises(ValueError, match="NaN"):
        Standardize().fit(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(TypeError):
        Standardize().fit(torch.zeros(3, 2, dtype=torch.int64))
    with pytest.raises(ValueError):
        Standardize().fit(torch.zeros(5))
    with pytest.raises(ValueError):
        Standardize().fit(torch.zeros(0, 3))


# --------------------------------------------------------------------------- padding


def test_pad_to_32_keeps_the_original_in_the_centre():
    x = torch.rand(4, 1, 28, 28) + 1.0
    out = pad_to_size(x)
    assert out.shape == (4, 1, 32, 32)
    assert torch.equal(out[:, :, 2:30, 2:30], x)
    mask = torch.ones(32, 32, dtype=torch.bool)
    mask[2:30, 2:30] = False
    assert torch.equal(out[:, :, mask], torch.zeros(4, 1, int(mask.sum())))


def test_pad_odd_difference_rectangular_and_containers():
    x = torch.rand(2, 3, 29, 30) + 1.0
    out = pad_to_size(x, size=(32, 33), value=-1.0)
    assert out.shape == (2, 3, 32, 33)
    assert torch.equal(out[:, :, 1:30, 1:31], x)  # extra row / column at the bottom / right
    assert float(out[:, :, 0].max()) == -1.0 and float(out[:, :, 30:].max()) == -1.0
    data = LabeledData(torch.rand(3, 1, 28, 28), torch.tensor([0, 1, 0]), 2, "m")
    splits = pad_to_size(DataSplits(data, data))
    assert splits.train.input_shape == (1, 32, 32) and splits.test.input_shape == (1, 32, 32)
    assert torch.equal(splits.train.y, data.y)
    assert pad_to_size(x, 30).shape == (2, 3, 30, 30)


def test_pad_bad_inputs():
    with pytest.raises(ValueError, match="smaller"):
        pad_to_size(torch.zeros(1, 1, 40, 40), 32)
    with pytest.raises(ValueError, match="N, C, H, W"):
        pad_to_size(torch.zeros(1, 28, 28), 32)
    with pytest.raises(ValueError):
        pad_to_size(torch.zeros(1, 1, 4, 4), (8, 8, 8))
    with pytest.raises(TypeError):
        pad_to_size([1, 2, 3], 8)


# ------------------------------------------------------------------ balanced subsets


def test_balanced_subset_counts_rows_and_determinism():
    data = _labelled((5, 7, 6))
    sub = balanced_subset(data, 4, seed=3)
    assert sub.class_counts().tolist() == [4, 4, 4]
    rows = sub.x[:, 0].long()
    assert torch.all(rows[1:] > rows[:-1])  # original order kept, no repeats
    assert torch.equal(data.y[rows], sub.y) and torch.equal(data.x[rows], sub.x)
    assert torch.equal(balanced_subset(data, 4, seed=3).x, sub.x)
    assert not torch.equal(balanced_subset(data, 4, seed=4).x, sub.x)
    assert balanced_subset(data, 5).class_counts().tolist() == [5, 5, 5]
    assert sub.meta["transforms"] == ["balanced_subset(n_per_class=4, seed=3)"]


def test_balanced_subset_splits_and_errors():
    splits = DataSplits(_labelled((5, 7, 6)), _labelled((3, 4, 3), seed=1))
    out = balanced_subset(splits, 5, n_test_per_class=2)
    assert out.train.class_counts().tolist() == [5, 5, 5]
    assert out.test.class_counts().tolist() == [2, 2, 2]
    assert len(balanced_subset(splits, 5).test) == 10  # test kept whole
    with pytest.raises(ValueError, match="n_per_class=6"):
        balanced_subset(splits.train, 6)
    with pytest.raises(ValueError):
        balanced_subset(splits.train, 0)
    with pytest.raises(ValueError):
        balanced_subset(LabeledData(torch.zeros(4, 2), torch.tensor([0, 0, 1, 1]), 3), 1)
    with pytest.raises(TypeError):
        balanced_subset(torch.zeros(3, 2), 1)


# ------------------------------------------------------------------- label shuffling


def test_shuffle_labels_preserves_counts_and_touches_only_a_fraction():
    data = _labelled((40, 40, 40))
    out = shuffle_labels(data, fraction=0.25, seed=1)
    assert torch.equal(out.class_counts(), data.class_counts())
    changed = int((out.y != data.y).sum())
    assert 0 < changed <= 30  # at most round(0.25 * 120) labels move
    assert torch.equal(out.x, data.x)
    full = shuffle_labels(data, fraction=1.0, seed=1)
    # With 3 balanced classes about 2/3 of labels change; 120 samples make < 55 very unlikely.
    assert int((full.y != data.y).sum()) > 55
    assert torch.equal(shuffle_labels(data, 0.0).y, data.y)
    assert torch.equal(shuffle_labels(data, 0.5, seed=9).y, shuffle_labels(data, 0.5, seed=9).y)
    assert not torch.equal(
        shuffle_labels(data, 0.5, seed=9).y, shuffle_labels(data, 0.5, seed=10).y
    )


def test_shuffle_labels_on_splits_and_errors():
    splits = DataSplits(_labelled((20, 20)), _labelled((10, 10), seed=2))
    train_only = shuffle_labels(splits, 1.0, seed=0)
    assert torch.equal(train_only.test.y, splits.test.y)
    assert not torch.equal(train_only.train.y, splits.train.y)
    both = shuffle_labels(splits, 1.0, seed=0, which="both")
    assert not torch.equal(both.test.y, splits.test.y)
    assert torch.equal(both.train.y, train_only.train.y)
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError):
            shuffle_labels(splits, bad)
    with pytest.raises(ValueError):
        shuffle_labels(splits, 0.5, which="test")
    np.testing.assert_array_equal(np.bincount(both.test.y.numpy()), [10, 10])
