"""Noise-aware verdicts: intervals over seeds or ensemble members (issue 35, item 3).

A claim that compares a statistic of quantities measured over seeds, ensemble members or
repeats with a bound decides from an interval for the statistic, not from its point value:

``holds``
    the whole interval is on the side of the bound the claim states;
``does not hold``
    the whole interval is on the other side;
``inconclusive``
    the interval straddles the bound: the members do not decide it.

The intervals (each a :class:`Interval`, shown in the report, ``claims.json`` and the CLI):

* :func:`bootstrap_interval`: the **percentile bootstrap** (Efron & Tibshirani 1993, §13.3)
  of any statistic of one or more groups of members. Each of ``B`` resamples draws, for
  every group independently, ``n_g`` members with replacement (a seeded
  :func:`numpy.random.default_rng`, so the interval is reproducible); the interval is
  ``[q_{(1-level)/2}, q_{(1+level)/2}]`` of the ``B`` statistics, ``q_p`` the inverse of
  their empirical distribution function (the smallest value ``v`` with ``F_B(v) >= p``).
* :func:`proportion_interval`: the **exact (Clopper-Pearson) interval** of a proportion
  ``k / n`` (a fraction of seeds): ``[B^{-1}(α/2; k, n-k+1), B^{-1}(1-α/2; k+1, n-k)]``
  with ``B^{-1}`` the beta quantile (``0`` for ``k = 0``, ``1`` for ``k = n``); coverage
  ``>= level`` for every true proportion.
* :func:`median_interval`: the **distribution-free order-statistic interval** of a median,
  ``[x_(j), x_(n+1-j)]`` with the largest ``j`` whose exact coverage
  ``1 - 2 P(Bin(n, 1/2) <= j-1)`` is ``>= level``; with too few members for ``level`` it
  is ``[min, max]`` and its exact (lower) coverage is the interval's ``level``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from collapselab.checks import check_choice, check_float
from collapselab.report.verdicts import interval_text

LEVEL = 0.95
"""Default coverage of the intervals."""
RESAMPLES = 2000
"""Default number of bootstrap resamples."""
SEED = 0
"""Default seed of the bootstrap's generator (an interval is reproducible bit for bit)."""

HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "does not hold", "inconclusive"

_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}


@dataclass(frozen=True)
class Interval:
    """An interval for a statistic of members.

    Attributes:
        estimate: the statistic on the members as measured.
        low, high: the interval's ends.
        level: its coverage (nominal for the bootstrap, exact for the others; for a median
            of too few members, the exact coverage of ``[min, max]``).
        method: ``"percentile bootstrap"``, ``"Clopper-Pearson"`` or ``"order statistics"``.
        members: number of members per group.
        resamples: bootstrap resamples (0 for an exact interval).
        seed: the bootstrap generator's seed (``None`` for an exact interval).
    """

    estimate: float
    low: float
    high: float
    level: float
    method: str
    members: tuple[int, ...]
    resamples: int = 0
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``claims.json`` record (``interval``)."""
        record: dict[str, Any] = {
            "estimate": _finite(self.estimate),
            "low": _finite(self.low),
            "high": _finite(self.high),
            "level": self.level,
            "method": self.method,
            "members": list(self.members),
        }
        if self.resamples:
            record |= {"resamples": self.resamples, "seed": self.seed}
        return record

    def text(self) -> str:
        """``"0.157 [0.121, 0.196] (95% percentile bootstrap over 10 members, 2000
        resamples, seed 0)"``."""
        return interval_text(self.to_dict())


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _check_level(level: float) -> None:
    check_float("level", level, minimum=0.0, maximum=1.0)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be strictly between 0 and 1, got {level!r}")


def bootstrap_interval(
    groups: Sequence[Any],
    statistic: Callable[..., float],
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Interval:
    """Percentile bootstrap interval of ``statistic(*groups)`` (module docstring).

    Args:
        groups: one array per group of members, members along axis 0 (a group may hold a
            row of values per member: a per-member curve).
        statistic: ``(*arrays) -> float``, called on the groups and on each resample.
        level: coverage.
        resamples: ``B``.
        seed: seed of :func:`numpy.random.default_rng`; the resample indices are drawn
            group after group, ``(B, n_g)`` integers each.

    Raises:
        ValueError: a group without members, or a statistic that is not finite on the
            members as measured.
    """
    _check_level(level)
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples!r}")
    arrays = [np.asarray(group, dtype=np.float64) for group in groups]
    if not arrays or any(a.ndim == 0 or a.shape[0] == 0 for a in arrays):
        raise ValueError("every group needs at least one member (along axis 0)")
    estimate = float(statistic(*arrays))
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, a.shape[0], size=(resamples, a.shape[0])) for a in arrays]
    values = np.array(
        [
            statistic(*(a[idx[b]] for a, idx in zip(arrays, draws, strict=True)))
            for b in range(resamples)
        ],
        dtype=np.float64,
    )
    alpha = 1.0 - level
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2], method="inverted_cdf")
    return Interval(
        estimate,
        float(low),
        float(high),
        level,
        "percentile bootstrap",
        tuple(a.shape[0] for a in arrays),
        resamples,
        seed,
    )


def proportion_interval(successes: int, members: int, level: float = LEVEL) -> Interval:
    """Exact Clopper-Pearson interval of the proportion ``successes / members``."""
    from scipy import stats

    _check_level(level)
    if members < 1 or not 0 <= successes <= members:
        raise ValueError(f"need 0 <= successes <= members >= 1, got {successes}/{members}")
    alpha = 1.0 - level
    k, n = int(successes), int(members)
    low = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return Interval(k / n, low, high, level, "Clopper-Pearson", (n,))


def median_coverage(members: int, j: int) -> float:
    """Exact coverage of ``[x_(j), x_(n+1-j)]`` for the median of any continuous
    distribution: ``1 - 2 P(Bin(n, 1/2) <= j - 1)``."""
    tail = sum(math.comb(members, i) for i in range(j)) / 2.0**members
    return 1.0 - 2.0 * tail


def median_interval(values: Any, level: float = LEVEL) -> Interval:
    """Distribution-free order-statistic interval of the median of ``values``."""
    _check_level(level)
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    n = x.size
    if n == 0:
        raise ValueError("a median interval needs at least one member")
    j = 1
    while j + 1 <= (n + 1) // 2 and median_coverage(n, j + 1) >= level:
        j += 1
    coverage = median_coverage(n, j)
    return Interval(
        float(np.median(x)),
        float(x[j - 1]),
        float(x[n - j]),
        level if coverage >= level else coverage,
        "order statistics",
        (n,),
    )


def judge(interval: Interval, bound: float, op: str) -> str:
    """``"holds"`` when both ends satisfy ``end op bound``, ``"does not hold"`` when
    neither does, ``"inconclusive"`` when the interval straddles the bound."""
    check_choice("op", op, sorted(_OPS))
    ends = [_OPS[op](interval.low, bound), _OPS[op](interval.high, bound)]
    if all(ends):
        return HOLDS
    if not any(ends):
        return DOES_NOT_HOLD
    return INCONCLUSIVE


def bootstrap_reading(over: str = "the members") -> str:
    """The words a claim's reading adds when its verdict is decided by
    :func:`bootstrap_interval` at the defaults (part of the registered reading)."""
    return (
        f"; decided by its {100 * LEVEL:g}% percentile-bootstrap interval over {over} "
        f"({RESAMPLES} resamples, seed {SEED}): all of it within the bound holds, none of it "
        "does not hold, straddling the bound inconclusive"
    )


def exact_reading(method: str, over: str = "the members") -> str:
    """The words a claim's reading adds when its verdict is decided by an exact interval
    (``"Clopper-Pearson"``, ``"order-statistic"``) at :data:`LEVEL`."""
    return (
        f"; decided by its exact {100 * LEVEL:g}% {method} interval over {over}: all of it "
        "within the bound holds, none of it does not hold, straddling the bound inconclusive"
    )
