"""The terminal-phase criterion of the curvature experiments (collapselab.experiments.dlufm),
on exact metric tables."""

from __future__ import annotations

import pandas as pd
import pytest

from collapselab.experiments import get_experiment
from collapselab.experiments.dlufm.networks import measurement_epochs
from collapselab.experiments.dlufm.terminal import (
    NC1_FRACTION,
    terminal_phase,
    zero_error_from,
)


def _table(accuracy: dict[int, float], nc1: dict[int, float], layer: str = "act3") -> pd.DataFrame:
    rows = [
        {
            "step": 10 * e,
            "epoch": e,
            "split": "train",
            "layer": "",
            "metric": "accuracy",
            "value": v,
        }
        for e, v in accuracy.items()
    ]
    rows += [
        {"step": 10 * e, "epoch": e, "split": "train", "layer": layer, "metric": "nc1", "value": v}
        for e, v in nc1.items()
    ]
    rows.append(  # another layer's NC1 must not be read
        {"step": 0, "epoch": 8, "split": "train", "layer": "pool2", "metric": "nc1", "value": 1e-9}
    )
    return pd.DataFrame(rows)


def test_zero_error_from_is_the_start_of_the_last_unbroken_run_of_accuracy_one():
    acc = {0: 0.1, 1: 0.9, 2: 1.0, 3: 0.999, 4: 1.0, 5: 1.0, 6: 1.0}
    assert zero_error_from(_table(acc, {})) == 4  # epoch 2's 1.0 is broken at epoch 3
    assert zero_error_from(_table({0: 1.0, 1: 1.0}, {})) == 0
    assert zero_error_from(_table({0: 0.5, 1: 1.0, 2: 0.99}, {})) is None
    assert zero_error_from(_table({}, {})) is None


def test_reached_when_nc1_falls_to_the_fraction_of_its_value_at_entry():
    acc = {e: (1.0 if e >= 4 else 0.9) for e in range(11)}
    nc1 = {0: 5.0, 3: 2.0, 5: 0.8, 10: 0.8 * NC1_FRACTION}  # entry: epoch 5, the first >= 4
    record = terminal_phase(_table(acc, nc1), "act3", 10)
    assert record["zero_error_from"] == 4 and record["entry_epoch"] == 5
    assert record["nc1_at_entry"] == 0.8 and record["nc1_final"] == pytest.approx(0.4)
    assert record["nc1_ratio"] == pytest.approx(NC1_FRACTION) and record["reached"]
    assert record["final_train_accuracy"] == 1.0
    assert record["summary"].startswith("reached: training accuracy 1 from epoch 4")


def test_not_reached_when_nc1_does_not_fall_enough_or_accuracy_is_not_one():
    acc = {e: (1.0 if e >= 4 else 0.9) for e in range(11)}
    slow = terminal_phase(_table(acc, {5: 0.8, 10: 0.41}), "act3", 10)
    assert not slow["reached"] and slow["nc1_ratio"] == pytest.approx(0.41 / 0.8)
    never = terminal_phase(_table({**acc, 10: 0.98}, {5: 0.8, 10: 0.1}), "act3", 10)
    assert never["zero_error_from"] is None and not never["reached"]
    assert never["nc1_ratio"] is None and "0.9800 at the end" in never["summary"]
    # zero error only at the last curvature epoch: no terminal phase to collapse in
    late = terminal_phase(_table({**acc, 4: 0.9, 9: 0.9}, {5: 0.8, 10: 0.1}), "act3", 10)
    assert late["zero_error_from"] == 10 and not late["reached"]
    # a run stopped before its last curvature epoch has no final NC1
    stopped = terminal_phase(_table(acc, {5: 0.8}), "act3", 10)
    assert stopped["nc1_final"] is None and not stopped["reached"]


def test_nc_every_adds_epochs_to_the_curvature_ones():
    tiny = get_experiment("curvature-mlp-ce").config("tiny")
    config = tiny.replace(curvature_epochs=[0, 3, 10], epochs=10)
    assert measurement_epochs(config) == [3, 10]
    assert measurement_epochs(config.replace(nc_every=4)) == [3, 4, 8, 10]
