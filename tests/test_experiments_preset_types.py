"""Typed presets: checked fields, typed overrides, the four tiers and the derived fallback."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import pytest

from collapselab.data import DataSpec, steps
from collapselab.experiments import (
    Experiment,
    Preset,
    PresetError,
    get_experiment,
    plan_data,
    register,
    run_experiment,
    tiers,
    unregister,
)

FMNIST = DataSpec(
    "fashion_mnist",
    {"n_train_per_class": 5, "n_test_per_class": 2},
    steps=(steps.Flatten(),),
    fallback=DataSpec("digits", {"n_per_class": 5}),
)
BLOBS = DataSpec("gaussian_mixture", {"n_classes": 2, "dim": 3, "n_train_per_class": 4})


@dataclass(frozen=True, kw_only=True)
class Inner(Preset):
    width: int = 8
    act: Literal["relu", "tanh"] = "relu"


@dataclass(frozen=True, kw_only=True)
class Toy(Preset):
    data: DataSpec = BLOBS
    lr: float = 0.1
    steps: int = 3
    layers: tuple[int, ...] = (4, 4)
    net: Inner = Inner()
    arms: Mapping[str, DataSpec] = None  # type: ignore[assignment]
    note: str | None = None

    def __post_init__(self) -> None:
        if self.arms is None:
            object.__setattr__(self, "arms", {})
        super().__post_init__()


def test_fields_are_checked_and_converted_only_int_to_float_and_list_to_tuple() -> None:
    toy = Toy(lr=1, layers=[3, 2])
    assert toy.lr == 1.0 and isinstance(toy.lr, float) and toy.layers == (3, 2)
    with pytest.raises(PresetError, match=r"Toy\.steps takes int, got 2\.5"):
        Toy(steps=2.5)
    with pytest.raises(PresetError, match=r"Toy\.steps takes int, got True"):
        Toy(steps=True)
    with pytest.raises(PresetError, match=r"Toy\.layers\[1\] takes int, got 'x'"):
        Toy(layers=(1, "x"))
    with pytest.raises(PresetError, match=r"Inner\.act must be one of \['relu', 'tanh'\]"):
        Inner(act="gelu")
    with pytest.raises(PresetError, match=r"Toy\.net takes Inner"):
        Toy(net={"width": 3})
    with pytest.raises(PresetError, match=r"Toy\.arms\['a'\] takes DataSpec"):
        Toy(arms={"a": "digits"})
    assert Toy(note=None).note is None and Toy(note="x").note == "x"


def test_replace_is_checked_and_names_the_fields() -> None:
    toy = Toy()
    assert toy.replace(lr=2).lr == 2.0 and toy.lr == 0.1
    keys = "arms, data, layers, lr, net, note, steps"
    with pytest.raises(KeyError, match=f"Toy has no config key 'rate'; its keys: {keys}"):
        toy.replace(rate=0.3)
    with pytest.raises(PresetError, match=r"Toy\.lr takes float"):
        toy.replace(lr="fast")


def test_data_specs_bundled_and_the_plain_record() -> None:
    toy = Toy(data=FMNIST, arms={"blobs": BLOBS, "again": FMNIST})
    assert toy.data_specs() == [FMNIST, BLOBS] and toy.reads_files()
    bundled = toy.bundled()
    assert bundled.data == FMNIST.fallback and bundled.arms == {
        "blobs": BLOBS,
        "again": FMNIST.fallback,
    }
    assert not bundled.reads_files() and Toy().bundled() is None
    no_fallback = DataSpec("fashion_mnist", {"n_train_per_class": 5})
    assert Toy(data=no_fallback).bundled() is None
    record = json.loads(json.dumps(toy.to_dict()))
    assert record["net"] == {"width": 8, "act": "relu"} and record["layers"] == [4, 4]
    assert record["data"]["steps"] == [{"step": "flatten"}]


def _experiment(presets: dict, exp_id: str = "t-typed") -> Experiment:
    def run(run, context) -> None:
        run.log(0, "lr", context.config.lr)

    return Experiment(id=exp_id, paper="004", title="typed", presets=presets, run=run)


def test_tiers_are_one_class_and_a_papers_experiment_needs_all_four() -> None:
    with pytest.raises(PresetError, match="one Preset class"):
        tiers(tiny=Toy(), quick=Toy(), standard=Toy(), paper=Inner())
    with pytest.raises(ValueError, match=r"lacks the tier\(s\) \['standard', 'paper'\]"):
        register(_experiment({"tiny": Toy(), "quick": Toy()}))
    with pytest.raises(ValueError, match=r"lacks the tier\(s\) \['tiny'\]"):
        register(dataclasses.replace(_experiment({"quick": Toy()}), paper="not a paper"))
    register(dataclasses.replace(_experiment(tiers(tiny=Toy(), quick=Toy())), paper="mine"))
    unregister("t-typed")


def test_registration_derives_the_bundled_fallback_and_the_run_records_the_preset(
    tmp_path,
) -> None:
    # conftest hides the machine's datasets: Fashion-MNIST is missing here
    quick = Toy(data=FMNIST, lr=0.5)
    experiment = register(_experiment(tiers(tiny=Toy(), quick=quick, standard=quick, paper=quick)))
    try:
        assert experiment.fallbacks == {"quick": "quick-bundled"}
        assert experiment.config("quick-bundled") == quick.bundled()
        assert "tiny-bundled" not in experiment.presets  # tiny reads no files
        plan = plan_data(get_experiment("t-typed"), "quick")
        assert plan.preset == "quick-bundled" and "fashion_mnist" in plan.fallback_reason
        run = run_experiment("t-typed", "quick", root=tmp_path / "runs", plan=plan,
                             overrides={"lr": 2})  # fmt: skip
        assert run.preset == "quick-bundled" and run.manifest["config"]["lr"] == 2.0
        assert run.manifest["config"]["data"]["name"] == "digits"
        with pytest.raises(KeyError, match="has no config key 'rate'"):
            run_experiment("t-typed", "quick", root=tmp_path / "runs", overrides={"rate": 1})
    finally:
        unregister("t-typed")
