"""``report.html``: one self-contained page per run.

The page shows the experiment, paper and figure, the data the run used (and why, when a
preset fell back to bundled data), the status (and the error of a failed run, once), the
zero-error epoch (runs that train), the empirical claims and, apart, the erratum
demonstrations (their outcome in their own words: "published formula confirmed wrong" /
"... not refuted"), every ``figures/*.png`` embedded as a base64 ``<img>`` at its own size
with its caption and a link to the file (to open it full size), the final model-level
metric values, the configuration, timings and versions. Plain HTML with inline CSS: no
script, no external resource, opens from disk. All text is escaped with
:func:`html.escape`. Written with the store's atomic write, so the file has the same mode
as every other file of the run.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from collapselab.report._html import (
    badge,
    breakable,
    esc,
    flatten,
    fmt_number,
    fmt_seconds,
    key_value_table,
    page,
    status_badge,
    table,
    verdict_badge,
)
from collapselab.report.tiers import history_cell, tier_cell, tiers_line, tiers_table
from collapselab.report.verdicts import interval_cell, premise_cell
from collapselab.store import CLAIMS_FILE, FIGURES_DIR, REPORT_FILE, Run, atomic_write

_MAX_FINAL_ROWS = 60
_SHOWN_ELSEWHERE = {
    "id",
    "experiment",
    "preset",
    "config",
    "seed",
    "status",
    "error",
    "versions",
    "timings",
    "durations",
    "train_config",
    "experiment_info",
    "traceback",
    "final_metrics",
    "zero_error_epoch",
    "metrics_rows",
}


def read_claims(run_path: str | Path) -> tuple[dict[str, Any] | None, str | None]:
    """The run's ``claims.json`` and ``None``, or ``None`` and why it could not be read."""
    path = Path(run_path) / CLAIMS_FILE
    if not path.is_file():
        return None, None
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        return None, f"{CLAIMS_FILE} could not be read: {error}"
    if not isinstance(document, dict) or not isinstance(document.get("claims"), list):
        return None, f"{CLAIMS_FILE} has no 'claims' list"
    return document, None


def figure_files(run_path: str | Path, order: Sequence[str] = ()) -> list[Path]:
    """``figures/*.png`` of a run: those named in ``order`` first, then the rest by name."""
    directory = Path(run_path) / FIGURES_DIR
    if not directory.is_dir():
        return []
    found = {p.stem: p for p in directory.glob("*.png") if p.is_file()}
    ordered = [found.pop(name) for name in order if name in found]
    return ordered + [found[name] for name in sorted(found)]


def render_run_report(
    run: Run,
    claims: Mapping[str, Any] | None = None,
    notes: Sequence[str] = (),
) -> str:
    """The HTML text of the report of ``run``.

    Args:
        run: the run to describe.
        claims: the ``claims.json`` document; read from the run directory when ``None``.
        notes: remarks shown at the top (e.g. a figure that could not be redrawn).
    """
    notes = list(notes)
    if claims is None:
        claims, problem = read_claims(run.path)
        if problem:
            notes.append(problem)
    manifest = run.manifest
    info = manifest.get("experiment_info") or {}
    data = manifest.get("data") if isinstance(manifest.get("data"), Mapping) else {}
    notes = [*(data.get("notes") or []), *notes]
    parts = [
        _header(run, manifest, info, claims),
        *[f'<div class="note">{esc(n)}</div>' for n in notes],
        _error_section(manifest),
        _overview_section(manifest),
        _claims_section(claims),
        _figures_section(run.path, info.get("figures") or (), info.get("captions") or {}),
        _final_values_section(run),
        _config_section(manifest),
        _timings_section(manifest),
        _versions_section(manifest),
    ]
    return page(f"{run.id}: collapselab report", "\n".join(p for p in parts if p))


def write_run_report(run: Run | str | Path, notes: Sequence[str] = ()) -> Path:
    """Write ``report.html`` into the run directory and return its path."""
    if not isinstance(run, Run):
        run = Run.open(run)
    return atomic_write(run.path / REPORT_FILE, render_run_report(run, notes=notes))


# ------------------------------------------------------------------------- sections
SHOWN_VERDICTS = ("holds", "does not hold", "inconclusive", "not evaluable")
"""The verdicts the reports count, in order (``inconclusive``: :mod:`.verdicts`)."""


def verdict_line(claims: Mapping[str, Any] | None) -> str:
    """One line of verdict counts for the top of a report (the claims table comes further
    down, after the overview): ``Claims: 3 hold, 1 does not hold``."""
    if not claims or not claims.get("claims"):
        return ""
    summary = claims.get("summary") or {}
    parts = [f"{verdict_badge(v)} {esc(summary.get(v, 0))}"
             for v in SHOWN_VERDICTS if summary.get(v)]  # fmt: skip
    errata = claims.get("errata") or {}
    if errata.get("confirmed"):
        parts.append(f"{esc(errata['confirmed'])} erratum demonstration(s) confirmed")
    by_tier = tiers_line(claims.get("tiers") or {}, claims.get("tiers_apart") or ())
    if by_tier:
        parts.append(f'<br><span class="small">by tier: {esc(by_tier)}</span>')
    return f'<p class="verdicts"><a href="#claims">Claims</a>: {" ".join(parts)}</p>'


def _header(
    run: Run, manifest: Mapping[str, Any], info: Mapping[str, Any],
    claims: Mapping[str, Any] | None = None,
) -> str:  # fmt: skip
    title = info.get("title") or ""
    heading = f"{run.experiment}: {title}" if title else run.experiment
    paper = info.get("paper_label") or info.get("paper") or ""
    paper_title = info.get("paper_title") or ""
    lines = []
    if paper_title:
        lines.append(esc(f"Paper {paper}: {paper_title}"))
    elif paper and paper != "demo":
        lines.append(esc(f"Paper {paper}"))
    if info.get("figure"):
        lines.append(f"Reproduces {esc(info['figure'])}")
    lines.append(
        f"Run <code>{esc(run.id)}</code> \u00b7 preset <b>{esc(run.preset or 'none')}</b> "
        f"\u00b7 seed {esc(run.seed)} \u00b7 {status_badge(run.status)}"
    )
    lines.append(f"Data: {esc(data_summary(manifest))}")
    sub = "<br>".join(lines)
    return f'<h1>{esc(heading)}</h1>\n<p class="sub">{sub}</p>\n{verdict_line(claims)}'


def _error_section(manifest: Mapping[str, Any]) -> str:
    error, trace = manifest.get("error"), manifest.get("traceback")
    if not error and not trace:
        return ""
    out = ["<h2>Error</h2>", f'<pre class="error">{esc(error or "see traceback")}</pre>']
    if trace:
        out.append(f"<details><summary>traceback</summary><pre>{esc(trace)}</pre></details>")
    return "\n".join(out)


def _overview_section(manifest: Mapping[str, Any]) -> str:
    durations = manifest.get("durations") or {}
    # Only a run that trains has a zero-error epoch (the training loop records the field,
    # also when the epoch is not reached); theory runs say nothing about it.
    trains = "zero_error_epoch" in manifest
    items: dict[str, Any] = {"status": manifest.get("status")}
    if trains:
        items["zero-error epoch"] = manifest.get("zero_error_epoch")
    items["total time"] = fmt_seconds(durations.get("total_s"))
    for key, value in manifest.items():
        if key in _SHOWN_ELSEWHERE or isinstance(value, (dict, list)):
            continue
        items[key.replace("_", " ")] = value
    rows = [(esc(k), esc(fmt_number(v))) for k, v in items.items()]
    caption = ""
    if trains:
        zero = manifest.get("zero_error_epoch")
        caption = (
            '<p class="small">Zero-error epoch: the first epoch with training accuracy exactly '
            "1 (start of the terminal phase of training); "
            + ("not reached." if zero is None else f"epoch {esc(zero)}.")
            + "</p>"
        )
    return "<h2>Overview</h2>\n" + table(("field", "value"), rows, wrap=(1,)) + caption


def data_summary(manifest: Mapping[str, Any]) -> str:
    """The data a run used, in one line, from its manifest's ``data`` record."""
    data = manifest.get("data")
    if isinstance(data, Mapping) and data.get("summary"):
        return str(data["summary"])
    return "not recorded (a run from before data sources were recorded)"


def _values_text(values: Mapping[str, Any]) -> str:
    if not values:
        return "\u2014"
    return "<br>".join(f"{breakable(k)} = {esc(fmt_number(v))}" for k, v in values.items())


_ERRATUM_CLASS = {
    "confirmed": "warn",
    "not confirmed": "na",
    "inconclusive": "warn",
    "not evaluable": "na",
}


def erratum_badge(erratum: Mapping[str, Any]) -> str:
    """The outcome of an erratum demonstration (its ``claims.json`` ``erratum`` record) in
    its own words, as a badge."""
    outcome = str(erratum.get("outcome", "not evaluable"))
    return badge(str(erratum.get("wording", outcome)), _ERRATUM_CLASS.get(outcome, "na"))


def _claims_section(claims: Mapping[str, Any] | None) -> str:
    if claims is None:
        return "<h2>Claims</h2>\n<p>No claims were evaluated for this run.</p>"
    entries = claims.get("claims") or []
    if not entries:
        return "<h2>Claims</h2>\n<p>This experiment declares no claims.</p>"
    empirical = [e for e in entries if e.get("kind", "empirical") != "erratum"]
    errata = [e for e in entries if e.get("kind") == "erratum"]
    evaluated = claims.get("evaluated")
    when = f'<p class="small">Evaluated {esc(evaluated)}.</p>' if evaluated else ""
    out = []
    tiers = tiers_table(
        claims.get("tiers") or {}, claims.get("tiers_apart") or (), claims.get("post_hoc") or ()
    )
    if tiers:
        out.append('<a id="tiers"></a><h2>Claims by tier</h2>\n' + tiers)
    if empirical:
        summary = claims.get("summary") or {}
        counts = " ".join(
            verdict_badge(v) + f" {esc(summary.get(v, 0))}"
            for v in SHOWN_VERDICTS
            if v != "inconclusive" or v in summary
        )
        out.append(
            f'<a id="claims"></a><h2>Claims</h2>\n<p>{counts}</p>\n' + _claims_table(empirical)
        )
    if errata:
        counts = claims.get("errata") or {}
        out.append(
            "<h2>Erratum demonstrations</h2>\n<p>These run the paper's formula or solver as "
            "printed where it was found wrong, to show the error; they are counted apart from "
            f"the claims above. {esc(counts.get('confirmed', 0))} of {esc(len(errata))} "
            "confirm the erratum." + _ambiguity_note(errata) + "</p>\n" + _claims_table(errata)
        )
    return "\n".join(out) + "\n" + when


def _ambiguity_note(errata: Sequence[Mapping[str, Any]]) -> str:
    # Demonstrations of tier "ambiguity" show a reading, not an error of the paper.
    names = [str(e.get("name")) for e in errata if e.get("tier") == "ambiguity"]
    if not names:
        return ""
    return (
        f" Of these, {esc(', '.join(names))} (tier ambiguity) demonstrate a reading of a text "
        "that can be read two ways, or a result applied outside its assumption, not an error."
    )


def _claims_table(entries: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for entry in entries:
        statement = esc(entry.get("statement", ""))
        source = entry.get("source")
        if source:
            statement += f'<br><span class="small">{esc(source)}</span>'
        threshold = esc(entry.get("threshold_text", ""))
        if entry.get("threshold") is not None:
            threshold += f'<br><span class="small">= {esc(fmt_number(entry["threshold"]))}</span>'
        threshold += history_cell(entry)
        verdict = verdict_badge(str(entry.get("verdict", "")))
        if entry.get("kind") == "erratum":
            verdict = erratum_badge(entry.get("erratum") or {})
            verdict += (
                f'<br><span class="small">claim {verdict_badge(str(entry.get("verdict")))}</span>'
            )
        rows.append(
            (
                f"<b>{esc(entry.get('name', ''))}</b>{tier_cell(entry)}",
                statement,
                f'<td class="words">{_values_text(entry.get("values") or {})}</td>',
                threshold,
                verdict + interval_cell(entry),
                esc(entry.get("detail", "")) + premise_cell(entry),
            )
        )
    header = ("claim (tier)", "statement (source)", "measured", "threshold", "verdict", "detail")
    # the measured values break after an underscore of a name, never inside a word
    return table(header, rows, wrap=(1, 3, 5))


def png_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` in pixels from a PNG's header, ``None`` if it is not a PNG."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


def _figures_section(run_path: Path, order: Sequence[str], captions: Mapping[str, str] = {}) -> str:
    files = figure_files(run_path, order)
    if not files:
        return "<h2>Figures</h2>\n<p>No figures.</p>"
    blocks = []
    for path in files:
        data = path.read_bytes()
        encoded = base64.b64encode(data).decode("ascii")
        size = png_size(data)
        # Width and height attributes: the figure shows at its own size (scaled down only
        # in a narrower window) and the page does not jump while images decode.
        dims = f' width="{size[0]}" height="{size[1]}"' if size else ""
        link = f"{FIGURES_DIR}/{path.name}"
        caption = captions.get(path.stem)
        text = esc(caption) if caption else f"Figure <code>{esc(path.stem)}</code>."
        blocks.append(
            f'<figure id="fig-{esc(path.stem)}"><a href="{esc(link)}" title="open full size">'
            f'<img src="data:image/png;base64,{encoded}" alt="{esc(caption or path.stem)}"'
            f"{dims}></a><figcaption>{text} "
            f'<span class="name">(<a href="{esc(link)}">{esc(path.name)}</a>, '
            f"{size[0] if size else '?'}×{size[1] if size else '?'} px; click to open "
            "full size)</span></figcaption></figure>"
        )
    return "<h2>Figures</h2>\n" + "\n".join(blocks)


def _final_values_section(run: Run) -> str:
    try:
        metrics = run.metrics()
    except Exception as error:  # a damaged table must not stop the report
        return f"<h2>Final values</h2>\n<p>metrics could not be read: {esc(error)}</p>"
    rows = metrics[metrics["layer"] == ""] if "layer" in metrics.columns else metrics.iloc[0:0]
    if rows.empty:
        return ""
    last = (
        rows.sort_values("step", kind="stable")
        .groupby(["split", "metric"], sort=True)
        .tail(1)
        .sort_values(["metric", "split"])
    )
    shown = last.head(_MAX_FINAL_ROWS)
    body = [
        (
            esc(r.metric),
            esc(r.split),
            f'<td class="num">{esc(fmt_number(float(r.value)))}</td>',
            f'<td class="num">{esc(_epoch_text(r.epoch))}</td>',
            f'<td class="num">{esc(int(r.step))}</td>',
        )
        for r in shown.itertuples(index=False)
    ]
    more = len(last) - len(shown)
    tail = f'<p class="small">{more} more not shown.</p>' if more > 0 else ""
    header = ("metric", "split", "last value", "epoch", "step")
    n_layers = metrics["layer"].nunique() - 1 if "layer" in metrics.columns else 0
    note = (
        f'<p class="small">Model-level rows only; per-layer values of {n_layers} layer(s) are in '
        "metrics.parquet.</p>"
        if n_layers > 0
        else ""
    )
    return "<h2>Final values</h2>\n" + table(header, body) + tail + note


def _epoch_text(epoch: Any) -> str:
    return "\u2014" if pd.isna(epoch) or int(epoch) < 0 else str(int(epoch))


def _config_section(manifest: Mapping[str, Any]) -> str:
    config = manifest.get("config") or {}
    out = ["<h2>Configuration</h2>"]
    out.append(key_value_table(flatten(config)) if config else "<p>empty</p>")
    train_config = manifest.get("train_config")
    if isinstance(train_config, Mapping) and train_config:
        out.append("<details><summary>training loop settings</summary>")
        out.append(key_value_table(flatten(train_config)))
        out.append("</details>")
    return "\n".join(out)


def _timings_section(manifest: Mapping[str, Any]) -> str:
    timings = manifest.get("timings") or {}
    durations = manifest.get("durations") or {}
    rows = [(esc(k), esc(fmt_number(v))) for k, v in flatten(timings).items()]
    rows += [(esc(k), esc(fmt_seconds(v))) for k, v in durations.items()]
    return "<h2>Timings</h2>\n" + table(("what", "when / how long"), rows, wrap=(1,))


def _versions_section(manifest: Mapping[str, Any]) -> str:
    versions = manifest.get("versions") or {}
    if not versions:
        return ""
    return "<h2>Versions</h2>\n" + key_value_table(versions)
