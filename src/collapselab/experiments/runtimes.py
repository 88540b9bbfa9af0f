"""Measured wall times of the built-in experiments, from one file (``runtimes.json``).

The times that ``collapselab list`` shows, that the README quotes and that a reproduction's
progress row counts down from are measurements: ``benchmarks/record_runtimes.py`` writes
them into ``runtimes.json`` from the index of a ``collapselab reproduce`` run (each
experiment's wall time and the machine's load average when it started and ended), under a
*campaign* that says which command ran, on which machine, at which commit. Nothing here is
typed in by hand, so a stated time cannot drift from what was measured.

A built-in registration takes its times with ``Experiment(..., **stated_runtimes(id))``; an
experiment registered from outside the package states its own ``runtime_quick``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

RUNTIMES_FILE = Path(__file__).with_name("runtimes.json")
"""The measured runtimes of the built-in experiments (package data)."""

NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Campaign:
    """One measuring session: a command run on a machine at a commit.

    Attributes:
        name: the key the measurements refer to (e.g. ``"standard-2026-11-27"``).
        command: what ran (``"collapselab reproduce all --preset standard"``).
        date: when (ISO date).
        commit: the git commit measured (``""`` when unknown).
        cpus: the machine's CPU count.
        machine: the machine in words (architecture, Python, torch, threads).
        note: what else ran beside it, if anything.
    """

    name: str
    command: str
    date: str
    commit: str
    cpus: int
    machine: str
    note: str = ""

    def describe(self) -> str:
        """``"<command> on <machine>, <date> (<note>)"``."""
        text = f"`{self.command}` on {self.machine}, {self.date}"
        return text + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Measurement:
    """One experiment's wall time at one preset.

    Attributes:
        seconds: the wall time.
        campaign: the :class:`Campaign` it was measured in.
        load: the machine's 1-minute load average when it started and ended (it counts the
            experiment's own processes), ``None`` where not recorded.
    """

    seconds: float
    campaign: Campaign
    load: tuple[float, float] | None = None

    def text(self, with_load: bool = True) -> str:
        """``"~1.7 min"``, with ``with_load`` ``"~1.7 min (2 cores, load 1.0-1.4)"``."""
        shown = "~" + format_duration(self.seconds)
        if not with_load:
            return shown
        load = f", load {_load_range(self.load)}" if self.load is not None else ""
        return f"{shown} ({self.campaign.cpus} cores{load})"


def format_duration(seconds: float) -> str:
    """A wall time as people say it: ``"6 s"``, ``"85 s"``, ``"1.7 min"``, ``"23 min"``,
    ``"1 h 39 min"`` (two significant figures below an hour)."""
    if seconds < 10:
        return f"{seconds:.0f} s" if seconds >= 1 else "<1 s"
    if seconds < 100:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    if minutes < 10:
        return f"{minutes:.1f} min"
    if minutes < 60:
        return f"{minutes:.0f} min"
    hours, rest = divmod(round(minutes), 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def _load_range(load: tuple[float, float]) -> str:
    low, high = sorted(load)
    return f"{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}-{high:.1f}"


@cache
def measurements(path: Path = RUNTIMES_FILE) -> dict[str, dict[str, Measurement]]:
    """Every measured runtime in ``path``: experiment id -> preset -> :class:`Measurement`.

    Raises:
        ValueError: the file is not a runtimes file (a measurement names no campaign).
    """
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    campaigns = {
        name: Campaign(name=name, **fields) for name, fields in document["campaigns"].items()
    }
    out: dict[str, dict[str, Measurement]] = {}
    for experiment_id, presets in document["runtimes"].items():
        for preset, entry in presets.items():
            if entry["campaign"] not in campaigns:
                raise ValueError(
                    f"{path}: {experiment_id} ({preset}) names campaign {entry['campaign']!r}, "
                    f"which the file does not describe"
                )
            load = tuple(entry["load"]) if entry.get("load") else None
            out.setdefault(experiment_id, {})[preset] = Measurement(
                float(entry["seconds"]), campaigns[entry["campaign"]], load
            )
    return out


def measured(experiment_id: str, preset: str) -> Measurement | None:
    """The measured runtime of ``experiment_id`` at ``preset``, or ``None``."""
    return measurements().get(experiment_id, {}).get(preset)


def stated_runtimes(experiment_id: str) -> dict[str, Any]:
    """``runtime_quick`` and ``runtimes`` for a built-in :class:`Experiment`, as text.

    The quick time is shown beside the id (its machine and load in ``list``'s footer), the
    other presets' with their cores and load; an unmeasured quick preset says
    :data:`NOT_MEASURED` (the test suite requires every built-in to be measured).
    """
    by_preset = measurements().get(experiment_id, {})
    quick = by_preset.get("quick")
    return {
        "runtime_quick": quick.text(with_load=False) if quick is not None else NOT_MEASURED,
        "runtimes": {p: m.text() for p, m in by_preset.items() if p != "quick"},
    }


def quick_campaigns() -> list[Campaign]:
    """The campaigns the quick times come from, in the order first used (``list``'s footer)."""
    seen: dict[str, Campaign] = {}
    for presets in measurements().values():
        if "quick" in presets:
            seen.setdefault(presets["quick"].campaign.name, presets["quick"].campaign)
    return list(seen.values())
