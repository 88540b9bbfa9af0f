"""The one zero-error-epoch function, on tables with known answers, and everyone who uses it."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from collapselab.data.dataset import DataSplits, LabeledData
from collapselab.experiments.claims import NotEvaluable, RunResults
from collapselab.experiments.dlufm.terminal import zero_error_from
from collapselab.experiments.mse_nc.results import StoredArms
from collapselab.metrics.nc import weighted_accuracy
from collapselab.models import MLP
from collapselab.stats import ConfusionCounts
from collapselab.store import (
    NO_EPOCH,
    Run,
    first_zero_error,
    reaches_zero_error,
    zero_error_epoch,
)
from collapselab.track import Monitor
from collapselab.train import Callback, TrainConfig, train

_COLUMNS = ["step", "epoch", "split", "layer", "metric", "value"]


def _table(accuracies, *, steps_per_epoch: int = 10, extra=()) -> pd.DataFrame:
    """Train accuracy rows at epochs 0, 1, ... (step = 10 * epoch), then ``extra`` rows."""
    rows = [
        (steps_per_epoch * e, e, "train", "", "accuracy", float(a))
        for e, a in enumerate(accuracies)
    ]
    return pd.DataFrame([*rows, *extra], columns=_COLUMNS)


@pytest.mark.parametrize(
    ("accuracies", "first", "sustained"),
    [
        ([0.1, 0.5, 1.0, 0.99, 1.0, 1.0], 2, 4),  # reached at 2, lost at 3, kept from 4
        ([0.1, 0.5, 0.9], None, None),  # never reached
        ([0.2, 1.0, 1.0, 0.95], 1, None),  # reached, but not at the end
        ([1.0, 1.0, 1.0], 0, 0),  # the initial model already separates the data
        ([0.3, 0.7, 1.0], 2, 2),  # reached at the last evaluation
        ([np.nextafter(1.0, 0.0), 1.0], 1, 1),  # exactly 1.0: the largest double below is not
        ([0.5, math.nan, 1.0], 2, 2),  # NaN is not zero error
        ([], None, None),
    ],
)
def test_known_answers(accuracies, first, sustained) -> None:
    table = _table(accuracies)
    assert zero_error_epoch(table) == first
    assert zero_error_epoch(table, sustained=True) == sustained


def test_other_rows_are_ignored() -> None:
    extra = [
        (5, 0, "test", "", "accuracy", 1.0),  # another split
        (5, 0, "train", "fc", "accuracy", 1.0),  # a layer's accuracy (argmax(Wh + b))
        (5, NO_EPOCH, "train", "", "accuracy", 1.0),  # not tied to an epoch
        (5, 0, "train", "", "running_accuracy", 1.0),  # the batches during the epoch
    ]
    table = _table([0.2, 0.6, 1.0], extra=extra)
    assert zero_error_epoch(table) == 2
    assert zero_error_epoch(table, sustained=True) == 2
    assert zero_error_epoch(table, "test") == 0


def test_ties_within_an_epoch_and_row_order() -> None:
    """Two rows of one epoch (one within it, one at its end) count as that epoch; the step
    orders them, whatever order they were logged in."""
    within = [(15, 2, "train", "", "accuracy", 1.0)]  # epoch 2 ends at step 20 with 0.9
    table = _table([0.2, 0.6, 0.9, 1.0], extra=within)
    assert zero_error_epoch(table) == 2
    assert zero_error_epoch(table, sustained=True) == 3  # step 20 (0.9) comes after step 15
    shuffled = table.sample(frac=1.0, random_state=0)
    assert zero_error_epoch(shuffled) == 2 and zero_error_epoch(shuffled, sustained=True) == 3
    ends_at_one = _table([0.2, 0.6, 1.0, 1.0], extra=[(15, 2, "train", "", "accuracy", 0.9)])
    assert zero_error_epoch(ends_at_one) == 2  # the end of epoch 2 (step 20) is at 1.0
    assert zero_error_epoch(ends_at_one, sustained=True) == 2  # from step 20 on, all 1.0


def test_streaming_rule_equals_the_table_rule() -> None:
    """``first_zero_error`` fed the evaluations in order = ``zero_error_epoch`` of their rows,
    for every sequence of three accuracies in {0.5, 1.0} at epochs 0, 3, 6 (and brute force)."""
    for values in itertools.product([0.5, 1.0], repeat=3):
        epochs = [0, 3, 6]
        known = None
        for epoch, value in zip(epochs, values, strict=True):
            known = first_zero_error(known, epoch, value)
        table = pd.DataFrame(
            [(e, e, "train", "", "accuracy", v) for e, v in zip(epochs, values, strict=True)],
            columns=_COLUMNS,
        )
        brute_first = next((e for e, v in zip(epochs, values, strict=True) if v == 1.0), None)
        brute_sustained = next(
            (e for i, e in enumerate(epochs) if all(v == 1.0 for v in values[i:])), None
        )
        assert known == zero_error_epoch(table) == brute_first
        assert zero_error_epoch(table, sustained=True) == brute_sustained
    assert first_zero_error(4, 7, 0.2) == 4 and first_zero_error(4, 7, 1.0) == 4


@pytest.mark.parametrize("weighting", ["sample", "balanced"])
def test_exactly_one_means_every_sample_correct(weighting) -> None:
    """The accuracy of a confusion matrix is exactly 1.0 if and only if every sample is
    correct, class-weighted or not, also with one error among many samples."""
    for counts in ([5, 5, 5], [1, 1000, 37], [10**6, 3, 10**7]):
        n = torch.tensor(counts, dtype=torch.float64)
        weights = torch.ones(3, dtype=torch.float64) if weighting == "balanced" else n
        for wrong_class in (None, 0, 1, 2):
            confusion = torch.diag(torch.tensor(counts, dtype=torch.int64))
            if wrong_class is not None:
                confusion[wrong_class, wrong_class] -= 1
                confusion[wrong_class, (wrong_class + 1) % 3] += 1
            acc = weighted_accuracy(confusion, weights)
            counted = ConfusionCounts(3)
            counted.counts.copy_(confusion)
            all_correct = counted.all_correct
            assert reaches_zero_error(acc) == all_correct == (wrong_class is None)


# ----------------------------------------------------------------- the readers agree
def test_claims_curvature_and_mse_nc_read_the_same_epochs() -> None:
    accuracies = [0.1, 1.0, 0.98, 1.0, 1.0]
    table = _table(accuracies, extra=[(50, 5, "test", "", "accuracy", 0.9)])
    assert RunResults(table).zero_error_epoch() == 1
    assert zero_error_from(table) == 3
    arm = _table(accuracies).assign(split="blobs-mlp-mse/train")
    stored = StoredArms(arm, {"config": {}})
    assert stored.zero_error_epoch("blobs-mlp-mse") == 1
    assert stored.zero_error_epoch("other-arm") is None
    with pytest.raises(NotEvaluable, match="metric='accuracy'"):
        RunResults(table[table.split == "test"]).zero_error_epoch()


# ----------------------------------------------------- training, a monitor, a resume
def _separable() -> DataSplits:
    g = torch.Generator().manual_seed(9)
    y = torch.arange(3).repeat_interleave(20)
    centres = torch.tensor([[4.0, 0.0], [-2.0, 3.5], [-2.0, -3.5]])
    x = centres[y] + 0.9 * torch.randn(60, 2, generator=g)
    return DataSplits(LabeledData(x, y, 3), LabeledData(x[:9], y[:9], 3))


class _Interrupt(Callback):
    def __init__(self, at: int) -> None:
        self.at = at

    def on_iteration_end(self, state) -> None:
        if state.iteration == self.at:
            raise KeyboardInterrupt


def _trained(run: Run, callbacks=()):
    torch.manual_seed(9)
    model = MLP(2, 3, width=16, depth=3, bias=True, gamma=0.05)
    monitor = Monitor(model, _separable().train, batch_size=64, schedule=[2, 4, 6, 8, 10, 12])
    config = TrainConfig(12, 0.02, batch_size=12, seed=1, checkpoint_every=3)
    result = train(model, _separable(), config, [monitor.callback(), *callbacks], run)
    return result, monitor


def test_one_epoch_for_loop_monitor_manifest_claims_and_a_resumed_run(tmp_path: Path) -> None:
    full = Run.create(tmp_path, "zero")
    result, monitor = _trained(full)
    rows = Run.open(full.path).metrics()
    first = zero_error_epoch(rows)
    history = [h["epoch"] for h in result.history if h["train_accuracy"] == 1.0]
    assert first == history[0] == 9  # the loop's rows, every epoch
    assert result.zero_error_epoch == first == Run.open(full.path).manifest["zero_error_epoch"]
    assert RunResults.from_run(Run.open(full.path)).zero_error_epoch() == first
    # The monitor applies the same rule at its measured (even) epochs only.
    assert monitor.zero_error_epoch == min(e for e in history if e % 2 == 0) == 10
    # Interrupted in epoch 8 (5 steps per epoch), before zero error, and resumed from the
    # checkpoint of epoch 6: the rows after it are dropped and recorded again.
    part = Run.create(tmp_path, "part")
    with pytest.raises(KeyboardInterrupt):
        _trained(part, [_Interrupt(38)])
    resumed, _ = _trained(Run.open(part.path), [_Interrupt(-1)])
    again = Run.open(part.path).metrics()
    assert zero_error_epoch(again) == first and resumed.zero_error_epoch == first
    assert zero_error_epoch(again, sustained=True) == zero_error_epoch(rows, sustained=True)
    assert Run.open(part.path).manifest["zero_error_epoch"] == first
