"""The ``collapselab`` command line (Typer + Rich)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
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


@app.command()
def demo(
    out: RootOption = DEFAULT_ROOT,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Train a small MLP on scikit-learn's digits for a few epochs and write a run."""
    _run_and_report("demo", "quick", out, seed=seed, device="cpu", data_dir=None, progress=progress)


@app.command("list")
def list_experiments() -> None:
    """List the registered experiments with their presets and quick runtime."""
    from collapselab.experiments import all_experiments

    table = Table("id", "paper", "figure / table", "presets", "quick runtime")
    for experiment in all_experiments():
        table.add_row(
            experiment.id,
            experiment.paper,
            experiment.title,
            ", ".join(experiment.presets),
            experiment.runtime_quick,
        )
    console.print(table)


@app.command()
def run(
    experiment_id: Annotated[str, typer.Argument(help="Experiment id (see `collapselab list`).")],
    preset: Annotated[str, typer.Option(help="Preset: quick (CPU minutes) or paper.")] = "quick",
    data_dir: Annotated[
        Path | None, typer.Option(help="Directory with local dataset files.")
    ] = None,
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    out: RootOption = DEFAULT_ROOT,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Run one experiment with a preset and write it to the run store."""
    _run_and_report(experiment_id, preset, out, seed, device, data_dir, progress)


@app.command()
def runs(root: RootOption = DEFAULT_ROOT) -> None:
    """List the runs under a root directory."""
    from collapselab.store import list_runs

    frame = list_runs(root)
    if frame.empty:
        console.print(f"no runs under {root}")
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


def _format_cell(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _run_and_report(
    experiment_id: str,
    preset: str,
    root: Path,
    seed: int,
    device: str,
    data_dir: Path | None,
    progress: bool,
) -> None:
    from collapselab.cli.progress import RichProgress
    from collapselab.experiments import run_experiment

    callbacks = [RichProgress(description=experiment_id)] if progress else []
    try:
        result = run_experiment(
            experiment_id,
            preset=preset,
            root=root,
            seed=seed,
            device=device,
            data_dir=data_dir,
            callbacks=callbacks,
        )
    except (KeyError, ValueError, FileNotFoundError) as error:
        console.print(f"[red]error:[/red] {error.args[0] if error.args else error}")
        raise typer.Exit(code=2) from error
    status = result.manifest.get("status")
    colour = "green" if status == "completed" else "red"
    console.print(f"run [bold]{result.id}[/bold]: [{colour}]{status}[/{colour}] -> {result.path}")
    if status != "completed":
        raise typer.Exit(code=1)


def main() -> None:
    """Console-script entry point."""
    app()
