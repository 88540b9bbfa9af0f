"""Figures of the curvature experiments, drawn from a run's stored spectra and rows."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from collapselab.report import save_run_figure
from collapselab.store import Run

DPI = 110
FIGURES = ["spectra", "decomposition", "alignment"]
CAPTIONS = {
    "spectra": (
        "Top eigenvalues of each weight layer's Hessian (log scale, positive part) at every "
        "measured epoch, darker is later; the dotted line marks K² (paper 004's predicted "
        "outlier count), the dashed one K."
    ),
    "decomposition": (
        "Papyan's decomposition at the last measured epoch, per weight layer: the spectra of "
        "G, of its class part (K vectors), cross-class part (K² vectors) and within-class "
        "part, and of G with the class or the cross-class part knocked out."
    ),
    "alignment": (
        "Over training, per weight layer: f_top (share of the gradient in the top-K Hessian "
        "eigenspace), the mean alignment a(v) of the K² Kronecker vectors of adjacent class "
        "means (linear layers), and λ1(G_within)/λ1(G)."
    ),
}


def _steps(run: Run) -> list[dict[str, np.ndarray]]:
    names = sorted(n for n in run.array_names() if n.startswith("curvature_step"))
    return [run.load_array(n) for n in names]


def _layers(arrays: dict[str, np.ndarray]) -> list[str]:
    seen: list[str] = []
    for key in arrays:
        if ":" in key and key.split(":")[0] not in seen:
            seen.append(key.split(":")[0])
    return seen


def draw(run: Run) -> None:
    """Draw :data:`FIGURES` from the stored arrays and rows (no training)."""
    steps = _steps(run)
    if not steps:
        return
    K = int((run.manifest.get("curvature") or {}).get("n_classes", 0))
    layers = _layers(steps[-1])
    _spectra(run, steps, layers, K)
    _decomposition(run, steps[-1], layers)
    _alignment(run, layers)


def _grid(n: int) -> tuple[Any, np.ndarray]:
    cols = min(n, 4)
    rows = -(-n // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.4 * cols, 2.9 * rows), squeeze=False, constrained_layout=True
    )
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes.flat


def _positive(values: np.ndarray) -> np.ndarray:
    values = np.sort(np.asarray(values, dtype=float))[::-1]
    return np.where(values > 0, values, np.nan)


def _spectra(run: Run, steps: list[dict[str, np.ndarray]], layers: list[str], K: int) -> None:
    fig, axes = _grid(len(layers))
    colors = plt.cm.viridis(np.linspace(0.15, 0.9, len(steps)))
    for ax, layer in zip(axes, layers, strict=False):
        for color, arrays in zip(colors, steps, strict=True):
            key = f"{layer}:hessian_eigenvalues"
            if key in arrays:
                vals = _positive(arrays[key])
                ax.semilogy(
                    np.arange(1, vals.size + 1),
                    vals,
                    ".-",
                    color=color,
                    ms=3,
                    lw=0.8,
                    label=f"epoch {int(arrays['epoch'])}",
                )
        if K:
            ax.axvline(K, color="grey", ls="--", lw=0.8)
            ax.axvline(K * K, color="grey", ls=":", lw=0.8)
        ax.set_title(layer, fontsize=9)
        ax.set_xlabel("index")
    axes[0].set_ylabel("Hessian eigenvalue")
    _legend(axes[0])
    save_run_figure(run, fig, "spectra", dpi=DPI)


def _legend(ax: Any) -> None:
    """A legend where something was drawn: a run that stored no spectra (its
    ``curvature_keys`` without them) leaves the panels empty, without a warning."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


_PARTS = [
    ("ggn_eigenvalues", "G", "k"),
    ("papyan_class_eigenvalues", "G_class", "tab:blue"),
    ("papyan_cross_eigenvalues", "G_cross", "tab:orange"),
    ("papyan_within_eigenvalues", "G_within", "tab:green"),
    ("ggn_without_class_eigenvalues", "G − G_class", "tab:purple"),
    ("ggn_without_cross_eigenvalues", "G − G_cross", "tab:red"),
]


def _decomposition(run: Run, arrays: dict[str, np.ndarray], layers: list[str]) -> None:
    fig, axes = _grid(len(layers))
    for ax, layer in zip(axes, layers, strict=False):
        for key, label, color in _PARTS:
            if f"{layer}:{key}" in arrays:
                vals = _positive(arrays[f"{layer}:{key}"])
                ax.semilogy(
                    np.arange(1, vals.size + 1),
                    vals,
                    ".-",
                    ms=2.5,
                    lw=0.8,
                    color=color,
                    label=label,
                )
        ax.set_title(f"{layer} (epoch {int(arrays['epoch'])})", fontsize=9)
        ax.set_xlabel("index")
    axes[0].set_ylabel("eigenvalue")
    _legend(axes[0])
    save_run_figure(run, fig, "decomposition", dpi=DPI)


def _alignment(run: Run, layers: list[str]) -> None:
    table = run.metrics()
    rows = table[table["split"] == "train"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2), constrained_layout=True)
    for layer in layers:
        mine = rows[rows["layer"] == layer]

        def series(metric: str, mine: Any = mine) -> tuple[np.ndarray, np.ndarray]:
            sel = mine[mine["metric"] == metric].sort_values("step")
            return sel["epoch"].to_numpy(), sel["value"].to_numpy()

        axes[0].plot(*series("gradient_fraction_top"), "o-", ms=3, label=layer)
        epochs, align = series("kronecker_alignment_mean")
        if epochs.size:
            axes[1].plot(epochs, align, "o-", ms=3, label=layer)
        e1, within = series("papyan_within_top")
        e2, top = series("ggn_top_eigenvalue")
        if e1.size and e1.size == e2.size:
            axes[2].semilogy(e1, within / top, "o-", ms=3, label=layer)
    for ax, title in zip(
        axes, ["f_top", "Kronecker alignment (mean a(v))", "λ1(G_within) / λ1(G)"], strict=True
    ):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("epoch")
    axes[0].set_ylim(-0.02, 1.02)
    _legend(axes[0])
    save_run_figure(run, fig, "alignment", dpi=DPI)
