"""Tests of collapselab.store.list_runs / query / connect (DuckDB over run directories)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collapselab.store import RUN_COLUMNS, Run, list_runs, query

_METRIC_VIEW = ["run_id", "step", "epoch", "split", "layer", "metric", "value"]


def _two_runs(root: Path) -> tuple[Run, Run, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    values = {"a": rng.normal(size=5), "b": rng.normal(size=3)}
    a = Run.create(root, "exp", preset="quick", config={"lr": 0.1}, seed=0, run_id="a")
    b = Run.create(root / "nested", "other", config={"lr": 0.2}, seed=1, run_id="b")
    for run, key in ((a, "a"), (b, "b")):
        for step, v in enumerate(values[key]):
            run.log(step, "loss", v, epoch=step)
            run.log(step, "nc1", 10 * v, epoch=step, split="train", layer="fc")
        run.flush()
    a.set_status("completed")
    return a, b, values


def test_query_aggregates_over_two_runs(tmp_path: Path) -> None:
    _, _, values = _two_runs(tmp_path)
    got = query(
        tmp_path,
        "SELECT run_id, count(*) AS n, sum(value) AS total, max(step) AS last "
        "FROM metrics WHERE metric = 'loss' GROUP BY run_id ORDER BY run_id",
    )
    assert got["run_id"].tolist() == ["a", "b"]
    assert got["n"].tolist() == [5, 3] and got["last"].tolist() == [4, 2]
    np.testing.assert_allclose(got["total"], [values["a"].sum(), values["b"].sum()], rtol=1e-12)

    joined = query(
        tmp_path,
        "SELECT r.experiment, avg(m.value) AS mean_nc1 FROM metrics m JOIN runs r USING (run_id) "
        "WHERE m.layer = 'fc' AND r.status = 'completed' GROUP BY r.experiment",
    )
    assert joined["experiment"].tolist() == ["exp"]
    np.testing.assert_allclose(joined["mean_nc1"], [10 * values["a"].mean()], rtol=1e-12)
    lr = query(
        tmp_path, "SELECT json_extract(config, '$.lr')::DOUBLE AS lr FROM runs ORDER BY run_id"
    )
    assert lr["lr"].tolist() == [0.1, 0.2]


def test_list_runs_rows_and_columns(tmp_path: Path) -> None:
    a, b, _ = _two_runs(tmp_path)
    Run.create(tmp_path, "empty", run_id="c")  # no metrics file yet
    (tmp_path / "not-a-run").mkdir()
    runs = list_runs(tmp_path)
    assert list(runs.columns) == list(RUN_COLUMNS)
    assert runs["run_id"].tolist() == ["a", "b", "c"]  # creation order
    assert runs["status"].tolist() == ["completed", "created", "created"]
    assert runs["seed"].tolist() == [0, 1, 0]
    assert runs["path"].tolist() == [str(a.path), str(b.path), str(tmp_path / "c")]
    counts = query(tmp_path, "SELECT run_id, count(*) AS n FROM metrics GROUP BY run_id ORDER BY 1")
    assert counts["run_id"].tolist() == ["a", "b"] and counts["n"].tolist() == [10, 6]


def test_empty_root_gives_empty_views_with_columns(tmp_path: Path) -> None:
    runs = list_runs(tmp_path)
    assert len(runs) == 0 and list(runs.columns) == list(RUN_COLUMNS)
    metrics = query(tmp_path, "SELECT * FROM metrics")
    assert len(metrics) == 0 and list(metrics.columns) == _METRIC_VIEW
    described = query(tmp_path, "DESCRIBE runs")
    types = dict(zip(described["column_name"], described["column_type"], strict=True))
    assert types["run_id"] == "VARCHAR" and types["seed"] == "BIGINT"
    assert query(tmp_path, "SELECT count(*) AS n FROM runs")["n"].tolist() == [0]


def test_query_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        list_runs(tmp_path / "missing")
    with pytest.raises(ValueError, match="sql"):
        query(tmp_path, "  ")


def test_unreadable_manifest_is_skipped_with_a_warning(tmp_path: Path) -> None:
    Run.create(tmp_path, "exp", run_id="good")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json")
    with pytest.warns(UserWarning, match="unreadable run manifest"):
        runs = list_runs(tmp_path)
    assert runs["run_id"].tolist() == ["good"]
