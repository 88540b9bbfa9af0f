"""The command line through typer's CliRunner. The real demo (quick preset) runs once per
module; its claims are cross-checked against the metric rows queried with DuckDB."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collapselab.cli.main import app
from collapselab.experiments import (
    Experiment,
    Final,
    RunContext,
    register,
    unregister,
    value_above,
)
from collapselab.store import Run, query
from tests._experiments import typed

runner = CliRunner()
COMMANDS = ("demo", "list", "run", "runs", "query", "reproduce", "report")


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-runs")
    result = runner.invoke(app, ["run", "demo", "--out", str(root), "--no-progress"])
    assert result.exit_code == 0, result.output
    return root


def _ok(run: Run, context: RunContext) -> None:
    run.log(step=1, metric="accuracy", value=0.97, epoch=1, split="test")


def _fail(run: Run, context: RunContext) -> None:
    raise RuntimeError("cli failure")


@pytest.fixture
def cli_experiments() -> Iterator[None]:
    claim = value_above("acc", "accurate", "Tab. 1", Final("accuracy", "test"), 0.9)
    specs = (("t-cli-ok", "t-cli-good-paper", _ok), ("t-cli-fail", "t-cli-mixed-paper", _fail))
    specs += (("t-cli-ok2", "t-cli-mixed-paper", _ok),)
    for exp_id, paper, fn in specs:
        register(
            Experiment(
                id=exp_id,
                paper=paper,
                title=exp_id,
                presets=typed({"quick": {}}),
                runtime_quick="0 s",
                run=fn,
                claims=[claim],
            )
        )
    yield
    for exp_id, _, _ in specs:
        unregister(exp_id)


def test_help_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in COMMANDS:
        assert command in result.output


@pytest.mark.parametrize("command", ["run", "reproduce", "sweep"])
def test_help_names_the_extras_to_install(command: str) -> None:
    """Rich reads ``[tracking]`` as a markup tag and drops it unless escaped: the help must
    print the whole install command."""
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "'collapselab[ray]'" in result.output
    if command != "sweep":
        assert "'collapselab[tracking]'" in result.output


def test_list_shows_the_demo_at_80_columns() -> None:
    from collapselab.experiments import all_experiments
    from collapselab.experiments.runtimes import measured, quick_campaigns

    result = runner.invoke(app, ["list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    for experiment in all_experiments():  # id and runtime on one line, unbroken
        assert any(
            line.split()[:2] == [experiment.id, experiment.runtime_quick.split()[0]]
            for line in lines
            if line.strip()
        ), experiment.id
    assert "[presets: tiny, quick]" in result.output  # the demo's two tiers
    text = " ".join(result.output.split())
    assert "Runtimes: measured wall times of the quick preset (beside the id)" in text
    # the times and the machine are the measured file's (collapselab.experiments.runtimes)
    conv = measured("pfc-training-conv", "standard")
    assert f"standard {conv.text()}" in text and "2 cores, load" in conv.text()
    for campaign in quick_campaigns():
        assert campaign.describe() in text


def test_list_metrics_shows_every_key_of_the_catalogue() -> None:
    from collapselab.families import catalogue

    result = runner.invoke(app, ["list", "--metrics"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    for family, key in catalogue():
        assert key.name in result.output and family in result.output
    assert "penultimate, train only · dense" in result.output  # what mse_loss needs


def test_demo_run_claims_agree_with_the_measured_rows(demo_root: Path) -> None:
    run = Run.open(demo_root / "demo-quick-seed0")
    assert run.status == "completed"
    claims = {c["name"]: c for c in run.read_json("claims")["claims"]}
    final_test = query(
        demo_root,
        "SELECT value FROM metrics WHERE metric = 'accuracy' AND split = 'test' AND layer = '' "
        "ORDER BY step DESC LIMIT 1",
    )["value"].iloc[0]
    first_zero = query(
        demo_root,
        "SELECT min(epoch) AS e FROM metrics WHERE metric = 'accuracy' AND split = 'train' "
        "AND layer = '' AND value = 1.0",
    )["e"].iloc[0]
    accuracy = claims["test-accuracy"]
    assert accuracy["values"]["value"] == pytest.approx(final_test, abs=1e-15)
    assert accuracy["verdict"] == ("holds" if final_test >= 0.9 else "does not hold")
    zero = claims["zero-training-error"]
    assert zero["values"]["zero_error_epoch"] == first_zero
    assert zero["values"]["epochs"] == 30
    assert zero["verdict"] == "holds"
    assert final_test >= 0.9  # the demo's quick preset does generalise
    html = (run.path / "report.html").read_text()
    assert "data:image/png;base64," in html


def test_rerunning_the_demo_skips_training(demo_root: Path) -> None:
    before = Run.open(demo_root / "demo-quick-seed0").manifest
    result = runner.invoke(app, ["run", "demo", "--out", str(demo_root), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "completed" in result.output
    after = Run.open(demo_root / "demo-quick-seed0").manifest
    assert after["durations"] == before["durations"]
    assert after["timings"] == before["timings"]


def test_runs_and_query(demo_root: Path) -> None:
    result = runner.invoke(app, ["runs", "--root", str(demo_root)], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert max(len(line.rstrip()) for line in result.output.splitlines()) <= 80
    assert "demo-quick-seed0" in result.output and "completed" in result.output
    sql = (
        "SELECT count(*) AS n FROM metrics WHERE metric = 'accuracy' AND layer = '' "
        "AND split = 'test'"
    )
    result = runner.invoke(app, ["query", sql, "--root", str(demo_root), "--format", "json"])
    assert result.exit_code == 0
    # 31 evaluations of the test split (epoch 0 and 30 epochs)
    assert json.loads(result.output) == [{"n": 31}]


def test_report_rebuilds_run_and_root(demo_root: Path) -> None:
    run_dir = demo_root / "demo-quick-seed0"
    (run_dir / "report.html").unlink()
    result = runner.invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert (run_dir / "report.html").is_file()
    result = runner.invoke(app, ["report", str(demo_root), "--no-redraw"])
    assert result.exit_code == 0, result.output
    index = json.loads((demo_root / "index.json").read_text())
    assert [r["run_id"] for r in index["runs"]] == ["demo-quick-seed0"]
    assert index["claim_counts"]["holds"] == 4  # the demo's four claims hold
    assert (demo_root / "index.html").is_file()
    missing = runner.invoke(app, ["report", str(demo_root / "nowhere")])
    assert missing.exit_code == 2


def test_reproduce_exit_codes(tmp_path: Path, cli_experiments: None) -> None:
    good = runner.invoke(
        app, ["reproduce", "t-cli-good-paper", "--out", str(tmp_path / "a"), "--no-progress"]
    )
    assert good.exit_code == 0, good.output
    assert (tmp_path / "a" / "index.html").is_file()
    mixed = runner.invoke(
        app, ["reproduce", "t-cli-mixed-paper", "--out", str(tmp_path / "b"), "--no-progress"]
    )
    assert mixed.exit_code == 1
    assert "cli failure" in mixed.output
    index = json.loads((tmp_path / "b" / "index.json").read_text())
    assert index["status_counts"] == {"completed": 1, "failed": 1}
    unknown = runner.invoke(app, ["reproduce", "no-such-paper", "--out", str(tmp_path / "c")])
    assert unknown.exit_code == 2
    assert "unknown paper" in unknown.output


def test_run_errors(tmp_path: Path, cli_experiments: None) -> None:
    unknown = runner.invoke(app, ["run", "no-such-id", "--out", str(tmp_path), "--no-progress"])
    assert unknown.exit_code == 2
    assert "unknown experiment" in unknown.output
    failed = runner.invoke(app, ["run", "t-cli-fail", "--out", str(tmp_path), "--no-progress"])
    assert failed.exit_code == 1
    assert "cli failure" in failed.output
    assert (tmp_path / "t-cli-fail-quick-seed0" / "report.html").is_file()
