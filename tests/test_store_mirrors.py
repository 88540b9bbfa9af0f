"""Mirrors: every row the store writes, read back from TensorBoard, MLflow and W&B.

Each tracker is tested against its real package (``pip install 'collapselab[tracking]'``;
``.ci/run`` installs them) and read back with that package's own reader: TensorBoard's
``EventAccumulator``, ``MlflowClient.get_metric_history``, and W&B's protobuf ``Record``
for the offline run file (W&B >= 0.19 ships no Python reader of its transaction log, whose
framing, the LevelDB log format, is decoded here).
"""

from __future__ import annotations

import importlib.util
import math
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from collapselab.store import (
    MIRROR_NAMES,
    MLflowMirror,
    Run,
    TensorBoardMirror,
    WandbMirror,
    check_mirror_available,
    make_mirror,
    metric_tag,
)


def _needs(package: str):
    return pytest.mark.skipif(
        importlib.util.find_spec(package) is None,
        reason=f"{package} is not installed (pip install 'collapselab[tracking]')",
    )


def _record(run: Run) -> None:
    """Rows over two flushes: splits, layers, epochs, NaN and infinities, repeated steps."""
    rng = np.random.default_rng(0)
    for step in range(0, 30, 3):
        run.log(step, "loss", float(rng.exponential()), epoch=step // 3)
        run.log(step, "accuracy", float(rng.uniform()), epoch=step // 3, split="test")
        for layer in ("blocks.0", "fc"):
            run.log(step, "nc1", float(rng.exponential()), epoch=step // 3, layer=layer)
        if step == 15:
            run.flush()
    run.log(30, "nc1", math.nan, layer="fc")
    run.log(30, "grad_norm", math.inf)
    run.log(30, "objective", -math.inf)
    run.flush()


def _expected(run: Run) -> dict[str, list[tuple[int, float]]]:
    rows = run.metrics()
    out: dict[str, list[tuple[int, float]]] = {}
    for r in rows.itertuples(index=False):
        out.setdefault(metric_tag(r.split, r.layer, r.metric), []).append((int(r.step), r.value))
    return {tag: sorted(values) for tag, values in out.items()}


def _same(got: dict, want: dict, convert=lambda v: v) -> None:
    assert sorted(got) == sorted(want)
    for tag, values in want.items():
        assert [s for s, _ in sorted(got[tag])] == [s for s, _ in values], tag
        for (_, a), (_, b) in zip(sorted(got[tag]), values, strict=True):
            b = convert(b)
            assert (math.isnan(a) and math.isnan(b)) or a == b, (tag, a, b)


@_needs("tensorboard")
def test_tensorboard_event_files_hold_every_row(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = Run.create(tmp_path, "exp", run_id="r")
    run.add_mirror(TensorBoardMirror())
    _record(run)
    run.close()
    events = EventAccumulator(str(run.path / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    got = {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }
    _same(got, _expected(run), convert=lambda v: float(np.float32(v)))  # TB stores float32


@_needs("mlflow")
def test_mlflow_sqlite_run_holds_every_row_and_resumes(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    run = Run.create(tmp_path, "exp", preset="quick", config={"lr": 0.1}, run_id="r")
    mirror = MLflowMirror()
    run.add_mirror(mirror)
    _record(run)
    run.set_status("interrupted")
    run.close()
    uri = f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    assert mirror.tracking_uri == uri
    client = MlflowClient(tracking_uri=uri)
    [found] = client.search_runs([client.get_experiment_by_name("exp").experiment_id])
    assert found.info.run_name == "r" and found.info.status == "KILLED"
    assert found.data.params["config.lr"] == "0.1" and found.data.params["preset"] == "quick"
    # A resumed run continues its MLflow run.
    again = Run.open(run.path)
    resumed = MLflowMirror()
    again.add_mirror(resumed)
    again.log(31, "loss", 0.25)
    again.set_status("completed")
    again.close()
    assert resumed.mlflow_run_id == found.info.run_id
    want = _expected(again)
    got = {
        tag: [(m.step, m.value) for m in client.get_metric_history(found.info.run_id, tag)]
        for tag in want
    }
    big = sys.float_info.max  # MLflow stores +-inf as +-max float
    _same(got, want, convert=lambda v: math.copysign(big, v) if math.isinf(v) else v)
    assert client.get_run(found.info.run_id).info.status == "FINISHED"


def _wandb_records(path: Path):
    """The protobuf records of a W&B transaction log (LevelDB log framing: 32 KiB blocks of
    chunks with a 7-byte header crc32c/length/type; W&B prepends a 7-byte file header)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, _magic, _version = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B"
    block, pos, parts = 32768, 7, []
    while pos + 7 <= len(data):
        room = block - pos % block
        if room < 7:
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if length == 0 and kind == 0:
            pos += room
            continue
        parts.append(data[pos + 7 : pos + 7 + length])
        pos += 7 + length
        if kind in (1, 4):  # FULL, LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(parts))
            parts = []
            yield record


def _wandb_key(item) -> str:
    # W&B stores a key containing "." as a nested key, split at the dots.
    return item.key or ".".join(item.nested_key)


@_needs("wandb")
def test_wandb_offline_run_holds_every_row(tmp_path: Path, monkeypatch) -> None:
    import json

    monkeypatch.delenv("WANDB_MODE", raising=False)
    run = Run.create(tmp_path, "exp", config={"lr": 0.1}, run_id="r.1")
    run.add_mirror(WandbMirror())
    _record(run)
    run.set_status("completed")
    run.close()
    [log] = list((run.path / "wandb").glob("offline-run-*/run-r_1.wandb"))
    got: dict[str, list[tuple[int, float]]] = {}
    for record in _wandb_records(log):
        if record.WhichOneof("record_type") != "history":
            continue
        items = {_wandb_key(item): json.loads(item.value_json) for item in record.history.item}
        step = items.pop("step")
        for key, value in items.items():
            if not key.startswith("_"):
                got.setdefault(key, []).append((step, float(value)))
    _same(got, _expected(run))


def test_a_failing_mirror_is_detached_and_the_run_goes_on(tmp_path: Path) -> None:
    class Broken:
        def __init__(self):
            self.opened = self.closed = False

        def open(self, run):
            self.opened = True

        def write(self, rows):
            raise RuntimeError("tracker down")

        def close(self):
            self.closed = True

    run = Run.create(tmp_path, "exp")
    broken = Broken()
    run.add_mirror(broken)
    run.log(0, "loss", 1.0)
    with pytest.warns(UserWarning, match=r"mirror Broken failed in write\(\) and is detached"):
        run.flush()
    assert run.mirrors == [] and run.metrics()["value"].tolist() == [1.0]
    with pytest.raises(TypeError, match=r"object has no open\(\)"):
        run.add_mirror(object())


def test_mirror_names_and_missing_packages(monkeypatch) -> None:
    assert MIRROR_NAMES == ("tensorboard", "mlflow", "wandb")
    with pytest.raises(ValueError, match="unknown mirror 'neptune'; mirrors: tensorboard"):
        make_mirror("neptune")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ImportError, match=r"pip install 'collapselab\[tracking\]'"):
        check_mirror_available("wandb")


@_needs("tensorboard")
def test_train_mirrors_every_row_it_writes(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from collapselab.data import gaussian_mixture
    from collapselab.models import MLP
    from collapselab.train import TrainConfig, train

    data = gaussian_mixture(n_classes=3, dim=4, n_train_per_class=10, seed=0)
    run = Run.create(tmp_path, "train", run_id="t")
    config = TrainConfig(epochs=3, lr=0.1, batch_size=10, log_batch_loss_every=1)
    train(MLP(4, 3, width=8, depth=2), data, config, run=run, mirrors=["tensorboard"])
    assert run.mirrors == []  # train closed the mirror it opened
    events = EventAccumulator(str(run.path / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    got = {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }
    _same(got, _expected(run), convert=lambda v: float(np.float32(v)))
    with pytest.raises(ValueError, match="mirrors forward the rows of a run"):
        train(MLP(4, 3, width=8, depth=2), data, config, mirrors=["tensorboard"])


class _Recorder:
    """An in-memory mirror: the rows it was given, and whether it was closed."""

    def __init__(self) -> None:
        self.rows: list = []
        self.opened = self.closed = False

    def open(self, run) -> None:
        self.opened = True

    def write(self, rows) -> None:
        self.rows.extend(rows)

    def close(self) -> None:
        self.closed = True


def _monitor_setup(tmp_path: Path, name: str):
    import torch

    from collapselab.data import gaussian_mixture
    from collapselab.models import MLP

    data = gaussian_mixture(3, 6, 12, n_test_per_class=4, mean_scale=3.0, seed=0)
    torch.manual_seed(0)
    return data, MLP(6, 3, width=8, depth=3, bias=True), Run.create(tmp_path, name, run_id="m")


def test_a_monitor_mirrors_every_row_of_its_run_in_a_plain_loop(tmp_path: Path) -> None:
    from collapselab.track import Monitor

    data, model, run = _monitor_setup(tmp_path, "plain")
    recorder = _Recorder()
    monitor = Monitor(
        model, data.train, data.test, run=run, families=["nc"], schedule=[1, 2], mirrors=[recorder]
    )
    assert not recorder.opened  # attached at the first write
    for epoch in (0, 1, 2):
        monitor.after_epoch(epoch, step=10 * epoch)
    monitor.close()
    assert recorder.opened and recorder.closed and run.mirrors == []
    rows = run.metrics()
    # Rows are (step, epoch, split, layer, metric, value) tuples (METRIC_COLUMNS).
    got = sorted((r[0], r[2], r[3], r[4], r[5]) for r in recorder.rows)
    want = sorted(zip(rows.step, rows.split, rows.layer, rows.metric, rows.value, strict=True))
    assert got == want and len(got) > 100


@_needs("tensorboard")
def test_a_monitor_under_train_mirrors_to_tensorboard(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from collapselab.track import Monitor
    from collapselab.train import TrainConfig, train

    data, model, run = _monitor_setup(tmp_path, "trained")
    monitor = Monitor(model, data.train, families=["nc"], mirrors="tensorboard", schedule="all")
    train(model, data, TrainConfig(epochs=2, lr=0.05, batch_size=12), [monitor.callback()], run)
    events = EventAccumulator(str(run.path / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    tag = metric_tag("train", model.penultimate, "nc1")
    rows = run.metrics()
    nc1 = rows[(rows.metric == "nc1") & (rows.layer == model.penultimate)]
    assert [e.step for e in events.Scalars(tag)] == list(nc1.step)  # epochs 0, 1, 2
    assert [e.value for e in events.Scalars(tag)] == [float(np.float32(v)) for v in nc1.value]
    with pytest.raises(ValueError, match="unknown mirror 'neptune'"):
        Monitor(model, data.train, families=["nc"], mirrors="neptune")
