"""Figures of paper 000's experiments, drawn from a run's stored results only."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from collapselab.experiments.fd._common import trajectory
from collapselab.report import save_run_figure
from collapselab.store import Run

__all__ = ["TWO_PHASE_CAPTIONS", "draw_two_phase", "mark_phases"]

TWO_PHASE_CAPTIONS = {
    "two_phase": (
        "Fig. 1-2: per dataset (rows), the training loss (on 100 samples per class), M2 (the "
        "cross-class feature cosine) and M3 (the within-class feature-gradient cosine) of "
        "every hidden layer (darker is deeper), and M4 (pseudo-neuron weight-change cosine) "
        "of the third linear layer from three weight-change sources: the actual mini-batch "
        "update, the probe-set mean, and the per-sample change (degenerate, identically 1 "
        "after ReLU: note A5). Dotted red line: the smoothed M2 peak of the third layer; "
        "dashed grey: the end of the loss plateau (5% below its start); shaded: the window "
        "replayed and measured every 2 iterations."
    ),
}


def mark_phases(ax: object, stored: dict) -> None:
    """The M2 peak (dotted red), the plateau end (dashed grey) and the dense window."""
    peak = float(stored["phase_m2_peak_step"])
    end = float(stored["phase_plateau_end"])
    if np.isfinite(peak):
        ax.axvline(peak, color="tab:red", linestyle=":", linewidth=1)
    if end >= 0:
        ax.axvline(end, color="grey", linestyle="--", linewidth=1)
    lo, hi = (int(v) for v in stored["dense_window"])
    if lo >= 0:
        ax.axvspan(lo, hi, color="tab:orange", alpha=0.12, linewidth=0)


def _layers_panel(ax: object, steps: np.ndarray, matrix: np.ndarray, title: str) -> None:
    n = matrix.shape[1]
    colours = plt.cm.viridis(np.linspace(0.9, 0.1, n))
    for j in range(n):
        ax.plot(steps, matrix[:, j], color=colours[j], linewidth=1, label=f"layer {j + 1}")
    ax.set_title(title, fontsize="small")
    ax.set_xlabel("iteration")


def draw_two_phase(run: Run) -> None:
    """``two_phase.png``: one row per dataset (loss, M2, M3, M4)."""
    arms = (run.manifest.get("arms") or {}).get("two_phase", [])
    layer = int(run.manifest.get("phase_layer", 3)) - 1
    fig, axes = plt.subplots(
        len(arms), 4, figsize=(13, 2.8 * len(arms)), squeeze=False, constrained_layout=True
    )
    for row, arm in zip(axes, arms, strict=True):
        stored = trajectory(run, arm)
        steps = stored["steps"]
        row[0].plot(steps, stored["loss"], color="black", linewidth=1)
        row[0].set_title(f"{arm}: training loss", fontsize="small")
        row[0].set_xlabel("iteration")
        _layers_panel(row[1], steps, stored["feature_cosine_cross_class"], "M2 cross-class")
        _layers_panel(row[2], steps, stored["gradient_cosine_within_class"], "M3 within-class")
        for key, colour in (
            ("m4_batch", "tab:blue"),
            ("m4_probe_mean", "tab:green"),
            ("m4_per_sample", "tab:grey"),
        ):
            row[3].plot(
                steps,
                stored[key][:, layer],
                color=colour,
                linewidth=1,
                label=key.removeprefix("m4_"),
            )
        row[3].set_title("M4, third linear layer", fontsize="small")
        row[3].set_xlabel("iteration")
        row[3].legend(fontsize="x-small")
        for ax in row:
            mark_phases(ax, stored)
    save_run_figure(run, fig, "two_phase")
