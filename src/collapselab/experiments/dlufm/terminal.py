"""Whether a curvature run entered the terminal phase of training, read from the run itself.

Paper 004's theorems (and Papyan's decomposition at collapse) are statements at a (deep)
neural-collapse optimum; a run that never enters the terminal phase of training (TPT,
Papyan, Han & Donoho 2020: the epochs after the training error reaches zero, in which the
features keep collapsing) does not test them. The criterion, fixed here before any preset
was chosen by it:

* **zero training error from some epoch on**: ``e₀`` is the first epoch from which the
  training loop's evaluation of the whole training set gives accuracy exactly 1 at every
  evaluated epoch up to the end of training (``None`` when the last one is below 1): the
  store's one definition, :func:`collapselab.store.zero_error_epoch` with ``sustained=True``
  (the loop writes the run's train accuracy rows, one per evaluated epoch);
* **continued collapse in the TPT**: NC1 = ``tr(Σ_W Σ_B^†)/K`` of the penultimate features
  (the :class:`~collapselab.families.NC` family, whole training set) at the curvature
  measurement the claims read (the last one) is at most :data:`NC1_FRACTION` of its value at
  entry, the first NC1 measurement at or after ``e₀``.

A run is in the terminal phase when both hold and ``e₀`` comes before the last curvature
measurement. :func:`terminal_phase` computes the record the run stores in its manifest
(``curvature.terminal_phase``, and a one-line ``terminal_phase`` the report's overview
shows). It is a property of the run, not a claim: it is the real-network claims' premise
(``dlufm.claims.TERMINAL_PHASE``), and on a run that has not reached it they are not
evaluable (premise not met), never a verdict either way.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from collapselab.store import zero_error_epoch

NC1_FRACTION = 0.5
"""NC1 of the penultimate features at the last curvature measurement must be at most this
fraction of its value at the entry into the terminal phase (it at least halves there)."""


def _train_accuracy(metrics: pd.DataFrame) -> pd.Series:
    """The training accuracy by epoch (rows ``metric="accuracy"``, ``split="train"``; the
    last row of an epoch), in epoch order; empty when there is none."""
    rows = metrics[(metrics["metric"] == "accuracy") & (metrics["split"] == "train")]
    return rows.groupby("epoch")["value"].last().sort_index()


def zero_error_from(metrics: pd.DataFrame) -> int | None:
    """The first epoch from which training accuracy is exactly 1 at every evaluated epoch
    to the end: :func:`collapselab.store.zero_error_epoch` ``(metrics, sustained=True)``;
    ``None`` when the last evaluation is below 1 or there is none."""
    return zero_error_epoch(metrics, "train", sustained=True)


def terminal_phase(metrics: pd.DataFrame, penultimate: str, final_epoch: int) -> dict[str, Any]:
    """The criterion's record (module docstring) for the features of ``penultimate`` and
    the last curvature measurement at ``final_epoch``.

    Keys: ``reached`` (bool), ``zero_error_from`` (``e₀`` or ``None``),
    ``final_train_accuracy``, ``nc1_layer``, ``entry_epoch`` and ``nc1_at_entry``,
    ``final_epoch`` and ``nc1_final`` (``None`` when the run stopped before it),
    ``nc1_ratio`` (final / entry, ``None`` without an
    entry), ``nc1_fraction`` (the bound) and ``summary`` (one line).
    """
    nc1 = metrics[(metrics["metric"] == "nc1") & (metrics["layer"] == penultimate)]
    nc1 = nc1.groupby("epoch")["value"].last().sort_index()
    accuracy = _train_accuracy(metrics)
    final_accuracy = float(accuracy.iloc[-1]) if not accuracy.empty else None
    e0 = zero_error_from(metrics)
    record: dict[str, Any] = {
        "zero_error_from": e0,
        "final_train_accuracy": final_accuracy,
        "nc1_layer": penultimate,
        "entry_epoch": None,
        "nc1_at_entry": None,
        "final_epoch": int(final_epoch),
        "nc1_final": float(nc1[final_epoch]) if final_epoch in nc1.index else None,
        "nc1_ratio": None,
        "nc1_fraction": NC1_FRACTION,
    }
    if e0 is not None and e0 < final_epoch and record["nc1_final"] is not None:
        entry = nc1[nc1.index >= e0]
        record["entry_epoch"] = int(entry.index[0])
        record["nc1_at_entry"] = float(entry.iloc[0])
        record["nc1_ratio"] = record["nc1_final"] / record["nc1_at_entry"]
    ratio = record["nc1_ratio"]
    record["reached"] = ratio is not None and ratio <= NC1_FRACTION
    record["summary"] = _summary(record)
    return record


def _summary(r: dict[str, Any]) -> str:
    verdict = "reached" if r["reached"] else "not reached"
    if r["nc1_final"] is None:
        return (
            f"{verdict}: no NC1 of {r['nc1_layer']} at the last curvature epoch {r['final_epoch']}"
        )
    if r["final_train_accuracy"] is None:
        return f"{verdict}: no training accuracy recorded"
    if r["zero_error_from"] is None:
        return (
            f"{verdict}: training accuracy {r['final_train_accuracy']:.4f} at the end, never "
            f"1 to the end; NC1({r['nc1_layer']}) {r['nc1_final']:.3g} at epoch "
            f"{r['final_epoch']}"
        )
    if r["nc1_ratio"] is None:
        return (
            f"{verdict}: training accuracy 1 only from epoch {r['zero_error_from']}, not "
            f"before the last curvature epoch {r['final_epoch']}"
        )
    return (
        f"{verdict}: training accuracy 1 from epoch {r['zero_error_from']}; "
        f"NC1({r['nc1_layer']}) {r['nc1_at_entry']:.3g} at epoch {r['entry_epoch']} -> "
        f"{r['nc1_final']:.3g} at epoch {r['final_epoch']}, ratio {r['nc1_ratio']:.3g} "
        f"(needs <= {r['nc1_fraction']:g})"
    )
