"""Paper 003's typed presets: the four tiers, the data each reads (as docs/mse_nc.md says),
the derived bundled fallback, what a preset refuses, and the per-process data of the arms."""

from __future__ import annotations

import pytest
import torch

from collapselab.data import DataSpec, load_data
from collapselab.data.steps import Balance, Pad, StandardizeChannels
from collapselab.experiments import PresetError, experiments_for_paper, get_experiment
from collapselab.experiments.mse_nc import (
    COLLAPSE_PRESETS,
    PAPER_N_PER_CLASS,
    PAPER_TABLE,
    CollapsePreset,
    Combination,
    Net,
    TheoryPreset,
)
from collapselab.experiments.mse_nc.arms import arm_data, arms_of, forget_data
from collapselab.experiments.mse_nc.presets import COLLAPSE_QUICK, COLLAPSE_TINY, DIGITS
from collapselab.experiments.overrides import apply_overrides

PADDED_STANDARDISED = (Pad(32), StandardizeChannels())


def test_every_experiment_has_the_four_tiers_of_one_preset_class():
    experiments = {e.id: e for e in experiments_for_paper("003")}
    assert set(experiments) == {"mse-nc-collapse", "mse-nc-theory"}
    for experiment_id, kind in (("mse-nc-collapse", CollapsePreset),
                                ("mse-nc-theory", TheoryPreset)):  # fmt: skip
        presets = experiments[experiment_id].presets
        assert {"tiny", "quick", "standard", "paper"} <= set(presets)
        assert all(type(p) is kind for p in presets.values())
    theory = experiments["mse-nc-theory"].presets
    assert theory["standard"] is theory["paper"]  # the paper's instances fit 2 CPU cores
    assert "tiny-bundled" not in experiments["mse-nc-collapse"].presets  # generated data


def test_the_data_of_every_tier_is_what_the_docs_say():
    tiny = COLLAPSE_PRESETS["tiny"].datasets
    assert list(tiny) == ["blobs"] and tiny["blobs"].name == "gaussian_mixture"
    assert tiny["blobs"].options["n_train_per_class"] == 30 and not tiny["blobs"].reads_files
    quick = COLLAPSE_PRESETS["quick"].datasets
    assert quick["fashion_mnist"] == DataSpec(
        "fashion_mnist",
        {"n_train_per_class": 130, "n_test_per_class": 50},
        steps=PADDED_STANDARDISED,
        fallback=DataSpec("digits", {"n_per_class": 174, "test_fraction": 0.25, "flatten": False}),
    )
    assert quick["mnist1d"] == DataSpec(
        "mnist1d", {"n_train": 4000, "n_test": 1000}, steps=(Balance(250, 80),)
    )
    standard = COLLAPSE_PRESETS["standard"].datasets
    assert standard == {
        "fashion_mnist": DataSpec(
            "fashion_mnist",
            {"n_train_per_class": 500, "n_test_per_class": 300},
            steps=PADDED_STANDARDISED,
        )
    }
    paper = COLLAPSE_PRESETS["paper"].datasets
    assert list(paper) == list(PAPER_TABLE)
    for name, spec in paper.items():
        steps = (
            PADDED_STANDARDISED if name in ("mnist", "fashion_mnist") else PADDED_STANDARDISED[1:]
        )
        assert spec == DataSpec(name, {"n_train_per_class": PAPER_N_PER_CLASS[name]}, steps=steps)


def test_the_bundled_fallback_is_derived_from_the_quick_preset():
    experiment = get_experiment("mse-nc-collapse")
    assert experiment.fallbacks == {"quick": "quick-bundled"}
    bundled = experiment.presets["quick-bundled"]
    assert bundled == COLLAPSE_QUICK.bundled() and not bundled.reads_files()
    # the file dataset is replaced by its fallback, the bundled digits, and renamed after it
    assert bundled.datasets == {"digits": DIGITS, "mnist1d": COLLAPSE_QUICK.datasets["mnist1d"]}
    epochs = {arm.key: arm.epochs for arm in arms_of(bundled)}
    assert epochs == {
        "digits-mlp-mse": 300,
        "digits-mlp-ce": 300,
        "mnist1d-mlp-mse": 300,
        "mnist1d-mlp-ce": 300,
        "digits-resnet18-mse": 150,  # bundled_epochs: 100 on Fashion-MNIST
        "digits-resnet18-ce": 150,
    }
    assert [arm.epochs for arm in arms_of(COLLAPSE_QUICK)][-1] == 100
    # nothing else changes
    assert bundled.replace(datasets=COLLAPSE_QUICK.datasets, arms=COLLAPSE_QUICK.arms) == (
        COLLAPSE_QUICK
    )


def test_a_preset_refuses_what_cannot_run():
    base = {"datasets": {"d": DataSpec("digits")}, "nets": {"m": Net(name="mlp")}}
    with pytest.raises(PresetError, match="unknown dataset 'x'"):
        CollapsePreset(**base, arms=(Combination(dataset="x", net="m", lr=0.1),))
    with pytest.raises(PresetError, match="unknown net 'y'"):
        CollapsePreset(**base, arms=(Combination(dataset="d", net="y", lr=0.1),))
    with pytest.raises(PresetError, match="lr_sweep is None"):
        CollapsePreset(**base, arms=(Combination(dataset="d", net="m", lr="sweep"),))
    with pytest.raises(PresetError, match="no rate for loss 'ce'"):
        CollapsePreset(**base, arms=(Combination(dataset="d", net="m", lr={"mse": 0.1}),))
    with pytest.raises(PresetError, match="positive"):
        Combination(dataset="d", net="m", lr=-1.0)
    with pytest.raises(PresetError, match="losses"):
        CollapsePreset(**base, arms=(), losses=("mse", "mse"))
    with pytest.raises(PresetError):
        CollapsePreset(**base, arms=(), losses=("hinge",))


def test_a_field_changes_by_name_as_collapselab_sweep_set_does():
    changed = apply_overrides(COLLAPSE_QUICK, {"epochs": 200, "weight_decay": 1e-4})
    assert changed.epochs == 200 and changed.weight_decay == 1e-4
    assert [arm.epochs for arm in arms_of(changed)] == [200] * 4 + [100] * 2
    with pytest.raises(KeyError, match="no config key 'epoch'"):
        apply_overrides(COLLAPSE_QUICK, {"epoch": 200})
    with pytest.raises(ValueError, match="epochs"):
        apply_overrides(COLLAPSE_QUICK, {"epochs": "many"})


def test_arm_data_is_loaded_once_per_process_and_spec():
    forget_data()
    spec = COLLAPSE_TINY.datasets["blobs"]
    first = arm_data(spec, None, 0)
    assert arm_data(DataSpec(spec.name, dict(spec.options)), None, 0) is first  # equal spec
    fresh = load_data(spec, None, 0)
    for split in ("train", "test"):
        assert torch.equal(getattr(first, split).x, getattr(fresh, split).x)
        assert torch.equal(getattr(first, split).y, getattr(fresh, split).y)
    assert arm_data(spec, None, 1) is not first  # another seed
    other = DataSpec(spec.name, {**spec.options, "n_train_per_class": 5})
    assert len(arm_data(other, None, 0).train) == 4 * 5
    forget_data()
    assert arm_data(spec, None, 0) is not first
    forget_data()
