"""Noise-aware verdicts (issue 35 item 3): the intervals over seeds or ensemble members,
checked against independent brute-force float64 computations, and the verdicts they give."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from collapselab.experiments.intervals import (
    Interval,
    bootstrap_interval,
    judge,
    median_coverage,
    median_interval,
    proportion_interval,
)


def _inverted_cdf(sorted_values: np.ndarray, p: float) -> float:
    """The smallest value v with F(v) >= p of an equally weighted sample (by hand)."""
    k = math.ceil(p * sorted_values.size - 1e-12)
    return float(sorted_values[max(k, 1) - 1])


def test_bootstrap_matches_a_loop_over_the_same_draws():
    values = np.array([0.157, 0.121, 0.18, 0.143, 0.166, 0.131, 0.175, 0.149, 0.162, 0.138])
    got = bootstrap_interval([values], np.mean, level=0.9, resamples=500, seed=7)
    # by hand: the same generator, one row of n indices per resample, a mean by summation
    rng = np.random.default_rng(7)
    draws = rng.integers(0, values.size, size=(500, values.size))
    means = sorted(sum(values[i] for i in row) / values.size for row in draws)
    assert got.low == pytest.approx(_inverted_cdf(np.array(means), 0.05), abs=1e-15)
    assert got.high == pytest.approx(_inverted_cdf(np.array(means), 0.95), abs=1e-15)
    assert got.estimate == pytest.approx(0.1522, abs=1e-12)
    assert (got.members, got.resamples, got.seed, got.level) == ((10,), 500, 7, 0.9)


def test_bootstrap_quantiles_agree_with_the_exact_bootstrap_distribution():
    # Every one of the 5^5 resamples of five members, equally likely: the exact bootstrap
    # distribution of the mean. The Monte-Carlo percentiles lie between its quantiles at
    # p -/+ 0.01 (20 000 resamples: the percentile's standard error is ~0.0015 in p).
    values = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    exact = np.sort([np.mean(values[list(t)]) for t in itertools.product(range(5), repeat=5)])
    got = bootstrap_interval([values], np.mean, level=0.95, resamples=20_000, seed=3)
    assert _inverted_cdf(exact, 0.015) <= got.low <= _inverted_cdf(exact, 0.035)
    assert _inverted_cdf(exact, 0.965) <= got.high <= _inverted_cdf(exact, 0.985)
    assert exact[0] == 1.0 and exact[-1] == 16.0


def test_bootstrap_of_two_groups_resamples_each_on_its_own():
    a, b = np.array([3.0, 3.1, 2.9, 3.05]), np.array([1.0, 1.2, 0.9])

    def gap(x, y):
        return float(np.mean(x) - np.mean(y))

    got = bootstrap_interval([a, b], gap, resamples=300, seed=11)
    rng = np.random.default_rng(11)
    ia = rng.integers(0, 4, size=(300, 4))
    ib = rng.integers(0, 3, size=(300, 3))
    gaps = np.sort([a[i].sum() / 4 - b[j].sum() / 3 for i, j in zip(ia, ib, strict=True)])
    assert got.low == pytest.approx(_inverted_cdf(gaps, 0.025), abs=1e-14)
    assert got.high == pytest.approx(_inverted_cdf(gaps, 0.975), abs=1e-14)
    assert got.estimate == pytest.approx(3.0125 - 1.0333333333333334, abs=1e-12)
    assert got.members == (4, 3)


def test_bootstrap_is_reproducible_and_seeded():
    values = np.linspace(0.0, 1.0, 9) ** 2
    first = bootstrap_interval([values], np.median, seed=5)
    assert first == bootstrap_interval([values], np.median, seed=5)
    assert first != bootstrap_interval([values], np.median, seed=6)


def _binomial_tail_root(k: int, n: int, target: float, upper: bool) -> float:
    """Bisection on a binomial tail by direct summation: the Clopper-Pearson end."""

    def cdf(p: float, m: int) -> float:  # P(X <= m)
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(m + 1))

    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if upper:  # P(X <= k | p) = target, decreasing in p
            lo, hi = (mid, hi) if cdf(mid, k) > target else (lo, mid)
        else:  # P(X >= k | p) = 1 - P(X <= k - 1) = target, increasing in p
            lo, hi = (mid, hi) if 1 - cdf(mid, k - 1) < target else (lo, mid)
    return (lo + hi) / 2


@pytest.mark.parametrize(("k", "n"), [(3, 3), (2, 3), (0, 5), (7, 10), (1, 1)])
def test_clopper_pearson_matches_binomial_tails(k, n):
    got = proportion_interval(k, n, level=0.95)
    low = 0.0 if k == 0 else _binomial_tail_root(k, n, 0.025, upper=False)
    high = 1.0 if k == n else _binomial_tail_root(k, n, 0.025, upper=True)
    assert got.low == pytest.approx(low, abs=1e-9)
    assert got.high == pytest.approx(high, abs=1e-9)
    assert got.estimate == k / n


def test_clopper_pearson_three_of_three():
    got = proportion_interval(3, 3)
    assert got.low == pytest.approx(0.025 ** (1 / 3), abs=1e-12)  # 0.2924
    assert got.high == 1.0
    assert judge(got, 2 / 3, ">=") == "inconclusive"


def test_median_interval_coverage_by_enumeration():
    # coverage of [x_(j), x_(n+1-j)]: the median lies inside unless j-1 or fewer of the n
    # signs (x_i > median) are positive, or j-1 or fewer negative: all 2^n patterns counted
    for n in (3, 5, 10):
        for j in range(1, (n + 1) // 2 + 1):
            outside = sum(
                sum(s) <= j - 1 or n - sum(s) <= j - 1 for s in itertools.product((0, 1), repeat=n)
            )
            assert median_coverage(n, j) == pytest.approx(1 - outside / 2**n, abs=1e-15)
    values = np.array([5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0, 10.0])
    got = median_interval(values, level=0.95)
    assert (got.low, got.high, got.estimate) == (2.0, 9.0, 5.5)  # j = 2: coverage 0.9785
    assert got.level == 0.95
    few = median_interval([0.3, 0.1, 0.2], level=0.95)
    assert (few.low, few.high) == (0.1, 0.3)
    assert few.level == pytest.approx(0.75, abs=1e-15)  # all the coverage three members give


def test_judge_holds_fails_or_straddles():
    interval = Interval(0.15, 0.12, 0.19, 0.95, "percentile bootstrap", (10,), 2000, 0)
    assert judge(interval, 0.2, "<=") == "holds"
    assert judge(interval, 0.1, "<=") == "does not hold"
    assert judge(interval, 0.16, "<=") == "inconclusive"
    assert judge(interval, 0.12, ">=") == "holds"
    assert judge(interval, 0.12, ">") == "inconclusive"
    assert interval.text() == (
        "0.15 [0.12, 0.19] (95% percentile bootstrap over 10 members, 2000 resamples, seed 0)"
    )
