"""Helpers shared by the PFC experiment modules (private)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.experiments.claims import RunResults

PAPER = "001"
SOURCE = "Wang, Gai & Zhang, Progressive Feedforward Collapse of ResNet Training"

PFC_LABELS = {
    "nc1_trace_ratio": "PFC1  Tr(Σ_W)/Tr(Σ_B)",
    "nc2_etf_distance": "PFC2  distance to simplex ETF",
    "ncc_accuracy": "PFC3  NCC accuracy",
}


@contextlib.contextmanager
def cpu_threads(config: Mapping[str, Any]) -> Iterator[None]:
    """One BLAS / torch thread when ``config["cpu_threads"] == 1``.

    The quick networks are small: on a 2-core machine shared with other work, threading
    their matrix products only adds synchronisation (measured: 7x slower with 2 threads on
    a loaded 2-core machine).
    """
    if config.get("cpu_threads") == 1:
        with serial_threads():
            yield
    else:
        yield


def row_value(results: RunResults, metric: str, layer: str, split: str = "train") -> float:
    """The last logged value of ``metric`` at ``layer`` (NotEvaluable when absent)."""
    rows = results.rows(metric, split=split, layer=layer)
    return float(rows.sort_values("step", kind="stable")["value"].iloc[-1])


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (NaN for a constant series)."""
    from scipy import stats

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def max_rise(values: np.ndarray) -> float:
    """The largest increase between neighbours (<= 0 for a non-increasing series)."""
    values = np.asarray(values, dtype=np.float64)
    return float(np.max(np.diff(values))) if values.size > 1 else 0.0
