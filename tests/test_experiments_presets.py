"""The presets of papers 003 and 001: quick on Fashion-MNIST falling back to bundled data,
standard on Fashion-MNIST without a fallback (checked by a dry run on the real files, never
by training for an hour), every runtime stated."""

from __future__ import annotations

from pathlib import Path

import pytest

from collapselab.data import locations
from collapselab.experiments import (
    MissingDataError,
    dry_run_experiment,
    experiments_for_paper,
    get_experiment,
    plan_data,
)
from collapselab.experiments.data_plan import config_datasets
from collapselab.experiments.reproduce import runtime_seconds
from tests._idx_files import write_idx_dataset

PAPERS = ("003", "001")
TRAINING = ("mse-nc-collapse", "pfc-training-fc", "pfc-training-conv")


def _experiments():
    return [e for paper in PAPERS for e in experiments_for_paper(paper)]


@pytest.mark.parametrize("experiment", _experiments(), ids=lambda e: e.id)
def test_every_experiment_has_the_three_presets_and_a_measured_standard_runtime(experiment):
    assert {"quick", "standard", "paper"} <= set(experiment.presets)
    assert runtime_seconds(experiment.runtime("standard")) is not None
    if "quick-bundled" in experiment.presets:  # the former quick preset keeps its time
        assert runtime_seconds(experiment.runtime("quick-bundled")) is not None
    assert "standard" not in experiment.fallbacks  # standard needs the real images
    names = config_datasets(experiment.config("standard"))
    if experiment.id in TRAINING:
        assert names == ["fashion_mnist"]
        assert experiment.fallbacks == {"quick": "quick-bundled"}
        assert "fashion_mnist" in config_datasets(experiment.config("quick"))
        bundled = config_datasets(experiment.config("quick-bundled"))
        assert set(bundled) <= {"digits", "mnist1d"}
    else:  # simulations: the standard preset runs the paper's own instances
        assert names == [] and experiment.config("standard") == experiment.config("paper")


def test_without_fashion_mnist_quick_falls_back_and_standard_stops(tmp_path):
    for experiment_id in TRAINING:
        experiment = get_experiment(experiment_id)
        plan = plan_data(experiment, "quick")
        assert plan.preset == "quick-bundled" and plan.fell_back
        assert "apt-get install dataset-fashion-mnist" not in plan.fallback_reason  # no Debian
        with pytest.raises(MissingDataError, match="fashion_mnist"):
            plan_data(experiment, "standard")


def test_with_fashion_mnist_quick_uses_it(tmp_path, monkeypatch):
    folder = tmp_path / "fashion-mnist"
    write_idx_dataset(folder, n_train=20, n_test=10)
    monkeypatch.setattr(
        locations,
        "SYSTEM_DATASETS",
        {"fashion_mnist": locations.SystemDataset(folder, "dataset-fashion-mnist")},
    )
    for experiment_id in TRAINING:
        plan = plan_data(get_experiment(experiment_id), "quick")
        assert plan.preset == "quick" and not plan.fell_back
        assert plan.origins[0].found_via == "Debian package dataset-fashion-mnist"


def test_standard_dry_runs_from_the_debian_files(fashion_mnist_dir: Path):
    collapse = dry_run_experiment(get_experiment("mse-nc-collapse"), "standard")
    assert collapse.ok, collapse.error
    assert collapse.data.startswith(f"Fashion-MNIST, files in {fashion_mnist_dir}")
    assert collapse.built["datasets"]["fashion_mnist"] == {
        "n_train": 5000,
        "n_test": 3000,
        "input_shape": [1, 32, 32],
        "n_classes": 10,
    }
    for loss in ("mse", "ce"):
        arm = collapse.built["arms"][f"fashion_mnist-vgg11-{loss}"]
        assert arm["epochs"] == 300 and arm["milestones"] == [100, 200]
        assert arm["feature_dim"] == 128
    assert collapse.built["arms"]["fashion_mnist-vgg11-mse"]["lam"] == pytest.approx(2.5e-3)
    conv = dry_run_experiment(get_experiment("pfc-training-conv"), "standard").built
    assert conv["model"] == "ConvResNet" and conv["feature_dim"] == 64 * 7 * 7
    assert len(conv["layers"]) == 5 and conv["train_class_counts"] == [200] * 10
    fc = dry_run_experiment(get_experiment("pfc-training-fc"), "standard").built
    assert fc["model"] == "FCResNet" and fc["feature_dim"] == 512 and len(fc["layers"]) == 11
    assert fc["input_shape"] == [1, 28, 28] and fc["n_test"] == 1000


def test_a_changed_configuration_changes_no_preset_and_no_other_experiment():
    """``config`` returns a deep copy: the curvature networks and ``dlufm-mlp`` share one
    class list at ``standard``, and a caller's change to it reaches neither preset."""
    mlp = get_experiment("dlufm-mlp").config("standard").data.options
    conv = get_experiment("curvature-conv-ce").config("standard").data.options
    assert list(mlp["classes"]) == list(conv["classes"]) == [0, 1, 3]
    mlp["classes"] = (0, 1, 3, 9)
    conv["classes"] = (5, 1, 3)
    for experiment_id in ("dlufm-mlp", "curvature-conv-ce", "curvature-mlp-mse"):
        options = get_experiment(experiment_id).config("standard").data.options
        assert list(options["classes"]) == [0, 1, 3]
    quick = get_experiment("curvature-mlp-ce").config("quick").data.options
    quick["classes"] = ()
    options = get_experiment("curvature-mlp-ce").config("quick").data.options
    assert list(options["classes"]) == [0, 1, 3, 5, 8]
