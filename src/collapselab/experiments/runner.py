"""Running a registered experiment into the run store, resumably, with claims and a report.

The sequence of :func:`run_experiment`:

0. plan the data (:func:`~collapselab.experiments.data_plan.plan_data`): locate every
   dataset of the preset without loading it; a missing one makes the preset's fallback run
   instead (``quick`` -> ``quick-bundled``), or, without a fallback, raises
   :class:`~collapselab.experiments.data_plan.MissingDataError` before any run exists;
1. check the arguments (seed, device, mirrors) before anything is written; move every seed
   of the preset into the seed's block (:mod:`~collapselab.experiments.seeding`: at seed
   ``N`` the experiment draws from ``1000 N`` on; seed 0 moves nothing); open the run
   ``<root>/<id>-<preset>-seed<N>`` of the preset that runs (create it the first time) and
   record the data plan in its manifest (``data``). A damaged run
   (:mod:`collapselab.store.integrity`) is moved to ``<root>/.damaged/`` with a warning and
   started again: its results are not trusted;
2. a run that already completed is not run again (its ``claims.json`` and ``report.html``
   are written if missing); a created, failed or interrupted one (or one left running by a
   killed process) is (re)started, and the experiment's training loops resume from their
   last checkpoint;
3. call the experiment's run function, then its ``draw`` function (figures from the stored
   results), and mark the run completed;
4. whatever happened in 3, evaluate the claims (on completed runs only) into
   ``claims.json`` and write ``report.html``.
"""

from __future__ import annotations

import datetime as _dt
import time
import traceback
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from collapselab.checks import check_int
from collapselab.experiments.claims import (
    RunResults,
    claim_entry,
    claims_document,
    evaluate_claims,
    not_evaluable,
)
from collapselab.experiments.data_plan import DataPlan, plan_data
from collapselab.experiments.overrides import apply_overrides, overrides_tag
from collapselab.experiments.preregistration import annotate
from collapselab.experiments.preset import Preset
from collapselab.experiments.progress import NoProgress, ProgressDisplay
from collapselab.experiments.registry import (
    Experiment,
    RunContext,
    find_experiment,
    get_experiment,
)
from collapselab.experiments.seeding import base as seed_base
from collapselab.experiments.seeding import move_seeds
from collapselab.experiments.sweeps.executors import Executor, default_workers, make_executor
from collapselab.report.html import write_run_report
from collapselab.store import (
    CLAIMS_FILE,
    MANIFEST_FILE,
    REPORT_FILE,
    Mirror,
    Run,
    check_mirror_available,
    check_run,
    make_mirror,
    prepare_root,
    run_problem,
    set_aside,
)
from collapselab.train import resolve_device, seed_everything


def run_id_for(
    experiment_id: str, preset: str, seed: int, overrides: Mapping[str, Any] | None = None
) -> str:
    """The deterministic directory name of a run, so re-running finds and resumes it
    (a run with config ``overrides`` ends with their :func:`overrides_tag`)."""
    return f"{experiment_id}-{preset}-seed{seed}{overrides_tag(overrides)}"


def run_experiment(
    experiment_id: str,
    preset: str = "quick",
    root: str | Path = "collapselab-runs",
    seed: int = 0,
    device: str = "cpu",
    data_dir: str | Path | None = None,
    callbacks: Sequence[Any] = (),
    raise_on_error: bool = True,
    *,
    mirrors: Sequence[str | Mirror] = (),
    progress: ProgressDisplay | None = None,
    executor: str | Executor = "local",
    workers: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    plan: DataPlan | None = None,
) -> Run:
    """Run ``experiment_id`` with ``preset`` under ``root`` and return its :class:`Run`.

    A run that already completed is returned untouched (its run function is not called);
    an interrupted or failed one is reopened and resumed from its last checkpoint (the
    training loop drops the metric rows recorded after that checkpoint, so nothing is
    counted twice). ``callbacks`` are handed to the experiment's training loops (a
    progress bar, say).

    After the run (also a failed one) the claims are evaluated into ``claims.json`` and
    ``report.html`` is written. An exception of the run function marks the run failed and
    is re-raised when ``raise_on_error`` (default); otherwise the failed run is returned.

    ``mirrors``: names (:data:`collapselab.store.MIRROR_NAMES`) or
    :class:`~collapselab.store.Mirror` objects that receive every metric row the run
    writes. ``progress``: where solvers and sweeps show their progress. ``executor``,
    ``workers``: where the experiment's sweeps run (:class:`RunContext`; default a local
    process pool, one worker per core); checked before anything is written. ``overrides``:
    config values in place of the preset's (:func:`apply_overrides`; the run's id ends
    with their tag, see :func:`run_id_for`). An experiment that
    trains no network (``uses_device=False``) runs on the CPU: another ``device`` is
    recorded as ``cpu`` with a warning. A second process writing the same run gets a
    :class:`~collapselab.store.RunLockedError` before anything is written.

    The preset that runs is ``preset``, or its fallback when ``preset``'s dataset files are
    not found (the run's ``preset`` and id say which; the manifest's ``data`` says why).
    ``plan``: the data plan a caller already made for this experiment and preset
    (:func:`~collapselab.experiments.reproduce` plans every experiment before the first
    runs); the data is then not planned again.

    Raises:
        MissingDataError: the preset's datasets are not found and it has no fallback
            (raised before any run directory is created, whatever ``raise_on_error``).
    """
    experiment = get_experiment(experiment_id)
    if plan is None or (plan.experiment, plan.requested) != (experiment.id, preset):
        plan = plan_data(experiment, preset, data_dir)
    preset = plan.preset
    config = apply_overrides(
        experiment.config(preset), overrides, f"preset {preset!r} of {experiment.id}"
    )
    seed = check_int("seed", seed, minimum=0)
    config = move_seeds(config, seed)  # every seed the preset names, into seed's block
    device = device_for(experiment, device)
    make_executor(executor, workers)  # a bad executor or worker count fails before the run
    workers = default_workers() if workers is None else workers
    for mirror in mirrors:
        if isinstance(mirror, str):
            check_mirror_available(mirror)
    prepare_root(root)
    run = _open_run(root, experiment, preset, config, seed, overrides)
    if run.status == "completed":
        if not (run.path / CLAIMS_FILE).is_file() or not (run.path / REPORT_FILE).is_file():
            _finalize(run, experiment)
        run.close()
        return run
    run.update_manifest(
        experiment_info=experiment.info(),
        device=device,
        data_dir=None if data_dir is None else str(data_dir),
        data=plan.record(),
        traceback=None,
    )
    for mirror in mirrors:
        run.add_mirror(make_mirror(mirror) if isinstance(mirror, str) else mirror)
    context = RunContext(
        preset=preset,
        config=config,
        seed=seed_base(seed),
        device=device,
        data_dir=Path(data_dir) if data_dir is not None else None,
        callbacks=list(callbacks),
        progress=progress if progress is not None else NoProgress(),
        executor=executor,
        workers=workers,
    )
    started = time.perf_counter()
    try:
        _execute(run, experiment, context)
    except Exception as error:
        run.update_manifest(traceback=_format_traceback(error))
        if raise_on_error:
            raise
    finally:
        run.add_duration("total_s", time.perf_counter() - started)
        _finalize(run, experiment)
        run.close()  # closes the mirrors; lets another process write the run now
    return run


def device_for(experiment: Experiment, device: str) -> str:
    """The device ``experiment`` runs on when asked for ``device``.

    An experiment that trains no network runs on ``"cpu"``; asking it for another device
    gives a warning saying so. Raises ``ValueError`` for a device name torch does not know
    (for every experiment) and, for one that trains, for a device that is absent (CUDA on a
    machine without it).
    """
    if experiment.uses_device or device == "cpu":
        resolve_device(device)
        return device
    if device != "auto":
        try:
            torch.device(device)  # a name torch does not know is a mistake, used or not
        except (RuntimeError, TypeError):
            raise ValueError(
                f"device must be 'cpu', 'cuda', 'cuda:<i>' or 'auto', got {device!r}"
            ) from None
    warnings.warn(
        f"experiment {experiment.id} trains no network and runs on the CPU: "
        f"device {device!r} is not used (recorded as 'cpu')",
        stacklevel=3,
    )
    return "cpu"


def _open_run(
    root: str | Path,
    experiment: Experiment,
    preset: str,
    config: Preset,
    seed: int,
    overrides: Mapping[str, Any] | None = None,
) -> Run:
    """Open (or create) the run; a damaged one is set aside and started again."""
    run_id = run_id_for(experiment.id, preset, seed, overrides)
    path = Path(root) / run_id
    if (path / MANIFEST_FILE).is_file():
        problem = run_problem(path, thorough=True)
        if problem is not None:
            moved = set_aside(path)
            warnings.warn(
                f"run {path} is damaged ({problem}); moved it to {moved} and starting it again",
                stacklevel=3,
            )
    return Run.open_or_create(root, experiment.id, preset, config.to_dict(), seed, run_id=run_id)


def _execute(run: Run, experiment: Experiment, context: RunContext) -> None:
    with run:  # an exception marks the run failed (interrupted on Ctrl-C) and flushes rows
        run.set_status("running")
        # Model initialisation happens before training seeds itself; seeding here makes a
        # run depend on its seed alone, not on what the process did before.
        seed_everything(context.seed)
        experiment.run(run, context)
        run.flush()
        if run.status in ("running", "completed") and experiment.draw is not None:
            t0 = time.perf_counter()
            experiment.draw(run)
            run.add_duration("draw_s", time.perf_counter() - t0)
        if run.status == "running":
            run.set_status("completed")  # records the checksums of the run's files
        elif run.status == "completed":
            run.record_checksums()  # completed by its training loop: take what came after


def _format_traceback(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


def _finalize(run: Run, experiment: Experiment, notes: Sequence[str] = ()) -> None:
    # Runs after a failure too: never let a reporting problem hide the run's own error.
    try:
        write_claims(run, experiment)
    except Exception as error:
        warnings.warn(f"could not write the claims of run {run.id}: {error}", stacklevel=3)
    try:
        write_run_report(run, notes=notes)
    except Exception as error:
        warnings.warn(f"could not write the report of run {run.id}: {error}", stacklevel=3)


def evaluate_run_claims(run: Run, experiment: Experiment) -> dict[str, Any]:
    """The ``claims.json`` document of ``run``, evaluated now from its stored results.

    Claims are evaluated on completed runs only; for any other status every claim is
    "not evaluable", with the status and error as the reason.
    """
    if run.status == "completed":
        document = evaluate_claims(experiment.claims, RunResults.from_run(run))
    else:
        # The run's error is stated once (the report's error section, the manifest), not in
        # every claim.
        reason = f"not evaluated: the run is {run.status}"
        if run.manifest.get("error"):
            reason += " (its error is shown once, at the top of the report)"
        reason += "; claims are evaluated on completed runs only"
        entries = [claim_entry(c, not_evaluable(reason)) for c in experiment.claims]
        document = claims_document(entries)
    # Each claim's tier at this preset, its registered reading and history (issue 35).
    document = annotate(document, experiment.id, experiment.paper, run.preset)
    header = {
        "run_id": run.id,
        "experiment": run.experiment,
        "preset": run.preset,
        "status": run.status,
        "evaluated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    return {**header, **document}


def write_claims(run: Run, experiment: Experiment) -> Path:
    """Evaluate the claims of ``experiment`` on ``run`` and write ``claims.json``."""
    return run.write_json(CLAIMS_FILE, evaluate_run_claims(run, experiment))


def refresh_run(run: Run | str | Path, redraw: bool = True, reevaluate: bool = True) -> Path:
    """Rebuild a finished run's figures, claims and report from its stored results.

    Nothing is trained. ``redraw``: call the experiment's ``draw`` function again (completed
    runs of experiments that have one). ``reevaluate``: evaluate the claims again (when the
    experiment is registered; otherwise the stored ``claims.json`` is kept). Problems are
    noted in the report instead of raised; a damaged run raises
    :class:`~collapselab.store.DamagedRunError`. Returns the path of ``report.html``.
    """
    if not isinstance(run, Run):
        check_run(run, thorough=True)  # a damaged run is named, not half-redrawn
        run = Run.open(run)
    else:
        check_run(run.path, thorough=True)
    experiment = find_experiment(run.experiment)
    notes: list[str] = []
    if experiment is None:
        notes.append(
            f"experiment {run.experiment!r} is not registered here: figures were not redrawn "
            "and the stored claims were kept"
        )
    else:
        # Titles and captions follow the registered experiment, like the figures and claims.
        run.update_manifest(experiment_info=experiment.info())
        if redraw and experiment.draw is not None and run.status == "completed":
            try:
                experiment.draw(run)
            except Exception as error:
                notes.append(f"redrawing the figures failed: {type(error).__name__}: {error}")
            else:  # checked thoroughly above: what the drawing rewrote (a table) is sound
                run.record_checksums()
        if reevaluate:
            write_claims(run, experiment)
    return write_run_report(run, notes=notes)
