"""Tests of collapselab.store.Run: manifest, metric table, atomic writes, arrays, checkpoints."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from collapselab.store import METRIC_COLUMNS, NO_EPOCH, Run
from collapselab.store import metrics_table as mt
from collapselab.store._atomic import atomic_open


def _rows_of(run: Run) -> list[tuple]:
    return list(run.metrics().itertuples(index=False, name=None))


# ------------------------------------------------------------------------ manifest / ids
def test_create_writes_manifest_and_readable_unique_ids(tmp_path: Path) -> None:
    config = {"lr": 0.01, "widths": (8, 4), "path": Path("/x")}
    a = Run.create(tmp_path, "mse-nc", preset="quick", config=config, seed=3)
    b = Run.create(tmp_path, "mse-nc", preset="quick", config=config, seed=3)
    assert re.fullmatch(r"mse-nc-quick-\d{8}-\d{6}-[0-9a-f]{6}(-\d+)?", a.id)
    assert a.id != b.id and a.path.name == a.id
    manifest = json.loads((a.path / "manifest.json").read_text())
    assert manifest["id"] == a.id
    assert manifest["experiment"] == "mse-nc" and manifest["preset"] == "quick"
    assert manifest["config"] == {"lr": 0.01, "widths": [8, 4], "path": "/x"}
    assert manifest["seed"] == 3 and manifest["status"] == "created"
    assert set(manifest["versions"]) >= {"python", "torch", "numpy", "collapselab"}
    assert manifest["timings"]["created"] and manifest["timings"]["started"] is None
    assert Run.open(a.path).manifest == a.manifest


def test_given_id_exists_and_open_or_create_resumes(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp", config={"a": 1}, seed=1, run_id="my-run")
    run.log(0, "loss", 2.0)
    run.flush()
    with pytest.raises(FileExistsError, match="open_or_create"):
        Run.create(tmp_path, "exp", config={"a": 1}, seed=1, run_id="my-run")
    again = Run.open_or_create(tmp_path, "exp", config={"a": 1}, seed=1, run_id="my-run")
    assert again.path == run.path and _rows_of(again) == [(0, NO_EPOCH, "train", "", "loss", 2.0)]
    with pytest.raises(ValueError, match="config"):
        Run.open_or_create(tmp_path, "exp", config={"a": 2}, seed=1, run_id="my-run")
    fresh = Run.open_or_create(tmp_path, "exp", config={"a": 1}, run_id="other")
    assert fresh.status == "created"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"experiment": "bad/name"}, ValueError, "experiment"),
        ({"experiment": "x", "run_id": "../escape"}, ValueError, "run_id"),
        ({"experiment": "x", "config": {"f": object()}}, TypeError, "config"),
        ({"experiment": "x", "config": [1, 2]}, TypeError, "config"),
        ({"experiment": "x", "seed": 1.5}, TypeError, "seed"),
    ],
)
def test_create_rejects_bad_arguments(
    tmp_path: Path, kwargs: dict, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        Run.create(tmp_path, **kwargs)


def test_open_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"manifest\.json"):
        Run.open(tmp_path / "nope")


def test_status_timings_and_manifest_updates(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp")
    run.set_status("running")
    started = run.manifest["timings"]["started"]
    run.set_status("failed", error="boom")
    assert run.manifest["error"] == "boom" and run.manifest["timings"]["finished"]
    run.set_status("running")  # a resume
    run.set_status("running")  # e.g. the training loop inside an experiment: same session
    m = run.manifest
    assert m["timings"]["started"] == started and len(m["timings"]["resumed"]) == 1
    assert m["error"] is None and m["timings"]["finished"] is None
    run.update_manifest(zero_error_epoch=np.int64(7), note="x")
    run.add_duration("train_seconds", 1.5)
    run.add_duration("train_seconds", 2.0)
    reopened = Run.open(run.path).manifest
    assert reopened["zero_error_epoch"] == 7 and reopened["durations"]["train_seconds"] == 3.5
    with pytest.raises(ValueError, match="status must be one of"):
        run.set_status("done")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'id'"):
        run.update_manifest(id="other")


def test_a_run_left_running_by_a_killed_process_records_its_resume(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp")
    run.set_status("running")
    run.close()  # the process "dies" here: the manifest still says running
    again = Run.open(run.path)
    assert again.status == "running"
    again.set_status("running")
    again.set_status("running")  # nested set-up in the same session: not a second resume
    timings = Run.open(run.path).manifest["timings"]
    assert len(timings["resumed"]) == 1 and timings["finished"] is None


def test_context_manager_marks_failure_and_flushes(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp")
    run.set_status("running")
    with pytest.raises(RuntimeError), run:
        run.log(1, "loss", 0.5)
        raise RuntimeError("crashed")
    reopened = Run.open(run.path)
    assert reopened.status == "failed" and "crashed" in reopened.manifest["error"]
    assert _rows_of(reopened) == [(1, NO_EPOCH, "train", "", "loss", 0.5)]


# --------------------------------------------------------------------------- metrics
def test_log_flush_round_trip_with_exact_schema(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp")
    run.log(0, "loss", 1.25, epoch=0)
    run.log_dict(
        10, {"nc1": np.float32(0.5), "acc": torch.tensor(0.75)}, epoch=1, split="test", layer="fc"
    )
    run.log_many(
        [
            {"step": 11, "metric": "lr", "value": 1e-3},
            {"step": 12, "metric": "x", "value": float("nan")},
        ]
    )
    expected = [
        (0, 0, "train", "", "loss", 1.25),
        (10, 1, "test", "fc", "nc1", 0.5),
        (10, 1, "test", "fc", "acc", 0.75),
        (11, NO_EPOCH, "train", "", "lr", 1e-3),
    ]
    assert not (run.path / "metrics.parquet").exists()
    assert _rows_of(run)[:4] == expected  # buffered rows are visible before a flush
    run.flush()
    schema = pq.read_schema(run.path / "metrics.parquet")
    assert schema.names == list(METRIC_COLUMNS)
    assert [str(t) for t in schema.types] == [
        "int64",
        "int64",
        "string",
        "string",
        "string",
        "double",
    ]
    frame = Run.open(run.path).metrics()
    assert frame.dtypes["step"] == np.int64 and frame.dtypes["value"] == np.float64
    assert list(frame.itertuples(index=False, name=None))[:4] == expected
    assert np.isnan(frame["value"].iloc[4])
    pd.testing.assert_frame_equal(frame, run.metrics())
    run.log(13, "loss", 0.1)
    run.flush()  # appends to what is on disk
    assert len(Run.open(run.path).metrics()) == 6


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((-1, "loss", 1.0), ValueError, "step"),
        ((True, "loss", 1.0), TypeError, "step"),
        ((1.0, "loss", 1.0), TypeError, "step"),
        ((1, "", 1.0), ValueError, "metric"),
        ((1, "loss", "high"), TypeError, "value"),
        ((1, "loss", None), TypeError, "value"),
        ((1, 3, 1.0), TypeError, "metric"),
    ],
)
def test_log_rejects_bad_rows(tmp_path: Path, args: tuple, error: type, match: str) -> None:
    run = Run.create(tmp_path, "exp")
    with pytest.raises(error, match=match):
        run.log(*args)
    with pytest.raises(ValueError, match="unknown keys"):
        run.log_many([{"step": 1, "metric": "a", "value": 1.0, "lyr": "x"}])
    assert len(run.metrics()) == 0


def test_truncate_after_drops_later_rows_and_checkpoints(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp")
    for step in range(6):
        run.log(step, "loss", float(step), epoch=step)
        run.save_checkpoint({"step": step}, step, keep_last=10)
    run.flush()
    run.log(6, "loss", 6.0)  # still buffered
    dropped = run.truncate_after(3)
    assert dropped == 3
    assert Run.open(run.path).metrics()["step"].tolist() == [0, 1, 2, 3]
    assert run.metrics()["step"].tolist() == [0, 1, 2, 3]
    assert [c.step for c in run.checkpoints()] == [0, 1, 2, 3]
    assert run.truncate_after(10) == 0


# ---------------------------------------------------------------------- atomic writes
def test_crash_during_metric_write_keeps_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = Run.create(tmp_path, "exp")
    run.log(0, "loss", 1.0)
    run.flush()
    before = (run.path / "metrics.parquet").read_bytes()
    listing = sorted(p.name for p in run.path.iterdir())

    def crashing_write(table, where, **kwargs):
        where.write(b"PAR1 partial garbage")
        raise OSError("disk full")

    monkeypatch.setattr(mt.pq, "write_table", crashing_write)
    run.log(1, "loss", 0.5)
    with pytest.raises(OSError, match="disk full"):
        run.flush()
    assert (run.path / "metrics.parquet").read_bytes() == before
    assert sorted(p.name for p in run.path.iterdir()) == listing  # no temp file left
    monkeypatch.undo()
    run.flush()  # the failed rows were kept in the buffer
    assert Run.open(run.path).metrics()["step"].tolist() == [0, 1]


def test_killed_process_leaves_old_file_and_only_a_hidden_temp(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp")
    run.log(0, "loss", 1.0)
    run.close()  # lets the child process take the run's write lock
    before = (run.path / "metrics.parquet").read_bytes()
    script = textwrap.dedent(
        f"""
        import os
        from collapselab.store import Run
        from collapselab.store import metrics_table as mt
        def dying_write(table, where, **kw):
            where.write(b"PAR1 half a file")
            where.flush()
            os._exit(3)  # no cleanup handlers run: like a kill -9
        mt.pq.write_table = dying_write
        run = Run.open({str(run.path)!r})
        run.log(1, "loss", 0.5)
        run.flush()
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == 3, proc.stderr.decode()
    assert (run.path / "metrics.parquet").read_bytes() == before
    leftovers = [
        p.name
        for p in run.path.iterdir()
        if p.name not in ("manifest.json", "metrics.parquet", ".lock")
    ]
    assert len(leftovers) == 1 and leftovers[0].startswith(".metrics.parquet.")
    assert leftovers[0].endswith(".tmp")
    assert Run.open(run.path).metrics()["step"].tolist() == [0]


def test_atomic_open_replaces_only_on_success(tmp_path: Path) -> None:
    target = tmp_path / "claims.json"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt), atomic_open(target, "w") as handle:
        handle.write("new but")
        raise KeyboardInterrupt
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["claims.json"]
    with atomic_open(target, "w") as handle:
        handle.write("new")
    assert target.read_text() == "new"


# --------------------------------------------------------------- arrays, files, figures
def test_arrays_json_text_and_figures(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp")
    spectrum = np.linspace(0, 1, 7)
    run.save_array("spectra", eig=spectrum, traj=torch.arange(6.0).reshape(2, 3))
    loaded = run.load_array("spectra.npz")
    np.testing.assert_array_equal(loaded["eig"], spectrum)
    np.testing.assert_array_equal(loaded["traj"], np.arange(6.0).reshape(2, 3))
    assert run.array_names() == ["spectra"]
    with pytest.raises(FileNotFoundError, match="spectra"):
        run.load_array("missing")
    with pytest.raises(ValueError, match="at least one"):
        run.save_array("empty")
    with pytest.raises(TypeError, match="dtype object"):
        run.save_array("bad", a=np.array([{}, 1], dtype=object))

    claims = [{"name": "PFC1 decreases", "holds": True, "value": np.float64(0.25)}]
    path = run.write_json("claims", claims)
    assert path.name == "claims.json" and run.read_json("claims.json")[0]["value"] == 0.25
    with pytest.raises(ValueError, match="managed by the run"):
        run.write_json("manifest", {})
    run.write_text("report.html", "<html></html>")
    assert (run.path / "report.html").read_text() == "<html></html>"

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    saved = run.save_figure(fig, "loss", dpi=40)
    plt.close(fig)
    assert saved == run.figure_path("loss.png") and saved.read_bytes()[:4] == b"\x89PNG"


# ----------------------------------------------------------------------- checkpoints
def test_checkpoints_keep_last_and_load(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp")
    assert run.latest_checkpoint() is None
    for step in (0, 5, 10, 15):
        run.save_checkpoint({"w": torch.full((2,), float(step)), "step": step}, step, keep_last=2)
    assert [c.step for c in run.checkpoints()] == [10, 15]
    latest = run.latest_checkpoint()
    assert latest is not None and latest.step == 15
    state = latest.load()
    assert torch.equal(state["w"], torch.full((2,), 15.0)) and state["step"] == 15
    # saving an earlier step abandons the later checkpoints
    run.save_checkpoint({"step": 12}, 12, keep_last=2)
    assert [c.step for c in run.checkpoints()] == [10, 12]
    with pytest.raises(ValueError, match="keep_last"):
        run.save_checkpoint({}, 20, keep_last=0)
    with pytest.raises(ValueError, match="step"):
        run.save_checkpoint({}, -1)


def test_record_zero_error_epoch_keeps_the_earliest(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "zero")
    run.record_zero_error_epoch(None)
    assert "zero_error_epoch" in run.manifest and run.manifest["zero_error_epoch"] is None
    for epoch, kept in ((7, 7), (5, 5), (9, 5), (None, 5)):
        run.record_zero_error_epoch(epoch)
        assert run.manifest["zero_error_epoch"] == kept
    assert Run.open(run.path).manifest["zero_error_epoch"] == 5


# ------------------------------------------------------------------------- write lock
_HOLD_LOCK = """
import sys, time
from collapselab.store import Run
run = Run.open(sys.argv[1])
run.log(5, "loss", 0.1)
run.flush()
print("locked", flush=True)
time.sleep(60)
"""


def test_a_second_process_cannot_write_the_same_run(tmp_path: Path) -> None:
    from collapselab.store import RunLockedError

    run = Run.create(tmp_path, "exp")
    run.close()
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(run.path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "locked"
        other = Run.open(run.path)
        assert other.metrics()["step"].tolist() == [5]  # reading needs no lock
        with pytest.raises(RunLockedError, match=rf"pid {child.pid} since .*wait for it"):
            other.set_status("running")
        with pytest.raises(RunLockedError):
            other.write_json("claims", {})
    finally:
        child.kill()  # SIGKILL: the operating system releases the lock
        child.wait()
    other.set_status("running")
    assert Run.open(run.path).status == "running"
    assert "pid" in (run.path / ".lock").read_text()


def test_runs_of_one_process_share_the_lock(tmp_path: Path) -> None:
    a = Run.create(tmp_path, "exp")
    b = Run.open(a.path)
    a.log(0, "loss", 1.0)
    a.flush()
    b.write_json("claims", {"ok": True})  # same process: allowed
    a.close()
    b.write_text("note.txt", "x")
    b.close()
