"""Paper 004's presets as docs/dlufm.md and docs/curvature.md state them: four tiers of one
typed preset per experiment, the data of every preset (dataset, loader options, steps,
fallback), the derived quick-bundled of the curvature networks, the preprocessing against
the former loaders' expressions (bit for bit) and a float64 reference, what a preset checks
when it is made, and titles and captions that name no dataset."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.data import DataSpec, load_data, load_dataset
from collapselab.data.steps import (
    Cast,
    Flatten,
    KeepClasses,
    Pad,
    SortByClass,
    StandardizeChannels,
    StandardizeScalar,
)
from collapselab.experiments import TIERS, Preset, PresetError, experiments_for_paper
from collapselab.experiments import get_experiment as experiment
from collapselab.experiments.dlufm import presets
from collapselab.experiments.overrides import apply_overrides
from tests._idx_files import write_idx_dataset

UFM_IDS = ("dlufm-layers", "dlufm-linear", "dlufm-regularisation", "dlufm-relu")
NETWORK_IDS = tuple(f"curvature-{net}-{loss}" for net in ("mlp", "conv") for loss in ("ce", "mse"))
MLP_STEPS = (Flatten(), StandardizeScalar(), SortByClass(), Cast("float32"))


def test_every_experiment_has_the_four_tiers_of_one_typed_preset():
    found = {e.id: e for e in experiments_for_paper("004")}
    assert sorted(found) == sorted((*UFM_IDS, "dlufm-mlp", *NETWORK_IDS))
    for experiment_id, exp in found.items():
        assert set(TIERS) <= set(exp.presets), experiment_id
        kinds = {type(preset) for preset in exp.presets.values()}
        assert len(kinds) == 1 and issubclass(kinds.pop(), Preset), experiment_id
    # the deep UFM's features are free: no dataset at any tier
    for experiment_id in UFM_IDS:
        assert all(p.data_specs() == [] for p in found[experiment_id].presets.values())
        assert found[experiment_id].fallbacks == {}


def test_the_mlp_data_specs_are_those_of_the_docs():
    """dlufm-mlp: digits at tiny and quick (n training and max(n // 4, 1) test images per
    class), Fashion-MNIST from files at standard (paper 004's three classes) and paper."""
    tiers = {tier: experiment("dlufm-mlp").config(tier).data for tier in TIERS}
    assert tiers["tiny"] == DataSpec("digits", {"n_per_class": 12, "test_fraction": 0.2},
                                     steps=MLP_STEPS)  # fmt: skip
    assert tiers["quick"] == DataSpec("digits", {"n_per_class": 62, "test_fraction": 0.2},
                                      steps=MLP_STEPS)  # fmt: skip
    assert tiers["standard"] == DataSpec(
        "fashion_mnist",
        {"classes": (0, 1, 3), "n_train_per_class": 100, "n_test_per_class": 25},
        steps=MLP_STEPS,
    )
    assert tiers["paper"] == DataSpec(
        "fashion_mnist", {"n_train_per_class": 200, "n_test_per_class": 50}, steps=MLP_STEPS
    )
    assert experiment("dlufm-mlp").fallbacks == {}  # quick reads bundled data already


def test_the_network_data_specs_are_those_of_the_docs():
    for experiment_id in NETWORK_IDS:
        flat = "-mlp-" in experiment_id
        exp = experiment(experiment_id)
        quick, standard, paper, tiny = (exp.config(t).data for t in TIERS[1:] + TIERS[:1])
        digits = DataSpec("digits", {"n_per_class": 170, "flatten": flat},
                          steps=(KeepClasses((0, 1, 3, 5, 8)),))  # fmt: skip
        assert quick == DataSpec(
            "fashion_mnist",
            {"classes": (0, 1, 3, 5, 8), "n_train_per_class": 300, "n_test_per_class": 60},
            fallback=digits,
        )
        assert standard == DataSpec(
            "fashion_mnist",
            {"classes": (0, 1, 3), "n_train_per_class": 100, "n_test_per_class": 100},
        )
        # every training and test image; the conv networks' paper preset is Papyan's VGG-11
        # on the images padded to 32 x 32 and standardised per channel (issue 35 item 5)
        papyan = DataSpec("fashion_mnist", steps=(Pad(32), StandardizeChannels()))
        assert paper == (DataSpec("fashion_mnist") if flat else papyan)
        assert tiny == DataSpec("digits", {"n_per_class": 12, "flatten": flat},
                                steps=(KeepClasses((0, 1, 2)),))  # fmt: skip
    # one class list for the networks' and dlufm-mlp's standard presets
    assert presets.STANDARD_CLASSES == presets.QUICK_CLASSES[:3] == (0, 1, 3)
    for table in (presets.MLP, *presets.NETWORKS.values()):
        assert table["standard"].data.options["classes"] is presets.STANDARD_CLASSES


def test_the_networks_quick_falls_back_to_the_same_classes_of_the_bundled_digits():
    """``quick-bundled`` is derived: the quick preset with its data's fallback, nothing else
    changed; standard and paper have no fallback (they need the files)."""
    for experiment_id in NETWORK_IDS:
        exp = experiment(experiment_id)
        assert exp.fallbacks == {"quick": "quick-bundled"}
        quick, bundled = exp.config("quick"), exp.config("quick-bundled")
        assert bundled == quick.replace(data=quick.data.fallback)
        assert not bundled.reads_files() and bundled.data.name == "digits"
        for tier in ("standard", "paper"):
            assert exp.config(tier).reads_files() and exp.config(tier).bundled() is None


def _old_mlp_images(data, to_float32=True):
    """The former ``dlufm.mlp.load_images`` after its loader call, as it was written:
    flattened, (x - mean) / std with one float64 scalar each (torch's ddof 1), class-major."""
    x = data.train.x.reshape(data.train.x.shape[0], -1).double()
    mean, std = float(x.mean()), float(x.std())
    out = []
    for split in (data.train, data.test):
        flat = (split.x.reshape(split.x.shape[0], -1).double() - mean) / std
        order = torch.argsort(split.y, stable=True)
        out.append((flat[order].float() if to_float32 else flat[order], split.y[order]))
    return out


def _float64_reference(data):
    """The same standardisation written out in numpy float64: m = Σx/(ND),
    s² = Σ(x − m)²/(ND − 1), samples in class-major order (a stable sort)."""
    train = data.train.x.reshape(data.train.x.shape[0], -1).double().numpy()
    m = train.sum() / train.size
    s = np.sqrt(((train - m) ** 2).sum() / (train.size - 1))
    out = []
    for split in (data.train, data.test):
        flat = split.x.reshape(split.x.shape[0], -1).double().numpy()
        order = np.argsort(split.y.numpy(), kind="stable")
        out.append(((flat[order] - m) / s, split.y.numpy()[order]))
    return out


def _check_mlp_pipeline(spec: DataSpec, raw, data_dir=None):
    data = load_data(spec, data_dir, seed=0)
    got = [(data.train.x, data.train.y), (data.test.x, data.test.y)]
    for (x, y), (x_old, y_old) in zip(got, _old_mlp_images(raw), strict=True):
        assert x.dtype == x_old.dtype == torch.float32
        assert torch.equal(x, x_old) and torch.equal(y, y_old)
    # the float64 values before the cast, against numpy's
    wide = load_data(DataSpec(spec.name, spec.options, steps=spec.steps[:-1]), data_dir, seed=0)
    for split, (x_ref, y_ref) in zip((wide.train, wide.test), _float64_reference(raw),
                                     strict=True):  # fmt: skip
        assert split.x.dtype == torch.float64
        assert np.allclose(split.x.numpy(), x_ref, rtol=0, atol=1e-12)
        assert np.array_equal(split.y.numpy(), y_ref)


def test_the_mlp_preprocessing_is_the_former_loaders_on_digits():
    for tier in ("tiny", "quick"):
        spec = experiment("dlufm-mlp").config(tier).data
        _check_mlp_pipeline(spec, load_dataset("digits", seed=0, **spec.options))


def test_the_mlp_preprocessing_is_the_former_loaders_on_fashion_mnist_files(tmp_path):
    write_idx_dataset(tmp_path / "fashion-mnist", n_train=1000, n_test=250)
    spec = experiment("dlufm-mlp").config("standard").data
    raw = load_dataset("fashion_mnist", data_dir=tmp_path, seed=0, **spec.options)
    assert raw.n_classes == 3
    _check_mlp_pipeline(spec, raw, data_dir=tmp_path)


def test_the_networks_digits_are_the_former_loaders(tmp_path):
    """The former ``curvature.networks`` digits: ``min(n, 170)`` images per class, flat for
    the MLP, then the listed classes kept in both splits, relabelled 0..K-1 in their order."""
    for experiment_id, tier in (("curvature-mlp-ce", "tiny"), ("curvature-conv-mse", "tiny"),
                                ("curvature-mlp-mse", "quick-bundled"),
                                ("curvature-conv-ce", "quick-bundled")):  # fmt: skip
        spec = experiment(experiment_id).config(tier).data
        classes = spec.steps[0].classes
        raw = load_dataset("digits", seed=0, n_per_class=spec.options["n_per_class"],
                           flatten="-mlp-" in experiment_id)  # fmt: skip
        data = load_data(spec, None, seed=0)
        assert data.n_classes == len(classes)
        for split, old in ((data.train, raw.train), (data.test, raw.test)):
            keep = [i for i, label in enumerate(old.y.tolist()) if label in classes]
            relabel = torch.tensor([classes.index(old.y[i].item()) for i in keep])
            assert split.x.dtype == old.x.dtype
            assert torch.equal(split.x, old.x[keep]) and torch.equal(split.y, relabel)


def test_a_preset_is_checked_when_made_and_replace_reaches_every_field():
    quick = experiment("dlufm-linear").config("quick")
    assert apply_overrides(quick, {"steps": 200, "lr": 1}).lr == 1.0  # an int widens
    with pytest.raises(PresetError, match="one width needs n_layers"):
        presets.CONFIG_A.replace(n_layers=None)
    with pytest.raises(PresetError, match="n_layers must be None"):
        presets.CONFIG_A.replace(width=(10, 10, 10, 10))
    with pytest.raises(KeyError, match="widths"):  # the ReLU sweep's field, not the linear's
        quick.replace(widths=(4,))
    relu = experiment("dlufm-relu").config("tiny")
    model = relu.at_width(6)
    assert (model.width, model.n_layers, model.lr) == (6, relu.n_layers, relu.lr)
    mlp = experiment("dlufm-mlp").config("tiny")
    with pytest.raises(PresetError, match=r"layers entries must be in \[1, depth=3\]"):
        mlp.replace(layers=(3, 4))
    with pytest.raises(PresetError, match="schedule"):
        mlp.replace(schedule="cosine")
    network = experiment("curvature-mlp-ce").config("quick")
    with pytest.raises(PresetError, match="loss"):
        network.replace(loss="hinge")
    mse = network.with_loss("mse", lr=0.1)
    assert (mse.loss, mse.centring, mse.fraction_k, mse.lr) == ("mse", "logit", "K^2", 0.1)
    assert mse == experiment("curvature-mlp-mse").config("quick")


def test_no_title_or_caption_names_a_dataset_a_run_may_not_have_read():
    """Issue 33: a quick run of a network may read the bundled digits instead of
    Fashion-MNIST, and the report shows the data it read on its own line."""
    for exp in experiments_for_paper("004"):
        for text in (exp.title, *exp.captions.values()):
            lowered = text.lower()
            assert "fashion" not in lowered and "digits" not in lowered, (exp.id, text)
