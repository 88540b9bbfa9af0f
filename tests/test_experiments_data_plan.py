"""Data plans: which preset runs on which data, the fallback to bundled data when files are
missing, a missing dataset reported once (no run, no repeated claim reasons, the paper's
other experiments not run), an unused --data-dir, erratum demonstrations counted apart."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from collapselab.cli.main import app
from collapselab.data import DataSpec, load_dataset, locations
from collapselab.experiments import (
    Claim,
    ClaimResult,
    Erratum,
    Experiment,
    MissingDataError,
    Preset,
    RunContext,
    all_experiments,
    evaluate_claims,
    plan_data,
    register,
    reproduce,
    run_experiment,
    tiers,
    unregister,
)
from collapselab.experiments.claims import RunResults
from collapselab.experiments.data_plan import DataDirError, config_datasets
from collapselab.store import Run
from tests._experiments import typed
from tests._idx_files import write_idx_dataset

FASHION = DataSpec("fashion_mnist", fallback=DataSpec("digits"))


@dataclass(frozen=True, kw_only=True)
class Images(Preset):
    """Trains on Fashion-MNIST; its bundled fallback (quick-bundled) on the digits."""

    data: DataSpec = FASHION


@dataclass(frozen=True, kw_only=True)
class Arms(Preset):
    """Several datasets, one twice."""

    arms: Mapping[str, DataSpec] = field(default_factory=lambda: {
        "a": DataSpec("fashion_mnist"), "b": DataSpec("mnist1d"), "c": DataSpec("mnist1d"),
    })  # fmt: skip


CALLS: list[str] = []


def _train(run: Run, context: RunContext) -> None:
    # Reads its dataset as a real experiment does, without being given where it is.
    data = load_dataset(context.config.data.name, data_dir=context.data_dir)
    CALLS.append(f"{run.id}:{len(data.train)}")
    run.log(step=0, metric="n_train", value=float(len(data.train)))


def _simulate(run: Run, context: RunContext) -> None:
    CALLS.append(run.id)
    run.log(step=0, metric="objective", value=1.0)


def _fixed(verdict: str) -> Claim:
    return Claim(
        f"claim-{verdict.replace(' ', '-')}",
        "a statement",
        "§0",
        "a threshold",
        lambda results: ClaimResult(verdict, {"x": 1.0}, 0.0, verdict),
    )


ERRATA = [
    Claim(
        "published-formula",
        "the printed formula",
        "Eq. 9",
        "error <= 0.01",
        lambda r: ClaimResult("does not hold", {"error": 1.4}, 0.01, "1.4 > 0.01"),
        erratum=Erratum(),
    ),
    Claim(
        "literal-solver-not-converged",
        "the converged solver goes lower than the paper's",
        "§IV",
        "objective(converged) < objective(literal)",
        lambda r: ClaimResult("holds", {}, None, "0.002 < 0.13"),
        erratum=Erratum(confirmed_when="holds", subject="solver"),
    ),
]


@pytest.fixture
def experiments() -> Iterator[None]:
    CALLS.clear()
    register(
        Experiment(
            id="t-plan-train",
            paper="t-paper-plan",
            title="trains on images",
            presets=tiers(tiny=Images(), quick=Images(), standard=Images()),
            runtime_quick="1 s",
            run=_train,
            claims=[_fixed("holds"), _fixed("does not hold")],
        )
    )
    register(
        Experiment(
            id="t-plan-theory",
            paper="t-paper-plan",
            title="simulates",
            presets=typed({"quick": {"n": 1}, "standard": {"n": 2}}),
            runtime_quick="1 s",
            run=_simulate,
            claims=[_fixed("holds"), *ERRATA],
        )
    )
    yield
    unregister("t-plan-train")
    unregister("t-plan-theory")


@pytest.fixture
def debian_fashion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "debian-fashion-mnist"
    write_idx_dataset(folder, n_train=40, n_test=20)
    monkeypatch.setattr(
        locations,
        "SYSTEM_DATASETS",
        {"fashion_mnist": locations.SystemDataset(folder, "dataset-fashion-mnist")},
    )
    return folder


def test_config_datasets_reads_the_data_specs_of_a_preset():
    assert config_datasets(Images()) == ["fashion_mnist"]
    assert config_datasets(Arms()) == ["fashion_mnist", "mnist1d"]
    assert config_datasets(typed({"quick": {"n_classes": 5}})["quick"]) == []


def test_quick_falls_back_to_bundled_data_and_says_why(tmp_path, experiments):
    run = run_experiment("t-plan-train", "quick", root=tmp_path)
    assert run.id == "t-plan-train-quick-bundled-seed0" and run.preset == "quick-bundled"
    assert CALLS == ["t-plan-train-quick-bundled-seed0:1347"]  # digits: 1347 training images
    data = run.manifest["data"]
    assert data["fell_back"] and data["requested_preset"] == "quick"
    assert data["summary"] == "scikit-learn's 8x8 digits (bundled with scikit-learn)"
    (note,) = data["notes"]
    assert "fashion_mnist, which is not found" in note and "quick-bundled" in note
    assert "$COLLAPSELAB_DATA_DIR (not set)" in note
    html = (run.path / "report.html").read_text()
    assert "Data: scikit-learn&#x27;s 8x8 digits" in html and "fashion_mnist, which is not" in html


def test_quick_reads_the_debian_files_when_installed(tmp_path, experiments, debian_fashion):
    run = run_experiment("t-plan-train", "quick", root=tmp_path)
    assert run.id == "t-plan-train-quick-seed0" and CALLS == ["t-plan-train-quick-seed0:40"]
    data = run.manifest["data"]
    assert not data["fell_back"] and data["notes"] == []
    (origin,) = data["datasets"]
    assert origin["folder"] == str(debian_fashion)
    assert origin["found_via"] == "Debian package dataset-fashion-mnist"
    index = json.loads((reproduce("t-paper-plan", root=tmp_path).index_json).read_text())
    rows = {r["run_id"]: r for r in index["runs"]}
    assert rows["t-plan-train-quick-seed0"]["data"].startswith("Fashion-MNIST, files in")
    assert rows["t-plan-theory-quick-seed0"]["data"].startswith("no dataset")


def test_missing_data_without_fallback_fails_before_any_run(tmp_path, experiments):
    with pytest.raises(MissingDataError) as info:
        run_experiment("t-plan-train", "standard", root=tmp_path)
    assert not (tmp_path / "t-plan-train-standard-seed0").exists() and CALLS == []
    assert "fashion_mnist" in str(info.value) and "--data-dir (not given)" in str(info.value)
    line = info.value.one_line()
    assert "\n" not in line and "t-plan-train (preset standard)" in line
    assert "$COLLAPSELAB_DATA_DIR (not set)" in line
    # reproduce reports it once and runs none of the paper's experiments.
    result = reproduce("t-paper-plan", "standard", root=tmp_path)
    outcomes = {o.experiment: o for o in result.outcomes}
    assert outcomes["t-plan-train"].outcome == "failed"
    assert outcomes["t-plan-train"].error == line
    assert outcomes["t-plan-theory"].outcome == "not run"
    assert "t-plan-train" in outcomes["t-plan-theory"].error and not result.ok
    assert CALLS == []


def test_claims_of_a_failed_run_do_not_repeat_its_error(tmp_path, experiments):
    def fail(run: Run, context: RunContext) -> None:
        raise RuntimeError("a long error message that should be shown once")

    register(
        Experiment(
            id="t-plan-fail",
            paper="t-paper-fail",
            title="fails",
            presets=typed({"quick": {}}),
            runtime_quick="1 s",
            run=fail,
            claims=[_fixed("holds"), _fixed("does not hold")],
        )
    )
    try:
        run = run_experiment("t-plan-fail", root=tmp_path, raise_on_error=False)
    finally:
        unregister("t-plan-fail")
    claims = json.loads((run.path / "claims.json").read_text())
    for entry in claims["claims"]:
        assert entry["verdict"] == "not evaluable"
        assert "long error" not in entry["detail"] and "shown once" in entry["detail"]
    html = (run.path / "report.html").read_text()
    claims_section = html[html.index("<h2>Claims") :].split("<h2>", 2)[1]
    assert "a long error message" in html and "a long error message" not in claims_section


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_a_data_dir_that_is_not_a_folder_stops_before_any_run(
    tmp_path, experiments, debian_fashion, kind
):
    """A typo in --data-dir is an error naming it, not a silent fallback to bundled data
    (quick) or a 'dataset not found' (standard) while the Debian files are installed."""
    bad = tmp_path / "typo"
    if kind == "a file":
        bad.write_text("not a folder")
    state = "does not exist" if kind == "missing" else "is not a folder"
    for preset in ("quick", "standard"):
        with pytest.raises(DataDirError, match=f"--data-dir {bad} {state}"):
            run_experiment("t-plan-train", preset, root=tmp_path, data_dir=bad)
    assert CALLS == [] and not list(tmp_path.glob("t-plan-*"))
    commands = [
        ["run", "t-plan-train"],
        ["reproduce", "t-paper-plan"],
        ["sweep", "t-plan-train", "--seeds", "0-1"],
    ]
    for command in commands:
        result = CliRunner().invoke(app, [*command, "--data-dir", str(bad), "--out", str(tmp_path)])
        assert result.exit_code == 2, (command, result.output)
        (line,) = [line for line in result.stderr.splitlines() if line.strip()]
        assert line.startswith(f"error: --data-dir {bad} {state}") and "Traceback" not in line
    assert CALLS == []


def test_data_dir_given_to_a_preset_that_reads_no_files_says_so(tmp_path, experiments):
    plan = plan_data(next(e for e in all_experiments() if e.id == "t-plan-theory"), "quick", ".")
    assert plan.data_dir_unused and plan.notes() == [
        "--data-dir . is not used: t-plan-theory at preset quick reads no dataset files "
        "(no dataset: the experiment generates its own instances)"
    ]
    result = CliRunner().invoke(
        app, ["run", "t-plan-theory", "--data-dir", str(tmp_path), "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "is not used: t-plan-theory at preset quick reads no" in " ".join(result.output.split())
    # reproduce says it once, at the end, when no experiment of the paper reads files.
    register(
        Experiment(
            id="t-plan-sim2",
            paper="t-paper-sims",
            title="simulates",
            presets=typed({"quick": {}}),
            runtime_quick="1 s",
            run=_simulate,
        )
    )
    try:
        result = CliRunner().invoke(
            app, ["reproduce", "t-paper-sims", "--data-dir", ".", "--out", str(tmp_path)]
        )
    finally:
        unregister("t-plan-sim2")
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert text.count("is not used") == 1 and "no experiment of t-paper-sims" in text


def test_erratum_demonstrations_are_counted_apart(tmp_path, experiments):
    document = evaluate_claims([_fixed("holds"), *ERRATA], RunResults(metrics=pd.DataFrame()))
    assert document["summary"] == {"holds": 1, "does not hold": 0, "not evaluable": 0}
    assert document["errata"] == {"confirmed": 2, "not confirmed": 0, "not evaluable": 0}
    entries = {e["name"]: e for e in document["claims"]}
    assert entries["claim-holds"]["kind"] == "empirical" and "erratum" not in entries["claim-holds"]
    assert entries["published-formula"]["erratum"] == {
        "outcome": "confirmed",
        "wording": "published formula confirmed wrong",
    }
    assert entries["literal-solver-not-converged"]["erratum"]["wording"] == (
        "paper's solver confirmed not to converge"
    )
    assert Erratum().wording("holds") == "published formula not refuted"
    assert Erratum().outcome("not evaluable") == "not evaluable"
    with pytest.raises(ValueError):
        Erratum(confirmed_when="not evaluable")

    result = reproduce("t-paper-plan", root=tmp_path)
    index = json.loads(result.index_json.read_text())
    groups = {p["preset"]: p for p in index["papers"] if p["paper"] == "t-paper-plan"}
    assert groups["quick"]["empirical"] == {
        "holds": 1,
        "does not hold": 0,
        "not evaluable": 0,
        "evaluated": 1,
        "total": 1,
    }
    assert groups["quick"]["errata"]["confirmed"] == 2 and groups["quick"]["errata"]["total"] == 2
    assert groups["quick-bundled"]["empirical"]["total"] == 2
    html = result.index_html.read_text()
    assert "empirical claims holding" in html and "erratum demonstrations confirming" in html
    report = (tmp_path / "t-plan-theory-quick-seed0" / "report.html").read_text()
    assert "Erratum demonstrations" in report and "published formula confirmed wrong" in report


def test_the_papers_errata_are_marked():
    kinds = {
        e.id: sorted(c.name for c in e.claims if c.kind == "erratum") for e in all_experiments()
    }
    assert kinds["mse-nc-theory"] == ["snr-follows-published-closed-form"]
    assert kinds["pfc-theorems"] == ["theorem3-reduction-as-published"]
    assert kinds["pfc-mufm"] == [
        "converged-below-literal",
        "mufm-more-collapsed-than-data-literal-solver",
        "ufm-exact-collapse-literal-solver",
    ]
    assert kinds["pfc-lambda-sweep"] == ["sweep-converged-below-literal"]
    assert kinds["mse-nc-collapse"] == kinds["pfc-training-fc"] == []
