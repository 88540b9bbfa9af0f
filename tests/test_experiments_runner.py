"""The runner: claims.json and report.html after every run, skip when completed, resume when
failed, rebuild without training; the registry and its built-in package loading."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from collapselab.experiments import (
    Claim,
    ClaimResult,
    Experiment,
    Final,
    RunResults,
    Series,
    all_experiments,
    decreases_by,
    experiments_for_paper,
    find_paper,
    get_experiment,
    refresh_run,
    register,
    run_experiment,
    unregister,
    value_above,
)
from collapselab.experiments import registry as registry_module
from collapselab.report.plots import plot_metric
from collapselab.store import Run
from tests._experiments import typed

EPOCHS = 6


def _spectrum_claim(results: RunResults) -> ClaimResult:
    values = results.arrays["spectrum"]["values"]
    ratio = float(values[0] / values[1])
    verdict = "holds" if ratio >= 2.0 else "does not hold"
    return ClaimResult(verdict, {"s1/s2": ratio}, 2.0, f"s1/s2 = {ratio:.4g}")


def _broken_claim(results: RunResults) -> ClaimResult:
    raise KeyError("no such thing")


def _make_experiment(exp_id: str, calls: dict[str, int], fail_first: int = 0) -> Experiment:
    def run(run: Run, context) -> None:
        calls["run"] += 1
        if calls["run"] <= fail_first:
            run.log(step=0, metric="nc1", value=1.0, epoch=0)
            raise RuntimeError("synthetic failure <before> training")
        for epoch in range(context.config.epochs):
            run.log(step=epoch, metric="nc1", value=10.0 * math.exp(-epoch), epoch=epoch)
            run.log(step=epoch, metric="accuracy", value=min(1.0, 0.4 + 0.2 * epoch), epoch=epoch)
            run.log(step=epoch, metric="accuracy", value=0.5, epoch=epoch, split="test")
        run.save_array("spectrum", values=np.array([4.0, 1.0, 0.5]))

    def draw(run: Run) -> None:
        calls["draw"] += 1
        metrics = run.metrics()
        zero = RunResults(metrics, run.manifest).zero_error_epoch()
        plot_metric(metrics, run.figure_path("nc1"), "nc1", logy=True, zero_error_epoch=zero)

    claims = [
        decreases_by("nc1-falls", "NC1 falls by 100x.", "Fig. 7", Series("nc1"), factor=100.0),
        value_above("test-acc", "Test accuracy >= 0.9.", "Tab. 1", Final("accuracy", "test"), 0.9),
        Claim("spectrum-gap", "s1 >= 2 s2.", "Fig. 4", "s1/s2 >= 2", _spectrum_claim),
        Claim("broken", "A claim with a bug.", "nowhere", "n/a", _broken_claim),
        Claim("paper-only", "Needs paper scale.", "Fig. 9", "n/a", _spectrum_claim, ("paper",)),
    ]
    return Experiment(
        id=exp_id,
        paper="003",
        title="synthetic NC1 decay",
        presets=typed({"quick": {"epochs": EPOCHS}, "paper": {"epochs": 20}}, "003"),
        runtime_quick="<1 s",
        run=run,
        figures=["nc1"],
        figure="Fig. 7",
        claims=claims,
        draw=draw,
    )


@pytest.fixture
def registered() -> Iterator[list[str]]:
    ids: list[str] = []
    yield ids
    for exp_id in ids:
        unregister(exp_id)


def _register(registered: list[str], exp_id: str, fail_first: int = 0) -> dict[str, int]:
    calls = {"run": 0, "draw": 0}
    register(_make_experiment(exp_id, calls, fail_first))
    registered.append(exp_id)
    return calls


def _verdicts(run: Run) -> dict[str, str]:
    return {c["name"]: c["verdict"] for c in run.read_json("claims")["claims"]}


def test_run_writes_claims_and_report(tmp_path: Path, registered: list[str]) -> None:
    calls = _register(registered, "t-runner-ok")
    run = run_experiment("t-runner-ok", root=tmp_path, seed=3)
    assert run.id == "t-runner-ok-quick-seed3"
    assert run.status == "completed"
    assert calls == {"run": 1, "draw": 1}
    document = run.read_json("claims")
    assert document["summary"] == {"holds": 2, "does not hold": 1, "not evaluable": 2}
    assert _verdicts(run) == {
        "nc1-falls": "holds",
        "test-acc": "does not hold",
        "spectrum-gap": "holds",
        "broken": "not evaluable",
        "paper-only": "not evaluable",
    }
    by_name = {c["name"]: c for c in document["claims"]}
    assert by_name["nc1-falls"]["values"]["end/start"] == pytest.approx(math.exp(-5.0))
    assert by_name["spectrum-gap"]["values"]["s1/s2"] == 4.0
    assert by_name["test-acc"]["values"]["value"] == 0.5
    assert "KeyError" in by_name["broken"]["detail"]
    manifest = run.manifest
    assert manifest["experiment_info"]["paper_label"] == "003 MSE-NC"
    assert manifest["durations"]["total_s"] > 0
    assert (run.path / "figures" / "nc1.png").is_file()
    html = (run.path / "report.html").read_text()
    assert "data:image/png;base64," in html
    assert "nc1-falls" in html and "does not hold" in html


def test_rerun_skips_completed_run(tmp_path: Path, registered: list[str]) -> None:
    calls = _register(registered, "t-runner-skip")
    first = run_experiment("t-runner-skip", root=tmp_path)
    finished = first.manifest["timings"]["finished"]
    second = run_experiment("t-runner-skip", root=tmp_path)
    assert calls == {"run": 1, "draw": 1}
    assert second.manifest["timings"]["finished"] == finished
    # missing outputs of a completed run are rebuilt, still without running it
    (second.path / "claims.json").unlink()
    (second.path / "report.html").unlink()
    run_experiment("t-runner-skip", root=tmp_path)
    assert calls == {"run": 1, "draw": 1}
    assert (second.path / "claims.json").is_file() and (second.path / "report.html").is_file()


def test_failed_run_is_reported_then_resumed(tmp_path: Path, registered: list[str]) -> None:
    calls = _register(registered, "t-runner-resume", fail_first=1)
    with pytest.raises(RuntimeError, match="synthetic failure"):
        run_experiment("t-runner-resume", root=tmp_path)
    run = Run.open(tmp_path / "t-runner-resume-quick-seed0")
    assert run.status == "failed"
    assert "synthetic failure" in run.manifest["error"]
    assert "Traceback" in run.manifest["traceback"]
    claims = run.read_json("claims")
    assert claims["summary"] == {"holds": 0, "does not hold": 0, "not evaluable": 5}
    assert "the run is failed" in claims["claims"][0]["detail"]
    html = (run.path / "report.html").read_text()
    assert "synthetic failure &lt;before&gt; training" in html
    assert "traceback" in html

    resumed = run_experiment("t-runner-resume", root=tmp_path)
    assert calls == {"run": 2, "draw": 1}
    assert resumed.status == "completed"
    assert resumed.manifest["traceback"] is None
    assert len(resumed.manifest["timings"]["resumed"]) == 1
    assert _verdicts(resumed)["nc1-falls"] == "holds"


def test_raise_on_error_false_returns_failed_run(tmp_path: Path, registered: list[str]) -> None:
    _register(registered, "t-runner-noraise", fail_first=5)
    run = run_experiment("t-runner-noraise", root=tmp_path, raise_on_error=False)
    assert run.status == "failed"
    assert (run.path / "report.html").is_file()


def test_refresh_run_redraws_and_reevaluates_without_training(
    tmp_path: Path, registered: list[str]
) -> None:
    calls = _register(registered, "t-runner-refresh")
    run = run_experiment("t-runner-refresh", root=tmp_path)
    (run.path / "figures" / "nc1.png").unlink()
    (run.path / "claims.json").unlink()
    report = refresh_run(run.path)
    assert calls == {"run": 1, "draw": 2}
    assert (run.path / "figures" / "nc1.png").is_file()
    assert _verdicts(run)["nc1-falls"] == "holds"
    assert report == run.path / "report.html"
    # an experiment no longer registered: stored claims kept, a note says why
    unregister("t-runner-refresh")
    registered.remove("t-runner-refresh")
    refresh_run(run.path)
    html = report.read_text()
    assert "is not registered here" in html
    assert _verdicts(run)["nc1-falls"] == "holds"


# ---------------------------------------------------------------------- registry
def test_register_validation(registered: list[str]) -> None:
    calls = {"run": 0, "draw": 0}
    experiment = _make_experiment("t-reg", calls)
    register(experiment)
    registered.append("t-reg")
    assert register(experiment) is experiment  # idempotent for the same object
    with pytest.raises(ValueError, match="already registered"):
        register(_make_experiment("t-reg", calls))
    no_quick = _make_experiment("t-reg-2", calls)
    no_quick.presets = {"paper": {}}
    with pytest.raises(ValueError, match="'quick' preset"):
        register(no_quick)
    with pytest.raises(KeyError, match="no preset 'huge'"):
        experiment.config("huge")
    with pytest.raises(KeyError, match="unknown experiment"):
        get_experiment("t-no-such")
    with pytest.raises(KeyError, match="no registered experiment"):
        unregister("t-no-such")


def test_papers_are_matched_by_number_and_name(registered: list[str]) -> None:
    _register(registered, "t-paper-003")
    for name in ("003", "3", "mse-nc", "MSE_NC", "nc-mse"):
        assert "t-paper-003" in [e.id for e in experiments_for_paper(name)], name
    assert "t-paper-003" not in [e.id for e in experiments_for_paper("001")]
    every = [e.id for e in experiments_for_paper("all")]
    assert "t-paper-003" in every and "demo" not in every
    assert find_paper("pfc").number == "001"
    assert find_paper("nonsense") is None


def test_demo_is_registered_with_claims_and_draw() -> None:
    demo = get_experiment("demo")
    assert [c.name for c in demo.claims] == [
        "zero-training-error",
        "test-accuracy",
        "nc1-collapses",
        "deeper-is-more-collapsed",
    ]
    assert demo.figures == ["collapse", "training"] and set(demo.captions) == set(demo.figures)
    assert demo.draw is not None
    assert demo in all_experiments()


def test_builtin_packages_register_on_import_and_missing_ones_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "clab_fake_paper"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from collapselab.experiments import Experiment, register\n"
        "from tests._experiments import typed\n"
        "register(Experiment(id='t-fake-paper', paper='004', title='t', "
        "presets=typed({'quick': {}}, '004'), runtime_quick='0 s', run=lambda run, ctx: None))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        registry_module,
        "BUILTIN_PACKAGES",
        ("collapselab.experiments.demo", "clab_not_written_yet", "clab_fake_paper"),
    )
    monkeypatch.setattr(registry_module, "_LOADED", False)
    try:
        assert "t-fake-paper" in [e.id for e in experiments_for_paper("dlufm")]
    finally:
        unregister("t-fake-paper")
        sys.modules.pop("clab_fake_paper", None)


def test_claims_json_is_strict_json(tmp_path: Path, registered: list[str]) -> None:
    _register(registered, "t-runner-json")
    run = run_experiment("t-runner-json", root=tmp_path)
    text = (run.path / "claims.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
