"""Paper 003's paper preset as a configuration: a dry run from fixture files, no training.

Tiny files are written in each dataset's real distribution format (IDX, CIFAR pickles,
SVHN MATLAB, STL-10 binaries); the dry run must build the paper's network, the padded and
standardised balanced data, the optimiser, the step schedule, the learning-rate grid and
the measurement epochs.
"""

from __future__ import annotations

import gzip
import pickle
import struct

import numpy as np
import pytest
import scipy.io
import torch

from collapselab.data.steps import Pad, StandardizeChannels
from collapselab.experiments import get_experiment
from collapselab.experiments.mse_nc import (
    COLLAPSE_PRESETS,
    PAPER_N_PER_CLASS,
    PAPER_TABLE,
    paper_dry_run,
    paper_lr_grid,
)
from collapselab.experiments.mse_nc.arms import arms_of
from collapselab.models import VGG, DenseNet, ResNet
from collapselab.track import PAPER_003_EPOCHS

RNG = np.random.default_rng(0)
N_TRAIN, N_TEST = 40, 20  # 4 and 2 images per class


def _labels(n: int) -> np.ndarray:
    return np.arange(n) % 10


def _idx(path, array: np.ndarray) -> None:
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(f"{path}.gz", "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


def write_mnist_like(root) -> None:
    root.mkdir(parents=True, exist_ok=True)
    _idx(root / "train-images-idx3-ubyte", RNG.integers(0, 256, (N_TRAIN, 28, 28)))
    _idx(root / "train-labels-idx1-ubyte", _labels(N_TRAIN))
    _idx(root / "t10k-images-idx3-ubyte", RNG.integers(0, 256, (N_TEST, 28, 28)))
    _idx(root / "t10k-labels-idx1-ubyte", _labels(N_TEST))


def write_cifar10(root) -> None:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for i, name in enumerate(names):
        n = N_TRAIN // 5 if name != "test_batch" else N_TEST
        labels = (np.arange(n) + i * n) % 10  # every class in the five training batches
        batch = {
            b"data": RNG.integers(0, 256, (n, 3072), dtype=np.uint8),
            b"labels": [int(v) for v in labels],
        }
        with open(folder / name, "wb") as handle:
            pickle.dump(batch, handle, protocol=2)


def write_svhn(root) -> None:
    for name, n in (("train_32x32.mat", N_TRAIN), ("test_32x32.mat", N_TEST)):
        x = RNG.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
        y = (_labels(n) + 1).astype(np.uint8).reshape(-1, 1)  # label 10 is the digit 0
        scipy.io.savemat(root / name, {"X": x, "y": y})


def write_stl10(root) -> None:
    folder = root / "stl10_binary"
    folder.mkdir(parents=True)
    for prefix, n in (("train", N_TRAIN), ("test", N_TEST)):
        images = RNG.integers(0, 256, (n, 3, 96, 96), dtype=np.uint8)
        (folder / f"{prefix}_X.bin").write_bytes(images.transpose(0, 1, 3, 2).tobytes())
        (folder / f"{prefix}_y.bin").write_bytes((_labels(n) + 1).astype(np.uint8).tobytes())


WRITERS = {
    "mnist": write_mnist_like,
    "fashion_mnist": write_mnist_like,
    "svhn": write_svhn,
    "cifar10": write_cifar10,
    "stl10": write_stl10,
}


def _check_common(dry, shape) -> None:
    tc = dry.train_config
    assert tc.epochs == 350 and tc.batch_size == 128 and tc.momentum == 0.9
    assert tc.weight_decay == 5e-4 and tc.schedule == "step" and tc.drop_last
    assert tc.loss == dry.loss and tc.mse_reduction == "mean"
    assert dry.milestones == (116, 233)
    lr0 = dry.lr_grid[0][1]
    assert tc.lr == lr0 == pytest.approx(1e-4, rel=1e-12)
    expected = [lr0] * 116 + [lr0 * 0.1] * 117 + [lr0 * 0.01] * 117
    np.testing.assert_allclose(dry.lr_schedule, expected, rtol=1e-12)
    assert dry.measurement_epochs == list(PAPER_003_EPOCHS)
    assert [i for i, _ in dry.lr_grid] == list(range(25))
    assert dry.input_shape == shape
    counts = dry.data.train.class_counts().tolist()
    assert counts == [3] * 10  # the balanced subset (fixture override of the paper's N)
    assert len(dry.data.test) == N_TEST  # the whole test split
    x = dry.data.train.x.double()
    mean = x.mean(dim=(0, 2, 3))
    std = x.permute(1, 0, 2, 3).reshape(shape[0], -1).std(dim=1, unbiased=False)
    np.testing.assert_allclose(mean.numpy(), 0.0, atol=1e-5)  # standardised per channel
    np.testing.assert_allclose(std.numpy(), 1.0, rtol=1e-4)
    assert dry.feature_dim == dry.model.classifier.in_features


@pytest.mark.parametrize(
    ("dataset", "family", "shape", "forward"),
    [
        ("mnist", "resnet", (1, 32, 32), True),
        ("svhn", "vgg", (3, 32, 32), True),
        ("cifar10", "densenet", (3, 32, 32), False),
        ("stl10", "densenet", (3, 96, 96), False),
        ("fashion_mnist", "densenet", (1, 32, 32), False),
    ],
)
def test_dry_run_builds_the_paper_arm(tmp_path, dataset, family, shape, forward):
    WRITERS[dataset](tmp_path)
    dry = paper_dry_run(dataset, family, tmp_path, n_train_per_class=3, forward=forward)
    _check_common(dry, shape)
    assert dry.net == PAPER_TABLE[dataset][family]
    model = dry.model
    assert model.in_channels == shape[0] and model.n_classes == 10
    if dataset == "mnist":
        assert isinstance(model, ResNet) and model.layer_counts == [2, 2, 2, 2]
        assert dry.feature_dim == 512
        # Padding 28 -> 32 is centred (2 pixels each side) and precedes standardisation:
        # the border is constant before standardisation, so it is constant after it.
        border = dry.data.train.x[:, 0, 0, :]
        assert float(border.max() - border.min()) < 1e-6
    elif dataset == "svhn":
        assert isinstance(model, VGG)
        assert sum(isinstance(m, torch.nn.Conv2d) for m in model.modules()) == 10  # VGG13
    else:
        assert isinstance(model, DenseNet)
        assert model.depth == {"cifar10": 100, "stl10": 201, "fashion_mnist": 250}[dataset]
    assert dry.lam == pytest.approx(10 * 5e-4 / 2)  # nn.MSELoss(): lam = C wd / 2


def test_cross_entropy_dry_run_has_no_lambda(tmp_path):
    write_mnist_like(tmp_path)
    dry = paper_dry_run("mnist", "vgg", tmp_path, loss="ce", n_train_per_class=3)
    assert dry.lam is None and dry.train_config.loss == "ce"
    assert sum(isinstance(m, torch.nn.Conv2d) for m in dry.model.modules()) == 8  # VGG11


def test_paper_grid_and_preset_values():
    grid = paper_lr_grid()
    assert len(grid) == 25 and grid[0] == pytest.approx(1e-4) and grid[-1] == pytest.approx(0.25)
    # The notebook's tuned MNIST-ResNet18 rates are grid points 16 (MSE) and 20 (CE).
    assert float(f"{grid[16]:.3g}") == 0.0184
    assert float(f"{grid[20]:.3g}") == 0.0679
    np.testing.assert_allclose(np.diff(np.log(grid)), np.log(2500) / 24, rtol=1e-12)
    paper = COLLAPSE_PRESETS["paper"]
    assert PAPER_N_PER_CLASS == {
        "mnist": 5000,
        "fashion_mnist": 6000,
        "svhn": 4600,
        "cifar10": 5000,
        "stl10": 500,
    }
    for name, spec in paper.datasets.items():
        assert spec.options["n_train_per_class"] == PAPER_N_PER_CLASS[name]
        assert _pad_to(spec) == (32 if name in ("mnist", "fashion_mnist") else None)
        assert any(isinstance(step, StandardizeChannels) for step in spec.steps) is True
    arms = arms_of(paper)
    assert len(arms) == 30 and all(a.lr is None and a.epochs == 350 for a in arms)
    assert {(a.dataset, a.net) for a in arms} == {
        (d, n) for d, row in PAPER_TABLE.items() for n in row.values()
    }
    assert paper.lr_sweep.indices is None and paper.lr_sweep.n == 25
    experiment = get_experiment("mse-nc-collapse")
    assert experiment.config("paper") == paper


def _pad_to(spec):
    """The size a spec's Pad step pads to (``None`` without one)."""
    sizes = [step.size for step in spec.steps if isinstance(step, Pad)]
    return sizes[0] if sizes else None


def test_dry_run_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown dataset"):
        paper_dry_run("imagenet", "vgg", tmp_path)
    with pytest.raises(ValueError, match="family"):
        paper_dry_run("mnist", "lenet", tmp_path)
    with pytest.raises(FileNotFoundError, match="mnist"):
        paper_dry_run("mnist", "vgg", tmp_path / "empty", n_train_per_class=3)
