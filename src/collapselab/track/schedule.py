"""When to measure: epoch lists (paper 003's log-spaced list), iteration periods and lists.

One vocabulary for every schedule of the project: the Monitor's own, each metric family's
(``Family(schedule=...)``: the Monitor measures at an event the families due then), and
the per-iteration recorders of the experiments (paper 000's coarse steps and the dense
window it replays around the phase boundary, :func:`dense_window`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from collapselab.checks import check_bool, check_int

PAPER_003_EPOCHS: tuple[int, ...] = (
    *range(1, 15),
    16, 17, 19, 20, 22, 24, 27, 29, 32, 35, 38, 42, 45, 50, 54, 59, 65, 71, 77, 85, 92,
    101, 110, 121, 132, 144, 158, 172, 188, 206, 225, 245, 268, 293, 320, 350,
)  # fmt: skip
"""The 50 measurement epochs of paper 003's notebook for a 350-epoch run (note 003 §4.3)."""

_PAPER_003_BUDGET = 350


def _check_positive_int(value: object, name: str) -> int:
    return check_int(name, value, minimum=1)


def log_spaced_epochs(total_epochs: int) -> list[int]:
    """Paper 003's log-spaced measurement epochs scaled to a budget of ``total_epochs``.

    For 350 epochs this is exactly :data:`PAPER_003_EPOCHS` (every epoch up to 14, then
    roughly geometric steps of 9%). For another budget ``T`` every listed epoch ``e`` maps to
    ``max(1, round(e * T / 350))`` (halves rounded up), duplicates are dropped, and epochs
    1 and ``T`` are always included. Short budgets therefore measure every epoch (``T <= 14``
    gives ``1..T``); long budgets keep the dense start and the log spacing.

    Epoch 0 (the initial model) is not part of the list; monitors add it on request.
    """
    total = _check_positive_int(total_epochs, "total_epochs")
    half = _PAPER_003_BUDGET  # integer rounding of e * T / 350, halves up
    scaled = {max(1, (2 * e * total + half) // (2 * half)) for e in PAPER_003_EPOCHS}
    return sorted(scaled | {1, total})


@dataclass(frozen=True)
class Schedule:
    """Which epochs and iterations a monitor (or a metric family) measures.

    Attributes:
        epochs: epochs (counted from 1, as :func:`collapselab.train.train` counts them) at
            whose end to measure; empty for none.
        every_iterations: also measure after every this many optimiser steps (``None``:
            never).
        initial: measure the initial model (epoch 0, step 0) before training.
        iterations: also measure after these optimiser steps (``>= 1``), e.g. a dense
            window (:func:`dense_window`).
    """

    epochs: frozenset[int] = frozenset()
    every_iterations: int | None = None
    initial: bool = True
    iterations: frozenset[int] = frozenset()

    @classmethod
    def build(
        cls,
        epochs: Iterable[int] | str | None = "log",
        *,
        total_epochs: int | None = None,
        every_iterations: int | None = None,
        initial: bool = True,
        iterations: Iterable[int] = (),
    ) -> Schedule:
        """A schedule from its parts.

        Args:
            epochs: ``"log"``: :func:`log_spaced_epochs` of ``total_epochs`` (required then);
                ``"all"``: every epoch (checked at measurement time); an iterable of epoch
                numbers (``>= 1``); or ``None``/empty for no epoch-end measurements.
            total_epochs: the training budget, for ``"log"``.
            every_iterations: measure every this many steps.
            initial: measure epoch 0.
            iterations: further optimiser steps to measure after (``>= 1``).
        """
        if every_iterations is not None:
            every_iterations = _check_positive_int(every_iterations, "every_iterations")
        steps = frozenset(_check_positive_int(t, "each scheduled iteration") for t in iterations)
        if isinstance(epochs, str):
            if epochs == "log":
                if total_epochs is None:
                    raise ValueError(
                        "schedule='log' scales paper 003's epoch list to the epoch budget: "
                        "pass epochs=<total training epochs> (or an explicit list of epochs)"
                    )
                chosen = frozenset(log_spaced_epochs(total_epochs))
            elif epochs == "all":
                chosen = _ALL
            else:
                raise ValueError(
                    f"schedule must be 'log', 'all', a list of epochs or None, got {epochs!r}"
                )
        elif epochs is None:
            chosen = frozenset()
        else:
            try:
                items = list(epochs)
            except TypeError:
                raise ValueError(
                    f"schedule must be 'log', 'all', a list of epochs or None, got {epochs!r}"
                ) from None
            chosen = frozenset(_check_positive_int(e, "each scheduled epoch") for e in items)
        return cls(chosen, every_iterations, check_bool("initial", initial), steps)

    def at_epoch(self, epoch: int) -> bool:
        """Whether to measure at the end of ``epoch`` (``0``: the initial model)."""
        if epoch == 0:
            return self.initial
        return epoch in self.epochs

    def at_iteration(self, step: int) -> bool:
        """Whether to measure after optimiser step ``step`` (``>= 1``): a multiple of
        ``every_iterations`` or one of ``iterations``."""
        if step <= 0:
            return False
        periodic = self.every_iterations is not None and step % self.every_iterations == 0
        return periodic or step in self.iterations

    def at_step(self, step: int) -> bool:
        """Whether to measure at optimiser step ``step`` of a run measured by iterations:
        step 0 is the initial model (:attr:`initial`), later steps :meth:`at_iteration`."""
        return self.initial if step == 0 else self.at_iteration(step)


def dense_window(low: int, high: int, every: int = 1) -> list[int]:
    """The steps ``low, low + every, ...`` up to ``high`` (included), without step 0 (the
    initial model, :attr:`Schedule.initial`): a window of dense measurements, e.g. around
    paper 000's phase boundary (``Schedule.build(None, iterations=dense_window(...))``)."""
    low = check_int("low", low, minimum=0)
    high = check_int("high", high, minimum=low)
    return [t for t in range(low, high + 1, _check_positive_int(every, "every")) if t > 0]


class _AllEpochs(frozenset):
    """Marker set: every epoch is scheduled."""

    def __contains__(self, item: object) -> bool:
        return isinstance(item, int) and item >= 1

    def __repr__(self) -> str:
        return "ALL_EPOCHS"


_ALL = _AllEpochs()
