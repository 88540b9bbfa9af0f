"""The Monitor inside collapselab.train.train: rows in the run, schedule, resume."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from collapselab.data.dataset import DataSplits, LabeledData
from collapselab.families import measure
from collapselab.models import MLP
from collapselab.probe import FeatureCapture, eval_mode
from collapselab.store import Run
from collapselab.track import Monitor
from collapselab.train import Callback, TrainConfig, train


def _data() -> DataSplits:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(60) % 3
    x = 2.0 * torch.randn(3, 5, generator=g)[y] + torch.randn(60, 5, generator=g)
    return DataSplits(LabeledData(x, y, 3), LabeledData(x[:15], y[:15], 3))


def _model() -> MLP:
    torch.manual_seed(0)
    return MLP(5, 3, width=8, depth=3, bias=True).double()


_CFG = TrainConfig(epochs=6, lr=0.05, batch_size=16, momentum=0.9, seed=3, checkpoint_every=2)


def _monitor(model: MLP, data: DataSplits, **kwargs) -> Monitor:
    return Monitor(model, data.train, data.test, batch_size=32, **kwargs)


def test_train_writes_monitor_rows_on_the_log_schedule(tmp_path):
    data, model = _data(), _model()
    run = Run.create(tmp_path, "train-monitor")
    monitor = _monitor(model, data, schedule="log", every_iterations=5)  # budget from config
    result = train(model, data, _CFG, [monitor.callback()], run)
    assert monitor.run is run  # adopted the training run
    rows = run.metrics()
    mine = rows[rows.metric == "nc1"]
    ipe = 4  # 60 samples / batch 16
    epoch_rows = mine[(mine.split == "train") & (mine.layer == "layers.1.act")]
    # Epoch 0 (step 0), every epoch 1..6 (log_spaced_epochs(6)), and every 5 steps.
    expected_steps = sorted([0, *(ipe * e for e in range(1, 7)), *range(5, 25, 5)])
    assert sorted(epoch_rows.step) == expected_steps
    at_20 = epoch_rows[epoch_rows.step == 20]
    assert sorted(at_20.epoch) == [5, 5]  # step 20 ends epoch 5: iteration and epoch rows
    # The last epoch's values equal measure() on the final model's features.
    last = rows[rows.epoch == 6]
    layer = model.penultimate
    with eval_mode(model), FeatureCapture(model, layer) as cap, torch.no_grad():
        model(data.train.x.double())
        H = cap.features[layer].clone()
    W, b = model.classifier.weight.detach(), model.classifier.bias.detach()
    ref = measure(H, data.train.y, W, b)
    for key, value in ref.items():
        got = last[(last.split == "train") & (last.layer == layer) & (last.metric == key)]
        assert len(got) == 1 and math.isclose(got.value.item(), value, rel_tol=1e-10, abs_tol=1e-12)
    assert result.zero_error_epoch == run.manifest["zero_error_epoch"]


class _Interrupt(Callback):
    def __init__(self, at: int) -> None:
        self.at = at

    def on_iteration_end(self, state):
        if state.iteration == self.at:
            raise KeyboardInterrupt


def _frame(run: Run) -> pd.DataFrame:
    rows = run.metrics()
    return rows.sort_values(["step", "epoch", "split", "layer", "metric"]).reset_index(drop=True)


def test_resumed_run_has_the_same_monitor_rows(tmp_path):
    data = _data()
    cfg = TrainConfig(epochs=6, lr=0.2, batch_size=16, seed=3, checkpoint_every=2)
    full_run = Run.create(tmp_path, "full")
    model = _model()
    full_monitor = _monitor(model, data, schedule="all")
    train(model, data, cfg, [full_monitor.callback()], full_run)
    # Re-create everything as a fresh process would.
    model = _model()
    part_run = Run.create(tmp_path, "part")
    callbacks = [_monitor(model, data, schedule="all").callback(), _Interrupt(18)]
    with pytest.raises(KeyboardInterrupt):
        train(model, data, cfg, callbacks, part_run)
    model = _model()
    resumed_monitor = _monitor(model, data, schedule="all")
    train(model, data, cfg, [resumed_monitor.callback(), _Interrupt(-1)], Run.open(part_run.path))
    pd.testing.assert_frame_equal(_frame(full_run), _frame(Run.open(part_run.path)))
    assert resumed_monitor.zero_error_epoch == full_monitor.zero_error_epoch


def test_training_loop_does_not_erase_an_earlier_zero_error_epoch(tmp_path) -> None:
    """The Monitor and the loop both write the manifest's zero_error_epoch: the earliest wins."""
    from collapselab.store.run import _earliest

    assert _earliest(3, None) == 3
    assert _earliest(None, 5) == 5
    assert _earliest(7, 5) == 5
    assert _earliest(None, None) is None

    # Integration: a detection already in the manifest survives a loop that finds none.
    from torch import nn

    from collapselab.data.dataset import DataSplits, LabeledData
    from collapselab.store import Run
    from collapselab.train import TrainConfig, train

    torch.manual_seed(0)
    y = torch.arange(40) % 4
    x = torch.randn(40, 3)  # labels independent of inputs: no zero training error in 2 epochs
    run = Run.create(tmp_path, "zero")
    run.update_manifest(zero_error_epoch=1)
    result = train(nn.Linear(3, 4), DataSplits(LabeledData(x, y, 4)), TrainConfig(2, 0.01), run=run)
    assert result.zero_error_epoch is None
    assert Run.open(run.path).manifest["zero_error_epoch"] == 1


def test_later_loop_detection_keeps_the_earlier_manifest_epoch(tmp_path) -> None:
    """The loop's own detection (at an evaluated epoch) must not overwrite an earlier one."""
    from torch import nn

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    y = torch.arange(40) % 4
    x = 4.0 * torch.eye(4)[y] + 0.3 * torch.randn(40, 4, generator=g)
    run = Run.create(tmp_path, "zero")
    run.update_manifest(zero_error_epoch=1)  # as a Monitor measuring every epoch would
    config = TrainConfig(6, 0.1, batch_size=4, eval_every=3)
    result = train(nn.Linear(4, 4), DataSplits(LabeledData(x, y, 4)), config, run=run)
    assert result.zero_error_epoch == 3  # the loop evaluates epochs 3 and 6 only
    assert Run.open(run.path).manifest["zero_error_epoch"] == 1
