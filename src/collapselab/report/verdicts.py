"""Noise-aware verdicts and premises in the reports (issue 35, items 3 and 6).

A ``claims.json`` entry decided from an interval over seeds or ensemble members has
``interval`` (``estimate``, ``low``, ``high``, ``level``, ``method``, ``members`` and, for
a bootstrap, ``resamples`` and ``seed``; :mod:`collapselab.experiments.intervals`); an entry
of a claim with a premise has ``premise`` (``statement``, ``met``, ``values``, ``detail``).
This module puts both in words, for the run report, the index and the command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collapselab.report._html import badge, esc


def _number(value: Any) -> str:
    return "nan" if value is None else f"{float(value):.4g}"


def interval_text(record: Mapping[str, Any]) -> str:
    """``"0.157 [0.121, 0.196] (95% percentile bootstrap over 10 members, 2000 resamples,
    seed 0)"`` from an ``interval`` record."""
    over = " and ".join(str(m) for m in record.get("members") or [])
    text = (
        f"{_number(record.get('estimate'))} [{_number(record.get('low'))}, "
        f"{_number(record.get('high'))}] ({100 * float(record.get('level', 0)):.3g}% "
        f"{record.get('method')} over {over} members"
    )
    if record.get("resamples"):
        text += f", {record['resamples']} resamples, seed {record.get('seed')}"
    return text + ")"


def premise_text(record: Mapping[str, Any]) -> str:
    """``"premise met: the terminal phase was reached (first zero-error epoch 12)"``."""
    met = "met" if record.get("met") else "NOT met"
    return f"premise {met}: {record.get('statement')} ({record.get('detail')})"


def interval_cell(entry: Mapping[str, Any]) -> str:
    """The entry's interval in small print under its verdict; ``""`` without one."""
    record = entry.get("interval")
    if not isinstance(record, Mapping):
        return ""
    return f'<br><span class="small">interval {esc(interval_text(record))}</span>'


def premise_cell(entry: Mapping[str, Any]) -> str:
    """The entry's premise check in small print (a badge where it was not met); ``""``
    without a premise."""
    record = entry.get("premise")
    if not isinstance(record, Mapping):
        return ""
    flag = "" if record.get("met") else badge("premise not met", "warn") + " "
    return f'<br><span class="small">{flag}{esc(premise_text(record))}</span>'
