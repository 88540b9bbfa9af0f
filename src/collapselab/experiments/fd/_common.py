"""Helpers shared by paper 000's experiment modules (private to the package): running a
list of member configs, storing their trajectories and phase detections in the run, and
reading them back for claims and figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from collapselab.experiments.claims import NotEvaluable, RunResults
from collapselab.experiments.fd.training import run_member
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.store import Run

PAPER = "000"

MEASUREMENT_KEYS = (
    "every",
    "dense_every",
    "half_window",
    "probe_per_class",
    "loss_per_class",
    "phase_layer",
    "smooth",
    "loss_drop",
)
"""Config entries of the measurement (shared by every member of an experiment)."""


def member_configs(
    base: Mapping[str, Any], arms: Mapping[str, Mapping[str, Any]], context: RunContext
) -> list[dict[str, Any]]:
    """One config per arm: ``base`` with the run's seed, updated with the arm's changes (a
    replica's ``seed`` among them), ``--data-dir``, and ``arm``: the arm's name."""
    return [
        {
            **base,
            "seed": context.seed,
            **changes,
            "arm": name,
            "data_dir": context.data_dir_text,
            "device": context.device,
        }
        for name, changes in arms.items()
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


def run_arms(
    run: Run, context: RunContext, changes: Mapping[str, Mapping[str, Any]], **manifest: Any
) -> dict[str, dict[str, Any]]:
    """Train and measure every arm (``context.config["base"]`` updated with ``changes[arm]``)
    through the sweep executor, store each (:func:`store_member`), record
    ``manifest`` and the phase layer in the run's manifest; returns the results by arm."""
    c = context.config
    configs = member_configs(c["base"], changes, context)
    results = run_members(run_member, configs, run, context)
    for config, result in zip(configs, results, strict=True):
        store_member(run, config["arm"], result)
    run.update_manifest(phase_layer=int(c["base"]["phase_layer"]), **manifest)
    run.flush()
    return {config["arm"]: result for config, result in zip(configs, results, strict=True)}


def replica_arms(config: Mapping[str, Any], seed: int) -> dict[str, list[str]]:
    """The arms trained with several seeds: ``{arm: [arm, "<arm>-seed<s>", ...]}`` for every
    arm of the groups named in ``config["repeat"]`` (``{"groups": [...], "seeds": n}``: n
    seeds in all, the run's seed and the next n - 1); ``{}`` without ``repeat``."""
    repeat = config.get("repeat")
    if not repeat:
        return {}
    n = int(repeat["seeds"])
    if n < 1:
        raise ValueError(f"repeat.seeds must be >= 1, got {n}")
    groups = config["groups"]
    unknown = sorted(set(repeat["groups"]) - set(groups))
    if unknown:
        raise ValueError(f"repeat.groups names groups the config does not have: {unknown}")
    arms = dict.fromkeys(arm for g in repeat["groups"] for _, arm in groups[g])
    return {arm: [arm] + [f"{arm}-seed{seed + i}" for i in range(1, n)] for arm in arms}


def run_groups(run: Run, context: RunContext) -> None:
    """Run the arms of a sweep experiment and record its groups.

    ``context.config``: ``base`` (the shared config), ``arms`` (name -> changes),
    ``groups`` (group -> [[value, arm], ...]: which arm each swept value ran as; an arm may
    serve several groups, the baseline typically) and optionally ``repeat``
    (:func:`replica_arms`: the arms of some groups also trained with further seeds, their
    phase-1 lengths compared as medians). The manifest records ``groups``, ``arms`` and
    ``replicas`` for claims and figures.
    """
    c = context.config
    arms = dict(c["arms"])
    replicas = replica_arms(c, context.seed)
    changes = dict(arms)
    for arm, names in replicas.items():
        for i, name in enumerate(names[1:], start=1):
            changes[name] = {**arms[arm], "seed": context.seed + i}
    run_arms(run, context, changes, groups=c["groups"], arms={"all": list(arms)}, replicas=replicas)


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
