"""Figures of paper 001's experiments, drawn from a run's stored results only.

Every ``draw_*`` function reads the run's metric table and ``arrays/*.npz`` and writes
``figures/<name>.png``; nothing is recomputed, so ``collapselab report`` can redraw them.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd

from collapselab.experiments.claims import RunResults
from collapselab.experiments.pfc._common import PFC_LABELS
from collapselab.metrics import PFC_KEYS
from collapselab.report import (
    panel_grid,
    place_legends,
    plot_comparison,
    plot_panels,
    plot_training_curves,
    plot_vs_depth,
    save_run_figure,
    shared_legend,
)
from collapselab.store import Run

__all__ = [
    "draw_lambda_sweep",
    "draw_mufm",
    "draw_theorems",
    "draw_toy",
    "draw_training",
]

_SHORT = {"nc1_trace_ratio": "PFC1", "nc2_etf_distance": "PFC2", "ncc_accuracy": "PFC3"}
_CLASS_COLOURS = plt.get_cmap("tab10").colors


# ---------------------------------------------------------------------------------------
# Fig. 1


def draw_toy(run: Run) -> None:
    """``figures/toy.png``: 2-D trajectories to the ETF means, and PFC1-3 along t (Fig. 1)."""
    a = run.load_array("toy")
    h0, h1, y, t = a["h0"], a["h1"], a["labels"], a["t"]
    # The trajectories on the left, PFC1-3 along t stacked on the right (fits the report).
    fig = plt.figure(figsize=(10.0, 7.5), constrained_layout=True)
    grid = fig.add_gridspec(3, 2, width_ratios=[1.5, 1])
    ax = fig.add_subplot(grid[:, 0])
    marks = np.linspace(0.0, 1.0, 5)
    for i in range(y.size):
        colour = _CLASS_COLOURS[int(y[i]) % 10]
        ax.plot(*np.stack([h0[i], h1[i]]).T, "-", color=colour, alpha=0.5, linewidth=1)
        points = (1 - marks)[:, None] * h0[i] + marks[:, None] * h1[i]
        ax.scatter(*points.T, color=colour, s=12 + 40 * marks, alpha=0.35 + 0.6 * marks, zorder=3)
    means = np.stack([h1[y == k][0] for k in np.unique(y)])
    closed = np.vstack([means, means[:1]])
    ax.plot(*closed.T, "k--", linewidth=0.8, label="simplex ETF (t = 1)")
    ax.scatter(*means.T, marker="*", s=220, color="k", zorder=4)
    ax.set_aspect("equal")
    ax.set_title(f"h(t) = (1-t) h(0) + t h(1);  S = {float(a['s']):.3g}", fontsize="medium")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.06), frameon=False)
    for j, key in enumerate(PFC_KEYS):
        axm = fig.add_subplot(grid[j, 1])
        values = a[f"curve_{key}"]
        if key == "nc1_trace_ratio":
            keep = values > 0
            axm.semilogy(t[keep], values[keep], color="tab:blue")
        else:
            axm.plot(t, values, color="tab:blue")
        axm.scatter(marks, np.interp(marks, t, values), color="tab:green", zorder=3, s=18)
        if j == len(PFC_KEYS) - 1:
            axm.set_xlabel("t (depth along the line)")
        axm.set_title(PFC_LABELS[key], fontsize="medium")
        axm.grid(alpha=0.3)
    fig.suptitle("Fig. 1: progressive collapse along straight-line trajectories (2-D toy)")
    save_run_figure(run, fig, "toy")


# ---------------------------------------------------------------------------------------
# Figs 2-3


def _layer_rows(metrics: pd.DataFrame, key: str) -> pd.DataFrame:
    rows = metrics[
        (metrics["metric"] == key)
        & (metrics["split"] == "train")
        & (metrics["layer"] != "")
        & (metrics["epoch"] >= 0)
    ]
    return rows.drop_duplicates(subset=["epoch", "layer"], keep="last")


def _short_layer(name: str, index: int) -> str:
    return "layer0" if index == 0 else f"block {index} ({name})"


def _draw_over_epochs(run: Run, metrics: pd.DataFrame, layers: list[str], zero: int | None):
    rows, cols, width = panel_grid(len(PFC_KEYS), 3.8)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, 3.4), constrained_layout=True)
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, len(layers)))
    for ax, key in zip(axes, PFC_KEYS, strict=True):
        rows = _layer_rows(metrics, key)
        for i, name in enumerate(layers):
            curve = rows[rows["layer"] == name].sort_values("epoch")
            x, v = curve["epoch"].to_numpy(), curve["value"].to_numpy()
            if key == "nc1_trace_ratio":
                keep = v > 0
                x, v = x[keep], v[keep]
            ax.plot(x, v, "-", color=colours[i], label=_short_layer(name, i), linewidth=1.3)
        ax.set_xscale("symlog", linthresh=1.0)
        if key == "nc1_trace_ratio":
            ax.set_yscale("log")
        if zero is not None:
            ax.axvline(zero, color="red", linestyle=":", linewidth=1.3, label="zero train error")
        ax.set_xlabel("epoch (0 = initialization)")
        ax.set_title(PFC_LABELS[key], fontsize="medium")
        ax.grid(alpha=0.3)
    shared_legend(fig, axes)
    fig.suptitle(f"Fig. 2: PFC metrics of each layer over training ({run.preset})")
    save_run_figure(run, fig, "pfc_over_epochs")


def draw_training(run: Run) -> None:
    """``pfc_over_epochs.png`` (Fig. 2), ``pfc_vs_depth.png`` (Fig. 3), ``training.png``."""
    metrics = run.metrics()
    results = RunResults(metrics, run.manifest)
    zero = results.zero_error_epoch()
    geo = run.load_array("geodesic")
    layers = [str(s) for s in geo["layers"]]
    _draw_over_epochs(run, metrics, layers, zero)
    observed = {}
    last = int(_layer_rows(metrics, PFC_KEYS[0])["epoch"].max())
    for key in PFC_KEYS:
        rows = _layer_rows(metrics, key)
        rows = rows[rows["epoch"] == last].set_index("layer")["value"]
        observed[key] = (geo["positions"], rows.loc[layers].to_numpy())
    s_rows = metrics[(metrics["metric"] == "theorem1_s") & (metrics["layer"] == "")]
    s_text = f"; Theorem 1's S = {s_rows['value'].iloc[-1]:.3g}" if len(s_rows) else ""
    plot_vs_depth(
        observed,
        run.figure_path("pfc_vs_depth"),
        list(PFC_KEYS),
        prediction={key: (geo["t"], geo[f"curve_{key}"]) for key in PFC_KEYS},
        prediction_label="geodesic prediction",
        logy={"nc1_trace_ratio": True},
        xlabel="relative position pos(l)",
        title=f"Fig. 3: PFC metrics at the final epoch ({last}) against depth{s_text}",
    )
    plot_training_curves(
        metrics, run.figure_path("training"), zero_error_epoch=zero, title="loss and accuracy"
    )


# ---------------------------------------------------------------------------------------
# Figs 4-5


def _value(metrics: pd.DataFrame, key: str, layer: str) -> float:
    rows = metrics[(metrics["metric"] == key) & (metrics["layer"] == layer)]
    return float(rows["value"].iloc[-1]) if len(rows) else float("nan")


def draw_mufm(run: Run) -> None:
    """``figures/ufm_vs_mufm.png``: PFC1-3 of UFM and MUFM solutions vs the data (Fig. 4)."""
    metrics = run.metrics()
    items = {
        "UFM\nliteral": "ufm_literal",
        "UFM\nconverged": "ufm_converged",
        "MUFM\nliteral": "mufm_literal",
        "MUFM\nconverged": "mufm_converged",
    }
    values = {
        _SHORT[key]: {label: _value(metrics, key, layer) for label, layer in items.items()}
        for key in PFC_KEYS
    }
    plot_comparison(
        values,
        run.figure_path("ufm_vs_mufm"),
        reference={_SHORT[key]: _value(metrics, key, "data") for key in PFC_KEYS},
        reference_label="data X",
        logy={"PFC1": True, "PFC2": True},
        title="Fig. 4: UFM and MUFM optima (literal GD and converged L-BFGS) vs the data",
    )


def draw_lambda_sweep(run: Run) -> None:
    """``figures/lambda_sweep.png``: PFC1-3 and alignment against λ/λ_W (Fig. 5)."""
    a = run.load_array("sweep")
    ratio = a["ratio"]
    ends = ratio[[0, -1]]
    panels: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for key in (*PFC_KEYS, "alignment"):
        name = _SHORT.get(key, "alignment ||H/||H|| - X/||X|| ||")
        curves = {
            "MUFM converged": (ratio, a[f"converged_{key}"]),
            "MUFM literal GD": (ratio, a[f"literal_{key}"]),
        }
        if key in PFC_KEYS:
            value = float(a[f"data_{key}"])
            curves["data X"] = (ends, np.array([value, value]))
        panels[name] = curves
    plot_panels(
        panels,
        run.figure_path("lambda_sweep"),
        x="λ/λ_W",
        logx=True,
        ncols=2,
        suptitle="Fig. 5: MUFM optima against λ/λ_W (λ_W fixed)",
        panel_size=(4.4, 3.0),
    )


# ---------------------------------------------------------------------------------------
# theorems


def draw_theorems(run: Run) -> None:
    """``figures/theorems.png``: the four checks, one panel each."""
    metrics = run.metrics()
    t1, t2, t4 = run.load_array("theorem1"), run.load_array("theorem2"), run.load_array("theorem4")
    fig, axes = plt.subplots(2, 2, figsize=(10.0, 7.6), constrained_layout=True)
    axes = axes.ravel()
    ax = axes[0]
    mono = t1["monotone"].astype(bool)
    ax.scatter(t1["s"][mono], t1["max_rise"][mono], s=6, color="tab:blue", label="monotone")
    ax.scatter(t1["s"][~mono], t1["max_rise"][~mono], s=6, color="tab:red", label="not monotone")
    ax.axvline(0.0, color="k", linewidth=0.8)
    ax.set_xscale("symlog", linthresh=1e-2)
    ax.set_yscale("symlog", linthresh=1e-6)
    # Every other decade only: the default ticks of a symlog axis overlap in a panel.
    ax.xaxis.set_major_locator(mticker.SymmetricalLogLocator(base=100, linthresh=1e-2))
    ax.yaxis.set_major_locator(mticker.SymmetricalLogLocator(base=100, linthresh=1e-6))
    ax.set_xlabel("S = Σ_k <h̃_k(0), h̃_k(1)>")
    ax.set_ylabel("largest rise of PFC1 / PFC1(0)")
    ax.set_title("Theorem 1 (random instances)", fontsize="medium")
    ax = axes[1]
    ax.plot(t2["scales"], t2["fraction_monotone"], "o-", label="PFC2 monotone on [0, 1]")
    ax.plot(t2["scales"], t2["min_monotone_interval"], "s--", label="min final interval δ")
    ax.set_xscale("log")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("start distance ε from the ETF")
    ax.set_title("Theorem 2 (local)", fontsize="medium")
    ax = axes[2]
    labels = ["published (λ)", "corrected (λ/L)"]
    errors = [
        _value(metrics, "published_feature_error", "theorem3"),
        _value(metrics, "corrected_feature_error", "theorem3"),
    ]
    ax.bar(labels, errors, color=["tab:red", "tab:green"])
    ax.set_yscale("log")
    ax.set_ylabel("||H_(12) - H_(13)|| / ||H_(13)||")
    spacing = _value(metrics, "spacing_error", "theorem3")
    ax.set_title(f"Theorem 3 (spacing error {spacing:.1e})", fontsize="medium")
    ax = axes[3]
    ax.plot(t4["ts"], t4["pfc1"], "-", label="PFC1 along the flow (21)")
    ax.plot(1.0 / t4["lambdas"], t4["minimiser_pfc1"], "o", label="MUFM minimiser at t = 1/λ")
    ax.axhline(float(t4["data_pfc1"]), color="red", linewidth=1, label="data X")
    ax.set_xlabel("t")
    ax.set_title("Theorem 4 / Lemma 1", fontsize="medium")
    for ax in axes:
        ax.grid(alpha=0.3)
    place_legends(fig, axes)
    fig.suptitle("Numerical checks of Theorems 1-4")
    save_run_figure(run, fig, "theorems")
