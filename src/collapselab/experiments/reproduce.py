"""Reproduce a paper: run all its experiments with one preset, then write the index.

``reproduce("003", preset="quick", root="runs")`` runs every registered experiment of paper
003 in turn (``"all"``: every paper's, without the demo), skipping runs that already
completed and resuming failed or interrupted ones. A failing experiment is recorded and
the next one runs. At the end (also after Ctrl-C) ``index.html`` and ``index.json`` are
written at the root.

Before anything runs, the data of every experiment is planned
(:func:`~collapselab.experiments.data_plan.plan_data`). An experiment whose datasets are
missing (with no fallback preset) is reported failed once, with the places looked and how to
install the data, and no experiment of its paper is run: a paper's reproduction is not
spent on long runs that cannot complete it.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from collapselab._version import __version__
from collapselab.checks import check_int
from collapselab.experiments.data_plan import DataPlan, MissingDataError, plan_data
from collapselab.experiments.papers import PAPERS, find_paper, paper_label
from collapselab.experiments.progress import ProgressDisplay
from collapselab.experiments.registry import Experiment, all_experiments, experiments_for_paper
from collapselab.experiments.runner import run_experiment, run_id_for
from collapselab.experiments.runtimes import measured as measured_runtime
from collapselab.experiments.sweeps.executors import Executor, make_executor
from collapselab.report.index import write_index
from collapselab.store import DamagedRunError, Mirror, Run, interruption, prepare_root

Outcome = Literal["completed", "skipped", "failed", "not run"]


@dataclass
class ExperimentOutcome:
    """What happened to one experiment of a reproduction.

    ``outcome``: ``"completed"`` (ran now), ``"skipped"`` (had already completed),
    ``"failed"`` or ``"not run"`` (another experiment of its paper lacks its data);
    ``claims``: the verdict counts of its ``claims.json``'s empirical claims, if any;
    ``notes``: remarks of its data plan (a fallback preset, an unused ``--data-dir``);
    ``load``: the machine's 1-minute load average when it started and when it ended (it
    counts the experiment's own processes: about 1 to 2 on two cores that run it alone), so
    that a measured time says how busy the machine was; ``resumed``: it ran now, continuing
    a run directory an earlier invocation left interrupted or failed, so ``seconds`` is only
    this invocation's part and is no measurement of the experiment's runtime.
    """

    experiment: str
    run_id: str
    outcome: Outcome
    seconds: float
    path: str | None = None
    error: str | None = None
    claims: dict[str, int] | None = None
    notes: list[str] | None = None
    load: list[float | None] | None = None
    resumed: bool = False


@dataclass
class ReproduceResult:
    """The outcomes of :func:`reproduce` and where the index was written.

    ``data_dir_unused``: a ``data_dir`` was given but no chosen experiment reads dataset files
    at this preset.
    """

    paper: str
    preset: str
    outcomes: list[ExperimentOutcome]
    wall_s: float
    index_html: Path
    index_json: Path
    data_dir_unused: bool = False

    @property
    def failed(self) -> list[ExperimentOutcome]:
        return [o for o in self.outcomes if o.outcome == "failed"]

    @property
    def not_run(self) -> list[ExperimentOutcome]:
        return [o for o in self.outcomes if o.outcome == "not run"]

    @property
    def ok(self) -> bool:
        return not self.failed and not self.not_run


def select_experiments(paper: str) -> list[Experiment]:
    """The experiments :func:`reproduce` runs for ``paper`` (``"all"``: every paper's).

    Raises ``ValueError`` naming the known papers when nothing matches.
    """
    if not isinstance(paper, str) or not paper.strip():
        raise ValueError("paper must be a paper number, short name or 'all'")
    chosen = experiments_for_paper(paper)
    if chosen:
        return chosen
    known = ", ".join(p.label for p in PAPERS)
    registered = sorted({e.paper for e in all_experiments() if e.paper != "demo"})
    have = ", ".join(registered) if registered else "none yet"
    target = find_paper(paper)
    if paper.strip().lower() == "all":
        raise ValueError(f"no paper experiments are registered (papers with experiments: {have})")
    if target is not None:
        raise ValueError(
            f"no experiments are registered for paper {target.label}; "
            f"papers with experiments: {have}"
        )
    raise ValueError(
        f"unknown paper {paper!r}; papers: {known} (by number, short name or 'all'); "
        f"papers with experiments: {have}"
    )


def reproduce(
    paper: str,
    preset: str = "quick",
    root: str | os.PathLike[str] = "collapselab-runs",
    seed: int = 0,
    device: str = "cpu",
    data_dir: str | os.PathLike[str] | None = None,
    callbacks: Callable[[Experiment], Sequence[Any]] | None = None,
    on_start: Callable[[Experiment], None] | None = None,
    on_done: Callable[[ExperimentOutcome], None] | None = None,
    *,
    mirrors: Sequence[str | Mirror] = (),
    progress: ProgressDisplay | None = None,
    executor: str | Executor = "local",
    workers: int | None = None,
    address: str | None = None,
    retries: int = 1,
) -> ReproduceResult:
    """Run every experiment of ``paper`` with ``preset`` under ``root`` and write the index.

    Args:
        paper: paper number (``"003"``, ``"3"``), short name or alias (``"mse-nc"``), an
            :attr:`Experiment.paper` value, or ``"all"``.
        preset, root, seed, device, data_dir: as for :func:`run_experiment`.
        callbacks: training callbacks per experiment (a progress bar, say).
        on_start, on_done: called before and after each experiment (for printing).
        mirrors, progress, executor, workers: as for :func:`run_experiment`, for every
            experiment. With ``executor="ray"`` the experiments themselves are Ray tasks,
            side by side (:mod:`~collapselab.experiments.fanout`): ``callbacks`` and
            ``progress`` stay in this process and are not used, ``on_start`` is called as
            each is submitted, ``on_done`` as each ends (in any order; the outcomes are
            returned in the experiments' order).
        address: the Ray cluster to join (``host:port``, ``ray://host:port``, ``auto``);
            ``None``: the Ray already initialised here, else a local instance with
            ``workers`` CPUs. Only with ``executor="ray"``.
        retries: with ``executor="ray"``, how many times an experiment whose Ray worker
            died is submitted again (it resumes its run).

    Returns:
        A :class:`ReproduceResult`; check :attr:`ReproduceResult.ok`.
    """
    chosen = select_experiments(paper)
    fanned = make_executor(executor, workers).name == "ray"  # a bad executor fails first
    if address is not None and not fanned:
        raise ValueError("address is the Ray cluster to run on: it needs executor 'ray'")
    if fanned:
        from collapselab.experiments.fanout import check_device

        check_device(device)
        retries = check_int("retries", retries, minimum=0)
    root = prepare_root(root)
    started_at = _dt.datetime.now(_dt.timezone.utc)
    load_at_start = load_average()
    machine = machine_facts()  # at the start: the code that runs, not what a pull leaves
    t0 = time.perf_counter()
    outcomes: list[ExperimentOutcome] = []
    plans, blocked = _plan_all(chosen, preset, data_dir)
    arguments = {"preset": preset, "root": root, "seed": seed, "device": device,
                 "data_dir": data_dir, "mirrors": mirrors}  # fmt: skip
    stopped: str | None = None  # what interrupted the reproduction, if anything

    def finished(outcome: ExperimentOutcome) -> None:
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)

    try:
        runnable = []
        for experiment in chosen:
            settled = _settled(experiment, plans.get(experiment.id), blocked, preset, seed)
            if settled is None and fanned:
                runnable.append(experiment)  # submitted below, all together
                continue
            if on_start is not None:
                on_start(experiment)
            if settled is None:
                extra = list(callbacks(experiment)) if callbacks is not None else []
                settled = run_one(experiment, plans.get(experiment.id), callbacks=extra,
                                  progress=progress, executor=executor, workers=workers,
                                  **arguments)  # fmt: skip
            finished(settled)
        if runnable:
            from collapselab.experiments.fanout import Dispatch, fan_out  # needs Ray

            dispatch = Dispatch(address, workers, retries=retries)
            fan_out(runnable, plans, arguments, dispatch, on_start, finished)
            order = {e.id: i for i, e in enumerate(chosen)}
            outcomes.sort(key=lambda o: order[o.experiment])
    except KeyboardInterrupt as error:
        stopped = interruption(error)
        raise
    finally:
        wall = time.perf_counter() - t0
        record = {
            "paper": paper,
            "preset": preset,
            "seed": seed,
            "device": device,
            "started": started_at.isoformat(timespec="seconds"),
            "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "wall_s": wall,
            "interrupted": stopped,
            "load": [load_at_start, load_average()],
            "machine": machine,
            "experiments": [asdict(o) for o in outcomes],
        }
        index_html, index_json = write_index(root, reproduce=record)
    unused = data_dir is not None and all(
        isinstance(p, DataPlan) and not p.reads_files for p in plans.values()
    )
    return ReproduceResult(paper, preset, outcomes, wall, index_html, index_json, unused)


def _plan_all(
    chosen: Sequence[Experiment], preset: str, data_dir: str | os.PathLike[str] | None
) -> tuple[dict[str, DataPlan | MissingDataError | None], dict[str, list[str]]]:
    """Every experiment's data plan (``None``: no such preset, reported when it runs) and,
    by paper, the experiments whose data is missing."""
    plans: dict[str, DataPlan | MissingDataError | None] = {}
    blocked: dict[str, list[str]] = {}
    for experiment in chosen:
        try:
            plans[experiment.id] = plan_data(experiment, preset, data_dir)
        except KeyError:
            plans[experiment.id] = None
        except MissingDataError as error:
            plans[experiment.id] = error
            blocked.setdefault(experiment.paper, []).append(experiment.id)
    return plans, blocked


def _settled(
    experiment: Experiment,
    plan: DataPlan | MissingDataError | None,
    blocked: dict[str, list[str]],
    preset: str,
    seed: int,
) -> ExperimentOutcome | None:
    """The outcome of an experiment that does not run (its data, or its paper's, is
    missing); ``None`` for one that runs."""
    if isinstance(plan, MissingDataError):  # fail now, once, without a run directory
        run_id = run_id_for(experiment.id, preset, seed)
        return ExperimentOutcome(experiment.id, run_id, "failed", 0.0, error=plan.one_line())
    if experiment.paper not in blocked:
        return None
    lacking = ", ".join(blocked[experiment.paper])
    return ExperimentOutcome(
        experiment.id,
        run_id_for(experiment.id, preset, seed),
        "not run",
        0.0,
        error=(
            f"not run: paper {paper_label(experiment.paper)}'s data is missing "
            f"(for {lacking}); install it and run again"
        ),
    )


def _run_id(experiment: Experiment, plan: DataPlan | None, preset: str, seed: int) -> str:
    # The run is the fallback preset's when the requested preset's data is missing.
    return run_id_for(experiment.id, plan.preset if plan is not None else preset, seed)


def failed_outcome(
    experiment: Experiment, plan: DataPlan | None, arguments: dict[str, Any], error: str
) -> ExperimentOutcome:
    """A failed outcome of ``experiment`` that no run reported (its Ray worker died):
    ``arguments`` as for :func:`run_one`."""
    run_id = _run_id(experiment, plan, arguments["preset"], arguments["seed"])
    path = Path(arguments["root"]) / run_id
    notes = plan.notes() if plan is not None else None
    where = str(path) if path.exists() else None
    return ExperimentOutcome(experiment.id, run_id, "failed", 0.0, where, error, notes=notes)


def run_one(
    experiment: Experiment,
    plan: DataPlan | None,
    *,
    preset: str,
    root: Path,
    seed: int,
    device: str,
    data_dir: str | os.PathLike[str] | None,
    callbacks: list[Any],
    mirrors: Sequence[str | Mirror],
    progress: ProgressDisplay | None,
    executor: str | Executor,
    workers: int | None,
) -> ExperimentOutcome:
    """Run one experiment of a reproduction (:func:`run_experiment`, never raising: an
    error is a failed outcome) and say what happened to it; in this process, or in the
    Ray task of :mod:`~collapselab.experiments.fanout`."""
    notes = plan.notes() if plan is not None else None
    run_id = _run_id(experiment, plan, preset, seed)
    already = _completed(root / run_id)
    resumed = (root / run_id).exists() and not already
    load_at_start = load_average()
    t0 = time.perf_counter()
    try:
        run = run_experiment(
            experiment.id,
            preset=preset,
            root=root,
            seed=seed,
            device=device,
            data_dir=data_dir,
            callbacks=callbacks,
            raise_on_error=False,
            mirrors=mirrors,
            progress=progress,
            plan=plan,
            executor=executor,
            workers=workers,
        )
    except Exception as error:  # before the run existed: bad preset, conflicting run dir
        return ExperimentOutcome(
            experiment.id,
            run_id,
            "failed",
            time.perf_counter() - t0,
            error=f"{type(error).__name__}: {error.args[0] if error.args else error}",
            notes=notes,
        )
    seconds = time.perf_counter() - t0
    load = [load_at_start, load_average()]
    claims = claim_counts(run)
    if run.status != "completed":
        error = run.manifest.get("error") or f"run ended with status {run.status}"
        return ExperimentOutcome(
            experiment.id, run.id, "failed", seconds, str(run.path), error, claims, notes, load
        )
    outcome: Outcome = "skipped" if already else "completed"
    return ExperimentOutcome(
        experiment.id, run.id, outcome, seconds, str(run.path), None, claims, notes, load, resumed
    )


def load_average() -> float | None:
    """The machine's 1-minute load average, or ``None`` where the platform keeps none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # Windows has no getloadavg
        return None


def machine_facts() -> dict[str, Any]:
    """What a measured time depends on: CPU count, torch's threads, platform, versions, and
    the collapselab code that ran (``collapselab`` its version, ``commit`` its git commit,
    :func:`source_commit`)."""
    import platform

    import torch

    return {
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "processor": platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "collapselab": __version__,
        "commit": source_commit(),
    }


def source_commit(path: Path | None = None) -> str | None:
    """The git commit of the collapselab source that is running (of ``path``, a source
    file; by default this module): the short hash, with
    ``"+changes"`` when tracked files differ from it; ``None`` when the package does not sit
    in a git checkout that tracks it (an installed wheel) or git is not there.

    Read when a reproduction starts, so a measured time names the code that produced it
    without the reader having to know which checkout ran."""
    here = Path(path if path is not None else __file__).resolve()
    git = ["git", "-C", str(here.parent)]
    try:
        # tracked, or this file is an installed copy inside some other repository (a venv
        # in a project's folder), whose commit says nothing about this code
        tracked = subprocess.run([*git, "ls-files", "--error-unmatch", here.name],
                                 capture_output=True, timeout=10)  # fmt: skip
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)  # fmt: skip
        if tracked.returncode != 0 or head.returncode != 0:
            return None
        changed = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+changes" if changed.stdout.strip() else "")


def _completed(path: Path) -> bool:
    try:
        return Run.open(path).status == "completed"
    except (FileNotFoundError, ValueError):
        return False


_RUNTIME = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(s|sec|min|h)\b")
_UNIT_SECONDS = {"s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0}


def runtime_seconds(text: str) -> float | None:
    """Seconds of a runtime written like :attr:`Experiment.runtime_quick` (``"~30 s"``,
    ``"~1.5 min"``, ``"<1 s"``), or ``None`` when it states none."""
    match = _RUNTIME.search(text or "")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)] if match else None


def estimated_seconds(
    experiment: Experiment, preset: str, root: str | os.PathLike[str], seed: int
) -> float | None:
    """How long ``experiment`` will take in a reproduction, from measurements.

    0 when its run under ``root`` already completed (it is skipped); else the most recent
    measured ``total_s`` of a completed run of the same experiment and preset under
    ``root`` (any seed); else the preset's measured runtime
    (:mod:`~collapselab.experiments.runtimes` for the built-in experiments, else
    :meth:`~Experiment.runtime`, both measured on 2 CPU cores); else ``None``.
    """
    root = Path(root)
    if _completed(root / run_id_for(experiment.id, preset, seed)):
        return 0.0
    measured: list[tuple[str, float]] = []
    prefix = run_id_for(experiment.id, preset, 0)[: -len("0")]
    for path in root.glob(f"{prefix}*") if root.is_dir() else []:
        try:
            manifest = Run.open(path).manifest
        except (FileNotFoundError, DamagedRunError, ValueError):
            continue
        total = (manifest.get("durations") or {}).get("total_s")
        finished = (manifest.get("timings") or {}).get("finished") or ""
        if manifest.get("status") == "completed" and isinstance(total, (int, float)):
            measured.append((finished, float(total)))
    if measured:
        return max(measured)[1]
    recorded = measured_runtime(experiment.id, preset)  # a built-in's measured time
    if recorded is not None:
        return recorded.seconds
    return runtime_seconds(experiment.runtime(preset))


def claim_counts(run: Run) -> dict[str, int] | None:
    """The run's claims by verdict (``claims.json``'s summary), or ``None`` without one."""
    try:
        summary = run.read_json("claims").get("summary")
    except (FileNotFoundError, ValueError, AttributeError):
        return None
    return {str(k): int(v) for k, v in summary.items()} if isinstance(summary, dict) else None
