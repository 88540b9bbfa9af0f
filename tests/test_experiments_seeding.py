"""``--seed S`` moves every seed of a preset into S's block (issue 35 item 7)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from collapselab.experiments import all_experiments, run_experiment
from collapselab.experiments.fd.presets import Repeat
from collapselab.experiments.seeding import SEED_BLOCK, base, move_seeds, seed_fields


def _without(preset, paths) -> dict:
    """The preset as plain data without the fields at the dotted ``paths``."""
    plain = preset.to_dict()
    for path in paths:
        *parents, leaf = path.split(".")
        node = plain
        for part in parents:
            node = node[part]
        del node[leaf]
    return plain


def _presets():
    for experiment in all_experiments():
        for name, preset in experiment.presets.items():
            yield f"{experiment.id}/{name}", preset


def test_the_presets_name_these_seed_fields() -> None:
    named = {
        (key.split("/")[0], path) for key, preset in _presets() for path, _ in seed_fields(preset)
    }
    assert named == {
        ("dlufm-relu", "seeds"),
        ("mse-nc-theory", "snr.seed"),
        ("mse-nc-theory", "ufm.seed"),
    }


@pytest.mark.parametrize("run_seed", [1, 2, 7])
def test_every_seed_field_of_every_preset_moves_into_its_block(run_seed: int) -> None:
    moved_any = 0
    for key, preset in _presets():
        before = dict(seed_fields(preset))
        after = dict(seed_fields(move_seeds(preset, run_seed)))
        assert set(after) == set(before), key
        for path, value in before.items():
            new = after[path]
            olds = value if isinstance(value, tuple) else (value,)
            news = new if isinstance(new, tuple) else (new,)
            assert news == tuple(SEED_BLOCK * run_seed + s for s in olds), (key, path)
            assert all(SEED_BLOCK * run_seed <= s < SEED_BLOCK * (run_seed + 1) for s in news)
            moved_any += 1
        # nothing but the seed fields changes
        assert _without(move_seeds(preset, run_seed), before) == _without(preset, before), key
    assert moved_any > 0


def test_seed_zero_moves_nothing_and_counts_are_not_seeds() -> None:
    for _, preset in _presets():
        assert move_seeds(preset, 0) is preset
    repeat = Repeat(groups=("l2",), seeds=3)
    assert seed_fields(repeat) == []  # a count of seeds: offsets from the base, moved with it
    assert move_seeds(repeat, 4) == repeat
    assert [base(s) for s in (0, 1, 3)] == [0, 1000, 3000]
    with pytest.raises(ValueError):
        base(-1)


def test_moved_preset_is_the_same_class_with_other_fields_kept() -> None:
    experiment = next(e for e in all_experiments() if e.id == "dlufm-relu")
    preset = experiment.presets["quick"]
    moved = move_seeds(preset, 1)
    assert type(moved) is type(preset)
    assert moved.seeds == tuple(1000 + s for s in preset.seeds)
    assert dataclasses.replace(moved, seeds=preset.seeds) == preset


def _metrics(run) -> pd.DataFrame:
    return pd.read_parquet(run.path / "metrics.parquet")


def test_same_seed_identical_other_seed_different(tmp_path) -> None:
    # mse-nc-theory's tiny preset: both of its seed fields (snr.seed, ufm.seed) and the
    # context seed; a few seconds per run.
    first = run_experiment("mse-nc-theory", "tiny", root=tmp_path / "a", seed=1)
    again = run_experiment("mse-nc-theory", "tiny", root=tmp_path / "b", seed=1)
    other = run_experiment("mse-nc-theory", "tiny", root=tmp_path / "c", seed=2)
    zero = run_experiment("mse-nc-theory", "tiny", root=tmp_path / "d", seed=0)
    assert first.id == "mse-nc-theory-tiny-seed1" and other.id == "mse-nc-theory-tiny-seed2"
    pd.testing.assert_frame_equal(_metrics(first), _metrics(again))
    values = [_metrics(r)["value"].to_numpy() for r in (first, other, zero)]
    assert all(len(v) == len(values[0]) for v in values)
    assert (values[0] != values[1]).any() and (values[0] != values[2]).any()
    assert first.manifest["config"]["snr"]["seed"] == 1000
    assert zero.manifest["config"]["snr"]["seed"] == 0
