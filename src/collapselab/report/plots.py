"""Figures drawn like the papers' (headless matplotlib; every function writes a PNG).

Inputs are long-format metric tables (columns ``step, epoch, split, layer, metric, value``,
as :meth:`collapselab.store.Run.metrics` returns; extra columns such as ``dataset`` may be
used to split panels) or plain arrays. Every function returns the path it wrote.

- :func:`plot_metric`: one metric over epochs (or steps), one line per layer or series,
  log-x / log-y, the zero-error epoch as a vertical dotted line (003 Figs 3-8 panels,
  001 Fig. 2 panels).
- :func:`plot_panels`: a grid of such panels, one per value of a column (a metric, a
  dataset, a network), e.g. 003 Fig. 2 (one panel per dataset/net) or Figs 3-8.
- :func:`plot_vs_depth`: a metric against (relative) depth at one epoch, with a
  prediction curve overlaid (001 Fig. 3: layers at pos(l), geodesic prediction).
- :func:`plot_comparison`: bars or points per item with a reference line (001 Fig. 4:
  UFM/MUFM metrics against the data's value).

On a log axis, non-positive values cannot be drawn: they are left out (a log-x axis drops
epoch 0) rather than clipped to a misleading floor.

Layout rules, so that a figure reads at full size in a report (:mod:`collapselab.report.html`):
no figure is wider than :data:`MAX_FIGURE_WIDTH` inches (at 120 dpi it fits the report's
page without being scaled down), panels wrap into rows of at most
:data:`MAX_PANELS_PER_ROW` (:func:`panel_grid`), and legends sit outside the axes, never
on the curves: one legend below the panels when one panel shows every series of the figure
(:func:`shared_legend`), otherwise one right of each panel.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # figures are files; never open a window
import matplotlib.pyplot as plt
import matplotlib.text
import numpy as np
import pandas as pd

from collapselab.checks import check_choice, check_int
from collapselab.store import atomic_write

Curves = Mapping[str, tuple[Any, Any]]
"""Plain-array input: ``{label: (x, y)}``."""

ZERO_ERROR_STYLE = {"color": "red", "linestyle": ":", "linewidth": 1.3}
_LONG_COLUMNS = ("epoch", "split", "layer", "metric", "value")

DPI = 120
"""Resolution of the saved figures (pixels per inch)."""

MAX_FIGURE_WIDTH = 11.4
"""Widest figure in inches: 1368 px at :data:`DPI`, within the report's 1400 px page."""

MAX_PANELS_PER_ROW = 3
"""Panels side by side at most; more wrap into further rows."""


def steps_on_log_axis(steps: Any) -> np.ndarray:
    """Training steps shifted by one for a logarithmic x axis, so that step 0 (the
    initialisation) is drawn at 1 instead of being dropped."""
    return np.asarray(steps, dtype=np.float64) + 1.0


def panel_grid(
    n_panels: int, panel_width: float, ncols: int = MAX_PANELS_PER_ROW
) -> tuple[int, int, float]:
    """``(rows, cols, panel width)`` for ``n_panels`` panels of ``panel_width`` inches:
    at most ``ncols`` and :data:`MAX_PANELS_PER_ROW` per row, panels narrowed so that the
    row fits :data:`MAX_FIGURE_WIDTH`."""
    n_panels = check_int("n_panels", n_panels, minimum=1)
    cols = max(1, min(n_panels, ncols, MAX_PANELS_PER_ROW))
    rows = -(-n_panels // cols)
    return rows, cols, min(float(panel_width), MAX_FIGURE_WIDTH / cols)


def shared_legend(fig: Any, axes: Any, ncol: int = 4) -> None:
    """One legend for the whole figure, below the panels: each distinct label once, in the
    order the panels first show it. Needs ``constrained_layout=True`` (it makes room)."""
    handles: dict[str, Any] = {}
    for ax in np.ravel(axes):
        if not ax.get_visible():
            continue
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="outside lower center",
            ncol=min(ncol, len(handles)),
            fontsize="small",
            frameon=False,
        )


def _one_set_of_series(axes: Any) -> bool:
    """True when one panel shows every series any panel shows (same label, same series)."""
    sets = [set(ax.get_legend_handles_labels()[1]) for ax in np.ravel(axes) if ax.get_visible()]
    return bool(sets) and set().union(*sets) in sets


# ----------------------------------------------------------------------- selection
def _require_columns(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(
            f"data lacks columns {missing}; expected a long-format table with columns "
            f"{list(_LONG_COLUMNS)} (and 'step')"
        )


def select_curves(
    frame: pd.DataFrame,
    metric: str | None = None,
    split: str | None = None,
    layer: str | None = None,
    hue: str | Sequence[str] = "layer",
    x: str = "epoch",
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Curves ``{label: (x, y)}`` from a long-format table, one per value of ``hue``.

    Rows are filtered by ``metric``, ``split`` and ``layer`` (each unless ``None``); when
    several splits (or metrics) remain and ``hue`` does not name that column, it is added
    to the labels. Rows with ``epoch < 0`` (not tied to an epoch) are dropped when ``x`` is
    ``"epoch"``. Where a curve has several rows at one x, the one logged last wins.
    Curves keep the order in which their labels first appear (layers in forward order).
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"data must be a pandas DataFrame, got {type(frame).__name__}")
    hue_cols = [hue] if isinstance(hue, str) else list(hue)
    _require_columns(frame, [x, "value", *hue_cols])
    rows = frame
    for column, wanted in (("metric", metric), ("split", split), ("layer", layer)):
        if wanted is not None:
            _require_columns(rows, [column])
            rows = rows[rows[column] == wanted]
    if x == "epoch":
        rows = rows[rows["epoch"] >= 0]
    for column in ("metric", "split"):  # never merge two metrics or splits into one line
        if column in rows.columns and column not in hue_cols and rows[column].nunique() > 1:
            hue_cols.append(column)
    if rows.empty:
        where = ", ".join(
            f"{k}={v!r}" for k, v in (("metric", metric), ("split", split), ("layer", layer)) if v
        )
        raise ValueError(f"no rows to plot for {where or 'the given data'}")
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for key, group in rows.groupby(hue_cols, sort=False):
        parts = key if isinstance(key, tuple) else (key,)
        label = " ".join(str(p) for p in parts if str(p)) or "model"
        last = _last_by(group, x).sort_index()
        curves[label] = (last.index.to_numpy(dtype=np.float64), last.to_numpy(dtype=np.float64))
    return curves


def _last_by(rows: pd.DataFrame, key: str) -> pd.Series:
    # The last logged value per key (a NaN logged last stays NaN), by first appearance.
    order = pd.unique(rows[key])
    return rows.drop_duplicates(subset=[key], keep="last").set_index(key)["value"].loc[order]


def _as_curves(data: pd.DataFrame | Curves, **selection: Any) -> dict[str, tuple[Any, Any]]:
    if isinstance(data, pd.DataFrame):
        return select_curves(data, **selection)
    if not isinstance(data, Mapping) or not data:
        raise TypeError(
            "data must be a long-format DataFrame or a non-empty mapping {label: (x, y)}, "
            f"got {type(data).__name__}"
        )
    curves = {}
    for label, pair in data.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"curve {label!r} must be a pair (x, y)")
        x, y = (np.asarray(a, dtype=np.float64).ravel() for a in pair)
        if x.shape != y.shape:
            raise ValueError(f"curve {label!r}: x has {x.size} points, y has {y.size}")
        curves[str(label)] = (x, y)
    return curves


def _for_log(x: np.ndarray, y: np.ndarray, logx: bool, logy: bool) -> tuple[np.ndarray, ...]:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).copy()
    if logy:
        y[~(y > 0)] = np.nan  # a gap, not a clipped floor
    if logx:
        keep = x > 0
        x, y = x[keep], y[keep]
    return x, y


# ------------------------------------------------------------------------- drawing
def _colours(n: int) -> list[Any]:
    if n <= 10:
        return [plt.get_cmap("tab10")(i) for i in range(n)]
    # Many layers: a sequential map so that depth reads as a colour gradient.
    cmap = plt.get_cmap("viridis")
    return [cmap(i / max(n - 1, 1)) for i in range(n)]


def _draw_curves(
    ax: Any,
    curves: Mapping[str, tuple[Any, Any]],
    logx: bool,
    logy: bool,
    zero_error_epoch: float | None,
    markers: bool,
) -> None:
    for colour, (label, (x, y)) in zip(_colours(len(curves)), curves.items(), strict=True):
        x, y = _for_log(x, y, logx, logy)
        style = {"marker": "o", "markersize": 2.5} if markers else {}
        ax.plot(x, y, color=colour, label=label, linewidth=1.4, **style)
    if zero_error_epoch is not None and (not logx or zero_error_epoch > 0):
        ax.axvline(zero_error_epoch, label="zero training error", **ZERO_ERROR_STYLE)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both" if logy else "major")


def _legend(ax: Any, n: int) -> None:
    """A legend right of the axes (outside: it never covers a curve)."""
    if n == 0:
        return
    ax.legend(
        fontsize="small" if n <= 8 else "x-small",
        ncol=1 if n <= 12 else 2,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0.0,
        frameon=False,
    )


def place_legends(fig: Any, axes: Any) -> None:
    """A shared legend when one panel shows every series of the figure, else one per panel."""
    if _one_set_of_series(axes):
        shared_legend(fig, axes)
        return
    for ax in np.ravel(axes):
        if ax.get_visible():
            _legend(ax, len(ax.get_legend_handles_labels()[1]))


NARROW_SCREEN_SCALE = 0.3
"""How much larger the text of the widest figure is drawn (:func:`readable_text`)."""


def readable_text(fig: Any) -> None:
    """Enlarge the text of a wide figure so that it stays legible on a narrow screen.

    A report shows a figure at most as wide as the page; at 800 px a figure of
    :data:`MAX_FIGURE_WIDTH` (1368 px) is shown at about 55% of its size, and 10 pt ticks
    became 9 px. Text is scaled by ``1 + 0.3 t`` with ``t`` the figure's width between
    half and all of :data:`MAX_FIGURE_WIDTH` (0 below half, 1 at the widest): a three-panel
    figure's ticks are 13 pt (about 12 px at 800 px); a single panel is unchanged."""
    width = fig.get_size_inches()[0]
    share = min(max((width - MAX_FIGURE_WIDTH / 2) / (MAX_FIGURE_WIDTH / 2), 0.0), 1.0)
    factor = 1.0 + NARROW_SCREEN_SCALE * share
    if factor == 1.0:
        return
    for text in fig.findobj(matplotlib.text.Text):
        text.set_fontsize(text.get_fontsize() * factor)


def save_run_figure(run: Any, fig: Any, name: str, dpi: int = DPI) -> Path:
    """Write ``fig`` to ``figures/<name>.png`` of ``run`` (a
    :class:`~collapselab.store.Run`, atomically) and close it, even when saving fails;
    a wide figure's text is enlarged first (:func:`readable_text`)."""
    try:
        readable_text(fig)
        return run.save_figure(fig, name, dpi=dpi)
    finally:
        plt.close(fig)


def _save(fig: Any, path: str | Path, dpi: int = DPI) -> Path:
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"path must end in .png, got {str(path)!r}")
    buffer = io.BytesIO()
    try:
        readable_text(fig)
        fig.savefig(buffer, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    return atomic_write(path, buffer.getvalue())


def plot_metric(
    data: pd.DataFrame | Curves,
    path: str | Path,
    metric: str | None = None,
    *,
    split: str | None = None,
    layer: str | None = None,
    hue: str | Sequence[str] = "layer",
    x: str = "epoch",
    logx: bool = False,
    logy: bool = False,
    zero_error_epoch: float | None = None,
    title: str = "",
    xlabel: str | None = None,
    ylabel: str | None = None,
    markers: bool = False,
    figsize: tuple[float, float] = (5.0, 3.6),
) -> Path:
    """One metric over epochs (or ``x``), one line per layer (``hue``) or per curve.

    Args:
        data: a long-format table (filtered by ``metric``/``split``/``layer``, see
            :func:`select_curves`) or ``{label: (x, y)}``.
        path: the PNG to write.
        metric, split, layer: row filters for a table (``None``: no filter).
        hue: the column(s) whose values become separate lines.
        x: the x column of a table (``"epoch"`` or ``"step"``).
        logx, logy: logarithmic axes (non-positive values are left out).
        zero_error_epoch: drawn as a red vertical dotted line (start of TPT).
        title, xlabel, ylabel: labels (``ylabel`` defaults to ``metric``).
        markers: draw a dot at every point.
    """
    curves = _as_curves(data, metric=metric, split=split, layer=layer, hue=hue, x=x)
    fig, ax = plt.subplots(figsize=figsize, constrained_layout=True)
    _draw_curves(ax, curves, logx, logy, zero_error_epoch, markers)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or metric or "value")
    if title:
        ax.set_title(title)
    _legend(ax, len(curves) + (zero_error_epoch is not None))
    return _save(fig, path)


def _per_panel(option: Any, name: str, default: Any) -> Any:
    if isinstance(option, Mapping):
        return option.get(name, default)
    return option


def plot_panels(
    data: pd.DataFrame | Mapping[str, Curves],
    path: str | Path,
    *,
    panel: str = "metric",
    panels: Sequence[str] | None = None,
    metric: str | None = None,
    split: str | None = None,
    hue: str | Sequence[str] = "layer",
    x: str = "epoch",
    logx: bool | Mapping[str, bool] = False,
    logy: bool | Mapping[str, bool] = False,
    zero_error_epoch: float | Mapping[str, float | None] | None = None,
    titles: Mapping[str, str] | None = None,
    ylabel: str | Mapping[str, str] | None = None,
    xlabel: str | None = None,
    ncols: int = 3,
    suptitle: str = "",
    sharey: bool = False,
    panel_size: tuple[float, float] = (4.0, 3.0),
) -> Path:
    """A grid with one panel per value of the column ``panel`` (or per key of a mapping).

    ``panel="metric"`` gives one panel per metric (003 Figs 3-8 side by side); with a
    table concatenated over datasets, ``panel="dataset"`` and ``metric="nc1"`` gives one
    panel per dataset (003 Fig. 7's layout). ``logx``, ``logy``, ``zero_error_epoch`` and
    ``ylabel`` may be one value for all panels or a mapping by panel name (the zero-error
    epoch differs per dataset). ``panels`` fixes the panel order (default: order of first
    appearance). A plain-array input is ``{panel: {label: (x, y)}}``.
    """
    ncols = check_int("ncols", ncols, minimum=1)
    if isinstance(data, pd.DataFrame):
        _require_columns(data, [panel])
        rows = data if metric is None else data[data["metric"] == metric]
        names = list(panels) if panels is not None else list(pd.unique(rows[panel]))
        absent = [n for n in names if not (rows[panel] == n).any()]
        if absent or not names:
            raise ValueError(f"no rows for panels {absent or names} in column {panel!r}")
        content = {
            str(n): select_curves(rows[rows[panel] == n], split=split, hue=hue, x=x) for n in names
        }
    else:
        if not isinstance(data, Mapping) or not data:
            raise TypeError("data must be a long-format DataFrame or {panel: {label: (x, y)}}")
        names = list(panels) if panels is not None else list(data)
        content = {str(n): _as_curves(data[n]) for n in names}
    n = len(content)
    rows_n, cols, width = panel_grid(n, panel_size[0], ncols)
    fig, axes = plt.subplots(
        rows_n,
        cols,
        figsize=(width * cols, panel_size[1] * rows_n),
        squeeze=False,
        sharey=sharey,
        constrained_layout=True,
    )
    for ax, (name, curves) in zip(axes.flat, content.items(), strict=False):
        zero = _per_panel(zero_error_epoch, name, None)
        _draw_curves(
            ax, curves, _per_panel(logx, name, False), _per_panel(logy, name, False), zero, False
        )
        ax.set_title((titles or {}).get(name, name))
        ax.set_xlabel(xlabel or x)
        label = _per_panel(ylabel, name, None)
        ax.set_ylabel(label if label is not None else (metric or ""))
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    place_legends(fig, axes)
    if suptitle:
        fig.suptitle(suptitle)
    return _save(fig, path)


def relative_positions(n_layers: int) -> np.ndarray:
    """Evenly spaced positions l/(L-1) in [0, 1] for ``n_layers`` layers (a fallback for
    the path-length position pos(l) of paper 001 §IV-A when it was not measured)."""
    n_layers = check_int("n_layers", n_layers, minimum=1)
    return np.linspace(0.0, 1.0, n_layers) if n_layers > 1 else np.zeros(1)


def _layer_values(
    frame: pd.DataFrame,
    metric: str,
    split: str | None,
    epoch: int | str,
    layers: Sequence[str] | None,
) -> tuple[list[str], np.ndarray]:
    _require_columns(frame, _LONG_COLUMNS)
    rows = frame[(frame["metric"] == metric) & (frame["layer"] != "")]
    if split is not None:
        rows = rows[rows["split"] == split]
    if rows.empty:
        raise ValueError(f"no per-layer rows of metric {metric!r}")
    at = int(rows["epoch"].max()) if epoch == "last" else int(epoch)
    rows = rows[rows["epoch"] == at]
    if rows.empty:
        raise ValueError(f"no per-layer rows of metric {metric!r} at epoch {at}")
    values = _last_by(rows, "layer")
    order = list(layers) if layers is not None else list(values.index)
    absent = [name for name in order if name not in values.index]
    if absent:
        raise ValueError(f"layers {absent} have no {metric!r} value at epoch {at}")
    return order, values.loc[order].to_numpy(dtype=np.float64)


def plot_vs_depth(
    data: pd.DataFrame | Mapping[str, tuple[Any, Any]],
    path: str | Path,
    metrics: str | Sequence[str],
    *,
    split: str | None = "train",
    epoch: int | str = "last",
    layers: Sequence[str] | None = None,
    positions: Mapping[str, float] | Sequence[float] | None = None,
    prediction: tuple[Any, Any] | Mapping[str, tuple[Any, Any]] | None = None,
    prediction_label: str = "prediction",
    logy: bool | Mapping[str, bool] = False,
    xlabel: str = "relative depth",
    title: str = "",
    annotate: bool = False,
) -> Path:
    """Metric(s) against depth at one epoch, one panel per metric, with a prediction overlay.

    Args:
        data: a long-format table (per-layer rows of each metric; ``epoch="last"`` takes the
            largest epoch) or ``{metric: (positions, values)}``.
        path: the PNG to write.
        metrics: one metric name or several (one panel each).
        split, epoch, layers: row selection for a table; ``layers`` fixes the depth order
            (default: order of first appearance).
        positions: x coordinate per layer (e.g. pos(l) of paper 001 §IV-A), as a mapping
            by layer or a sequence in ``layers`` order; default evenly spaced in [0, 1].
        prediction: ``(t, values)`` drawn as a line (001 Fig. 3's geodesic curve), or a
            mapping by metric.
        logy: logarithmic y axis (all panels, or a mapping by metric).
        annotate: write each layer's name next to its point.
    """
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    if not names:
        raise ValueError("metrics must name at least one metric")
    rows_n, cols, width = panel_grid(len(names), 3.8)
    fig, axes = plt.subplots(
        rows_n, cols, figsize=(width * cols, 3.4 * rows_n), squeeze=False, constrained_layout=True
    )
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, names, strict=False):
        if isinstance(data, pd.DataFrame):
            order, values = _layer_values(data, name, split, epoch, layers)
            x = _positions(order, positions)
        else:
            if name not in data:
                raise ValueError(f"data has no entry for metric {name!r}")
            x, values = (np.asarray(a, dtype=np.float64).ravel() for a in data[name])
            order = [str(i) for i in range(x.size)]
        log = bool(_per_panel(logy, name, False))
        px, py = _for_log(x, values, False, log)
        ax.plot(px, py, "o", color="tab:green", markersize=6, label="layers", zorder=3)
        if annotate:
            for xi, yi, label in zip(px, py, order, strict=True):
                ax.annotate(
                    label, (xi, yi), fontsize="x-small", xytext=(3, 3), textcoords="offset points"
                )
        curve = prediction.get(name) if isinstance(prediction, Mapping) else prediction
        if curve is not None:
            t, v = (np.asarray(a, dtype=np.float64).ravel() for a in curve)
            if t.shape != v.shape:
                raise ValueError(f"prediction for {name!r}: t has {t.size} points, values {v.size}")
            t, v = _for_log(t, v, False, log)
            ax.plot(t, v, "-", color="tab:blue", label=prediction_label, zorder=2)
        if log:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
    place_legends(fig, axes)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def _positions(order: list[str], positions: Mapping[str, float] | Sequence[float] | None) -> Any:
    if positions is None:
        return relative_positions(len(order))
    if isinstance(positions, Mapping):
        missing = [name for name in order if name not in positions]
        if missing:
            raise ValueError(f"positions has no entry for layers {missing}")
        return np.array([float(positions[name]) for name in order])
    x = np.asarray(positions, dtype=np.float64).ravel()
    if x.size != len(order):
        raise ValueError(f"positions has {x.size} values for {len(order)} layers")
    return x


def plot_comparison(
    values: Mapping[str, float] | Mapping[str, Mapping[str, float]],
    path: str | Path,
    *,
    reference: float | Mapping[str, float] | None = None,
    reference_label: str = "reference",
    errors: Mapping[str, float] | Mapping[str, Mapping[str, float]] | None = None,
    kind: str = "bar",
    logy: bool | Mapping[str, bool] = False,
    ylabel: str = "",
    title: str = "",
) -> Path:
    """Bars or points per item, with a horizontal reference line (001 Fig. 4's data line).

    ``values`` is ``{item: value}`` (one panel) or ``{panel: {item: value}}`` (one panel
    per key, e.g. per metric, with ``reference`` and ``logy`` given per panel as mappings).
    ``errors`` adds error bars of the same shape.
    """
    check_choice("kind", kind, ("bar", "point"))
    if not isinstance(values, Mapping) or not values:
        raise TypeError("values must be a non-empty mapping {item: value} or {panel: {...}}")
    nested = all(isinstance(v, Mapping) for v in values.values())
    groups = dict(values) if nested else {"": values}
    error_groups = (errors if nested else {"": errors}) if errors is not None else {}
    rows_n, cols, width = panel_grid(len(groups), max(3.6, 1.1 * _widest(groups)))
    fig, axes = plt.subplots(
        rows_n, cols, figsize=(width * cols, 3.4 * rows_n), squeeze=False, constrained_layout=True
    )
    for ax in list(axes.flat)[len(groups) :]:
        ax.set_visible(False)
    for ax, (name, items) in zip(axes.flat, groups.items(), strict=False):
        labels = [str(k) for k in items]
        heights = np.array([float(v) for v in items.values()], dtype=np.float64)
        err = error_groups.get(name) if error_groups else None
        yerr = None if err is None else np.array([float(err.get(k, np.nan)) for k in items])
        log = bool(_per_panel(logy, name, False))
        if log:
            heights = np.where(heights > 0, heights, np.nan)
        positions = np.arange(len(labels))
        if kind == "bar":
            ax.bar(positions, heights, yerr=yerr, color="tab:blue", capsize=3)
        else:
            ax.errorbar(positions, heights, yerr=yerr, fmt="o", color="tab:blue", capsize=3)
        ref = _per_panel(reference, name, None)
        if ref is not None:
            ax.axhline(float(ref), color="red", linewidth=1.3, label=reference_label)
        ax.set_xticks(positions, labels, rotation=30 if len(labels) > 4 else 0)
        if log:
            ax.set_yscale("log")
        if name:
            ax.set_title(name)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, axis="y")
    place_legends(fig, axes)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def _widest(groups: Mapping[str, Mapping[str, Any]]) -> int:
    return max(len(items) for items in groups.values())
