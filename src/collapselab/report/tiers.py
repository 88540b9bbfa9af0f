"""Claims by tier in the reports (issue 35): counts per tier, each claim's tier and history.

A ``claims.json`` document annotated by :mod:`collapselab.experiments.preregistration` has
``tiers`` (per tier: verdict counts for the counted tiers, demonstration outcomes for the
tiers apart), ``tiers_apart`` (``erratum``, ``ambiguity``: apart from every fraction) and, per
entry, ``tier``, ``tier_record`` (the substitution, premise and prediction, or note),
``history`` (the changes of its reading) and ``reading_registered``. Documents written
before tiers existed have none of these: nothing is shown for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from collapselab.report._html import badge, esc, table

_VERDICTS = ("holds", "does not hold", "not evaluable")
_OUTCOMES = ("confirmed", "not confirmed", "not evaluable")
_RECORD_WORDS = {
    "substituted": "substituted",
    "premise": "premise",
    "prediction": "prediction tested",
    "note": "why here",
}


def add_tier_counts(into: dict[str, dict[str, int]], document: Mapping[str, Any] | None) -> None:
    """Add a document's ``tiers`` counts to ``into`` (tier -> counts), keeping tier order."""
    for tier, counts in ((document or {}).get("tiers") or {}).items():
        if isinstance(counts, Mapping):
            target = into.setdefault(tier, {})
            for key, value in counts.items():
                target[key] = target.get(key, 0) + int(value or 0)


def tier_text(tier: str, counts: Mapping[str, int], apart: Sequence[str]) -> str:
    """``"12 / 14 hold (86%), 1 not evaluable"`` for a counted tier, ``"3 / 3 confirmed"``
    for a tier apart (the demonstrations' outcomes); ``"none"`` without claims.

    An ``inconclusive`` claim counts among the evaluated (a share of what the run could
    test, not only of what it decided: ``"12 / 15 hold (80%), 1 inconclusive"``); the not
    evaluable whose premise was not met are named (``"2 not evaluable (2 premise not
    met)"``), so a premise that fails often is seen."""
    if tier in apart:
        total = sum(int(counts.get(k, 0)) for k in _OUTCOMES)
        if not total:
            return "none"
        undecided = int(counts.get("inconclusive", 0))
        missing = int(counts.get("not evaluable", 0))
        return (
            f"{counts.get('confirmed', 0)} / {total + undecided} confirmed"
            + (f", {undecided} inconclusive" if undecided else "")
            + (f", {missing} not evaluable" if missing else "")
        )
    holds, fails = int(counts.get("holds", 0)), int(counts.get("does not hold", 0))
    undecided = int(counts.get("inconclusive", 0))
    missing, evaluated = int(counts.get("not evaluable", 0)), holds + fails + undecided
    if not evaluated and not missing:
        return "none"
    text = f"{holds} / {evaluated} hold" + (
        f" ({100 * holds / evaluated:.0f}%)" if evaluated else ""
    )
    text += f", {undecided} inconclusive" if undecided else ""
    premise = int(counts.get("premise not met", 0))
    reason = f" ({premise} premise not met)" if premise else ""
    return text + (f", {missing} not evaluable{reason}" if missing else "")


def tiers_table(
    tiers: Mapping[str, Mapping[str, int]], apart: Sequence[str], post_hoc: Sequence[str] = ()
) -> str:
    """A table of the claims by tier (the tiers apart marked so), and the post-hoc claims."""
    if not tiers:
        return ""
    aside = ' <span class="small">(apart from every fraction)</span>'
    rows = [
        (esc(tier) + (aside if tier in apart else ""), esc(tier_text(tier, counts, apart)))
        for tier, counts in tiers.items()
    ]
    text = table(("tier", "claims"), rows)
    if post_hoc:
        text += (
            '<p class="small">Read after results had been seen (a bound, reading or regime '
            f"rule changed post hoc; see each claim's history): {esc(', '.join(post_hoc))}.</p>"
        )
    return text


def tiers_line(tiers: Mapping[str, Mapping[str, int]], apart: Sequence[str]) -> str:
    """The non-empty tiers in one line: ``paper 12 / 14 hold (86%); erratum 1 / 1 confirmed``."""
    parts = [
        f"{tier} {tier_text(tier, counts, apart)}"
        for tier, counts in tiers.items()
        if tier_text(tier, counts, apart) != "none"
    ]
    return "; ".join(parts)


def tier_cell(entry: Mapping[str, Any]) -> str:
    """A claim's tier as a badge with its record (substitution, premise and prediction, or
    why it is apart) in small print; ``""`` for an entry without a tier."""
    tier = entry.get("tier")
    if not tier:
        return ""
    record = entry.get("tier_record") or {}
    lines = "".join(
        f'<br><span class="small">{esc(_RECORD_WORDS.get(k, k))}: {esc(v)}</span>'
        for k, v in record.items()
    )
    return "<br>" + badge(str(tier), "na") + lines


def history_cell(entry: Mapping[str, Any]) -> str:
    """A claim's registered history in small print: each change of its reading (date,
    commit, kind, whether results had been seen, before and after, the reason), and a
    warning when the evaluated threshold is not the registered reading."""
    parts = []
    if entry.get("tier") and entry.get("reading_registered") is False:
        parts.append(badge("reading not registered", "warn"))
    for change in entry.get("history") or []:
        seen = "results seen: post hoc" if change.get("results_seen") else "before results"
        renamed = (
            f"; the claim was named {change['renamed_from']}" if change.get("renamed_from") else ""
        )
        parts.append(
            f"<details><summary>changed {esc(change.get('date'))} ({esc(change.get('commit'))}, "
            f"{esc(change.get('kind'))}, {esc(seen)})</summary>"
            f"was: {esc(change.get('before'))}<br>now: {esc(change.get('after'))}<br>"
            f"{esc(change.get('reason'))}{esc(renamed)}</details>"
        )
    if not parts:
        return ""
    return '<br><span class="small">' + "".join(parts) + "</span>"
