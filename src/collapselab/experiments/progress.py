"""Progress of the long jobs inside an experiment (solvers, sweeps, Monte-Carlo studies).

The math stays pure (docs/architecture.md, principle 1): a theory solver only accepts an optional
``progress(done, total)`` callback. An experiment opens a task on the display it is given
(:attr:`collapselab.experiments.RunContext.progress`) and hands the task's callback to the
solver::

    with context.progress.task("λ/λ_W sweep", total=len(ratios), unit="points") as done:
        for i, ratio in enumerate(ratios):
            ...
            done(i + 1, len(ratios))

The command line supplies a Rich display (bar, ``done/total unit``, elapsed, remaining);
the default, :class:`NoProgress`, shows nothing. Training loops report through their own
callbacks (:class:`collapselab.train.Callback`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol

ProgressCallback = Callable[[int, int], None]
"""``callback(done, total)``: the signature of every ``progress`` argument."""


class ProgressDisplay(Protocol):
    """Where an experiment's tasks show their progress."""

    def task(
        self, description: str, total: int, unit: str = ""
    ) -> AbstractContextManager[ProgressCallback]:
        """A task of ``total`` units; the yielded callback takes ``(done, total)``."""
        ...


def _ignore(done: int, total: int) -> None:
    return None


class NoProgress:
    """A display that shows nothing (the default outside the command line)."""

    @contextlib.contextmanager
    def task(self, description: str, total: int, unit: str = "") -> Iterator[ProgressCallback]:
        yield _ignore
