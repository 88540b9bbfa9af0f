"""One value per metric row key: the key of a row, and the index a run refuses a second value by.

The **key** of a row of ``metrics.parquet`` is ``(step, split, layer, metric)``: what was
measured (``metric`` of ``layer`` on ``split``) and when (``step``, the optimiser steps
completed). A run holds at most one value per key. The ``epoch`` is not part of the key: a
step belongs to one epoch (the one it completed in), so two rows of one key with different
epochs are a contradiction, not two measurements, and a query ordering by ``step`` could not
tell them apart.

Writing a key again is refused (:class:`DuplicateRowError`, naming the key, both values and
both epochs) unless the new row repeats the recorded one exactly (same epoch, same value,
NaN equal to NaN): measuring an unchanged model twice at one step, as a Monitor whose
iteration period falls on an epoch's last step does, records the same numbers twice, which
is one value. Two writers of one key with different numbers, such as a training loop's
sample-weighted accuracy and a Monitor's class-weighted one at the same step, are refused.

**Sessions.** A ``Run`` object is one session of its run. A row written by an earlier session
(in ``metrics.parquet`` when the session first read it) is *superseded* when this session
writes its key again, unless the run is completed: a restarted run recomputes what the
stopped one recorded after its last checkpoint (rows after the checkpoint are dropped by
:meth:`~collapselab.store.Run.truncate_after`; rows a stopped session wrote at or before it,
such as a failed analysis at the last step, or a run function without checkpoints, are
replaced here), so a resumed run still holds one value per key, the new one. Within a
session the rule above holds.

:class:`RowKeys` is the index of the keys a table holds: the 64-bit hashes of the keys, sorted,
with the positions of their rows, so that checking ``n`` new rows against ``N`` recorded ones
costs ``O(n log N)`` and 16 bytes per recorded row (a hash match is confirmed against the row
itself, so a hash collision never refuses a write).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from collapselab.store.metrics_table import MetricRow

ROW_KEY: tuple[str, ...] = ("step", "split", "layer", "metric")
"""The columns whose values identify a row: a run holds at most one value per key."""

Key = tuple[int, str, str, str]


def row_key(row: MetricRow) -> Key:
    """``(step, split, layer, metric)`` of a validated row ``(step, epoch, split, layer,
    metric, value)``."""
    return (row[0], row[2], row[3], row[4])


def same_row(a: MetricRow, b: MetricRow) -> bool:
    """Whether ``b`` repeats ``a`` exactly: same key, same epoch, same value (NaN == NaN)."""
    if a[:5] != b[:5]:
        return False
    return a[5] == b[5] or (math.isnan(a[5]) and math.isnan(b[5]))


class DuplicateRowError(ValueError):
    """A second, different value for a metric row key the run already holds.

    Attributes:
        key: ``(step, split, layer, metric)``.
        recorded: the row already held, ``(step, epoch, split, layer, metric, value)``.
        refused: the row refused.
    """

    def __init__(self, where: str, recorded: MetricRow, refused: MetricRow) -> None:
        self.key = row_key(refused)
        self.recorded = recorded
        self.refused = refused
        step, split, layer, metric = self.key
        super().__init__(
            f"{where} already holds metric {metric!r} of split {split!r}, layer {layer!r} at "
            f"step {step} (epoch {recorded[1]}, value {recorded[5]!r}); refused a second value "
            f"(epoch {refused[1]}, value {refused[5]!r}). A run holds one value per "
            "(step, split, layer, metric): give the second quantity its own metric name, or "
            "leave the key to its one writer"
        )


def _key_hash(key: Key) -> int:
    """A 64-bit hash of a key (Python's, salted per process: the index lives in memory)."""
    return hash(key)


def _hashes(keys: Sequence[Key]) -> np.ndarray:
    return np.fromiter((_key_hash(k) for k in keys), dtype=np.int64, count=len(keys))


def frame_keys(frame: pd.DataFrame) -> list[Key]:
    """The keys of a metric table's rows, in row order."""
    steps = frame["step"].to_numpy(dtype=np.int64).tolist()
    return list(zip(steps, frame["split"], frame["layer"], frame["metric"], strict=True))


class RowKeys:
    """The keys of the rows of one metric table (row ``i`` of the table has position ``i``)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        hashes = _hashes(frame_keys(frame))
        self._order = np.argsort(hashes, kind="stable")
        self._sorted = hashes[self._order]

    def __len__(self) -> int:
        return int(self._sorted.size)

    def candidates(self, keys: Sequence[Key]) -> list[list[int]]:
        """For each key, the table positions whose key has the same hash (usually none; a
        hit is the key itself or, rarely, a collision the caller rules out)."""
        if len(keys) == 1:  # one row per call (Run.log): skip the array set-up
            h = _key_hash(keys[0])
            lo = int(self._sorted.searchsorted(h))
            if lo == self._sorted.size or self._sorted[lo] != h:
                return [[]]
            hi = int(self._sorted.searchsorted(h, "right"))
            return [self._order[lo:hi].tolist()]
        hashes = _hashes(keys)
        lo = np.searchsorted(self._sorted, hashes, side="left")
        hi = np.searchsorted(self._sorted, hashes, side="right")
        out: list[list[int]] = [[] for _ in keys]
        for i in np.flatnonzero(hi > lo):
            out[i] = self._order[lo[i] : hi[i]].tolist()
        return out

    def extend(self, keys: Sequence[Key]) -> None:
        """Add the keys of rows appended to the table (positions ``len(self)`` onwards)."""
        if not keys:
            return
        start = len(self)
        hashes = np.concatenate([self._sorted, _hashes(keys)])
        positions = np.concatenate([self._order, np.arange(start, start + len(keys))])
        order = np.argsort(hashes, kind="stable")
        self._sorted, self._order = hashes[order], positions[order]


class RunKeys:
    """The keys one session of a run holds: written (``table``, whose first ``earlier`` rows
    an earlier session wrote) and buffered; what :class:`~collapselab.store.Run` checks new
    rows against.

    Attributes:
        superseded: positions in the written table of earlier-session rows this session
            wrote again (dropped from the table at the next flush).
    """

    def __init__(self, table: pd.DataFrame, pending: Sequence[MetricRow] = ()) -> None:
        self._index = RowKeys(table)
        self._earlier = len(table)
        self._pending: dict[Key, MetricRow] = {}
        for row in pending:
            self._pending.setdefault(row_key(row), row)
        self.superseded: set[int] = set()

    def admit(
        self, rows: Sequence[MetricRow], table: pd.DataFrame, where: str, supersede: bool
    ) -> None:
        """Check ``rows`` (validated) against the keys held, then hold theirs.

        Raises :class:`DuplicateRowError` (nothing held then) for a key this session holds
        with another value or epoch, and for a key an earlier session wrote when not
        ``supersede`` (a completed run) and the value differs.
        """
        keys = [(r[0], r[2], r[3], r[4]) for r in rows]  # row_key, inlined: once per row
        written = self._written(keys, table)
        batch: dict[Key, MetricRow] = {}
        replaced: set[int] = set()
        for key, row, (held, position) in zip(keys, rows, written, strict=True):
            earlier = batch.get(key) or self._pending.get(key)
            if earlier is None and held is not None:
                if supersede and position < self._earlier:
                    replaced.add(position)  # a stopped session's value, recomputed
                else:
                    earlier = held
            if earlier is not None and not same_row(earlier, row):
                raise DuplicateRowError(where, earlier, row)
            batch.setdefault(key, row)
        for key, row in batch.items():
            self._pending.setdefault(key, row)
        self.superseded |= replaced

    def _written(self, keys: list[Key], table: pd.DataFrame) -> list[tuple[MetricRow | None, int]]:
        """The written row of each key and its position (``None, -1`` where there is none;
        a superseded row no longer counts)."""
        found: list[tuple[MetricRow | None, int]] = [(None, -1)] * len(keys)
        if not len(self._index):
            return found
        for i, positions in enumerate(self._index.candidates(keys)):
            for p in positions:
                step, epoch, split, layer, metric, value = table.iloc[p]
                row = (int(step), int(epoch), split, layer, metric, float(value))
                if row_key(row) == keys[i] and p not in self.superseded:  # not a collision
                    found[i] = (row, p)
                    break
        return found

    def flushed(self, written: Sequence[MetricRow], table: pd.DataFrame) -> None:
        """The buffered rows were written: ``table`` is now the written table (the kept rows,
        then ``written``)."""
        if self.superseded:  # positions moved: index the new table afresh
            earlier = self._earlier - len(self.superseded)
            self._index = RowKeys(table)
            self._earlier = earlier
            self.superseded = set()
        else:
            self._index.extend([row_key(r) for r in written])
        self._pending = {}

    def discard_pending(self) -> None:
        """The buffered rows were dropped: their keys, and the rows they superseded, are
        back to what is written."""
        self._pending = {}
        self.superseded = set()
