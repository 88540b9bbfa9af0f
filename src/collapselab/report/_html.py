"""Small HTML building blocks shared by the run report and the index (all text escaped)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

VERDICT_CLASS = {
    "holds": "ok",
    "does not hold": "bad",
    "inconclusive": "warn",
    "not evaluable": "na",
}
STATUS_CLASS = {
    "completed": "ok",
    "failed": "bad",
    "damaged": "bad",
    "interrupted": "warn",
    "running": "na",
    "created": "na",
}

# The page is 1400 px wide at most: figures (at most 1368 px, collapselab.report.plots) show
# at full size. Long unbroken text (paths, errors, JSON, settings) may break anywhere, in the
# cells that hold it (class "wrap"), small print, <pre> and <code>, so it never widens the
# page; other cells keep their words whole.
CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif;
       margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #1f2328; line-height: 1.4; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #d0d7de; padding-bottom: .2em; }
.sub { color: #59636e; margin-top: 0; }
table { border-collapse: collapse; margin: .5em 0; font-size: 0.88em; max-width: 100%; }
th, td { border: 1px solid #d0d7de; padding: .3em .5em; text-align: left; vertical-align: top; }
td.wrap, .small, code { overflow-wrap: anywhere; }
td.words { overflow-wrap: break-word; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.badge { display: inline-block; padding: .05em .5em; border-radius: 1em; font-weight: 600;
         white-space: nowrap; margin: .05em 0; }
.ok { background: #dafbe1; color: #116329; }
.bad { background: #ffebe9; color: #a40e26; }
.warn { background: #fff8c5; color: #7d4e00; }
.na { background: #eaeef2; color: #424a53; }
pre { background: #f6f8fa; padding: .8em; font-size: .85em; white-space: pre-wrap;
      overflow-wrap: anywhere; }
figure { margin: 1.2em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #d0d7de; display: block; }
figcaption { color: #1f2328; font-size: .9em; max-width: 80em; margin-top: .3em; }
figcaption .name { color: #59636e; }
.note { background: #fff8c5; border: 1px solid #d4a72c; padding: .5em .8em; margin: .5em 0; }
.small { font-size: .85em; color: #59636e; }
"""


def breakable(name: Any) -> str:
    """A snake_case name as escaped HTML that a narrow cell breaks after an underscore
    (``zero_error_<wbr>epoch``), never inside a word."""
    return esc(name).replace("_", "_<wbr>")


def esc(value: Any) -> str:
    """``value`` as escaped HTML text (``None`` as an em dash)."""
    if value is None:
        return "\u2014"
    return html.escape(str(value), quote=True)


def fmt_number(value: Any) -> str:
    """A number for display: 4 significant digits for floats, NaN/None as text."""
    if value is None:
        return "\u2014"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return f"{value:.4g}"
    return str(value)


def fmt_seconds(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return "\u2014"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def badge(text: str, css_class: str) -> str:
    return f'<span class="badge {esc(css_class)}">{esc(text)}</span>'


def verdict_badge(verdict: str) -> str:
    return badge(verdict, VERDICT_CLASS.get(verdict, "na"))


def status_badge(status: str) -> str:
    return badge(status, STATUS_CLASS.get(status, "na"))


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[str]],
    raw: bool = True,
    wrap: Iterable[int] = (),
) -> str:
    """An HTML table. ``rows`` hold HTML fragments when ``raw`` (already escaped), else text;
    the cells of the columns ``wrap`` may break long words anywhere (class ``wrap``)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    wrapped = set(wrap)
    body = []
    for row in rows:
        cells = row if raw else [esc(c) for c in row]
        body.append("<tr>" + "".join(_cell(c, i in wrapped) for i, c in enumerate(cells)) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _cell(fragment: str, wrap: bool = False) -> str:
    if fragment.startswith("<td"):
        return fragment
    return f'<td class="wrap">{fragment}</td>' if wrap else f"<td>{fragment}</td>"


def key_value_table(items: Mapping[str, Any]) -> str:
    """Two-column table of ``key: value`` (values formatted as numbers or text)."""
    rows = [(esc(k), esc(fmt_number(v))) for k, v in items.items()]
    return table(("key", "value"), rows, wrap=(0, 1))


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys; lists shown as JSON text."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value)
        else:
            out[name] = value
    return out


def page(title: str, body: str) -> str:
    """A complete, self-contained HTML document."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n"
        "</body>\n</html>\n"
    )


def json_clean(value: Any) -> Any:
    """``value`` with NaN/inf floats replaced by ``None`` (strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_clean(v) for v in value]
    return value
