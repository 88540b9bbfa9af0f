"""One value per metric row key (step, split, layer, metric): the store refuses a second one."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from collapselab.data.dataset import DataSplits, LabeledData
from collapselab.models import MLP
from collapselab.store import ROW_KEY, DuplicateRowError, Run
from collapselab.store import row_keys as row_keys_module
from collapselab.store.row_keys import RowKeys, frame_keys
from collapselab.track import Monitor
from collapselab.train import Callback, TrainConfig, train


def _no_repeated_key(rows: pd.DataFrame) -> None:
    assert not rows.duplicated(list(ROW_KEY)).any(), rows[rows.duplicated(list(ROW_KEY), False)]


def test_a_second_value_is_refused_naming_the_key(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "keys")
    run.log(10, "accuracy", 0.8, epoch=1)
    with pytest.raises(DuplicateRowError) as caught:
        run.log(10, "accuracy", 0.9, epoch=1)  # buffered key
    message = str(caught.value)
    for part in ("'accuracy'", "split 'train'", "layer ''", "step 10", "0.8", "0.9"):
        assert part in message
    assert caught.value.key == (10, "train", "", "accuracy")
    assert caught.value.recorded == (10, 1, "train", "", "accuracy", 0.8)
    assert caught.value.refused == (10, 1, "train", "", "accuracy", 0.9)
    run.flush()
    with pytest.raises(DuplicateRowError):
        run.log(10, "accuracy", 0.7, epoch=1)  # written key
    with pytest.raises(DuplicateRowError, match="epoch 2"):
        run.log(10, "accuracy", 0.8, epoch=2)  # same value, another epoch: a contradiction
    run.set_status("completed")
    reopened = Run.open(run.path)  # a fresh object reads the keys from metrics.parquet
    with pytest.raises(DuplicateRowError, match=r"value 0\.81"):
        reopened.log(10, "accuracy", 0.81, epoch=1)  # a completed run's rows are final
    assert run.metrics()["value"].tolist() == [0.8]


def test_a_restarted_session_supersedes_what_the_stopped_one_wrote(tmp_path: Path) -> None:
    """A run function that failed after writing rows, started again: its new values replace
    the stopped session's (one value per key), and within the new session the rule holds."""
    first = Run.create(tmp_path, "keys")
    first.set_status("running")
    first.log_many({"step": 0, "metric": m, "value": 1.0} for m in ("a", "b", "c"))
    first.flush()
    first.set_status("failed", error="boom")
    again = Run.open(first.path)
    again.set_status("running")
    again.log(0, "b", 2.0)  # superseded at once: metrics() shows the new value only
    again.log(0, "c", 1.0)  # the same value: replaced as well, no second row
    assert again.metrics()[["metric", "value"]].values.tolist() == [
        ["a", 1.0],
        ["b", 2.0],
        ["c", 1.0],
    ]
    with pytest.raises(DuplicateRowError):
        again.log(0, "b", 3.0)  # this session's own value
    again.discard_pending()  # the superseded rows are back
    assert again.metrics()["value"].tolist() == [1.0, 1.0, 1.0]
    again.log(0, "b", 2.0)
    again.log(1, "b", 5.0)
    again.flush()
    with pytest.raises(DuplicateRowError):
        again.log(0, "b", 4.0)  # written by this session, now in metrics.parquet
    rows = Run.open(first.path).metrics()
    assert rows[["step", "metric", "value"]].values.tolist() == [
        [0, "a", 1.0], [0, "c", 1.0], [0, "b", 2.0], [1, "b", 5.0]
    ]  # fmt: skip


def test_every_part_of_the_key_distinguishes_rows(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "keys")
    run.log(10, "accuracy", 0.8, epoch=1)
    run.log(11, "accuracy", 0.8, epoch=1)
    run.log(10, "accuracy", 0.5, epoch=1, split="test")
    run.log(10, "accuracy", 0.4, epoch=1, layer="fc")
    run.log(10, "loss", 0.8, epoch=1)
    run.flush()
    assert len(Run.open(run.path).metrics()) == 5


def test_an_exact_repeat_is_one_value_and_kept(tmp_path: Path) -> None:
    """Measuring an unchanged model twice at one step records the same numbers twice."""
    run = Run.create(tmp_path, "keys")
    run.log(3, "nc1", math.nan, epoch=1, layer="fc")
    run.log(3, "nc1", math.nan, epoch=1, layer="fc")  # NaN repeats NaN
    run.log(3, "loss", 0.25, epoch=1)
    run.flush()
    run.log(3, "loss", 0.25, epoch=1)
    assert len(run.metrics()) == 4
    with pytest.raises(DuplicateRowError):
        run.log(3, "nc1", 0.0, epoch=1, layer="fc")


def test_a_batch_with_a_conflict_buffers_nothing(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "keys")
    rows = [{"step": 1, "metric": "m", "value": 1.0}, {"step": 1, "metric": "m", "value": 2.0}]
    with pytest.raises(DuplicateRowError):
        run.log_many(rows)
    with pytest.raises(DuplicateRowError):
        run.log_dict(2, {"a": 1.0, "b": 2.0})  # fine
        run.log_dict(2, {"b": 2.5})
    assert sorted(run.metrics()["metric"]) == ["a", "b"]


def test_resume_and_discard_free_their_keys(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "keys")
    run.log_many({"step": k, "metric": "loss", "value": 1.0 / (k + 1)} for k in range(5))
    run.flush()
    run.log(5, "loss", 0.1)
    assert run.truncate_after(2) == 3  # steps 3, 4 written, 5 buffered
    run.log(3, "loss", 0.9)  # the continuation records them again, with other values
    run.log(5, "loss", 0.8)
    with pytest.raises(DuplicateRowError):
        run.log(3, "loss", 0.7)  # but once per session
    run.discard_pending()
    run.log(3, "loss", 0.7)
    run.flush()
    assert Run.open(run.path).metrics()["value"].tolist() == [1.0, 0.5, 1.0 / 3.0, 0.7]


def test_a_hash_collision_never_refuses_a_row(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(row_keys_module, "_key_hash", lambda key: 7)  # every key collides
    run = Run.create(tmp_path, "keys")
    run.log_many({"step": k, "metric": "m", "value": float(k)} for k in range(4))
    run.flush()
    run.log(9, "m", 9.0)
    run.log_many(
        [{"step": 10, "metric": "m", "value": 1.0}, {"step": 11, "metric": "m", "value": 1.0}]
    )
    with pytest.raises(DuplicateRowError, match="step 2"):
        run.log(2, "m", 5.0)
    with pytest.raises(DuplicateRowError, match="step 3"):
        run.log_many(
            [{"step": 12, "metric": "m", "value": 1.0}, {"step": 3, "metric": "m", "value": 0.0}]
        )


def test_row_keys_index_against_a_reference(tmp_path: Path) -> None:
    """``RowKeys.candidates`` finds exactly the positions of a key, for single and batched
    look-ups, after extending (reference: a plain dict of the keys)."""
    rng = np.random.default_rng(0)
    steps = rng.integers(0, 50, size=300)
    layers = rng.choice(["", "a", "b"], size=300)
    frame = pd.DataFrame(
        {"step": steps, "epoch": steps, "split": "train", "layer": layers, "metric": "m",
         "value": 0.0}
    ).drop_duplicates(["step", "layer"]).reset_index(drop=True)  # fmt: skip
    keys = frame_keys(frame)
    index = RowKeys(frame.iloc[:100])
    index.extend(keys[100:])
    where = {k: i for i, k in enumerate(keys)}
    probes = [*keys, (99, "train", "", "m"), (0, "test", "", "m")]
    batched = index.candidates(probes)
    for probe, found in zip(probes, batched, strict=True):
        assert index.candidates([probe]) == [found]
        assert found == ([where[probe]] if probe in where else [])


def test_mirrors_receive_each_row_once_and_never_a_refused_one(tmp_path: Path) -> None:
    class Collect:
        def __init__(self) -> None:
            self.rows: list[tuple] = []

        def open(self, run: Run) -> None: ...

        def write(self, rows) -> None:
            self.rows.extend(rows)

        def close(self) -> None: ...

    mirror = Collect()
    run = Run.create(tmp_path, "keys")
    run.add_mirror(mirror)
    run.log(1, "loss", 0.5, epoch=1)
    with pytest.raises(DuplicateRowError):
        run.log(1, "loss", 0.6, epoch=1)
    run.flush()
    run.flush()
    assert mirror.rows == [(1, 1, "train", "", "loss", 0.5)]


# --------------------------------------------------------------- the loop and a Monitor
def _data() -> DataSplits:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(60) % 3
    x = 2.0 * torch.randn(3, 5, generator=g)[y] + torch.randn(60, 5, generator=g)
    return DataSplits(LabeledData(x, y, 3), LabeledData(x[:15], y[:15], 3))


def _model() -> MLP:
    torch.manual_seed(0)
    return MLP(5, 3, width=8, depth=3, bias=True).double()


_CFG = TrainConfig(epochs=6, lr=0.05, batch_size=16, momentum=0.9, seed=3, checkpoint_every=2)


def test_the_loop_owns_the_model_accuracy_and_the_monitor_keeps_its_own(tmp_path: Path) -> None:
    data, model = _data(), _model()
    run = Run.create(tmp_path, "one-writer")
    monitor = Monitor(model, data.train, data.test, batch_size=32, schedule="all")
    seen: list[dict[str, float]] = []

    class Keep(Callback):
        def on_epoch_end(self, state) -> None:
            seen.append(dict(monitor.last_results["train"][""]))

    result = train(model, data, _CFG, [monitor.callback(), Keep()], run)
    rows = Run.open(run.path).metrics()
    _no_repeated_key(rows)
    for split, key in (("train", "train_accuracy"), ("test", "test_accuracy")):
        got = rows[(rows.metric == "accuracy") & (rows.split == split) & (rows.layer == "")]
        want = [h[key] for h in result.history]
        assert got["value"].tolist() == want  # the loop's numbers, every evaluated epoch
        assert got["epoch"].tolist() == list(range(7))
    # The monitor still measured its accuracy (in its results) at every epoch.
    assert len(seen) == 6 and all("accuracy" in values for values in seen)
    # Its other model-level rows are written.
    assert (rows.metric == "zero_error_epoch").sum() == (monitor.zero_error_epoch is not None)


def test_a_monitor_with_its_own_run_writes_its_accuracy(tmp_path: Path) -> None:
    data, model = _data(), _model()
    training, measuring = Run.create(tmp_path, "train"), Run.create(tmp_path, "measure")
    monitor = Monitor(model, data.train, batch_size=32, schedule=[2, 4], run=measuring)
    train(model, data, _CFG, [monitor.callback()], training)
    mine = measuring.metrics()
    accuracy = mine[(mine.metric == "accuracy") & (mine.layer == "")]
    assert accuracy["epoch"].tolist() == [0, 2, 4]


def test_two_writers_of_one_key_are_refused(tmp_path: Path) -> None:
    """Without the ownership rule a monitor and the loop would both write the train accuracy
    at every measured step: the store refuses the second where the numbers differ."""
    data, model = _data(), _model()
    run = Run.create(tmp_path, "two-writers")
    monitor = Monitor(model, data.train, batch_size=32, schedule="all", run=run)

    class Rival(Callback):
        def on_epoch_end(self, state) -> None:
            run.log(state.iteration, "accuracy", 0.123, epoch=state.epoch)

    with pytest.raises(DuplicateRowError, match="'accuracy' of split 'train'"):
        train(model, data, _CFG, [monitor.callback(), Rival()], run)
