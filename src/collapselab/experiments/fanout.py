"""A reproduction fanned out over Ray: every experiment one Ray task (``--executor ray``).

:func:`~collapselab.experiments.reproduce` with the Ray executor hands each experiment to
:func:`fan_out`, which submits it as a Ray task that runs it exactly as the serial
reproduction does (:func:`~collapselab.experiments.reproduce.run_one`, into the same run
directory under the same root, which every node must see: a shared file system) and
reports each :class:`~collapselab.experiments.reproduce.ExperimentOutcome` as it arrives.

**Resources.** A task asks for ``threads`` CPUs and runs with that many torch and BLAS
threads (by default the driver's ``torch.get_num_threads()``, what a serial reproduction
on the driver's machine uses, at most the CPUs of the largest node), so its numbers are
the serial ones. With ``--device cuda`` an experiment that trains asks for one GPU too
(Ray gives the task its own GPU as ``cuda``).

**Ensembles.** On CPUs, an experiment's sweeps (seed ensembles, grids, the batched chunks
of paper 002's ensembles) run as Ray tasks of their own, one CPU each, spread over the
cluster; the experiment's task gives its CPUs back while it waits for them (Ray does so
for a task blocked in ``ray.wait``), so they cannot starve. On a GPU they run inside the
experiment's task, on its GPU (Ray does not lend a waiting task's GPU: members asking for
GPUs of their own could wait forever on the experiments holding them). The chunks of a
batched ensemble follow ``workers`` (default: the cluster's CPUs), as on every executor.

**Failures.** A run writes its progress as it goes (checkpoints, finished sweep members),
so a task whose worker or node dies loses only what it had not written: it is submitted
again, up to ``retries`` times, and resumes its run; after that the experiment is
reported failed and the same command resumes it later. Ray's own task retries are off.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collapselab.experiments.data_plan import DataPlan
from collapselab.experiments.registry import Experiment, find_experiment, register, unregister
from collapselab.experiments.sweeps.ray_executor import crashed, ray_session


@dataclass(frozen=True)
class Dispatch:
    """Where and how the experiments of a reproduction run on Ray.

    ``address``: the cluster (``None``: a local instance with ``workers`` CPUs, or the
    Ray already initialised in this process); ``workers``: the CPUs the experiments'
    sweeps spread over (``None``: the cluster's); ``threads``: torch threads and CPUs per
    experiment (``None``: the driver's torch threads); ``retries``: submissions again of
    an experiment whose worker died."""

    address: str | None = None
    workers: int | None = None
    threads: int | None = None
    retries: int = 1


@dataclass
class _Task:
    """One experiment's Ray task: what :func:`run_one` takes, and its attempt."""

    experiment: Experiment
    plan: DataPlan | None
    arguments: dict[str, Any] = field(default_factory=dict)
    num_gpus: float = 0.0
    attempt: int = 1


def fan_out(
    experiments: Sequence[Experiment],
    plans: dict[str, Any],
    arguments: dict[str, Any],
    dispatch: Dispatch,
    on_start: Callable[[Experiment], None] | None = None,
    on_done: Callable[[Any], None] | None = None,
) -> None:
    """Run ``experiments`` as Ray tasks; ``on_done(outcome)`` as each one ends.

    ``arguments``: those of :func:`~collapselab.experiments.reproduce.run_one` that every
    experiment shares (``preset``, ``root``, ``seed``, ``device``, ``data_dir``,
    ``mirrors``); ``plans``: each experiment's data plan by id. ``on_start`` is called for
    each experiment as it is submitted. Ctrl-C cancels every task (their runs resume on the
    next reproduction) and is re-raised.

    Raises ``ImportError`` (Ray not installed), ``ConnectionError`` (no cluster at the
    address) and ``ValueError`` (``--device cuda`` on a cluster without GPUs), each one line.
    """
    with ray_session(dispatch.address, dispatch.workers) as ray:
        threads, workers, gpus = _resources(ray, dispatch, arguments["device"])
        remote = ray.remote(_run_experiment)
        shared = arguments | {"workers": workers, "executor": "ray" if not gpus else "serial"}
        running: dict[Any, _Task] = {}

        def submit(task: _Task) -> None:
            ref = remote.options(max_retries=0, num_cpus=threads, num_gpus=task.num_gpus).remote(
                task.experiment, task.plan, task.arguments, threads
            )
            running[ref] = task

        for experiment in experiments:
            if on_start is not None:
                on_start(experiment)
            trains = gpus and experiment.uses_device
            submit(_Task(experiment, plans.get(experiment.id), shared, 1.0 if trains else 0.0))
        try:
            while running:
                ready, _ = ray.wait(list(running), num_returns=1)
                task = running.pop(ready[0])
                outcome = _outcome(ray, ready[0], task)
                if outcome is None and task.attempt <= dispatch.retries:
                    submit(_Task(task.experiment, task.plan, task.arguments, task.num_gpus,
                                 task.attempt + 1))  # fmt: skip
                    continue
                if on_done is not None:
                    on_done(outcome if outcome is not None else _dead(task))
        except BaseException:  # Ctrl-C, SIGTERM: end the tasks; their runs resume later
            for ref in running:
                ray.cancel(ref, force=True)
            raise


DEVICES = ("cpu", "cuda", "auto")
"""The devices of a fan-out: Ray gives each task its own GPU, which it sees as ``cuda``."""


def check_device(device: str) -> None:
    """Raise ``ValueError`` (one line) for a device a fan-out cannot give its tasks."""
    if device not in DEVICES:
        hint = " (Ray gives each task its own GPU: give cuda)" if device.startswith("cuda") else ""
        raise ValueError(
            f"device {device!r}: on Ray the device is one of {', '.join(DEVICES)}{hint}"
        )


def _resources(ray: Any, dispatch: Dispatch, device: str) -> tuple[int, int, bool]:
    """CPUs (and threads) per experiment, the workers its sweeps spread over, and whether
    experiments that train get a GPU; checked against the cluster."""
    import torch

    nodes = [node for node in ray.nodes() if node.get("Alive")]
    largest = max((int(node["Resources"].get("CPU", 0)) for node in nodes), default=1)
    threads = dispatch.threads or torch.get_num_threads()
    threads = max(1, min(threads, largest))
    total = ray.cluster_resources()
    workers = dispatch.workers or max(1, int(total.get("CPU", 1)))
    gpus = device != "cpu" and (device != "auto" or total.get("GPU", 0) > 0)
    if gpus and total.get("GPU", 0) < 1:
        raise ValueError(
            f"--device {device}: the Ray cluster has no GPU (resources: "
            f"{int(total.get('CPU', 0))} CPUs); use --device cpu, or add GPU nodes"
        )
    return threads, workers, gpus


def _run_experiment(
    experiment: Experiment, plan: DataPlan | None, arguments: dict[str, Any], threads: int
) -> Any:
    # The body of every experiment's Ray task (module level: Ray imports it by name).
    # An experiment registered only in the driver (a script's, a test's), or otherwise
    # than in this worker (a worker serves many tasks), is registered from the copy the
    # task carries; a built-in one is equal to the worker's own, which stays.
    import torch
    from threadpoolctl import threadpool_limits

    from collapselab.experiments.reproduce import run_one

    registered = find_experiment(experiment.id)
    if registered != experiment:
        if registered is not None:
            unregister(experiment.id)
        register(experiment)
    torch.set_num_threads(threads)
    with threadpool_limits(limits=threads):
        return run_one(experiment, plan, callbacks=[], progress=None, **arguments)


def _outcome(ray: Any, ref: Any, task: _Task) -> Any:
    """The task's outcome; ``None`` when its worker died (to submit again, or
    :func:`_dead`)."""
    from collapselab.experiments.reproduce import failed_outcome

    try:
        return ray.get(ref)
    except ray.exceptions.RayError as error:
        if crashed(ray, error):
            return None
        return failed_outcome(task.experiment, task.plan, task.arguments,
                              f"{type(error).__name__}: {error}")  # fmt: skip


def _dead(task: _Task) -> Any:
    from collapselab.experiments.reproduce import failed_outcome

    tries = "once" if task.attempt == 1 else f"{task.attempt} times"
    root = Path(os.fspath(task.arguments["root"]))
    return failed_outcome(
        task.experiment,
        task.plan,
        task.arguments,
        f"the Ray worker running {task.experiment.id} died ({tries}); its run under {root} "
        "keeps what it finished: run the same command again to resume it",
    )
