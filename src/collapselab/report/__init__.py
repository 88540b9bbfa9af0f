"""collapselab.report: figures drawn like the papers' and self-contained HTML reports.

Public API:

- :func:`plot_metric`, :func:`plot_panels`, :func:`plot_vs_depth`, :func:`plot_comparison`,
  :func:`select_curves`, :func:`relative_positions`: figures from long-format metric tables
  or arrays (:mod:`collapselab.report.plots`); :func:`plot_training_curves`: loss and
  accuracy of a training run.
- Layout rules for any figure of a report: :data:`MAX_FIGURE_WIDTH`, :func:`panel_grid`,
  :func:`shared_legend`, :func:`place_legends`, :data:`DPI`, :func:`save_run_figure`.
- :func:`render_run_report`, :func:`write_run_report`: a run's ``report.html``.
- :func:`collect_index`, :func:`render_index`, :func:`write_index`: ``index.html`` and
  ``index.json`` across the runs under a root; :func:`machine_text`: a measurement's machine
  in words.

The figure functions load matplotlib (a second or more on a busy machine) on first use:
writing and reading reports (``html``, ``index``), which the experiment runner and the
CLI do on every run, does not need it.
"""

from typing import Any

from collapselab.report.html import render_run_report, write_run_report
from collapselab.report.index import collect_index, machine_text, render_index, write_index

_PLOTS = (
    "DPI",
    "MAX_FIGURE_WIDTH",
    "panel_grid",
    "place_legends",
    "plot_comparison",
    "plot_metric",
    "plot_panels",
    "plot_vs_depth",
    "relative_positions",
    "save_run_figure",
    "select_curves",
    "shared_legend",
    "steps_on_log_axis",
)

__all__ = [
    "DPI",
    "MAX_FIGURE_WIDTH",
    "collect_index",
    "machine_text",
    "panel_grid",
    "place_legends",
    "plot_comparison",
    "plot_metric",
    "plot_panels",
    "plot_training_curves",
    "plot_vs_depth",
    "relative_positions",
    "render_index",
    "render_run_report",
    "save_run_figure",
    "select_curves",
    "shared_legend",
    "steps_on_log_axis",
    "write_index",
    "write_run_report",
]


def __getattr__(name: str) -> Any:
    # The plotting modules import matplotlib: loaded when a figure function is first used.
    if name == "plot_training_curves":
        from collapselab.report.figures import plot_training_curves

        return plot_training_curves
    if name in _PLOTS:
        from collapselab.report import plots

        return getattr(plots, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
