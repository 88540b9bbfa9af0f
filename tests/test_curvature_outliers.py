"""The library's one outlier rule (:func:`collapselab.curvature.count_outliers`) against a
brute-force reference written from its docstring with loops, on random spectra and on exact
fixtures: known outliers over a zero or a non-zero bulk, bulks with a gap inside them, equal
values (exactly and to rounding), fewer than three values, non-positive spectra, ties."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collapselab.curvature import count_outliers
from tests._curvature_reference import outliers_by_loops


def _every_gap_by_loops(values, floor: float = 1e-12) -> int:
    """The rule the deep UFM's code used before (every gap read, no resolution; all of them
    for equal values): the reference the fixtures contrast with."""
    vals = sorted((float(v) for v in values), reverse=True)
    eps = floor * vals[0]
    v = [math.log(max(x, eps)) for x in vals]
    gaps = [v[j] - v[j + 1] for j in range(len(v) - 1)]
    return len(v) if max(gaps) <= 0 else gaps.index(max(gaps)) + 1


def _spectrum(rng, n_out: int, n_bulk: int, n_zero: int) -> np.ndarray:
    parts = [
        rng.uniform(1.0, 2.0, n_out),
        rng.uniform(1e-3, 2e-2, n_bulk),
        np.zeros(n_zero),
    ]
    return rng.permutation(np.concatenate(parts))


@pytest.mark.parametrize("seed", range(40))
def test_the_rule_equals_its_brute_force_reference_on_random_spectra(seed):
    """Random sizes (1 to 120 values), outliers, bulks, null spaces, negative rounding,
    floors; also the order of the values and an exact rescaling (a power of 2) change
    nothing: the rule reads ratios."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        n_out, n_bulk, n_zero = rng.integers(0, 20), rng.integers(0, 60), rng.integers(0, 40)
        values = _spectrum(rng, n_out, n_bulk, n_zero)
        if values.size == 0:
            continue
        values = values + rng.choice([0.0, 1e-16]) * rng.standard_normal(values.size)
        floor = float(rng.choice([1e-12, 1e-6, 1e-3]))
        expected = outliers_by_loops(values, floor)
        assert count_outliers(values, floor=floor) == expected
        assert count_outliers(rng.permutation(values), floor=floor) == expected
        assert count_outliers(values * 2.0**7, floor=floor) == expected


def test_known_outliers_over_a_zero_and_a_nonzero_bulk():
    # paper 004's optimum: K² equal outliers, an exactly zero bulk (and its rounding)
    assert count_outliers(np.r_[np.full(9, 0.2), np.zeros(91)]) == 9
    assert count_outliers(np.r_[np.full(9, 0.2), 1e-17 * np.ones(91)]) == 9
    rounding = np.r_[0.2 + 1e-17 * np.arange(9), 1e-17 * np.random.default_rng(0).normal(size=91)]
    assert count_outliers(rounding) == 9
    # graded outliers (cross-entropy's) over a non-zero bulk
    rng = np.random.default_rng(1)
    graded = np.r_[[3.0, 1.5, 0.9, 0.5], rng.uniform(1e-3, 1e-2, 40)]
    assert count_outliers(graded) == outliers_by_loops(graded) == 4


def test_a_bulk_with_a_gap_inside_it():
    """The step into the null space, or between two clusters of the bulk, in the lower half
    of the values: the rule counts the outliers where reading every gap counts the bulk."""
    rng = np.random.default_rng(0)
    network_like = _spectrum(rng, 16, 300, 200)  # the docstring's example
    assert count_outliers(network_like) == outliers_by_loops(network_like) == 16
    assert _every_gap_by_loops(network_like) == 316  # the rank
    clusters = np.r_[rng.uniform(10, 12, 5), rng.uniform(0.1, 0.2, 60), rng.uniform(1e-6, 2e-6, 40)]
    assert count_outliers(clusters) == outliers_by_loops(clusters) == 5
    assert _every_gap_by_loops(clusters) == 65
    # the limitation the docstring states: a wider gap in the upper half of the values wins
    upper = np.r_[rng.uniform(10, 12, 5), rng.uniform(0.1, 0.2, 20), rng.uniform(1e-6, 2e-6, 80)]
    assert count_outliers(upper) == outliers_by_loops(upper) == 25
    # ... and a window that holds the bulk but not the second cluster counts the outliers
    window = np.sort(upper)[::-1][:25]
    assert count_outliers(window) == 5


def test_equal_values_have_no_outliers():
    for m in (1, 2, 3, 5, 100):
        assert count_outliers(np.ones(m)) == 0
        assert count_outliers(np.full(m, 0.3)) == 0
    # equal to rounding: the gaps are below the resolution ε λ_1
    near = 0.3 + 1e-17 * np.random.default_rng(2).standard_normal(30)
    assert count_outliers(near) == outliers_by_loops(near) == 0
    # K² = 16 equal outliers over 14 zeros: more outliers than bulk, none in the half read
    assert count_outliers(np.r_[np.full(16, 0.3), np.zeros(14)]) == 0
    assert count_outliers(np.r_[np.full(15, 0.3), np.zeros(15)]) == 15


def test_fewer_than_three_values_and_non_positive_spectra():
    with pytest.raises(ValueError, match="at least one"):
        count_outliers([])
    with pytest.raises(ValueError, match="finite"):
        count_outliers([1.0, np.nan])
    assert count_outliers([5.0]) == 0
    assert count_outliers([0.0]) == 0
    assert count_outliers([5.0, 1.0]) == count_outliers([1.0, 5.0]) == 1
    assert count_outliers([1.0, 1.0]) == 0
    assert count_outliers([5.0, 0.0]) == 1
    assert count_outliers([5.0, 5.0, 1.0]) == 0  # two above one: no bulk below them
    assert count_outliers([5.0, 1.0, 1.0]) == 1
    assert count_outliers([0.0, 0.0, -1.0]) == 0
    assert count_outliers([-1.0, -2.0, -3.0]) == 0
    assert count_outliers([5.0, 1e-17, 0.0, -1e-16]) == 1  # zeros and negatives floored


def test_ties_go_to_the_smallest_count_and_the_floor_sets_the_resolution():
    assert count_outliers([4.0, 2.0, 1.0, 1.0]) == 1  # log 4 − log 2 = log 2 − log 1, exactly
    assert count_outliers([8.0, 8.0, 2.0, 2.0, 1.0, 1.0]) == 2
    # floor = Lanczos's tolerance: values closer than tol · λ_1 are not told apart
    values = [1.0, 0.9, 0.0105, 0.0100, 0.0095, 0.009]
    assert count_outliers(values, floor=1e-12) == outliers_by_loops(values) == 2
    close = [1.0, 1.0, 0.9998, 0.9998, 0.9998, 0.9998]
    assert count_outliers(close, floor=1e-12) == 2  # a step of 2e-4 is resolved at 1e-12
    assert count_outliers(close, floor=1e-3) == 0  # not at a resolution of 1e-3
    with pytest.raises(ValueError, match="floor"):
        count_outliers(values, floor=0.0)


def test_the_threshold_count_is_a_numerical_rank():
    assert count_outliers([9, 8, 7, 0.1], "threshold", threshold=0.5) == 3
    assert count_outliers([9, 8, 7, 0.1], "threshold", threshold=7.5, relative=False) == 2
    assert count_outliers(np.r_[np.full(9, 0.2), 1e-17 * np.ones(91)], "threshold",
                          threshold=1e-8) == 9  # fmt: skip
    assert count_outliers([0.0, -1.0], "threshold", threshold=0.5) == 0
    with pytest.raises(ValueError, match="method"):
        count_outliers([1.0, 0.0], "largest")
