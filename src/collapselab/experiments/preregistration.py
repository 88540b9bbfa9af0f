"""Pre-registration: every claim's tier and registered reading, per paper, with their history.

Each paper package holds one register (``<paper>/preregistration.py``, a :class:`Register`)
that states, for every claim of the paper, in one place:

* its **tier** (:data:`TIERS`), how the claim stands to the paper:

  ``paper``
      a statement the paper makes about its own models or experiments, run as the paper
      ran it;
  ``paper, substituted``
      the paper's statement run with other data or architecture; the claim records what
      was substituted and why (:class:`Substitution`). A ``paper`` claim whose experiment
      substitutes at some presets only is ``paper, substituted`` at those presets
      (:attr:`Substitution.faithful` names the presets that run the paper's own);
  ``beyond``
      the project's own additions (a real-network check of a theory, a generalisation the
      implementer's notes derived), with their premise and the prediction they test;
  ``erratum``
      the demonstration of an error of the paper (a formula, solver or attribution);
  ``ambiguity``
      the demonstration of a reading where the paper (or its converted text) can be read
      two ways, or where it applies a result outside the assumption it was derived under.

  The first three are counted, each on its own (a fraction per tier); ``erratum`` and
  ``ambiguity`` are apart from every fraction (:data:`APART`) and are exactly the claims
  marked with an :class:`~collapselab.experiments.claims.Erratum`.

* its **reading**: the claim's threshold in words (``Claim.threshold``), which names the
  bound, the quantity read and the regime of runs it reads (the text is built from the
  constants the check compares with, so a changed bound changes it);

* its **bounds** (:attr:`Registered.bounds`, by name, e.g. ``{"bound": 0.2}``), for the
  claims that read them from here: such a claim takes its threshold text
  (:meth:`Register.reading`) and the numbers it compares with (:meth:`Register.bound`) from
  its register, the one source of truth; a :class:`Change` of such a claim states its new
  bounds (:attr:`Change.bounds`) beside its new reading, and the test checks that every
  registered bound is printed in the reading;

* its **history**: a :class:`Change` per change of a bound, a reading or a regime rule
  (date, commit, reason, whether results had been seen). The current reading of a claim
  is the last change's ``after``, else the reading registered first. A registered reading
  is never edited: a change is appended. ``tests/test_experiments_preregistration.py``
  fails when a claim's threshold differs from its register's current reading, and when a
  reading registered first is edited.

:func:`annotate` adds the tier, its record and the history to a ``claims.json`` document
(entries and per-tier counts); the reports show them from there.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collapselab.checks import check_choice
from collapselab.experiments.claims import INCONCLUSIVE, PREMISE_NOT_MET, premise_failed

PAPER = "paper"
SUBSTITUTED = "paper, substituted"
BEYOND = "beyond"
ERRATUM = "erratum"
AMBIGUITY = "ambiguity"
TIERS: tuple[str, ...] = (PAPER, SUBSTITUTED, BEYOND, ERRATUM, AMBIGUITY)
COUNTED: tuple[str, ...] = (PAPER, SUBSTITUTED, BEYOND)
"""The tiers with a fraction each (claims that hold, of those evaluated)."""
APART: tuple[str, ...] = (ERRATUM, AMBIGUITY)
"""The tiers apart from every fraction: erratum and ambiguity demonstrations."""

CHANGE_KINDS = ("bound", "reading", "regime rule")

REGISTERS: Mapping[str, str] = {
    "000": "collapselab.experiments.fd.preregistration",
    "001": "collapselab.experiments.pfc.preregistration",
    "002": "collapselab.experiments.pcbias.preregistration",
    "003": "collapselab.experiments.mse_nc.preregistration",
    "004": "collapselab.experiments.dlufm.preregistration",
}
"""Where each paper's register lives (module with a ``REGISTER``)."""


@dataclass(frozen=True)
class Substitution:
    """What a run puts in place of the paper's data or architecture, and why.

    Attributes:
        what: the substitute and what it replaces ("two-layer ReLU nets for VGG-19").
        why: the reason (CPU budget, files not distributable, ...).
        faithful: presets that run the paper's own data and architecture (where the claim
            is ``paper``); empty when every preset substitutes.
    """

    what: str
    why: str
    faithful: tuple[str, ...] = ()

    def text(self) -> str:
        return f"{self.what} ({self.why})"


@dataclass(frozen=True)
class Tiering:
    """How claims stand to their paper; ``None`` / ``""`` fields are inherited (a claim's
    :class:`Tiering` overrides its experiment's field by field).

    Attributes:
        tier: one of :data:`TIERS` (``paper`` with a :attr:`substitution` becomes
            ``paper, substituted`` at presets it does not name as faithful).
        substitution: what the run substitutes for the paper's data or architecture.
        premise: ``beyond``: what the check presumes of the run.
        prediction: ``beyond``: the theorem whose prediction it tests (the claim's
            ``source`` cites only what makes the statement).
        note: ``erratum`` / ``ambiguity``: why the claim is in that tier.
    """

    tier: str | None = None
    substitution: Substitution | None = None
    premise: str = ""
    prediction: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if self.tier is not None:
            check_choice("tier", self.tier, TIERS)

    def over(self, base: Tiering) -> Tiering:
        """This tiering with ``base``'s fields where this one leaves them unset."""
        return Tiering(
            self.tier or base.tier,
            self.substitution or base.substitution,
            self.premise or base.premise,
            self.prediction or base.prediction,
            self.note or base.note,
        )


@dataclass(frozen=True)
class Change:
    """One change of a registered claim's bound, reading or regime rule.

    Attributes:
        date: ISO date of the change.
        commit: the commit that made it (short hash).
        claims: the claims it changed (their names now).
        kind: ``"bound"``, ``"reading"`` or ``"regime rule"``.
        before: ``claim -> reading before the change``.
        after: ``claim -> reading after it`` (equal to the claim's threshold when it is the
            last change).
        reason: why.
        results_seen: whether results of the claims had been seen when it was made (a
            change after results is post hoc; its verdicts are not confirmatory).
        renamed: ``claim -> its name before the change``, where the change renamed it.
        bounds: ``claim -> {name: value}``, the bounds after the change of the claims that
            read their bounds from the register (:meth:`Register.bound`), where it set any.
    """

    date: str
    commit: str
    kind: str
    before: Mapping[str, str]
    after: Mapping[str, str]
    reason: str
    results_seen: bool
    renamed: Mapping[str, str] = field(default_factory=dict)
    bounds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, CHANGE_KINDS)
        if set(self.before) != set(self.after):
            raise ValueError(f"change {self.commit}: before and after name different claims")

    @property
    def claims(self) -> tuple[str, ...]:
        return tuple(self.after)

    def entry(self, claim: str) -> dict[str, Any]:
        """The ``claims.json`` record of this change for ``claim``."""
        record = {
            "date": self.date,
            "commit": self.commit,
            "kind": self.kind,
            "before": self.before[claim],
            "after": self.after[claim],
            "reason": self.reason,
            "results_seen": self.results_seen,
        }
        if claim in self.renamed:
            record["renamed_from"] = self.renamed[claim]
        if claim in self.bounds:
            record["bounds"] = dict(self.bounds[claim])
        return record


@dataclass(frozen=True)
class Registered:
    """A claim's registration: the reading registered first, its own tiering (which
    overrides its experiment's) and, for a claim that reads them from here, the bounds
    registered first (by name)."""

    reading: str
    tiering: Tiering = field(default_factory=Tiering)
    bounds: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Register:
    """One paper's pre-registration.

    Attributes:
        paper: the paper's number.
        registered: date and commit the register was started (readings registered then).
        experiments: experiment id -> the default :class:`Tiering` of its claims.
        claims: claim name -> :class:`Registered` (a name shared by several experiments of
            the paper is one claim with one reading).
        changes: every change since, oldest first.
    """

    paper: str
    registered: str
    experiments: Mapping[str, Tiering]
    claims: Mapping[str, Registered]
    changes: tuple[Change, ...] = ()

    def reading(self, claim: str) -> str:
        """The claim's current registered reading: the last change's ``after``, else the
        reading registered first."""
        reading = self.claims[claim].reading
        for change in self.changes:
            if claim in change.after:
                reading = change.after[claim]
        return reading

    def bounds(self, claim: str) -> dict[str, float]:
        """The claim's current registered bounds: those registered first, each replaced by
        the last change that set it."""
        bounds = dict(self.claims[claim].bounds)
        for change in self.changes:
            bounds |= dict(change.bounds.get(claim, {}))
        return bounds

    def bound(self, claim: str, name: str = "bound") -> float:
        """One registered bound of ``claim`` (what its check compares with)."""
        bounds = self.bounds(claim)
        if name not in bounds:
            raise KeyError(
                f"paper {self.paper}'s register has no bound {name!r} for claim {claim!r}; "
                f"registered: {sorted(bounds)}"
            )
        return float(bounds[name])

    def history(self, claim: str) -> list[dict[str, Any]]:
        """The claim's changes, oldest first, as ``claims.json`` records."""
        return [change.entry(claim) for change in self.changes if claim in change.after]

    def tiering(self, experiment: str, claim: str) -> Tiering:
        """The claim's tiering in ``experiment`` (its own over the experiment's)."""
        base = self.experiments.get(experiment, Tiering())
        own = self.claims[claim].tiering if claim in self.claims else Tiering()
        return own.over(base)

    def tier(self, experiment: str, claim: str, preset: str | None) -> str:
        """The claim's tier at ``preset`` (``None``: at the paper's own protocol where an
        experiment has one, i.e. ignoring preset-dependent substitutions)."""
        tiering = self.tiering(experiment, claim)
        tier = tiering.tier or PAPER
        if tier == PAPER and tiering.substitution is not None:
            faithful = tiering.substitution.faithful
            if preset is None and faithful:
                return PAPER
            if preset not in faithful:
                return SUBSTITUTED
        return tier

    def chain_problems(self) -> list[str]:
        """Changes that do not follow on from the reading before them."""
        problems = []
        current = {name: entry.reading for name, entry in self.claims.items()}
        for change in self.changes:
            for claim, before in change.before.items():
                if claim not in current:
                    problems.append(f"{change.commit}: claim {claim!r} is not registered")
                elif current[claim] != before:
                    problems.append(
                        f"{change.commit}: {claim!r}'s 'before' is not its reading before the "
                        "change"
                    )
                elif change.after[claim] == before:
                    problems.append(f"{change.commit}: {claim!r} is not changed")
                current[claim] = change.after[claim]
        return problems


def extended(register: Register, *changes: Change) -> Register:
    """``register`` with ``changes`` appended (a register is built once, then its later
    changes are appended in order; :meth:`Register.chain_problems` checks that each
    follows on from the reading before it)."""
    return dataclasses.replace(register, changes=(*register.changes, *changes))


def amended(register: Register, claims: Sequence[str], words: str) -> tuple[dict, dict]:
    """``(before, after)`` of a :class:`Change` that adds ``words`` to the current reading
    of each of ``claims`` (a premise, the interval that decides the verdict)."""
    before = {name: register.reading(name) for name in claims}
    return before, {name: reading + words for name, reading in before.items()}


def replaced(register: Register, readings: Mapping[str, str]) -> tuple[dict, dict]:
    """``(before, after)`` of a :class:`Change` that gives each claim of ``readings`` its new
    reading there: the before readings are the claims' current ones in ``register`` (written
    once, where they were registered or last changed)."""
    return {name: register.reading(name) for name in readings}, dict(readings)


def reading_problems(register: Register, experiments: Sequence[Any]) -> list[str]:
    """What stands between ``experiments``' claims (those of ``register``'s paper) and the
    register: a claim not registered, or whose threshold is not its registered reading (a
    bound, reading or regime rule changed without a :class:`Change`)."""
    problems = []
    for experiment in experiments:
        for claim in experiment.claims:
            where = f"{experiment.id}: claim {claim.name!r}"
            if claim.name not in register.claims:
                problems.append(f"{where} is not registered in paper {register.paper}'s register")
            elif claim.threshold != register.reading(claim.name):
                problems.append(
                    f"{where}: its threshold is not its registered reading; a changed bound, "
                    f"reading or regime rule needs a Change in paper {register.paper}'s "
                    f"register\n  registered: {register.reading(claim.name)}\n  now:        "
                    f"{claim.threshold}"
                )
    return problems


def tier_summary(experiment: Any, preset: str) -> str:
    """An experiment's claims by tier at ``preset`` in words, the presets that run the
    paper's own data and architecture where some substitute, and how many claims have a
    premise (not evaluable on a run that does not meet it):
    ``"4 paper, substituted, 1 erratum (the paper's own at: paper); 3 with a premise"``;
    ``""`` for an experiment of no registered paper."""
    register = register_for(experiment.paper)
    if register is None or not experiment.claims:
        return ""
    counts = dict.fromkeys(TIERS, 0)
    faithful: set[str] = set()
    for claim in experiment.claims:
        counts[register.tier(experiment.id, claim.name, preset)] += 1
        tiering = register.tiering(experiment.id, claim.name)
        if tiering.tier in (None, PAPER) and tiering.substitution is not None:
            faithful |= set(tiering.substitution.faithful)
    text = ", ".join(f"{n} {tier}" for tier, n in counts.items() if n)
    if faithful and counts[SUBSTITUTED]:
        text += f" (the paper's own at: {', '.join(sorted(faithful))})"
    premised = sum(getattr(claim, "premise", None) is not None for claim in experiment.claims)
    if premised:
        text += f"; {premised} with a premise"
    return text


def register_for(paper: str) -> Register | None:
    """The register of ``paper`` (its number), or ``None`` (the demo, an unknown paper)."""
    module = REGISTERS.get(str(paper))
    return None if module is None else importlib.import_module(module).REGISTER


def entry_tier(
    register: Register, experiment: str, preset: str | None, entry: Mapping[str, Any]
) -> dict[str, Any]:
    """The tier fields of one ``claims.json`` entry: ``tier``, ``tier_record`` (the
    substitution, premise, prediction or note that applies), ``history`` and
    ``reading_registered`` (whether the evaluated threshold is the registered reading)."""
    name = str(entry.get("name"))
    if name not in register.claims:
        return {"tier": None, "reading_registered": False, "history": []}
    tiering = register.tiering(experiment, name)
    tier = register.tier(experiment, name, preset)
    record: dict[str, str] = {}
    if tier == SUBSTITUTED and tiering.substitution is not None:
        record["substituted"] = tiering.substitution.text()
    if tier == BEYOND:
        record |= {"premise": tiering.premise, "prediction": tiering.prediction}
    if tier in APART and tiering.note:
        record["note"] = tiering.note
    return {
        "tier": tier,
        "tier_record": {k: v for k, v in record.items() if v},
        "history": register.history(name),
        "reading_registered": entry.get("threshold_text") == register.reading(name),
    }


def tier_counts(entries: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per tier: verdict counts for the counted tiers (``holds``, ``does not hold``,
    ``not evaluable``; ``inconclusive`` where some claim of the tier is, and ``premise not
    met``, the not evaluable whose premise failed, where some is), demonstration outcomes
    for the tiers apart (``confirmed``, ``not confirmed``, ``not evaluable``); every tier
    present."""
    counts: dict[str, dict[str, int]] = {
        tier: dict.fromkeys(
            ("holds", "does not hold", "not evaluable")
            if tier in COUNTED
            else ("confirmed", "not confirmed", "not evaluable"),
            0,
        )
        for tier in TIERS
    }
    for entry in entries:
        tier = entry.get("tier")
        if tier not in counts:
            continue
        key = entry.get("verdict")
        if tier in APART:
            key = (entry.get("erratum") or {}).get("outcome", "not evaluable")
        if key == INCONCLUSIVE:  # a verdict, or a demonstration's outcome
            counts[tier].setdefault(INCONCLUSIVE, 0)
        if key in counts[tier]:
            counts[tier][key] += 1
        if premise_failed(entry):
            counts[tier][PREMISE_NOT_MET] = counts[tier].get(PREMISE_NOT_MET, 0) + 1
    return counts


def annotate(document: Mapping[str, Any], experiment: str, paper: str, preset: str | None) -> dict:
    """``document`` (a ``claims.json`` document) with each entry's tier fields
    (:func:`entry_tier`), ``tiers`` (:func:`tier_counts`), ``tiers_apart`` and
    ``post_hoc`` (the claims whose reading changed after results had been seen); unchanged
    for an experiment of no registered paper."""
    register = register_for(paper)
    if register is None:
        return dict(document)
    entries = [
        {**entry, **entry_tier(register, experiment, preset, entry)}
        for entry in document.get("claims") or []
    ]
    post_hoc = [
        str(e["name"]) for e in entries if any(c["results_seen"] for c in e.get("history") or [])
    ]
    return {
        **document,
        "claims": entries,
        "tiers": tier_counts(entries),
        "tiers_apart": list(APART),
        "post_hoc": post_hoc,
    }
