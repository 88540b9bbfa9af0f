"""The Ray executor: sweep members as Ray tasks, on this machine or a cluster (extra ``ray``).

Each member is one Ray task running :func:`~collapselab.experiments.sweeps.member.attempt`
(the same seeding, threads and normalisation as the other executors, so the results are
identical). Ray's own task retries are off: a task whose worker died
(``WorkerCrashedError``) is reported as a ``crashed`` outcome and
:func:`~collapselab.experiments.sweeps.run_sweep` retries it like any other.

Ray is used as it is found: when it is already initialised (``ray.init(address=...)`` to
join a cluster, or :func:`ray_session`), its resources are used as they are; otherwise a
local instance with ``workers`` CPUs is started for the sweep and shut down after it.

:func:`ray_session` joins a cluster at an address (checked first: a wrong address is one
clear error, not minutes of Ray's retries) or starts a local instance, for the length of a
block; :func:`crashed` tells a dead worker or node from other task errors.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator, Sequence
from typing import Any

from collapselab.experiments.sweeps.member import Job, Outcome, Task, attempt

INSTALL_HINT = "pip install 'collapselab[ray]'"


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError(
            f"the ray executor needs Ray, which is not installed: {INSTALL_HINT} "
            "(or use executor 'local', a process pool on this machine)"
        ) from None
    return ray


def check_address(address: str, timeout_s: float = 5.0) -> None:
    """Raise ``ConnectionError`` (one line) unless something listens at ``address``.

    ``address`` is ``host:port`` (a head node's GCS, ``ray start --head`` prints it) or
    ``ray://host:port`` (Ray Client); ``"auto"`` (the cluster ``ray start`` left on this
    machine) is left to Ray, which says at once when there is none. Without this check
    ``ray.init`` retries an unreachable address for minutes."""
    if address == "auto":
        return
    where = address.removeprefix("ray://")
    host, sep, port = where.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConnectionError(
            f"Ray address {address!r}: expected host:port (the head node's address, as "
            "`ray start --head` prints it), ray://host:port or auto"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ConnectionError(
            f"no Ray cluster answers at {address} ({reason}); start one there with "
            "`ray start --head`, or check the address"
        ) from None


@contextlib.contextmanager
def ray_session(
    address: str | None = None, cpus: int | None = None, options: dict[str, Any] | None = None
) -> Iterator[Any]:
    """Ray for the length of the block; yields the ``ray`` module.

    Already initialised: used as it is. Else ``address`` given: join that cluster
    (:func:`check_address` first). Else: start a local instance with ``cpus`` CPUs (default:
    every core). ``options``: more keyword arguments for ``ray.init``. What was joined or
    started here is shut down after the block.

    Raises ``ImportError`` naming the extra when Ray is not installed and
    ``ConnectionError`` (one line) when the cluster cannot be reached.
    """
    ray = _import_ray()
    if ray.is_initialized():
        yield ray
        return
    settings: dict[str, Any] = {"logging_level": "warning"}
    if address is not None:
        check_address(address)
        settings["address"] = address
    else:
        settings["include_dashboard"] = False
        if cpus is not None:
            settings["num_cpus"] = cpus
    try:
        ray.init(**(settings | (options or {})))
    except ConnectionError as error:  # "auto" without a cluster; a cluster that went away
        raise ConnectionError(str(error).splitlines()[0]) from None
    try:
        yield ray
    finally:
        ray.shutdown()


def crashed(ray: Any, error: BaseException) -> bool:
    """Whether a Ray task's ``error`` is its worker process or node dying (a kill, the
    out-of-memory killer, a lost node), as opposed to the task raising."""
    return isinstance(error, (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError))


def _ray_attempt(task: Task, job: Job) -> Outcome:
    # The body of every Ray task (module level, so Ray imports it by name in its workers).
    return attempt(task, job)


class RayExecutor:
    """Members as Ray tasks of one CPU each.

    Args:
        workers: CPUs of the local Ray instance started when none is running (default:
            one per core); not used when Ray is already initialised.
        init_options: more keyword arguments for ``ray.init`` when it is started here.
    """

    name = "ray"
    needs_pickling = True

    def __init__(self, workers: int | None = None, init_options: dict[str, Any] | None = None):
        self._ray = _import_ray()
        self.workers = workers
        self.init_options = dict(init_options or {})

    def run(self, task: Task, jobs: Sequence[Job], done: Any) -> None:
        with ray_session(cpus=self.workers, options=self.init_options) as ray:
            self._run(ray, task, jobs, done)

    @staticmethod
    def _run(ray: Any, task: Task, jobs: Sequence[Job], done: Any) -> None:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_attempt)
        task_ref = ray.put(task)
        running = {remote.remote(task_ref, job): job for job in jobs}
        while running:
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                job = running.pop(ref)
                again = done(_outcome(ray, ref, job))
                if again is not None:
                    running[remote.remote(task_ref, again)] = again


def _outcome(ray: Any, ref: Any, job: Job) -> Outcome:
    """The outcome of a finished Ray task; a dead worker or node is a ``crashed`` outcome."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as error:  # lost objects, a task that could not start
        if crashed(ray, error):
            text = f"the Ray worker died while running member {job.index} (attempt {job.attempt})"
            return Outcome(job.index, error=f"{text}: {error}", crashed=True)
        return Outcome(job.index, error=f"{type(error).__name__}: {error}")
