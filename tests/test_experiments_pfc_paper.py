"""Paper 001's paper preset as configuration: a dry run of every Table I row on fixture files.

Tiny files are written in each dataset's real distribution format (IDX for MNIST and
Fashion-MNIST, Python pickles for CIFAR-10/100, column-major binaries for STL-10); the dry
run must build Table I's network, the balanced standardised data, the optimiser, the step
schedule (lr divided by 10 after epochs 117 and 233 of 350) and the measurement plan, and
read the last stage's feature shapes from one forward pass. Nothing is trained.
"""

from __future__ import annotations

import gzip
import pickle
import struct

import numpy as np
import pytest

from collapselab.data import DatasetFileError, DataSpec
from collapselab.data.steps import Balance, StandardizeChannels
from collapselab.experiments import (
    TIERS,
    Preset,
    PresetError,
    experiments_for_paper,
    get_experiment,
)
from collapselab.experiments.pfc import TABLE_I, build_network_setup, dry_run, measured_layers
from collapselab.models import ConvResNet, FCResNet
from collapselab.track import PAPER_003_EPOCHS

RNG = np.random.default_rng(0)


def _idx(path, array: np.ndarray) -> None:
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(f"{path}.gz", "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


def _write_idx_dataset(root, train_labels: np.ndarray) -> None:
    root.mkdir(parents=True, exist_ok=True)
    n = train_labels.size
    _idx(root / "train-images-idx3-ubyte", RNG.integers(0, 256, (n, 28, 28)))
    _idx(root / "train-labels-idx1-ubyte", train_labels)
    _idx(root / "t10k-images-idx3-ubyte", RNG.integers(0, 256, (10, 28, 28)))
    _idx(root / "t10k-labels-idx1-ubyte", np.arange(10))


def _pickle(path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        pickle.dump(obj, handle, protocol=2)


def _write_cifar10(root) -> None:
    folder = root / "cifar-10-batches-py"
    for i in range(1, 6):  # 4 images per class in all: classes 2i-2, 2i-1 per batch, x2
        labels = [(2 * (i - 1) + j % 2) for j in range(8)]
        data = RNG.integers(0, 256, (8, 3072), dtype=np.uint8)
        _pickle(folder / f"data_batch_{i}", {b"data": data, b"labels": labels})
    _pickle(
        folder / "test_batch",
        {b"data": RNG.integers(0, 256, (10, 3072), dtype=np.uint8), b"labels": list(range(10))},
    )


def _write_cifar100(root) -> None:
    folder = root / "cifar-100-python"
    for name, n in (("train", 200), ("test", 100)):
        fine = np.arange(n) % 100
        batch = {
            b"data": RNG.integers(0, 256, (n, 3072), dtype=np.uint8),
            b"fine_labels": fine.tolist(),
            b"coarse_labels": (fine % 20).tolist(),
        }
        _pickle(folder / name, batch)


def _write_stl10(root) -> None:
    folder = root / "stl10_binary"
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", 20), ("test", 10)):
        images = RNG.integers(0, 256, (n, 3, 96, 96), dtype=np.uint8)
        (folder / f"{prefix}_X.bin").write_bytes(images.transpose(0, 1, 3, 2).tobytes())
        (folder / f"{prefix}_y.bin").write_bytes((np.arange(n) % 10 + 1).astype(np.uint8).tobytes())


def _write(row: str, root) -> None:
    if row == "mnist":  # unbalanced on purpose: class 3 has 2 images, the others 3 or 4
        labels = np.concatenate([np.repeat(np.arange(10), 3), [0, 1, 2, 4, 5]])
        labels = [*labels[labels != 3].tolist(), 3, 3]
        _write_idx_dataset(root, np.asarray(labels))
    elif row == "fashion_mnist":
        _write_idx_dataset(root / "FashionMNIST" / "raw", np.arange(30) % 10)
    elif row == "cifar10":
        _write_cifar10(root)
    elif row == "cifar100":
        _write_cifar100(root)
    else:
        _write_stl10(root)


# row -> (model class, lr, measured layer names, feature shape of each, classes, per class)
EXPECTED = {
    "mnist": (
        FCResNet,
        0.005,
        ["stem", *(f"blocks.{i}" for i in range(10))],
        [1000],
        10,
        2,
    ),
    "fashion_mnist": (
        ConvResNet,
        0.01,
        ["stages.1.transition", *(f"stages.1.blocks.{i}" for i in range(4))],
        [64, 7, 7],
        10,
        3,
    ),
    "cifar10": (
        ConvResNet,
        0.01,
        ["stages.2.transition", *(f"stages.2.blocks.{i}" for i in range(4))],
        [256, 4, 4],
        10,
        4,
    ),
    "stl10": (
        ConvResNet,
        0.01,
        ["stages.3.transition", *(f"stages.3.blocks.{i}" for i in range(5))],
        [512, 6, 6],
        10,
        2,
    ),
    "cifar100": (
        ConvResNet,
        0.01,
        ["stages.3.transition", *(f"stages.3.blocks.{i}" for i in range(4))],
        [512, 4, 4],
        100,
        2,
    ),
}


@pytest.mark.parametrize("row", list(EXPECTED))
def test_paper_dry_run_builds_table_i_from_fixture_files(tmp_path, row):
    model_cls, lr, layers, shape, n_classes, per_class = EXPECTED[row]
    _write(row, tmp_path)
    summary = dry_run(TABLE_I[row], data_dir=tmp_path)
    # 001 §IV-A protocol: SGD momentum 0.9, wd 5e-4, batch 128, 350 epochs, lr / 10 at 117, 233
    assert summary["epochs"] == 350 and summary["milestones"] == [117, 233]
    assert summary["lr"] == lr and summary["momentum"] == 0.9
    assert summary["weight_decay"] == 5e-4 and summary["batch_size"] == 128
    assert summary["lr_per_epoch"] == {
        1: lr,
        118: pytest.approx(lr / 10, rel=1e-12),
        234: pytest.approx(lr / 100, rel=1e-12),
    }
    # Table I: the last stage's blocks (and their input, layer0), one shape each
    assert summary["model"] == model_cls.__name__
    assert summary["layers"] == layers
    assert summary["feature_shapes"] == dict.fromkeys(layers, shape)
    assert summary["feature_dim"] == int(np.prod(shape))
    # balanced training split (MNIST's fixture is not: subsampled to its smallest class)
    assert summary["n_classes"] == n_classes
    assert summary["train_class_counts"] == [per_class] * n_classes
    assert summary["measure_epochs"] == list(PAPER_003_EPOCHS)


def test_paper_presets_are_table_i_and_data_are_standardised(tmp_path):
    assert get_experiment("pfc-training-fc").config("paper") == TABLE_I["mnist"]
    conv = get_experiment("pfc-training-conv")
    assert conv.config("paper") == TABLE_I["fashion_mnist"]
    for row in ("cifar10", "stl10", "cifar100"):
        assert conv.config(f"paper-{row}") == TABLE_I[row]
    _write("cifar10", tmp_path)
    setup = build_network_setup(TABLE_I["cifar10"], data_dir=tmp_path)
    x = setup.data.train.x.double()
    # per-channel standardisation with the training statistics (ddof 0)
    mean = x.mean(dim=(0, 2, 3))
    std = x.permute(1, 0, 2, 3).reshape(3, -1).std(dim=1, unbiased=False)
    np.testing.assert_allclose(mean.numpy(), 0.0, atol=1e-6)
    np.testing.assert_allclose(std.numpy(), 1.0, atol=1e-5)
    assert measured_layers(setup.model) == EXPECTED["cifar10"][2]
    assert setup.train_config.schedule == "step" and setup.train_config.lr_at_epoch(117) == 0.01


def test_paper_dry_run_names_a_missing_file(tmp_path):
    with pytest.raises(DatasetFileError, match="train-images-idx3-ubyte"):
        dry_run(TABLE_I["mnist"], data_dir=tmp_path)
    with pytest.raises(ValueError, match="--data-dir"):
        dry_run(TABLE_I["cifar10"], data_dir=None)


def test_bad_training_configs_are_rejected():
    # a typed preset is checked when it is made: a bad one never reaches a run
    with pytest.raises(ValueError, match="milestones"):
        TABLE_I["mnist"].replace(milestones=None)
    with pytest.raises(ValueError, match=r"TrainingPreset\.model"):
        TABLE_I["mnist"].replace(model="vgg11")
    with pytest.raises(TypeError, match="TrainingPreset"):
        build_network_setup(["mnist"])
    quick = get_experiment("pfc-training-fc").config("tiny")
    with pytest.raises(ValueError, match="measure"):
        quick.replace(measure="sometimes")
    conv = quick.replace(model="conv_resnet", width=None, n_blocks=None, stages=())
    with pytest.raises(ValueError, match="image inputs"):
        build_network_setup(conv)


# ---------------------------------------------------------------------------------------
# the presets as docs/pfc.md states them

DIGITS = {"n_per_class": 174, "test_fraction": 0.25}
STANDARDISED = (StandardizeChannels(),)


def test_every_experiment_has_the_four_tiers_of_one_typed_preset():
    experiments = experiments_for_paper("001")
    assert len(experiments) == 6
    for experiment in experiments:
        assert set(TIERS) <= set(experiment.presets), experiment.id
        kinds = {type(preset) for preset in experiment.presets.values()}
        assert len(kinds) == 1 and issubclass(kinds.pop(), Preset), experiment.id
    conv = get_experiment("pfc-training-conv")
    assert {"paper-cifar10", "paper-stl10", "paper-cifar100"} <= set(conv.presets)
    # the simulations' standard tier is the paper's own instance (CPU minutes)
    for exp_id in ("pfc-toy", "pfc-mufm", "pfc-lambda-sweep", "pfc-theorems"):
        experiment = get_experiment(exp_id)
        assert experiment.config("standard") == experiment.config("paper")
        assert experiment.config("paper").data_specs() == []  # they generate their instances


def test_training_data_specs_are_those_of_the_docs():
    for exp_id, flatten, tiny_per_class in (
        ("pfc-training-fc", True, 12),
        ("pfc-training-conv", False, 8),
    ):
        experiment = get_experiment(exp_id)
        quick, standard, tiny = (experiment.config(t).data for t in ("quick", "standard", "tiny"))
        assert (quick.name, dict(quick.options), quick.steps) == (
            "fashion_mnist",
            {"n_train_per_class": 130, "n_test_per_class": 50},
            STANDARDISED,
        )
        assert standard == DataSpec(
            "fashion_mnist", {"n_train_per_class": 200, "n_test_per_class": 100}, STANDARDISED
        )
        options = {"n_per_class": tiny_per_class, "test_fraction": 0.25, "flatten": flatten}
        assert tiny == DataSpec("digits", options)
    # Table I: the whole dataset from local files, balanced to its smallest class, standardised
    for row, preset in TABLE_I.items():
        assert preset.data == DataSpec(row, steps=(Balance("smallest"), StandardizeChannels()))
        assert preset.data.reads_files and preset.bundled() is None
    assert get_experiment("pfc-training-fc").config("paper") is not TABLE_I["mnist"]


def test_quick_falls_back_to_the_bundled_digits():
    for exp_id, flatten in (("pfc-training-fc", True), ("pfc-training-conv", False)):
        experiment = get_experiment(exp_id)
        assert experiment.fallbacks == {"quick": "quick-bundled"}
        quick, bundled = experiment.config("quick"), experiment.config("quick-bundled")
        assert bundled.data == DataSpec("digits", {**DIGITS, "flatten": flatten})
        assert bundled.data == quick.data.fallback and not bundled.reads_files()
        # everything else is the quick preset's; the conv net's first stage at stride 1
        changes = {"data": bundled.data}
        if not flatten:
            assert quick.stages == ((16, 1, 2), (32, 4, 2))
            changes["stages"] = ((16, 1, 1), (32, 4, 2))
        assert bundled == quick.replace(**changes)


def test_a_network_takes_only_its_own_fields():
    fc = get_experiment("pfc-training-fc").config("tiny")
    with pytest.raises(PresetError, match="n_blocks"):
        fc.replace(n_blocks=None)
    with pytest.raises(PresetError, match="stages"):
        fc.replace(stages=((4, 1, 1),))
    with pytest.raises(PresetError, match="width"):
        TABLE_I["mnist"].replace(width=64)
    with pytest.raises(PresetError, match="epochs count from 1"):
        fc.replace(measure=(0, 3))
    assert fc.replace(measure=[2, 3]).measure == (2, 3)


def test_reproduce_dry_run_on_the_command_line(tmp_path):
    from typer.testing import CliRunner

    from collapselab.cli.main import app
    from tests._idx_files import write_idx_dataset

    runner = CliRunner()
    out = tmp_path / "runs"
    empty = tmp_path / "empty"
    empty.mkdir()
    # MNIST and Fashion-MNIST are missing: one line naming the places looked; nothing is written.
    result = runner.invoke(
        app, ["reproduce", "001", "--preset", "paper", "--dry-run", "--data-dir", str(empty)]
    )
    text = " ".join(result.output.split())
    assert result.exit_code == 1
    assert (
        f"pfc-training-fc (preset paper): mnist not found (looked in {empty} (--data-dir); "
        "$COLLAPSELAB_DATA_DIR (not set))"
    ) in text
    assert "pfc-training-conv (preset paper): fashion_mnist not found" in text
    assert "2 failed; nothing was trained" in text and "Traceback" not in result.output
    write_idx_dataset(tmp_path / "data" / "mnist", n_train=30, n_test=10)
    write_idx_dataset(tmp_path / "data" / "fashion_mnist", n_train=40, n_test=10)
    result = runner.invoke(
        app,
        ["reproduce", "001", "--preset", "paper", "--dry-run", "--data-dir", str(tmp_path / "data"),
         "--out", str(out)],
    )  # fmt: skip
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "model FCResNet" in text and "measured layers 11 of dimension 1000" in text
    assert "model ConvResNet" in text and "measured layers 5 of dimension 3136" in text
    assert "350 epochs, lr 0.01, milestones [117, 233], 50 measured epochs" in text
    assert "pfc-mufm (preset paper) data: no dataset" in text
    assert "dry run of 6 experiment(s): ok; nothing was trained" in text
    assert not out.exists()
