"""Checkpoint/resume: an interrupted and resumed run ends exactly like an uninterrupted one."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

from collapselab.data.dataset import DataSplits, LabeledData
from collapselab.store import Run
from collapselab.store import run as run_module
from collapselab.train import Callback, TrainConfig, loop, train


def _data() -> DataSplits:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(60) % 3
    x = torch.randn(3, 5, generator=g)[y] + torch.randn(60, 5, generator=g)
    return DataSplits(LabeledData(x, y, 3), LabeledData(x[:12], y[:12], 3))


def _model(seed: int) -> nn.Module:
    # Dropout makes the global RNG part of the trajectory; momentum the optimizer state.
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))


class _Probe(Callback):
    """Logs per step and per epoch, draws random numbers, keeps state, can interrupt."""

    def __init__(self, interrupt_at: int | None = None) -> None:
        self.interrupt_at = interrupt_at
        self.seen = 0

    def on_iteration_end(self, state):
        self.seen += 1
        state.run.log(state.iteration, "probe_draw", float(torch.rand(())), epoch=state.epoch)
        if state.iteration == self.interrupt_at:
            raise KeyboardInterrupt

    def on_epoch_end(self, state):
        norm = float(state.model[0].weight.detach().norm())
        state.run.log(state.iteration, "weight_norm", norm, epoch=state.epoch, layer="0")
        state.run.log(state.iteration, "seen", float(self.seen), epoch=state.epoch)

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, d):
        self.seen = d["seen"]


_CFG = TrainConfig(
    epochs=5, lr=0.05, batch_size=16, momentum=0.9, weight_decay=1e-3, schedule="step",
    checkpoint_every=2, log_batch_loss_every=1, seed=11,
)  # fmt: skip


@pytest.mark.parametrize("flush_seconds", [float("inf"), 0.0])
def test_interrupted_and_resumed_run_equals_uninterrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flush_seconds: float
) -> None:
    # inf: rows reach the file only at checkpoints; 0: after every epoch as well, so the
    # interrupted run's file holds rows past its checkpoint that the resume must drop
    monkeypatch.setattr(loop, "FLUSH_SECONDS", flush_seconds)
    data = _data()
    full_run = Run.create(tmp_path, "full")
    full = train(_model(0), data, _CFG, [_Probe()], full_run)

    part_run = Run.create(tmp_path, "part")
    ipe = 4
    with pytest.raises(KeyboardInterrupt):
        train(_model(0), data, _CFG, [_Probe(interrupt_at=3 * ipe + 2)], part_run)
    interrupted = Run.open(part_run.path)
    assert interrupted.status == "interrupted"
    assert interrupted.latest_checkpoint().step == 2 * ipe
    assert interrupted.metrics()["step"].max() == 3 * ipe + 2  # rows past the checkpoint exist

    # a fresh process would rebuild the model with another initialisation
    resumed = train(_model(123), data, _CFG, [_Probe()], Run.open(part_run.path))
    assert resumed.resumed_from_step == 2 * ipe
    for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(p, q)
    assert resumed.history == full.history and resumed.iterations == full.iterations
    assert resumed.epochs_completed == 5
    pd.testing.assert_frame_equal(
        Run.open(part_run.path).metrics(), Run.open(full_run.path).metrics()
    )
    manifest = Run.open(part_run.path).manifest
    assert manifest["status"] == "completed" and len(manifest["timings"]["resumed"]) == 1


def test_metric_rows_are_written_at_checkpoints_not_after_every_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each write rewrites the whole table: one per epoch made long runs of short epochs
    quadratic. Between checkpoints rows wait (``FLUSH_SECONDS`` apart at most); the table
    in the end is the same."""
    sizes: list[int] = []
    write = run_module.write_metrics

    def counted(path, frame):
        sizes.append(len(frame))
        write(path, frame)

    monkeypatch.setattr(run_module, "write_metrics", counted)
    cfg = TrainConfig(**{**_CFG.to_dict(), "epochs": 9, "checkpoint_every": 4})
    tables = {}
    for flush_seconds in (float("inf"), 0.0):
        monkeypatch.setattr(loop, "FLUSH_SECONDS", flush_seconds)
        sizes.clear()
        run = Run.create(tmp_path, f"flush-{flush_seconds}")
        train(_model(0), _data(), cfg, [_Probe()], run)
        tables[flush_seconds] = (Run.open(run.path).metrics(), list(sizes))
    (lazy, lazy_sizes), (eager, eager_sizes) = tables[float("inf")], tables[0.0]
    pd.testing.assert_frame_equal(lazy, eager)
    assert len(eager_sizes) - len(lazy_sizes) == 9 - 3  # every epoch vs epochs 4, 8 and 9
    assert lazy_sizes[-1] == len(lazy)


def test_extending_a_finished_run_continues_its_trajectory(tmp_path: Path) -> None:
    data = _data()
    cfg5 = TrainConfig(epochs=5, lr=0.05, batch_size=16, momentum=0.9, seed=2, checkpoint_every=3)
    cfg3 = TrainConfig(**{**cfg5.to_dict(), "epochs": 3})
    once = train(_model(0), data, cfg5)
    run = Run.create(tmp_path, "extend")
    train(_model(0), data, cfg3, run=run)
    again = train(_model(0), data, cfg5, run=Run.open(run.path))
    assert again.resumed_from_step == 3 * 4
    for p, q in zip(once.model.parameters(), again.model.parameters(), strict=True):
        assert torch.equal(p, q)
    assert again.history == once.history


def test_resume_refuses_a_different_config_and_leaves_the_run_alone(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "cfg")
    with pytest.raises(KeyboardInterrupt):
        train(_model(0), _data(), _CFG, [_Probe(interrupt_at=6)], run)
    changed = TrainConfig(**{**_CFG.to_dict(), "lr": 0.1})
    with pytest.raises(ValueError, match=r"different TrainConfig \(fields \['lr'\]\)"):
        train(_model(0), _data(), changed, [_Probe()], Run.open(run.path))
    longer = TrainConfig(**{**_CFG.to_dict(), "epochs": 9})  # moves the step milestones
    with pytest.raises(ValueError, match="milestones depend on it"):
        train(_model(0), _data(), longer, [_Probe()], Run.open(run.path))
    assert Run.open(run.path).status == "interrupted"


def test_run_without_checkpoints_cannot_be_trained_twice(tmp_path: Path) -> None:
    cfg = TrainConfig(epochs=1, lr=0.1, batch_size=16, checkpoint_every=0)
    run = Run.create(tmp_path, "nockpt")
    train(_model(0), _data(), cfg, run=run)
    assert run.checkpoints() == []
    with pytest.raises(ValueError, match="no checkpoint to resume"):
        train(_model(0), _data(), cfg, run=Run.open(run.path))


def test_interrupt_before_the_first_checkpoint_leaves_a_clean_run(tmp_path: Path) -> None:
    class InterruptAtStart(Callback):
        def on_train_start(self, state):
            raise KeyboardInterrupt

    run = Run.create(tmp_path, "early")
    run.log(0, "dataset_size", 60.0)  # the caller's own row survives
    with pytest.raises(KeyboardInterrupt):
        train(_model(0), _data(), _CFG, [InterruptAtStart()], run)
    reopened = Run.open(run.path)
    assert reopened.status == "interrupted"
    assert reopened.metrics()["metric"].tolist() == ["dataset_size"]
    full = train(_model(0), _data(), _CFG, [_Probe()], reopened)  # a clean fresh start
    assert full.resumed_from_step is None and full.epochs_completed == 5


def test_resume_matches_callback_state_by_class_not_position(tmp_path: Path) -> None:
    """A stateless callback (a progress bar, say) may be present on one side only."""
    data = _data()
    full = train(_model(0), data, _CFG, [_Probe()], Run.create(tmp_path, "full"))

    part_run = Run.create(tmp_path, "part")
    ipe = 4
    stateless = Callback()
    with pytest.raises(KeyboardInterrupt):
        train(_model(0), data, _CFG, [stateless, _Probe(interrupt_at=3 * ipe + 2)], part_run)
    resumed = train(_model(5), data, _CFG, [_Probe()], Run.open(part_run.path))
    for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(p, q)
    assert resumed.history == full.history


def test_resume_refuses_a_missing_stateful_callback(tmp_path: Path) -> None:
    data = _data()
    run = Run.create(tmp_path, "part")
    with pytest.raises(KeyboardInterrupt):
        train(_model(0), data, _CFG, [_Probe(interrupt_at=9)], run)
    with pytest.raises(ValueError, match=r"stateful callbacks \[\]"):
        train(_model(0), data, _CFG, [], Run.open(run.path))
