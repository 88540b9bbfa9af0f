"""The members of an experiment's sweep trained in batched chunks:
:func:`run_batched_members`.

Members that share a *batch key* (one architecture: they differ only in what a batched
trainer keeps per member, such as a seed or a learning rate) train together, one chunk of
them per sweep task, through a module-level ``batch(configs) -> [result or None]`` that
trains them as one batched model. Each member of a finished chunk is stored on its own,
under its index and config, in the store :func:`~collapselab.experiments.sweeps.run_members`
keeps, exactly as one-by-one training stores it: a run resumes whichever way its members
were trained, and the experiment reads the same results. A member that failed inside its
chunk (``None``, e.g. a divergence that stops the whole batch) is not stored; the
one-by-one sweep that follows loads every stored member and trains what is left alone, so
failures are reported and retried as before.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collapselab.experiments.sweeps.executors import default_workers
from collapselab.experiments.sweeps.member import Task, normalise_result
from collapselab.experiments.sweeps.member_store import MemberStore
from collapselab.experiments.sweeps.sweep import run_members, run_sweep
from collapselab.store import Run

if TYPE_CHECKING:
    from collapselab.experiments.registry import RunContext

BatchTask = Callable[[list[dict[str, Any]]], Sequence[Mapping[str, Any] | None]]
"""``batch(configs) -> one result (or None: failed) per config``, a module-level function."""


def chunk_task(batch: BatchTask, config: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep task of a chunk: ``batch(config["members"])``, member ``j``'s results under
    keys ``"<j>:<name>"`` (a sweep task returns one flat dict), and ``"failed"``, the
    positions of the members that failed."""
    out: dict[str, Any] = {}
    failed = []
    for j, result in enumerate(batch(list(config["members"]))):
        if result is None:
            failed.append(j)
            continue
        out |= {f"{j}:{name}": value for name, value in result.items()}
    return {**out, "failed": failed}


class _ChunkRecords:
    """Where a batched sweep stores its chunks: each member of a finished chunk goes to the
    members' :class:`MemberStore` under its own index and config; chunks themselves are
    never loaded (only members the store lacks are chunked)."""

    def __init__(self, store: MemberStore, indices: Sequence[Sequence[int]]) -> None:
        self.store, self.indices = store, indices

    def load(self, index: int, config: dict[str, Any]) -> None:
        return None

    def save(
        self, index: int, config: dict[str, Any], value: dict[str, Any], attempts: int
    ) -> None:
        members = zip(config["members"], self.indices[index], strict=True)
        for j, (member, i) in enumerate(members):
            if j in value["failed"]:
                continue
            prefix = f"{j}:"
            own = {k[len(prefix) :]: v for k, v in value.items() if k.startswith(prefix)}
            self.store.save(i, member, normalise_result(own), attempts)


def chunks(
    keys: Sequence[Hashable | None], missing: Sequence[int], workers: int
) -> list[list[int]]:
    """The indices ``missing`` grouped by their ``keys`` (``None``: not batched, left out),
    each group cut into about ``workers / groups`` equal chunks so that every worker of the
    pool gets one."""
    groups: dict[Hashable, list[int]] = {}
    for i in missing:
        if keys[i] is not None:
            groups.setdefault(keys[i], []).append(i)
    pieces = max(1, math.ceil(workers / max(len(groups), 1)))
    out = []
    for indices in groups.values():
        size = math.ceil(len(indices) / min(pieces, len(indices)))
        out += [indices[k : k + size] for k in range(0, len(indices), size)]
    return out


def members_store(run: Run, label: str) -> MemberStore:
    """The member store of a run's sweep, where :func:`run_members` keeps it."""
    path: Path = run.path / "members" / label if label else run.path / "members"
    return MemberStore(path)


def run_batched_members(
    task: Task,
    batch: BatchTask,
    configs: Sequence[dict[str, Any]],
    run: Run,
    context: RunContext,
    *,
    batch_key: Callable[[dict[str, Any]], Hashable | None],
    label: str = "",
    threads: int = 1,
) -> list[Any]:
    """:func:`run_members` with the members of one ``batch_key(config)`` (``None``: train
    alone) trained in batched chunks by ``batch`` first (module docstring); the results in
    the order of ``configs``, as :func:`run_members` gives them. ``task`` trains one member
    alone (members left over: no batch key, or failed in their chunk)."""
    configs = [dict(c) for c in configs]
    store = members_store(run, label)
    missing = [i for i, c in enumerate(configs) if store.load(i, c) is None]
    workers = context.workers if isinstance(context.workers, int) else default_workers()
    groups = chunks([batch_key(c) for c in configs], missing, workers)
    if groups:
        run_sweep(
            functools.partial(chunk_task, batch),
            [{"members": [configs[i] for i in chunk]} for chunk in groups],
            executor=context.executor,
            workers=context.workers,
            store=_ChunkRecords(store, groups),
            threads=threads,
            progress=context.progress,
            description=f"{label or 'sweep'} (batched)",
        )
    found = [store.load(i, c) for i, c in enumerate(configs)]
    if all(f is not None for f in found):  # all trained: no one-by-one sweep (nor its note)
        return [f[0] for f in found]  # type: ignore[index]
    return run_members(task, configs, run, context, label=label, threads=threads)
