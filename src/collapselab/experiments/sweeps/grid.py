"""One experiment over a grid of seeds and config values (``collapselab sweep``).

Every member is a normal run in the store (``<experiment>-<preset>-seed<N>[-<overrides>]``,
see :func:`collapselab.experiments.run_id_for`), run by
:func:`~collapselab.experiments.run_experiment` in a sweep worker: a completed member is not
run again and an interrupted one resumes from its checkpoint, so rerunning a sweep resumes
it. Inside a member the experiment's own sweeps run serially (the members already use the
cores).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collapselab.experiments.progress import ProgressDisplay
from collapselab.experiments.sweeps.executors import Executor
from collapselab.experiments.sweeps.sweep import SweepResult, run_sweep
from collapselab.store import Run, prepare_root


def parse_seeds(text: str) -> list[int]:
    """``"0-3"`` -> ``[0, 1, 2, 3]``; ``"0,2,5"``; ``"0-2,7"``: seeds >= 0, no repeats."""
    seeds: list[int] = []
    for part in text.split(","):
        bounds = part.strip().split("-")
        try:
            if len(bounds) == 1:
                span = [int(bounds[0])]
            elif len(bounds) == 2:
                first, last = int(bounds[0]), int(bounds[1])
                if last < first:
                    raise ValueError
                span = list(range(first, last + 1))
            else:
                raise ValueError
        except ValueError:
            raise ValueError(
                f"--seeds {text!r}: expected seeds >= 0 like 0-3, 0,2,5 or 0-2,7 "
                f"(bad part {part.strip()!r})"
            ) from None
        seeds += span
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise ValueError(f"--seeds {text!r} repeats seeds {repeated}")
    return seeds


def parse_set(text: str) -> tuple[str, list[Any]]:
    """``"lr=0.1,0.01"`` -> ``("lr", [0.1, 0.01])``. Each value is read as JSON (numbers,
    ``true``, ``[1, 2]``) or else taken as a string; commas inside brackets belong to
    the value."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise ValueError(f"--set {text!r}: expected key=value or key=value1,value2,...")
    return key, [_value(v) for v in _split_top_level(values)]


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char in "[{"
        depth -= char in "]}"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [p.strip() for p in [*parts, current]]


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def grid(sets: Sequence[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    """Every combination of the values of ``sets`` (the last key varies fastest);
    ``[{}]`` without sets. A key given twice raises ``ValueError``."""
    keys = [key for key, _ in sets]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise ValueError(f"--set gives {repeated} more than once; give all values in one --set")
    return [
        dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in sets))
    ]


def grid_configs(
    experiment_id: str,
    preset: str,
    seeds: Sequence[int],
    sets: Sequence[tuple[str, list[Any]]] = (),
    *,
    root: str | os.PathLike[str] = "collapselab-runs",
    device: str = "cpu",
    data_dir: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:
    """The member configs of a grid sweep, checked before anything runs: the experiment,
    its preset's data (the fallback preset when the data is missing), the override keys
    and kinds. Raises ``KeyError``, ``ValueError`` or
    :class:`~collapselab.experiments.MissingDataError`."""
    from collapselab.experiments.data_plan import plan_data
    from collapselab.experiments.overrides import apply_overrides
    from collapselab.experiments.registry import get_experiment

    experiment = get_experiment(experiment_id)
    plan = plan_data(experiment, preset, data_dir)
    prepare_root(root)
    combos = grid(sets)
    for overrides in combos:
        apply_overrides(
            experiment.config(plan.preset), overrides, f"preset {plan.preset!r} of {experiment.id}"
        )
    if not seeds:
        raise ValueError("--seeds gives no seed")
    return [
        {
            "experiment": experiment_id,
            "preset": preset,
            "seed": int(seed),
            "overrides": overrides,
            "root": os.fspath(root),
            "device": device,
            "data_dir": None if data_dir is None else os.fspath(data_dir),
        }
        for overrides in combos
        for seed in seeds
    ]


def run_grid_member(config: dict[str, Any]) -> dict[str, Any]:
    """A sweep task: run one member of a grid sweep as a normal run; its summary."""
    from collapselab.experiments.runner import run_experiment

    run = run_experiment(
        config["experiment"],
        preset=config["preset"],
        root=config["root"],
        seed=config["seed"],
        device=config["device"],
        data_dir=config["data_dir"],
        raise_on_error=False,
        executor="serial",
        workers=1,
        overrides=config["overrides"] or None,
    )
    return run_summary(run)


def run_summary(run: Run) -> dict[str, Any]:
    """A grid member's summary: run id and path, status, claims that hold, seconds, error."""
    from collapselab.experiments.reproduce import claim_counts

    counts = claim_counts(run) or {}
    durations = run.manifest.get("durations") or {}
    return {
        "run_id": run.id,
        "path": str(run.path),
        "status": str(run.status),
        "claims_hold": int(counts.get("holds", 0)),
        "claims": int(sum(counts.values())),
        "seconds": float(durations.get("total_s", 0.0)),
        "error": str(run.manifest.get("error") or ""),
    }


def sweep_experiment(
    experiment_id: str,
    preset: str = "quick",
    seeds: Sequence[int] = (0,),
    sets: Sequence[tuple[str, list[Any]]] = (),
    *,
    root: str | os.PathLike[str] = "collapselab-runs",
    device: str = "cpu",
    data_dir: str | os.PathLike[str] | None = None,
    executor: str | Executor = "local",
    workers: int | None = None,
    progress: ProgressDisplay | None = None,
) -> SweepResult:
    """Run ``experiment_id`` at ``preset`` for every seed and every combination of ``sets``
    (``[("lr", [0.1, 0.01])]``) as separate runs under ``root``; one summary per member
    (:func:`run_grid_member`), in the order seeds-within-combinations. A member whose run
    fails is a completed sweep member with status ``failed`` (its error in the summary)."""
    configs = grid_configs(
        experiment_id, preset, seeds, sets, root=root, device=device, data_dir=data_dir
    )
    return run_grid(configs, executor=executor, workers=workers, progress=progress)


def run_grid(
    configs: list[dict[str, Any]],
    *,
    executor: str | Executor = "local",
    workers: int | None = None,
    progress: ProgressDisplay | None = None,
) -> SweepResult:
    """Run the members of :func:`grid_configs`; members already completed in the run
    store are summarised without starting a worker (:class:`CompletedRuns`)."""
    for root in {config["root"] for config in configs}:
        Path(root).mkdir(parents=True, exist_ok=True)
    return run_sweep(
        run_grid_member,
        configs,
        executor=executor,
        workers=workers,
        store=CompletedRuns(),
        progress=progress,
    )


class CompletedRuns:
    """The store of a grid sweep: the run store itself. A member whose run already
    completed is summarised from it instead of starting a worker; nothing else is saved
    (each member's run is its record)."""

    def load(self, index: int, config: dict[str, Any]) -> tuple[dict[str, Any], int] | None:
        from collapselab.experiments.runner import run_id_for

        run_id = run_id_for(
            config["experiment"], config["preset"], config["seed"], config["overrides"]
        )
        try:
            run = Run.open(Path(config["root"]) / run_id)
        except (FileNotFoundError, ValueError):
            return None
        return (run_summary(run), 0) if run.status == "completed" else None

    def save(
        self, index: int, config: dict[str, Any], value: dict[str, Any], attempts: int
    ) -> None:
        return None
