"""What a new user meets on the command line: one-line errors, damaged runs, read-only
queries, option checks, progress, SIGTERM, the write lock, resume messages, mirrors."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collapselab.cli.main import app
from collapselab.experiments import Final, RunContext, value_above
from collapselab.store import Run
from tests._experiments import experiment, registered

runner = CliRunner()


def _one_error_line(result, *fragments: str) -> str:
    """The single line on standard error that starts with 'error:' (and no traceback)."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _ok(run: Run, context: RunContext) -> None:
    run.log(step=1, metric="accuracy", value=0.97, epoch=1, split="test")


def _theory(run: Run, context: RunContext) -> None:
    run.log(step=0, metric="objective", value=1.0)
    with context.progress.task("solver", 3, "steps") as done:
        for k in range(3):
            done(k + 1, 3)


@pytest.fixture
def experiments() -> Iterator[None]:
    claim = value_above("acc", "accurate", "Tab. 1", Final("accuracy", "test"), 0.9)
    with registered(
        experiment("t-fc-ok", _ok, claims=[claim]),
        experiment("t-fc-theory", _theory, uses_device=False),
    ):
        yield


@pytest.fixture
def root(tmp_path: Path, experiments: None) -> Path:
    for exp_id in ("t-fc-ok", "t-fc-theory"):
        result = runner.invoke(app, ["run", exp_id, "--out", str(tmp_path), "--no-progress"])
        assert result.exit_code == 0, result.output
    return tmp_path


# ---------------------------------------------------------------------------- query, runs
@pytest.mark.parametrize(
    ("sql", "fragments"),
    [
        ("SELEC bad sql", ["query failed: Parser Error", "views: metrics(run_id"]),
        ("SELECT nosuch FROM metrics", ['Referenced column "nosuch" not found', "views:"]),
        ("COPY (SELECT 1) TO 'out.csv'", ["read-only: COPY statements are refused", "--format"]),
        ("ATTACH 'other.db'", ["read-only: ATTACH statements are refused"]),
    ],
)
def test_query_mistakes_are_one_line(root: Path, sql: str, fragments: list[str]) -> None:
    result = runner.invoke(app, ["query", sql, "--root", str(root)])
    assert result.exit_code == 2
    _one_error_line(result, *fragments)
    assert not (Path.cwd() / "out.csv").exists()


@pytest.mark.parametrize("command", ["query", "runs"])
def test_missing_or_file_root_is_one_line(tmp_path: Path, command: str) -> None:
    (tmp_path / "a-file").write_text("x")
    for where, what in ((tmp_path / "nowhere", "does not exist"), (tmp_path / "a-file", "a file")):
        args = [command, "SELECT 1"] if command == "query" else [command]
        result = runner.invoke(app, [*args, "--root", str(where)])
        assert result.exit_code == 2
        _one_error_line(result, f"run root {where}", what, "--root")


def test_damaged_runs_are_named_skipped_and_rerun(root: Path, experiments: None) -> None:
    ok = root / "t-fc-ok-quick-seed0"
    data = (ok / "metrics.parquet").read_bytes()
    (ok / "metrics.parquet").write_bytes(data[: len(data) // 2])
    runs = runner.invoke(app, ["runs", "--root", str(root)], env={"COLUMNS": "80"})
    assert runs.exit_code == 0
    assert "damaged" in runs.output and "metrics.parquet cannot be read" in runs.output
    query = runner.invoke(
        app, ["query", "SELECT DISTINCT run_id FROM metrics", "--root", str(root)]
    )
    assert query.exit_code == 0
    assert "t-fc-theory-quick-seed0" in query.stdout and "t-fc-ok" not in query.stdout
    warning = [line for line in query.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and warning[0].startswith("warning: skipped 1 damaged run(s)")
    report = runner.invoke(app, ["report", str(ok)])
    assert report.exit_code == 2
    _one_error_line(report, f"damaged run {ok}", "metrics.parquet cannot be read", "re-run it")
    # Running it again does not trust it: the damaged directory is set aside, the run redone.
    again = runner.invoke(app, ["run", "t-fc-ok", "--out", str(root), "--no-progress"])
    assert again.exit_code == 0, again.output
    assert "is damaged" in again.stderr and "starting it again" in again.stderr
    assert Run.open(ok).metrics()["value"].tolist() == [0.97]
    assert len(list((root / ".damaged").iterdir())) == 1
    manifest = ok / "manifest.json"
    manifest.write_text(manifest.read_text()[:40])
    runs = runner.invoke(app, ["runs", "--root", str(root)])
    assert "manifest.json is not valid JSON" in runs.output


# ------------------------------------------------------------------------------ options
def test_seed_and_device_options(tmp_path: Path, experiments: None) -> None:
    seed = runner.invoke(app, ["run", "t-fc-ok", "--seed", "-1", "--out", str(tmp_path)])
    assert seed.exit_code == 2 and "'--seed'" in seed.output
    assert not list(tmp_path.iterdir())  # no run directory for a rejected seed
    theory = runner.invoke(
        app, ["run", "t-fc-theory", "--device", "cuda", "--out", str(tmp_path), "--no-progress"]
    )
    assert theory.exit_code == 0, theory.output
    assert "trains no network and runs on the CPU: device 'cuda' is not used" in theory.stderr
    manifest = json.loads((tmp_path / "t-fc-theory-quick-seed0" / "manifest.json").read_text())
    assert manifest["device"] == "cpu"
    bad = runner.invoke(app, ["run", "t-fc-ok", "--device", "tpu", "--out", str(tmp_path)])
    assert bad.exit_code == 2
    _one_error_line(bad, "--device tpu:", "device must be 'cpu', 'cuda'")
    unknown = runner.invoke(app, ["run", "no-such-id", "--out", str(tmp_path)])
    assert unknown.exit_code == 2
    _one_error_line(unknown, "unknown experiment 'no-such-id'; known experiments:")
    mirror = runner.invoke(app, ["run", "t-fc-ok", "--mirror", "neptune", "--out", str(tmp_path)])
    assert mirror.exit_code == 2
    _one_error_line(mirror, "--mirror neptune: unknown mirror")


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("tensorboard") is None,
    reason="tensorboard is not installed (pip install 'collapselab[tracking]')",
)
def test_mirror_option_reaches_the_run(tmp_path: Path, experiments: None) -> None:
    result = runner.invoke(
        app, ["run", "t-fc-ok", "--mirror", "tensorboard", "--out", str(tmp_path), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "t-fc-ok-quick-seed0" / "tensorboard").glob("events.out.tfevents.*"))


# ----------------------------------------------------------------------------- progress
def test_progress_rows_fit_80_columns() -> None:
    import io

    from rich.console import Console

    from collapselab.cli.progress import ProgressBoard

    board = ProgressBoard(Console(file=io.StringIO(), width=80, force_terminal=True))
    with board.overall("reproduce 001", 6, lambda: 52.0) as started:
        started(3)
        with board.task("a-long-experiment-identifier-beyond-the-column", 600, "steps") as done:
            done(120, 600)
            board.set_status("train loss 0.0123 · train accuracy 1 · test accuracy 0.97 " * 2)
            frame = Console(file=io.StringIO(), width=80, record=True)
            frame.print(board._display.get_renderable())  # what the live display draws
            text = frame.export_text()
    rows = [line.rstrip() for line in text.splitlines() if line.strip()]
    assert len(rows) == 3 and max(len(line) for line in rows) <= 80, rows
    assert "experiment 3/6" in rows[0] and "eta ~0:00:52" in rows[0], rows
    assert rows[1].startswith("a-long-experiment-id") and "120/600 steps" in rows[1], rows
    assert "eta" in rows[1] and rows[2].startswith("train loss 0.0123"), rows


# ----------------------------------------------- SIGTERM, the lock, resume (subprocesses)
_SLOW = textwrap.dedent(
    """
    import os, sys, time
    from collapselab.data import gaussian_mixture
    from collapselab.experiments import Experiment, register
    from collapselab.models import MLP
    from collapselab.train import LambdaCallback, TrainConfig, train

    def run_slow(run, context):
        data = gaussian_mixture(n_classes=3, dim=4, n_train_per_class=10, seed=0)
        model = MLP(4, 3, width=8, depth=2)
        def tick(state):
            print(f"epoch {state.epoch}", flush=True)
            time.sleep(float(os.environ.get("SLOW_SLEEP", "0")))
        config = TrainConfig(epochs=12, lr=0.1, batch_size=10, seed=0, checkpoint_every=1)
        callbacks = [LambdaCallback(on_epoch_end=tick), *context.callbacks]
        train(model, data, config, callbacks=callbacks, run=run)

    from tests._experiments import typed

    register(Experiment(id="t-slow", paper="t-slow", title="slow", presets=typed({"quick": {}}),
                        runtime_quick="1 s", run=run_slow))
    from collapselab.cli.main import main
    sys.argv = ["collapselab", *sys.argv[1:]]
    main()
    """
)


def _start_slow(root: Path, sleep: float) -> subprocess.Popen:
    env = {**os.environ, "SLOW_SLEEP": str(sleep), "COLUMNS": "80"}
    return subprocess.Popen(
        [sys.executable, "-c", _SLOW, "run", "t-slow", "--out", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_for_epoch(process: subprocess.Popen, epoch: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.strip() == f"epoch {epoch}":
            return
        if not line and process.poll() is not None:
            raise AssertionError(f"the run ended early: {process.stderr.read()}")
    raise AssertionError("the slow run did not reach the epoch in time")


def test_sigterm_keeps_the_checkpoint_and_the_rerun_resumes(tmp_path: Path) -> None:
    process = _start_slow(tmp_path, sleep=0.3)
    try:
        _wait_for_epoch(process, 3)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143, stderr
    assert "interrupted (SIGTERM): run t-slow-quick-seed0 is marked interrupted" in stderr
    assert "Traceback" not in stderr
    run = Run.open(tmp_path / "t-slow-quick-seed0")
    assert run.status == "interrupted" and run.checkpoints()
    stopped_at = run.latest_checkpoint().step
    rerun = subprocess.run(
        [sys.executable, "-c", _SLOW, "run", "t-slow", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert rerun.returncode == 0, rerun.stderr
    epoch = stopped_at // 3  # 30 samples in batches of 10: 3 steps per epoch
    assert f"resuming t-slow from epoch {epoch} of 12" in rerun.stdout
    manifest = Run.open(tmp_path / "t-slow-quick-seed0").manifest
    assert manifest["status"] == "completed" and len(manifest["timings"]["resumed"]) == 1
    assert manifest["resumed_from"] == [{"epoch": epoch, "step": stopped_at}]
    rows = Run.open(tmp_path / "t-slow-quick-seed0").metrics()
    loss = rows[(rows.metric == "loss") & (rows.split == "train")]
    assert loss["epoch"].tolist() == list(range(13))  # no row twice, none missing


def test_a_second_writer_gets_one_clear_line(tmp_path: Path) -> None:
    # The first writer must outlive the second's start-up (Python and torch imports, many
    # seconds on a loaded machine): 11 epochs of 10 s remain, and it is killed at the end.
    first = _start_slow(tmp_path, sleep=10.0)
    try:
        _wait_for_epoch(first, 1)
        second = subprocess.run(
            [sys.executable, "-c", _SLOW, "run", "t-slow", "--out", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 2, second.stderr
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, second.stderr
    assert f"is being written by another process (pid {first.pid} since" in lines[0]


def test_progress_in_a_log_file_is_a_plain_line_per_row_every_interval(monkeypatch):
    """Not a terminal: nothing animated, each running row written as one line every
    ``log_every`` seconds (the clock is faked: 0, 10, 31, 45, 62 s)."""
    import io

    from rich.console import Console

    from collapselab.cli import progress as progress_module

    clock = iter([0.0, 10.0, 31.0, 31.0, 45.0, 62.0, 62.0, 70.0])
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    board = progress_module.ProgressBoard(Console(file=out, width=80), log_every=30.0)
    with board, board.task("L-BFGS (at most)", 4000, "iterations") as done:
        done(100, 4000)  # 10 s: no line yet
        done(900, 4000)  # 31 s: a line
        done(1500, 4000)  # 45 s: none
        done(2500, 4000)  # 62 s: a line
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    assert [line.split(",")[0] for line in lines] == [
        "L-BFGS (at most): 900/4000 iterations",
        "L-BFGS (at most): 2500/4000 iterations",
    ], lines
    assert all("elapsed" in line and "eta" in line for line in lines)


def test_progress_on_a_terminal_or_disabled_writes_no_lines():
    import io

    from rich.console import Console

    from collapselab.cli.progress import ProgressBoard

    for console, enabled in (
        (Console(file=io.StringIO(), width=80, force_terminal=True), True),
        (Console(file=io.StringIO(), width=80), False),
    ):
        board = ProgressBoard(console, enabled=enabled, log_every=0.0)
        with board.task("solver", 10, "steps") as done:
            done(5, 10)
        if not enabled:
            assert console.file.getvalue() == ""
        else:
            assert "solver: 5/10" not in console.file.getvalue()


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The command line in a fresh process, as a user types it."""
    return subprocess.run(
        [sys.executable, "-c", "from collapselab.cli.main import main; main()", *args],
        capture_output=True, text=True, timeout=120, cwd=cwd,
        env={**os.environ, "COLUMNS": "80"},
    )  # fmt: skip


def _single_error(process: subprocess.CompletedProcess, *fragments: str) -> None:
    lines = [line for line in process.stderr.splitlines() if line.strip()]
    assert process.returncode == 2 and "Traceback" not in process.stderr, process.stderr
    assert len(lines) <= 2 and lines[0].startswith("error: "), lines  # soft-wrapped at most
    text = " ".join(lines)
    for fragment in fragments:
        assert fragment in text, (fragment, text)


def test_a_root_that_cannot_hold_runs_is_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for command in (["run", "pfc-toy"], ["reproduce", "001"], ["sweep", "pfc-toy", "--seeds", "0"]):
        _single_error(_cli(*command, "--root", str(a_file), "--no-progress"),
                      "is a file, not a folder")  # fmt: skip
    _single_error(_cli("run", "pfc-toy", "--root", "/proc/collapselab-x", "--no-progress"),
                  "cannot create the folder for the runs, /proc/collapselab-x")  # fmt: skip
    too_long = tmp_path / ("x" * 300)
    _single_error(_cli("run", "pfc-toy", "--root", str(too_long), "--no-progress"),
                  "cannot create the folder for the runs", "File name too long")  # fmt: skip


def test_an_unknown_device_is_refused_by_an_experiment_that_trains_nothing(tmp_path) -> None:
    _single_error(_cli("run", "pfc-toy", "--device", "tpu", "--root", str(tmp_path)),
                  "device must be 'cpu', 'cuda', 'cuda:<i>' or 'auto', got 'tpu'")  # fmt: skip
    assert not list(tmp_path.iterdir())


def test_a_run_id_longer_than_a_folder_name_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="run_id is 300 characters long; at most 200"):
        Run.create(tmp_path, "exp", run_id="r" * 300)


_SLOW_FALLBACK = textwrap.dedent(
    """
    import dataclasses, sys, time
    from collapselab.data import DataSpec, locations
    from collapselab.experiments import Experiment, Preset, register, tiers

    locations.SYSTEM_DATASETS = {}  # Fashion-MNIST is missing here: quick falls back

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Slow(Preset):
        data: DataSpec = DataSpec("fashion_mnist", fallback=DataSpec("digits"))

    def run_slow(run, context):
        for step in range(600):
            run.log(step, "tick", float(step))
            print(f"step {step}", flush=True)
            time.sleep(0.1)

    register(Experiment(id="t-slowfb", paper="t-slowfb", title="slow", runtime_quick="1 s",
                        presets=tiers(tiny=Slow(), quick=Slow()), run=run_slow))
    from collapselab.cli.main import main
    sys.argv = ["collapselab", *sys.argv[1:]]
    main()
    """
)


@pytest.mark.parametrize("command", ["run", "reproduce"])
def test_sigterm_names_the_signal_and_the_run_that_ran(tmp_path: Path, command: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _SLOW_FALLBACK, command, "t-slowfb", "--out", str(tmp_path),
         "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if k != "COLLAPSELAB_DATA_DIR"},
    )  # fmt: skip
    try:
        while process.stdout.readline().strip() != "step 2":
            assert process.poll() is None, process.stderr.read()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143 and "Traceback" not in stderr, stderr
    manifest = Run.open(tmp_path / "t-slowfb-quick-bundled-seed0").manifest
    assert manifest["status"] == "interrupted"
    assert manifest["error"] == "interrupted by SIGTERM"
    if command == "run":
        assert "interrupted (SIGTERM): run t-slowfb-quick-bundled-seed0 is marked" in stderr
    else:
        record = json.loads((tmp_path / "index.json").read_text())["reproduce"]
        assert record["interrupted"] == "interrupted by SIGTERM"
        html = (tmp_path / "index.html").read_text()
        assert "<b>interrupted by SIGTERM</b> at" in html and "; finished" not in html


def test_the_eta_scales_with_the_machine_and_never_sits_still_past_an_estimate() -> None:
    from collapselab.cli.progress import RemainingColumn, ReproduceClock

    clock = ReproduceClock([10.0, 20.0, 30.0])
    clock.start(0, now=100.0)
    assert clock.remaining(104.0) == (6.0 + 50.0, False)
    clock.finish(0, seconds=20.0, ran=True)  # the machine runs at half the measured speed
    assert clock.factor == 2.0
    clock.start(1, now=120.0)
    assert clock.remaining(130.0) == (2 * 20 - 10 + 2 * 30, False)
    # fd-directions listed at ~16 s ran 253 s: past 2 x 20 s the end is unknown
    assert clock.remaining(165.0) == (60.0, True)
    column = RemainingColumn()

    task = types.SimpleNamespace(fields={"remaining": lambda: clock.remaining(165.0)},
                                 finished=False)  # fmt: skip
    assert column.render(task).plain == "eta >0:01:00"
    clock.finish(1, seconds=60.0, ran=True)
    clock.finish(2, seconds=0.0, ran=False)  # skipped: takes no time, changes no factor
    assert clock.factor == 80 / 30 and clock.remaining(300.0) == (0.0, False)
    assert ReproduceClock([1.0, None]).remaining(0.0) is None


def test_a_log_file_gets_a_line_on_the_clock_during_a_long_step() -> None:
    """No update for a whole interval (one long epoch): the row is still written."""
    import io

    from rich.console import Console

    from collapselab.cli.progress import ProgressBoard

    out = io.StringIO()
    board = ProgressBoard(Console(file=out, width=80), log_every=0.4)
    with board, board.task("long epoch", 3, "epochs") as done:
        done(1, 3)
        time.sleep(1.5)  # no update in between: the clock writes the row
    lines = [line for line in out.getvalue().splitlines() if line.startswith("long epoch:")]
    assert len(lines) >= 2 and all(line.startswith("long epoch: 1/3 epochs") for line in lines)


def test_the_command_says_what_starts_before_loading_torch() -> None:
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", "from collapselab.cli.main import main; main()", "demo",
         "--no-progress", "--out", "/proc/not-writable"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "FORCE_COLOR": "1"},  # Rich takes the pipe for a terminal
    )  # fmt: skip
    first = process.stdout.readline()
    waited = time.perf_counter() - started
    process.communicate(timeout=120)
    assert re.sub(r"\x1b\[[0-9;]*m", "", first).strip() == "run demo: loading collapselab\u2026"
    imported = subprocess.run(
        [sys.executable, "-c", "import sys, collapselab.cli.main; print('torch' in sys.modules)"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert imported.stdout.strip() == "False", "the CLI must not import torch to start"
    assert waited < 60


def test_a_second_run_of_a_finished_experiment_says_it_ran_nothing(
    tmp_path: Path, experiments: None
) -> None:
    first = runner.invoke(app, ["run", "t-fc-ok", "--out", str(tmp_path), "--no-progress"])
    assert first.exit_code == 0 and "had already completed" not in first.output
    second = runner.invoke(app, ["run", "t-fc-ok", "--out", str(tmp_path), "--no-progress"])
    assert second.exit_code == 0
    text = " ".join(second.output.split())
    assert "run t-fc-ok-quick-seed0 had already completed: nothing was run" in text


@pytest.mark.parametrize(
    "command", ["run", "reproduce", "sweep", "demo", "list", "runs", "query", "report", "verify"]
)
def test_no_help_text_is_cut_at_80_columns(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0 and "\u2026" not in result.output, result.output
