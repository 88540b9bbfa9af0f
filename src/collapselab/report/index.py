"""The index across the runs under a root: ``index.html`` and ``index.json``.

One row per run found under the root (searched recursively): experiment, paper, preset,
seed, the data it ran on, status, the claims' verdict counts and each claim's verdict, the
run's total time and a relative link to its ``report.html``. Above them, per paper and
preset: how many of the paper's empirical claims hold, and, counted apart, how many erratum
demonstrations confirm the erratum they demonstrate; and the same by tier (``paper``,
``paper, substituted``, ``beyond``, each with its own fraction; ``erratum`` and
``ambiguity`` apart: :mod:`collapselab.report.tiers`). ``index.json`` holds the same data
(strict JSON: NaN is ``null``; ``papers`` for the per-paper counts), plus what the last
``collapselab reproduce`` invocation did, if given.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from collapselab.report._html import (
    esc,
    fmt_number,
    fmt_seconds,
    json_clean,
    page,
    status_badge,
    table,
    verdict_badge,
)
from collapselab.report.html import data_summary, erratum_badge, read_claims
from collapselab.report.tiers import add_tier_counts, tier_text
from collapselab.store import DAMAGED, REPORT_FILE, DamagedRunError, Run, atomic_write, list_runs

INDEX_HTML = "index.html"
INDEX_JSON = "index.json"
_VERDICTS = ("holds", "does not hold", "not evaluable")
_INCONCLUSIVE = "inconclusive"
"""Counted where some run has an inconclusive claim (a summary key only then)."""
_OUTCOMES = ("confirmed", "not confirmed", "not evaluable")


def collect_index(root: str | os.PathLike[str], reproduce: Mapping[str, Any] | None = None) -> dict:
    """The ``index.json`` document of every run under ``root``.

    Args:
        root: the directory holding runs.
        reproduce: what a ``reproduce`` invocation did (paper, preset, per-experiment
            outcome, wall time), stored under ``"reproduce"``.
    """
    root = Path(root)
    listed = list_runs(root)
    runs = [
        _entry(root, Path(path), problem if status == DAMAGED else None)
        for path, status, problem in zip(
            listed["path"], listed["status"], listed["error"], strict=True
        )
    ]
    runs.sort(key=_sort_key)
    status_counts: dict[str, int] = {}
    claim_counts = dict.fromkeys(_VERDICTS, 0)
    erratum_counts = dict.fromkeys(_OUTCOMES, 0)
    tier_counts: dict[str, dict[str, int]] = {}
    apart: list[str] = []
    for run in runs:
        add_tier_counts(tier_counts, run["claims"])
        apart += [t for t in (run["claims"] or {}).get("tiers_apart") or [] if t not in apart]
        status_counts[run["status"]] = status_counts.get(run["status"], 0) + 1
        _add_counts(claim_counts, (run["claims"] or {}).get("summary"), _VERDICTS)
        _add_counts(erratum_counts, (run["claims"] or {}).get("errata"), _OUTCOMES)
    return json_clean(
        {
            "root": str(root),
            "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "n_runs": len(runs),
            "status_counts": status_counts,
            "claim_counts": claim_counts,
            "erratum_counts": erratum_counts,
            "tier_counts": tier_counts,
            "tiers_apart": apart,
            "papers": paper_counts(runs),
            "total_run_s": sum(r["total_s"] or 0.0 for r in runs),
            "reproduce": dict(reproduce) if reproduce is not None else None,
            "runs": runs,
        }
    )


def _add_counts(into: dict[str, int], counts: Any, keys: tuple[str, ...]) -> None:
    if isinstance(counts, Mapping):
        for key in keys:
            into[key] += int(counts.get(key, 0) or 0)
        if keys == _VERDICTS and counts.get(_INCONCLUSIVE):
            into[_INCONCLUSIVE] = into.get(_INCONCLUSIVE, 0) + int(counts[_INCONCLUSIVE])


def _shown(counts: Mapping[str, int]) -> tuple[str, ...]:
    """The verdicts to show of ``counts``: inconclusive where some claim is."""
    return (*_VERDICTS[:2], _INCONCLUSIVE, _VERDICTS[2]) if counts.get(_INCONCLUSIVE) else _VERDICTS


def paper_counts(runs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (paper, preset): empirical claims holding, with ``evaluated`` (holding or not) and
    ``total`` (the not evaluable too), and erratum demonstrations confirming, with the total
    (the demo is left out)."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for run in runs:
        if run["paper"] in ("", "demo"):
            continue
        key = (str(run["paper"]), str(run["preset"]))
        group = groups.setdefault(
            key,
            {
                "paper": key[0],
                "paper_label": run["paper_label"],
                "preset": key[1],
                "runs": 0,
                "empirical": dict.fromkeys(_VERDICTS, 0),
                "errata": dict.fromkeys(_OUTCOMES, 0),
                "tiers": {},
                "tiers_apart": [],
            },
        )
        group["runs"] += 1
        add_tier_counts(group["tiers"], run["claims"])
        for tier in (run["claims"] or {}).get("tiers_apart") or []:
            if tier not in group["tiers_apart"]:
                group["tiers_apart"].append(tier)
        _add_counts(group["empirical"], (run["claims"] or {}).get("summary"), _VERDICTS)
        _add_counts(group["errata"], (run["claims"] or {}).get("errata"), _OUTCOMES)
    for group in groups.values():
        empirical = group["empirical"]
        # an inconclusive claim was evaluated: it counts against the share that holds
        empirical["evaluated"] = (
            empirical["holds"] + empirical["does not hold"] + empirical.get(_INCONCLUSIVE, 0)
        )
        empirical["total"] = sum(empirical[v] for v in _shown(empirical))
        group["errata"]["total"] = sum(group["errata"][v] for v in _OUTCOMES)
    return [groups[k] for k in sorted(groups)]


def _sort_key(run: Mapping[str, Any]) -> tuple:
    seed = run["seed"] if isinstance(run["seed"], int) else -1
    return (str(run["paper"]), str(run["experiment"]), str(run["preset"]), seed, str(run["run_id"]))


def _entry(root: Path, path: Path, damage: str | None = None) -> dict[str, Any]:
    """The index row of the run at ``path``; ``damage``: its problem, if it is damaged."""
    try:
        manifest = Run.open(path).manifest
    except (DamagedRunError, OSError):  # a damaged manifest still gets a row
        manifest = {"id": path.name, "experiment": "?"}
    if damage is not None:
        manifest |= {"status": DAMAGED, "error": damage}
    info = manifest.get("experiment_info") or {}
    claims, problem = read_claims(path)
    claim_part = None
    if claims is not None:
        entries = claims["claims"]
        claim_part = {
            "summary": claims.get("summary") or {},
            "errata": claims.get("errata") or {},
            "verdicts": {
                str(c.get("name")): c.get("verdict")
                for c in entries
                if c.get("kind", "empirical") != "erratum"
            },
            "erratum_outcomes": {
                str(c.get("name")): c.get("erratum") or {"outcome": "not evaluable"}
                for c in entries
                if c.get("kind") == "erratum"
            },
            "tiers": claims.get("tiers") or {},
            "tiers_apart": claims.get("tiers_apart") or [],
            "claim_tiers": {str(c.get("name")): c.get("tier") for c in entries if c.get("tier")},
            "post_hoc": claims.get("post_hoc") or [],
        }
    report = path / REPORT_FILE
    total = (manifest.get("durations") or {}).get("total_s")
    return {
        "run_id": manifest.get("id"),
        "experiment": manifest.get("experiment"),
        "paper": info.get("paper", ""),
        "paper_label": info.get("paper_label", info.get("paper", "")),
        "title": info.get("title", ""),
        "figure": info.get("figure", ""),
        "preset": manifest.get("preset", ""),
        "data": data_summary(manifest),
        "seed": manifest.get("seed"),
        "status": manifest.get("status"),
        "error": manifest.get("error"),
        "zero_error_epoch": manifest.get("zero_error_epoch"),
        "total_s": float(total) if isinstance(total, (int, float)) else None,
        "finished": (manifest.get("timings") or {}).get("finished"),
        "path": os.path.relpath(path, root).replace(os.sep, "/"),
        "report": (
            os.path.relpath(report, root).replace(os.sep, "/") if report.is_file() else None
        ),
        "claims": claim_part,
        "claims_problem": problem,
    }


def render_index(document: Mapping[str, Any]) -> str:
    """The HTML text of the index page for an :func:`collect_index` document."""
    runs = document.get("runs") or []
    status_counts = document.get("status_counts") or {}
    claim_counts = document.get("claim_counts") or {}
    statuses = " ".join(status_badge(s) + f" {esc(n)}" for s, n in status_counts.items())
    verdicts = " ".join(
        verdict_badge(v) + f" {esc(claim_counts.get(v, 0))}" for v in _shown(claim_counts)
    )
    parts = [
        f'<h1>collapselab runs</h1>\n<p class="sub">{esc(document.get("root"))} \u00b7 '
        f"generated {esc(document.get('generated'))}</p>",
        "<h2>Summary</h2>",
        f"<p>{esc(len(runs))} run(s): {statuses or esc(None)}</p>",
        f"<p>Empirical claims: {verdicts}</p>",
        _errata_line(document.get("erratum_counts") or {}),
        _tiers_line(document.get("tier_counts") or {}, document.get("tiers_apart") or ()),
        _papers_section(document.get("papers") or []),
        f"<p>Total run time: {esc(fmt_seconds(document.get('total_run_s')))}</p>",
        _reproduce_section(document.get("reproduce")),
        "<h2>Runs</h2>",
        _runs_table(runs) if runs else "<p>No runs.</p>",
    ]
    return page("collapselab index", "\n".join(p for p in parts if p))


def _errata_line(counts: Mapping[str, Any]) -> str:
    total = sum(int(counts.get(k, 0) or 0) for k in _OUTCOMES)
    if not total:
        return ""
    return (
        f"<p>Erratum demonstrations (counted apart): {esc(counts.get('confirmed', 0))} of "
        f"{esc(total)} confirm the published error, {esc(counts.get('not confirmed', 0))} "
        f"{'does' if counts.get('not confirmed', 0) == 1 else 'do'} not, "
        f"{esc(counts.get('not evaluable', 0))} not evaluable.</p>"
    )


def _tiers_line(tiers: Mapping[str, Mapping[str, int]], apart: Any) -> str:
    text = _tiers_cell(tiers, apart)
    return "" if text == "\u2014" else f"<p>By tier (per tier, the papers together):<br>{text}</p>"


def _papers_section(papers: list[Mapping[str, Any]]) -> str:
    if not papers:
        return ""
    rows = []
    for group in papers:
        empirical, errata = group["empirical"], group["errata"]
        rows.append(
            (
                esc(group["paper_label"]),
                esc(group["preset"]),
                f'<td class="num">{esc(group["runs"])}</td>',
                f'<td class="num">{esc(_holding_text(empirical))}</td>',
                f'<td class="num">{esc(errata["confirmed"])} / {esc(errata["total"])}</td>',
                _tiers_cell(group.get("tiers") or {}, group.get("tiers_apart") or ()),
            )
        )
    header = (
        "paper",
        "preset",
        "runs",
        "empirical claims holding, of those evaluated",
        "erratum demonstrations confirming",
        "by tier (erratum and ambiguity apart from every fraction)",
    )
    return "<h2>Papers</h2>\n" + table(header, rows)


def _tiers_cell(tiers: Mapping[str, Mapping[str, int]], apart: Any) -> str:
    # one line per tier with claims: "paper, substituted: 10 / 15 hold (67%)"
    lines = [
        f"{esc(tier)}: {esc(tier_text(tier, counts, apart))}"
        for tier, counts in tiers.items()
        if tier_text(tier, counts, apart) != "none"
    ]
    return "<br>".join(lines) or "\u2014"


def _holding_text(empirical: Mapping[str, int]) -> str:
    # "34 / 65 (52%), 5 not evaluable": the share is of the claims a verdict was reached on
    holds, evaluated = empirical["holds"], empirical["evaluated"]
    text = f"{holds} / {evaluated}" + (f" ({100 * holds / evaluated:.0f}%)" if evaluated else "")
    text += f", {empirical[_INCONCLUSIVE]} inconclusive" if empirical.get(_INCONCLUSIVE) else ""
    missing = empirical["not evaluable"]
    return text + (f", {missing} not evaluable" if missing else "")


def _ended(reproduce: Mapping[str, Any]) -> str:
    """``"finished"``, or what stopped the reproduction (``"interrupted by SIGTERM at"``)."""
    stopped = reproduce.get("interrupted")
    return f"<b>{esc(stopped)}</b> at" if stopped else "finished"


def _reproduce_section(reproduce: Mapping[str, Any] | None) -> str:
    if not reproduce:
        return ""
    head = (
        f"<p>Paper <b>{esc(reproduce.get('paper'))}</b>, preset <b>{esc(reproduce.get('preset'))}"
        f"</b>, seed {esc(reproduce.get('seed'))}, device {esc(reproduce.get('device'))}; "
        f"{_ended(reproduce)} {esc(reproduce.get('finished'))} after "
        f"{esc(fmt_seconds(reproduce.get('wall_s')))}"
        f"{esc(_measured_text(reproduce.get('machine'), reproduce.get('load')))}.</p>"
    )
    rows = [
        (
            esc(item.get("experiment")),
            esc(item.get("run_id")),
            esc(item.get("outcome"))
            + (" (resumed: time of this part)" if item.get("resumed") else ""),
            f'<td class="num">{esc(fmt_seconds(item.get("seconds")))}</td>',
            f'<td class="num">{esc(_load_text(item.get("load")))}</td>',
            esc(item.get("error") or ""),
        )
        for item in reproduce.get("experiments") or []
    ]
    columns = ("experiment", "run", "outcome", "time", "load (start, end)", "error")
    body = table(columns, rows, wrap=(5,))
    return "<h2>Last reproduce</h2>\n" + head + body


def _load_text(load: object) -> str:
    # The 1-minute load averages at the start and the end ("" for records that have none).
    if not isinstance(load, (list, tuple)) or not all(isinstance(x, (int, float)) for x in load):
        return ""
    return ", ".join(f"{x:.1f}" for x in load)


def machine_text(machine: Mapping[str, Any]) -> str:
    """The machine of a measurement in words, from :func:`collapselab.experiments.reproduce.
    machine_facts`'s dictionary: ``"2 CPU cores (x86_64, Python 3.11.7, torch 2.13.0+cpu,
    2 threads)"``. The index and ``runtimes.json``'s campaigns both say it this way."""
    m = machine.get
    return (
        f"{m('cpus')} CPU cores ({m('processor')}, Python {m('python')}, torch {m('torch')}, "
        f"{m('torch_threads')} threads)"
    )


def _measured_text(machine: object, load: object) -> str:
    # " on <machine> at commit <c>, load average ..." ("" for records without machine facts)
    if not isinstance(machine, Mapping):
        return ""
    commit = machine.get("commit")
    text = f" on {machine_text(machine)}" + (f" at commit {commit}" if commit else "")
    loads = _load_text(load)
    return text + (f", load average {loads} at the start and the end" if loads else "")


def _runs_table(runs: list[Mapping[str, Any]]) -> str:
    rows = []
    for run in runs:
        run_id = esc(run.get("run_id"))
        link = (
            f'<a href="{esc(urllib.parse.quote(run["report"]))}">{run_id}</a>'
            if run.get("report")
            else run_id
        )
        claims = run.get("claims") or {}
        summary = claims.get("summary") or {}
        counts = " / ".join(esc(summary.get(v, 0)) for v in _VERDICTS) if claims else "\u2014"
        if summary.get(_INCONCLUSIVE):
            counts += f" ({esc(summary[_INCONCLUSIVE])} inconclusive)"
        verdicts = "<br>".join(
            [
                *(
                    f"{verdict_badge(str(v))} {esc(name)}{_tier_note(claims, name)}"
                    for name, v in (claims.get("verdicts") or {}).items()
                ),
                *(
                    f"{erratum_badge(outcome)} {esc(name)}{_tier_note(claims, name)}"
                    for name, outcome in (claims.get("erratum_outcomes") or {}).items()
                ),
            ]
        )
        status = status_badge(str(run.get("status")))
        if run.get("error"):
            status += f'<br><span class="small">{esc(run["error"])}</span>'
        title = esc(run.get("title"))
        if run.get("figure"):
            title = f"{esc(run['figure'])}: {title}"
        title += f'<br><span class="small">data: {esc(run.get("data"))}</span>'
        rows.append(
            (
                link,
                esc(run.get("paper_label")),
                title,
                esc(run.get("preset")),
                f'<td class="num">{esc(run.get("seed"))}</td>',
                status,
                f'<td class="num">{esc(fmt_number(run.get("zero_error_epoch")))}</td>',
                f'<td class="num">{counts}</td>',
                verdicts or "\u2014",
                f'<td class="num">{esc(fmt_seconds(run.get("total_s")))}</td>',
            )
        )
    header = (
        "run (report)",
        "paper",
        "figure / title",
        "preset",
        "seed",
        "status",
        "zero-error epoch",
        "holds / does not / n.e.",
        "claims",
        "time",
    )
    # Ten columns must fit a narrow window too: their text may break anywhere.
    return table(header, rows, wrap=(0, 1, 2, 3, 5, 8))


def _tier_note(claims: Mapping[str, Any], name: str) -> str:
    # " (paper, substituted)" after a claim's name; "post hoc" where its reading changed
    # after results had been seen
    tier = (claims.get("claim_tiers") or {}).get(name)
    if not tier:
        return ""
    post_hoc = ", post hoc" if name in (claims.get("post_hoc") or []) else ""
    return f' <span class="small">({esc(tier)}{post_hoc})</span>'


def write_index(
    root: str | os.PathLike[str], reproduce: Mapping[str, Any] | None = None
) -> tuple[Path, Path]:
    """Write ``index.html`` and ``index.json`` at ``root``; returns their paths.

    Without ``reproduce``, the ``"reproduce"`` record of an existing ``index.json`` is kept.
    """
    root = Path(root)
    if reproduce is None:
        reproduce = _previous_reproduce(root / INDEX_JSON)
    document = collect_index(root, reproduce)
    json_path = atomic_write(
        root / INDEX_JSON, json.dumps(document, indent=2, allow_nan=False) + "\n"
    )
    html_path = atomic_write(root / INDEX_HTML, render_index(document))
    return html_path, json_path


def _previous_reproduce(path: Path) -> Mapping[str, Any] | None:
    if not path.is_file():
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            previous = json.load(handle)
    except (OSError, json.JSONDecodeError):
        return None
    value = previous.get("reproduce") if isinstance(previous, dict) else None
    return value if isinstance(value, Mapping) else None
