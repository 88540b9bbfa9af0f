"""report.html and the index: self-contained (images as base64), every text escaped."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt

from collapselab.report import (
    collect_index,
    render_index,
    render_run_report,
    write_index,
    write_run_report,
)
from collapselab.report.index import paper_counts
from collapselab.store import Run

HOSTILE = '<script>alert("x")</script> & co'


def _run(root: Path, name: str, status: str = "completed", error: str | None = None) -> Run:
    run = Run.create(root, name, preset="quick", config={"lr": 0.1, "net": {"depth": 3}}, seed=1)
    run.update_manifest(
        experiment_info={
            "paper": "003",
            "paper_label": "003 MSE-NC",
            "paper_title": "Neural Collapse Under MSE Loss",
            "title": HOSTILE,
            "figure": "Fig. 7",
            "figures": ["second", "first"],
        },
        zero_error_epoch=4,
    )
    run.set_status("running")
    for epoch in range(3):
        run.log(step=epoch, metric="loss", value=1.0 / (epoch + 1), epoch=epoch)
        run.log(step=epoch, metric="nc1", value=0.5, epoch=epoch, layer="block1")
    run.flush()
    run.add_duration("total_s", 12.5)
    run.set_status(status, error=error)  # type: ignore[arg-type]
    return run


def _figure(run: Run, name: str) -> bytes:
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    path = run.save_figure(fig, name)
    plt.close(fig)
    return path.read_bytes()


def _claims(run: Run) -> None:
    run.write_json(
        "claims",
        {
            "summary": {"holds": 1, "does not hold": 1, "not evaluable": 1},
            "claims": [
                {
                    "name": "nc1-falls",
                    "statement": "NC1 <falls> & keeps falling",
                    "source": "§5.2, Fig. 7",
                    "threshold_text": "end/start <= 1/10",
                    "verdict": "holds",
                    "values": {"end/start": 0.01234567},
                    "threshold": 0.1,
                    "detail": "0.01235 <= 0.1",
                },
                {
                    "name": "acc",
                    "statement": "accurate",
                    "source": "Tab. 1",
                    "threshold_text": ">= 0.9",
                    "verdict": "does not hold",
                    "values": {"value": 0.5},
                    "threshold": 0.9,
                    "detail": "0.5 < 0.9",
                },
                {
                    "name": "nan",
                    "statement": "s",
                    "source": "x",
                    "threshold_text": "t",
                    "verdict": "not evaluable",
                    "values": {"value": None},
                    "threshold": None,
                    "detail": "the measured value is nan",
                },
            ],
        },
    )


def test_report_embeds_figures_as_base64_in_declared_order(tmp_path: Path) -> None:
    run = _run(tmp_path, "exp")
    first, second, extra = _figure(run, "first"), _figure(run, "second"), _figure(run, "aaa")
    path = write_run_report(run)
    assert path == run.path / "report.html"
    html = path.read_text()
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]+)"', html)
    assert [alt for _, alt in images] == ["second", "first", "aaa"]
    decoded = [base64.b64decode(data) for data, _ in images]
    assert decoded == [second, first, extra]
    # self-contained: no script, no external resource
    assert "<script" not in html
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html


def test_report_escapes_all_text(tmp_path: Path) -> None:
    run = _run(tmp_path, "exp", status="failed", error=f"ValueError: {HOSTILE}")
    run.update_manifest(traceback=f"Traceback ...\n{HOSTILE}")
    _claims(run)
    html = render_run_report(run)
    assert "<script>" not in html
    escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co"
    assert html.count(escaped) >= 3  # title, error, traceback
    assert "NC1 &lt;falls&gt; &amp; keeps falling" in html
    assert "end/start &lt;= 1/10" in html


def test_report_content(tmp_path: Path) -> None:
    run = _run(tmp_path, "exp", status="failed", error="RuntimeError: out of memory")
    _claims(run)
    html = render_run_report(run, notes=["figures could not be redrawn"])
    assert '<span class="badge bad">failed</span>' in html
    assert "RuntimeError: out of memory" in html
    assert '<div class="note">figures could not be redrawn</div>' in html
    assert "Paper 003 MSE-NC: Neural Collapse Under MSE Loss" in html
    assert "Reproduces Fig. 7" in html
    assert "epoch 4." in html  # zero-error epoch
    assert "end/start = 0.01235" in html  # 4 significant digits
    assert '<span class="badge ok">holds</span>' in html
    assert '<span class="badge bad">does not hold</span>' in html
    assert '<span class="badge na">not evaluable</span>' in html
    assert "value = \u2014" in html  # a NaN stored as null
    assert '<td class="wrap">net.depth</td><td class="wrap">3</td>' in html  # config flattened
    assert '<td>total_s</td><td class="wrap">12.5 s</td>' in html
    assert '<td class="wrap">torch</td>' in html  # versions
    # final model-level values: the loss of the last epoch, 1/3
    assert '<td>loss</td><td>train</td><td class="num">0.3333</td>' in html


def test_report_without_claims_or_figures(tmp_path: Path) -> None:
    run = _run(tmp_path, "exp")
    html = render_run_report(run)
    assert "No claims were evaluated" in html
    assert "No figures." in html
    (run.path / "claims.json").write_text("{not json")
    html = render_run_report(run)
    assert "claims.json could not be read" in html


def test_index_lists_runs_with_statuses_and_links(tmp_path: Path) -> None:
    good = _run(tmp_path, "good")
    _claims(good)
    write_run_report(good)
    _run(tmp_path, "bad", status="failed", error="boom <x>")
    html_path, json_path = write_index(tmp_path, reproduce={"paper": "003", "wall_s": 61.0})
    index = json.loads(json_path.read_text())
    assert index["n_runs"] == 2
    assert index["status_counts"] == {"completed": 1, "failed": 1}
    assert index["claim_counts"] == {"holds": 1, "does not hold": 1, "not evaluable": 1}
    assert index["total_run_s"] == 25.0
    runs = {r["experiment"]: r for r in index["runs"]}
    assert runs["good"]["report"] == f"{good.id}/report.html"
    assert runs["bad"]["report"] is None  # never written for this run
    assert runs["bad"]["error"] == "boom <x>"
    assert runs["good"]["claims"]["verdicts"] == {
        "nc1-falls": "holds",
        "acc": "does not hold",
        "nan": "not evaluable",
    }
    html = html_path.read_text()
    assert f'<a href="{good.id}/report.html">{good.id}</a>' in html
    assert "boom &lt;x&gt;" in html
    assert "after 61.0 s" in html  # the reproduce wall time
    # rebuilding without a reproduce record keeps the previous one
    write_index(tmp_path)
    assert json.loads(json_path.read_text())["reproduce"]["paper"] == "003"


def test_collect_index_of_empty_root(tmp_path: Path) -> None:
    index = collect_index(tmp_path)
    assert (index["n_runs"], index["runs"], index["reproduce"]) == (0, [], None)


def test_index_counts_a_papers_claims_of_those_evaluated() -> None:
    """A paper's share is of the claims a verdict was reached on; the not evaluable are
    named beside it, and one unconfirmed erratum is said in the singular."""
    runs = [
        {"paper": "004", "paper_label": "004 DLUFM", "preset": "standard",
         "claims": {"summary": {"holds": 3, "does not hold": 1, "not evaluable": 2},
                    "errata": {"confirmed": 1, "not confirmed": 0, "not evaluable": 0}}},
        {"paper": "004", "paper_label": "004 DLUFM", "preset": "standard",
         "claims": {"summary": {"holds": 1, "does not hold": 1, "not evaluable": 0}}},
    ]  # fmt: skip
    (group,) = paper_counts(runs)
    assert group["empirical"] == {"holds": 4, "does not hold": 2, "not evaluable": 2,
                                  "evaluated": 6, "total": 8}  # fmt: skip
    html = render_index({"papers": [group],
                         "erratum_counts": {"confirmed": 1, "not confirmed": 1}})  # fmt: skip
    assert "4 / 6 (67%), 2 not evaluable" in html
    assert "1 of 2 confirm the published error, 1 does not, 0 not evaluable" in html
