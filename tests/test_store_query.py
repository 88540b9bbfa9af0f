"""Tests of collapselab.store.list_runs / query / connect (DuckDB over run directories)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collapselab.store import RUN_COLUMNS, QueryError, Run, list_runs, query

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
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file, not a directory of runs"):
        query(tmp_path / "file", "SELECT 1")
    with pytest.raises(QueryError, match="SQL is empty"):
        query(tmp_path, "  ")


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("SELEC bad sql", r"^query failed: Parser Error: syntax error at or near \"SELEC\"; views"),
        (
            "SELECT nosuch FROM metrics",
            r"^query failed: Binder Error: Referenced column \"nosuch\" not found .*"
            r"\(Candidate bindings: .*\); views: metrics\(run_id, step",
        ),
        ("SELECT * FROM nosuch", r"^query failed: Catalog Error: Table with name nosuch"),
    ],
)
def test_query_errors_are_one_line_with_the_views(tmp_path: Path, sql: str, match: str) -> None:
    _two_runs(tmp_path)
    with pytest.raises(QueryError, match=match) as caught:
        query(tmp_path, sql)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("COPY (SELECT 1) TO '{out}'", "COPY"),
        ("SELECT 1; COPY (SELECT * FROM metrics) TO '{out}'", "COPY"),
        ("ATTACH '{out}' AS other", "ATTACH"),
        ("CREATE TABLE t AS SELECT 1", "CREATE"),
        ("INSERT INTO runs VALUES (1)", "INSERT"),
        ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}'", "EXPLAIN COPY"),
        ("SET enable_external_access = true", "SET"),
        ("INSTALL httpfs", "INSTALL"),
        ("EXPORT DATABASE '{out}'", "EXPORT"),
    ],
)
def test_query_refuses_statements_that_write(tmp_path: Path, sql: str, kind: str) -> None:
    _two_runs(tmp_path)
    out = tmp_path / "written"
    with pytest.raises(QueryError, match=f"read-only: {kind} statements are refused"):
        query(tmp_path, sql.format(out=out))
    assert not out.exists()


def test_query_accepts_read_only_forms(tmp_path: Path) -> None:
    _two_runs(tmp_path)
    assert query(tmp_path, "FROM runs SELECT count(*) AS n")["n"].tolist() == [2]
    assert query(tmp_path, "WITH r AS (SELECT * FROM runs) SELECT count(*) AS n FROM r")[
        "n"
    ].tolist() == [2]
    pivot = query(
        tmp_path,
        "PIVOT (SELECT run_id, epoch, value FROM metrics WHERE metric = 'loss') "
        "ON run_id USING first(value) ORDER BY epoch",
    )
    assert list(pivot.columns) == ["epoch", "a", "b"] and len(pivot) == 5
    assert len(query(tmp_path, "EXPLAIN SELECT * FROM metrics")) == 1
    assert len(query(tmp_path, "SUMMARIZE metrics")) == 7


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('{outside}')",
        "SELECT * FROM read_text('{outside}')",
        "SELECT * FROM glob('{folder}/*')",
        "SELECT * FROM read_parquet('{folder}/*.parquet')",
    ],
)
def test_query_sees_the_run_root_only(tmp_path: Path, sql: str) -> None:
    root = tmp_path / "root"
    _two_runs(root)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.csv").write_text("a,b\n1,2\n")
    import pandas as pd

    pd.DataFrame({"a": [1]}).to_parquet(elsewhere / "t.parquet")
    text = sql.format(outside=elsewhere / "secret.csv", folder=elsewhere)
    with pytest.raises(QueryError, match="reads the runs under its root only"):
        query(root, text)
    # inside the root the user's own SQL may read the run files, as the views do
    assert len(query(root, f"SELECT * FROM read_parquet('{root}/a/metrics.parquet')")) == 10


def test_query_of_a_relative_root_reads_its_runs(tmp_path: Path, monkeypatch) -> None:
    _two_runs(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    assert query("runs", "SELECT count(*) AS n FROM metrics")["n"].tolist() == [16]


def test_a_run_whose_writer_was_killed_is_listed_stale(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    from collapselab.store import STALE

    script = (
        "import sys, time\n"
        "from collapselab.store import Run\n"
        "run = Run.create(sys.argv[1], 'exp', run_id='killed')\n"
        "run.set_status('running')\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)],
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert process.stdout.readline().strip() == "ready"
        assert list_runs(tmp_path).set_index("run_id").loc["killed", "status"] == "running"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        process.kill()
    listed = list_runs(tmp_path).set_index("run_id")
    assert listed.loc["killed", "status"] == STALE == "stale"
    assert Run.open(tmp_path / "killed").status == "running"  # the manifest is left alone
    live = Run.create(tmp_path, "exp", run_id="live")  # this process holds its lock
    live.set_status("running")
    assert list_runs(tmp_path).set_index("run_id").loc["live", "status"] == "running"
