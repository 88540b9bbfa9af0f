"""The experiment registry: every reproducible experiment registers itself here.

An experiment is data plus claims (docs/architecture.md, principle 7): presets (``quick``:
minutes on a 2-core CPU; ``standard``: real images, about an hour per paper on 2 cores;
``paper``: the paper's scale, for a GPU), a run function that writes to the run store, an
optional function that draws its figures from the stored results, and named claims
evaluated on the measured results.

A paper's experiments live in a subpackage (``collapselab/experiments/<paper>/``) whose
import calls :func:`register`; adding a paper to the built-ins is one line in
:data:`BUILTIN_PACKAGES`. Packages of that list that do not exist yet are skipped.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from collapselab.checks import check_choice
from collapselab.experiments.claims import Claim
from collapselab.experiments.papers import find_paper, same_paper
from collapselab.experiments.preset import (
    FALLBACK_TIERS,
    RUNNABLE_TIERS,
    TIERS,
    Preset,
    PresetError,
)
from collapselab.experiments.progress import NoProgress, ProgressDisplay
from collapselab.experiments.runtimes import stated_runtimes
from collapselab.experiments.sweeps.executors import Executor, default_workers
from collapselab.store import Run

BUILTIN_PACKAGES: tuple[str, ...] = (
    "collapselab.experiments.demo",
    "collapselab.experiments.fd",
    "collapselab.experiments.pfc",
    "collapselab.experiments.pcbias",
    "collapselab.experiments.mse_nc",
    "collapselab.experiments.dlufm",
)
"""Modules imported (when present) to register the built-in experiments, one per paper."""


@dataclass
class RunContext:
    """What a run function receives besides its run directory.

    ``callbacks`` go to the experiment's training loops (a progress bar); ``progress`` is
    where its other long jobs (solvers, sweeps) show their progress
    (:mod:`collapselab.experiments.progress`). ``executor`` and ``workers`` are where its
    sweeps run (:func:`collapselab.experiments.sweeps.run_sweep`: ``"local"``, a process
    pool of ``workers`` processes, default one per core; ``"serial"``; ``"ray"``); every
    executor gives the same results. ``seed`` is the first seed of the run seed's block
    (:func:`collapselab.experiments.seeding.base`: ``1000 ×`` the run seed), from which the
    run derives every seed it draws; ``config`` has its own seed fields moved into that
    block.
    """

    preset: str
    config: Preset
    seed: int = 0
    device: str = "cpu"
    data_dir: Path | None = None
    callbacks: list[Any] = field(default_factory=list)
    progress: ProgressDisplay = field(default_factory=NoProgress)
    executor: str | Executor = "local"
    workers: int = field(default_factory=default_workers)

    @property
    def data_dir_text(self) -> str | None:
        """``data_dir`` as text (or ``None``), as member configs carry it: they are hashed
        and pickled to worker processes."""
        return None if self.data_dir is None else str(self.data_dir)


class RunFunction(Protocol):
    def __call__(self, run: Run, context: RunContext) -> None: ...


@dataclass(kw_only=True)
class Experiment:
    """A registered experiment.

    Attributes:
        id: stable identifier used on the command line (``collapselab run ID``).
        paper: the paper it reproduces: its number or short name (``"003"``, ``"MSE-NC"``,
            see :mod:`collapselab.experiments.papers`), ``"demo"`` for the demo;
            :func:`register_paper` fills it in for a paper's table.
        title: what it shows.
        presets: the typed configuration (:class:`~collapselab.experiments.Preset`) of each
            tier, ``tiny``, ``quick``, ``standard`` and ``paper``
            (:func:`~collapselab.experiments.tiers`), and of any further named variant; the
            bundled-data fallbacks are derived when it is registered.
        runtime_quick: measured wall time of the quick preset on 2 CPU cores, as text
            (:func:`register_paper` takes the built-in experiments' from
            :mod:`~collapselab.experiments.runtimes`).
        runtimes: measured wall times of the other presets, as text, by preset (the machine
            and load they were measured under belong in the text, e.g. ``"~50 min (2
            cores, load 2)"``; ``"GPU"`` where no CPU time applies).
        fallbacks: preset -> the preset that runs instead when the first one's dataset
            files are not found (``{"quick": "quick-bundled"}``: the quick preset on
            Fashion-MNIST falls back to bundled data); derived when the experiment is
            registered (:meth:`~collapselab.experiments.Preset.bundled`); see
            :mod:`collapselab.experiments.data_plan`.
        dry_run: ``dry_run(config, data_dir=..., seed=...) -> summary``: builds what a run of
            ``config`` would use (data pipelines from local files, models, schedules)
            without training and returns a JSON-serialisable summary; ``None`` when there
            is nothing to build from files.
        run: trains / simulates and writes the run (metrics, arrays).
        figures: names of the figures it draws (``figures/<name>.png``); by default the
            names of :attr:`captions`.
        figure: the paper's figure or table it reproduces (``"Fig. 7"``), if any.
        claims: the paper's claims, evaluated on the measured results after the run.
        draw: draws ``figures/*.png`` from the stored results of a run; called after
            :attr:`run` and again by ``collapselab report``, so figures can be redrawn
            without training. ``None`` when :attr:`run` draws them itself.
        captions: a caption per figure name, shown under the figure in the report
            (what is drawn, how to read it); a figure without one is captioned by its name.
        uses_device: False for experiments that train no network (theory, solvers): they
            run on the CPU whatever ``--device`` says, and the runner says so.
    """

    id: str
    title: str
    presets: dict[str, Preset]
    run: RunFunction
    paper: str = ""
    runtime_quick: str = ""
    figures: list[str] = field(default_factory=list)
    figure: str = ""
    claims: list[Claim] = field(default_factory=list)
    draw: Callable[[Run], None] | None = None
    runtimes: dict[str, str] = field(default_factory=dict)
    fallbacks: dict[str, str] = field(default_factory=dict)
    dry_run: Callable[..., dict[str, Any]] | None = None

    def runtime(self, preset: str) -> str:
        """The stated runtime of ``preset`` (``""`` when none is stated)."""
        if preset == "quick":
            return self.runtime_quick
        return self.runtimes.get(preset, "")

    captions: dict[str, str] = field(default_factory=dict)
    uses_device: bool = True

    def __post_init__(self) -> None:
        if not self.figures:
            self.figures = list(self.captions)

    def config(self, preset: str) -> Preset:
        """The configuration of ``preset``: a deep copy, so that a caller changing a nested
        value changes no preset and no other experiment's configuration sharing it."""
        if preset not in self.presets:
            raise KeyError(
                f"experiment {self.id!r} has no preset {preset!r}; "
                f"available presets: {', '.join(sorted(self.presets))}"
            )
        return copy.deepcopy(self.presets[preset])

    def info(self) -> dict[str, Any]:
        """What the runner records in the manifest (``experiment_info``) for reports."""
        paper = find_paper(self.paper)
        return {
            "paper": self.paper,
            "paper_label": paper.label if paper is not None else self.paper,
            "paper_title": paper.title if paper is not None else "",
            "title": self.title,
            "figure": self.figure,
            "figures": list(self.figures),
            "captions": dict(self.captions),
            "runtime_quick": self.runtime_quick,
            "runtimes": {p: self.runtime(p) for p in self.presets if self.runtime(p)},
        }


_REGISTRY: dict[str, Experiment] = {}
_LOADED = False


def register(experiment: Experiment) -> Experiment:
    """Add ``experiment`` to the registry; ids must be unique. Returns it (for module globals)."""
    if not isinstance(experiment, Experiment):
        raise TypeError(f"register expects an Experiment, got {type(experiment).__name__}")
    if experiment.id in _REGISTRY and _REGISTRY[experiment.id] is not experiment:
        raise ValueError(f"an experiment with id {experiment.id!r} is already registered")
    _check_tiers(experiment)
    _derive_fallbacks(experiment)
    presets = tuple(experiment.presets)
    for preset, fallback in experiment.fallbacks.items():
        check_choice(f"{experiment.id}: fallbacks key", preset, presets)
        check_choice(f"{experiment.id}: fallback of {preset!r}", fallback, presets)
    names = [claim.name for claim in experiment.claims]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"experiment {experiment.id!r} repeats claim names {repeated}")
    _REGISTRY[experiment.id] = experiment
    return experiment


def register_paper(paper: str, table: Sequence[Experiment]) -> tuple[Experiment, ...]:
    """Register a paper's experiments from its one table; returns them, registered.

    Each entry gets ``paper`` and, where it states no ``runtime_quick``, the measured
    runtimes of :mod:`~collapselab.experiments.runtimes` (:func:`stated_runtimes`).
    """
    registered = []
    for experiment in table:
        times = {} if experiment.runtime_quick else stated_runtimes(experiment.id)
        registered.append(register(dataclasses.replace(experiment, paper=paper, **times)))
    return tuple(registered)


def table_row(
    id: str,
    title: str,
    figure: str,
    presets: dict[str, Preset],
    run: RunFunction,
    claims: list[Claim],
    draw: Callable[[Run], None] | None,
    captions: dict[str, str],
    **options: Any,
) -> Experiment:
    """One row of a paper's table (:func:`register_paper`): an :class:`Experiment` from the
    eight columns every experiment fills, in that order, and by keyword any other of its
    fields (``dry_run``, ``uses_device``, ``runtimes``...)."""
    return Experiment(
        id=id,
        title=title,
        figure=figure,
        presets=presets,
        run=run,
        claims=claims,
        draw=draw,
        captions=captions,
        **options,
    )


def _check_tiers(experiment: Experiment) -> None:
    """Every preset of one :class:`Preset` class, and the tiers there must be: ``tiny`` and
    ``quick`` always; ``standard`` and ``paper`` too for an experiment that reproduces one
    of the papers (:data:`~collapselab.experiments.PAPERS`; the demo reproduces none)."""
    needed = TIERS if find_paper(experiment.paper) is not None else RUNNABLE_TIERS
    missing = [tier for tier in needed if tier not in experiment.presets]
    if missing:
        raise ValueError(
            f"experiment {experiment.id!r} lacks the tier(s) {missing} ("
            + ", ".join(f"no {tier!r} preset" for tier in missing)
            + f"); every experiment defines {list(RUNNABLE_TIERS)}, and one of a paper "
            f"{list(TIERS)}"
        )
    kinds = {type(p) for p in experiment.presets.values()}
    if len(kinds) != 1 or not issubclass(next(iter(kinds)), Preset):
        names = ", ".join(sorted(getattr(k, "__name__", str(k)) for k in kinds))
        raise PresetError(
            f"experiment {experiment.id!r}: every preset must be one Preset class, got {names}"
        )


def _derive_fallbacks(experiment: Experiment) -> None:
    """Add ``<tier>-bundled`` for every fallback tier whose data is read from files."""
    presets = dict(experiment.presets)
    fallbacks = dict(experiment.fallbacks)
    for tier in FALLBACK_TIERS:
        if tier not in presets:
            continue
        bundled = presets[tier].bundled()
        name = f"{tier}-bundled"
        if bundled is not None and name not in presets:
            presets[name] = bundled
            fallbacks.setdefault(tier, name)
    experiment.presets, experiment.fallbacks = presets, fallbacks


def unregister(experiment_id: str) -> Experiment:
    """Remove and return a registered experiment (for tests and interactive use)."""
    try:
        return _REGISTRY.pop(experiment_id)
    except KeyError:
        raise KeyError(f"no registered experiment {experiment_id!r}") from None


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


def find_experiment(experiment_id: str) -> Experiment | None:
    """The registered experiment called ``experiment_id``, or ``None``."""
    _load_builtin_experiments()
    return _REGISTRY.get(experiment_id)


def all_experiments() -> list[Experiment]:
    """Every registered experiment, sorted by paper then id."""
    _load_builtin_experiments()
    return sorted(_REGISTRY.values(), key=lambda e: (e.paper, e.id))


def experiments_for_paper(paper: str) -> list[Experiment]:
    """The experiments of ``paper`` (number, short name or alias); ``"all"``: every paper's,
    without the demo."""
    if paper.strip().lower() == "all":
        return [e for e in all_experiments() if e.paper != "demo"]
    return [e for e in all_experiments() if same_paper(e.paper, paper)]


def _load_builtin_experiments() -> None:
    # Importing the built-in experiment packages registers them; deferred so that importing
    # the registry stays cheap and free of import cycles.
    global _LOADED
    if _LOADED:
        return
    for name in BUILTIN_PACKAGES:
        if importlib.util.find_spec(name) is None:
            continue  # a paper package not written yet
        importlib.import_module(name)
    _LOADED = True
