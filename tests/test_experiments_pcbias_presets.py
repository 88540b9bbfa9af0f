"""Paper 002's typed presets and data: the four tiers of every experiment, the data of every
preset as docs/pcbias.md lists it, the derived bundled fallback, the places of the data
manipulations in the pipeline, the cached reader against a float64 reference, and the typed
ensemble members as the sweep records them."""

from __future__ import annotations

import dataclasses
import json
import pickle

import numpy as np
import pytest

from collapselab.data import DataSpec, load_dataset
from collapselab.data.steps import (
    AmplifyPCs,
    Cast,
    Flatten,
    Pad,
    Pool,
    RelabelSeparable,
    ShuffleLabels,
    StandardizeChannels,
    WhitenZCA,
)
from collapselab.experiments import TIERS, Preset, experiments_for_paper, get_experiment
from collapselab.experiments.overrides import apply_overrides
from collapselab.experiments.pcbias._common import data_variant, pcb_data, read_inputs
from collapselab.experiments.sweeps.member import config_hash, config_json

IDS = sorted(e.id for e in experiments_for_paper("pcbias"))

STEPS = (Cast("float64"), StandardizeChannels(), Flatten())
"""The preprocessing of unpooled, unpadded data: float64, per-channel standardised, flat."""


def _steps(pool: int = 1, pad: int | None = None) -> tuple:
    padded = () if pad is None else (Pad(pad),)
    pooled = () if pool == 1 else (Pool(pool),)
    return (*padded, Cast("float64"), *pooled, StandardizeChannels(), Flatten())


def _digits(n: int) -> DataSpec:
    return DataSpec("digits", {"n_per_class": n, "test_fraction": 0.25}, STEPS)


def _fashion(n_train: int | None, n_test: int | None, pool: int, pair: bool = False,
             fallback: DataSpec | None = None) -> DataSpec:  # fmt: skip
    options: dict = {"classes": (2, 4)} if pair else {}
    if n_train is not None:
        options |= {"n_train_per_class": n_train, "n_test_per_class": n_test}
    return DataSpec("fashion_mnist", options, _steps(pool), fallback)


DIGITS = _digits(160)
PADDED = {n: DataSpec("digits", {"n_per_class": n, "test_fraction": 0.25, "flatten": False},
                      _steps(pad=16)) for n in (8, 120)}  # fmt: skip
MAMMALS = DataSpec("cifar100", {"superclass": "small_mammals"}, STEPS)
SPECTRUM = {"n_classes": 3, "dim": 20, "n_train_per_class": 500, "n_test_per_class": 100,
            "decay": 1.0}  # fmt: skip


def _relu(dim: int, n: int) -> DataSpec:
    return DataSpec("spectrum_gaussian", {"n_classes": 2, "dim": dim, "n_train_per_class": n,
                                          "decay": 1.0})  # fmt: skip


DATA = {
    "pcbias-convergence": {
        "tiny": DataSpec("spectrum_gaussian", {**SPECTRUM, "dim": 12, "n_train_per_class": 60,
                                               "n_test_per_class": 20}, STEPS),
        "quick": DataSpec("spectrum_gaussian", SPECTRUM, STEPS),
        "standard": _fashion(500, 100, pool=4),
        "paper": DataSpec("cifar10", {}, STEPS),
    },
    "pcbias-scales": {"tiny": _digits(30), "quick": _fashion(200, 100, 4, fallback=DIGITS),
                      "standard": _fashion(500, 200, 2), "paper": MAMMALS},
    "pcbias-init": {"tiny": _digits(30), "quick": _fashion(1000, 200, 4, True, DIGITS),
                    "standard": _fashion(None, None, 2, True),
                    "paper": DataSpec("cifar10", {"classes": (3, 5)}, STEPS)},
    "pcbias-relu": {"tiny": _relu(8, 40), "quick": _relu(20, 250), "standard": _relu(50, 1000),
                    "paper": _relu(100, 2500)},
    "pcbias-loc": {"tiny": _digits(30), "quick": _fashion(1000, 200, 2, True, DIGITS),
                   "standard": _fashion(None, None, 1, True),
                   "paper": DataSpec("cifar10", {"classes": (3, 5)}, STEPS)},
    **{
        exp_id: {"tiny": _digits(30), "quick": _fashion(200, 100, 2, fallback=DIGITS),
                 "standard": _fashion(500, 200, 1), "paper": MAMMALS}
        for exp_id in ("pcbias-projections", "pcbias-amplification", "pcbias-separable")
    },
    "pcbias-frequency": {
        tier: DataSpec("frequency", {"n_train": n, "n_test": m}, STEPS)
        for tier, (n, m) in {"tiny": (300, 100), "quick": (2000, 500),
                             "standard": (10000, 1000), "paper": (10000, 1000)}.items()
    },
    "pcbias-stvgg": {
        "tiny": PADDED[8],
        "quick": _fashion(500, 100, 1, True, PADDED[120]),
        "standard": _fashion(2500, 500, 1, True),
        "paper": _fashion(None, None, 1, True),
    },
}  # fmt: skip
"""docs/pcbias.md's table of the data of every tier, written out step by step."""

MORE_DATA = {("pcbias-loc", "paper"): [DataSpec("cifar10", {}, STEPS)]}
"""Datasets a tier reads besides its ``data`` (issue 35 item 5: Fig. 7b's VGG-19s train on
all of CIFAR-10, ``nonlinear_data``, where Fig. 7a's linear nets train on cats and dogs)."""

BUNDLED = {
    "pcbias-scales": {"lr": 0.1, "steps": 1000},
    "pcbias-projections": {"pcs": (1, 5, 20, 64)},
    "pcbias-separable": {"separable_pcs": (5, 15, 40)},
    "pcbias-stvgg": {"pcs": (1, 10, 100, 256)},
}
"""What the bundled fallback changes besides the data (each override says why)."""


def test_every_experiment_has_the_four_tiers_of_one_preset_class():
    assert IDS == sorted(DATA)
    for exp_id in IDS:
        presets = get_experiment(exp_id).presets
        assert set(TIERS) <= set(presets), exp_id
        kinds = {type(p) for p in presets.values()}
        assert len(kinds) == 1 and issubclass(kinds.pop(), Preset), exp_id


@pytest.mark.parametrize("exp_id", sorted(DATA))
def test_the_data_of_every_tier_is_what_the_docs_say(exp_id):
    presets = get_experiment(exp_id).presets
    for tier, spec in DATA[exp_id].items():
        assert presets[tier].data == spec, (exp_id, tier, presets[tier].data.describe())
        assert presets[tier].data_specs() == [spec, *MORE_DATA.get((exp_id, tier), [])]


def test_the_tiny_presets_read_no_dataset_files():
    """Issue 33: the suite runs without Debian's dataset-fashion-mnist."""
    for exp_id in IDS:
        tiny = get_experiment(exp_id).presets["tiny"]
        assert not tiny.reads_files(), exp_id
        assert "tiny-bundled" not in get_experiment(exp_id).presets


@pytest.mark.parametrize("exp_id", sorted(DATA))
def test_the_derived_fallback_is_the_bundled_digits(exp_id):
    """Every quick preset on Fashion-MNIST falls back to ``quick-bundled``: the same preset
    on the digits (the 16 x 16 padded digits for st-VGG), and only the fields
    :data:`BUNDLED` names otherwise changed; a quick preset on generated data has none."""
    experiment = get_experiment(exp_id)
    quick = experiment.presets["quick"]
    if not quick.reads_files():
        assert "quick-bundled" not in experiment.presets and not experiment.fallbacks
        return
    assert experiment.fallbacks == {"quick": "quick-bundled"}
    bundled = experiment.presets["quick-bundled"]
    assert bundled.data == quick.data.fallback
    assert bundled.data == (PADDED[120] if exp_id == "pcbias-stvgg" else DIGITS)
    assert not bundled.reads_files()
    names = [f.name for f in dataclasses.fields(bundled) if f.name != "data"]
    changed = {n: getattr(bundled, n) for n in names if getattr(bundled, n) != getattr(quick, n)}
    assert changed == BUNDLED.get(exp_id, {})


def test_data_variant_places_every_manipulation_where_the_paper_applies_it():
    """Shuffled labels first; PC amplification on the standardised images, before
    flattening; ZCA whitening of the flat inputs; the P-separable relabelling last. The
    fallback gets the same manipulations."""
    spec = pcb_data("fashion_mnist", {"n_train_per_class": 5}, pad=32, pool=2, fallback=DIGITS)
    amplify = {"fraction": 0.1, "factor": 10.0, "which": "top"}
    got = data_variant(spec, shuffle=1.0, amplify=amplify, whiten=1e-3, separable=5)
    assert got.steps == (ShuffleLabels(1.0), Pad(32), Cast("float64"), Pool(2),
                         StandardizeChannels(), AmplifyPCs(amplify), Flatten(), WhitenZCA(1e-3),
                         RelabelSeparable(5))  # fmt: skip
    assert got.fallback.steps == (ShuffleLabels(1.0), *STEPS[:2], AmplifyPCs(amplify),
                                  Flatten(), WhitenZCA(1e-3), RelabelSeparable(5))  # fmt: skip
    assert data_variant(spec) == spec
    with pytest.raises(ValueError, match="needs a spec with a Flatten step"):
        data_variant(DataSpec("digits"), whiten=1e-3)


def test_read_inputs_is_the_float64_reference_pipeline_and_is_cached():
    """Digits as 8 x 8 images padded to 10 x 10, average-pooled by 2, standardised with one
    mean and standard deviation (ddof 0) of the whole training channel, flattened: against
    numpy in float64 from the loader's raw images; a second read returns the cached arrays."""
    options = {"n_per_class": 20, "test_fraction": 0.25, "flatten": False}
    spec = pcb_data("digits", options, pad=10, pool=2)
    got = read_inputs(spec, None, 3)
    raw = load_dataset("digits", seed=3, **options)

    def pooled(x: np.ndarray) -> np.ndarray:
        padded = np.pad(x.astype(np.float64)[:, 0], ((0, 0), (1, 1), (1, 1)))
        blocks = padded.reshape(len(x), 5, 2, 5, 2)
        return blocks.mean(axis=(2, 4)).reshape(len(x), 25)

    train, test = pooled(raw.train.x.numpy()), pooled(raw.test.x.numpy())
    mean, std = train.mean(), train.std()
    assert got.x.dtype == np.float64 and got.x.shape == (150, 25)
    np.testing.assert_allclose(got.x, (train - mean) / std, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.x_test, (test - mean) / std, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got.y, raw.train.y.numpy())
    np.testing.assert_array_equal(got.y_test, raw.test.y.numpy())
    assert read_inputs(spec, None, 3) is got
    assert read_inputs(dataclasses.replace(spec, options=dict(options)), None, 3) is got
    assert read_inputs(spec, None, 4) is not got


def test_members_are_picklable_and_recorded_with_their_data():
    """A member crosses to a worker process by pickle and is recorded (and hashed) by the
    member store with its fields and its data spec; another seed or other data is another
    member."""
    from collapselab.experiments.pcbias.training import GDMember

    member = GDMember.of(get_experiment("pcbias-init").presets["tiny"], init="def3", member=1)
    assert pickle.loads(pickle.dumps(member)) == member
    recorded = json.loads(config_json({"network": member}))["network"]
    assert recorded["init"] == "def3" and recorded["member"] == 1
    assert recorded["data"]["name"] == "digits" and len(recorded["data"]["steps"]) == 3
    others = [
        dataclasses.replace(member, seed=1),
        dataclasses.replace(member, data=data_variant(member.data, whiten=1e-3)),
    ]
    hashes = {config_hash({"network": m}) for m in (member, *others)}
    assert len(hashes) == 3


def test_a_preset_field_is_changed_for_one_run_by_its_name():
    """``collapselab sweep pcbias-loc --set members=4 --set rates=[0.01,0.1]``."""
    quick = get_experiment("pcbias-loc").config("quick")
    changed = apply_overrides(quick, {"members": 4, "rates": [0.01, 0.1]})
    assert (changed.members, changed.rates) == (4, (0.01, 0.1))
    assert changed.data == quick.data and quick.members == 10
    with pytest.raises(KeyError, match="has no config key 'datasets'"):
        apply_overrides(quick, {"datasets": {}})
