"""Figures of paper 000's experiments, drawn from a run's stored results only."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from collapselab.experiments.fd.results import trajectory
from collapselab.report import save_run_figure
from collapselab.store import Run

__all__ = [
    "DIRECTION_CAPTIONS",
    "OPERATION_CAPTIONS",
    "ROBUSTNESS_CAPTIONS",
    "TWO_PHASE_CAPTIONS",
    "draw_directions",
    "draw_operations",
    "draw_robustness",
    "draw_two_phase",
    "mark_phases",
]

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


_GROUP_TEXT = (
    "per sweep (rows), the training loss, M2 (cross-class feature cosine) and M3 "
    "(within-class gradient cosine) of the third linear layer for every arm, and the "
    "phase-1 length of each arm (the end of its loss plateau; hatched: the run never left "
    "phase 1 within its budget, drawn at the budget)."
)
OPERATION_CAPTIONS = {
    "operations": "Fig. 8, S-Fig. 24, 28-29, the four operations and stuck vs unstuck: "
    + _GROUP_TEXT
}
ROBUSTNESS_CAPTIONS = {
    "robustness": "Appendix A.1-A.11, robustness of the two phases: " + _GROUP_TEXT
}


def _draw_groups(run: Run, name: str) -> None:
    groups = run.manifest.get("groups") or {}
    layer = int(run.manifest.get("phase_layer", 3)) - 1
    fig, axes = plt.subplots(
        max(len(groups), 1),
        4,
        figsize=(13, 2.7 * max(len(groups), 1)),
        squeeze=False,
        constrained_layout=True,
    )
    for row, (group_name, pairs) in zip(axes, groups.items(), strict=False):
        colours = plt.cm.plasma(np.linspace(0.05, 0.8, len(pairs)))
        lengths, censored, labels = [], [], []
        for (value, arm), colour in zip(pairs, colours, strict=True):
            stored = trajectory(run, arm)
            steps, label = stored["steps"], f"{value}"
            row[0].plot(steps, stored["loss"], color=colour, linewidth=1, label=label)
            row[1].plot(
                steps, stored["feature_cosine_cross_class"][:, layer], color=colour, linewidth=1
            )
            row[2].plot(
                steps, stored["gradient_cosine_within_class"][:, layer], color=colour, linewidth=1
            )
            lengths.append(float(stored["phase_phase1_length"]))
            censored.append(float(stored["phase_left_phase1"]) == 0)
            labels.append(label)
        bars = row[3].bar(range(len(lengths)), lengths, color=colours)
        for bar, cut in zip(bars, censored, strict=True):
            if cut:
                bar.set_hatch("//")
        row[3].set_xticks(range(len(labels)), labels, fontsize="x-small")
        row[0].legend(
            fontsize="x-small", title=group_name.replace("_", " "), title_fontsize="x-small"
        )
        for ax, title in zip(
            row, ("loss", "M2 cross-class", "M3 within-class", "phase-1 length"), strict=True
        ):
            ax.set_title(f"{group_name}: {title}", fontsize="small")
        for ax in row[:3]:
            ax.set_xlabel("iteration")
    save_run_figure(run, fig, name)


def draw_operations(run: Run) -> None:
    """``operations.png`` from the stored sweep groups."""
    _draw_groups(run, "operations")


def draw_robustness(run: Run) -> None:
    """``robustness.png`` from the stored sweep groups."""
    _draw_groups(run, "robustness")


DIRECTION_CAPTIONS = {
    "directions": (
        "Figs 4-7, Table 1 over the detected phase 1 of the baseline: (a) strengths s_i of "
        "the top-5 common directions of the probe-mean weight change of the third linear "
        "layer, for the two leading classes (Fig. 4); (b) Theorem 1's S_primary (solid) and "
        "S_1..S_3 (dotted) against the layer (Table 1); (c) cos(α_c ΔV, F) with ΔV from the "
        "actual mini-batch update, class mean ± std over the window (Fig. 5); (d) o^(l) in "
        "its three ΔF readings, mean ± std over the probe samples (Fig. 6); (e) per-class "
        "probe accuracy at the end of phase 1, dotted: chance, dashed: twice chance (Fig. "
        "7); (f) the largest singular values of ε (Lemma 2) of the third layer over the "
        "window (R12)."
    ),
}


def draw_directions(run: Run) -> None:
    """``directions.png`` from ``arrays/directions.npz`` (nothing when the baseline never
    left phase 1: the report says so)."""
    if "directions" not in run.array_names():
        return
    d = run.load_array("directions")
    window, leading = d["window"], [int(c) for c in d["leading"]]
    colours = ("tab:blue", "tab:orange")
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5), constrained_layout=True)
    (a, b, c), (o, e, f) = axes
    k = d["strengths"].shape[1]
    for i, cls in enumerate(leading):
        a.bar(
            np.arange(k) + 0.4 * i,
            d["strengths"][i],
            width=0.4,
            color=colours[i],
            label=f"class {cls}",
        )
        b.plot(
            d["table_layers"],
            d["s_primary"][i],
            "-o",
            color=colours[i],
            label=f"class {cls}: S_primary",
        )
        for j in range(d["s_noise"].shape[2]):
            b.plot(d["table_layers"], d["s_noise"][i][:, j], ":", color=colours[i])
        c.plot(window, d["m10_mean"][i], color=colours[i], label=f"class {cls}")
        c.fill_between(
            window,
            d["m10_mean"][i] - d["m10_std"][i],
            d["m10_mean"][i] + d["m10_std"][i],
            color=colours[i],
            alpha=0.2,
        )
    a.set_title("(a) s_i, Fig. 4", fontsize="small")
    a.set_xticks(np.arange(k) + 0.2, [f"C{i + 1}" for i in range(k)])
    b.set_yscale("log")
    b.set_title("(b) S_primary, S_k by layer, Table 1", fontsize="small")
    b.set_xlabel("linear layer l")
    c.set_title("(c) cos(α_c ΔV, F), Fig. 5", fontsize="small")
    c.axhline(0, color="grey", linewidth=0.5)
    for mode, colour in (
        ("neg_grad", "tab:green"),
        ("single_sample_step", "tab:purple"),
        ("batch_step", "tab:red"),
    ):
        mean, std = d[f"o_{mode}_mean"], d[f"o_{mode}_std"]
        o.plot(window, mean, color=colour, label=mode)
        o.fill_between(window, mean - std, mean + std, color=colour, alpha=0.15)
    o.axhline(0, color="grey", linewidth=0.5)
    o.set_title("(d) o^(l) by ΔF reading, Fig. 6", fontsize="small")
    acc = d["class_accuracy"]
    e.bar(
        range(acc.size),
        acc,
        color=["tab:blue" if i in leading else "grey" for i in range(acc.size)],
    )
    e.axhline(1 / acc.size, color="black", linestyle=":", linewidth=1)
    e.axhline(2 / acc.size, color="black", linestyle="--", linewidth=1)
    e.set_title("(e) per-class accuracy at the phase end, Fig. 7", fontsize="small")
    e.set_xlabel("class")
    f.plot(window, d["eps_singular_values"], linewidth=1)
    f.set_title("(f) singular values of ε, third layer", fontsize="small")
    for ax in (c, o, f):
        ax.set_xlabel("iteration")
    for ax in (a, b, c, o):
        ax.legend(fontsize="x-small")
    save_run_figure(run, fig, "directions")
