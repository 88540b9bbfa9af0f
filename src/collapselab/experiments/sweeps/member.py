"""One member of a sweep: its job, how a worker runs it, and what comes back.

Every executor runs a member through :func:`run_member`, in whatever process it uses, so
that the three things that make a member's result depend on its config alone are done in
one place:

- the global random generators (Python, NumPy, torch) are seeded from the config's hash,
  so even a task that draws from them gives the same numbers in any process;
- torch and the BLAS pools use ``threads`` threads (restored afterwards): a reduction
  split over another number of threads can differ in the last bits;
- the return value is normalised (:func:`normalise_result`), so a result loaded from the
  store and a freshly computed one are equal and of the same types.
"""

from __future__ import annotations

import hashlib
import json
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from collapselab.store import to_jsonable
from collapselab.train import seed_everything

Task = Callable[[dict[str, Any]], Mapping[str, Any]]
"""``task(config) -> {name: float | int | str | list | np.ndarray}``: a module-level function."""


@dataclass(frozen=True)
class Job:
    """Member ``index`` of a sweep: its ``config``, the torch ``threads`` it runs with and
    its ``attempt`` (1 for the first run, 2 for the first retry, ...)."""

    index: int
    config: dict[str, Any]
    threads: int = 1
    attempt: int = 1


@dataclass(frozen=True)
class Outcome:
    """What an executor reports for one attempt of one job.

    Either ``value`` (the normalised result, ``error`` is ``None``) or ``error`` (a text:
    the exception's traceback, or what happened to a worker that died); ``crashed`` is True
    when the worker process died rather than the task raising.
    """

    index: int
    value: dict[str, Any] | None = None
    error: str | None = None
    crashed: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


def config_json(config: Mapping[str, Any]) -> str:
    """The canonical JSON text of ``config`` (keys sorted): what its hash is taken of."""
    return json.dumps(to_jsonable(dict(config), "config"), sort_keys=True, allow_nan=True)


def config_hash(config: Mapping[str, Any]) -> str:
    """The first 16 hex digits of the SHA-256 of :func:`config_json`."""
    return hashlib.sha256(config_json(config).encode()).hexdigest()[:16]


def member_seed(config: Mapping[str, Any]) -> int:
    """The seed of the global generators for the member of ``config`` (63 bits of its hash)."""
    return int(config_hash(config), 16) >> 1


def normalise_result(result: object, where: str = "result") -> dict[str, Any]:
    """``result`` as the sweep records it: a dict of str keys whose values are NumPy arrays
    (a top-level array or tensor stays an array, as a NumPy copy) or plain JSON values
    (NumPy scalars become Python numbers, tuples lists; see
    :func:`collapselab.store.to_jsonable`). Raises ``TypeError`` for anything else."""
    if not isinstance(result, Mapping):
        raise TypeError(
            f"{where} must be a dict of name -> float, int, str, list or array, "
            f"got {type(result).__name__}"
        )
    out: dict[str, Any] = {}
    for key, value in result.items():
        if not isinstance(key, str):
            raise TypeError(f"{where} has a non-string key {key!r}")
        if isinstance(value, np.ndarray):
            out[key] = np.array(value, copy=True)
        elif type(value).__module__.startswith("torch") and hasattr(value, "numpy"):
            out[key] = value.detach().cpu().numpy().copy()
        else:
            out[key] = to_jsonable(value, f"{where}[{key!r}]")
    return out


def run_member(task: Task, job: Job) -> dict[str, Any]:
    """Run ``task`` on ``job.config`` with seeded generators and ``job.threads`` threads;
    returns the normalised result (exceptions propagate)."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(job.threads)
    try:
        with threadpool_limits(limits=job.threads):
            seed_everything(member_seed(job.config))
            return normalise_result(task(dict(job.config)), f"the result of member {job.index}")
    finally:
        torch.set_num_threads(before)


def attempt(task: Task, job: Job) -> Outcome:
    """Run ``job`` in this process and report it: an exception becomes an error outcome
    (with its traceback), so one member's failure never stops the others."""
    try:
        return Outcome(job.index, value=run_member(task, job))
    except Exception:
        return Outcome(job.index, error=traceback.format_exc())
