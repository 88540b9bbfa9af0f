"""Claims: statements taken from a paper, checked against a run's measured results.

A :class:`Claim` names a statement of the paper (quoted or paraphrased, with its source
location), states its threshold in words, and holds an ``evaluate`` function of the run's
measured results (:class:`RunResults`: the metric table, the saved arrays, the manifest)
that returns a :class:`ClaimResult`: a verdict, the numbers it was decided on, the numeric
threshold and a sentence of detail. docs/architecture.md, principle 7: a claim that does not hold is
reported as not holding, with the numbers; nothing is hard-coded.

Verdicts:

``"holds"``
    the measured numbers satisfy the stated threshold;
``"does not hold"``
    they do not;
``"inconclusive"``
    the claim compares a statistic of seeds, ensemble members or repeats with a bound, and
    the statistic's interval over the members (:mod:`~collapselab.experiments.intervals`:
    a seeded bootstrap, or an exact interval) straddles the bound
    (:meth:`ClaimResult.from_interval`); the interval is in the result;
``"not evaluable"``
    the run does not contain what the claim needs (missing or NaN values, too few
    points, a preset too small for the claim, a failed run), or the evaluation raised.
    Raise :class:`NotEvaluable` inside an ``evaluate`` function to say so with a reason;
    any other exception is caught by :func:`evaluate_claim` and reported with its text.
    A claim with a :class:`Premise` (what it presumes of the run: the terminal phase, the
    leading classes learnt) is "not evaluable" on a run that does not meet it, never a
    verdict either way; the entry records the premise's check, with its numbers, on every
    run (``premise``: ``statement``, ``met``, ``values``, ``detail``).

Kinds. Most claims are **empirical**: a statement of the paper held against measurements.
A claim marked with an :class:`Erratum` is an **erratum demonstration**: it runs the paper's
formula or procedure as printed where the implementer's notes found it wrong (a
``published`` variant, the paper's literal solver), so that its verdict shows the error.
Its verdict is reported in its own words (:meth:`Erratum.outcome`: "published formula
confirmed wrong" / "published formula not refuted") and counted apart from the empirical
claims (``claims.json``: ``summary`` counts the empirical claims' verdicts, ``errata`` the
demonstrations' outcomes).

The helpers at the bottom build claims of the common shapes, each with its threshold
stated: :func:`decreases_by` (a series falls by a factor between two points),
:func:`rank_correlation` (Spearman/Kendall against the x-axis, e.g. depth),
:func:`value_below` / :func:`value_above` (a number against a bound) and
:func:`decays_faster` (two series' slopes on a log scale). Their numeric cores
(:func:`check_decrease`, :func:`check_rank_correlation`, :func:`check_value`,
:func:`check_log_slopes`) work on plain arrays and are usable on their own.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from collapselab.checks import check_choice, check_float
from collapselab.experiments.intervals import Interval, judge
from collapselab.store import zero_error_epoch

Verdict = Literal["holds", "does not hold", "inconclusive", "not evaluable"]
HOLDS: Verdict = "holds"
DOES_NOT_HOLD: Verdict = "does not hold"
INCONCLUSIVE: Verdict = "inconclusive"
NOT_EVALUABLE: Verdict = "not evaluable"
VERDICTS: tuple[Verdict, ...] = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, NOT_EVALUABLE)
SUMMARY_VERDICTS: tuple[Verdict, ...] = (HOLDS, DOES_NOT_HOLD, NOT_EVALUABLE)
"""The verdicts every summary counts (possibly 0); ``inconclusive`` is counted where some
claim is (documents written before noise-aware verdicts have no such key)."""
PREMISE_NOT_MET = "premise not met"
"""The reason (and count key) of a "not evaluable" claim whose premise the run does not meet."""

ZERO_ERROR = "zero_error_epoch"
"""Window bound meaning "the first epoch with zero training error" (the start of TPT)."""


class NotEvaluable(Exception):
    """Raised inside a claim's evaluation when the run lacks what the claim needs."""


@dataclass(frozen=True)
class ClaimResult:
    """The outcome of evaluating one claim.

    Attributes:
        verdict: one of :data:`VERDICTS`.
        values: the measured numbers the verdict was decided on, by name (NaN where a
            number could not be measured).
        threshold: the numeric threshold the deciding value was compared with, if any.
        detail: one or two sentences: the comparison made, or why it could not be made.
        interval: the statistic's interval over the members, for a verdict decided from
            one (:meth:`from_interval`).
        premise: the record of the claim's premise check (:meth:`PremiseCheck.record`),
            set by :func:`evaluate_claim` for a claim with a :class:`Premise`.
    """

    verdict: Verdict
    values: Mapping[str, float] = field(default_factory=dict)
    threshold: float | None = None
    detail: str = ""
    interval: Interval | None = None
    premise: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        check_choice("verdict", self.verdict, VERDICTS)

    @classmethod
    def from_interval(
        cls,
        interval: Interval,
        bound: float,
        op: str,
        values: Mapping[str, float],
        detail: str,
    ) -> ClaimResult:
        """The verdict of ``interval`` against ``bound`` (:func:`intervals.judge
        <collapselab.experiments.intervals.judge>`: holds when the whole interval satisfies
        ``op bound``, does not hold when none of it does, inconclusive when it straddles),
        with the interval in the result (``claims.json``: ``interval``) and the detail."""
        verdict = judge(interval, bound, op)
        text = f"{detail}; interval {interval.text()} {op} {bound:g}? {verdict}"
        return cls(verdict, dict(values), bound, text, interval)

    @classmethod
    def decided(
        cls, holds: bool, values: Mapping[str, float], threshold: float | None, detail: str
    ) -> ClaimResult:
        """``"holds"`` when ``holds`` is true, else ``"does not hold"``, with the numbers,
        threshold and sentence it was decided on."""
        return cls(HOLDS if holds else DOES_NOT_HOLD, values, threshold, detail)

    def to_dict(self) -> dict[str, Any]:
        record = {
            "verdict": self.verdict,
            "values": {k: _json_number(v) for k, v in self.values.items()},
            "threshold": _json_number(self.threshold),
            "detail": self.detail,
        }
        if self.interval is not None:
            record["interval"] = self.interval.to_dict()
        if self.premise is not None:
            record["premise"] = dict(self.premise)
        return record


def _json_number(value: Any) -> Any:
    # NaN/inf are not JSON: store null; the detail text says what happened.
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def not_evaluable(reason: str, values: Mapping[str, float] | None = None) -> ClaimResult:
    """A ``"not evaluable"`` result with ``reason`` as detail."""
    return ClaimResult(NOT_EVALUABLE, dict(values or {}), None, reason)


# ---------------------------------------------------------------------- run results
class _LazyArrays(Mapping[str, dict[str, np.ndarray]]):
    """``arrays/<name>.npz`` of a run, loaded on first access."""

    def __init__(self, run: Any) -> None:
        self._run = run
        self._names = list(run.array_names())
        self._cache: dict[str, dict[str, np.ndarray]] = {}

    def __getitem__(self, name: str) -> dict[str, np.ndarray]:
        if name not in self._names:
            raise KeyError(f"the run saved no array {name!r}; saved arrays: {self._names}")
        if name not in self._cache:
            self._cache[name] = self._run.load_array(name)
        return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


@dataclass
class RunResults:
    """What a claim is evaluated on: the measured results of one run.

    Attributes:
        metrics: the long-format metric table (``step, epoch, split, layer, metric, value``).
        manifest: the run manifest (config, preset, ``zero_error_epoch``, ...).
        arrays: ``name -> {key: array}`` for the run's ``arrays/<name>.npz`` files.
    """

    metrics: pd.DataFrame
    manifest: Mapping[str, Any] = field(default_factory=dict)
    arrays: Mapping[str, Mapping[str, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def from_run(cls, run: Any) -> RunResults:
        """Read the stored results of a :class:`collapselab.store.Run` (arrays lazily)."""
        return cls(metrics=run.metrics(), manifest=run.manifest, arrays=_LazyArrays(run))

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.manifest.get("config") or {})

    @property
    def preset(self) -> str:
        return str(self.manifest.get("preset", ""))

    def array(self, name: str, key: str) -> np.ndarray:
        """``arrays/<name>.npz[key]`` of the run, or :class:`NotEvaluable` naming what is
        missing."""
        try:
            stored = self.arrays[name]
        except KeyError:
            raise NotEvaluable(f"the run saved no array {name!r}") from None
        if key not in stored:
            raise NotEvaluable(f"array {name!r} has no entry {key!r}")
        return np.asarray(stored[key])

    def rows(self, metric: str, split: str | None = None, layer: str | None = "") -> pd.DataFrame:
        """Rows of ``metric`` (and ``split`` / ``layer`` unless ``None``), in logging order."""
        table = self.metrics
        missing = {"metric", "split", "layer", "value"} - set(table.columns)
        if missing:
            raise NotEvaluable(f"metric table lacks columns {sorted(missing)}")
        mask = table["metric"] == metric
        if split is not None:
            mask &= table["split"] == split
        if layer is not None:
            mask &= table["layer"] == layer
        rows = table[mask]
        if rows.empty:
            where = _describe_selection(metric, split, layer)
            raise NotEvaluable(f"no measured rows for {where}")
        return rows

    def zero_error_epoch(self, split: str = "train") -> int | None:
        """First epoch whose model-level ``accuracy`` on ``split`` is exactly 1.0, from the rows:
        :func:`collapselab.store.zero_error_epoch` (the one definition).

        Measured from the metric table rather than read from the manifest, so that it
        always agrees with the recorded numbers. ``None`` when never reached;
        :class:`NotEvaluable` when the run has no such accuracy rows at all.
        """
        self.rows("accuracy", split=split, layer="")  # NotEvaluable without any
        return zero_error_epoch(self.metrics, split)


def _describe_selection(metric: str, split: str | None, layer: str | None) -> str:
    parts = [f"metric={metric!r}"]
    if split is not None:
        parts.append(f"split={split!r}")
    if layer is not None:
        parts.append(f"layer={layer!r}")
    return ", ".join(parts)


SeriesFn = Callable[[RunResults], tuple[np.ndarray, np.ndarray]]
ValueFn = Callable[[RunResults], float]


@dataclass(frozen=True)
class Series:
    """Selects one curve ``(x, y)`` from a run: ``metric`` on ``split`` at ``layer`` over ``x``.

    Where several rows share an x value (a metric logged twice in one epoch) the one
    logged last wins. ``start`` / ``end`` restrict x to a closed window; either may be
    :data:`ZERO_ERROR` for the first epoch with zero training error.
    """

    metric: str
    split: str = "train"
    layer: str = ""
    x: str = "epoch"
    start: float | str | None = None
    end: float | str | None = None

    def __call__(self, results: RunResults) -> tuple[np.ndarray, np.ndarray]:
        rows = results.rows(self.metric, self.split, self.layer)
        if self.x not in rows.columns:
            raise NotEvaluable(f"metric table has no column {self.x!r}")
        if self.x == "epoch":
            rows = rows[rows["epoch"] >= 0]
        last = _last_by(rows, self.x).sort_index()
        x = last.index.to_numpy(dtype=np.float64)
        y = last.to_numpy(dtype=np.float64)
        lo = _bound(self.start, results, "start")
        hi = _bound(self.end, results, "end")
        keep = np.ones(x.shape, dtype=bool)
        if lo is not None:
            keep &= x >= lo
        if hi is not None:
            keep &= x <= hi
        if not keep.any():
            raise NotEvaluable(f"no {self.describe()} rows inside the window [{lo}, {hi}]")
        return x[keep], y[keep]

    def describe(self) -> str:
        text = self.metric
        if self.layer:
            text += f"[{self.layer}]"
        return f"{self.split} {text}"


def _last_by(rows: pd.DataFrame, key: str) -> pd.Series:
    """The last logged ``value`` per ``key``, in order of first appearance.

    Unlike ``groupby(...).last()``, a NaN logged last is kept: it must not be hidden by an
    earlier finite value.
    """
    order = pd.unique(rows[key])
    last = rows.drop_duplicates(subset=[key], keep="last").set_index(key)["value"]
    return last.loc[order]


def _bound(bound: float | str | None, results: RunResults, which: str) -> float | None:
    if bound is None:
        return None
    if bound == ZERO_ERROR:
        epoch = results.zero_error_epoch()
        if epoch is None:
            raise NotEvaluable(
                f"the window {which} is the zero-training-error epoch, which the run never reached"
            )
        return float(epoch)
    if isinstance(bound, str):
        raise ValueError(f"window {which} must be a number, None or {ZERO_ERROR!r}, got {bound!r}")
    return float(bound)


@dataclass(frozen=True)
class AcrossLayers:
    """Selects ``(position, value)`` over layers of ``metric`` at one epoch (default the last).

    ``layers`` gives the depth order; by default layers are taken in the order they first
    appear in the metric table (probes record layers in forward order), excluding the
    model-level layer ``""``. ``positions`` (by layer) gives the x coordinate, e.g. the
    relative depth pos(l) of paper 001 §IV-A; by default the layer index 0, 1, ... .
    """

    metric: str
    split: str = "train"
    epoch: int | Literal["last"] = "last"
    layers: Sequence[str] | None = None
    positions: Mapping[str, float] | None = None

    def __call__(self, results: RunResults) -> tuple[np.ndarray, np.ndarray]:
        rows = results.rows(self.metric, self.split, layer=None)
        rows = rows[rows["layer"] != ""]
        if rows.empty:
            raise NotEvaluable(f"no per-layer rows of {self.split} {self.metric}")
        epoch = int(rows["epoch"].max()) if self.epoch == "last" else int(self.epoch)
        rows = rows[rows["epoch"] == epoch]
        if rows.empty:
            raise NotEvaluable(f"no per-layer rows of {self.split} {self.metric} at epoch {epoch}")
        by_layer = _last_by(rows, "layer")
        order = list(self.layers) if self.layers is not None else list(by_layer.index)
        absent = [name for name in order if name not in by_layer.index]
        if absent:
            raise NotEvaluable(f"layers {absent} have no {self.metric} at epoch {epoch}")
        if self.positions is None:
            x = np.arange(len(order), dtype=np.float64)
        else:
            x = np.array([float(self.positions[name]) for name in order])
        return x, by_layer.loc[order].to_numpy(dtype=np.float64)

    def describe(self) -> str:
        which = "last epoch" if self.epoch == "last" else f"epoch {self.epoch}"
        return f"{self.split} {self.metric} across layers at the {which}"


@dataclass(frozen=True)
class Final:
    """The value of ``metric`` on ``split`` at ``layer`` logged at the largest step."""

    metric: str
    split: str = "train"
    layer: str = ""

    def __call__(self, results: RunResults) -> float:
        rows = results.rows(self.metric, self.split, self.layer)
        return float(rows.sort_values("step", kind="stable")["value"].iloc[-1])

    def describe(self) -> str:
        text = self.metric + (f"[{self.layer}]" if self.layer else "")
        return f"final {self.split} {text}"


# ---------------------------------------------------------------------------- claims
EMPIRICAL = "empirical"
ERRATUM = "erratum"
CLAIM_KINDS = (EMPIRICAL, ERRATUM)

CONFIRMED = "confirmed"
NOT_CONFIRMED = "not confirmed"
ERRATUM_OUTCOMES = (CONFIRMED, NOT_CONFIRMED, NOT_EVALUABLE)

_ERRATUM_WORDS = {
    "formula": ("published formula confirmed wrong", "published formula not refuted"),
    "solver": ("paper's solver confirmed not to converge", "paper's solver not refuted"),
    "attribution": (
        "paper's attribution confirmed confounded",
        "paper's attribution not refuted",
    ),
    "reading": ("the text's reading confirmed not to hold", "the text's reading not refuted"),
    "assumption": (
        "confirmed not to carry outside its assumption",
        "carries outside its assumption",
    ),
}
"""Report wording of an erratum demonstration's outcome: (confirmed, not confirmed)."""


@dataclass(frozen=True)
class Erratum:
    """Marks a claim as the demonstration of an error in the paper (docs/architecture.md,
    principle 6).

    Attributes:
        confirmed_when: the verdict that demonstrates the error: ``"does not hold"`` when
            the claim states the paper's formula or procedure as printed ("the SNR follows
            Prop. 2"), ``"holds"`` when it states the error itself ("the converged solver
            reaches a lower objective than the paper's literal gradient descent").
        subject: what the paper printed: ``"formula"``, ``"solver"``, or ``"attribution"``
            (an effect the paper attributes to one cause where a control the implementer's
            notes ask for can show it is another: confirmed "confounded"); for an ambiguity
            (tier ``ambiguity``, :mod:`~collapselab.experiments.preregistration`):
            ``"reading"`` (one reading of a text that can be read two ways) or
            ``"assumption"`` (a result applied outside the assumption it was derived under).
    """

    confirmed_when: Verdict = DOES_NOT_HOLD
    subject: Literal["formula", "solver", "attribution", "reading", "assumption"] = "formula"

    def __post_init__(self) -> None:
        check_choice("confirmed_when", self.confirmed_when, (HOLDS, DOES_NOT_HOLD))
        check_choice("subject", self.subject, tuple(_ERRATUM_WORDS))

    def outcome(self, verdict: str) -> str:
        """``"confirmed"``, ``"not confirmed"``, ``"inconclusive"`` (the claim's interval
        straddles its bound) or ``"not evaluable"`` for a claim verdict."""
        if verdict == INCONCLUSIVE:
            return INCONCLUSIVE
        if verdict not in (HOLDS, DOES_NOT_HOLD):
            return NOT_EVALUABLE
        return CONFIRMED if verdict == self.confirmed_when else NOT_CONFIRMED

    def wording(self, verdict: str) -> str:
        """The outcome in words for reports ("published formula confirmed wrong", ...)."""
        outcome = self.outcome(verdict)
        if outcome in (NOT_EVALUABLE, INCONCLUSIVE):
            return outcome
        confirmed, not_confirmed = _ERRATUM_WORDS[self.subject]
        return confirmed if outcome == CONFIRMED else not_confirmed


@dataclass(frozen=True)
class PremiseCheck:
    """Whether a run meets a claim's premise, with the numbers it was decided on.

    Attributes:
        met: the run meets the premise.
        values: the numbers (NC1 at the end, the epoch of zero training error, ...).
        detail: one sentence: what was measured against what.
    """

    met: bool
    values: Mapping[str, float] = field(default_factory=dict)
    detail: str = ""

    def record(self, statement: str) -> dict[str, Any]:
        """The ``premise`` record of a ``claims.json`` entry."""
        return {
            "statement": statement,
            "met": bool(self.met),
            "values": {k: _json_number(v) for k, v in self.values.items()},
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Premise:
    """What a claim presumes of the run (issue 35, item 6): checked before the claim, and
    a claim on a run that does not meet it is "not evaluable" (premise not met).

    Attributes:
        statement: the premise in words ("the terminal phase was reached").
        check: ``RunResults -> PremiseCheck``; :class:`NotEvaluable` when the run lacks
            what the check needs (the claim is then not evaluable, with that reason).
    """

    statement: str
    check: Callable[[RunResults], PremiseCheck]

    def __post_init__(self) -> None:
        if not self.statement.strip():
            raise ValueError("Premise.statement must be a non-empty string")
        if not callable(self.check):
            raise TypeError(f"Premise.check must be callable, got {self.check!r}")


@dataclass(frozen=True)
class Claim:
    """A named statement of a paper with an explicit, measurable threshold.

    Attributes:
        name: short stable identifier (``"nc1-decreases"``).
        statement: the paper's statement, quoted or paraphrased.
        source: where the paper makes it (``"§5.2, Fig. 7"``).
        threshold: the threshold in words (``"final NC1 <= initial NC1 / 10"``).
        evaluate: ``RunResults -> ClaimResult``.
        presets: presets at which the claim is evaluable; ``None`` for all. At other
            presets the verdict is "not evaluable" (a run too small to show the effect).
        erratum: set for an erratum demonstration (see the module docstring); ``None`` for
            an empirical claim.
        premise: what the claim presumes of the run (:class:`Premise`); ``None`` when it
            presumes nothing beyond the run's completing.
    """

    name: str
    statement: str
    source: str
    threshold: str
    evaluate: Callable[[RunResults], ClaimResult]
    presets: tuple[str, ...] | None = None
    erratum: Erratum | None = None
    premise: Premise | None = None

    @property
    def kind(self) -> str:
        """``"empirical"`` or ``"erratum"``."""
        return EMPIRICAL if self.erratum is None else ERRATUM

    def __post_init__(self) -> None:
        for attr in ("name", "statement", "source", "threshold"):
            value = getattr(self, attr)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"Claim.{attr} must be a non-empty string, got {value!r}")
        if not callable(self.evaluate):
            raise TypeError(f"Claim.evaluate must be callable, got {self.evaluate!r}")
        if self.erratum is not None and not isinstance(self.erratum, Erratum):
            raise TypeError(f"Claim.erratum must be an Erratum or None, got {self.erratum!r}")
        if self.premise is not None and not isinstance(self.premise, Premise):
            raise TypeError(f"Claim.premise must be a Premise or None, got {self.premise!r}")


def evaluate_claim(claim: Claim, results: RunResults) -> ClaimResult:
    """Evaluate ``claim``; never raises: failures become "not evaluable" with the error text."""
    if claim.presets is not None and results.preset not in claim.presets:
        return not_evaluable(
            f"not evaluable at preset {results.preset!r}; the claim needs one of "
            f"{list(claim.presets)}"
        )
    premise = None
    if claim.premise is not None:
        try:
            checked = claim.premise.check(results)
        except NotEvaluable as reason:
            return not_evaluable(f"the premise could not be checked: {reason}")
        except Exception as error:  # a bug in a premise must not lose the run
            return not_evaluable(f"the premise check raised {type(error).__name__}: {error}")
        premise = checked.record(claim.premise.statement)
        if not checked.met:
            # the premise's statement is in the record; the detail says what was measured
            reason = f"{PREMISE_NOT_MET}: {checked.detail}"
            return ClaimResult(NOT_EVALUABLE, {}, None, reason, premise=premise)
    try:
        result = claim.evaluate(results)
    except NotEvaluable as reason:
        result = not_evaluable(str(reason))
    except Exception as error:  # a bug in a claim must not lose the run
        result = not_evaluable(f"evaluation raised {type(error).__name__}: {error}")
    if not isinstance(result, ClaimResult):
        result = not_evaluable(f"evaluate returned {type(result).__name__}, expected a ClaimResult")
    return result if premise is None else dataclasses.replace(result, premise=premise)


def evaluate_claims(claims: Sequence[Claim], results: RunResults) -> dict[str, Any]:
    """Evaluate every claim and return the ``claims.json`` document.

    Returns:
        The document of :func:`claims_document`.
    """
    names = [c.name for c in claims]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"claim names must be unique; repeated: {duplicated}")
    return claims_document([claim_entry(c, evaluate_claim(c, results)) for c in claims])


def claims_document(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"summary": {verdict: count} of the empirical claims, "errata": {outcome: count} of
    the erratum demonstrations, "claims": [entry, ...]}`` (entries of :func:`claim_entry`)."""
    return {
        "summary": summarize(entries),
        "errata": summarize_errata(entries),
        "claims": list(entries),
    }


def claim_entry(claim: Claim, result: ClaimResult) -> dict[str, Any]:
    """One ``claims.json`` entry: the claim's text, kind and result; an erratum
    demonstration also gets ``erratum: {"outcome", "wording"}``."""
    entry = {
        "name": claim.name,
        "kind": claim.kind,
        "statement": claim.statement,
        "source": claim.source,
        "threshold_text": claim.threshold,
        **result.to_dict(),
    }
    if claim.erratum is not None:
        entry["erratum"] = {
            "outcome": claim.erratum.outcome(result.verdict),
            "wording": claim.erratum.wording(result.verdict),
        }
    return entry


def _is_erratum(entry: Mapping[str, Any]) -> bool:
    # Entries written before claim kinds existed have no "kind": they are empirical.
    return entry.get("kind", EMPIRICAL) == ERRATUM


def summarize(entries: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Number of empirical entries per verdict: every verdict of :data:`SUMMARY_VERDICTS`
    (possibly 0), ``inconclusive`` where some entry is."""
    counts = dict.fromkeys(VERDICTS, 0)
    for entry in entries:
        verdict = entry.get("verdict")
        if verdict in counts and not _is_erratum(entry):
            counts[verdict] += 1
    return {v: n for v, n in counts.items() if v in SUMMARY_VERDICTS or n}


def premise_failed(entry: Mapping[str, Any]) -> bool:
    """Whether a ``claims.json`` entry is not evaluable because its premise was not met."""
    premise = entry.get("premise")
    return (
        entry.get("verdict") == NOT_EVALUABLE
        and isinstance(premise, Mapping)
        and (premise.get("met") is False)
    )


def summarize_errata(entries: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Number of erratum demonstrations per outcome (confirmed, not confirmed, not
    evaluable; inconclusive where some demonstration is)."""
    counts = dict.fromkeys((*ERRATUM_OUTCOMES, INCONCLUSIVE), 0)
    for entry in entries:
        outcome = (entry.get("erratum") or {}).get("outcome")
        if _is_erratum(entry) and outcome in counts:
            counts[outcome] += 1
    return {k: n for k, n in counts.items() if k in ERRATUM_OUTCOMES or n}


# ---------------------------------------------------------------- numeric checks
def _finite_pairs(x: Any, y: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"{what}: x and y must have the same length, got {x.size} and {y.size}")
    bad = ~(np.isfinite(x) & np.isfinite(y))
    if bad.any():
        raise NotEvaluable(f"{what} has {int(bad.sum())} NaN or infinite value(s)")
    return x, y


def check_decrease(
    x: Any,
    y: Any,
    factor: float,
    start: float | None = None,
    end: float | None = None,
) -> ClaimResult:
    """Does ``y`` fall by at least ``factor`` from ``start`` to ``end``?

    ``y_start`` is the value at the first x >= ``start`` (default the first point),
    ``y_end`` at the last x <= ``end`` (default the last point). The claim holds iff
    ``y_end / y_start <= 1 / factor``; it needs ``y_start > 0`` and ``y_end >= 0``.
    """
    if not factor >= 1.0:
        raise ValueError(f"factor must be >= 1, got {factor!r}")
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {x.size} and {y.size}")
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    first = np.flatnonzero(x >= start) if start is not None else np.arange(x.size)
    last = np.flatnonzero(x <= end) if end is not None else np.arange(x.size)
    if first.size == 0 or last.size == 0 or first[0] >= last[-1]:
        return not_evaluable(f"fewer than two points between x={start} and x={end}")
    i, j = int(first[0]), int(last[-1])
    y0, y1 = float(y[i]), float(y[j])
    values = {"x_start": float(x[i]), "start": y0, "x_end": float(x[j]), "end": y1}
    if not (math.isfinite(y0) and math.isfinite(y1)):
        return not_evaluable("the start or end value is NaN or infinite", values)
    if y0 <= 0 or y1 < 0:
        return not_evaluable("a decrease by a factor needs a positive start value", values)
    values["end/start"] = y1 / y0
    bound = 1.0 / factor
    verdict = HOLDS if y1 / y0 <= bound else DOES_NOT_HOLD
    detail = (
        f"end/start = {y1:.4g}/{y0:.4g} = {y1 / y0:.4g} "
        f"({'<=' if verdict == HOLDS else '>'} 1/{factor:g} = {bound:.4g})"
    )
    return ClaimResult(verdict, values, bound, detail)


RankMethod = Literal["spearman", "kendall"]
Direction = Literal["increasing", "decreasing"]


def check_rank_correlation(
    x: Any,
    y: Any,
    threshold: float,
    method: RankMethod = "spearman",
    direction: Direction = "decreasing",
    min_points: int = 3,
) -> ClaimResult:
    """Is ``y`` monotone in ``x``, measured by a rank correlation ``rho`` (scipy.stats)?

    Holds iff ``rho >= threshold`` for ``direction="increasing"`` and
    ``rho <= -threshold`` for ``"decreasing"``. NaN values, fewer than ``min_points``
    points or a constant series (``rho`` undefined) give "not evaluable".
    """
    from scipy import stats

    check_float("threshold", threshold, minimum=0.0, maximum=1.0)
    check_choice("method", method, ("spearman", "kendall"))
    check_choice("direction", direction, ("increasing", "decreasing"))
    try:
        x, y = _finite_pairs(x, y, "the series")
    except NotEvaluable as reason:
        return not_evaluable(str(reason))
    if x.size < min_points:
        return not_evaluable(f"{x.size} point(s); a rank correlation needs >= {min_points}")
    if np.ptp(y) == 0 or np.ptp(x) == 0:
        return not_evaluable("the series is constant; its rank correlation is undefined")
    test = stats.spearmanr(x, y) if method == "spearman" else stats.kendalltau(x, y)
    rho, p_value = float(test.statistic), float(test.pvalue)
    values = {method: rho, "p_value": p_value, "n": float(x.size)}
    signed = rho if direction == "increasing" else -rho
    verdict = HOLDS if signed >= threshold else DOES_NOT_HOLD
    bound = threshold if direction == "increasing" else -threshold
    relation = ">=" if direction == "increasing" else "<="
    if verdict == DOES_NOT_HOLD:
        relation = "<" if direction == "increasing" else ">"
    detail = f"{method} rho = {rho:.4g} over {x.size} points ({relation} {bound:g})"
    return ClaimResult(verdict, values, bound, detail)


_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
_NEGATED = {"<=": ">", "<": ">=", ">=": "<", ">": "<="}


def check_value(value: float, threshold: float, op: str = "<=") -> ClaimResult:
    """Is ``value op threshold`` (``op`` one of ``<=, <, >=, >``)? NaN is "not evaluable"."""
    check_choice("op", op, sorted(_OPS))
    value = float(value)
    if not math.isfinite(value):
        return not_evaluable(f"the measured value is {value}", {"value": value})
    holds = _OPS[op](value, threshold)
    shown = op if holds else _NEGATED[op]
    detail = f"{value:.4g} {shown} {threshold:g}"
    return ClaimResult.decided(holds, {"value": value}, threshold, detail)


def log_slope(x: Any, y: Any, log_x: bool = False) -> float:
    """Least-squares slope of ``log10 y`` against ``x`` (or ``log10 x`` when ``log_x``).

    Raises :class:`NotEvaluable` for fewer than two points or non-positive values.
    """
    x, y = _finite_pairs(x, y, "the series")
    if x.size < 2 or np.ptp(x) == 0:
        raise NotEvaluable("a slope needs at least two distinct x values")
    if (y <= 0).any() or (log_x and (x <= 0).any()):
        raise NotEvaluable("a slope on a log scale needs positive values")
    u = np.log10(x) if log_x else x
    v = np.log10(y)
    u_c = u - u.mean()
    return float(np.dot(u_c, v - v.mean()) / np.dot(u_c, u_c))


def check_log_slopes(
    x_fast: Any,
    y_fast: Any,
    x_slow: Any,
    y_slow: Any,
    factor: float = 1.0,
    log_x: bool = False,
) -> ClaimResult:
    """Does the first series decay at least ``factor`` times as fast as the second on a log scale?

    With ``s`` the least-squares slope of ``log10 y`` (against x, or log10 x), holds iff
    ``s_fast < 0`` and ``s_fast <= factor * s_slow``: the first series decreases, and
    (when the second decreases too) its slope is at least ``factor`` times as steep.
    """
    if not factor > 0:
        raise ValueError(f"factor must be positive, got {factor!r}")
    try:
        s_fast = log_slope(x_fast, y_fast, log_x)
        s_slow = log_slope(x_slow, y_slow, log_x)
    except NotEvaluable as reason:
        return not_evaluable(str(reason))
    values = {"slope_fast": s_fast, "slope_slow": s_slow}
    bound = factor * s_slow
    holds = s_fast < 0 and s_fast <= bound
    detail = (
        f"log10 slopes: {s_fast:.4g} (first) vs {s_slow:.4g} (second); need first < 0 and "
        f"<= {factor:g} x second = {bound:.4g}"
    )
    return ClaimResult.decided(holds, values, bound, detail)


# ------------------------------------------------------------------ claim builders
def _describe(selector: Any) -> str:
    describe = getattr(selector, "describe", None)
    return describe() if callable(describe) else getattr(selector, "__name__", "the series")


def decreases_by(
    name: str,
    statement: str,
    source: str,
    series: SeriesFn,
    factor: float,
    start: float | None = None,
    end: float | None = None,
    presets: tuple[str, ...] | None = None,
) -> Claim:
    """Claim: ``series`` falls by at least ``factor`` between ``start`` and ``end`` (see
    :func:`check_decrease`)."""
    if not factor >= 1.0:
        raise ValueError(f"factor must be >= 1, got {factor!r}")
    window = "first" if start is None else f"x={start:g}"
    window_end = "last" if end is None else f"x={end:g}"
    threshold = (
        f"{_describe(series)} at the {window_end} point <= 1/{factor:g} of its value at the "
        f"{window} point"
    )

    def evaluate(results: RunResults) -> ClaimResult:
        x, y = series(results)
        return check_decrease(x, y, factor, start, end)

    return Claim(name, statement, source, threshold, evaluate, presets)


def rank_correlation(
    name: str,
    statement: str,
    source: str,
    series: SeriesFn,
    threshold: float,
    method: RankMethod = "spearman",
    direction: Direction = "decreasing",
    presets: tuple[str, ...] | None = None,
) -> Claim:
    """Claim: ``series`` is monotone in x with rank correlation beyond ``threshold`` (see
    :func:`check_rank_correlation`)."""
    bound = f"<= -{threshold:g}" if direction == "decreasing" else f">= {threshold:g}"
    text = f"{method} rank correlation of {_describe(series)} with x {bound}"

    def evaluate(results: RunResults) -> ClaimResult:
        x, y = series(results)
        return check_rank_correlation(x, y, threshold, method, direction)

    return Claim(name, statement, source, text, evaluate, presets)


def value_below(
    name: str,
    statement: str,
    source: str,
    value: ValueFn,
    threshold: float,
    strict: bool = False,
    presets: tuple[str, ...] | None = None,
) -> Claim:
    """Claim: a measured number is below ``threshold`` (``<=``, or ``<`` when ``strict``)."""
    return _value_claim(name, statement, source, value, threshold, "<" if strict else "<=", presets)


def value_above(
    name: str,
    statement: str,
    source: str,
    value: ValueFn,
    threshold: float,
    strict: bool = False,
    presets: tuple[str, ...] | None = None,
) -> Claim:
    """Claim: a measured number is above ``threshold`` (``>=``, or ``>`` when ``strict``)."""
    return _value_claim(name, statement, source, value, threshold, ">" if strict else ">=", presets)


def _value_claim(
    name: str,
    statement: str,
    source: str,
    value: ValueFn,
    threshold: float,
    op: str,
    presets: tuple[str, ...] | None,
) -> Claim:
    text = f"{_describe(value)} {op} {threshold:g}"

    def evaluate(results: RunResults) -> ClaimResult:
        return check_value(value(results), threshold, op)

    return Claim(name, statement, source, text, evaluate, presets)


def decays_faster(
    name: str,
    statement: str,
    source: str,
    fast: SeriesFn,
    slow: SeriesFn,
    factor: float = 1.0,
    log_x: bool = False,
    presets: tuple[str, ...] | None = None,
) -> Claim:
    """Claim: ``fast`` decays at least ``factor`` times as fast as ``slow`` on a log scale
    (see :func:`check_log_slopes`)."""
    axis = "log10 x" if log_x else "x"
    text = (
        f"least-squares slope of log10({_describe(fast)}) against {axis} is negative and "
        f"<= {factor:g} x the slope of log10({_describe(slow)})"
    )

    def evaluate(results: RunResults) -> ClaimResult:
        x_fast, y_fast = fast(results)
        x_slow, y_slow = slow(results)
        return check_log_slopes(x_fast, y_fast, x_slow, y_slow, factor, log_x)

    return Claim(name, statement, source, text, evaluate, presets)


CheckFn = Callable[[RunResults], tuple[bool, Mapping[str, float], float | None, str]]
"""A claim's core: results -> (holds, the numbers, the numeric threshold, one sentence)."""


def claim_from_check(
    name: str,
    statement: str,
    source: str,
    threshold: str,
    check: CheckFn,
    presets: tuple[str, ...] | None = None,
    erratum: Erratum | None = None,
    premise: Premise | None = None,
) -> Claim:
    """A :class:`Claim` whose ``evaluate`` turns ``check``'s four results into a verdict
    (``"holds"`` when its first result is true); ``erratum`` marks the demonstration of a
    published error, ``premise`` what the claim presumes of the run. :class:`NotEvaluable`
    raised by ``check`` propagates to :func:`evaluate_claim`, which reports it."""

    def evaluate(results: RunResults) -> ClaimResult:
        ok, values, bound, detail = check(results)
        return ClaimResult.decided(ok, dict(values), bound, detail)

    return Claim(name, statement, source, threshold, evaluate, presets, erratum, premise)
