"""reproduce: runs a paper's experiments, continues past a failure, skips finished runs on a
second call, and writes index.html / index.json with the right statuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from collapselab.experiments import (
    Experiment,
    Final,
    RunContext,
    register,
    reproduce,
    unregister,
    value_above,
)
from collapselab.experiments import registry as registry_module
from collapselab.experiments.reproduce import select_experiments
from collapselab.store import Run
from tests._experiments import typed

CALLS: dict[str, int] = {}


def _good(run: Run, context: RunContext) -> None:
    CALLS["t-repro-good"] = CALLS.get("t-repro-good", 0) + 1
    for epoch in range(3):
        run.log(step=epoch, metric="accuracy", value=0.9 + 0.03 * epoch, epoch=epoch, split="test")


def _bad(run: Run, context: RunContext) -> None:
    CALLS["t-repro-bad"] = CALLS.get("t-repro-bad", 0) + 1
    raise ValueError("the data <file> is missing")


@pytest.fixture
def two_experiments() -> Iterator[None]:
    CALLS.clear()
    claim = value_above("acc", "accurate", "Tab. 1", Final("accuracy", "test"), 0.95)
    for exp_id, fn in (("t-repro-good", _good), ("t-repro-bad", _bad)):
        register(
            Experiment(
                id=exp_id,
                paper="t-paper-x",  # a paper no real package uses
                title=f"{exp_id} title",
                presets=typed({"quick": {"n": 1}}),
                runtime_quick="1 s",
                run=fn,
                figure="Fig. 2",
                claims=[claim],
            )
        )
    yield
    unregister("t-repro-good")
    unregister("t-repro-bad")


def test_reproduce_continues_past_failure_and_writes_index(
    tmp_path: Path, two_experiments: None
) -> None:
    started, done = [], []
    result = reproduce(
        "t-paper-x",
        root=tmp_path,
        on_start=lambda e: started.append(e.id),
        on_done=lambda o: done.append(o.outcome),
    )
    assert started == ["t-repro-bad", "t-repro-good"]  # sorted by id within the paper
    assert done == ["failed", "completed"]
    assert not result.ok
    assert [o.experiment for o in result.failed] == ["t-repro-bad"]
    assert "the data <file> is missing" in result.failed[0].error
    good = next(o for o in result.outcomes if o.experiment == "t-repro-good")
    assert good.claims == {"holds": 1, "does not hold": 0, "not evaluable": 0}

    index = json.loads((tmp_path / "index.json").read_text())
    assert index["n_runs"] == 2
    assert index["status_counts"] == {"completed": 1, "failed": 1}
    assert index["claim_counts"] == {"holds": 1, "does not hold": 0, "not evaluable": 1}
    runs = {r["run_id"]: r for r in index["runs"]}
    assert runs["t-repro-good-quick-seed0"]["status"] == "completed"
    assert runs["t-repro-good-quick-seed0"]["claims"]["verdicts"] == {"acc": "holds"}
    assert runs["t-repro-bad-quick-seed0"]["status"] == "failed"
    assert runs["t-repro-bad-quick-seed0"]["report"] == "t-repro-bad-quick-seed0/report.html"
    assert index["reproduce"]["paper"] == "t-paper-x"
    outcomes = {e["experiment"]: e["outcome"] for e in index["reproduce"]["experiments"]}
    assert outcomes == {"t-repro-bad": "failed", "t-repro-good": "completed"}
    assert index["total_run_s"] >= 0
    html = (tmp_path / "index.html").read_text()
    assert 'href="t-repro-good-quick-seed0/report.html"' in html
    assert "the data &lt;file&gt; is missing" in html


def test_reproduce_again_skips_completed_and_retries_failed(
    tmp_path: Path, two_experiments: None
) -> None:
    reproduce("t-paper-x", root=tmp_path)
    second = reproduce("T_PAPER_X", root=tmp_path)  # case and punctuation ignored
    assert CALLS == {"t-repro-good": 1, "t-repro-bad": 2}
    outcomes = {o.experiment: o.outcome for o in second.outcomes}
    assert outcomes == {"t-repro-good": "skipped", "t-repro-bad": "failed"}


def test_reproduce_missing_preset_is_a_failure_not_a_crash(
    tmp_path: Path, two_experiments: None
) -> None:
    result = reproduce("t-paper-x", preset="paper", root=tmp_path)
    assert [o.outcome for o in result.outcomes] == ["failed", "failed"]
    assert "no preset 'paper'" in result.outcomes[0].error
    assert json.loads((tmp_path / "index.json").read_text())["n_runs"] == 0


def test_select_experiments_errors_name_the_papers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "_REGISTRY", {})  # as if no paper package existed
    monkeypatch.setattr(registry_module, "_LOADED", True)
    with pytest.raises(ValueError, match=r"unknown paper 'nope'.*003 MSE-NC"):
        select_experiments("nope")
    with pytest.raises(ValueError, match="no experiments are registered for paper 002 PCB"):
        select_experiments("002")
    with pytest.raises(ValueError, match="no paper experiments are registered"):
        select_experiments("all")
    with pytest.raises(ValueError, match="paper must be"):
        select_experiments(" ")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("~10 s", 10.0), ("~1.5 min", 90.0), ("<1 s", 1.0), ("~2 h", 7200.0), ("fast", None)],
)
def test_runtime_seconds_reads_the_registered_runtimes(text: str, seconds: float | None) -> None:
    from collapselab.experiments.reproduce import runtime_seconds

    assert runtime_seconds(text) == seconds


def test_estimates_come_from_measurements(tmp_path: Path, two_experiments: None) -> None:
    from collapselab.experiments import estimated_seconds, get_experiment

    good = get_experiment("t-repro-good")
    assert estimated_seconds(good, "quick", tmp_path, seed=0) == 1.0  # registered runtime
    assert estimated_seconds(good, "paper", tmp_path, seed=0) is None  # nothing known
    reproduce("t-paper-x", root=tmp_path, seed=0)
    assert estimated_seconds(good, "quick", tmp_path, seed=0) == 0.0  # done: skipped
    measured = Run.open(tmp_path / "t-repro-good-quick-seed0").manifest["durations"]["total_s"]
    assert estimated_seconds(good, "quick", tmp_path, seed=1) == measured  # another seed's
