"""What a run of paper 000's experiments stores per arm, and how claims and figures read it
back: the trajectory and phase detection of each arm, the sweep groups and repeated arms
recorded in the manifest, and the phase-1 lengths and M2 rises computed from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from collapselab.experiments.claims import NotEvaluable, RunResults
from collapselab.store import Run

__all__ = [
    "arms",
    "describe_lengths",
    "group",
    "m2_rise_in_phase1",
    "phase",
    "phase1_lengths",
    "phase_curves",
    "replicas",
    "seed_lengths",
    "store_member",
    "trajectory",
]


def store_member(run: Run, arm: str, result: Mapping[str, Any]) -> None:
    """Save one member's trajectory and phase detection: ``arrays/traj_<arm>.npz`` (the
    curves, the ``phase_<key>`` scalars, the layer names, ``stopped``: why training stopped
    early, e.g. a non-finite loss, ``""`` otherwise) and metric rows (split ``arm``:
    every curve per step and layer; the phase detection at step 0 of layer ``""``)."""
    layers, linears = list(result["layers"]), list(result["linears"])
    arrays = {k: np.asarray(v) for k, v in result.items() if isinstance(v, np.ndarray)}
    phases = {k: float(v) for k, v in result.items() if k.startswith("phase_")}
    run.save_array(
        f"traj_{arm}",
        **arrays,
        **{k: np.float64(v) for k, v in phases.items()},
        layers=np.array(layers),
        linears=np.array(linears),
        stopped=np.array(str(result.get("stopped", ""))),
    )
    steps = arrays["steps"]
    rows = []
    for key, value in arrays.items():
        if key in ("steps", "dense_window"):
            continue
        names = [""] if value.ndim == 1 else (linears if key.startswith("m4_") else layers)
        matrix = value.reshape(len(steps), -1)
        for j, layer in enumerate(names):
            rows.extend(
                {
                    "step": int(t),
                    "split": arm,
                    "layer": layer,
                    "metric": key,
                    "value": float(matrix[i, j]),
                }
                for i, t in enumerate(steps)
            )
    rows.extend(
        {"step": 0, "split": arm, "layer": "", "metric": k, "value": v} for k, v in phases.items()
    )
    run.log_many(rows)


def trajectory(results: RunResults | Run, arm: str) -> dict[str, np.ndarray]:
    """The stored trajectory of ``arm`` (:func:`store_member`); NotEvaluable when absent."""
    arrays = results.arrays if isinstance(results, RunResults) else None
    name = f"traj_{arm}"
    if arrays is None:
        if name not in results.array_names():
            raise NotEvaluable(f"the run saved no trajectory for {arm!r}")
        return results.load_array(name)
    try:
        return dict(arrays[name])
    except KeyError:
        raise NotEvaluable(f"the run saved no trajectory for {arm!r}") from None


def phase(results: RunResults | Run, arm: str, key: str) -> float:
    """A phase-detection scalar of ``arm`` (``plateau_end``, ``phase1_length``, ...)."""
    stored = trajectory(results, arm)
    if f"phase_{key}" not in stored:
        raise NotEvaluable(f"no phase detection {key!r} for {arm!r}")
    return float(stored[f"phase_{key}"])


def phase_curves(results: RunResults | Run, arm: str, key: str) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of ``key`` at the phase layer (``loss``: the loss curve); M4 keys
    at the phase layer's linear layer."""
    stored = trajectory(results, arm)
    layer = int(results.manifest.get("phase_layer", 3)) - 1
    values = stored[key]
    return stored["steps"], values if values.ndim == 1 else values[:, layer]


def m2_rise_in_phase1(results: RunResults, arm: str) -> float:
    """The largest rise of M2 (phase layer) over its step-0 value up to the end of phase 1
    (the loss plateau's end, or the last step when the run never left it)."""
    steps, m2 = phase_curves(results, arm, "feature_cosine_cross_class")
    end = phase(results, arm, "phase1_length")
    before = m2[(steps <= end) & np.isfinite(m2)]
    return float(np.max(before) - before[0]) if before.size else float("nan")


def arms(results: RunResults | Run, name: str) -> list[str]:
    """The arms a run stored under ``name`` in its manifest (``"two_phase"``, ``"all"``)."""
    stored = (results.manifest.get("arms") or {}).get(name)
    if not stored:
        raise NotEvaluable(f"the run recorded no {name!r} arms")
    return list(stored)


def group(results: RunResults | Run, name: str) -> list[tuple[Any, str]]:
    """``[(value, arm), ...]`` of a sweep group, from the manifest."""
    stored = (results.manifest.get("groups") or {}).get(name)
    if not stored:
        raise NotEvaluable(f"the run recorded no sweep group {name!r}")
    return [(value, arm) for value, arm in stored]


def replicas(results: RunResults | Run, arm: str) -> list[str]:
    """The stored runs of ``arm``: itself, and its further seeds where it was repeated."""
    return list((results.manifest.get("replicas") or {}).get(arm) or [arm])


def phase1_lengths(results: RunResults, name: str) -> tuple[list, np.ndarray, np.ndarray]:
    """``(values, lengths, left)`` of a group: the phase-1 length of each arm (the end of
    its loss plateau; the last measured step when it never left phase 1) and whether it
    left phase 1. An arm trained with several seeds gives the median of its lengths (a
    censored one counted at its budget) and left phase 1 when most of its seeds did."""
    pairs = group(results, name)
    lengths, left = [], []
    for _, arm in pairs:
        runs = replicas(results, arm)
        lengths.append(float(np.median([phase(results, r, "phase1_length") for r in runs])))
        left.append(2 * sum(phase(results, r, "left_phase1") > 0 for r in runs) > len(runs))
    return [v for v, _ in pairs], np.array(lengths), np.array(left)


def seed_lengths(results: RunResults, name: str) -> dict[str, float]:
    """The phase-1 length of every seed of a group's repeated arms (``"<value>_seed<i>"``:
    the i-th seed), for a claim's values; ``{}`` when the group was not repeated."""
    out: dict[str, float] = {}
    for value, arm in group(results, name):
        runs = replicas(results, arm)
        if len(runs) > 1:
            out |= {
                f"{value}_seed{i}_phase1_length": phase(results, r, "phase1_length")
                for i, r in enumerate(runs)
            }
    return out


def describe_lengths(values: Sequence[Any], lengths: np.ndarray, left: np.ndarray) -> str:
    """``"0: 210, 0.5: 150, 0.9: >600 (never left phase 1)"``."""
    return ", ".join(
        f"{v}: {length:g}" if ok else f"{v}: >{length:g} (never left phase 1)"
        for v, length, ok in zip(values, lengths, left, strict=True)
    )
