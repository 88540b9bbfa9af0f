"""Claims: the numeric checks against brute-force references, selectors, and the rule that a
claim never crashes a run (exceptions and missing data give "not evaluable")."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from collapselab.experiments.claims import (
    ZERO_ERROR,
    AcrossLayers,
    Claim,
    ClaimResult,
    Final,
    NotEvaluable,
    RunResults,
    Series,
    check_decrease,
    check_log_slopes,
    check_rank_correlation,
    check_value,
    decays_faster,
    decreases_by,
    evaluate_claim,
    evaluate_claims,
    log_slope,
    rank_correlation,
    value_above,
    value_below,
)


def _frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["step", "epoch", "split", "layer", "metric", "value"])


def _results(rows: list[tuple], preset: str = "quick", **manifest: object) -> RunResults:
    return RunResults(_frame(rows), {"preset": preset, "config": {}, **manifest})


def _training_rows(n_epochs: int = 6, zero_at: int = 3) -> list[tuple]:
    rows = []
    for epoch in range(n_epochs):
        acc = 1.0 if epoch >= zero_at else 0.5 + 0.05 * epoch
        rows.append((10 * epoch, epoch, "train", "", "accuracy", acc))
        rows.append((10 * epoch, epoch, "train", "", "nc1", 10.0 * math.exp(-epoch)))
        rows.append((10 * epoch, epoch, "test", "", "accuracy", 0.4 + 0.1 * epoch))
    return rows


# ------------------------------------------------------------------- check_decrease
def test_check_decrease_exact_ratio_and_verdicts() -> None:
    x = np.arange(6.0)
    y = 10.0 * np.exp(-x)
    holds = check_decrease(x, y, factor=100.0)
    assert holds.verdict == "holds"
    assert holds.values["end/start"] == pytest.approx(math.exp(-5.0), rel=1e-14)
    assert holds.threshold == pytest.approx(0.01)
    assert check_decrease(x, y, factor=1000.0).verdict == "does not hold"
    window = check_decrease(x, y, factor=math.e**2 * 0.999, start=1, end=3)
    assert window.verdict == "holds"
    assert (window.values["x_start"], window.values["x_end"]) == (1.0, 3.0)
    assert window.values["end/start"] == pytest.approx(math.exp(-2.0), rel=1e-14)


def test_check_decrease_unsorted_input_is_sorted_by_x() -> None:
    result = check_decrease([2.0, 0.0, 1.0], [1.0, 8.0, 4.0], factor=8.0)
    assert result.verdict == "holds"
    assert (result.values["start"], result.values["end"]) == (8.0, 1.0)


@pytest.mark.parametrize(
    ("x", "y", "reason"),
    [
        ([0.0, 1.0, 2.0], [1.0, 0.5, np.nan], "NaN"),
        ([0.0], [1.0], "fewer than two"),
        ([0.0, 1.0], [0.0, 0.0], "positive start"),
        ([0.0, 1.0], [-1.0, -2.0], "positive start"),
    ],
)
def test_check_decrease_not_evaluable(x: list, y: list, reason: str) -> None:
    result = check_decrease(x, y, factor=2.0)
    assert result.verdict == "not evaluable"
    assert reason in result.detail


def test_check_decrease_rejects_factor_below_one() -> None:
    with pytest.raises(ValueError, match="factor"):
        check_decrease([0, 1], [2, 1], factor=0.5)


# ------------------------------------------------------------ rank correlations
def _ranks(values: np.ndarray) -> np.ndarray:
    ranks = np.empty(values.size)
    for i, v in enumerate(values):
        ranks[i] = sum(1 for w in values if w < v)
    return ranks


def _spearman_brute(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = _ranks(x), _ranks(y)
    n = x.size
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((rx[i] - mx) * (ry[i] - my) for i in range(n))
    vx = sum((rx[i] - mx) ** 2 for i in range(n))
    vy = sum((ry[i] - my) ** 2 for i in range(n))
    return cov / math.sqrt(vx * vy)


def _kendall_brute(x: np.ndarray, y: np.ndarray) -> float:
    concordant = discordant = 0
    for i, j in itertools.combinations(range(x.size), 2):
        s = np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
        concordant += s > 0
        discordant += s < 0
    return (concordant - discordant) / (x.size * (x.size - 1) / 2)


def test_rank_correlations_match_brute_force() -> None:
    rng = np.random.default_rng(0)
    x = np.arange(9.0)
    y = -x + rng.normal(scale=2.0, size=9)  # no ties with probability one
    spear = check_rank_correlation(x, y, threshold=0.5, method="spearman")
    kend = check_rank_correlation(x, y, threshold=0.5, method="kendall")
    assert spear.values["spearman"] == pytest.approx(_spearman_brute(x, y), abs=1e-12)
    assert kend.values["kendall"] == pytest.approx(_kendall_brute(x, y), abs=1e-12)
    assert spear.values["n"] == 9.0
    for result in (spear, kend):
        rho = next(iter(result.values.values()))
        assert result.verdict == ("holds" if rho <= -0.5 else "does not hold")
        assert result.threshold == -0.5


def test_rank_correlation_direction_and_threshold() -> None:
    x = np.arange(5.0)
    assert check_rank_correlation(x, -x, 0.99).verdict == "holds"
    assert check_rank_correlation(x, x, 0.99).verdict == "does not hold"
    inc = check_rank_correlation(x, x**2, 0.99, direction="increasing")
    assert inc.verdict == "holds"
    assert inc.values["spearman"] == pytest.approx(1.0)
    # one swap: Kendall tau = (9 - 1) / 10 = 0.8
    swapped = np.array([0.0, 2.0, 1.0, 3.0, 4.0])
    kend = check_rank_correlation(x, swapped, 0.79, method="kendall", direction="increasing")
    assert kend.values["kendall"] == pytest.approx(0.8, abs=1e-12)
    assert kend.verdict == "holds"
    strict = check_rank_correlation(x, swapped, 0.81, method="kendall", direction="increasing")
    assert strict.verdict == "does not hold"


@pytest.mark.parametrize(
    ("y", "reason"),
    [
        ([1.0, np.nan, 0.5, 0.2], "NaN"),
        ([1.0, 1.0, 1.0, 1.0], "constant"),
    ],
)
def test_rank_correlation_not_evaluable(y: list, reason: str) -> None:
    result = check_rank_correlation(np.arange(4.0), y, 0.5)
    assert result.verdict == "not evaluable"
    assert reason in result.detail


def test_rank_correlation_too_few_points_and_bad_arguments() -> None:
    assert check_rank_correlation([0, 1], [1, 0], 0.5).verdict == "not evaluable"
    with pytest.raises(ValueError, match="threshold"):
        check_rank_correlation([0, 1, 2], [2, 1, 0], 1.5)
    with pytest.raises(ValueError, match="method"):
        check_rank_correlation([0, 1, 2], [2, 1, 0], 0.5, method="pearson")  # type: ignore[arg-type]


# ------------------------------------------------------------------ check_value
def test_check_value_operators() -> None:
    assert check_value(0.5, 0.5, "<=").verdict == "holds"
    assert check_value(0.5, 0.5, "<").verdict == "does not hold"
    assert check_value(0.7, 0.5, ">").verdict == "holds"
    low = check_value(0.4, 0.5, ">=")
    assert (low.verdict, low.values["value"], low.threshold) == ("does not hold", 0.4, 0.5)
    assert "0.4 < 0.5" in low.detail
    assert check_value(float("nan"), 0.5).verdict == "not evaluable"
    with pytest.raises(ValueError, match="op"):
        check_value(1.0, 0.5, "==")


# ------------------------------------------------------------------- log slopes
def _slope_brute(u: list[float], v: list[float]) -> float:
    n = len(u)
    mu, mv = sum(u) / n, sum(v) / n
    num = sum((u[i] - mu) * (v[i] - mv) for i in range(n))
    den = sum((u[i] - mu) ** 2 for i in range(n))
    return num / den


def test_log_slope_exact_and_against_brute_force() -> None:
    x = np.arange(1.0, 8.0)
    assert log_slope(x, 3.0 * 10.0 ** (-0.2 * x)) == pytest.approx(-0.2, abs=1e-13)
    assert log_slope(x, x**-2.0, log_x=True) == pytest.approx(-2.0, abs=1e-13)
    rng = np.random.default_rng(1)
    y = np.exp(rng.normal(size=7))
    reference = _slope_brute(list(x), [math.log10(v) for v in y])
    assert log_slope(x, y) == pytest.approx(reference, abs=1e-12)


def test_check_log_slopes_factor() -> None:
    x = np.arange(6.0)
    fast, slow = 10.0 ** (-0.5 * x), 10.0 ** (-0.2 * x)
    holds = check_log_slopes(x, fast, x, slow, factor=2.0)
    assert holds.verdict == "holds"
    assert holds.values["slope_fast"] == pytest.approx(-0.5, abs=1e-13)
    assert holds.values["slope_slow"] == pytest.approx(-0.2, abs=1e-13)
    assert holds.threshold == pytest.approx(-0.4, abs=1e-13)
    assert check_log_slopes(x, fast, x, slow, factor=3.0).verdict == "does not hold"
    # the second series not decreasing: any decrease of the first is faster
    assert check_log_slopes(x, fast, x, np.ones(6)).verdict == "holds"
    assert check_log_slopes(x, np.ones(6), x, slow).verdict == "does not hold"


def test_check_log_slopes_not_evaluable() -> None:
    x = np.arange(4.0)
    assert "positive" in check_log_slopes(x, [1, 0, 1, 1], x, [1, 1, 1, 1]).detail
    assert check_log_slopes([1.0], [1.0], x, [4, 3, 2, 1]).verdict == "not evaluable"
    assert check_log_slopes(x, [1, np.nan, 1, 1], x, [1, 1, 1, 1]).verdict == "not evaluable"


# -------------------------------------------------------------------- selectors
def test_series_last_row_wins_windows_and_no_epoch_rows() -> None:
    rows = _training_rows()
    rows.append((55, 5, "train", "", "nc1", 123.0))  # logged again in epoch 5: wins
    rows.append((60, -1, "train", "", "nc1", 999.0))  # not tied to an epoch: dropped
    results = _results(rows)
    x, y = Series("nc1")(results)
    assert x.tolist() == [0, 1, 2, 3, 4, 5]
    assert y[-1] == 123.0
    assert y[2] == pytest.approx(10 * math.exp(-2))
    x, _ = Series("nc1", start=ZERO_ERROR, end=4)(results)
    assert x.tolist() == [3, 4]
    assert results.zero_error_epoch() == 3


def test_series_zero_error_window_never_reached() -> None:
    results = _results(_training_rows(zero_at=99))
    claim = decreases_by("c", "s", "src", Series("nc1", start=ZERO_ERROR), factor=2.0)
    result = evaluate_claim(claim, results)
    assert result.verdict == "not evaluable"
    assert "never reached" in result.detail


def test_across_layers_order_positions_and_epoch() -> None:
    rows = []
    for epoch in (0, 1):
        for i, layer in enumerate(["conv1", "block1", "block2", "fc"]):
            rows.append((epoch, epoch, "train", layer, "pfc1", (4 - i) * (2 - epoch)))
    results = _results(rows)
    x, y = AcrossLayers("pfc1")(results)
    assert x.tolist() == [0, 1, 2, 3]
    assert y.tolist() == [4, 3, 2, 1]
    x, y = AcrossLayers("pfc1", epoch=0, layers=["fc", "conv1"], positions={"fc": 1, "conv1": 0})(
        results
    )
    assert (x.tolist(), y.tolist()) == ([1.0, 0.0], [2.0, 8.0])
    claim = rank_correlation("mono", "s", "src", AcrossLayers("pfc1"), threshold=0.9)
    result = evaluate_claim(claim, results)
    assert result.verdict == "holds"
    assert result.values["spearman"] == pytest.approx(-1.0)


def test_final_takes_largest_step() -> None:
    results = _results(_training_rows())
    assert Final("accuracy", "test")(results) == pytest.approx(0.9)
    assert Final("accuracy", "train")(results) == 1.0


# ------------------------------------------------------------ claims, evaluation
def test_builders_evaluate_on_run_results() -> None:
    results = _results(_training_rows())
    claims = [
        decreases_by("nc1-falls", "NC1 falls", "Fig. 7", Series("nc1"), factor=100.0),
        value_above("test-acc", "accurate", "Tab. 1", Final("accuracy", "test"), 0.95),
        value_below("test-acc-low", "below", "Tab. 1", Final("accuracy", "test"), 0.95),
        decays_faster(
            "faster",
            "nc1 falls faster than test error",
            "Fig. 2",
            Series("nc1"),
            Series("accuracy", "test"),
        ),
    ]
    document = evaluate_claims(claims, results)
    verdicts = {c["name"]: c["verdict"] for c in document["claims"]}
    assert verdicts == {
        "nc1-falls": "holds",  # exp(-5) = 0.0067 <= 0.01
        "test-acc": "does not hold",  # 0.9 < 0.95
        "test-acc-low": "holds",
        "faster": "holds",  # test accuracy rises: its log slope is positive
    }
    assert document["summary"] == {"holds": 3, "does not hold": 1, "not evaluable": 0}
    first = document["claims"][0]
    assert first["threshold_text"].startswith("train nc1")
    assert first["values"]["end/start"] == pytest.approx(math.exp(-5.0))
    assert first["source"] == "Fig. 7"


def test_exception_inside_claim_gives_not_evaluable() -> None:
    def broken(results: RunResults) -> ClaimResult:
        raise ZeroDivisionError("boom")

    claim = Claim("broken", "s", "src", "t", broken)
    result = evaluate_claim(claim, _results(_training_rows()))
    assert result.verdict == "not evaluable"
    assert result.detail == "evaluation raised ZeroDivisionError: boom"


def test_missing_metric_and_wrong_return_type_and_preset() -> None:
    results = _results(_training_rows())
    missing = value_below("m", "s", "src", Final("nc2_etf_distance"), 0.1)
    result = evaluate_claim(missing, results)
    assert result.verdict == "not evaluable"
    assert "no measured rows" in result.detail and "nc2_etf_distance" in result.detail
    wrong = Claim("w", "s", "src", "t", lambda r: 1.0)  # type: ignore[arg-type, return-value]
    assert "expected a ClaimResult" in evaluate_claim(wrong, results).detail
    paper_only = Claim("p", "s", "src", "t", lambda r: ClaimResult("holds"), presets=("paper",))
    result = evaluate_claim(paper_only, results)
    assert result.verdict == "not evaluable"
    assert "preset 'quick'" in result.detail
    assert evaluate_claim(paper_only, _results([], preset="paper")).verdict == "holds"


def test_not_evaluable_exception_reason_is_kept() -> None:
    def needs_more(results: RunResults) -> ClaimResult:
        raise NotEvaluable("needs 5 seeds")

    result = evaluate_claim(Claim("n", "s", "src", "t", needs_more), _results([]))
    assert (result.verdict, result.detail) == ("not evaluable", "needs 5 seeds")


def test_claim_validation_and_json_of_nan() -> None:
    with pytest.raises(ValueError, match=r"Claim\.name"):
        Claim("", "s", "src", "t", lambda r: ClaimResult("holds"))
    with pytest.raises(ValueError, match="verdict"):
        ClaimResult("maybe")  # type: ignore[arg-type]
    as_json = ClaimResult("not evaluable", {"a": float("nan"), "b": 2}, float("inf")).to_dict()
    assert as_json["values"] == {"a": None, "b": 2}
    assert as_json["threshold"] is None
    claim = Claim("dup", "s", "src", "t", lambda r: ClaimResult("holds"))
    with pytest.raises(ValueError, match="unique"):
        evaluate_claims([claim, claim], _results([]))


def test_nan_logged_last_is_not_hidden_by_an_earlier_value() -> None:
    rows = _training_rows()
    rows.append((51, 5, "train", "", "nc1", float("nan")))  # a second, NaN row in epoch 5
    results = _results(rows)
    _, y = Series("nc1")(results)
    assert np.isnan(y[-1])
    claim = decreases_by("c", "s", "src", Series("nc1"), factor=2.0)
    result = evaluate_claim(claim, results)
    assert result.verdict == "not evaluable"
    assert "NaN" in result.detail
