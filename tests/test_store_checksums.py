"""Silent corruption is found: a completed run's recorded files carry checksums, an unfinished
run resumes from its newest readable checkpoint, and ``collapselab verify`` reports both."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from collapselab.cli.main import app
from collapselab.data import gaussian_mixture
from collapselab.models import MLP
from collapselab.store import CheckpointError, DamagedRunError, Run, check_run, run_problem
from collapselab.train import TrainConfig, train

runner = CliRunner()


def _completed(root: Path, run_id: str = "r") -> Run:
    run = Run.create(root, "exp", run_id=run_id)
    for step in range(2000):
        run.log(step, "loss", 1.0 / (step + 1), epoch=step)
    run.flush()
    run.save_array("spectrum", values=torch.arange(50.0).numpy())
    run.set_status("completed")
    return run


def _flip(path: Path, offset: int, count: int) -> None:
    data = bytearray(path.read_bytes())
    for i in range(offset, offset + count):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_completion_records_a_checksum_of_every_recorded_file(tmp_path: Path) -> None:
    run = _completed(tmp_path)
    recorded = run.manifest["checksums"]
    assert sorted(recorded) == ["arrays/spectrum.npz", "metrics.parquet"]
    assert run_problem(run.path, thorough=True) is None


def test_bytes_flipped_inside_the_table_with_its_footer_intact_are_found(tmp_path: Path) -> None:
    run = _completed(tmp_path)
    table = run.path / "metrics.parquet"
    _flip(table, 200, 400)  # inside the data pages; the footer at the end is untouched
    assert run_problem(run.path) is None  # the quick check reads the footer only
    problem = run_problem(run.path, thorough=True)
    assert problem is not None and "metrics.parquet" in problem
    with pytest.raises(DamagedRunError, match=r"metrics\.parquet"):
        check_run(run.path, thorough=True)
    (run.path / "arrays" / "spectrum.npz").unlink()
    _flip(table, 200, 400)  # back as it was
    assert run_problem(run.path, thorough=True) == (
        "arrays/spectrum.npz is missing (recorded when the run completed)"
    )


def test_verify_command_lists_every_run_and_fails_on_damage(tmp_path: Path) -> None:
    _completed(tmp_path, "good")
    bad = _completed(tmp_path, "bad")
    ok = runner.invoke(app, ["verify", str(tmp_path / "good")])
    assert ok.exit_code == 0 and "1 run(s) checked, 0 damaged" in ok.output
    _flip(bad.path / "arrays" / "spectrum.npz", 100, 50)
    result = runner.invoke(app, ["verify", str(tmp_path)])
    assert result.exit_code == 1
    assert "arrays/spectrum.npz changed after the run completed" in result.output
    assert "2 run(s) checked, 1 damaged" in result.output


def _train(run: Run, epochs: int) -> None:
    torch.manual_seed(0)
    data = gaussian_mixture(n_classes=3, dim=4, n_train_per_class=10, seed=0)
    config = TrainConfig(epochs=epochs, lr=0.1, batch_size=10, seed=0, checkpoint_every=1,
                         keep_checkpoints=3)  # fmt: skip
    train(MLP(4, 3, width=8, depth=2), data, config, run=run, finish_run=False)


def test_a_truncated_newest_checkpoint_falls_back_to_the_newest_readable(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp", run_id="ckpt")
    _train(run, 4)
    steps = [c.step for c in run.checkpoints()]
    newest = run.latest_checkpoint().path
    newest.write_bytes(newest.read_bytes()[:100])  # truncated
    assert run_problem(run.path, thorough=True) is None  # an older checkpoint still loads
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checkpoint, state = run.resume_checkpoint()
    assert checkpoint.step == steps[-2] and isinstance(state, dict)
    text = " ".join(str(w.message) for w in caught)
    assert f"step-{steps[-1]:010d}.pt cannot be read" in text
    assert f"resuming from the checkpoint of step {steps[-2]}" in text
    assert (run.path / "checkpoints" / "damaged" / newest.name).is_file()


def test_no_readable_checkpoint_is_a_damaged_run(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp", run_id="none")
    _train(run, 2)
    run.set_status("interrupted")
    for checkpoint in run.checkpoints():
        checkpoint.path.write_bytes(b"not a checkpoint")
    problem = run_problem(run.path, thorough=True)
    assert problem is not None and "none of its 3 checkpoint(s) can be read" in problem
    with pytest.raises(CheckpointError, match="none of its 3 checkpoint"):
        run.resume_checkpoint()


def test_verify_and_report_take_the_root_as_every_other_command_does(tmp_path: Path) -> None:
    """`collapselab runs --root X` then `collapselab verify --root X` (a subprocess, as a user
    types it): the folder goes by --root too, not only as PATH; both at once is one line."""
    bad = _completed(tmp_path, "bad")
    _flip(bad.path / "arrays" / "spectrum.npz", 100, 50)
    cli = [sys.executable, "-c", "from collapselab.cli.main import main; main()"]

    def collapselab(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*cli, *args], capture_output=True, text=True, timeout=300)

    verified = collapselab("verify", "--root", str(tmp_path))
    assert verified.returncode == 1, verified.stderr
    assert "arrays/spectrum.npz changed after the run completed" in verified.stdout
    assert "1 run(s) checked, 1 damaged" in verified.stdout
    reported = collapselab("report", "--root", str(tmp_path), "--no-redraw", "--no-claims")
    assert reported.returncode == 1, reported.stderr
    assert "changed after the run completed" in " ".join(reported.stderr.split())
    assert (tmp_path / "index.html").is_file()
    both = collapselab("verify", str(bad.path), "--root", str(tmp_path))
    assert both.returncode == 2 and "Traceback" not in both.stderr
    assert both.stderr.strip() == (
        f"error: give the folder once: PATH ({bad.path}) or --root ({tmp_path}), not both"
    )
