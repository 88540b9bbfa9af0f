"""The ``collapselab`` command line (Typer + Rich).

A user's mistake (an unknown experiment, bad SQL, a root that is not a directory, a damaged
run, a run another process is writing) is reported in one line on standard error, saying
what failed, which file or argument, and what to do, with exit code 2; never a traceback.
Warnings (a damaged run skipped, a device not used) are one line each too. SIGTERM is
handled like Ctrl-C: the run being written is marked ``interrupted`` and keeps its
checkpoint, so running the same command again resumes it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import signal
import typing
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

app = typer.Typer(
    name="collapselab",
    help=(
        "Measure, simulate and reproduce the low-dimensional geometry of deep-learning "
        "training: neural collapse, progressive collapse, feature diversity, PC-bias."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
console = Console()
err_console = Console(stderr=True)

DEFAULT_ROOT = Path(os.environ.get("COLLAPSELAB_ROOT", "collapselab-runs"))

RootOption = Annotated[
    Path,
    typer.Option("--root", "--out", help="Directory holding the runs (env COLLAPSELAB_ROOT)."),
]
PathRootOption = Annotated[
    Path | None,
    typer.Option(
        "--root", "--out", help="The runs' folder, as `runs` and `query` take it (or give PATH)."
    ),
]
PresetOption = Annotated[
    str,
    typer.Option(
        help="Preset: quick (CPU minutes), standard (real images, about an hour per paper on "
        "2 CPU cores) or paper (the paper's scale, for a GPU)."
    ),
]
DataDirOption = Annotated[
    Path | None,
    typer.Option(
        help="Directory with local dataset files, searched before $COLLAPSELAB_DATA_DIR "
        "and the folders of Debian's dataset packages (docs/data.md)."
    ),
]
DeviceOption = Annotated[
    str, typer.Option(help="cpu, cuda, cuda:<i> or auto (experiments that train).")
]
SeedOption = Annotated[
    int,
    typer.Option(
        min=0,
        help="Run seed (>= 0): every seed of the preset (members, data order, init) moves "
        "into the block 1000 x SEED (0: the presets as written); the run is named -seedSEED.",
    ),
]
ProgressOption = Annotated[bool, typer.Option(help="Show progress bars.")]
MirrorOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mirror",
        # "\\[" keeps Rich from reading "[tracking]" as a markup tag and dropping it; the
        # install command stands alone at the end, so an 80-column help does not cut it
        help="Also send every metric to tensorboard, mlflow or wandb (repeatable). Needs "
        "the tracking extra: pip install 'collapselab\\[tracking]'",
    ),
]
ExecutorOption = Annotated[
    str,
    typer.Option(
        help="Where sweeps run: local (a process pool), serial (one after another) or ray; "
        "all give the same results. Ray needs: pip install 'collapselab\\[ray]'"
    ),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        help="Processes of the local pool, or CPUs of the local Ray instance (default: one "
        "per core; with --address: the cluster's CPUs)."
    ),
]
AddressOption = Annotated[
    str | None,
    typer.Option(
        help="With --executor ray: the Ray cluster to run on (host:port of its head node, "
        "ray://host:port, or auto); default: a local Ray instance. docs/sweeps.md"
    ),
]


@dataclass(frozen=True)
class RunOptions:
    """The options of a command that runs experiments (`run`, `reproduce`; `demo` sets
    some): the preset, where data and runs are, the device and seed, progress, mirrors,
    and how sweeps run. Each field's type carries its Typer option (:func:`_run_command`)."""

    preset: PresetOption = "quick"
    data_dir: DataDirOption = None
    device: DeviceOption = "cpu"
    seed: SeedOption = 0
    out: RootOption = DEFAULT_ROOT
    progress: ProgressOption = True
    mirror: MirrorOption = None
    executor: ExecutorOption = "local"
    workers: WorkersOption = None
    address: AddressOption = None

    @property
    def mirrors(self) -> list[str]:
        return list(self.mirror or [])

    def run_arguments(self) -> dict[str, Any]:
        """The keyword arguments :func:`~collapselab.experiments.run_experiment` and
        :func:`~collapselab.experiments.reproduce` take from these options."""
        return {
            "preset": self.preset,
            "root": self.out,
            "seed": self.seed,
            "device": self.device,
            "data_dir": self.data_dir,
            "mirrors": self.mirrors,
            "executor": self.executor,
            "workers": self.workers,
        }


def _run_command(command: Callable[..., None]) -> Callable[..., None]:
    """``command(<arguments>, options: RunOptions, <own options>)`` as a Typer command that
    takes :class:`RunOptions`' fields as options, after its arguments and before its own
    options (Typer has no option groups: the signature it reads is rewritten here)."""
    own = inspect.signature(command, eval_str=True)
    hints = typing.get_type_hints(RunOptions, include_extras=True)
    shared = [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name]
        )
        for f in dataclasses.fields(RunOptions)
    ]
    params = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for name, p in own.parameters.items()
        if name != "options"
    ]
    arguments = [p for p in params if p.default is p.empty]
    own_options = [p for p in params if p.default is not p.empty]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> None:
        options = RunOptions(**{f.name: kwargs.pop(f.name) for f in dataclasses.fields(RunOptions)})
        command(**kwargs, options=options)

    wrapper.__signature__ = own.replace(parameters=[*arguments, *shared, *own_options])  # type: ignore[attr-defined]
    return wrapper


# Errors a user can cause (arguments, files, SQL, other processes): one line, exit code 2.
_USAGE_EXIT = 2


def _e(value: object) -> str:
    # Dynamic text (errors, paths, titles) must not be read as Rich markup.
    return escape(str(value))


def _fail(message: object, code: int = _USAGE_EXIT) -> NoReturn:
    err_console.print(f"[red]error:[/red] {_e(message)}", soft_wrap=True)
    raise typer.Exit(code=code)


def _starting(what: str) -> None:
    """Say at once, on a terminal, what starts: loading torch and the experiments takes
    seconds (up to ten on a busy machine), and a blank screen looks like a hang. (A log file
    gets the command's own first line a moment later.)"""
    if console.is_terminal:
        console.print(f"[dim]{_e(what)}: loading collapselab\u2026[/dim]")


def _finished(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run that already completed (a rerun only reports it)."""
    from collapselab.store import MANIFEST_FILE, read_manifest

    try:
        return (run_dir / MANIFEST_FILE).is_file() and read_manifest(run_dir)["status"] == (
            "completed"
        )
    except (OSError, ValueError):
        return False


def _user_errors() -> tuple[type[BaseException], ...]:
    from collapselab.store import DamagedRunError, QueryError, RunLockedError

    return (
        DamagedRunError,
        QueryError,
        RunLockedError,
        FileNotFoundError,
        NotADirectoryError,
        KeyError,
        ValueError,
        ImportError,
        ConnectionError,
    )


def _message(error: BaseException) -> str:
    # KeyError's str() adds quotes around its message.
    return str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)


def _path_or_root(path: Path, root: Path | None) -> Path:
    # `report` and `verify` take the folder as PATH; `--root` too, as every other command
    # that reads runs does, so that a user's `--root X` carries over between commands.
    if root is None:
        return path
    if path != DEFAULT_ROOT and path != root:
        _fail(f"give the folder once: PATH ({path}) or --root ({root}), not both")
    return root


def _root_message(error: BaseException, root: Path) -> str:
    if isinstance(error, (FileNotFoundError, NotADirectoryError)):
        return f"{error}; give the directory holding the runs with --root (now {root})"
    return _message(error)


@app.command()
def demo(
    out: RootOption = DEFAULT_ROOT,
    seed: SeedOption = 0,
    progress: ProgressOption = True,
    mirror: MirrorOption = None,
) -> None:
    """Train a small MLP on scikit-learn's digits and watch its layers collapse (about 9 s
    on 2 quiet CPU cores; `collapselab list` gives the measurement)."""
    _run_and_report("demo", RunOptions(out=out, seed=seed, progress=progress, mirror=mirror))


@app.command("list")
def list_experiments(
    metrics: Annotated[
        bool, typer.Option("--metrics", help="List the metric catalogue (families and keys).")
    ] = False,
) -> None:
    """List the registered experiments by paper: figure, quick runtime, claims, presets."""
    if metrics:
        _list_metrics()
        return
    from rich.padding import Padding
    from rich.text import Text

    from collapselab.experiments import all_experiments, find_paper
    from collapselab.experiments.papers import paper_label
    from collapselab.experiments.preregistration import tier_summary
    from collapselab.experiments.runtimes import quick_campaigns

    # A block per experiment rather than a table: ids and runtimes stay on one line (easy
    # to copy) and the title wraps under them at any width, 80 columns included.
    paper = None
    for experiment in all_experiments():
        if experiment.paper != paper:
            paper = experiment.paper
            found = find_paper(paper)
            heading = paper_label(paper) + (f": {found.title}" if found is not None else "")
            console.print(Text(heading, style="bold"))
        claims = f"{len(experiment.claims)} claim" + ("" if len(experiment.claims) == 1 else "s")
        errata = sum(claim.kind == "erratum" for claim in experiment.claims)
        console.print(
            Text.assemble(
                "  ",
                (f"{experiment.id:<20}", "cyan"),
                f" {experiment.runtime_quick:>9}  {claims:>9}",
            ),
            no_wrap=True,
            overflow="ellipsis",
        )
        shown = (
            f"{experiment.figure}: {experiment.title}" if experiment.figure else experiment.title
        )
        presets = ", ".join(_preset_text(experiment, p) for p in experiment.presets)
        shown += f" [presets: {presets}]"
        if errata:
            shown += (
                " [1 claim demonstrates an erratum]"
                if errata == 1
                else f" [{errata} claims demonstrate errata]"
            )
        tiers = tier_summary(experiment, "quick")
        if tiers:
            shown += f" [tiers at quick: {tiers}]"
        console.print(Padding(Text(shown, style="dim"), (0, 0, 0, 6)))
    measured_by = "; ".join(c.describe() for c in quick_campaigns())
    console.print(
        Text(
            "Runtimes: measured wall times of the quick preset (beside the id) and of the "
            "other presets (beside their names, with the cores and the 1-minute load "
            f"average they ran under); the quick ones by {measured_by}."
        )
    )
    console.print(
        Text(
            "Tiers (collapselab.experiments.preregistration): paper; paper, substituted (other "
            "data or architecture than the paper's); beyond (the project's own checks); "
            "erratum and ambiguity apart from every fraction. A claim with a premise (what it "
            "presumes of the run) is not evaluable on a run that does not meet it; reports "
            "and the index count those per tier."
        )
    )


def _preset_text(experiment: Any, preset: str) -> str:
    # The quick runtime is shown beside the id; the others beside their preset.
    runtime = experiment.runtime(preset) if preset != "quick" else ""
    return f"{preset} {runtime}" if runtime else preset


def _list_metrics() -> None:
    """The metric catalogue: every family's keys, where each applies and what it needs."""
    from collapselab.families import catalogue

    table = Table()
    table.add_column("key", no_wrap=True)
    table.add_column("where · needs", ratio=1, min_width=24)
    family = None
    for name, key in catalogue():
        if name != family:
            if family is not None:
                table.add_section()
            table.add_row(f"[bold]{_e(name)}[/bold]", "")
            family = name
        where = key.where if key.splits != ("train",) else f"{key.where}, train only"
        table.add_row(_e(key.name), _e(f"{where} · {key.needs.describe()}"))
    console.print(table)


@app.command()
@_run_command
def run(
    experiment_id: Annotated[str, typer.Argument(help="Experiment id (see `collapselab list`).")],
    options: RunOptions,
) -> None:
    """Run one experiment with a preset and write it to the run store."""
    _check_sweep_options(options.executor, options.workers, options.address)
    _run_and_report(experiment_id, options)


@app.command()
def runs(root: RootOption = DEFAULT_ROOT) -> None:
    """List the runs under a root directory (damaged runs are named, with their problem)."""
    from collapselab.store import list_runs

    try:
        frame = list_runs(root)
    except (FileNotFoundError, NotADirectoryError) as error:
        _fail(_root_message(error, root))
    if frame.empty:
        console.print(f"no runs under {_e(root)}")
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("run", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("finished (UTC)", no_wrap=True)
    for row in frame.itertuples(index=False):
        colour = _STATUS_COLOURS.get(str(row.status), "white")
        table.add_row(
            _e(row.run_id), f"[{colour}]{_e(row.status)}[/{colour}]", _e(_minute(row.finished))
        )
    console.print(f"{len(frame)} run(s) under {_e(root)}")
    console.print(table)
    for row in frame.itertuples(index=False):
        if isinstance(row.error, str) and row.error:
            console.print(f"{_e(row.run_id)} ({_e(row.status)}): {_e(row.error)}", soft_wrap=False)


_STATUS_COLOURS = {
    "completed": "green",
    "failed": "red",
    "damaged": "red",
    "interrupted": "yellow",
    "running": "cyan",
    "stale": "yellow",
}


def _minute(timestamp: Any) -> str:
    """``2026-11-24T14:38:30.936+00:00`` as ``2026-11-24 14:38``."""
    if not isinstance(timestamp, str) or len(timestamp) < 16:
        return "\u2014"
    return timestamp[:16].replace("T", " ")


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="DuckDB SQL over the views `metrics` and `runs`.")],
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
) -> None:
    """Run read-only SQL over the metrics of every run under a root (views: metrics, runs)."""
    from collapselab.store import QueryError
    from collapselab.store import query as run_query

    if output not in ("table", "csv", "json"):
        _fail(f"--format must be table, csv or json, got {output!r}")
    try:
        frame = run_query(root, sql)
    except (FileNotFoundError, NotADirectoryError, QueryError) as error:
        _fail(_root_message(error, root))
    if output == "csv":
        typer.echo(frame.to_csv(index=False), nl=False)
    elif output == "json":
        typer.echo(frame.to_json(orient="records"))
    else:
        table = Table(*[str(c) for c in frame.columns], box=box.SIMPLE_HEAD, pad_edge=False)
        for row in frame.itertuples(index=False):
            table.add_row(*[_format_cell(v) for v in row])
        console.print(table)


def _format_cell(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else _e(value)


def _check_sweep_options(executor: str, workers: int | None, address: str | None = None) -> None:
    """Check --executor, --workers and --address (Ray installed when asked for, something
    listening at the address) before running."""
    from collapselab.experiments.sweeps import make_executor

    if workers is not None and workers < 1:
        _fail(f"--workers {workers}: expected at least 1 (or leave it out: one per core)")
    try:
        make_executor(executor, workers)
    except (ValueError, ImportError) as error:
        _fail(f"--executor {executor}: {error}")
    if address is None:
        return
    if executor != "ray":
        _fail(f"--address {address}: a Ray cluster's address needs --executor ray")
    from collapselab.experiments.sweeps.ray_executor import check_address

    try:
        check_address(address)
    except ConnectionError as error:
        _fail(f"--address {address}: {error}")


@contextmanager
def _on_cluster(address: str | None) -> Iterator[None]:
    """Joined to the Ray cluster at ``address`` for the block (nothing without one): the
    Ray executor's sweeps then run there. A cluster that cannot be joined is one line."""
    if address is None:
        yield
        return
    from collapselab.experiments.sweeps.ray_executor import ray_session

    with ExitStack() as stack:
        try:
            stack.enter_context(ray_session(address))
        except (ImportError, ConnectionError) as error:
            _fail(f"--address {address}: {error}")
        yield


def _check_run_options(device: str, mirrors: list[str], experiments: list[Any]) -> None:
    """Check --device (when one of ``experiments`` trains) and --mirror before running."""
    from collapselab.store import check_mirror_available
    from collapselab.train import resolve_device

    try:
        if any(e.uses_device for e in experiments):
            resolve_device(device)
    except ValueError as error:
        _fail(f"--device {device}: {error}")
    for name in mirrors:
        try:
            check_mirror_available(name)
        except (ValueError, ImportError) as error:
            _fail(f"--mirror {name}: {error}")


def _run_and_report(experiment_id: str, options: RunOptions) -> None:
    _starting(f"run {experiment_id}")
    from collapselab.cli.progress import ProgressBoard
    from collapselab.experiments import (
        MissingDataError,
        get_experiment,
        plan_data,
        run_experiment,
        run_id_for,
    )

    try:
        experiment = get_experiment(experiment_id)
        plan = plan_data(
            experiment, options.preset, options.data_dir
        )  # once: the run is the plan's preset
    except MissingDataError as error:  # no run exists: say what is missing, in one line
        _fail(error.one_line())
    except _user_errors() as error:
        _fail(_message(error))
    _check_run_options(options.device, options.mirrors, [experiment])
    root = options.out
    run_id = run_id_for(experiment_id, plan.preset, options.seed)
    if _finished(root / run_id):
        console.print(
            f"run {_e(run_id)} had already completed: nothing was run; its results are shown "
            f"below (delete {_e(root / run_id)}, or give another --out, to run it again)"
        )
    board = ProgressBoard(console, enabled=options.progress)
    with _interruptible(f"run {run_id}"), _on_cluster(options.address), board:
        try:
            result = run_experiment(
                experiment_id,
                callbacks=[board.training(experiment_id)],
                raise_on_error=False,
                progress=board,
                plan=plan,
                **options.run_arguments(),
            )
        except _user_errors() as error:
            _fail(_message(error))
    status = result.manifest.get("status")
    colour = "green" if status == "completed" else "red"
    console.print(
        f"run [bold]{_e(result.id)}[/bold]: [{colour}]{status}[/{colour}] -> {_e(result.path)}"
    )
    if status != "completed":
        console.print(f"[red]error:[/red] {_e(result.manifest.get('error'))}")
    _print_data(result.manifest.get("data"))
    if status == "completed":
        _print_claims(result.path)
    else:  # said once, not once per claim
        console.print(f"claims: not evaluated (the run is {status})")
    report = result.path / "report.html"
    if report.is_file():
        console.print(f"report: {_e(report)}")
    if status != "completed":
        raise typer.Exit(code=1)


def _print_data(data: object) -> None:
    if not isinstance(data, dict):
        return
    console.print(f"data: {_e(data.get('summary'))}")
    for note in data.get("notes") or []:
        console.print(f"[yellow]note:[/yellow] {_e(note)}")


_VERDICT_COLOURS = {
    "holds": "green",
    "does not hold": "red",
    "inconclusive": "magenta",
    "not evaluable": "yellow",
}


def _print_claims(run_path: Path) -> None:
    """The run's claims: name and tier, verdict with its interval over the members where
    one decided it, and the detail (with the premise check where the claim has one)."""
    from collapselab.report.html import read_claims
    from collapselab.report.verdicts import interval_text, premise_text

    document, problem = read_claims(run_path)
    if problem:
        console.print(f"[yellow]{_e(problem)}[/yellow]")
    if not document or not document["claims"]:
        return
    table = Table("claim", "verdict", "detail", box=box.SIMPLE_HEAD, pad_edge=False)
    for entry in document["claims"]:
        verdict = str(entry.get("verdict"))
        colour = _VERDICT_COLOURS.get(verdict, "white")
        shown = f"[{colour}]{_e(verdict)}[/{colour}]"
        if entry.get("kind") == "erratum":  # an erratum demonstration, in its own words
            shown = f"[cyan]{_e((entry.get('erratum') or {}).get('wording', verdict))}[/cyan]"
        if entry.get("interval"):
            shown += f"\n[dim]{_e(interval_text(entry['interval']))}[/dim]"
        name = _e(entry.get("name"))
        if entry.get("tier"):
            name += f"\n[dim]{_e(entry['tier'])}[/dim]"
        detail = _e(entry.get("detail", ""))
        if entry.get("premise") and (entry["premise"].get("met") or verdict != "not evaluable"):
            detail += f"\n[dim]{_e(premise_text(entry['premise']))}[/dim]"
        table.add_row(name, shown, detail)
    console.print(table)


@app.command()
@_run_command
def reproduce(
    paper: Annotated[str, typer.Argument(help="Paper number (003), short name (mse-nc) or 'all'.")],
    options: RunOptions,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Build the data pipelines, models and schedules from the local files and "
            "stop: nothing is trained or written.",
        ),
    ] = False,
) -> None:
    """Run every experiment of a paper (or all papers), skipping finished runs; write the index.

    A failing experiment does not stop the others; the exit code is 1 if any failed. An
    experiment whose dataset files are missing is reported once, and its paper's other
    experiments are not run. The demo is not part of 'all' (run it with `collapselab demo`).
    With --executor ray the experiments are Ray tasks, side by side, on a local Ray
    instance or the cluster at --address (docs/sweeps.md).
    """
    import time

    _starting(f"reproduce {paper} (preset {options.preset})")
    from collapselab.cli.progress import ProgressBoard, ReproduceClock
    from collapselab.experiments import (
        Experiment,
        ExperimentOutcome,
        estimated_seconds,
        select_experiments,
    )
    from collapselab.experiments import reproduce as run_reproduce

    if dry_run:
        _dry_run(paper, options.preset, options.data_dir, options.seed)
        return
    _check_sweep_options(options.executor, options.workers, options.address)
    fanned = options.executor == "ray"
    try:
        chosen = select_experiments(paper)
    except ValueError as error:
        _fail(error)
    # On Ray the experiments train on the cluster's devices: checked there, not here.
    _check_run_options(options.device, options.mirrors, [] if fanned else chosen)
    clock = ReproduceClock(
        [estimated_seconds(e, options.preset, options.out, options.seed) for e in chosen]
    )
    position = {e.id: i for i, e in enumerate(chosen, start=1)}
    board = ProgressBoard(console, enabled=options.progress)

    ended: list[str] = []

    def remaining() -> tuple[float, bool] | None:
        # Side by side on Ray, one experiment's time says little about the rest.
        return None if fanned else clock.remaining(time.perf_counter())

    def started(experiment: Experiment) -> None:
        where = " (submitted to Ray)" if fanned else ""
        if not fanned:
            clock.start(position[experiment.id] - 1, time.perf_counter())
            step(position[experiment.id])
        board.note(
            f"[{position[experiment.id]}/{len(chosen)}] {experiment.id} ({experiment.title})"
            + where
        )

    def finished(outcome: ExperimentOutcome) -> None:
        ran = outcome.outcome == "completed" and not outcome.resumed
        ended.append(outcome.experiment)
        if fanned:
            step(len(ended) + 1 if len(ended) < len(chosen) else len(chosen))
        else:
            clock.finish(position[outcome.experiment] - 1, outcome.seconds, ran)
        colour = {"completed": "green", "skipped": "cyan", "not run": "yellow"}.get(
            outcome.outcome, "red"
        )
        who = f"{outcome.experiment}: " if fanned else ""  # they end in any order
        text = f"  {_e(who)}[{colour}]{outcome.outcome}[/{colour}] in {outcome.seconds:.1f} s"
        if outcome.claims:
            counts = outcome.claims
            text += (
                f"; claims: {counts.get('holds', 0)} hold, {counts.get('does not hold', 0)} "
                f"do not hold, {counts.get('not evaluable', 0)} not evaluable"
            )
            if counts.get("inconclusive"):
                text += f", {counts['inconclusive']} inconclusive"
        if outcome.error:
            text += f"\n  [red]error:[/red] {_e(outcome.error)}"
        for note in outcome.notes or []:
            if not note.startswith("--data-dir"):  # said once, at the end
                text += f"\n  [yellow]note:[/yellow] {_e(note)}"
        console.print(text)

    with _interruptible(f"reproduce {paper}"), board:
        with board.overall(f"reproduce {paper}", len(chosen), remaining) as step:
            try:
                result = run_reproduce(
                    paper,
                    callbacks=lambda e: [board.training(e.id)],
                    on_start=started,
                    on_done=finished,
                    progress=board,
                    address=options.address,
                    **options.run_arguments(),
                )
            except _user_errors() as error:
                _fail(_message(error))
    counts = {k: sum(o.outcome == k for o in result.outcomes) for k in ("completed", "skipped")}
    console.print(
        f"{len(result.outcomes)} experiment(s): {counts['completed']} ran, "
        f"{counts['skipped']} already done, {len(result.failed)} failed, "
        f"{len(result.not_run)} not run ({result.wall_s:.1f} s)"
    )
    if result.data_dir_unused:
        console.print(
            f"[yellow]note:[/yellow] --data-dir {_e(options.data_dir)} is not used: no "
            f"experiment of {_e(paper)} at preset {_e(options.preset)} reads dataset files"
        )
    console.print(f"index: {_e(result.index_html)}")
    if not result.ok:
        failed = ", ".join(o.experiment for o in (*result.failed, *result.not_run))
        console.print(f"[red]failed or not run:[/red] {_e(failed)}")
        raise typer.Exit(code=1)


def _dry_run(paper: str, preset: str, data_dir: Path | None, seed: int) -> None:
    """``reproduce --dry-run``: plan and build every experiment of ``paper``; train nothing."""
    from collapselab.experiments import dry_run_experiment, select_experiments
    from collapselab.experiments.gpu_hours import hours_line

    try:
        chosen = select_experiments(paper)
    except ValueError as error:
        _fail(error)
    failed = 0
    for experiment in chosen:
        if preset not in experiment.presets:
            console.print(f"[bold]{_e(experiment.id)}[/bold]: no preset {_e(preset)}")
            continue
        result = dry_run_experiment(experiment, preset, data_dir, seed)
        console.print(f"[bold]{_e(experiment.id)}[/bold] (preset {_e(result.preset)})")
        if result.error:
            failed += 1
            console.print(f"  [red]error:[/red] {_e(result.error)}")
            continue
        console.print(f"  data: {_e(result.data)}")
        for note in result.notes or []:
            if not note.startswith("--data-dir"):  # most experiments read no files
                console.print(f"  [yellow]note:[/yellow] {_e(note)}")
        for line in _built_lines(result.built):
            console.print(f"  {_e(line)}")
        console.print(f"  {_e(hours_line(result.built))}")
    verdict = "[green]ok[/green]" if not failed else f"[red]{failed} failed[/red]"
    console.print(f"dry run of {len(chosen)} experiment(s): {verdict}; nothing was trained")
    if failed:
        raise typer.Exit(code=1)


def _built_lines(built: dict | None) -> list[str]:
    """A few lines summarising an experiment's dry-run summary (see Experiment.dry_run)."""
    if built is None:
        return ["built: nothing to build from files (simulations generate their instances)"]
    if "arms" in built:  # paper 003's training configuration
        lines = [
            f"dataset {name}: {d['n_train']} train / {d['n_test']} test, input "
            f"{'x'.join(map(str, d['input_shape']))}"
            for name, d in built["datasets"].items()
        ]
        for key, arm in built["arms"].items():
            lines.append(
                f"arm {key}: {arm['n_parameters']:,} parameters, features {arm['feature_dim']}, "
                f"{arm['epochs']} epochs, lr {arm['lr']}, milestones {arm['milestones']}, "
                f"{arm['n_measurements']} measurements"
            )
        if built.get("lr_grid"):
            grid = built["lr_grid"]
            lines.append(f"lr sweep: {len(grid)} rates from {grid[0]:.3g} to {grid[-1]:.3g}")
        return lines
    if _TRAINING_SUMMARY <= built.keys():  # paper 001's training configuration
        return [
            f"dataset {built['dataset']}: {built['n_train']} train / {built['n_test']} test, "
            f"input {'x'.join(map(str, built['input_shape']))}",
            f"model {built['model']}: {built['n_parameters']:,} parameters; measured layers "
            f"{len(built['layers'])} of dimension {built['feature_dim']}",
            f"{built['epochs']} epochs, lr {built['lr']}, milestones {built['milestones']}, "
            f"{len(built['measure_epochs'])} measured epochs",
        ]
    # any other experiment's summary: one "key: value" line per entry (its GPU work is
    # summed into the estimate's line instead)
    return [
        f"{key.replace('_', ' ')}: {value}" for key, value in built.items() if key != "gpu_work"
    ]


_TRAINING_SUMMARY = {
    "dataset", "n_train", "n_test", "input_shape", "model", "n_parameters", "layers",
    "feature_dim", "epochs", "lr", "milestones", "measure_epochs",
}  # fmt: skip


@app.command()
def sweep(
    experiment_id: Annotated[str, typer.Argument(help="Experiment id (see `collapselab list`).")],
    preset: PresetOption = "quick",
    seeds: Annotated[
        str, typer.Option(help="Seeds: 0-3, 0,2,5 or 0-2,7 (one run per seed).")
    ] = "0",
    set_values: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="key=value1,value2: config values of the preset to sweep (repeatable: "
            "every combination runs; values read as JSON, else as text).",
        ),
    ] = None,
    executor: ExecutorOption = "local",
    workers: WorkersOption = None,
    address: AddressOption = None,
    data_dir: DataDirOption = None,
    device: DeviceOption = "cpu",
    out: RootOption = DEFAULT_ROOT,
    progress: ProgressOption = True,
) -> None:
    """Run one experiment over a grid of seeds and config values, each member a run in the
    store (rerunning the same command resumes the sweep); a summary table at the end."""
    _starting(f"sweep {experiment_id}")
    from collapselab.cli.progress import ProgressBoard
    from collapselab.experiments import MissingDataError
    from collapselab.experiments.sweeps import SweepError
    from collapselab.experiments.sweeps.grid import grid_configs, parse_seeds, parse_set, run_grid

    _check_sweep_options(executor, workers, address)
    try:
        seed_list = parse_seeds(seeds)
        sets = [parse_set(text) for text in set_values or []]
        configs = grid_configs(
            experiment_id, preset, seed_list, sets, root=out, device=device, data_dir=data_dir
        )
    except MissingDataError as error:
        _fail(error.one_line())
    except _user_errors() as error:
        _fail(_message(error))
    _check_run_options(device, [], [])
    board = ProgressBoard(console, enabled=progress)
    console.print(
        f"sweep {_e(experiment_id)} ({_e(preset)}): {len(configs)} run(s) on "
        f"{_e(executor)}" + (f" with {workers} workers" if workers else "")
    )
    failed: list[int] = []
    with _interruptible(f"sweep {experiment_id}"), _on_cluster(address), board:
        try:
            result = run_grid(configs, executor=executor, workers=workers, progress=board)
        except SweepError as error:
            result, failed = error.result, sorted(error.failures)
            err_console.print(f"[red]error:[/red] {_e(error)}", soft_wrap=True)
    _print_sweep_table(configs, result.results)
    statuses = [r["status"] if r else "lost" for r in result.results]
    console.print(
        f"{len(configs)} run(s): {statuses.count('completed')} completed, "
        f"{len(configs) - statuses.count('completed')} not ({result.wall_s:.1f} s)"
    )
    if failed or any(s != "completed" for s in statuses):
        raise typer.Exit(code=1)


def _print_sweep_table(configs: list[dict], results: list[Any]) -> None:
    table = Table("run", "status", "claims", "time", box=box.SIMPLE_HEAD, pad_edge=False)
    for config, member in zip(configs, results, strict=True):
        if member is None:
            table.add_row(
                _e(f"seed {config['seed']} {config['overrides']}"), "[red]lost[/red]", "", ""
            )
            continue
        colour = _STATUS_COLOURS.get(member["status"], "white")
        claims = f"{member['claims_hold']}/{member['claims']} hold" if member["claims"] else ""
        table.add_row(
            _e(member["run_id"]),
            f"[{colour}]{_e(member['status'])}[/{colour}]",
            claims,
            f"{member['seconds']:.1f} s",
        )
    console.print(table)
    for member in results:
        if member and member["error"]:
            console.print(f"{_e(member['run_id'])}: [red]{_e(member['error'])}[/red]")


@app.command()
def report(
    path: Annotated[
        Path, typer.Argument(help="A run directory, or a root holding runs.")
    ] = DEFAULT_ROOT,
    redraw: Annotated[bool, typer.Option(help="Redraw figures from the stored results.")] = True,
    claims: Annotated[
        bool, typer.Option(help="Re-evaluate the claims from the stored results.")
    ] = True,
    root: PathRootOption = None,
) -> None:
    """Rebuild report.html of a run (or of every run under a root, and the index); no training."""
    from collapselab.experiments import refresh_run
    from collapselab.report.index import write_index
    from collapselab.store import DAMAGED, MANIFEST_FILE, list_runs

    path = _path_or_root(path, root)
    if not path.exists():
        _fail(f"{path} does not exist; give a run directory or a root holding runs")
    if (path / MANIFEST_FILE).is_file():
        try:
            written = refresh_run(path, redraw=redraw, reevaluate=claims)
        except _user_errors() as error:
            _fail(_message(error))
        console.print(f"report: {_e(written)}")
        return
    try:
        frame = list_runs(path)
    except NotADirectoryError as error:
        _fail(_root_message(error, path))
    if frame.empty:
        _fail(f"no runs under {path}; give a run directory or a root holding runs")
    problems = 0
    for run_path, status, error_text in zip(
        frame["path"], frame["status"], frame["error"], strict=True
    ):
        if status == DAMAGED:
            problems += 1
            err_console.print(f"[red]skipped:[/red] damaged run {_e(run_path)}: {_e(error_text)}")
            continue
        try:
            written = refresh_run(run_path, redraw=redraw, reevaluate=claims)
        except Exception as error:  # one damaged run must not stop the others
            problems += 1
            err_console.print(f"[red]error:[/red] {_e(run_path)}: {_e(_message(error))}")
            continue
        console.print(f"report: {_e(written)}")
    index_html, _ = write_index(path)
    console.print(f"index: {_e(index_html)}")
    if problems:
        raise typer.Exit(code=1)


@app.command()
def verify(
    path: Annotated[
        Path, typer.Argument(help="A run directory, or a root holding runs.")
    ] = DEFAULT_ROOT,
    root: PathRootOption = None,
) -> None:
    """Check every run's files: the manifest, the whole metric table, the checksums of a
    completed run's files, an unfinished run's checkpoints. Exit code 1 if any is damaged."""
    from collapselab.store import MANIFEST_FILE, check_root, run_problem

    path = _path_or_root(path, root)
    if not path.exists():
        _fail(f"{path} does not exist; give a run directory or a root holding runs")
    if (path / MANIFEST_FILE).is_file():
        run_dirs = [path]
    else:
        try:
            run_dirs = [p.parent for p in sorted(check_root(path).rglob(MANIFEST_FILE))
                        if ".damaged" not in p.parts]  # fmt: skip
        except NotADirectoryError as error:
            _fail(_root_message(error, path))
        if not run_dirs:
            _fail(f"no runs under {path}; give a run directory or a root holding runs")
    damaged = 0
    for run_dir in run_dirs:
        problem = run_problem(run_dir, thorough=True)
        if problem is None:
            console.print(f"[green]ok[/green]       {_e(run_dir)}")
        else:
            damaged += 1
            console.print(f"[red]damaged[/red]  {_e(run_dir)}: {_e(problem)}", soft_wrap=True)
    console.print(f"{len(run_dirs)} run(s) checked, {damaged} damaged")
    if damaged:
        raise typer.Exit(code=1)


# ---------------------------------------------------------------- signals, warnings
_SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
_received: list[int] = []


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM as Ctrl-C: unwind through the run's handlers (status ``interrupted``,
    checkpoint kept). A second SIGTERM during that clean-up ends the process at once."""
    _received.append(signum)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt(signal.Signals(signum).name)  # the run records the signal


@contextmanager
def _interruptible(what: str) -> Iterator[None]:
    """Turn Ctrl-C / SIGTERM into one line and exit code 130 / 143."""
    try:
        yield
    except KeyboardInterrupt:
        signum = _received[-1] if _received else signal.SIGINT
        name = signal.Signals(signum).name
        err_console.print(
            f"[yellow]interrupted ({name}):[/yellow] {_e(what)} is marked interrupted and "
            "keeps its last checkpoint; run the same command again to resume it"
        )
        raise typer.Exit(code=_SIGNAL_EXIT.get(signum, 130)) from None


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Warnings as one line on standard error (no source line)."""
    text = " ".join(str(message).split())
    err_console.print(f"[yellow]warning:[/yellow] {_e(text)}", soft_wrap=True)


@app.callback()
def _setup() -> None:
    # Runs before every command (also under typer's test runner).
    warnings.showwarning = _show_warning
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: leave signals alone
        pass


def main() -> None:
    """Console-script entry point."""
    app()
