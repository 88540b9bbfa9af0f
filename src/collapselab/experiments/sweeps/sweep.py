"""``run_sweep``: run a task over a list of configs on an executor, resumably."""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collapselab.checks import check_int
from collapselab.experiments.progress import NoProgress, ProgressCallback, ProgressDisplay
from collapselab.experiments.sweeps.executors import Executor, make_executor
from collapselab.experiments.sweeps.member import Job, Outcome, Task, config_json
from collapselab.experiments.sweeps.member_store import MemberRecords, MemberStore

if TYPE_CHECKING:  # the registry imports this package: no import cycle at run time
    from collapselab.experiments.registry import RunContext
    from collapselab.store import Run


class SweepError(RuntimeError):
    """Members that still failed after their retries; raised after every other member
    finished (and was stored). ``failures``: member index -> (config, error text of the
    last attempt); ``result``: the :class:`SweepResult` with ``None`` for those members."""

    def __init__(self, failures: dict[int, tuple[dict[str, Any], str]], result: SweepResult):
        self.failures = failures
        self.result = result
        lines = []
        for index, (config, error) in sorted(failures.items()):
            last = error.strip().splitlines()[-1] if error.strip() else "unknown error"
            lines.append(f"member {index} (config {config_json(config)}): {last}")
        attempts = {result.attempts[i] for i in failures}
        tries = "/".join(str(a) for a in sorted(attempts))
        super().__init__(
            f"{len(failures)} of {len(result.results)} sweep members failed after {tries} "
            f"attempt(s) (the others finished and were stored): " + "; ".join(lines)
        )


@dataclass(frozen=True)
class Retry:
    """Member ``index`` failed at ``attempt`` (``crashed``: its worker died) and was retried."""

    index: int
    attempt: int
    crashed: bool
    error: str


@dataclass
class SweepResult:
    """What a sweep gives back.

    Attributes:
        results: the task's return values, in the order of the configs (``None`` for a
            member that failed, only seen through :attr:`SweepError.result`).
        configs: the configs, in order.
        attempts: attempts each member took in the run that computed it (0 for none).
        loaded: indices of the members loaded from the store instead of computed.
        retries: every retry, in the order they happened.
        executor: the executor's name; ``wall_s``: the sweep's wall time in seconds.
    """

    results: list[Any]
    configs: list[dict[str, Any]]
    attempts: list[int]
    loaded: list[int] = field(default_factory=list)
    retries: list[Retry] = field(default_factory=list)
    executor: str = ""
    wall_s: float = 0.0


def run_sweep(
    task: Task,
    configs: Sequence[dict[str, Any]],
    *,
    executor: str | Executor = "local",
    workers: int | None = None,
    store: str | Path | MemberRecords | None = None,
    retries: int = 1,
    threads: int = 1,
    progress: ProgressDisplay | None = None,
    description: str = "sweep",
) -> SweepResult:
    """Run ``task(config)`` for every config of ``configs``; results in the configs' order.

    Args:
        task: a module-level function ``config -> dict`` of floats, ints, strings, lists
            and arrays, whose randomness is seeded from the config (the global generators
            are also seeded from the config's hash before each member, see
            :mod:`~collapselab.experiments.sweeps.member`), so a member's result depends
            on its config alone, whichever executor runs it.
        configs: the members' configs (JSON-serialisable dicts), at least one.
        executor: ``"serial"`` (this process), ``"local"`` (a process pool, default),
            ``"ray"`` (extra ``ray``) or an :class:`Executor` object.
        workers: processes of the pool (default: one per core); at least 1.
        store: a directory where each finished member is written atomically, keyed by its
            index and its config's hash; a rerun loads those members instead of running
            them again (a member whose config changed is run again). Or an object with
            ``load(index, config) -> (result, attempts) | None`` and
            ``save(index, config, result, attempts)`` like
            :class:`~collapselab.experiments.sweeps.member_store.MemberStore`.
        retries: how many times a failed member (an exception, or a worker that died) is
            run again; each retry is recorded in :attr:`SweepResult.retries` and noted on
            ``progress`` (when the display has a ``note(text)`` method).
        threads: torch and BLAS threads inside every member (restored after): the same
            number on every executor gives bit-identical results.
        progress: where the sweep shows ``done/total members``.
        description: the name of that progress row.

    Raises:
        SweepError: members still failing after ``retries`` retries, raised after every
            other member has finished and been stored.
        ValueError: no configs, ``workers < 1``, ``retries < 0``, ``threads < 1``, an
            unknown executor, a task that cannot be pickled for a process executor.
        ImportError: ``executor="ray"`` without Ray (``pip install 'collapselab[ray]'``).
    """
    configs = _check_configs(configs)
    retries = check_int("retries", retries, minimum=0)
    threads = check_int("threads", threads, minimum=1)
    runner = make_executor(executor, workers)
    _check_task(task, runner)
    members = MemberStore(store) if isinstance(store, (str, os.PathLike)) else store
    display = progress if progress is not None else NoProgress()
    started = time.perf_counter()
    result = SweepResult([None] * len(configs), configs, [0] * len(configs), executor=runner.name)
    failures: dict[int, tuple[dict[str, Any], str]] = {}

    with display.task(description, total=len(configs), unit="members") as report:
        jobs = _load_finished(members, result, threads)
        tick = _Ticker(report, len(configs), done=len(result.loaded))
        if result.loaded:  # a rerun continues: say so, rather than look like a fresh start
            _note(display, f"resuming {description}: {len(result.loaded)} of "
                           f"{len(configs)} members done")  # fmt: skip

        def finished(outcome: Outcome) -> Job | None:
            # Store each member as it finishes: a later crash loses nothing.
            job = running.pop(outcome.index)
            result.attempts[job.index] = job.attempt
            if outcome.ok:
                result.results[job.index] = outcome.value
                if members is not None:
                    members.save(job.index, job.config, outcome.value, job.attempt)
                tick.add()
                return None
            if job.attempt > retries:
                failures[job.index] = (job.config, outcome.error or "")
                return None
            retry = Retry(job.index, job.attempt, outcome.crashed, outcome.error or "")
            result.retries.append(retry)
            _note(display, _retry_text(retry, job))
            again = Job(job.index, job.config, job.threads, job.attempt + 1)
            running[again.index] = again
            return again

        running = {job.index: job for job in jobs}
        if jobs:
            runner.run(task, jobs, finished)
    result.wall_s = time.perf_counter() - started
    if failures:
        raise SweepError(failures, result)
    return result


def run_members(
    task: Task,
    configs: Sequence[dict[str, Any]],
    run: Run,
    context: RunContext,
    *,
    label: str = "",
    threads: int = 1,
) -> list[Any]:
    """An experiment's sweep: :func:`run_sweep` on the run's executor and workers
    (``context.executor``, ``context.workers``), each member stored in the run's
    ``members/`` (``members/<label>/`` for one of several sweeps of a run), so a resumed
    run loads its finished members; the results in the order of ``configs``. The progress
    row is named after ``label`` (``"sweep"`` without one)."""
    store = run.path / "members" / label if label else run.path / "members"
    return run_sweep(
        task,
        configs,
        executor=context.executor,
        workers=context.workers,
        store=store,
        threads=threads,
        progress=context.progress,
        description=label or "sweep",
    ).results


class _Ticker:
    """Counts finished members onto a progress callback."""

    def __init__(self, report: ProgressCallback, total: int, done: int) -> None:
        self.report, self.total, self.done = report, total, done
        report(done, total)

    def add(self) -> None:
        self.done += 1
        self.report(self.done, self.total)


def _check_configs(configs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(configs, (str, bytes)) or not isinstance(configs, Sequence):
        raise ValueError(f"configs must be a list of dicts, got {type(configs).__name__}")
    if len(configs) == 0:
        raise ValueError("configs is empty: a sweep needs at least one config")
    checked = []
    for i, config in enumerate(configs):
        if not isinstance(config, dict):
            raise ValueError(f"configs[{i}] must be a dict, got {type(config).__name__}")
        try:
            config_json(config)
        except TypeError as error:
            raise ValueError(f"configs[{i}] cannot be recorded: {error}") from None
        checked.append(dict(config))
    return checked


def _check_task(task: Task, runner: Executor) -> None:
    if not callable(task):
        raise ValueError(f"task must be a function config -> dict, got {type(task).__name__}")
    if not runner.needs_pickling:
        return
    try:
        pickle.dumps(task)
    except Exception as error:
        name = getattr(task, "__qualname__", repr(task))
        raise ValueError(
            f"the task {name} cannot be pickled for the {runner.name!r} executor ({error}); "
            "define it as a function at module level (not a lambda or a nested function), "
            "or use executor='serial'"
        ) from None


def _load_finished(members: MemberRecords | None, result: SweepResult, threads: int) -> list[Job]:
    """Fill ``result`` with the members found in the store; the jobs of the others."""
    jobs = []
    for index, config in enumerate(result.configs):
        found = members.load(index, config) if members is not None else None
        if found is None:
            jobs.append(Job(index, config, threads=threads))
        else:
            result.results[index], result.attempts[index] = found
            result.loaded.append(index)
    return jobs


def _retry_text(retry: Retry, job: Job) -> str:
    what = "its worker died" if retry.crashed else "it raised"
    last = retry.error.strip().splitlines()[-1] if retry.error.strip() else ""
    return (
        f"sweep member {retry.index} (config {config_json(job.config)}) failed at attempt "
        f"{retry.attempt} ({what}: {last}); retrying"
    )


def _note(display: ProgressDisplay, text: str) -> None:
    note = getattr(display, "note", None)
    if callable(note):
        note(text)
