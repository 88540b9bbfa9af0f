"""Damaged runs: detected, named in one line, skipped by queries, refused by Run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from collapselab.store import (
    DAMAGED,
    DamagedRunError,
    DamagedRunsWarning,
    Run,
    check_run,
    list_runs,
    query,
    run_problem,
)


def _run(root: Path, run_id: str, n: int = 40) -> Run:
    run = Run.create(root, "exp", config={"n": n}, run_id=run_id)
    rng = np.random.default_rng(len(run_id))
    for step in range(n):
        run.log(step, "loss", float(rng.normal()), epoch=step)
        run.log(step, "nc1", float(rng.normal()), epoch=step, layer="fc")
    run.flush()
    run.set_status("completed")
    run.close()
    return run


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _damage_pages(path: Path) -> None:
    """Overwrite bytes inside the data pages; the footer (schema, row count) stays intact."""
    data = bytearray(path.read_bytes())
    for i in range(8, len(data) // 2):
        data[i] = 0xFF
    path.write_bytes(bytes(data))


DAMAGES = {
    "truncated manifest": (
        lambda run: _truncate(run.path / "manifest.json"),
        r"^manifest.json is not valid JSON \(truncated\? ",
    ),
    "manifest not an object": (
        lambda run: (run.path / "manifest.json").write_text("[1, 2]"),
        r"^manifest.json is not a JSON object$",
    ),
    "manifest missing keys": (
        lambda run: (run.path / "manifest.json").write_text('{"id": "x"}'),
        r"^manifest.json lacks the required keys \['experiment', 'config', 'status'\]$",
    ),
    "truncated table": (
        lambda run: _truncate(run.path / "metrics.parquet"),
        r"^metrics.parquet cannot be read \(",
    ),
    "garbage table": (
        lambda run: (run.path / "metrics.parquet").write_bytes(b"not parquet at all"),
        r"^metrics.parquet cannot be read \(",
    ),
    "missing table": (
        lambda run: (run.path / "metrics.parquet").unlink(),
        r"^metrics.parquet is missing \(the manifest records 80 rows\)$",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damage_is_named_in_one_line_and_listed(tmp_path: Path, damage: str) -> None:
    good = _run(tmp_path, "good")
    bad = _run(tmp_path, "bad")
    make, match = DAMAGES[damage]
    make(bad)
    assert run_problem(good.path) is None
    problem = run_problem(bad.path)
    assert problem is not None and "\n" not in problem
    assert __import__("re").match(match, problem), problem
    with pytest.raises(DamagedRunError, match=f"damaged run {bad.path}: .*; re-run it"):
        check_run(bad.path)
    runs = list_runs(tmp_path).set_index("run_id")
    assert runs.loc["good", "status"] == "completed"
    assert runs.loc["bad", "status"] == DAMAGED and runs.loc["bad", "error"] == problem


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_queries_skip_damaged_runs_with_one_counting_warning(tmp_path: Path, damage: str) -> None:
    _run(tmp_path, "good")
    bad = _run(tmp_path, "bad")
    DAMAGES[damage][0](bad)
    with pytest.warns(DamagedRunsWarning, match=r"^skipped 1 damaged run\(s\) .*bad") as caught:
        counts = query(tmp_path, "SELECT run_id, count(*) AS n FROM metrics GROUP BY ALL")
    assert counts["run_id"].tolist() == ["good"] and counts["n"].tolist() == [80]
    assert len(caught) == 1 and caught[0].message.damaged == [
        (str(bad.path), run_problem(bad.path))
    ]
    with pytest.warns(DamagedRunsWarning):
        assert query(tmp_path, "SELECT run_id FROM runs")["run_id"].tolist() == ["good"]


def test_damaged_pages_behind_an_intact_footer_are_found_when_duckdb_fails(
    tmp_path: Path,
) -> None:
    _run(tmp_path, "good", n=2000)
    bad = _run(tmp_path, "bad", n=2000)
    _damage_pages(bad.path / "metrics.parquet")
    assert run_problem(bad.path) is None  # the quick check reads the footer only
    assert run_problem(bad.path, thorough=True) is not None
    with pytest.warns(DamagedRunsWarning, match=r"skipped 1 damaged run") as caught:
        total = query(tmp_path, "SELECT sum(value) AS s, count(*) AS n FROM metrics")
    assert len(caught) == 1
    assert total["n"].tolist() == [4000]


def test_run_refuses_to_read_a_damaged_table(tmp_path: Path) -> None:
    run = _run(tmp_path, "r")
    _truncate(run.path / "metrics.parquet")
    reopened = Run.open(run.path)  # the manifest is fine
    with pytest.raises(DamagedRunError, match=r"metrics.parquet cannot be read"):
        reopened.metrics()
    (run.path / "metrics.parquet").unlink()
    with pytest.raises(DamagedRunError, match=r"metrics.parquet is missing"):
        Run.open(run.path).metrics()
    _truncate(run.path / "manifest.json")
    with pytest.raises(DamagedRunError, match=r"manifest.json is not valid JSON"):
        Run.open(run.path)


def test_metrics_rows_tracks_flush_and_truncation(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "exp")
    assert "metrics_rows" not in run.manifest
    run.log_many({"step": k, "metric": "loss", "value": 1.0} for k in range(5))
    run.flush()
    on_disk = json.loads((run.path / "manifest.json").read_text())
    assert on_disk["metrics_rows"] == 5
    assert run.truncate_after(2) == 2
    assert json.loads((run.path / "manifest.json").read_text())["metrics_rows"] == 3
    assert run_problem(run.path) is None


def test_hidden_directories_are_not_searched(tmp_path: Path) -> None:
    _run(tmp_path, "good")
    hidden = _run(tmp_path / ".damaged", "old")
    _truncate(hidden.path / "manifest.json")
    assert list_runs(tmp_path)["run_id"].tolist() == ["good"]
