"""Paper 000's typed presets: the four tiers of every experiment, the data each reads (as
docs/diversity.md says), the derived bundled fallback, the preprocessing against an explicit
float64 reference, and what a preset checks when it is made."""

from __future__ import annotations

import json

import pytest
import torch

from collapselab.data import DataSpec, digits, gaussian_mixture, load_data, steps
from collapselab.experiments import TIERS, PresetError, experiments_for_paper, get_experiment
from collapselab.experiments.fd import presets
from collapselab.experiments.fd.presets import (
    Arms,
    Directions,
    Member,
    Model,
    Sweep,
    TwoPhase,
)
from collapselab.experiments.overrides import apply_overrides
from tests._idx_files import write_idx_dataset

PREPROCESSING = [
    steps.DropTest(),
    steps.Flatten(),
    steps.StandardizeScalar(),
    steps.Cast("float32"),
]

DATA = {
    "fd-two-phase": {
        "tiny": [presets.CLUSTERED_TINY],
        "quick": [presets.CLUSTERED, presets.FASHION_MNIST],
        "quick-bundled": [presets.CLUSTERED, presets.DIGITS],
        "standard": [presets.CLUSTERED_1000, presets.FASHION_MNIST_WHOLE],
        "paper": [presets.CIFAR10, presets.MNIST, presets.TINY_IMAGENET],
    },
    **{
        experiment: {
            "tiny": [presets.CLUSTERED_TINY],
            "quick": [presets.CLUSTERED],
            "standard": [presets.FASHION_MNIST_WHOLE],
            "paper": [presets.CIFAR10],
        }
        for experiment in ("fd-operations", "fd-robustness", "fd-directions")
    },
}
"""The datasets of every preset, in the order the preset reads them."""


def test_every_experiment_has_the_four_tiers_and_one_preset_class() -> None:
    experiments = {e.id: e for e in experiments_for_paper("000")}
    assert set(experiments) == set(DATA)
    kinds = {"fd-two-phase": TwoPhase, "fd-operations": Sweep, "fd-robustness": Sweep}
    for experiment_id, experiment in experiments.items():
        assert set(TIERS) <= set(experiment.presets)
        assert set(experiment.presets) == set(DATA[experiment_id])
        kind = kinds.get(experiment_id, Directions)
        assert all(type(p) is kind for p in experiment.presets.values())
        for preset in experiment.presets.values():
            json.dumps(preset.to_dict())  # what a run's manifest records
    assert experiments["fd-two-phase"].fallbacks == {"quick": "quick-bundled"}
    assert all(experiments[e].fallbacks == {} for e in DATA if e != "fd-two-phase")


def test_the_data_of_every_preset_is_the_documented_one() -> None:
    for experiment_id, tiers in DATA.items():
        experiment = get_experiment(experiment_id)
        for tier, specs in tiers.items():
            assert experiment.presets[tier].data_specs() == specs, (experiment_id, tier)
    clustered = presets.CLUSTERED.options
    assert presets.CLUSTERED.name == "gaussian_mixture" and dict(clustered) == {
        "n_classes": 10,
        "dim": 64,
        "n_train_per_class": 500,
        "clusters_per_class": 4,
        "mean_scale": 3.0,
    }
    assert presets.CLUSTERED_1000.options["n_train_per_class"] == 1000
    assert presets.CLUSTERED_TINY.options["dim"] == 32
    assert presets.CLUSTERED_TINY.options["n_train_per_class"] == 60
    assert presets.FASHION_MNIST.options["n_train_per_class"] == 500
    assert presets.FASHION_MNIST.fallback == presets.DIGITS
    for whole in (presets.FASHION_MNIST_WHOLE, presets.CIFAR10, presets.MNIST):
        assert whole.options["n_train_per_class"] is None and whole.fallback is None
    assert presets.DIGITS.options["n_per_class"] == 170
    every = [spec for tiers in DATA.values() for specs in tiers.values() for spec in specs]
    for spec in every:
        if spec is presets.TINY_IMAGENET:  # the paper's 50 classes, central 32 x 32 crops
            assert spec.options["class_names"] == list(presets.TINY_IMAGENET_CLASSES)
            assert list(spec.steps) == [PREPROCESSING[0], steps.CenterCrop(32), *PREPROCESSING[1:]]
        else:
            assert list(spec.steps) == PREPROCESSING, spec.describe()


def test_the_derived_fallback_is_the_bundled_digits_with_their_init_and_budget() -> None:
    quick = presets.TWO_PHASE["quick"]
    bundled = get_experiment("fd-two-phase").config("quick-bundled")
    assert bundled == quick.bundled() and not bundled.reads_files()
    assert list(bundled.arms) == ["digits", "clustered"]  # the image arm first, as at quick
    digits_arm = bundled.member("digits")
    assert digits_arm.data == quick.member("fashion_mnist").data.fallback == presets.DIGITS
    assert not presets.DIGITS.reads_files
    assert (digits_arm.model.gamma, digits_arm.training.iterations) == (0.5, 600)
    assert bundled.member("clustered") == quick.member("clustered")
    assert bundled.base == quick.base
    for experiment in ("fd-operations", "fd-robustness", "fd-directions"):
        assert get_experiment(experiment).presets["quick"].bundled() is None  # generated data


def _reference(x: torch.Tensor) -> torch.Tensor:
    """One scalar mean and standard deviation (ddof 1) of every entry, in float64."""
    flat = x.reshape(x.shape[0], -1).double()
    mean = flat.sum() / flat.numel()
    std = torch.sqrt(((flat - mean) ** 2).sum() / (flat.numel() - 1))
    return (flat - mean) / std


@pytest.mark.parametrize("seed", [0, 3])
def test_the_preprocessing_against_a_float64_reference(seed: int, tmp_path) -> None:
    """Generated, bundled and file data (MNIST's format, from fixture files): the training
    split only, flattened, standardised with one scalar mean and std (ddof 1), float32; the
    same tensors as the expression of the former fd loader."""
    write_idx_dataset(tmp_path, n_train=200, n_test=10)
    raw = {
        "clustered": gaussian_mixture(
            10, 32, 60, clusters_per_class=4, mean_scale=3.0, seed=seed
        ).train,
        "digits": digits(n_per_class=170, test_fraction=0.0, seed=seed, standardize=False).train,
        "mnist": load_data(DataSpec("mnist", {"n_test_per_class": 1}), tmp_path, seed).train,
    }
    specs = {"clustered": presets.CLUSTERED_TINY, "digits": presets.DIGITS, "mnist": presets.MNIST}
    for name, spec in specs.items():
        data = load_data(spec, tmp_path, seed)
        assert data.test is None and data.train.x.dtype == torch.float32
        assert torch.equal(data.train.y, raw[name].y)
        x = raw[name].x.reshape(len(raw[name]), -1).double()
        assert torch.equal(data.train.x, ((x - x.mean()) / x.std()).float()), name
        reference = _reference(raw[name].x)
        assert torch.allclose(data.train.x.double(), reference, rtol=0, atol=1e-6), name


def test_replace_reaches_the_base_and_arms_keep_their_own_values() -> None:
    quick = presets.TWO_PHASE["quick"]
    changed = quick.replace(lr=0.05, gamma=0.7)
    assert changed.base.training.lr == 0.05 and changed.base.model.gamma == 0.7
    assert changed.member("clustered").model.gamma == 0.7
    assert changed.member("fashion_mnist").model.gamma == 0.3  # the arm's own γ
    assert changed.member("fashion_mnist").training.lr == 0.05
    overridden = apply_overrides(quick, {"iterations": 100, "every": 5})  # sweep --set
    assert overridden.base.training.iterations == 100 and overridden.base.measurement.every == 5
    assert overridden.member("fashion_mnist").training.iterations == 900
    directions = presets.DIRECTIONS["quick"].replace(captures=7, depth=7)
    assert directions.captures == 7 and directions.base.model.depth == 7
    with pytest.raises(KeyError, match=r"TwoPhase has no config key 'nope'.*its base member's"):
        quick.replace(nope=1)
    with pytest.raises(PresetError, match=r"Training\.iterations takes int"):
        quick.replace(iterations=2.5)


def test_a_preset_checks_its_arms_groups_and_layers_when_made() -> None:
    base = presets.QUICK
    with pytest.raises(PresetError, match=r"Arms\.arms\['odd'\]: Member has no config key 'nope'"):
        Arms(base=base, arms={"odd": {"nope": 1}})
    with pytest.raises(PresetError, match=r"Arms\.arms\['odd'\]: Model\.depth takes int"):
        Arms(base=base, arms={"odd": {"depth": 2.5}})
    with pytest.raises(ValueError, match=r"group 'g' names arms the preset does not have"):
        Sweep(base=base, arms={"baseline": {}}, groups={"g": ((1, "missing"),)})
    with pytest.raises(ValueError, match=r"phase_layer must be a hidden linear layer in \[1, 8\]"):
        base.replace(phase_layer=9)
    with pytest.raises(ValueError, match=r"analysed layers must be in \[1, 8\], got 9"):
        Directions(base=base, table_layers=(2, 9))
    with pytest.raises(PresetError, match=r"Model\.norm must be one of"):
        Model(norm="layernorm")
    assert Member(data=presets.CLUSTERED) == base
