"""Experiments get sweeps: RunContext.executor/workers, config overrides, `collapselab sweep`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from collapselab.cli.main import app
from collapselab.experiments import Preset, RunContext, run_experiment, run_id_for
from collapselab.experiments.overrides import apply_overrides, overrides_tag
from collapselab.experiments.sweeps import default_workers, run_members, run_sweep
from collapselab.experiments.sweeps.grid import grid, parse_seeds, parse_set
from tests import _sweep_tasks as tasks
from tests._experiments import experiment, registered

runner = CliRunner()


def test_run_context_defaults_to_a_local_pool_over_every_core() -> None:
    context = RunContext(preset="quick", config={})
    assert context.executor == "local"
    assert context.workers == default_workers() >= 1


def test_run_experiment_hands_executor_and_workers_to_the_run(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def run(run, context: RunContext) -> None:
        seen.update(executor=context.executor, workers=context.workers)
        configs = [{"index": i, "log": str(tmp_path / "log")} for i in range(2)]
        result = run_sweep(
            tasks.count_calls,
            configs,
            executor=context.executor,
            workers=context.workers,
            store=run.path / "members",
            progress=context.progress,
        )
        labelled = run_members(tasks.count_calls, configs, run, context, label="again")
        assert labelled == result.results
        run.write_json("squares", [r["square"] for r in result.results])

    with registered(experiment("sweeping", run, presets={"quick": {"lr": 0.1}})):
        done = run_experiment("sweeping", root=tmp_path, executor="serial", workers=3)
        assert seen == {"executor": "serial", "workers": 3}
        assert len(list((done.path / "members").glob("member-*.json"))) == 2
        assert len(list((done.path / "members" / "again").glob("member-*.json"))) == 2
        with pytest.raises(ValueError, match="unknown executor 'nope'"):
            run_experiment("sweeping", root=tmp_path, seed=1, executor="nope")
        assert not (tmp_path / run_id_for("sweeping", "quick", 1)).exists()
        # overrides: their own run, config changed, kinds checked
        changed = run_experiment("sweeping", root=tmp_path, executor="serial", overrides={"lr": 1})
        assert changed.id == "sweeping-quick-seed0-lr1" and changed.config == {"lr": 1.0}
        with pytest.raises(KeyError, match="no config key 'width'; its keys: lr"):
            run_experiment("sweeping", root=tmp_path, overrides={"width": 3})


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Overridable(Preset):
    lr: float = 0.1
    width: int = 8
    name: str = "a"
    flag: bool = True
    sizes: tuple[int, ...] = (1, 2)
    opt: str | None = None


def test_apply_overrides_checks_keys_and_kinds() -> None:
    config = _Overridable()
    assert apply_overrides(config, {"lr": 1, "sizes": [3], "opt": "x"}).lr == 1.0
    assert apply_overrides(config, None) == config
    with pytest.raises(ValueError, match=r"'width' takes a int like the preset's 8, got 0\.5"):
        apply_overrides(config, {"width": 0.5})
    with pytest.raises(ValueError, match="'flag' takes a bool"):
        apply_overrides(config, {"flag": 1})
    with pytest.raises(ValueError, match="'width' takes a int"):
        apply_overrides(config, {"width": True})


def test_overrides_tag_is_readable_or_hashed() -> None:
    assert overrides_tag(None) == "" and overrides_tag({}) == ""
    assert overrides_tag({"width": 64, "lr": 0.1}) == "-lr0.1-width64"
    assert overrides_tag({"name": "relu"}) == "-namerelu"
    hashed = overrides_tag({"lr": 1e-5})  # '-' is not kept: hashed, and distinct
    assert hashed.startswith("-set") and len(hashed) == 12
    assert hashed != overrides_tag({"lr": 1e-4})


def test_parse_seeds_sets_and_grid() -> None:
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("0,2,5") == [0, 2, 5]
    assert parse_seeds("0-2, 7") == [0, 1, 2, 7]
    for bad in ("3-1", "a", "1-2-3", "-1", ""):
        with pytest.raises(ValueError, match="--seeds"):
            parse_seeds(bad)
    with pytest.raises(ValueError, match=r"repeats seeds \[1\]"):
        parse_seeds("0-2,1")
    assert parse_set("lr=0.1,1e-2") == ("lr", [0.1, 0.01])
    assert parse_set("act=relu,tanh") == ("act", ["relu", "tanh"])
    assert parse_set("sizes=[1,2],[3]") == ("sizes", [[1, 2], [3]])
    assert parse_set("flag=true") == ("flag", [True])
    with pytest.raises(ValueError, match="expected key=value"):
        parse_set("lr")
    assert grid([]) == [{}]
    assert grid([("a", [1, 2]), ("b", ["x", "y"])]) == [
        {"a": 1, "b": "x"},
        {"a": 1, "b": "y"},
        {"a": 2, "b": "x"},
        {"a": 2, "b": "y"},
    ]
    with pytest.raises(ValueError, match="more than once"):
        grid([("a", [1]), ("a", [2])])


def test_sweep_command_runs_a_resumable_grid_of_runs(tmp_path: Path) -> None:
    # pfc-toy is a built-in experiment (about 1 s): pool workers find it in their registry.
    args = ["sweep", "pfc-toy", "--seeds", "0-1", "--set", "n_per_class=5,6"]
    args += ["--workers", "2", "--root", str(tmp_path), "--no-progress"]
    result = runner.invoke(app, args, env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    ids = [f"pfc-toy-quick-seed{s}-n_per_class{n}" for n in (5, 6) for s in (0, 1)]
    for run_id in ids:
        assert run_id in result.output
        manifest = json.loads((tmp_path / run_id / "manifest.json").read_text())
        assert manifest["status"] == "completed"
        assert manifest["config"]["n_per_class"] == int(run_id[-1])
        assert manifest["seed"] == int(run_id.split("seed")[1][0])
    assert "4 run(s): 4 completed, 0 not" in result.output
    assert "2/2 hold" in result.output
    finished = {i: (tmp_path / i / "manifest.json").read_text() for i in ids}

    again = runner.invoke(app, args, env={"COLUMNS": "100"})
    assert again.exit_code == 0 and "4 completed" in again.output
    assert {i: (tmp_path / i / "manifest.json").read_text() for i in ids} == finished


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "3-1"], "--seeds '3-1': expected seeds >= 0"),
        (["--set", "width=1"], "has no config key 'width'; its keys: end_scale"),
        (["--set", "n_per_class=abc"], "'n_per_class' takes a int like the preset's 4"),
        (["--set", "noise"], "--set 'noise': expected key=value"),
        (["--executor", "dask"], "--executor dask: unknown executor 'dask'"),
        (["--workers", "0"], "--workers 0: expected at least 1"),
        (["--preset", "huge"], "no preset 'huge'"),
    ],
)
def test_sweep_command_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["sweep", "pfc-toy", *args, "--root", str(tmp_path)])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", [["run", "pfc-toy"], ["reproduce", "001"]])
def test_run_and_reproduce_check_executor_options_first(tmp_path: Path, command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--executor", "dask", "--root", str(tmp_path)])
    assert result.exit_code == 2 and "--executor dask: unknown executor" in result.output
    result = runner.invoke(app, [*command, "--workers", "0", "--root", str(tmp_path)])
    assert result.exit_code == 2 and "--workers 0: expected at least 1" in result.output
    assert not any(tmp_path.iterdir())


def test_executor_ray_without_ray_is_one_line(tmp_path: Path, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    result = runner.invoke(app, ["sweep", "pfc-toy", "--executor", "ray", "--root", str(tmp_path)])
    assert result.exit_code == 2
    assert "--executor ray: the ray executor needs Ray" in result.output
    assert "pip install 'collapselab[ray]'" in result.output
    assert len(result.output.strip().splitlines()) == 1
