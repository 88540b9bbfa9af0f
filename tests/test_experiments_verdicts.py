"""Noise-aware verdicts, premises and registered bounds (issue 35 items 1, 3 and 6): the
claim machinery, the claims converted to it, and the counts the reports show."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from collapselab.experiments import all_experiments
from collapselab.experiments.claims import (
    Claim,
    ClaimResult,
    NotEvaluable,
    Premise,
    PremiseCheck,
    RunResults,
    claim_entry,
    evaluate_claim,
    summarize,
)
from collapselab.experiments.dlufm.claims import NETWORK_CLAIMS, RELU_CLAIMS, TERMINAL_PHASE
from collapselab.experiments.fd.claims import LEADING_LEARNT
from collapselab.experiments.intervals import Interval
from collapselab.experiments.pcbias.claims import CONVERGENCE_CLAIMS, LOC_CLAIMS
from collapselab.experiments.preregistration import (
    BEYOND,
    PAPER,
    REGISTERS,
    Change,
    Register,
    Registered,
    amended,
    extended,
    register_for,
    tier_counts,
)
from collapselab.report.index import paper_counts
from collapselab.report.tiers import tier_text

INTERVAL = Interval(0.15, 0.12, 0.19, 0.95, "percentile bootstrap", (10,), 2000, 0)


def _claim(name: str) -> Claim:
    every = [c for e in all_experiments() for c in e.claims if c.name == name]
    assert every, name
    return every[0]


# ------------------------------------------------------------------ the machinery
@pytest.mark.parametrize(
    ("bound", "op", "verdict"),
    [
        (0.2, "<=", "holds"),
        (0.1, "<=", "does not hold"),
        (0.16, "<=", "inconclusive"),
        (0.12, ">=", "holds"),
        (0.2, ">=", "does not hold"),
    ],
)
def test_a_verdict_from_an_interval(bound, op, verdict):
    result = ClaimResult.from_interval(INTERVAL, bound, op, {"n": 10.0}, "mean error 0.15")
    assert result.verdict == verdict
    assert result.values == {"n": 10.0}
    assert result.threshold == bound
    record = result.to_dict()
    assert record["interval"] == {
        "estimate": 0.15, "low": 0.12, "high": 0.19, "level": 0.95,
        "method": "percentile bootstrap", "members": [10], "resamples": 2000, "seed": 0,
    }  # fmt: skip
    assert record["detail"].endswith(f"{op} {bound:g}? {verdict}")


def _premised(met: bool | None) -> Claim:
    def check(results: RunResults) -> PremiseCheck:
        if met is None:
            raise NotEvaluable("no accuracy rows")
        return PremiseCheck(met, {"accuracy": 0.98 if not met else 1.0}, "accuracy at the end")

    def evaluate(results: RunResults) -> ClaimResult:
        return ClaimResult.decided(True, {"value": 1.0}, 0.5, "1 >= 0.5")

    return Claim("c", "s", "src", "t", evaluate, premise=Premise("zero training error", check))


def test_a_claim_whose_premise_fails_is_not_evaluable_with_the_numbers():
    results = RunResults(pd.DataFrame())
    failed = evaluate_claim(_premised(False), results)
    assert failed.verdict == "not evaluable"
    assert failed.detail == "premise not met: accuracy at the end"
    assert failed.premise == {
        "statement": "zero training error", "met": False, "values": {"accuracy": 0.98},
        "detail": "accuracy at the end",
    }  # fmt: skip
    met = evaluate_claim(_premised(True), results)
    assert (met.verdict, met.values, met.premise["met"]) == ("holds", {"value": 1.0}, True)
    unchecked = evaluate_claim(_premised(None), results)
    assert unchecked.verdict == "not evaluable"
    assert unchecked.detail == "the premise could not be checked: no accuracy rows"
    assert unchecked.premise is None
    entry = claim_entry(_premised(False), failed)
    assert entry["premise"]["met"] is False and entry["verdict"] == "not evaluable"


def test_summaries_and_tier_counts_count_inconclusive_and_premises():
    entries = [
        {"name": "a", "verdict": "holds", "tier": PAPER},
        {"name": "b", "verdict": "inconclusive", "tier": PAPER},
        {"name": "c", "verdict": "does not hold", "tier": PAPER},
        {"name": "d", "verdict": "not evaluable", "tier": BEYOND, "premise": {"met": False}},
        {"name": "e", "verdict": "not evaluable", "tier": BEYOND},
        {"name": "f", "verdict": "holds", "tier": BEYOND, "premise": {"met": True}},
    ]
    assert summarize(entries) == {
        "holds": 2, "does not hold": 1, "inconclusive": 1, "not evaluable": 2
    }  # fmt: skip
    assert summarize(entries[:1]) == {"holds": 1, "does not hold": 0, "not evaluable": 0}
    counts = tier_counts(entries)
    assert counts[PAPER] == {"holds": 1, "does not hold": 1, "not evaluable": 0, "inconclusive": 1}
    assert counts[BEYOND] == {
        "holds": 1, "does not hold": 0, "not evaluable": 2, "premise not met": 1
    }  # fmt: skip
    assert tier_text(PAPER, counts[PAPER], ()) == "1 / 3 hold (33%), 1 inconclusive"
    assert tier_text(BEYOND, counts[BEYOND], ()) == (
        "1 / 1 hold (100%), 2 not evaluable (1 premise not met)"
    )


def test_the_index_counts_an_inconclusive_claim_as_evaluated():
    run = {"paper": "002", "paper_label": "002", "preset": "quick",
           "claims": {"summary": {"holds": 4, "does not hold": 2, "inconclusive": 1,
                                  "not evaluable": 0}}}  # fmt: skip
    (group,) = paper_counts([run])
    assert group["empirical"] == {"holds": 4, "does not hold": 2, "not evaluable": 0,
                                  "inconclusive": 1, "evaluated": 7, "total": 7}  # fmt: skip


# ------------------------------------------------------------- registered bounds
def test_bounds_are_read_from_the_register_and_changed_by_an_entry():
    first = Register("9", "now", {}, {"x": Registered("x <= 0.2", bounds={"bound": 0.2})})
    assert first.bound("x") == 0.2
    before, after = amended(first, ("x",), " (decided by an interval)")
    assert (before, after) == ({"x": "x <= 0.2"}, {"x": "x <= 0.2 (decided by an interval)"})
    changed = extended(
        first,
        Change(
            "2026-11-28",
            "abc1234",
            "bound",
            {"x": after["x"]},
            {"x": "x <= 0.3"},
            "why",
            True,
            bounds={"x": {"bound": 0.3}},
        ),
    )
    assert changed.bound("x") == 0.3 and changed.reading("x") == "x <= 0.3"
    assert changed.history("x")[0]["bounds"] == {"bound": 0.3}
    with pytest.raises(KeyError, match="no bound 'tolerance'"):
        changed.bound("x", "tolerance")


FIRST_BOUNDS = {
    "002/closed-form-follows-gd": {"bound": 0.2},
    "002/closed-form-follows-gd-whitened": {"bound": 0.2},
    "002/printed-eq10-at-step-one": {"bound": 0.2},
    "002/closed-form-def3": {"bound": 0.2},
    "002/closed-form-glorot-effective-factor": {"bound": 0.2},
    "002/closed-form-glorot-paper-factor": {"bound": 0.2},
    "002/shuffled-labels-slower": {"bound": 2.0},
    "002/whitening-removes-label-gap": {"bound": 1.5},
    "002/small-p-declines": {"bound": 0.02},
    "002/stvgg-small-p-declines": {"bound": 0.02},
}
"""Every bound registered first: editing one (rather than appending a Change) fails here."""


def test_bounds_registered_first_are_never_edited():
    found = {
        f"{paper}/{name}": dict(entry.bounds)
        for paper in REGISTERS
        for name, entry in register_for(paper).claims.items()
        if entry.bounds
    }
    assert found == FIRST_BOUNDS


def _printed(value: float) -> list[str]:
    from fractions import Fraction

    fraction = Fraction(value).limit_denominator(12)
    return [f"{value:g}", f"{fraction.numerator}/{fraction.denominator}"]


def test_every_registered_bound_is_printed_in_its_reading():
    for paper in REGISTERS:
        register = register_for(paper)
        for name in register.claims:
            for key, value in register.bounds(name).items():
                reading = register.reading(name)
                assert any(text in reading for text in _printed(value)), (paper, name, key)


# ------------------------------------------------------------- converted claims
def _sweep(widths, symmetric):
    n = len(widths)
    sweep = {"width": np.array(widths, float), "seed": np.arange(n, dtype=float),
             "symmetric": np.array(symmetric, float), "masks_constant": np.zeros(n),
             "weight_rank": np.full(n, 3.0), "output_frame": np.zeros(n),
             "weight_spread": np.zeros(n), "hessian_spread": np.zeros(n),
             "hessian_outliers": np.full(n, 9.0), "objective": np.ones(n)}  # fmt: skip
    return RunResults(pd.DataFrame(), {"preset": "quick"}, {"sweep": sweep})


@pytest.mark.parametrize(
    ("k", "n", "verdict", "low", "high"),
    [
        (3, 3, "inconclusive", 0.025 ** (1 / 3), 1.0),
        (10, 10, "holds", 0.025**0.1, 1.0),
        (1, 10, "does not hold", 0.002528578, 0.445016117),
    ],
)
def test_relu_symmetric_at_widest_reads_the_clopper_pearson_interval(k, n, verdict, low, high):
    claim = next(c for c in RELU_CLAIMS if c.name == "relu-symmetric-at-widest")
    results = _sweep([10] + [30] * n, [0] + [1] * k + [0] * (n - k))
    result = evaluate_claim(claim, results)
    assert result.verdict == verdict
    assert result.interval.method == "Clopper-Pearson"
    assert result.interval.low == pytest.approx(low, abs=1e-8)
    assert result.interval.high == pytest.approx(high, abs=1e-8)
    assert result.values["fraction_widest"] == k / n


def _network_run(count: float, reached: bool, loss: str = "mse") -> RunResults:
    rows = pd.DataFrame(
        {
            "step": [1, 2],
            "epoch": [1, 2],
            "split": ["train"] * 2,
            "layer": ["fc"] * 2,
            "metric": ["weight_outliers"] * 2,
            "value": [7.0, count],
        }
    )
    terminal = {"reached": reached, "zero_error_from": 3 if reached else None,
                "final_train_accuracy": 1.0 if reached else 0.98, "nc1_final": 0.01,
                "nc1_ratio": 0.2 if reached else None, "nc1_fraction": 0.5,
                "summary": "reached" if reached else "not reached"}  # fmt: skip
    manifest = {"preset": "quick", "config": {"loss": loss},
                "curvature": {"n_classes": 3, "weight_layers": ["fc", "classifier"],
                              "terminal_phase": terminal}}  # fmt: skip
    return RunResults(rows, manifest)


@pytest.mark.parametrize(("count", "verdict"), [(3.0, "holds"), (2.0, "does not hold"),
                                                (4.0, "does not hold")])  # fmt: skip
def test_weights_k_outliers_reads_k_exactly_in_the_terminal_phase(count, verdict):
    claim = next(c for c in NETWORK_CLAIMS if c.name == "weights-k-outliers")
    assert claim.premise is TERMINAL_PHASE
    result = evaluate_claim(claim, _network_run(count, reached=True))
    assert result.verdict == verdict  # K = 3: K - 1 = 2 and K + 1 = 4 are not K
    assert result.values["count"] == count and result.values["predicted"] == 3.0
    assert result.premise["met"] is True


@pytest.mark.parametrize(("count", "verdict"), [(2.0, "holds"), (3.0, "does not hold")])
def test_weights_k_outliers_reads_the_simplex_rank_k_minus_1_with_ce(count, verdict):
    claim = next(c for c in NETWORK_CLAIMS if c.name == "weights-k-outliers")
    result = evaluate_claim(claim, _network_run(count, reached=True, loss="ce"))
    assert result.verdict == verdict
    assert result.values["predicted"] == 2.0


def test_a_network_claim_outside_the_terminal_phase_is_not_evaluable():
    for claim in NETWORK_CLAIMS:
        result = evaluate_claim(claim, _network_run(3.0, reached=False))
        assert result.verdict == "not evaluable", claim.name
        assert result.detail == "premise not met: not reached"
        assert result.premise["values"]["final_train_accuracy"] == 0.98
        assert result.premise["values"]["nc1_ratio"] is None  # NaN is null in claims.json


def test_the_leading_classes_premise_reads_twice_chance():
    accuracy = np.array([0.45, 0.5, 0.0, 0.5, 0.3, 0.15, 0.0, 0.1, 0.0, 0.25])
    for leading, dominant, met in (([1, 3], [0, 1, 3, 4, 9], True), ([1, 5], [1], False)):
        d = {"class_accuracy": accuracy, "leading": np.array(leading),
             "dominant": np.array(dominant)}  # fmt: skip
        check = LEADING_LEARNT.check(RunResults(pd.DataFrame(), {}, {"directions": d}))
        assert check.met is met
        assert check.values["twice_chance"] == pytest.approx(0.2, abs=1e-15)
        assert check.values[f"class{leading[1]}_accuracy"] == accuracy[leading[1]]


def test_closed_form_follows_gd_bootstraps_the_largest_member_mean():
    claim = next(c for c in CONVERGENCE_CLAIMS if c.name == "closed-form-follows-gd")
    rng = np.random.default_rng(1)
    error = np.column_stack([np.zeros(6), 0.15 + 0.02 * rng.standard_normal((6, 3))])
    arrays = {"natural": {"error_corrected": error, "steps": np.arange(4.0),
                          "factor_corrected": np.array(3.0)}}  # fmt: skip
    result = evaluate_claim(claim, RunResults(pd.DataFrame(), {"preset": "quick"}, arrays))
    # by hand: the same draws, one row of six members per resample, the largest column mean
    draws = np.random.default_rng(0).integers(0, 6, size=(2000, 6))
    stats = np.sort([max(error[row, j].sum() / 6 for j in (1, 2, 3)) for row in draws])
    assert result.interval.low == pytest.approx(stats[math.ceil(0.025 * 2000) - 1], abs=1e-15)
    assert result.interval.high == pytest.approx(stats[math.ceil(0.975 * 2000) - 1], abs=1e-15)
    assert result.verdict == "holds" and result.interval.high < 0.2


def _crossing(steps: np.ndarray, members: np.ndarray) -> float:
    """By hand: the step where the mean curve first makes 0.9 of its gain, linear between
    the two checkpoints around it."""
    mean = members.mean(0)
    target = mean[0] + 0.9 * (mean[-1] - mean[0])
    i = int(np.argmax(mean >= target))
    return float(steps[i - 1] + (target - mean[i - 1]) / (mean[i] - mean[i - 1]))


def test_label_gap_bootstraps_two_ensembles_and_straddles_at_the_bound():
    claim = next(c for c in LOC_CLAIMS if c.name == "whitening-removes-label-gap")
    steps = np.arange(0.0, 11.0)
    real = np.stack([np.minimum(steps / (4.0 + 0.4 * i), 1.0) for i in range(4)])
    shuffled = np.stack([np.minimum(steps / (5.6 + 0.8 * i), 1.0) for i in range(4)])
    labels = {"whitened_real_steps": steps, "whitened_real_accuracy": real,
              "whitened_shuffled_steps": steps, "whitened_shuffled_accuracy": shuffled}  # fmt: skip
    result = evaluate_claim(claim, RunResults(pd.DataFrame(), {}, {"labels": labels}))
    ratio = _crossing(steps, shuffled) / _crossing(steps, real)
    assert result.values["ratio"] == pytest.approx(ratio, abs=1e-12)
    assert result.interval.members == (4, 4)
    # one resample by hand: every real member the fastest, every shuffled one the slowest
    fastest = _crossing(steps, real[[0, 0, 0, 0]])
    slowest = _crossing(steps, shuffled[[3, 3, 3, 3]])
    assert result.interval.high <= slowest / fastest + 1e-12
    assert result.interval.low <= 1.5 <= result.interval.high  # ratio 1.5: straddles
    assert ratio == pytest.approx(1.5, abs=0.02)
    assert result.verdict == "inconclusive"


def _momentum_run(seeds: dict[str, list[float]]) -> RunResults:
    arms = {value: f"m{value}" for value in seeds}
    replicas, arrays = {}, {}
    for value, lengths in seeds.items():
        names = [arms[value]] + [f"{arms[value]}-seed{i}" for i in range(1, len(lengths))]
        replicas[arms[value]] = names
        for name, length in zip(names, lengths, strict=True):
            arrays[f"traj_{name}"] = {"phase_phase1_length": np.array(length),
                                      "phase_left_phase1": np.array(1.0)}  # fmt: skip
    manifest = {"groups": {"momentum": [[v, a] for v, a in arms.items()]}, "replicas": replicas}
    return RunResults(pd.DataFrame(), manifest, arrays)


def test_momentum_order_is_decided_over_each_arms_seeds():
    claim = _claim("momentum-shortens-phase-1")
    one = evaluate_claim(claim, _momentum_run({"0.0": [210.0], "0.5": [110.0], "0.9": [44.0]}))
    assert (one.verdict, one.interval.low, one.interval.high) == ("holds", -66.0, -66.0)
    # medians 200 > 150 > 100, but the seeds of 0.5 and 0.9 overlap: a resample can rise
    seeds = {"0.0": [200.0, 210.0, 190.0], "0.5": [150.0, 90.0, 230.0], "0.9": [100.0, 40.0, 160.0]}
    result = evaluate_claim(claim, _momentum_run(seeds))
    assert result.values["m0.5_phase1_length"] == 150.0
    draws = np.random.default_rng(0)
    idx = [draws.integers(0, 3, size=(2000, 3)) for _ in range(3)]
    arms = [np.array(v) for v in seeds.values()]
    rises = np.sort([max(np.median(arms[1][i1]) - np.median(arms[0][i0]),
                         np.median(arms[2][i2]) - np.median(arms[1][i1]))
                     for i0, i1, i2 in zip(*idx, strict=True)])  # fmt: skip
    assert result.interval.low == rises[49] and result.interval.high == rises[1949]
    assert result.interval.low < 0 < result.interval.high
    assert result.verdict == "inconclusive"


def test_an_inconclusive_demonstration_is_counted_as_such():
    from collapselab.experiments.claims import Erratum, summarize_errata

    erratum = Erratum()
    assert erratum.outcome("inconclusive") == "inconclusive"
    assert erratum.wording("inconclusive") == "inconclusive"
    entries = [
        {"kind": "erratum", "erratum": {"outcome": "confirmed"}, "tier": "erratum"},
        {"kind": "erratum", "erratum": {"outcome": "inconclusive"}, "tier": "erratum"},
    ]
    assert summarize_errata(entries) == {
        "confirmed": 1,
        "not confirmed": 0,
        "not evaluable": 0,
        "inconclusive": 1,
    }
    counts = tier_counts(entries)["erratum"]
    assert counts == {"confirmed": 1, "not confirmed": 0, "not evaluable": 0, "inconclusive": 1}
    assert tier_text("erratum", counts, ("erratum",)) == "1 / 2 confirmed, 1 inconclusive"
