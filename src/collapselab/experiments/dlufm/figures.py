"""Figures of paper 004's experiments and their captions, drawn from a run's stored arrays
and rows only (so ``collapselab report`` can redraw them without solving or training
anything): ``draw_<experiment>`` and ``<EXPERIMENT>_CAPTIONS`` for the deep UFM's four
experiments and ``dlufm-mlp``, :func:`draw_network` and :data:`NETWORK_CAPTIONS` for the
curvature networks. No caption names a dataset: the report shows the data a run read on
its own line."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from collapselab.experiments.dlufm.relu import LOWER_RANK, SYMMETRIC_ACTIVE, SYMMETRIC_CONSTANT
from collapselab.report import save_run_figure, steps_on_log_axis
from collapselab.store import Run

__all__ = [
    "LAYER_CAPTIONS",
    "LINEAR_CAPTIONS",
    "MLP_CAPTIONS",
    "NETWORK_CAPTIONS",
    "REGULARISATION_CAPTIONS",
    "RELU_CAPTIONS",
    "draw_layers",
    "draw_linear",
    "draw_mlp",
    "draw_network",
    "draw_regularisation",
    "draw_relu",
]

_DIAG, _OFF = "tab:red", "0.6"


def _hessian_spectrum(run: Run, d: dict[str, np.ndarray], k: int, predicted: float | None,
                      title: str, name: str) -> None:  # fmt: skip
    x, spectra = steps_on_log_axis(d["steps"]), d["hessian"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for ax, logy in zip(axes, (False, True), strict=True):
        bulk = spectra[:, k * k : k * k + 60]
        ax.plot(np.repeat(x, bulk.shape[1]), np.abs(bulk).ravel(), ".", color="0.7", ms=2,
                label="bulk (next 60)")  # fmt: skip
        for j in range(k * k):
            ax.plot(x, np.abs(spectra[:, j]), "-", lw=1, label="top K²" if j == 0 else None)
        if predicted is not None:
            ax.axhline(predicted, ls="--", color="k", lw=1, label=f"λ_out = {predicted:.5g}")
        ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("gradient step + 1")
        ax.set_ylabel("|eigenvalue|")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize="small")
    fig.suptitle(title)
    save_run_figure(run, fig, name)


def _alignment_and_gradient(run: Run, d: dict[str, np.ndarray], k: int,
                            cosine: float | None, name: str) -> None:  # fmt: skip
    x = steps_on_log_axis(d["steps"])
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), constrained_layout=True)
    for j in range(k * k):
        diag = j % (k + 1) == 0
        axes[0].plot(x, d["alignment"][:, j], color=_DIAG if diag else _OFF, lw=1)
        axes[1].plot(x, d["cosines"][:, j], color=_DIAG if diag else _OFF, lw=1,
                     label=("v_kk" if j == 0 else None) if diag else
                     ("v_kk', k≠k'" if j == 1 else None))  # fmt: skip
    axes[0].set_title("Fig. 4 / Table 1: alignment a(v_kk') of the predicted eigenvectors")
    axes[0].set_ylabel("⟨Hv, v⟩ / (‖Hv‖‖v‖)")
    if cosine is not None:
        axes[1].axhline(cosine, ls="--", color="k", lw=1, label=f"±1/√K = {cosine:.4f}")
    axes[1].set_title("Fig. 7: natural-basis gradient coefficients (cosines)")
    axes[1].legend(fontsize="small")
    axes[2].plot(x, d["f_top"], label="f_top = ‖P_top g‖²/‖g‖²")
    axes[2].plot(x, d["overlap_final"], label="overlap of the top-K² space with the last")
    axes[2].plot(x, d["overlap_previous"], ":", label="overlap with the previous checkpoint")
    axes[2].set_title("Gur-Ari: gradient in the top space; top-space overlap")
    axes[2].legend(fontsize="small")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("gradient step + 1")
        ax.grid(alpha=0.3)
    save_run_figure(run, fig, name)


def _knockouts(run: Run, d: dict[str, np.ndarray], k: int, centrings: tuple[str, ...],
               name: str, title: str) -> None:  # fmt: skip
    parts = ("none", "within", "cross", "class")
    labels = {"none": "G", "within": "G − G_within", "cross": "G − G_cross",
              "class": "G − G_class"}  # fmt: skip
    fig, axes = plt.subplots(len(centrings), 4, figsize=(14, 3.4 * len(centrings)),
                             constrained_layout=True, squeeze=False)  # fmt: skip
    for row, centring in enumerate(centrings):
        for col, part in enumerate(parts):
            ax = axes[row, col]
            values = np.abs(d[f"knockout_{centring}_{part}"][-1][: 2 * k * k])
            ax.bar(np.arange(1, values.size + 1), values, color="tab:blue")
            ax.axvline(k * k + 0.5, color="k", ls=":", lw=0.8)
            ax.set_yscale("log")
            ax.set_ylim(max(values.max() * 1e-18, 1e-300), values.max() * 3)
            ax.set_title(f"{labels[part]} ({centring} centring)", fontsize="medium")
            ax.set_xlabel("eigenvalue index")
    fig.suptitle(title)
    save_run_figure(run, fig, name)


def _weights(run: Run, d: dict[str, np.ndarray], k: int, predicted: np.ndarray | None,
             name: str, title: str) -> None:  # fmt: skip
    x, spectra = steps_on_log_axis(d["steps"]), d["weights"]  # (T, L, d)
    n_layers = spectra.shape[1]
    fig, axes = plt.subplots(1, n_layers, figsize=(3.2 * n_layers, 3.4), constrained_layout=True,
                             sharey=True, squeeze=False)  # fmt: skip
    for ell in range(n_layers):
        ax = axes[0, ell]
        for j in range(spectra.shape[2]):
            ax.plot(x, spectra[:, ell, j], color="tab:blue" if j < k else "0.7", lw=1)
        if predicted is not None:
            ax.axhline(predicted[ell], ls="--", color="k", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_title(f"W_{ell + 1}W_{ell + 1}ᵀ", fontsize="medium")
        ax.set_xlabel("gradient step + 1")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    save_run_figure(run, fig, name)


def _dnc(run: Run, d: dict[str, np.ndarray], optimum: float | None, name: str) -> None:
    x = steps_on_log_axis(d["steps"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for ell in range(d["dnc1"].shape[1]):
        axes[0].plot(x, d["dnc1"][:, ell], label=f"layer {ell + 1}")
    axes[0].set_title("DNC1 = Tr(Σ_W Σ_B†)/K per layer (the paper tracks it)")
    axes[0].legend(fontsize="small")
    if optimum is not None:
        axes[1].plot(x, np.maximum(d["objective"] - optimum, 1e-18), label="F − F*")
    else:
        axes[1].plot(x, d["objective"], label="F")
    axes[1].plot(x, d["grad_norm"], label="‖∇F‖")
    axes[1].set_title("objective and gradient norm")
    axes[1].legend(fontsize="small")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("gradient step + 1")
        ax.grid(alpha=0.3, which="both")
    save_run_figure(run, fig, name)


def _appendix_e(run: Run, d: dict[str, np.ndarray], form: dict[str, np.ndarray], k: int) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), constrained_layout=True)
    panels = [
        ("Fig. 12: per-sample gradients", [("grad_covariance", "covariance"),
                                            ("grad_moment", "second moment")], "grad_covariance"),
        ("Fig. 13: extended back-propagated errors", [("extended_errors", "second moment")],
         "extended_errors"),
    ]  # fmt: skip
    for ax, (title, series, predicted) in zip(axes[:2], panels, strict=False):
        for key, label in series:
            values = np.abs(d[key][-1][: 3 * k])
            ax.plot(np.arange(1, values.size + 1), np.maximum(values, 1e-300), "o-", ms=4,
                    label=label)  # fmt: skip
        for value in form[predicted]:
            ax.axhline(value, ls="--", color="k", lw=0.8)
        ax.set_title(title, fontsize="medium")
    features = d["features"][-1]
    for ell in range(features.shape[0]):
        values = features[ell][np.isfinite(features[ell])][: 3 * k]
        axes[2].plot(np.arange(1, values.size + 1), np.maximum(np.abs(values), 1e-300), "o-",
                     ms=3, label=f"H_{ell + 1}H_{ell + 1}ᵀ")  # fmt: skip
    for value in form["features"]:
        axes[2].axhline(value, ls="--", color="k", lw=0.6)
    axes[2].set_title("Fig. 14: feature spectra per layer", fontsize="medium")
    for ax in axes:
        ax.set_yscale("log")
        ax.set_xlabel("eigenvalue index")
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3, which="both")
    fig.suptitle("Appendix E at the end of training (dashed: the closed form)")
    save_run_figure(run, fig, "appendix_e")


# ---------------------------------------------------------------------------------------
# the experiments


def draw_linear(run: Run) -> None:
    """``dlufm-linear``'s figures."""
    d, form = run.load_array("dynamics"), run.load_array("closed_form")
    k, layer = int(form["n_classes"]), int(form["layer"])
    lam = float(form["hessian_outlier"][layer - 1])
    _hessian_spectrum(run, d, k, lam, f"Fig. 3: layer-{layer} Hessian spectrum over training "
                      "(linear and log scale)", "hessian_spectrum")  # fmt: skip
    _alignment_and_gradient(run, d, k, float(form["cosine"]), "alignment_gradient")
    _knockouts(run, d, k, ("logit", "class"), "knockouts",
               "Figs 5-6: Papyan's knockouts at the end (dotted: K²)")  # fmt: skip
    _weights(run, d, k, form["sigma_w_sq"], "weight_spectra",
             "Fig. 8: eigenvalues of W_lW_lᵀ (blue: top K; dashed: σ_W(l)²)")  # fmt: skip
    _appendix_e(run, d, form, k)
    _dnc(run, d, float(form["objective"]), "dnc")


def draw_relu(run: Run) -> None:
    """``dlufm-relu``'s figures: the featured run's dynamics, the sweep, Tables 1-4."""
    d = run.load_array("dynamics")
    k, layer = int(d["n_classes"]), int(d["layer"])
    width, seed = (int(v) for v in d["featured"])
    tag = f"(d = {width}, seed {seed})"
    _hessian_spectrum(run, d, k, None, f"Fig. 9: layer-{layer} Hessian spectrum {tag}",
                      "hessian_spectrum")  # fmt: skip
    _alignment_and_gradient(run, d, k, 1 / np.sqrt(k), "alignment_gradient")
    _knockouts(run, d, k, ("logit",), "knockouts", f"Fig. 10: Papyan's knockouts {tag}")
    _weights(run, d, k, None, "weight_spectra", f"Fig. 11: eigenvalues of W_lW_lᵀ {tag}")
    _sweep(run)
    _tables(run, f"final_d{width}_s{seed}", k, layer, tag)


def _sweep(run: Run) -> None:
    s = run.load_array("sweep")
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), constrained_layout=True)
    sym = s["symmetric"].astype(bool)
    constant = sym & s["masks_constant"].astype(bool)
    active = sym & ~constant
    for ax, key, title in (
        (axes[0], "objective", "final objective F"),
        (axes[1], "hessian_spread", "Hessian top-K² relative spread"),
        (axes[2], "weight_spread", "largest top-K weight spread"),
    ):
        jitter = (s["seed"] - s["seed"].mean()) * 0.3
        for mask, marker, color, label in (
            (active, "o", "tab:green", SYMMETRIC_ACTIVE),
            (constant, "s", "tab:blue", SYMMETRIC_CONSTANT),
            (~sym, "x", "tab:red", LOWER_RANK),
        ):
            ax.scatter(s["width"][mask] + jitter[mask], s[key][mask], marker=marker,
                       color=color, label=label)  # fmt: skip
        ax.set_xlabel("width d")
        ax.set_title(title, fontsize="medium")
        ax.grid(alpha=0.3)
    axes[1].set_yscale("log")
    axes[2].set_yscale("log")
    axes[0].legend(fontsize="small")
    fig.suptitle("ReLU sweep: every run's endpoint (x: width, offset by seed)")
    save_run_figure(run, fig, "sweep")


def _matrix(ax: Any, m: np.ndarray, title: str) -> None:
    ax.imshow(m, cmap="coolwarm", vmin=-np.abs(m).max(), vmax=np.abs(m).max())
    for (i, j), v in np.ndenumerate(m):
        ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=7)
    ax.set_title(title, fontsize="medium")
    ax.set_xticks([])
    ax.set_yticks([])


def _tables(run: Run, name: str, k: int, layer: int, tag: str) -> None:
    f = run.load_array(name)
    fig, axes = plt.subplots(1, 4, figsize=(16, 4), constrained_layout=True)
    _matrix(axes[0], f["alignment"].reshape(k, k), "Table 1: a(v_kk') (row k, column k')")
    coef = f["true_coefficients"]
    axes[1].bar(np.arange(1, coef.size + 1), np.abs(coef), color="tab:blue")
    axes[1].set_title("Table 2: |⟨g/‖g‖, u_j⟩|, top K² eigenvectors", fontsize="medium")
    axes[1].set_xlabel("j")
    _matrix(axes[2], f["table3"][layer - 1], f"Table 3: W_{{L:{layer}}}W_{{L:{layer}}}ᵀ")
    _matrix(axes[3], f["table4"][layer - 1], "Table 4: (1/N) Σ B_iB_iᵀ")
    fig.suptitle(f"Tables 1-4 at the end, layer {layer} {tag}")
    save_run_figure(run, fig, "tables")


def draw_regularisation(run: Run) -> None:
    """``dlufm-regularisation``: t, F, ‖θ‖ and DNC1 against β/β_c."""
    r = run.load_array("regularisation")
    m = float(r["local_minimum_ratio"])
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), constrained_layout=True)
    axes[0].plot(r["ratio"], r["t_star"], "k-", label="closed form t*")
    axes[0].plot(r["ratio"], r["t_gd"], "o", label="gradient descent (mean diagonal)")
    axes[0].set_ylabel("output scale t")
    axes[1].plot(r["ratio"], r["optimum"], "k-", label="F* (closed form)")
    axes[1].plot(r["ratio"], r["objective"], "o", label="F (gradient descent)")
    axes[2].plot(r["ratio"], np.maximum(r["norm_end"] / r["norm_start"], 1e-30), "o-",
                 label="‖θ_end‖/‖θ_0‖")  # fmt: skip
    axes[2].plot(r["ratio"], np.where(np.isfinite(r["dnc1"]), np.maximum(r["dnc1"], 1e-40),
                                      np.nan), "s-", label="DNC1 at layer L")  # fmt: skip
    axes[2].set_yscale("log")
    for ax in axes:
        ax.axvline(1.0, color="k", ls=":", lw=1)
        ax.axvline(m, color="tab:red", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("β/β_c (dotted: 1, and β_m/β_c in red)")
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3, which="both")
    fig.suptitle("Across the threshold of condition (2)")
    save_run_figure(run, fig, "regularisation")


def draw_layers(run: Run) -> None:
    """``dlufm-layers``: λ_out(l) against λ_W(l) per configuration."""
    t = run.load_array("layers")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for i in np.unique(t["config"]):
        mask = t["config"] == i
        k, big_l = int(t["n_classes"][mask][0]), int(t["n_layers"][mask][0])
        label = f"config {int(i)} (K={k}, L={big_l})"
        axes[0].plot(t["lambda_w"][mask], t["outlier"][mask], "o", label=label)
        order = np.argsort(t["lambda_w"][mask])
        axes[0].plot(t["lambda_w"][mask][order], t["predicted"][mask][order], "k--", lw=0.8)
        axes[1].semilogy(t["layer"][mask], np.maximum(
            np.abs(t["outlier"][mask] - t["predicted"][mask]) / t["predicted"][mask], 1e-17),
            "o-", label=label)  # fmt: skip
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("λ_W(l)")
    axes[0].set_ylabel("mean of the K² Hessian outliers")
    axes[0].set_title("λ_out(l) ∝ λ_W(l) (dashed: closed form)", fontsize="medium")
    axes[1].set_xlabel("layer l")
    axes[1].set_title("relative error against the closed form", fontsize="medium")
    for ax in axes:
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3, which="both")
    save_run_figure(run, fig, "layers")


LINEAR_CAPTIONS = {
    "hessian_spectrum": "Fig. 3 analogue: every eigenvalue of the layer-l Hessian (data term) at "
    "each checkpoint; coloured: the top K², grey: the bulk; dashed: the closed-form λ_out(l). "
    "The K² outliers separate, then converge to one value; the bulk goes to 0.",
    "alignment_gradient": "Left, Fig. 4: a(v) of the K² predicted eigenvectors h̄^(l+1)_k ⊗ "
    "h̄^(l)_k' (red: k = k'). Middle, Fig. 7: cosines of the gradient with them (red: the K "
    "diagonal ones, dashed: ±1/√K). Right: Gur-Ari's f_top and the top-space overlap.",
    "knockouts": "Figs 5-6 analogue: the largest 2K² eigenvalues (log scale) of G and of G with "
    "each of Papyan's components removed, in both centrings, at the end. Removing G_within "
    "changes nothing, G_cross leaves K, G_class leaves K(K−1).",
    "weight_spectra": "Fig. 8 analogue: eigenvalues of every W_lW_lᵀ over training (blue: top "
    "K); dashed: σ_W(l)² = (λ_H/λ_W(l)) n‖h̄^(1)‖².",
    "appendix_e": "Figs 12-14 analogues (log scale): gradient covariance (K−1 equal) and second "
    "moment (K equal), extended back-propagated errors (K−1 large, one small), feature "
    "spectra per layer (K equal); dashed: the closed form.",
    "dnc": "DNC1 per layer and F − F* with the gradient norm, over training (log-log).",
}
RELU_CAPTIONS = {
    "hessian_spectrum": "Fig. 9 analogue (featured run): every eigenvalue of the layer-l "
    "Hessian over training; coloured: the top K². They separate but do not equalise.",
    "alignment_gradient": "Featured run: a(v) of the predicted eigenvectors (Table 1 over "
    "time), the natural-basis gradient cosines, f_top and the top-space overlap.",
    "knockouts": "Fig. 10 analogue: G and Papyan's knockouts (logit centring) at the end.",
    "weight_spectra": "Fig. 11 analogue: eigenvalues of every W_lW_lᵀ over training (blue: top "
    "K); the weight outliers do equalise.",
    "sweep": "Every (width, seed) run's endpoint: objective, Hessian and weight outlier "
    "spreads; green: the symmetric (DNC-like) solution with the ReLU acting at the analysed "
    "layer, blue: symmetric with no ReLU after W_l truncating (locally the linear model), "
    "red: lower-rank or asymmetric.",
    "tables": "Tables 1-4 at the end of the featured run: alignment of the predicted "
    "eigenvectors, gradient coefficients on the true top-K² eigenvectors, and the Gram tables.",
}
REGULARISATION_CAPTIONS = {
    "regularisation": "Across condition (2): the output scale t, the objective and the "
    "parameters' norm and DNC1 against β/β_c; black: the closed form. Beyond 1 the optimum is "
    "zero; up to β_m/β_c (red) a non-zero local minimum survives where gradient descent can "
    "stop.",
}
LAYER_CAPTIONS = {
    "layers": "Every layer of every configuration: the mean of the K² Hessian outliers against "
    "λ_W(l) (dashed: the closed form, proportional to λ_W(l)), and its relative error.",
}


def draw_mlp(run: Run) -> None:
    """``dlufm-mlp``: per analysed layer, the Hessian spectrum before and after training, the
    alignment of the predicted eigenvectors and Papyan's knockouts."""
    meta = run.load_array("mlp_meta")
    layers, k = [int(v) for v in meta["layers"]], int(meta["n_classes"])
    fig, axes = plt.subplots(len(layers), 3, figsize=(14, 3.6 * len(layers)),
                             constrained_layout=True, squeeze=False)  # fmt: skip
    for row, ell in enumerate(layers):
        init = run.load_array(f"mlp_init_layer{ell}")
        final = run.load_array(f"mlp_final_layer{ell}")
        ax = axes[row, 0]
        for snap, label in ((init, "initialisation"), (final, "trained")):
            values = np.abs(snap["hessian"][: 3 * k * k])
            ax.plot(np.arange(1, values.size + 1), np.maximum(values, 1e-30), ".-", ms=3,
                    label=label)  # fmt: skip
        ax.axvline(k * k + 0.5, color="k", ls=":", lw=0.8, label="K²")
        ax.set_yscale("log")
        ax.set_title(f"W_{ell}: layer-wise Hessian spectrum", fontsize="medium")
        ax.set_xlabel("eigenvalue index")
        ax.legend(fontsize="small")
        ax = axes[row, 1]
        for snap, label in ((init, "initialisation"), (final, "trained")):
            ax.plot(np.sort(snap["alignment"])[::-1], ".-", ms=3, label=label)
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(f"W_{ell}: a(v_kk') sorted (theory: 1)", fontsize="medium")
        ax.legend(fontsize="small")
        ax = axes[row, 2]
        for part, label in (("none", "G"), ("within", "G − G_within"), ("cross", "G − G_cross"),
                            ("class", "G − G_class")):  # fmt: skip
            values = np.abs(final[f"knockout_logit_{part}"][: 2 * k * k])
            ax.plot(np.arange(1, values.size + 1), np.maximum(values, 1e-30), ".-", ms=3,
                    label=label)  # fmt: skip
        for count in (k, k * (k - 1), k * k):
            ax.axvline(count + 0.5, color="k", ls=":", lw=0.6)
        ax.set_yscale("log")
        ax.set_title(f"W_{ell}: Papyan's knockouts, trained (dotted: K, K(K−1), K²)",
                     fontsize="medium")  # fmt: skip
        ax.legend(fontsize="small")
    dataset = run.manifest.get("dataset", "")
    fig.suptitle(f"A trained MLP held against the deep UFM's predictions ({dataset})")
    save_run_figure(run, fig, "mlp")


MLP_CAPTIONS = {
    "mlp": "A bias-free ReLU MLP trained with MSE to zero training error, read as a deep UFM "
    "with the inputs as features: per analysed layer, the layer-wise Hessian spectrum before "
    "and after training (theory: K² outliers), the alignment a(v) of the Kronecker "
    "eigenvectors built from the network's class means (theory: 1), and Papyan's knockouts.",
}


# ---------------------------------------------------------------------------------------
# curvature-{mlp,conv}-{ce,mse}: real networks

NETWORK_DPI = 110
NETWORK_CAPTIONS = {
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


def _curvature_steps(run: Run) -> list[dict[str, np.ndarray]]:
    names = sorted(n for n in run.array_names() if n.startswith("curvature_step"))
    return [run.load_array(n) for n in names]


def _measured_layers(arrays: dict[str, np.ndarray]) -> list[str]:
    seen: list[str] = []
    for key in arrays:
        if ":" in key and key.split(":")[0] not in seen:
            seen.append(key.split(":")[0])
    return seen


def draw_network(run: Run) -> None:
    """The curvature networks' figures (:data:`NETWORK_CAPTIONS`), from the stored arrays
    and rows (no training)."""
    steps = _curvature_steps(run)
    if not steps:
        return
    K = int((run.manifest.get("curvature") or {}).get("n_classes", 0))
    layers = _measured_layers(steps[-1])
    _network_spectra(run, steps, layers, K)
    _network_decomposition(run, steps[-1], layers)
    _network_alignment(run, layers)


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


def _network_spectra(
    run: Run, steps: list[dict[str, np.ndarray]], layers: list[str], K: int
) -> None:
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
    save_run_figure(run, fig, "spectra", dpi=NETWORK_DPI)


def _legend(ax: Any) -> None:
    """A legend where something was drawn: a run that stored no spectra (its
    ``curvature_keys`` without them) leaves the panels empty, without a warning."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


_PAPYAN_PARTS = [
    ("ggn_eigenvalues", "G", "k"),
    ("papyan_class_eigenvalues", "G_class", "tab:blue"),
    ("papyan_cross_eigenvalues", "G_cross", "tab:orange"),
    ("papyan_within_eigenvalues", "G_within", "tab:green"),
    ("ggn_without_class_eigenvalues", "G − G_class", "tab:purple"),
    ("ggn_without_cross_eigenvalues", "G − G_cross", "tab:red"),
]


def _network_decomposition(run: Run, arrays: dict[str, np.ndarray], layers: list[str]) -> None:
    fig, axes = _grid(len(layers))
    for ax, layer in zip(axes, layers, strict=False):
        for key, label, color in _PAPYAN_PARTS:
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
    save_run_figure(run, fig, "decomposition", dpi=NETWORK_DPI)


def _network_alignment(run: Run, layers: list[str]) -> None:
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
    save_run_figure(run, fig, "alignment", dpi=NETWORK_DPI)
