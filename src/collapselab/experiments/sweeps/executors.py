"""Executors: where the members of a sweep run.

An executor is any object with the :class:`Executor` protocol: a ``name``, whether the
task must be picklable (``needs_pickling``), and ``run(task, jobs, done)``, which runs
every job through :func:`~collapselab.experiments.sweeps.member.attempt` (or
:func:`~collapselab.experiments.sweeps.member.run_member`) and calls ``done(outcome)`` once
per job, in the calling thread, as each finishes, in any order. ``done`` returns ``None``
or a job to run as well (the retry of a failed member), which the executor runs and
reports like the others; ``run`` returns when every job, retries included, is reported.
``run`` must not raise because a member failed or its worker died: it reports an error
:class:`Outcome` instead (``crashed=True`` for a dead worker). Whether to retry, the store
and the order of the results are :func:`~collapselab.experiments.sweeps.run_sweep`'s
business, not the executor's.

Built in: :class:`SerialExecutor` (this process, one member after another),
:class:`LocalExecutor` (a pool of ``workers`` processes started with ``spawn``) and
:class:`~collapselab.experiments.sweeps.ray_executor.RayExecutor` (extra ``ray``).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol, runtime_checkable

from collapselab.experiments.sweeps.member import Job, Outcome, Task, attempt

Report = Callable[[Outcome], Job | None]
"""``done(outcome) -> job to run as well, or None``."""


@runtime_checkable
class Executor(Protocol):
    """Runs the jobs of a sweep and reports each one's :class:`Outcome` through ``done``."""

    name: str
    needs_pickling: bool

    def run(self, task: Task, jobs: Sequence[Job], done: Report) -> None: ...


class SerialExecutor:
    """Every member in this process, one after another (a member that kills its process
    kills the sweep: use a process executor for tasks that may crash)."""

    name = "serial"
    needs_pickling = False

    def run(self, task: Task, jobs: Sequence[Job], done: Report) -> None:
        queue = deque(jobs)
        while queue:
            again = done(attempt(task, queue.popleft()))
            if again is not None:
                queue.append(again)


def default_workers() -> int:
    """The number of cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def _worker_loop(connection: Connection, task: Task, environ: dict[str, str]) -> None:
    # A worker process: run the jobs it is sent until it receives None. A worker forked
    # from the forkserver has the server's environment (as it was when the server started):
    # take the parent's, as a spawned or forked process would.
    os.environ.clear()
    os.environ.update(environ)
    # Ctrl-C reaches every process of the terminal's group: the parent stops the sweep and
    # ends its workers; a worker that took the KeyboardInterrupt itself printed a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        job = connection.recv()
        if job is None:
            return
        connection.send(attempt(task, job))


PRELOAD = ["__main__", "collapselab.experiments.sweeps.member"]
"""What the forkserver imports before forking workers (``__main__``: a script's tasks),
besides the module of the first sweep's task."""


@dataclass
class _Worker:
    process: Any
    connection: Connection
    job: Job | None = None


class LocalExecutor:
    """A pool of ``workers`` processes on this machine (default: one per core).

    Workers never inherit a forked copy of this process (forking a process whose torch
    thread pool has been used can hang): they are forked from a ``forkserver`` that
    imported torch and collapselab once and ran nothing else (``spawn``, a fresh
    interpreter per worker, where there is no forkserver). With the forkserver a new
    worker costs milliseconds instead of an import of torch, and the server lives on for
    later sweeps of this process. As with ``spawn``, a script that runs a sweep must guard
    its top level with ``if __name__ == "__main__":``.

    Each worker runs one member at a time, so a worker that dies is attributed to exactly
    one member: its outcome is ``crashed`` with the exit code, and a fresh worker takes its
    place for the remaining jobs. A sweep started inside a worker (a member that sweeps)
    runs its members one after another in that worker: the pool already uses the cores,
    and a pool's workers may not start processes of their own.
    """

    name = "local"
    needs_pickling = True

    def __init__(self, workers: int | None = None, start_method: str | None = None) -> None:
        self.workers = default_workers() if workers is None else workers
        methods = multiprocessing.get_all_start_methods()
        self.start_method = start_method or ("forkserver" if "forkserver" in methods else "spawn")

    def run(self, task: Task, jobs: Sequence[Job], done: Report) -> None:
        if multiprocessing.current_process().daemon:  # inside a worker of a pool
            SerialExecutor().run(task, jobs, done)
            return
        context = multiprocessing.get_context(self.start_method)
        if self.start_method == "forkserver":  # no effect once the server runs
            module = getattr(task, "__module__", None)
            context.set_forkserver_preload([*PRELOAD, *([module] if module else [])])
        pending = deque(jobs)
        pool: list[_Worker] = []
        try:
            for _ in range(min(self.workers, len(pending))):
                pool.append(self._start(context, task))
            for worker in pool:
                self._give(worker, pending)
            while any(worker.job is not None for worker in pool):
                busy = [worker for worker in pool if worker.job is not None]
                ready = wait([w.connection for w in busy] + [w.process.sentinel for w in busy])
                for worker in busy:
                    outcome = self._collect(worker, ready)
                    if outcome is None:
                        continue
                    worker.job = None
                    again = done(outcome)
                    if again is not None:
                        pending.append(again)
                    if not worker.process.is_alive():
                        pool.remove(worker)
                        worker.connection.close()
                        if pending:
                            worker = self._start(context, task)
                            pool.append(worker)
                    self._give(worker, pending)
        except BaseException:  # Ctrl-C, SIGTERM, a store that cannot be written: stop now
            self._stop(pool, wait_s=0.0)
            raise
        self._stop(pool)

    @staticmethod
    def _start(context: Any, task: Task) -> _Worker:
        parent, child = context.Pipe()
        process = context.Process(
            target=_worker_loop, args=(child, task, dict(os.environ)), daemon=True
        )
        process.start()
        child.close()
        return _Worker(process, parent)

    @staticmethod
    def _give(worker: _Worker, pending: deque[Job]) -> None:
        if pending and worker.job is None and worker.process.is_alive():
            worker.job = pending.popleft()
            worker.connection.send(worker.job)

    @staticmethod
    def _collect(worker: _Worker, ready: list[Any]) -> Outcome | None:
        """The outcome of ``worker``'s job if it is ready (a reply, or the worker's death)."""
        assert worker.job is not None
        if worker.connection in ready:
            try:
                return worker.connection.recv()
            except (EOFError, OSError):
                pass  # it died mid-reply: reported below
        elif worker.process.sentinel not in ready:
            return None
        worker.process.join(timeout=5)
        code = worker.process.exitcode
        return Outcome(
            worker.job.index,
            error=f"the worker process (pid {worker.process.pid}) died with exit code {code} "
            f"while running member {worker.job.index} (attempt {worker.job.attempt})",
            crashed=True,
        )

    @staticmethod
    def _stop(pool: list[_Worker], wait_s: float = 10.0) -> None:
        """Ask every worker to finish and wait ``wait_s`` seconds for each; end the rest."""
        for worker in pool:
            try:
                worker.connection.send(None)
            except (BrokenPipeError, OSError):
                pass
        for worker in pool:
            worker.process.join(timeout=wait_s)
            if worker.process.is_alive():  # interrupted mid-member, or stuck
                worker.process.terminate()
                worker.process.join(timeout=5)
            worker.connection.close()


EXECUTOR_NAMES = ("serial", "local", "ray")
"""The built-in executors, by name."""


def make_executor(executor: str | Executor, workers: int | None = None) -> Executor:
    """The executor called ``executor`` (:data:`EXECUTOR_NAMES`) with ``workers`` workers,
    or ``executor`` itself when it is an :class:`Executor` object.

    Raises ``ValueError`` for an unknown name or ``workers < 1``, ``ImportError`` naming the
    extra to install for ``"ray"`` without Ray, ``TypeError`` for an object that is not an
    executor.
    """
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise ValueError(
            f"workers must be an integer >= 1 (or None: one per core), got {workers!r}"
        )
    if isinstance(executor, str):
        if executor == "serial":
            return SerialExecutor()
        if executor == "local":
            return LocalExecutor(workers)
        if executor == "ray":
            from collapselab.experiments.sweeps.ray_executor import RayExecutor

            return RayExecutor(workers)
        raise ValueError(
            f"unknown executor {executor!r}; expected one of {', '.join(EXECUTOR_NAMES)} "
            "or an Executor object"
        )
    if not isinstance(executor, Executor):
        raise TypeError(
            "executor must be a name (serial, local, ray) or an object with name, "
            f"needs_pickling and run(task, jobs, done), got {type(executor).__name__}"
        )
    return executor
