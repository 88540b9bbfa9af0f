"""The figures of paper 003's experiments, drawn from a run's stored results, and their
captions.

``mse-nc-collapse`` (:func:`draw_training`, :data:`FIGURES`, :data:`CAPTIONS`): Figures 2-12
and Table 1. Every figure has one panel per arm (MSE arms for Figs. 2-9, one per dataset/net
combination for the MSE-versus-CE Figs. 10-12), epochs on the x axis and the zero-training-
error epoch as a red dotted vertical line, as in the paper. Log-scaled y axes where the
paper uses them: the decomposition (Fig. 2), NC1 (Figs. 7, 10, 12) and robustness (Fig. 11).

Files (``figures/<name>.png``): :data:`FIGURES`. Table 1 is also written as
``table1.csv`` in the run directory.

``mse-nc-theory`` (:func:`draw_theory`, :data:`THEORY_FIGURES`, :data:`THEORY_CAPTIONS`): the
SNR singular values against both closed forms with the singular-vector drift, and the UFM
analogue of Fig. 2 (the decomposition and the NC metrics along gradient descent).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from collapselab.experiments.mse_nc.presets import PAPER_TABLE, PAPER_TABLE1
from collapselab.experiments.mse_nc.results import MissingResult, StoredArms
from collapselab.report.plots import (
    ZERO_ERROR_STYLE,
    panel_grid,
    place_legends,
    plot_panels,
    save_run_figure,
)
from collapselab.store import Run

FIGURES: dict[str, str] = {
    "fig2_decomposition": r"Fig. 2: $L = L_{NC1} + L_{NC2/3} + L_{LS}^{\perp}$ over epochs (MSE)",
    "fig3_equinorm": "Fig. 3: equinorm of class means and classifiers",
    "fig4_equiangularity": "Fig. 4: equiangularity (Std of cosines)",
    "fig5_max_equiangularity": "Fig. 5: maximal equiangularity",
    "fig6_self_duality": "Fig. 6: self-duality",
    "fig7_nc1": "Fig. 7: activation collapse (NC1)",
    "fig8_ncc_mismatch": "Fig. 8: NCC mismatch",
    "fig9_robustness": "Fig. 9: DeepFool robustness during the terminal phase (MSE)",
    "fig10_nc1_mse_vs_ce": "Fig. 10: NC1 under MSE and cross-entropy",
    "fig11_robustness_mse_vs_ce": "Fig. 11: DeepFool robustness under MSE and cross-entropy",
    "fig12_test_nc1": "Fig. 12: NC1 on test data (MSE and cross-entropy)",
    "table1_accuracy": "Table 1: test accuracy at the zero-error epoch and at the end",
}
"""Figure names and titles of the training experiment."""

_PANELS = (
    "One panel per dataset and network; dotted red line: first epoch with zero training "
    "error (start of the terminal phase)."
)
CAPTIONS: dict[str, str] = {
    "fig2_decomposition": (
        "Fig. 2: the MSE loss L split into L_NC1 (within-class variability), L_NC2/3 "
        "(distance of the class means and classifier from the central path's structure) and "
        "L_LS⊥ (what the best linear classifier of the features leaves), over epochs. " + _PANELS
    ),
    "fig3_equinorm": "Fig. 3: Std/Avg of the norms of the class means and classifiers. " + _PANELS,
    "fig4_equiangularity": (
        "Fig. 4: Std of the cosines between class means (and classifiers). " + _PANELS
    ),
    "fig5_max_equiangularity": (
        "Fig. 5: Avg of |cos + 1/(C-1)| between class means (and classifiers): 0 at a "
        "simplex ETF. " + _PANELS
    ),
    "fig6_self_duality": (
        "Fig. 6: distance between the normalised classifier and the normalised centred class "
        "means. " + _PANELS
    ),
    "fig7_nc1": "Fig. 7: NC1 = Tr(Σ_W Σ_B†)/C of the last-layer features. " + _PANELS,
    "fig8_ncc_mismatch": (
        "Fig. 8: fraction of samples where the classifier and the nearest class centre "
        "disagree. " + _PANELS
    ),
    "fig9_robustness": (
        "Fig. 9: DeepFool robustness (mean ‖r‖/‖x‖ of the smallest flipping perturbation) "
        "during the terminal phase, MSE. " + _PANELS
    ),
    "fig10_nc1_mse_vs_ce": (
        "Fig. 10: NC1 under MSE and cross-entropy; dotted lines: each loss's zero-error epoch."
    ),
    "fig11_robustness_mse_vs_ce": (
        "Fig. 11: DeepFool robustness under MSE and cross-entropy, per dataset and network."
    ),
    "fig12_test_nc1": "Fig. 12: NC1 measured on the test split, MSE and cross-entropy.",
    "table1_accuracy": (
        "Table 1: test accuracy at the zero-error epoch and at the end of training, MSE and "
        "cross-entropy."
    ),
}
"""Report captions (plain text) of :data:`FIGURES`."""

_NC1 = r"Tr$(\Sigma_W \Sigma_B^\dagger)/C$"
_SELF_DUALITY = r"$\| W^\top/\|W\|_F - \bar M/\|\bar M\|_F \|_F^2$"

_ROBUSTNESS = r"mean $\|r\|_2/\|x\|_2$ (DeepFool)"

_PAIRED = {
    "fig3_equinorm": ("nc2_equinorm_means", "nc2_equinorm_classifiers", "Std/Avg of norms"),
    "fig4_equiangularity": (
        "nc2_equiangle_means",
        "nc2_equiangle_classifiers",
        "Std of cosines",
    ),
    "fig5_max_equiangularity": (
        "nc2_maxangle_means",
        "nc2_maxangle_classifiers",
        r"Avg$_{c \neq c'}$ |cos + 1/(C-1)|",
    ),
}
_SINGLE = {
    "fig6_self_duality": ("nc3_self_duality", _SELF_DUALITY, False),
    "fig7_nc1": ("nc1", _NC1, True),
    "fig8_ncc_mismatch": ("nc4_ncc_mismatch", "fraction mismatched", False),
}
_DECOMPOSITION = {
    "$L$": "mse_loss",
    "$L_{NC1}$": "mse_nc1_term",
    "$L_{NC2/3}$": "mse_nc23_term",
    r"$L_{LS}^{\perp}$": "mse_ls_perp",
}
_LOSS_COLOURS = {"mse": "tab:blue", "ce": "tab:orange"}
_CE_ZERO_STYLE = {"color": "tab:orange", "linestyle": ":", "linewidth": 1.3}


def _panels(
    stored: StoredArms, keys: Sequence[str], curves: Callable[[str], dict[str, tuple]]
) -> dict[str, dict[str, tuple]]:
    out = {}
    for key in keys:
        try:
            found = curves(key)
        except MissingResult:
            continue
        if found:
            out[stored.title(key)] = found
    return out


def _zero_lines(stored: StoredArms, keys: Sequence[str]) -> dict[str, float | None]:
    return {stored.title(k): stored.zero_error_epoch(k) for k in keys}


def _draw_mse_panels(
    run: Run,
    stored: StoredArms,
    name: str,
    curves: Callable[[str], dict[str, tuple]],
    ylabel: str,
    logy: bool,
) -> None:
    keys = stored.trained("mse")
    content = _panels(stored, keys, curves)
    if not content:
        return
    plot_panels(
        content,
        run.figure_path(name),
        logy=logy,
        zero_error_epoch=_zero_lines(stored, keys),
        ylabel=ylabel,
        xlabel="epoch",
        ncols=3,
        suptitle=FIGURES[name],
    )


def _two_loss_figure(
    run: Run,
    stored: StoredArms,
    name: str,
    series: Callable[[str], dict[str, tuple[np.ndarray, np.ndarray, dict]]],
    ylabel: str,
    logy: bool,
) -> None:
    """One panel per combination, MSE and CE curves with both zero-error lines."""
    pairs = stored.pairs()
    if not pairs:
        return
    rows, cols, width = panel_grid(len(pairs), 4.2)
    fig, axes = plt.subplots(
        rows, cols, figsize=(width * cols, 3.2 * rows), squeeze=False, constrained_layout=True
    )
    for ax, pair in zip(axes.flat, pairs, strict=False):
        for label, (x, y, style) in series(pair).items():
            y = np.where(y > 0, y, np.nan) if logy else y
            ax.plot(x, y, label=label, linewidth=1.4, **style)
        for loss, zstyle in (("mse", ZERO_ERROR_STYLE), ("ce", _CE_ZERO_STYLE)):
            zero = stored.zero_error_epoch(f"{pair}-{loss}")
            if zero is not None:
                ax.axvline(zero, label=f"zero training error ({loss.upper()})", **zstyle)
        if logy:
            ax.set_yscale("log")
        s = stored.summary(f"{pair}-mse")
        ax.set_title(f"{s['dataset']} / {s['net']}")
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both" if logy else "major")
    for ax in list(axes.flat)[len(pairs) :]:
        ax.set_visible(False)
    place_legends(fig, axes)
    fig.suptitle(FIGURES[name])
    save_run_figure(run, fig, name)


def _loss_curves(
    stored: StoredArms, pair: str, metric: str, split: str
) -> dict[str, tuple[np.ndarray, np.ndarray, dict]]:
    out = {}
    for loss in ("mse", "ce"):
        try:
            x, y = stored.curve(f"{pair}-{loss}", metric, split)
        except MissingResult:
            continue
        out[f"{loss.upper()} ({split})"] = (x, y, {"color": _LOSS_COLOURS[loss]})
    return out


def table1_rows(stored: StoredArms) -> list[dict[str, Any]]:
    """Table 1 rows: test accuracy at the zero-error epoch and at the end, per arm.

    Accuracies in percent; ``paper_*`` columns hold the paper's values (note 003 §5.1) when
    the arm is one of the paper's MSE combinations.
    """
    rows = []
    for key in stored.trained():
        s = stored.summary(key)
        zero = stored.zero_error_epoch(key)
        try:
            end, final = stored.final(key, "accuracy", "test")
            at_zero = (
                stored.value_at(key, "accuracy", zero, "test") if zero is not None else math.nan
            )
        except MissingResult:
            continue
        family = _family(s["dataset"], s["net"])
        paper = PAPER_TABLE1.get((s["dataset"], family)) if s["loss"] == "mse" else None
        rows.append(
            {
                "arm": key,
                "dataset": s["dataset"],
                "net": s["net"],
                "loss": s["loss"],
                "lr": s["lr"],
                "zero_error_epoch": zero,
                "final_epoch": end,
                "acc_zero_error": 100.0 * at_zero,
                "acc_final": 100.0 * final,
                "change_pp": 100.0 * (final - at_zero),
                "paper_acc_zero_error": paper[0] if paper else math.nan,
                "paper_acc_final": paper[1] if paper else math.nan,
            }
        )
    return rows


def _family(dataset: str, net: str) -> str | None:
    for family, name in PAPER_TABLE.get(dataset, {}).items():
        if name == net:
            return family
    return None


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "never"
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


def _draw_table1(run: Run, stored: StoredArms) -> None:
    rows = table1_rows(stored)
    if not rows:
        return
    columns = [
        "arm",
        "lr",
        "zero_error_epoch",
        "acc_zero_error",
        "acc_final",
        "change_pp",
        "paper_acc_zero_error",
        "paper_acc_final",
    ]
    header = ",".join(columns)
    lines = [header] + [
        ",".join(
            "" if r[c] is None else (f"{r[c]:.6g}" if isinstance(r[c], float) else str(r[c]))
            for c in columns
        )
        for r in rows
    ]
    run.write_text("table1.csv", "\n".join(lines) + "\n")
    shown = ["arm", "lr", "0-error epoch", "acc. 0-error (%)", "acc. final (%)", "change (pp)"]
    cells = [
        [
            r["arm"],
            f"{r['lr']:.3g}",
            _fmt(r["zero_error_epoch"]),
            _fmt(r["acc_zero_error"]),
            _fmt(r["acc_final"]),
            _fmt(r["change_pp"]),
        ]
        for r in rows
    ]
    if any(not math.isnan(r["paper_acc_final"]) for r in rows):
        shown += ["paper 0-error", "paper final"]
        for cell, r in zip(cells, rows, strict=True):
            cell += [_fmt(r["paper_acc_zero_error"]), _fmt(r["paper_acc_final"])]
    fig, ax = plt.subplots(figsize=(1.5 * len(shown) + 1.5, 0.3 * len(rows) + 0.7))
    ax.axis("off")
    table = ax.table(cellText=cells, colLabels=shown, loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.scale(1.0, 1.3)
    ax.set_title(FIGURES["table1_accuracy"], fontsize=10)
    fig.tight_layout()
    save_run_figure(run, fig, "table1_accuracy")


def draw_training(run: Run) -> None:
    """Draw every figure of :data:`FIGURES` that the stored results allow, and ``table1.csv``."""
    stored = StoredArms(run.metrics(), run.manifest)

    def decomposition(key: str) -> dict[str, tuple]:
        return {label: stored.curve(key, metric) for label, metric in _DECOMPOSITION.items()}

    _draw_mse_panels(run, stored, "fig2_decomposition", decomposition, "loss", logy=True)
    for name, (means, classifiers, ylabel) in _PAIRED.items():

        def paired(key: str, means: str = means, classifiers: str = classifiers) -> dict:
            return {
                "class means": stored.curve(key, means),
                "classifiers": stored.curve(key, classifiers),
            }

        _draw_mse_panels(run, stored, name, paired, ylabel, logy=False)
    for name, (metric, ylabel, logy) in _SINGLE.items():

        def single(key: str, metric: str = metric) -> dict:
            return {"train": stored.curve(key, metric)}

        _draw_mse_panels(run, stored, name, single, ylabel, logy=logy)

    def robustness(key: str) -> dict:
        return {"test": stored.curve(key, "deepfool_ratio", "test")}

    _draw_mse_panels(run, stored, "fig9_robustness", robustness, _ROBUSTNESS, logy=False)
    _two_loss_figure(
        run,
        stored,
        "fig10_nc1_mse_vs_ce",
        lambda pair: _loss_curves(stored, pair, "nc1", "train"),
        _NC1,
        logy=True,
    )
    _two_loss_figure(
        run,
        stored,
        "fig11_robustness_mse_vs_ce",
        lambda pair: _loss_curves(stored, pair, "deepfool_ratio", "test"),
        _ROBUSTNESS,
        logy=True,
    )

    def test_nc1(pair: str) -> dict[str, tuple[np.ndarray, np.ndarray, dict]]:
        out = _loss_curves(stored, pair, "nc1", "test")
        for label, (x, y, style) in _loss_curves(stored, pair, "nc1", "train").items():
            out[label] = (x, y, {**style, "linestyle": "--", "alpha": 0.6})
        return out

    _two_loss_figure(run, stored, "fig12_test_nc1", test_nc1, _NC1, logy=True)
    _draw_table1(run, stored)


# ------------------------------------------------------------------ mse-nc-theory
THEORY_FIGURES: dict[str, str] = {
    "theory_omega": r"SNR singular values $\omega_j(t)$: simulator vs both closed forms",
    "theory_ufm_decomposition": (
        r"UFM analogue of Fig. 2: $L$, $L_{NC1}$, $L_{NC2/3}$, $L_{LS}^{\perp}$"
    ),
    "theory_ufm_nc": "UFM: NC metrics along gradient descent",
}

THEORY_CAPTIONS: dict[str, str] = {
    "theory_omega": (
        "Left: singular values ω_j(t) of the SNR matrix in the renormalised simulator (dots) "
        "against the corrected (solid) and the published (dashed, Prop. 2) closed forms. "
        "Right: drift of the singular vectors (they stay frozen, Lemma 6)."
    ),
    "theory_ufm_decomposition": (
        "UFM analogue of Fig. 2: L, L_NC1, L_NC2/3 and L_LS⊥ along plain gradient descent "
        "on the unconstrained features model (log-log)."
    ),
    "theory_ufm_nc": "UFM: NC1, equinorm, equiangularity and self-duality along gradient descent.",
}
"""Report captions (plain text) of :data:`THEORY_FIGURES`."""


def _ufm_curves(metrics: Any, names: dict[str, str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rows = metrics[metrics["split"] == "ufm"]
    out = {}
    for label, metric in names.items():
        r = rows[rows["metric"] == metric].sort_values("step")
        if not r.empty:
            out[label] = (r["step"].to_numpy(np.float64), r["value"].to_numpy(np.float64))
    return out


def draw_theory(run: Run) -> None:
    """Draw :data:`THEORY_FIGURES` from the stored arrays and rows."""
    arrays = run.load_array("snr_dynamics")
    t, sim = arrays["times"], arrays["omega_simulated"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10.5, 3.8), constrained_layout=True)
    colours = [plt.get_cmap("tab10")(i) for i in range(sim.shape[1])]
    keep = t > 0
    dense_t = arrays["dense_times"]
    dkeep = dense_t > 0
    labels = {"corrected": "corrected closed form", "published": "published closed form (Prop. 2)"}
    for j, colour in enumerate(colours):
        ax.plot(
            t[keep],
            sim[keep, j],
            "o",
            color=colour,
            markersize=3.5,
            label=rf"simulated $\omega_{j + 1}$",
        )
        for variant, style in (("corrected", "-"), ("published", "--")):
            curve = arrays[f"dense_{variant}"][dkeep, j]
            label = labels[variant] if j == 0 else None
            ax.plot(dense_t[dkeep], curve, style, color=colour, linewidth=1.2, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("flow time t")
    ax.set_ylabel(r"$\omega_j(t)$")
    ax.set_title("SNR singular values")
    ax.grid(alpha=0.3, which="both")
    for name, style in (("left_drift", "-"), ("right_drift", "--")):
        drift = np.asarray(arrays[name], dtype=np.float64)
        shown = np.where(drift > 0, drift, np.nan)
        ax2.plot(t, shown, style, label=name.replace("_", " ") + f" (max {drift.max():.1e})")
    ax2.set_yscale("log")
    ax2.set_xlabel("flow time t")
    ax2.set_ylabel(r"max $| |U_t^\top U_0| - I |$")
    ax2.set_title("singular-vector drift (zeros not drawn)")
    ax2.grid(alpha=0.3, which="both")
    place_legends(fig, [ax, ax2])
    fig.suptitle(THEORY_FIGURES["theory_omega"])
    save_run_figure(run, fig, "theory_omega")

    metrics = run.metrics()
    decomposition = _ufm_curves(
        metrics,
        {"$L$": "loss", "$L_{NC1}$": "mse_nc1_term", "$L_{NC2/3}$": "mse_nc23_term",
         r"$L_{LS}^{\perp}$": "mse_ls_perp"},
    )  # fmt: skip
    nc = _ufm_curves(
        metrics,
        {"NC1 (Tr/C)": "nc1", "equinorm (means)": "nc2_equinorm_means",
         "equiangularity (means)": "nc2_equiangle_means",
         "max-equiangularity (means)": "nc2_maxangle_means",
         "self-duality": "nc3_self_duality"},
    )  # fmt: skip
    for name, content in (("theory_ufm_decomposition", decomposition), ("theory_ufm_nc", nc)):
        if content:
            plot_panels(
                {THEORY_FIGURES[name]: content},
                run.figure_path(name),
                x="step",
                logx=True,
                logy=True,
                xlabel="gradient step",
                ylabel="value",
                ncols=1,
                panel_size=(6.0, 4.0),
            )
