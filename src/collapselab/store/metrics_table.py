"""The long-format metric table of a run (``metrics.parquet``).

One row per recorded number::

    step   int64    global optimisation step (iterations completed) when it was measured
    epoch  int64    epoch, or NO_EPOCH (-1) when the value is not tied to an epoch
    split  string   "train", "test", "probe", ... (free text)
    layer  string   layer name, "" for model-level values
    metric string   stable metric key (see docs/catalogue.md)
    value  float64  the value; NaN and +-inf are stored as they are

Long format keeps the schema fixed whatever metrics and layers a run records, so every
run's table can be read by one DuckDB query.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from collapselab.checks import check_int
from collapselab.store._atomic import atomic_open

NO_EPOCH = -1
"""Epoch value of rows not tied to an epoch (iteration-level or final-only metrics)."""

METRIC_COLUMNS: tuple[str, ...] = ("step", "epoch", "split", "layer", "metric", "value")
"""Column order of every metric table."""

METRIC_SCHEMA = pa.schema(
    [
        ("step", pa.int64()),
        ("epoch", pa.int64()),
        ("split", pa.string()),
        ("layer", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
    ]
)

MetricRow = tuple[int, int, str, str, str, float]


def make_row(
    step: Any,
    metric: Any,
    value: Any,
    epoch: Any = None,
    split: Any = "train",
    layer: Any = "",
) -> MetricRow:
    """Validate one row and return it as a tuple in :data:`METRIC_COLUMNS` order."""
    step_i = check_int("step", step, minimum=0)
    epoch_i = NO_EPOCH if epoch is None else check_int("epoch", epoch)
    if epoch_i < NO_EPOCH:
        raise ValueError(f"epoch must be >= 0 or None, got {epoch_i}")
    for name, text in (("split", split), ("layer", layer), ("metric", metric)):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str, got {text!r} ({type(text).__name__})")
    if not metric:
        raise ValueError("metric must be a non-empty string")
    if not split:
        raise ValueError("split must be a non-empty string")
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()  # 0-d tensors and NumPy scalars
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"value of metric {metric!r} must be a real number, got {value!r} "
            f"({type(value).__name__})"
        )
    return (step_i, epoch_i, split, layer, metric, float(value))


def rows_from_records(records: Iterable[Mapping[str, Any]]) -> list[MetricRow]:
    """Validate dict rows with keys step, metric, value and optional epoch, split, layer."""
    out = []
    for i, rec in enumerate(records):
        unknown = set(rec) - set(METRIC_COLUMNS)
        if unknown:
            raise ValueError(
                f"row {i} has unknown keys {sorted(unknown)}; allowed: {METRIC_COLUMNS}"
            )
        missing = {"step", "metric", "value"} - set(rec)
        if missing:
            raise ValueError(f"row {i} lacks required keys {sorted(missing)}")
        out.append(make_row(**rec))
    return out


def empty_frame() -> pd.DataFrame:
    """A metric table with no rows and the right dtypes."""
    return frame_from_rows([])


def frame_from_rows(rows: list[MetricRow]) -> pd.DataFrame:
    """Build a DataFrame with the metric dtypes from validated rows."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in METRIC_COLUMNS]
    data = {
        "step": np.asarray(columns[0], dtype=np.int64),
        "epoch": np.asarray(columns[1], dtype=np.int64),
        "split": pd.Series(columns[2], dtype=object),
        "layer": pd.Series(columns[3], dtype=object),
        "metric": pd.Series(columns[4], dtype=object),
        "value": np.asarray(columns[5], dtype=np.float64),
    }
    return pd.DataFrame(data, columns=list(METRIC_COLUMNS))


def _to_arrow(frame: pd.DataFrame) -> pa.Table:
    arrays = [
        pa.array(frame[name].to_numpy(), type=METRIC_SCHEMA.field(name).type)
        for name in METRIC_COLUMNS
    ]
    return pa.Table.from_arrays(arrays, schema=METRIC_SCHEMA)


def write_metrics(path: str | os.PathLike[str], frame: pd.DataFrame) -> None:
    """Write ``frame`` to ``path`` as Parquet with :data:`METRIC_SCHEMA`, atomically."""
    missing = [c for c in METRIC_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"metric frame lacks columns {missing}")
    table = _to_arrow(frame)
    with atomic_open(path, "wb") as handle:
        pq.write_table(table, handle)


def read_metrics(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a metric table written by :func:`write_metrics` (empty frame if absent)."""
    if not os.path.exists(path):
        return empty_frame()
    table = pq.read_table(path, schema=METRIC_SCHEMA)
    frame = table.to_pandas()
    for name in ("split", "layer", "metric"):
        frame[name] = frame[name].astype(object)
    return frame[list(METRIC_COLUMNS)]
