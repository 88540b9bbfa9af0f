"""The command line's progress display: one Rich live display per command, 80 columns wide.

Every long job is a row with a bar, ``done/total unit`` (``epoch 12/600``), the elapsed
time and the remaining time::

    reproduce 001          ━━━━━━━━━━━━━━━━ experiment 3/6   0:00:41 eta ~0:00:52
    pfc-training-fc        ━━━━━━━━━━━━━━━━ epoch 120/600    0:00:06 eta 0:00:24
    train loss 0.0123 · train accuracy 1 · test accuracy 0.97

Training reports through :class:`TrainingProgress` (a :class:`collapselab.train.Callback`),
solvers and sweeps through :meth:`ProgressBoard.task` (the experiments'
:class:`~collapselab.experiments.progress.ProgressDisplay`), ``reproduce`` through
:meth:`ProgressBoard.overall` with a remaining time from measured estimates. Rows vanish
when their job ends (the command prints its own summary lines). In a log file, where
nothing is animated, each running row is written as a plain line every :data:`LOG_EVERY_S`
seconds instead, on a clock, also between two updates of the row (``pfc-training-fc: epoch
120/600, 0:00:06 elapsed, eta 0:00:24``), beside the summaries and notes such as "resuming
... from epoch k".
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.table import Column
from rich.text import Text

from collapselab.train.callbacks import Callback, TrainState

DESCRIPTION_WIDTH = 22
COUNT_WIDTH = 16
BAR_WIDTH = 16
LOG_EVERY_S = 30.0
"""Seconds between the plain progress lines of a row when the output is not a terminal."""


def _clock(seconds: float) -> str:
    seconds = max(round(seconds), 0)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class ReproduceClock:
    """The time left of a reproduction, from each experiment's measured time (``None``:
    unknown), corrected by how this machine runs them today.

    After experiments that ran now, their measured times are scaled by
    ``f = Σ elapsed / Σ estimated`` (a loaded machine runs slower than the measurement).
    The current experiment's part is ``f · estimate − elapsed``; once it runs over that, its
    end is unknown and the time left is a lower bound (the others' scaled estimates), shown
    as ``eta >H:MM:SS`` rather than a number that sits still. Skipped experiments (finished
    earlier) take no time and do not count towards ``f``.
    """

    def __init__(self, estimates: Sequence[float | None]) -> None:
        self.estimates = list(estimates)
        self.index = 0
        self.started = 0.0
        self.spent = self.planned = 0.0

    def start(self, index: int, now: float) -> None:
        """Experiment ``index`` (from 0) starts at ``now`` (seconds)."""
        self.index, self.started = index, now

    def finish(self, index: int, seconds: float, ran: bool) -> None:
        """Experiment ``index`` ended after ``seconds``; ``ran``: it ran now (not skipped)."""
        estimate = self.estimates[index]
        if ran and estimate:
            self.spent += seconds
            self.planned += estimate
        self.index = index + 1

    @property
    def factor(self) -> float:
        return self.spent / self.planned if self.planned > 0 else 1.0

    def remaining(self, now: float) -> tuple[float, bool] | None:
        """``(seconds, at_least)``, or ``None`` while an estimate ahead is unknown."""
        ahead = self.estimates[self.index :]
        if not ahead:
            return 0.0, False
        if any(e is None for e in ahead):
            return None
        rest = self.factor * sum(ahead[1:])
        current = self.factor * ahead[0] - (now - self.started)
        return (rest + current, False) if current >= 0 else (rest, True)


class RemainingColumn(ProgressColumn):
    """``eta H:MM:SS``: a task's own estimate (field ``remaining``, a callable returning
    seconds, ``(seconds, at_least)`` or ``None``; shown with ``~``, or ``>`` for a lower
    bound) or Rich's from the rate so far."""

    def render(self, task: Task) -> Text:
        estimate = task.fields.get("remaining")
        if callable(estimate):
            seconds = estimate()
            if seconds is None:
                return Text("eta ?", style="cyan")
            seconds, at_least = seconds if isinstance(seconds, tuple) else (seconds, False)
            return Text(f"eta {'>' if at_least else '~'}{_clock(seconds)}", style="cyan")
        if task.finished:
            return Text("")
        seconds = task.time_remaining
        return Text("eta ?" if seconds is None else f"eta {_clock(seconds)}", style="cyan")


class _Display(Progress):
    """A Progress with one status line (the latest training metrics) under its rows."""

    status = ""

    def get_renderables(self) -> Iterator[RenderableType]:
        table = self.make_tasks_table(self.tasks)
        if self.status:
            yield Group(table, Text(self.status, no_wrap=True, overflow="ellipsis"))
        else:
            yield table


class ProgressBoard:
    """The live display of one command; use as a context manager around the work.

    ``enabled=False`` (``--no-progress``) shows nothing but the notes. On a console that is
    not a terminal every row is written as a plain line every ``log_every`` seconds.
    """

    def __init__(
        self, console: Console, enabled: bool = True, log_every: float = LOG_EVERY_S
    ) -> None:
        self.console = console
        self.enabled = enabled
        self.log_every = log_every
        self._log_lines = enabled and not console.is_terminal
        self._last_line: dict[Any, float] = {}  # task id -> when its row was last written
        self._lock = threading.RLock()  # the rows, between the work and the log's clock
        self._ticker: threading.Thread | None = None
        self._display = _Display(
            TextColumn(
                "[bold]{task.description}",
                table_column=Column(width=DESCRIPTION_WIDTH, no_wrap=True, overflow="ellipsis"),
            ),
            BarColumn(bar_width=BAR_WIDTH),
            TextColumn(
                "{task.fields[count]}",
                table_column=Column(width=COUNT_WIDTH, no_wrap=True, overflow="ellipsis"),
            ),
            TimeElapsedColumn(),
            RemainingColumn(),
            console=console,
            transient=True,
            disable=not enabled,
        )

    def __enter__(self) -> ProgressBoard:
        self._display.start()
        if self._log_lines:  # a log file: rows are written on a clock, not only on updates
            self._ticking = threading.Event()
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._ticker is not None:
            self._ticking.set()
            self._ticker.join()
            self._ticker = None
        self._display.status = ""
        self._display.stop()

    def _tick(self) -> None:
        """Every ``log_every / 2`` seconds: write each row whose last line is ``log_every``
        old (a long epoch or solver step between two updates must not leave the log
        silent)."""
        while not self._ticking.wait(self.log_every / 2):
            with self._lock:
                due = [k for k, last in self._last_line.items()
                       if time.monotonic() - last >= self.log_every]  # fmt: skip
                for task_id in due:
                    self._write_line(task_id)

    def note(self, text: str) -> None:
        """Print a line above the display (also when it is disabled or not a terminal)."""
        self.console.print(text, markup=False, highlight=False)

    def set_status(self, text: str) -> None:
        self._display.status = text

    # ------------------------------------------------------------------ tasks
    def add(self, description: str, total: int, count: str, **fields: Any) -> Any:
        with self._lock:
            task_id = self._display.add_task(description, total=max(total, 1), count=count,
                                             **fields)  # fmt: skip
            self._last_line[task_id] = time.monotonic()
        return task_id

    def update(self, task_id: Any, **fields: Any) -> None:
        with self._lock:
            self._display.update(task_id, **fields)
            if self._log_lines and time.monotonic() - self._last_line[task_id] >= self.log_every:
                self._write_line(task_id)

    def remove(self, task_id: Any) -> None:
        with self._lock:
            self._display.remove_task(task_id)
            del self._last_line[task_id]

    def _write_line(self, task_id: Any) -> None:
        """``description: count, H:MM:SS elapsed, eta H:MM:SS``, for a log file."""
        self._last_line[task_id] = time.monotonic()
        task = next(t for t in self._display.tasks if t.id == task_id)
        remaining = RemainingColumn().render(task).plain
        elapsed = _clock(task.elapsed or 0.0)
        line = f"{task.description}: {task.fields['count']}, {elapsed} elapsed, {remaining}"
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    @contextlib.contextmanager
    def task(
        self, description: str, total: int, unit: str = ""
    ) -> Iterator[Callable[[int, int], None]]:
        """A row for a solver or sweep; yields ``callback(done, total)``."""
        suffix = f" {unit}" if unit else ""
        task_id = self.add(description, total, f"0/{total}{suffix}")

        def advance(done: int, new_total: int) -> None:
            count = f"{done}/{new_total}{suffix}"
            self.update(task_id, completed=done, total=max(new_total, 1), count=count)

        try:
            yield advance
        finally:
            self.remove(task_id)

    def training(self, description: str) -> TrainingProgress:
        """A training callback showing ``epoch k/n`` and the latest metrics."""
        return TrainingProgress(self, description)

    @contextlib.contextmanager
    def overall(
        self, description: str, total: int, remaining: Callable[[], float | None]
    ) -> Iterator[Callable[[int], None]]:
        """The ``reproduce`` row: ``experiment i/n`` with ``remaining()`` as its eta;
        yields ``started(i)`` to call when experiment ``i`` (from 1) starts."""
        task_id = self.add(description, total, f"experiment 0/{total}", remaining=remaining)

        def started(i: int) -> None:
            self.update(task_id, completed=i - 1, count=f"experiment {i}/{total}")

        try:
            yield started
        finally:
            self.remove(task_id)


_SHOWN_METRICS = {
    "train_loss": "train loss",
    "train_accuracy": "train accuracy",
    "test_accuracy": "test accuracy",
}


class TrainingProgress(Callback):
    """One row per training session: ``epoch k/n``, elapsed, remaining (from the optimiser
    steps done so far); the latest evaluation on the status line. A session that resumes
    from a checkpoint prints ``resuming <description> from epoch k of n`` first."""

    def __init__(self, board: ProgressBoard, description: str) -> None:
        self.board = board
        self.description = description
        self._task: Any = None
        self._epochs = 0

    def on_train_start(self, state: TrainState) -> None:
        self._epochs = state.config.epochs
        if state.resumed:
            self.board.note(
                f"resuming {self.description} from epoch {state.epoch} of {self._epochs}"
            )
        self._task = self.board.add(
            self.description,
            state.total_iterations,
            self._count(state.epoch),
            completed=state.iteration,
        )

    def _count(self, epoch: int) -> str:
        return f"epoch {epoch}/{self._epochs}"

    def on_iteration_end(self, state: TrainState) -> None:
        if self._task is not None:
            self.board.update(self._task, completed=state.iteration)

    def on_epoch_end(self, state: TrainState) -> None:
        if self._task is None:
            return
        self.board.update(self._task, count=self._count(state.epoch))
        shown = [
            f"{label} {state.last_eval[key]:.3g}"
            for key, label in _SHOWN_METRICS.items()
            if key in state.last_eval
        ]
        self.board.set_status(" \u00b7 ".join(shown))

    def on_train_end(self, state: TrainState) -> None:
        if self._task is not None:
            self.board.remove(self._task)
            self.board.set_status("")
            self._task = None
