r"""``pcbias-frequency``: spectral bias on the frequency dataset (paper 002 §5.2-5.3, Figs. 8,
13 and 16; note 002 §2.5, §5 item 10, §7 items 17 and 24).

An ensemble of networks is trained by plain SGD (:mod:`~collapselab.experiments.pcb.networks`)
on the frequency dataset (:func:`~collapselab.data.frequency.frequency_dataset`: two classes
split by ``x_2 = λ(x_1)``, ``λ`` a sum of ``m = 10`` sines of frequencies ``κ = 0..9``),
inputs standardised per feature. Per training example:

* **accessibility** (R24): the mean correctness over the members and the epochs ``1..E``;
* **critical frequency** (R27): the smallest number of terms ``j`` whose partial sum
  ``λ_j`` (and every longer one) classifies it correctly
  (:func:`~collapselab.metrics.pc_bias.critical_frequency`; the paper's Fig. 16 labels it by
  ``κ_j = j − 1``);
* **discriminability** (R28): the fraction of its ``k`` nearest training neighbours (in the
  standardised input space the networks see, itself excluded) sharing its class.

Fig. 8 correlates them over the distinct critical frequencies
(:func:`~collapselab.metrics.pc_bias.binned_correlation`; with 10 values no smoothing,
``width = 1``; the paper's width 10 is for the thousands of critical PCs of Fig. 6b), and
per example. Fig. 13: each member's decision regions on a ``G x G`` grid of the data box at
the ``snapshots`` epochs; the **boundary's number of terms** at a snapshot is the ``j`` whose
partial-sum classifier ``1[x_2 ≤ λ_j(x_1)]`` agrees with the network on most of the grid
(its agreement with every ``j`` is stored too).

The paper trains 100 st-VGGs; a convolutional net has no meaning on 2-D points (the paper
does not say how it fed them), so every preset trains ReLU MLPs (note 002 §5 item 10).

Stored: ``arrays/frequency.npz`` (``x`` raw training points, ``y``, ``critical_frequency``,
``accessibility``, ``discriminability``, ``train_accuracy``/``test_accuracy`` ``(N, E+1)``,
``snapshots``, ``grid_x1``, ``grid_x2``, ``boundary`` ``(N, S, G, G)`` predicted class 1,
``agreement`` ``(N, S, m)``, ``terms`` ``(N, S)``, ``kappa``, ``phi``); rows of split
``frequency`` (ensemble-mean ``train_accuracy``, ``test_accuracy`` per epoch).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.data import load_dataset
from collapselab.data.frequency import PAPER_KAPPA, PAPER_PHI
from collapselab.data.transforms import Standardize
from collapselab.experiments.claims import Claim, RunResults
from collapselab.experiments.pcb._common import members, read_dataset, run_members, verdict
from collapselab.experiments.pcb.networks import train_network
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pc_bias import (
    accessibility,
    binned_correlation,
    correlation,
    critical_frequency,
    discriminability,
)
from collapselab.store import Run

__all__ = [
    "FREQUENCY_CLAIMS",
    "FREQUENCY_PRESETS",
    "boundary_agreement",
    "frequency_member",
    "run_frequency",
]

_MLP = {"kind": "mlp", "width": 128, "depth": 4}

FREQUENCY_PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"datasets": {"main": {"name": "frequency", "n_train": 2000, "n_test": 500}},
              "net": _MLP, "lr": 0.5, "batch_size": 100, "epochs": 150, "members": 8,
              "snapshots": [1, 10, 50, 150], "grid": 80, "k": 10},
    "standard": {"datasets": {"main": {"name": "frequency", "n_train": 10000, "n_test": 1000}},
                 "net": {"kind": "mlp", "width": 256, "depth": 5}, "lr": 0.5,
                 "batch_size": 100, "epochs": 400, "members": 10,
                 "snapshots": [1, 10, 100, 400], "grid": 120, "k": 10},
    "paper": {"datasets": {"main": {"name": "frequency", "n_train": 10000, "n_test": 1000}},
              "net": {"kind": "mlp", "width": 512, "depth": 6}, "lr": 0.05,
              "batch_size": 100, "epochs": 10000, "members": 100,
              "snapshots": [1, 100, 1000, 10000], "grid": 200, "k": 10},
    "tiny": {"datasets": {"main": {"name": "frequency", "n_train": 300, "n_test": 100}},
             "net": {"kind": "mlp", "width": 32, "depth": 3}, "lr": 0.5, "batch_size": 50,
             "epochs": 12, "members": 3, "snapshots": [1, 12], "grid": 24, "k": 5},
}  # fmt: skip
"""``quick``: 2000/500 points, 8 MLPs (4 layers, width 128) for 150 epochs at lr 0.5;
``standard``: the paper's 10000/1000 points, 10 MLPs for 400 epochs; ``paper``: 10000/1000
points, 100 networks, the paper's lr 0.05, batch 100 and 10000 epochs (Fig. 13's last
snapshot), a GPU-sized job; ``tiny``: the test suite's."""

CORRELATED = -0.5
"""Largest (most negative allowed) binned Pearson correlation that counts as the paper's
strong negative correlation (paper: −0.93 for accessibility, −0.8 for discriminability)."""


def _box_grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    return np.linspace(-1.0, 1.0, size), np.linspace(-2 * np.pi, 2 * np.pi, size)


def boundary_agreement(
    predicted: np.ndarray, x1: np.ndarray, x2: np.ndarray, kappa=PAPER_KAPPA, phi=PAPER_PHI
) -> np.ndarray:
    r"""Agreement of predicted class-1 regions ``(..., G2, G1)`` on the grid ``x1 x x2`` with
    every partial-sum classifier ``1[x_2 ≤ λ_j(x_1)]``, ``j = 1..m``: ``(..., m)``, the
    fraction of grid points where the two agree."""
    k, p = np.asarray(kappa, dtype=np.float64), np.asarray(phi, dtype=np.float64)
    partial = np.cumsum(np.sin(2 * np.pi * x1[:, None] * k + p), axis=1)  # (G1, m)
    rules = x2[None, :, None] <= partial.T[:, None, :]  # (m, G2, G1)
    pred = np.asarray(predicted, dtype=bool)[..., None, :, :]
    return (pred == rules).mean(axis=(-2, -1))


@functools.lru_cache(maxsize=4)
def _standardiser(n_train: int, n_test: int, seed: int) -> Standardize:
    raw = load_dataset("frequency", seed=seed, n_train=n_train, n_test=n_test).train.x
    return Standardize().fit(raw.double())


class _Snapshots:
    """Predicted class on the grid after each snapshot epoch."""

    def __init__(self, grid: torch.Tensor, epochs: list[int], size: int) -> None:
        self.grid, self.epochs, self.size = grid, set(epochs), size
        self.taken: list[np.ndarray] = []

    def on_epoch_end(self, state) -> None:
        if state.epoch in self.epochs:
            model = state.model
            model.eval()
            with torch.no_grad():
                pred = model(self.grid).argmax(1).numpy() == 1
            model.train()
            self.taken.append(pred.reshape(self.size, self.size))


def frequency_member(config: dict[str, Any]) -> dict[str, Any]:
    """Train one member; its accuracies, training correctness per epoch and grid
    snapshots (module docstring)."""
    spec = config["datasets"]["main"]
    seed = int(config.get("data_seed", 0))
    inputs = read_dataset(spec, None, seed)
    size = int(config["grid"])
    x1, x2 = _box_grid(size)
    points = np.stack(np.meshgrid(x1, x2), axis=-1).reshape(-1, 2)  # row = x2, column = x1
    standard = _standardiser(int(spec["n_train"]), int(spec["n_test"]), seed)
    grid = standard.apply(torch.from_numpy(points)).float()
    snapshots = _Snapshots(grid, [int(e) for e in config["snapshots"]], size)
    _, out = train_network({**config, "record_correct": True}, inputs, [snapshots])
    return {**out, "boundary": np.asarray(snapshots.taken, dtype=bool)}


def run_frequency(run: Run, context: RunContext) -> None:
    """Train the ensemble; store the per-example scores and the boundaries."""
    c = context.config
    config = {**c, "seed": context.seed, "data_seed": context.seed}
    with serial_threads():
        results = run_members(
            frequency_member, members(config, int(c["members"])), run, context, "frequency"
        )
        spec = c["datasets"]["main"]
        raw = load_dataset("frequency", seed=context.seed, n_train=int(spec["n_train"]),
                           n_test=int(spec["n_test"])).train  # fmt: skip
        inputs = read_dataset(spec, None, context.seed)
        x, y = raw.x.double().numpy(), raw.y.numpy()
        correct = np.stack([r["correct"] for r in results])  # (N, E, n)
        x1, x2 = _box_grid(int(c["grid"]))
        boundary = np.stack([r["boundary"] for r in results])  # (N, S, G, G)
        agreement = boundary_agreement(boundary, x1, x2)
        arrays = {
            "x": x,
            "y": y,
            "critical_frequency": critical_frequency(x, y),
            "accessibility": accessibility(correct),
            "discriminability": discriminability(inputs.x, inputs.y, k=int(c["k"])),
            "train_accuracy": np.stack([r["train_accuracy"] for r in results]),
            "test_accuracy": np.stack([r["test_accuracy"] for r in results]),
            "snapshots": np.asarray(c["snapshots"], dtype=np.int64),
            "grid_x1": x1,
            "grid_x2": x2,
            "boundary": boundary,
            "agreement": agreement,
            "terms": agreement.argmax(-1) + 1,
            "kappa": np.asarray(PAPER_KAPPA),
            "phi": np.asarray(PAPER_PHI),
        }
    run.save_array("frequency", **arrays)
    for epoch in range(arrays["train_accuracy"].shape[1]):
        run.log_dict(
            epoch,
            {key: float(arrays[key][:, epoch].mean()) for key in ("train_accuracy",
                                                                  "test_accuracy")},
            split="frequency",
        )  # fmt: skip
    run.flush()


# ---------------------------------------------------------------------------------------
# claims


def _binned(results: RunResults, value: str):
    cf = results.array("frequency", "critical_frequency")
    v = results.array("frequency", value)
    return binned_correlation(cf, v, width=1), correlation(cf, v)


def _against_critical_frequency(value: str, paper: float):
    def evaluate(results: RunResults):
        binned, per_example = _binned(results, value)
        r = binned.correlation.pearson
        values = {
            "binned_pearson": r,
            "binned_pearson_p": binned.correlation.pearson_p,
            "binned_spearman": binned.correlation.spearman,
            "per_example_pearson": per_example.pearson,
            "per_example_spearman": per_example.spearman,
            "groups": float(len(binned.scores)),
        }
        means = ", ".join(f"{int(s)}: {m:.3g}" for s, m in zip(binned.scores, binned.means,
                                                               strict=True))  # fmt: skip
        detail = (
            f"mean {value} per critical frequency (number of terms: mean) {means}; Pearson "
            f"over the {len(binned.scores)} groups {r:.3g} (p = {binned.correlation.pearson_p:.2g};"
            f" paper {paper:g}), per example Pearson {per_example.pearson:.3g}, Spearman "
            f"{per_example.spearman:.3g} (<= {CORRELATED:g})"
        )
        return verdict(bool(r <= CORRELATED), values, CORRELATED, detail)

    return evaluate


def _low_frequencies_first(results: RunResults):
    terms = results.array("frequency", "terms")  # (N, S)
    snapshots = results.array("frequency", "snapshots")
    mean = terms.mean(0)
    agree = results.array("frequency", "agreement").max(-1).mean(0)
    values = {"first_terms": float(mean[0]), "last_terms": float(mean[-1]),
              "first_agreement": float(agree[0]), "last_agreement": float(agree[-1])}  # fmt: skip
    detail = (
        "number of terms j whose partial sum λ_j best matches the learned decision regions, "
        "mean over networks, per snapshot epoch: "
        + ", ".join(f"{int(e)}: {t:.3g}" for e, t in zip(snapshots, mean, strict=True))
        + f" (best agreement {agree[0]:.3g} -> {agree[-1]:.3g}); last >= first + 1?"
    )
    return verdict(bool(mean[-1] >= mean[0] + 1), values, 1.0, detail)


FREQUENCY_CLAIMS: list[Claim] = [
    Claim(
        "critical-frequency-vs-accessibility",
        "Fig. 8a: examples with a higher critical frequency are learned later: accessibility "
        "and critical frequency are strongly negatively correlated (r = −0.93, p < 10^-2).",
        "002 §5.2, Fig. 8a",
        f"Pearson correlation of the critical frequency with the mean accessibility of its "
        f"examples (one point per critical frequency) <= {CORRELATED:g}",
        _against_critical_frequency("accessibility", -0.93),
    ),
    Claim(
        "discriminability-vs-critical-frequency",
        "Fig. 8b: discriminability (k-NN same-class fraction) captures the critical frequency: "
        "r = −0.8, p < 10^-2.",
        "002 §5.3, Fig. 8b",
        f"Pearson correlation of the critical frequency with the mean discriminability of its "
        f"examples <= {CORRELATED:g}",
        _against_critical_frequency("discriminability", -0.8),
    ),
    Claim(
        "boundary-adds-frequencies",
        "Fig. 13 / App. C.2: the decision function incorporates low frequencies at the "
        "beginning of learning, adding the higher frequencies only later on.",
        "002 App. C.2, Fig. 13",
        "number of terms of the best-matching partial sum λ_j, mean over networks: at the "
        "last snapshot >= at the first + 1",
        _low_frequencies_first,
    ),
]
"""The claims of ``pcbias-frequency``."""


# ---------------------------------------------------------------------------------------
# figures


def _binned_panel(ax, d: dict[str, np.ndarray], value: str, label: str) -> None:
    binned = binned_correlation(d["critical_frequency"], d[value], width=1)
    kappa = d["kappa"][binned.scores.astype(int) - 1]
    ax.errorbar(kappa, binned.means, yerr=np.nan_to_num(binned.sems), fmt="o-", capsize=3)
    r, p = binned.correlation.pearson, binned.correlation.pearson_p
    ax.set(xlabel="critical frequency (κ of the last term needed)", ylabel=label,
           title=f"r = {r:.2f} (p = {p:.1g})")  # fmt: skip
    ax.grid(alpha=0.3)


def draw_frequency(run: Run) -> None:
    """Figs. 8, 13 and 16 from ``frequency.npz``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from collapselab.report import save_run_figure

    d = run.load_array("frequency")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    _binned_panel(axes[0], d, "accessibility", "accessibility (mean ± SE)")
    _binned_panel(axes[1], d, "discriminability", "discriminability (mean ± SE)")
    fig.suptitle("Fig. 8: (a) accessibility and (b) discriminability vs critical frequency")
    save_run_figure(run, fig, "fig8_critical_frequency")

    x1, x2 = d["grid_x1"], d["grid_x2"]
    fine = np.linspace(-1.0, 1.0, 1000)
    curve = np.sin(2 * np.pi * fine[:, None] * d["kappa"] + d["phi"]).sum(1)
    snaps = d["snapshots"]
    fig, axes = plt.subplots(1, len(snaps), figsize=(3.6 * len(snaps), 3.6),
                             constrained_layout=True, squeeze=False)  # fmt: skip
    for ax, s, region, terms in zip(axes[0], snaps, d["boundary"][0], d["terms"][0],
                                    strict=True):  # fmt: skip
        ax.pcolormesh(x1, x2, region.astype(float), cmap="coolwarm", alpha=0.35,
                      shading="auto", vmin=0, vmax=1)  # fmt: skip
        ax.scatter(d["x"][:, 0], d["x"][:, 1], c=d["y"], s=2, cmap="viridis")
        ax.plot(fine, curve, "k-", lw=0.8)
        ax.set(xlim=(-1, 1), ylim=(x2[0], x2[-1]), xlabel="x₁",
               title=f"epoch {s}: best λ_j, j = {terms}")  # fmt: skip
    axes[0, 0].set_ylabel("x₂")
    save_run_figure(run, fig, "fig13_decision_boundaries")

    fig, axes = plt.subplots(1, 2, figsize=(9, 4), constrained_layout=True)
    cf = d["critical_frequency"]
    for ax, j in zip(axes, (1, 2), strict=True):
        chosen = cf == j
        ax.scatter(d["x"][~chosen, 0], d["x"][~chosen, 1], s=1, c="0.85")
        ax.scatter(d["x"][chosen, 0], d["x"][chosen, 1], s=2, c=d["y"][chosen], cmap="viridis")
        ax.plot(fine, curve, "k-", lw=0.8)
        ax.set(
            xlim=(-1, 1),
            ylim=(x2[0], x2[-1]),
            xlabel="x₁",
            ylabel="x₂",
            title=f"critical frequency κ = {d['kappa'][j - 1]:g} ({int(chosen.sum())} points)",
        )
    save_run_figure(run, fig, "fig16_critical_frequency")


FREQUENCY_CAPTIONS = {
    "fig8_critical_frequency": "Fig. 8 analogue: mean accessibility (left; over the networks "
    "and epochs) and mean k-NN discriminability (right) of the training points with each "
    "critical frequency (labelled by κ of the last sine term needed), ± standard error; r: "
    "Pearson over the groups. Points that need higher frequencies are learned later and sit "
    "among points of the other class.",
    "fig13_decision_boundaries": "Fig. 13 analogue: decision regions of one network at the "
    "snapshot epochs (background), the training points (colour: class) and the true boundary "
    "x₂ = λ(x₁) (black); title: the number of terms of the partial sum λ_j that agrees best "
    "with the regions. The boundary starts smooth and adds higher frequencies later.",
    "fig16_critical_frequency": "Fig. 16 analogue: the training points whose critical "
    "frequency is κ = 0 (the line x₂ = 0 classifies them, left) and κ = 1 (right).",
}
