"""The experiment registry: every reproducible experiment registers itself here.

An experiment is data plus claims (DESIGN.md principle 7): presets (``quick`` for a 2-core
CPU, ``paper`` for the paper's scale), a run function that writes to the run store, and,
from the harness issue on, named claims evaluated on the measured results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from collapselab.store import Run


@dataclass
class RunContext:
    """What a run function receives besides its run directory."""

    preset: str
    config: dict[str, Any]
    seed: int = 0
    device: str = "cpu"
    data_dir: Path | None = None
    callbacks: list[Any] = field(default_factory=list)


class RunFunction(Protocol):
    def __call__(self, run: Run, context: RunContext) -> None: ...


@dataclass
class Experiment:
    """A registered experiment.

    Attributes:
        id: stable identifier used on the command line (``collapselab run ID``).
        paper: short name of the paper it reproduces (``"demo"`` for the demo).
        title: what it shows (figure / table).
        presets: configuration per preset name; ``quick`` is mandatory.
        runtime_quick: expected wall time of the quick preset on 2 CPU cores, as text.
        run: the function that trains / simulates and writes the run.
    """

    id: str
    paper: str
    title: str
    presets: dict[str, dict[str, Any]]
    runtime_quick: str
    run: RunFunction
    figures: list[str] = field(default_factory=list)

    def config(self, preset: str) -> dict[str, Any]:
        if preset not in self.presets:
            raise KeyError(
                f"experiment {self.id!r} has no preset {preset!r}; "
                f"available presets: {', '.join(sorted(self.presets))}"
            )
        return dict(self.presets[preset])


_REGISTRY: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    """Add ``experiment`` to the registry; ids must be unique."""
    if experiment.id in _REGISTRY and _REGISTRY[experiment.id] is not experiment:
        raise ValueError(f"an experiment with id {experiment.id!r} is already registered")
    if "quick" not in experiment.presets:
        raise ValueError(f"experiment {experiment.id!r} must define a 'quick' preset")
    _REGISTRY[experiment.id] = experiment
    return experiment


def get_experiment(experiment_id: str) -> Experiment:
    """The registered experiment called ``experiment_id``."""
    _load_builtin_experiments()
    try:
        return _REGISTRY[experiment_id]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise KeyError(
            f"unknown experiment {experiment_id!r}; known experiments: {known}"
        ) from None


def all_experiments() -> list[Experiment]:
    """Every registered experiment, sorted by paper then id."""
    _load_builtin_experiments()
    return sorted(_REGISTRY.values(), key=lambda e: (e.paper, e.id))


def _load_builtin_experiments() -> None:
    # Importing the built-in experiment modules registers them; deferred so that importing the
    # registry stays cheap and free of import cycles.
    from collapselab.experiments import demo  # noqa: F401
