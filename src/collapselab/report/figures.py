"""Figures drawn from a run's long-format metric table (headless matplotlib)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; never open a window
import matplotlib.pyplot as plt
import pandas as pd

from collapselab.report.plots import ZERO_ERROR_STYLE, _save, shared_legend


def plot_training_curves(
    metrics: pd.DataFrame,
    path: str | Path,
    zero_error_epoch: int | None = None,
    title: str = "",
) -> Path:
    """Loss and accuracy per epoch for every split, side by side.

    Args:
        metrics: long-format table with columns ``epoch, split, layer, metric, value``; rows
            with ``metric`` in ``{"loss", "accuracy"}`` and an empty ``layer`` are drawn.
        path: where to write the PNG.
        zero_error_epoch: marked with a red vertical dotted line when given (the start of the
            terminal phase of training).
        title: figure title.

    Returns:
        The path written.
    """
    path = Path(path)
    rows = metrics[(metrics["layer"] == "") & metrics["metric"].isin(["loss", "accuracy"])]
    if rows.empty:
        raise ValueError("no model-level 'loss' or 'accuracy' rows to plot")
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), constrained_layout=True)
    for ax, metric, ylabel in zip(axes, ["loss", "accuracy"], ["loss", "accuracy"], strict=True):
        for split, group in rows[rows["metric"] == metric].groupby("split"):
            group = group.sort_values("epoch")
            ax.plot(group["epoch"], group["value"], marker="o", markersize=3, label=split)
        if zero_error_epoch is not None:
            ax.axvline(zero_error_epoch, label="zero train error", **ZERO_ERROR_STYLE)
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("log")
    shared_legend(fig, axes)
    if title:
        fig.suptitle(title)
    return _save(fig, path)
