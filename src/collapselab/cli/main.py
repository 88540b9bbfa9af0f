"""The ``collapselab`` command line (Typer + Rich)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
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

DEFAULT_ROOT = Path(os.environ.get("COLLAPSELAB_ROOT", "collapselab-runs"))

RootOption = Annotated[
    Path,
    typer.Option("--root", "--out", help="Directory holding the runs (env COLLAPSELAB_ROOT)."),
]
PresetOption = Annotated[str, typer.Option(help="Preset: quick (CPU minutes) or paper.")]
DataDirOption = Annotated[Path | None, typer.Option(help="Directory with local dataset files.")]
DeviceOption = Annotated[str, typer.Option(help="cpu or cuda.")]
SeedOption = Annotated[int, typer.Option(help="Random seed.")]
ProgressOption = Annotated[bool, typer.Option(help="Show a progress bar.")]


@app.command()
def demo(
    out: RootOption = DEFAULT_ROOT,
    seed: SeedOption = 0,
    progress: ProgressOption = True,
) -> None:
    """Train a small MLP on scikit-learn's digits for a few epochs and write a run."""
    _run_and_report("demo", "quick", out, seed=seed, device="cpu", data_dir=None, progress=progress)


@app.command("list")
def list_experiments(
    metrics: Annotated[
        bool, typer.Option("--metrics", help="List the metric catalogue (families and keys).")
    ] = False,
) -> None:
    """List the registered experiments with their paper, figure, presets and quick runtime."""
    if metrics:
        _list_metrics()
        return
    from collapselab.experiments import all_experiments
    from collapselab.experiments.papers import paper_label

    table = Table()
    # Identifiers and runtimes must stay readable (and copyable) in a narrow terminal; the
    # figure title is the column that wraps.
    table.add_column("id", no_wrap=True)
    table.add_column("paper", no_wrap=True)
    table.add_column("figure / table", ratio=1)
    table.add_column("presets")
    table.add_column("quick runtime", no_wrap=True)
    table.add_column("claims", no_wrap=True)
    for experiment in all_experiments():
        shown = experiment.title
        if experiment.figure:
            shown = f"{experiment.figure}: {experiment.title}"
        table.add_row(
            _e(experiment.id),
            _e(paper_label(experiment.paper)),
            _e(shown),
            _e(", ".join(experiment.presets)),
            _e(experiment.runtime_quick),
            str(len(experiment.claims)),
        )
    console.print(table)


def _list_metrics() -> None:
    """The metric catalogue: every family's keys, where each applies and what it needs."""
    from collapselab.metrics import catalogue

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
def run(
    experiment_id: Annotated[str, typer.Argument(help="Experiment id (see `collapselab list`).")],
    preset: PresetOption = "quick",
    data_dir: DataDirOption = None,
    device: DeviceOption = "cpu",
    seed: SeedOption = 0,
    out: RootOption = DEFAULT_ROOT,
    progress: ProgressOption = True,
) -> None:
    """Run one experiment with a preset and write it to the run store."""
    _run_and_report(experiment_id, preset, out, seed, device, data_dir, progress)


@app.command()
def runs(root: RootOption = DEFAULT_ROOT) -> None:
    """List the runs under a root directory."""
    from collapselab.store import list_runs

    frame = list_runs(root)
    if frame.empty:
        console.print(f"no runs under {_e(root)}")
        return
    shown = [c for c in _RUNS_COLUMNS if c in frame.columns]
    table = Table(*shown)
    for row in frame[shown].itertuples(index=False):
        table.add_row(*[_format_cell(v) for v in row])
    console.print(table)


_RUNS_COLUMNS = ("run_id", "experiment", "preset", "seed", "status", "finished", "path")


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="DuckDB SQL over the views `metrics` and `runs`.")],
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
) -> None:
    """Run SQL over the metrics of every run under a root (views: metrics, runs)."""
    from collapselab.store import query as run_query

    frame = run_query(root, sql)
    if output == "csv":
        typer.echo(frame.to_csv(index=False), nl=False)
    elif output == "json":
        typer.echo(frame.to_json(orient="records"))
    elif output == "table":
        table = Table(*[str(c) for c in frame.columns])
        for row in frame.itertuples(index=False):
            table.add_row(*[_format_cell(v) for v in row])
        console.print(table)
    else:
        raise typer.BadParameter(f"--format must be table, csv or json, got {output!r}")


def _e(value: object) -> str:
    # Dynamic text (errors, paths, titles) must not be read as Rich markup.
    return escape(str(value))


def _format_cell(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else _e(value)


def _run_and_report(
    experiment_id: str,
    preset: str,
    root: Path,
    seed: int,
    device: str,
    data_dir: Path | None,
    progress: bool,
) -> None:
    from collapselab.experiments import run_experiment

    callbacks = _progress_callbacks(experiment_id, progress)
    try:
        result = run_experiment(
            experiment_id,
            preset=preset,
            root=root,
            seed=seed,
            device=device,
            data_dir=data_dir,
            callbacks=callbacks,
            raise_on_error=False,
        )
    except (KeyError, ValueError, FileNotFoundError) as error:
        console.print(f"[red]error:[/red] {_e(error.args[0] if error.args else error)}")
        raise typer.Exit(code=2) from error
    status = result.manifest.get("status")
    colour = "green" if status == "completed" else "red"
    console.print(
        f"run [bold]{_e(result.id)}[/bold]: [{colour}]{status}[/{colour}] -> {_e(result.path)}"
    )
    if status != "completed":
        console.print(f"[red]error:[/red] {_e(result.manifest.get('error'))}")
    _print_claims(result.path)
    report = result.path / "report.html"
    if report.is_file():
        console.print(f"report: {_e(report)}")
    if status != "completed":
        raise typer.Exit(code=1)


def _progress_callbacks(description: str, progress: bool) -> list[object]:
    from collapselab.cli.progress import RichProgress

    return [RichProgress(description=description)] if progress else []


_VERDICT_COLOURS = {"holds": "green", "does not hold": "red", "not evaluable": "yellow"}


def _print_claims(run_path: Path) -> None:
    from collapselab.report.html import read_claims

    document, problem = read_claims(run_path)
    if problem:
        console.print(f"[yellow]{_e(problem)}[/yellow]")
    if not document or not document["claims"]:
        return
    table = Table("claim", "verdict", "detail")
    for entry in document["claims"]:
        verdict = str(entry.get("verdict"))
        colour = _VERDICT_COLOURS.get(verdict, "white")
        table.add_row(
            _e(entry.get("name")),
            f"[{colour}]{_e(verdict)}[/{colour}]",
            _e(entry.get("detail", "")),
        )
    console.print(table)


@app.command()
def reproduce(
    paper: Annotated[str, typer.Argument(help="Paper number (003), short name (mse-nc) or 'all'.")],
    preset: PresetOption = "quick",
    data_dir: DataDirOption = None,
    device: DeviceOption = "cpu",
    seed: SeedOption = 0,
    out: RootOption = DEFAULT_ROOT,
    progress: ProgressOption = True,
) -> None:
    """Run every experiment of a paper (or all papers), skipping finished runs; write the index.

    A failing experiment does not stop the others; the exit code is 1 if any failed. The
    demo is not part of 'all' (run it with `collapselab demo`).
    """
    from collapselab.experiments import Experiment, ExperimentOutcome
    from collapselab.experiments import reproduce as run_reproduce

    def started(experiment: Experiment) -> None:
        console.print(f"[bold]{_e(experiment.id)}[/bold] ({_e(experiment.title)})")

    def finished(outcome: ExperimentOutcome) -> None:
        colour = {"completed": "green", "skipped": "cyan"}.get(outcome.outcome, "red")
        text = f"  [{colour}]{outcome.outcome}[/{colour}] in {outcome.seconds:.1f} s"
        if outcome.claims:
            counts = outcome.claims
            text += (
                f"; claims: {counts.get('holds', 0)} hold, {counts.get('does not hold', 0)} "
                f"do not hold, {counts.get('not evaluable', 0)} not evaluable"
            )
        if outcome.error:
            text += f"\n  [red]error:[/red] {_e(outcome.error)}"
        console.print(text)

    try:
        result = run_reproduce(
            paper,
            preset=preset,
            root=out,
            seed=seed,
            device=device,
            data_dir=data_dir,
            callbacks=lambda e: _progress_callbacks(e.id, progress),
            on_start=started,
            on_done=finished,
        )
    except ValueError as error:
        console.print(f"[red]error:[/red] {_e(error)}")
        raise typer.Exit(code=2) from error
    counts = {k: sum(o.outcome == k for o in result.outcomes) for k in ("completed", "skipped")}
    console.print(
        f"{len(result.outcomes)} experiment(s): {counts['completed']} ran, "
        f"{counts['skipped']} already done, {len(result.failed)} failed "
        f"({result.wall_s:.1f} s)"
    )
    console.print(f"index: {_e(result.index_html)}")
    if not result.ok:
        failed = ", ".join(o.experiment for o in result.failed)
        console.print(f"[red]failed:[/red] {_e(failed)}")
        raise typer.Exit(code=1)


@app.command()
def report(
    path: Annotated[
        Path, typer.Argument(help="A run directory, or a root holding runs.")
    ] = DEFAULT_ROOT,
    redraw: Annotated[bool, typer.Option(help="Redraw figures from the stored results.")] = True,
    claims: Annotated[
        bool, typer.Option(help="Re-evaluate the claims from the stored results.")
    ] = True,
) -> None:
    """Rebuild report.html of a run (or of every run under a root, and the index); no training."""
    from collapselab.experiments import refresh_run
    from collapselab.report.index import write_index
    from collapselab.store import MANIFEST_FILE, list_runs

    if not path.exists():
        console.print(f"[red]error:[/red] {_e(path)} does not exist")
        raise typer.Exit(code=2)
    if (path / MANIFEST_FILE).is_file():
        written = refresh_run(path, redraw=redraw, reevaluate=claims)
        console.print(f"report: {_e(written)}")
        return
    frame = list_runs(path)
    if frame.empty:
        console.print(f"[red]error:[/red] no runs under {_e(path)}")
        raise typer.Exit(code=2)
    problems = 0
    for run_path in frame["path"]:
        try:
            written = refresh_run(run_path, redraw=redraw, reevaluate=claims)
        except Exception as error:  # one damaged run must not stop the others
            problems += 1
            console.print(f"[red]error:[/red] {_e(run_path)}: {type(error).__name__}: {_e(error)}")
            continue
        console.print(f"report: {_e(written)}")
    index_html, _ = write_index(path)
    console.print(f"index: {_e(index_html)}")
    if problems:
        raise typer.Exit(code=1)


def main() -> None:
    """Console-script entry point."""
    app()
