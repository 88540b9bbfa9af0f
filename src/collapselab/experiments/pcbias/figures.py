"""Figures of paper 002's experiments, drawn from a run's stored arrays only (so
``collapselab report`` can redraw them without training)."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from collapselab.report import save_run_figure, steps_on_log_axis
from collapselab.store import Run

__all__ = [
    "AMPLIFICATION_CAPTIONS",
    "CONVERGENCE_CAPTIONS",
    "FREQUENCY_CAPTIONS",
    "INIT_CAPTIONS",
    "LOC_CAPTIONS",
    "PROJECTION_CAPTIONS",
    "RELU_CAPTIONS",
    "SCALES_CAPTIONS",
    "SEPARABLE_CAPTIONS",
    "STVGG_CAPTIONS",
    "draw_amplification",
    "draw_convergence",
    "draw_frequency",
    "draw_init",
    "draw_loc",
    "draw_projections",
    "draw_relu",
    "draw_scales",
    "draw_separable",
    "draw_stvgg",
    "pc_picks",
]

_MEASURED, _PREDICTED = "-", "--"


def pc_picks(eigenvalues: np.ndarray, n: int = 6) -> np.ndarray:
    """``n`` PC indices spread log-uniformly over the PCs with a non-zero eigenvalue."""
    moving = int(np.sum(eigenvalues > 0))
    return np.unique(np.geomspace(1, moving, n).round().astype(int) - 1)


def _floor(ax, measured: np.ndarray) -> None:
    # Eq. 10 falls geometrically to 1e-20 and below; keep the measured curves readable.
    positive = measured[measured > 0]
    if positive.size:
        ax.set_ylim(bottom=0.1 * float(positive.min()))


def _std_over_steps(ax, d: dict[str, np.ndarray], title: str) -> None:
    x = steps_on_log_axis(d["steps"])
    for i, j in enumerate(pc_picks(d["eigenvalues"])):
        color = f"C{i}"
        ax.plot(x, d["std"][:, j], _MEASURED, color=color, label=f"PC {j + 1}")
        ax.plot(x, d["std_corrected"][:, j], _PREDICTED, color=color, lw=1)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="GD step + 1",
        ylabel="std of w̃_j over networks",
        title=title,
    )
    ax.legend(fontsize="small", title="measured (—), Eq. 10 (--)")
    ax.grid(alpha=0.3, which="both")
    _floor(ax, d["std"])


def _per_pc(axes, d: dict[str, np.ndarray], label: str) -> None:
    steps = d["steps"]
    picks = np.unique(np.linspace(0, len(steps) - 1, 5).round().astype(int))
    j = np.arange(1, d["std"].shape[1] + 1)
    for i, s in enumerate(picks):
        color = plt.cm.viridis(i / max(len(picks) - 1, 1))
        for ax, key in zip(axes, ("distance", "std"), strict=True):
            ax.plot(j, d[key][s], _MEASURED, color=color, label=f"step {steps[s]}")
            ax.plot(j, d[f"{key}_corrected"][s], _PREDICTED, color=color, lw=1)
    axes[0].set(ylabel="mean |W̃_1j − W̃opt_1j|", title=f"{label}: distance to the optimum")
    axes[1].set(ylabel="std of w̃_j over networks", title=f"{label}: across-network std")
    for ax, key in zip(axes, ("distance", "std"), strict=True):
        ax.set(xlabel="principal component j (largest first)", yscale="log")
        ax.grid(alpha=0.3, which="both")
        _floor(ax, d[key][picks])
    axes[0].legend(fontsize="small", title="measured (—), Eq. 10 (--)")


def draw_convergence(run: Run) -> None:
    """Figs. 2 (left), 4a and 4c and the closed form's error, from ``natural.npz`` and
    ``whitened.npz``."""
    natural, white = run.load_array("natural"), run.load_array("whitened")
    fig, ax = plt.subplots(figsize=(6.5, 4.5), constrained_layout=True)
    _std_over_steps(ax, natural, "Fig. 2 (left): deep linear nets, 6 PCs")
    save_run_figure(run, fig, "fig2_std_linear")
    for d, name, label in (
        (natural, "fig4a_per_pc", "Fig. 4a, natural data"),
        (white, "fig4c_whitened", "Fig. 4c, ZCA-whitened"),
    ):
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
        _per_pc(axes, d, label)
        save_run_figure(run, fig, name)
    fig, ax = plt.subplots(figsize=(6.5, 4.5), constrained_layout=True)
    for d, color, label in ((natural, "C0", "natural"), (white, "C1", "whitened")):
        x = steps_on_log_axis(d["steps"][1:])
        for variant, style in (("corrected", "-"), ("published", ":")):
            err = np.nanmean(d[f"error_{variant}"][:, 1:], axis=0)
            c = float(d[f"factor_{variant}"])
            ax.plot(x, err, style, color=color, label=f"{label}, {variant} (c = {c:.3g})")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="GD step + 1",
        ylabel="‖W̃_pred − W̃‖ / ‖W̃ − W̃⁰‖ (mean over networks)",
        title="Eq. 10 against gradient descent",
    )
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, which="both")
    save_run_figure(run, fig, "closed_form_error")


CONVERGENCE_CAPTIONS = {
    "fig2_std_linear": "Fig. 2 (left) analogue: across-network std of the compact matrix's "
    "column w̃_j (PC coordinates, mean over its K entries) against the GD step for six PCs, "
    "natural data; dashed: Eq. 10 (corrected, c = Σα_lβ_l) from the same initial weights. "
    "Leading PCs (larger d_j) lose their initial randomness first.",
    "fig4a_per_pc": "Fig. 4a analogue: per PC index, the distance of row 1 of W̃ to W̃_opt "
    "(left) and the across-network std (right) at five checkpoints; dashed: Eq. 10. The "
    "leading PCs converge first.",
    "fig4c_whitened": "Fig. 4c analogue: the same after ZCA whitening: every PC has the same "
    "eigenvalue, so every PC converges at the same rate (flat curves).",
    "closed_form_error": "Motion-relative error ‖W̃_pred − W̃‖/‖W̃ − W̃⁰‖ of Eq. 10 against the "
    "measured GD trajectory, mean over networks: corrected (c = Σα_lβ_l, exponent s) and as "
    "printed (c = L, exponent s − 1, which predicts no motion at step 1).",
}


def draw_scales(run: Run) -> None:
    """Fig. 3 from ``scales.npz``: relative diagonal deviation and off-diagonal size of
    ``A_l`` and ``B_l`` per recorded layer, mean ± std over networks."""
    d = run.load_array("scales")
    x = steps_on_log_axis(d["steps"])
    peak = float(x[int(d["peak"])])
    fig, axes = plt.subplots(2, 2, figsize=(12, 7), constrained_layout=True, sharex=True)
    for row, name in enumerate(("a", "b")):
        scale = "α" if name == "a" else "β"
        for col, part in enumerate(("diagonal", "offdiagonal")):
            ax = axes[row, col]
            values = d[f"{name}_{part}"]  # (N, S, layers)
            for j, ell in enumerate(d["layers"]):
                mean, std = values[:, :, j].mean(0), values[:, :, j].std(0)
                ax.plot(x, mean, color=f"C{j}", label=f"layer {ell}")
                ax.fill_between(x, mean - std, mean + std, color=f"C{j}", alpha=0.2)
            ax.axvline(peak, ls=":", color="k", lw=1, label="peak test accuracy")
            what = (
                f"mean |{name.upper()}_ii − {scale}_l| / {scale}_l"
                if part == "diagonal"
                else f"mean |{name.upper()}_ij| / {scale}_l, i ≠ j"
            )
            ax.set(xscale="log", ylabel=what, title=f"{name.upper()}_l: {part}")
            ax.grid(alpha=0.3, which="both")
    for ax in axes[1]:
        ax.set_xlabel("GD step + 1")
    axes[0, 0].legend(fontsize="small")
    save_run_figure(run, fig, "fig3_scales")


SCALES_CAPTIONS = {
    "fig3_scales": "Fig. 3 analogue: the gradient-scale matrices A_l (top) and B_l (bottom) of "
    "layers 2 and 4 of a 5-layer linear net: mean relative distance of the diagonal to Thm 3's "
    "α_l, β_l (left) and mean absolute off-diagonal entry over the scale (right), mean ± std "
    "over networks; dotted: the checkpoint of the peak mean test accuracy. Both stay near "
    "the scaled identity early; A departs towards convergence, B much less.",
}


def draw_init(run: Run) -> None:
    """Fig. 12 from ``def3.npz`` and ``glorot_uniform.npz``: train and test accuracy and the
    loss (mean ± std over networks) with Eq. 10's predictions over them (dashed; runs that
    stored them), and Eq. 10's error with both factors; below, where the run stored them
    (``sgd_<init>.npz``, issue 35 item 4), the train and test accuracy by the paper's
    protocol."""
    sgd = "sgd_def3" in run.array_names()  # runs stored before issue 35 item 4 have none
    rows = 2 if sgd else 1
    fig, grid = plt.subplots(rows, 4, figsize=(21, 4.5 * rows), constrained_layout=True)
    axes = grid[0] if sgd else grid
    for color, init, label in INIT_LINES:
        d = run.load_array(init)
        x = steps_on_log_axis(d["steps"])
        theory = f"{label}, Eq. 10 (c = {float(d['factor_corrected']):.3g})"
        for ax, key in zip(axes[:3], ("train_accuracy", "test_accuracy", "loss"), strict=True):
            mean, std = d[key].mean(0), d[key].std(0)
            ax.plot(x, mean, color=color, label=label)
            ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.2)
            predicted = d.get(f"predicted_{key}_corrected")
            if predicted is not None:
                ax.plot(x, predicted.mean(0), "--", color=color, lw=1.2, label=theory)
        for variant, style in (("corrected", "-"), ("published", ":")):
            err = np.nanmean(d[f"error_{variant}"][:, 1:], axis=0)
            c = float(d[f"factor_{variant}"])
            axes[3].plot(x[1:], err, style, color=color, label=f"{label}, c = {c:.3g}")
    titles = ("train accuracy", "test accuracy", "loss ½‖WX − Y‖² (Eq. 5)")
    for ax, title in zip(axes[:3], titles, strict=True):
        ax.set(xscale="log", xlabel="GD step + 1", ylabel=title, title=f"Fig. 12 (GD): {title}")
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3, which="both")
    axes[2].set_yscale("log")
    axes[3].set(
        xscale="log",
        yscale="log",
        xlabel="GD step + 1",
        ylabel="‖W̃_pred − W̃‖ / ‖W̃ − W̃⁰‖",
        title="Eq. 10 with c = Σα_lβ_l (—) or L (⋯)",
    )
    axes[3].legend(fontsize="small")
    axes[3].grid(alpha=0.3, which="both")
    if sgd:
        _draw_init_sgd(run, grid[1])
    save_run_figure(run, fig, "fig12_init")


INIT_LINES = (("C0", "def3", "Def. 3"), ("C3", "glorot_uniform", "Glorot uniform"))
"""Colour, array name and label of ``pcbias-init``'s two initialisations."""


def _draw_init_sgd(run: Run, axes) -> None:
    """Fig. 12 by the paper's protocol, from ``sgd_<init>.npz``: train and test accuracy
    (mean ± std over networks) against the SGD step, each init at its grid-searched rate,
    on the first two of ``axes`` (the others left empty)."""
    for color, init, label in INIT_LINES:
        d = run.load_array(f"sgd_{init}")
        x = steps_on_log_axis(d["steps"])
        for ax, key in zip(axes[:2], ("train_accuracy", "test_accuracy"), strict=True):
            mean, std = d[key].mean(0), d[key].std(0)
            ax.plot(x, mean, color=color, label=f"{label} (rate {float(d['chosen']):g})")
            ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.2)
    for ax, title in zip(axes[:2], ("train accuracy", "test accuracy"), strict=True):
        ax.set(xscale="log", xlabel="SGD step + 1", ylabel=title,
               title=f"Fig. 12 (paper's protocol, SGD): {title}")  # fmt: skip
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3, which="both")
    for ax in axes[2:]:
        ax.axis("off")


INIT_CAPTIONS = {
    "fig12_init": "Fig. 12 analogue: a wide one-hidden-layer linear net trained by full-batch GD "
    "at the same step with Def. 3 (blue) and Glorot uniform (red) initialisation: train and "
    "test accuracy and the squared loss (mean ± std over networks), dashed: the curves Eq. 10 "
    "predicts from each network's initial weights with the effective factor c = Σα_lβ_l "
    "(accuracy of the predicted compact matrix; the loss L* + ½Σ_j d_j λ_j^{2s}‖w̃_j⁰ − "
    "m_j/d_j‖², note 002 §2.3); right: the error of Eq. 10 with c = Σα_lβ_l (solid) and the "
    "paper's c = L (dotted). Under Def. 3 the two factors coincide; under Glorot only the "
    "effective one follows GD. These GD ensembles are the closed-form runs and the equal-step "
    "controls. Bottom row: Fig. 12 by the paper's protocol (App. C.1/D), the same networks "
    "trained by cross-entropy SGD with 0.5 dropout before the output layer, each "
    "initialisation at the learning rate its own grid search chose (legend): train and test "
    "accuracy, mean ± std over networks; def3-converges-faster and same-final-accuracy read "
    "these curves.",
}


def draw_relu(run: Run) -> None:
    """Fig. 2 (right) from ``relu.npz``: the std over networks of the component along ``a``
    of six PC columns, with the approximate dynamics' prediction for both constants."""
    d = run.load_array("relu")
    x = steps_on_log_axis(d["steps"])
    fig, ax = plt.subplots(figsize=(6.5, 4.5), constrained_layout=True)
    for i, j in enumerate(pc_picks(d["eigenvalues"])):
        color = f"C{i}"
        ax.plot(x, d["std"][:, j], _MEASURED, color=color, label=f"PC {j + 1}")
        ax.plot(x, d["std_corrected"][:, j], _PREDICTED, color=color, lw=1)
        ax.plot(x, d["std_published"][:, j], ":", color=color, lw=1)
    ax.set(xscale="log", yscale="log", xlabel="GD step + 1",
           ylabel="std over networks of aᵀw̃_j / ‖a‖",
           title="Fig. 2 (right): two-layer ReLU, 6 PCs")  # fmt: skip
    ax.legend(fontsize="small", title="GD (—), κ = 1/4 (--), 1/2 (⋯)")
    ax.grid(alpha=0.3, which="both")
    _floor(ax, d["std"])
    save_run_figure(run, fig, "fig2_std_relu")


RELU_CAPTIONS = {
    "fig2_std_relu": "Fig. 2 (right) analogue: two-layer ReLU nets (paired init, a fixed) on "
    "symmetric data: std over networks of the component along a of the first layer's PC "
    "column j, for six PCs; dashed: the approximate dynamics with κ = 1/4, dotted: with the "
    "printed 1/2. The leading PCs lose their initial randomness first.",
}


def draw_loc(run: Run) -> None:
    """Figs. 7a-b (LOC bars of the linear and, where stored, the ReLU nets, learning phases,
    the rate search) and Fig. 10 (real vs shuffled learning curves) from ``loc.npz``,
    ``rates.npz`` and ``labels.npz``."""
    d = run.load_array("loc")
    panels = [("", "Fig. 7a: learning-order constancy, one-layer linear nets")]
    if "nonlinear_pearson_natural" in d:  # runs from before Fig. 7b have the linear nets only
        panels.append(("nonlinear_", "Fig. 7b: the same, two-layer ReLU nets"))
    fig, axes = plt.subplots(1, len(panels) + 2, figsize=(6 * len(panels) + 11, 4.5),
                             constrained_layout=True)  # fmt: skip
    for ax, (prefix, title) in zip(axes, panels, strict=False):
        _loc_bars(ax, d, prefix, title)
    phases, search = axes[len(panels)], axes[len(panels) + 1]
    for color, condition in (("C0", "natural"), ("C1", "whitened")):
        window = d[f"window_{condition}"]
        x = steps_on_log_axis(d[f"steps_{condition}"])
        for k, style in enumerate(("-", "--")):
            phases.plot(x, d[f"accuracy_{condition}"][k], style, color=color,
                        label=f"{condition}, ensemble {k + 1}")  # fmt: skip
        phases.axvspan(x[window].min(), x[window].max(), color=color, alpha=0.08)
    phases.axhline(float(d["level"]), color="k", ls=":", lw=1, label="end of learning phase")
    phases.set(xscale="log", xlabel="SGD step + 1", ylabel="mean train accuracy",
               title="linear nets' learning phases (accessibility's window)")  # fmt: skip
    phases.legend(fontsize="small")
    rates = run.load_array("rates")
    setups = (("-o", "loc", "1 layer"), ("--s", "labels", "2 layers"),
              (":^", "nonlinear", "2 layers, ReLU"))  # fmt: skip
    for style, setup, name in setups:
        for color, condition in (("C0", "natural"), ("C1", "whitened")):
            key = f"{setup}_{condition}"
            if f"{key}_rates" not in rates:
                continue
            search.plot(rates[f"{key}_rates"], rates[f"{key}_errors"], style, color=color,
                        label=f"{name}, {condition}")  # fmt: skip
            search.plot(float(rates[f"{key}_chosen"]),
                        rates[f"{key}_errors"].min(), "k*", ms=10)  # fmt: skip
    search.set(xscale="log", xlabel="learning rate", ylabel="test error after the last epoch",
               title="the rate search (*: chosen)")  # fmt: skip
    search.legend(fontsize="small")
    for ax in axes:
        ax.grid(alpha=0.3)
    save_run_figure(run, fig, "fig7_loc")

    labels = run.load_array("labels")
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), constrained_layout=True, sharex=True)
    for col, condition in enumerate(("natural", "whitened")):
        for color, kind in (("C0", "real"), ("C3", "shuffled")):
            key = f"{condition}_{kind}"
            x = steps_on_log_axis(labels[f"{key}_steps"])
            axes[0, col].plot(x, labels[f"{key}_accuracy"].mean(0), color=color,
                              label=f"{kind} labels")  # fmt: skip
            axes[1, col].plot(x, labels[f"{key}_loss"].mean(0), color=color,
                              label=f"{kind} labels")  # fmt: skip
        axes[0, col].set(xscale="log", title=f"Fig. 10: {condition}")
        axes[1, col].set(xscale="log", xlabel="SGD step + 1")
        for ax in axes[:, col]:
            ax.legend(fontsize="small")
            ax.grid(alpha=0.3, which="both")
    axes[0, 0].set_ylabel("mean train accuracy")
    axes[1, 0].set_ylabel("mean train cross-entropy")
    save_run_figure(run, fig, "fig10_labels")


def _loc_bars(ax: Any, d: dict[str, np.ndarray], prefix: str, title: str) -> None:
    """LOC (Pearson) bars, natural vs whitened, all examples and the fastest 20%."""
    width = 0.35
    for i, (suffix, label) in enumerate((("", "all examples"), ("_fastest", "fastest 20%"))):
        values = [float(d[f"{prefix}pearson_{c}{suffix}"]) for c in ("natural", "whitened")]
        ax.bar(np.arange(2) + (i - 0.5) * width, values, width, label=label)
    ax.set_xticks(np.arange(2), ["natural", "ZCA-whitened"])
    ax.set(ylabel="LOC: Pearson r of two ensembles' accessibility", title=title)
    ax.axhline(0, color="k", lw=0.8)
    ax.legend(fontsize="small")


LOC_CAPTIONS = {
    "fig7_loc": "Fig. 7 analogue. (a) Learning-order constancy (Pearson r between the "
    "accessibility vectors of two independent ensembles of one-layer linear nets, SGD with "
    "dropout), natural vs ZCA-whitened data, on all examples and on the 20% fastest learned; "
    "(b) the same for two-layer ReLU nets (runs from before Fig. 7b lack this panel). Then the "
    "linear ensembles' mean train accuracy (shaded: the learning phase over which "
    "accessibility is averaged) and the grid search of the learning rate per setup.",
    "fig10_labels": "Fig. 10 analogue: two-layer linear nets (SGD with dropout) with real "
    "(blue) and shuffled (red) labels on natural (left) and whitened (right) data: train "
    "accuracy (top) and cross-entropy (bottom). The claims time the rise of the accuracy.",
}


def _draw_projected(run: Run, epochs: np.ndarray, pcs: np.ndarray, projected: np.ndarray,
                    title: str, name: str) -> None:  # fmt: skip
    """Fig. 5: mean ± std over networks of the test accuracy on each top-``P`` projection
    (``projected`` ``(N, E+1, len(pcs))``) against the epoch."""
    fig, ax = plt.subplots(figsize=(6.5, 4.5), constrained_layout=True)
    for j, p in enumerate(pcs):
        acc = projected[:, :, j]
        ax.plot(epochs, acc.mean(0), color=f"C{j}", label=f"P = {int(p)}")
        ax.fill_between(epochs, acc.mean(0) - acc.std(0), acc.mean(0) + acc.std(0),
                        color=f"C{j}", alpha=0.15)  # fmt: skip
    ax.set(xlabel="epoch", ylabel="test accuracy on the top-P projection", title=title)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    save_run_figure(run, fig, name)


def draw_projections(run: Run) -> None:
    """Fig. 5, Fig. 6a-b and Table 1 from ``projections.npz``; Fig. 1 from
    ``pca_images.npz`` when the run stored it (image data, runs since Fig. 1 was added)."""
    d = run.load_array("projections")
    title = "Fig. 5: ReLU MLPs evaluated on PC projections"
    _draw_projected(run, d["epochs"], d["pcs"], d["projected_nonlinear"], title, "fig5_projections")

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), constrained_layout=True)
    access = d["accessibility_nonlinear"]
    axes[0].plot(d["accessibility_linear"], access, ".", ms=2, alpha=0.4)
    axes[0].set(xlabel="accessibility, linear twins", ylabel="accessibility, ReLU MLPs",
                title="Fig. 6a: linear vs non-linear")  # fmt: skip
    axes[1].errorbar(d["binned_scores"], d["binned_means"], yerr=d["binned_sems"], fmt=".",
                     ms=3, alpha=0.5, label="mean ± SE per critical PC")  # fmt: skip
    axes[1].plot(d["binned_scores"], d["binned_smoothed"], "k-", label="moving average (10)")
    axes[1].set(xscale="log", xlabel="critical principal component",
                ylabel="accessibility (ReLU MLPs)", title="Fig. 6b: critical PC")  # fmt: skip
    axes[1].legend(fontsize="small")
    for key, label, color in (("disc_raw", "raw inputs", "C0"),
                              ("disc_penultimate", "penultimate layer", "C1")):  # fmt: skip
        axes[2].plot(d[key], access, ".", ms=2, alpha=0.3, color=color, label=label)
    axes[2].set(xlabel="discriminability (k-NN same-class fraction)", ylabel="accessibility",
                title="Table 1: accessibility vs discriminability")  # fmt: skip
    axes[2].legend(fontsize="small")
    for ax in axes:
        ax.grid(alpha=0.3)
    save_run_figure(run, fig, "fig6_accessibility")
    if "pca_images" in run.array_names():  # image data, stored since Fig. 1 was added
        _draw_pca_images(run, run.load_array("pca_images"))


def _shown(image: np.ndarray, low: float, high: float) -> np.ndarray:
    """A ``(C, H, W)`` image scaled to ``[0, 1]`` by the original's range: ``(H, W)`` grey,
    ``(H, W, 3)`` colour."""
    scaled = np.clip((image - low) / max(high - low, 1e-12), 0.0, 1.0)
    return scaled[0] if scaled.shape[0] == 1 else scaled.transpose(1, 2, 0)


def _draw_pca_images(run: Run, d: dict[str, np.ndarray]) -> None:
    """Fig. 1 from ``pca_images.npz``: originals, top-P PC reconstructions, low-pass."""
    rows = (("original", "original"), ("projected", f"top {int(d['pcs'])} PCs"),
            ("lowpass", f"low-pass, {int(d['lowpass_coefficients'])} coefficients"))  # fmt: skip
    n = len(d["labels"])
    fig, axes = plt.subplots(3, n, figsize=(2.2 * n, 6.9), constrained_layout=True,
                             squeeze=False)  # fmt: skip
    for col in range(n):
        low, high = float(d["original"][col].min()), float(d["original"][col].max())
        for row, (key, label) in enumerate(rows):
            ax = axes[row, col]
            ax.imshow(_shown(d[key][col], low, high), cmap="gray", vmin=0, vmax=1)
            ax.set(xticks=[], yticks=[])
            if col == 0:
                ax.set_ylabel(label)
        title = f"test image {int(d['indices'][col])}, class {int(d['labels'][col])}"
        axes[0, col].set_title(title, fontsize="small")
    save_run_figure(run, fig, "fig1_pca_vs_lowpass")


PROJECTION_CAPTIONS = {
    "fig5_projections": "Fig. 5 analogue: ReLU MLPs trained on the original data, evaluated "
    "after every epoch on the test set projected onto its top P principal components (mean ± "
    "std over networks). Few PCs: the accuracy peaks early and declines; more PCs: later.",
    "fig1_pca_vs_lowpass": "Fig. 1 analogue: test images as the networks see them "
    "(standardised; top row), reconstructed from the top P = 20 principal components of the "
    "training images (middle; m + U_P U_Pᵀ(x − m)) and low-pass filtered by a 2-D DFT keeping "
    "the lowest frequencies, at least as many real coefficients per image as PCs (bottom; "
    "21 for 20 on grey images: whole rings of frequencies). Both keep the coarse shape and "
    "lose the fine detail.",
    "fig6_accessibility": "Left, Fig. 6a: accessibility of every training example for the ReLU "
    "MLPs against their linear twins. Middle, Fig. 6b: accessibility against the critical "
    "principal component (mean ± SE per value, moving average of 10). Right, Table 1: "
    "accessibility against the k-NN discriminability of the raw inputs and of the "
    "penultimate-layer features.",
}


def draw_amplification(run: Run) -> None:
    """Fig. 9 from ``amplification.npz``: mean test accuracy per epoch, three conditions."""
    d = run.load_array("amplification")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    names = {"none": "natural", "top": "top 1.5% PCs x10", "bottom": "bottom 1.5% PCs x10"}
    for ax, kind in zip(axes, ("nonlinear", "linear"), strict=True):
        for color, (condition, name) in zip(("k", "C0", "C3"), names.items(), strict=True):
            test = d[f"{kind}_{condition}_test"].mean(0)
            benefit = float(d[f"benefit_{kind}_{condition}"])
            ax.plot(d["epochs"], test, color=color, label=f"{name} (benefit {benefit:.3f})")
            ax.plot(int(d[f"best_{kind}_{condition}"]), test.max(), "o", color=color, ms=4)
        ax.set(
            xlabel="epoch",
            ylabel="mean test accuracy",
            title=f"Fig. 9: {'ReLU MLPs' if kind == 'nonlinear' else 'linear twins'}",
        )
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
    save_run_figure(run, fig, "fig9_amplification")


def draw_separable(run: Run) -> None:
    """Fig. 11 from ``separable.npz``: mean train accuracy per epoch for every P."""
    d = run.load_array("separable")
    fig, ax = plt.subplots(figsize=(6.5, 4.5), constrained_layout=True)
    for i, p in enumerate(d["pcs"]):
        for labels, style in (("real", "-"), ("shuffled", "--")):
            train = d[f"{labels}_P{int(p)}_train"].mean(0)
            ax.plot(d["epochs"], train, style, color=f"C{i}", label=f"P = {int(p)}, {labels}")
    ax.set(xlabel="epoch", ylabel="mean train accuracy",
           title="Fig. 11: P-separable relabelled data")  # fmt: skip
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    save_run_figure(run, fig, "fig11_separable")


AMPLIFICATION_CAPTIONS = {
    "fig9_amplification": "Fig. 9 analogue: mean test accuracy per epoch of ReLU MLPs (left) "
    "and linear twins (right) on natural data and with the top or bottom 1.5% of the PCs "
    "amplified by 10 (then renormalised); dots: the peak; the legend gives the early-stopping "
    "benefit (peak minus final accuracy).",
}
SEPARABLE_CAPTIONS = {
    "fig11_separable": "Fig. 11 analogue: mean train accuracy per epoch of ReLU MLPs on data "
    "relabelled to be linearly separable in its top P PCs, from the true labels (solid) and "
    "from shuffled labels (dashed).",
}


def draw_frequency(run: Run) -> None:
    """Fig. 8 (accessibility and discriminability per critical frequency), Fig. 13
    (decision regions of one network) and Fig. 16 (the points of critical frequency 0 and
    1; only when the run stored the points) from ``frequency.npz``."""
    d = run.load_array("frequency")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    for ax, key, label in ((axes[0], "access_means", "mean accessibility"),
                           (axes[1], "disc_means", "mean discriminability (k-NN)")):  # fmt: skip
        ax.plot(d["scores"], d[key], "o-")
        ax.set(xlabel="critical frequency (terms of λ needed)", ylabel=label)
        ax.grid(alpha=0.3)
    axes[0].set_title("Fig. 8a: accessibility vs critical frequency")
    axes[1].set_title("Fig. 8b: discriminability vs critical frequency")
    save_run_figure(run, fig, "fig8_frequency")

    n = len(d["boundary_epochs"])
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 3.6), constrained_layout=True,
                             squeeze=False)  # fmt: skip
    lo, hi = d["standardised_box"]
    for ax, epoch, regions in zip(axes[0], d["boundary_epochs"], d["boundary"], strict=True):
        ax.imshow(regions.T, origin="lower", extent=(lo[0], hi[0], lo[1], hi[1]),
                  aspect="auto", cmap="coolwarm", alpha=0.6, vmin=0, vmax=1)  # fmt: skip
        ax.plot(d["curve_x1"], d["curve_x2"], "k-", lw=1)
        ax.set(xlim=(lo[0], hi[0]), ylim=(lo[1], hi[1]), title=f"epoch {int(epoch)}",
               xlabel="x₁ (standardised)")  # fmt: skip
    axes[0, 0].set_ylabel("x₂ (standardised)")
    save_run_figure(run, fig, "fig13_boundaries")
    if {"points", "labels", "kappa", "domain_x1", "partial_sums"} <= set(d):
        _draw_critical_points(run, d)  # runs stored before these arrays: no Fig. 16


def _draw_critical_points(run: Run, d: dict[str, np.ndarray]) -> None:
    """Fig. 16: the training points of critical frequency ``κ_1`` and ``κ_2`` (1 and 2 terms),
    the rest faint, with the partial sum that classifies them and the full boundary."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True, sharey=True)
    points, critical, labels = d["points"], d["critical"], d["labels"]
    for ax, terms, letter in zip(axes, (1, 2), "ab", strict=True):
        chosen = critical == terms
        ax.scatter(*points[~chosen].T, s=3, color="0.78", lw=0)
        for value, color, name in ((1, "C0", "y = 1 (below λ)"), (0, "C3", "y = 0")):
            mine = chosen & (labels == value)
            ax.scatter(*points[mine].T, s=5, color=color, lw=0, label=name)
        ax.plot(d["domain_x1"], d["partial_sums"][-1], "k-", lw=1, label="λ (all terms)")
        ax.plot(d["domain_x1"], d["partial_sums"][terms - 1], "k--", lw=1,
                label=f"partial sum of {terms} term{'s' * (terms > 1)}")  # fmt: skip
        title = f"({letter}) critical frequency {float(d['kappa'][terms - 1]):g}"
        ax.set(xlim=(-1, 1), ylim=(-2 * np.pi, 2 * np.pi), xlabel="x₁",
               title=f"{title}: {int(chosen.sum())} points")  # fmt: skip
        ax.legend(fontsize="small", loc="lower left")
    axes[0].set_ylabel("x₂")
    save_run_figure(run, fig, "fig16_critical_frequency")


FREQUENCY_CAPTIONS = {
    "fig8_frequency": "Fig. 8 analogue: mean accessibility (left) and mean k-NN "
    "discriminability (right) of the frequency dataset's training points per critical "
    "frequency (the number of sine terms of λ a classifier needs for the point).",
    "fig13_boundaries": "Fig. 13 analogue: one ReLU MLP's decision regions on the frequency "
    "dataset after several epochs; black: the true boundary x₂ = λ(x₁). The low frequencies "
    "are fitted first.",
    "fig16_critical_frequency": "Fig. 16 analogue: the training points of the frequency "
    "dataset (raw coordinates, the whole domain) whose critical frequency is (a) 0 and (b) 1, "
    "coloured by label, the other points faint; dashed: the partial sum of λ with that many "
    "terms (1: the line x₂ = sin φ₁ = 0; 2: adds sin(2πx₁ + φ₂)), solid: the full λ. "
    "Critical frequency 0: points that the first term already classifies and every longer "
    "partial sum keeps correct, far from the boundary.",
}


def draw_stvgg(run: Run) -> None:
    """Fig. 4d from ``stvgg.npz``: across-network std per PC of the linearised st-VGGs."""
    d = run.load_array("stvgg")
    fig, ax = plt.subplots(figsize=(6.5, 4.5), constrained_layout=True)
    j = np.arange(1, d["std"].shape[1] + 1)
    for i, e in enumerate(d["epochs"]):
        color = plt.cm.viridis(i / max(len(d["epochs"]) - 1, 1))
        ax.plot(j, d["std"][e], color=color, lw=1, label=f"epoch {int(e)}")
    ax.set(xscale="log", yscale="log", xlabel="principal component j (largest first)",
           ylabel="std of the linearised w̃_j over networks",
           title="Fig. 4d: linearised st-VGG")  # fmt: skip
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, which="both")
    save_run_figure(run, fig, "fig4d_stvgg")
    if "projected" in d:  # runs since Fig. 5a on st-VGG
        _draw_projected(run, d["epochs"], d["pcs"], d["projected"],
                        "Fig. 5a: st-VGGs evaluated on PC projections", "fig5_stvgg")  # fmt: skip


STVGG_CAPTIONS = {
    "fig4d_stvgg": "Fig. 4d analogue: st-VGGs (ReLU, max-pooling) linearised after every epoch "
    "(identity activations, average pooling): across-network std of the compact matrix's PC "
    "column j. The leading PCs move first; the lowest hardly change.",
    "fig5_stvgg": "Fig. 5a analogue on the paper's architecture: the same st-VGGs scored after "
    "every epoch on the test set projected onto its top P principal components (fitted on the "
    "training inputs; mean ± std over networks). Runs from before it lack this figure.",
}
