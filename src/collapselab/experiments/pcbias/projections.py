r"""``pcbias-projections``: non-linear networks and the PC-bias: accuracy on top-``P``
projections over epochs, accessibility of linear vs non-linear nets, the critical principal
component, and discriminability (paper 002 Fig. 5, Fig. 6a-b, Table 1; note 002 §2.5-2.6,
§5 items 9); and Fig. 1, top-``P`` projections of images beside low-pass filtered images.

Two ensembles of the same MLP (bias on, trained by minibatch SGD on cross-entropy, no
momentum or weight decay, the paper's optimiser) are trained from the same seeds: ReLU
(non-linear) and its linear twin (every activation the identity, a LeakyReLU of slope 1:
the paper's "linear st-VGG" idea on an MLP). After every epoch each network is scored on
every training example (correct or not) and on the test set projected onto its top ``P``
PCs (:class:`~collapselab.data.pca.PCAProjection`, fitted on the training inputs,
reconstructed in input space) for each configured ``P``. At the end, each non-linear
network's penultimate-layer features give every training example's discriminability.

From :mod:`collapselab.metrics.pcbias`: accessibility per ensemble (over epochs 1..E), the
critical PC of every training example (least squares on the full data, uncentred frame,
"correct for all P' >= P"), k-NN discriminability (``k = 10``) of the raw inputs and of the
penultimate features (mean over networks), and the binned correlation (width 10) of
accessibility against the critical PC.

Stored: ``arrays/projections.npz`` (``epochs``, ``pcs``, ``projected_<kind>`` ``(N, E+1,
len(P))``, ``accessibility_<kind>`` ``(n,)`` for ``kind`` in ``nonlinear``/``linear``,
``critical_pc``, ``disc_raw``, ``disc_penultimate`` ``(n,)``, ``binned_scores``,
``binned_smoothed``, ``train_accuracy_<kind>`` ``(N, E+1)``, ``test_accessibility_<kind>``
``(n_test,)`` the same accessibility on the test split (no claim reads it); with
``eval_transforms`` in the configuration, ``eval_<kind>`` ``(N, E+1, len)`` the test
accuracies on those transformed copies, :mod:`~collapselab.experiments.pcbias.evaluation`,
and ``eval_transforms`` their names); for image data ``arrays/pca_images.npz`` (Fig. 1:
:func:`~collapselab.experiments.pcbias.images.pca_vs_lowpass`, a few test images, their top-20
PC reconstruction and their Fourier low-pass); rows of split ``projected`` (``layer``
``P=<p>``: ensemble-mean accuracy per epoch).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.experiments.claims import Claim, ClaimResult, RunResults
from collapselab.experiments.pcbias._common import (
    member_base,
    read_dataset,
    run_ensembles,
    stacked,
    verdict,
)
from collapselab.experiments.pcbias.evaluation import set_accuracies, transformed_sets
from collapselab.experiments.pcbias.images import IMAGE_PCS, pca_vs_lowpass
from collapselab.experiments.pcbias.training import sgd_epoch
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pcbias import (
    accessibility,
    binned_correlation,
    correlation,
    critical_principal_component,
    discriminability,
    early_stopping_benefit,
)
from collapselab.models import MLP
from collapselab.store import Run

__all__ = [
    "KINDS",
    "PROJECTION_CLAIMS",
    "log_projected",
    "projection_decline",
    "projection_peaks_first",
    "projections_dry_run",
    "run_projections",
    "sgd_member",
]

KINDS = ("nonlinear", "linear")

NEIGHBOURS = 10
"""k of the k-NN discriminability."""

DECLINE = 0.02
"""Smallest early-stopping benefit (peak minus final accuracy) counted as a decline."""

AGREE = 0.5
"""Smallest Pearson correlation of linear and non-linear accessibility counted as agreement."""

CRITICAL = -0.5
"""Largest binned Pearson correlation of accessibility with the critical PC."""


def _inputs(config: dict[str, Any]):
    return read_dataset(config["datasets"]["main"], config.get("data_dir"),
                        int(config.get("data_seed", 0)))  # fmt: skip


def _network(config: dict[str, Any], q: int, k: int) -> MLP:
    linear = config["kind"] == "linear"
    return MLP(q, k, width=int(config["width"]), depth=int(config["depth"]), bias=True,
               activation="leaky_relu" if linear else "relu",
               negative_slope=1.0 if linear else 0.01)  # fmt: skip


def _grid(x: np.ndarray, size: int) -> torch.Tensor:
    """``size x size`` points (row-major, the second coordinate fastest) spanning the
    bounding box of 2-D inputs ``x``."""
    axes = [np.linspace(x[:, i].min(), x[:, i].max(), size) for i in range(2)]
    first, second = np.meshgrid(*axes, indexing="ij")
    return torch.from_numpy(np.stack([first.ravel(), second.ravel()], 1)).float()


def sgd_member(config: dict[str, Any]) -> dict[str, Any]:
    """Train one network (``kind`` ``nonlinear`` or ``linear``) for ``epochs`` epochs of SGD;
    return, after every epoch (and at epoch 0), ``correct`` ``(E+1, n)`` and
    ``test_correct`` ``(E+1, n_test)`` (which training and test examples it classifies
    correctly), ``projected`` ``(E+1, len(pcs))`` test accuracies on the top-``P``
    projections, ``train_accuracy`` and ``test_accuracy`` ``(E+1,)``; with
    ``eval_transforms`` (names of :mod:`~collapselab.experiments.pcbias.evaluation`, e.g.
    ``["pca:10", "zca"]``) ``eval_accuracy`` ``(E+1, len)`` the test accuracies on those
    copies; (non-linear, unless ``discriminability`` is false) ``penultimate``
    discriminability ``(n,)``; for 2-D inputs with ``boundary_epochs``, ``boundary``
    ``(len, G, G)``: the predicted class on a ``G x G`` grid over the inputs' bounding box
    after each of those epochs (``G = boundary_grid``)."""
    data = _inputs(config)
    x = torch.from_numpy(data.x).float()
    y = torch.from_numpy(data.y).long()
    x_test = torch.from_numpy(data.x_test).float()
    y_test = torch.from_numpy(data.y_test).long()
    projected_test = transformed_sets([f"pca:{int(p)}" for p in config.get("pcs", [])],
                                      x, x_test, y_test)  # fmt: skip
    extra_test = transformed_sets(config.get("eval_transforms", []), x, x_test, y_test)
    torch.manual_seed(1000 * int(config.get("seed", 0)) + int(config["member"]))
    net = _network(config, x.shape[1], data.n_classes)
    optimiser = torch.optim.SGD(net.parameters(), lr=float(config["lr"]))
    batch = int(config["batch_size"])
    order = torch.Generator().manual_seed(int(config["member"]))
    correct, test_correct, projected, extra, accuracy, test_accuracy = [], [], [], [], [], []

    def score() -> None:
        with torch.no_grad():
            hits = net(x).argmax(1) == y
            correct.append(hits.numpy())
            accuracy.append(float(hits.double().mean()))
            test_hits = net(x_test).argmax(1) == y_test
            test_correct.append(test_hits.numpy())
            test_accuracy.append(float(test_hits.double().mean()))
        projected.append(set_accuracies(net, projected_test))
        extra.append(set_accuracies(net, extra_test))

    snapshots = [int(e) for e in config.get("boundary_epochs", [])]
    grid = _grid(data.x, int(config.get("boundary_grid", 60))) if snapshots else None
    boundary = []
    score()
    for epoch in range(1, int(config["epochs"]) + 1):
        sgd_epoch(net, x, y, optimiser, batch, order)
        score()
        if epoch in snapshots:
            with torch.no_grad():
                boundary.append(net(grid).argmax(1).numpy().astype(np.int8))
    out: dict[str, Any] = {"correct": np.stack(correct), "test_correct": np.stack(test_correct),
                           "projected": np.asarray(projected),
                           "train_accuracy": np.asarray(accuracy),
                           "test_accuracy": np.asarray(test_accuracy)}  # fmt: skip
    if extra_test:
        out["eval_accuracy"] = np.asarray(extra)
    if boundary:
        out["boundary"] = np.stack(boundary)
    if config["kind"] == "nonlinear" and config.get("discriminability", True):
        with torch.no_grad():
            features = net.flatten(x)
            for layer in net.layers:
                features = layer(features)
        out["penultimate"] = discriminability(features.double().numpy(), data.y, NEIGHBOURS)
    return out


def projections_dry_run(
    config: dict[str, Any], data_dir: str | None = None, seed: int = 0
) -> dict[str, Any]:
    """Read and standardise the data, build both networks and pass a batch through them,
    check every ``P`` against the input dimension; nothing is trained."""
    member = {**config, "data_seed": seed, "data_dir": None if data_dir is None else str(data_dir)}
    data = _inputs(member)
    q = data.x.shape[1]
    bad = [p for p in config.get("pcs", []) if not 1 <= int(p) <= q]
    if bad:
        raise ValueError(f"pcs {bad} must lie in [1, q = {q}] (the input dimension)")
    batch = torch.from_numpy(data.x[: int(config["batch_size"])]).float()
    for kind in KINDS:
        _network({**config, "kind": kind}, q, data.n_classes)(batch)
    return {"dataset": config["datasets"]["main"]["name"], "n_train": int(data.x.shape[0]),
            "n_test": int(data.x_test.shape[0]), "input_dim": q, "pcs": list(config.get("pcs", [])),
            "members": int(config["members"]), "epochs": int(config["epochs"])}  # fmt: skip


def _optional_records(
    results: list[dict[str, Any]], kind: str, names: list[str]
) -> dict[str, np.ndarray]:
    """``test_accessibility_<kind>`` ``(n_test,)`` (over epochs 1..E, as on the training
    set) and, with ``eval_transforms``, ``eval_<kind>`` ``(N, E+1, len)`` and their names;
    what a member stored by an earlier version lacks is left out."""
    out: dict[str, np.ndarray] = {}
    test_correct = stacked(results, "test_correct")  # (N, E+1, n_test)
    if test_correct is not None:
        out[f"test_accessibility_{kind}"] = accessibility(test_correct[:, 1:])
    evaluated = stacked(results, "eval_accuracy") if names else None
    if evaluated is not None:
        out[f"eval_{kind}"] = evaluated
        out["eval_transforms"] = np.asarray(names, dtype=str)
    return out


def run_projections(run: Run, context: RunContext) -> None:
    """Train both ensembles; store the curves, accessibility, critical PCs and
    discriminability."""
    c = context.config
    base = member_base(context)
    ensembles = {kind: {**base, "kind": kind} for kind in KINDS}
    with serial_threads():
        found = run_ensembles(sgd_member, ensembles, run, context)
        data = _inputs(base)
        critical = critical_principal_component(data.x, data.y, data.n_classes)
        raw = discriminability(data.x, data.y, NEIGHBOURS)
    arrays: dict[str, Any] = {"epochs": np.arange(int(c["epochs"]) + 1),
                              "pcs": np.asarray(c["pcs"]), "critical_pc": critical,
                              "disc_raw": raw}  # fmt: skip
    for kind in KINDS:
        results = found[kind]
        correct = np.stack([r["correct"] for r in results])  # (N, E+1, n)
        arrays[f"accessibility_{kind}"] = accessibility(correct[:, 1:])
        arrays[f"projected_{kind}"] = np.stack([r["projected"] for r in results])
        arrays[f"train_accuracy_{kind}"] = np.stack([r["train_accuracy"] for r in results])
        arrays |= _optional_records(results, kind, c.get("eval_transforms", []))
    arrays["disc_penultimate"] = np.mean([r["penultimate"] for r in found["nonlinear"]], axis=0)
    binned = binned_correlation(critical, arrays["accessibility_nonlinear"], width=10)
    arrays |= {"binned_scores": binned.scores, "binned_smoothed": binned.smoothed,
               "binned_means": binned.means, "binned_sems": binned.sems}  # fmt: skip
    run.save_array("projections", **arrays)
    images = pca_vs_lowpass(data.x, data.x_test, data.y_test, int(c.get("image_pcs", IMAGE_PCS)))
    if images is not None:  # Fig. 1, for image data only
        run.save_array("pca_images", **images)
    log_projected(run, arrays["pcs"], arrays["projected_nonlinear"])
    run.flush()


def log_projected(run: Run, pcs: np.ndarray, projected: np.ndarray) -> None:
    """Rows of split ``projected``: for every epoch ``e`` (row of ``projected`` ``(N, E+1,
    len(pcs))``, networks first) and ``P``, metric ``test_accuracy``, layer ``P=<p>``, the
    mean over networks."""
    mean = projected.mean(0)
    for e in range(mean.shape[0]):
        for j, p in enumerate(pcs):
            run.log(e, "test_accuracy", float(mean[e, j]), epoch=e, split="projected",
                    layer=f"P={int(p)}")  # fmt: skip


# ---------------------------------------------------------------------------------------
# claims


def _curves(results: RunResults) -> tuple[np.ndarray, np.ndarray]:
    return results.array("projections", "pcs"), results.array(
        "projections", "projected_nonlinear"
    ).mean(0)


def _small_peaks_first(results: RunResults):
    return projection_peaks_first(*_curves(results))


def _small_declines(results: RunResults):
    return projection_decline(*_curves(results))


def projection_peaks_first(pcs: np.ndarray, mean: np.ndarray) -> ClaimResult:
    """Fig. 5's order of the peaks: with ``mean`` ``(E+1, len(pcs))`` the ensemble-mean
    test accuracy on each top-``P`` projection per epoch (``pcs`` increasing), the smallest
    ``P`` peaks at an earlier epoch than the largest (first epoch of the maximum)."""
    peaks = mean.argmax(0)
    ok = int(peaks[0]) < int(peaks[-1])
    detail = (
        "epoch of the peak mean test accuracy per P: "
        + ", ".join(f"P={int(p)}: {int(e)}" for p, e in zip(pcs, peaks, strict=True))
        + f" (P={int(pcs[0])} before P={int(pcs[-1])}?)"
    )
    return verdict(ok, {f"peak_P{int(p)}": float(e) for p, e in zip(pcs, peaks, strict=True)},
                   None, detail)  # fmt: skip


def projection_decline(pcs: np.ndarray, mean: np.ndarray) -> ClaimResult:
    """Fig. 5's decline: the largest early-stopping benefit (peak minus final, of ``mean``
    ``(E+1, len(pcs))``) over the projections with ``P <= 10`` (the smallest ``P`` when
    there is none) is at least :data:`DECLINE`."""
    small = [j for j, p in enumerate(pcs) if p <= 10]
    if not small:
        small = [0]
    benefits = {int(pcs[j]): early_stopping_benefit(mean[:, j])[0] for j in small}
    best = max(benefits.values())
    detail = (
        "peak minus final mean test accuracy for P <= 10: "
        + ", ".join(f"P={p}: {b:.3g}" for p, b in benefits.items())
        + f" (largest >= {DECLINE:g})"
    )
    return verdict(best >= DECLINE, {f"benefit_P{p}": b for p, b in benefits.items()},
                   DECLINE, detail)  # fmt: skip


def _linear_agrees(results: RunResults):
    r = correlation(results.array("projections", "accessibility_nonlinear"),
                    results.array("projections", "accessibility_linear"))  # fmt: skip
    detail = (
        f"accessibility of the ReLU vs the linear ensemble: Pearson {r.pearson:.3g} "
        f"(p {r.pearson_p:.2g}), Spearman {r.spearman:.3g} over {r.n} examples (>= {AGREE:g})"
    )
    return verdict(r.pearson >= AGREE, {"pearson": r.pearson, "spearman": r.spearman},
                   AGREE, detail)  # fmt: skip


def _critical_pc(results: RunResults):
    access = results.array("projections", "accessibility_nonlinear")
    critical = results.array("projections", "critical_pc")
    binned = binned_correlation(critical, access, width=10)
    raw = correlation(critical, access)
    detail = (
        f"accessibility vs critical PC: binned (width-10 moving average over "
        f"{binned.scores.size} PC values) Pearson {binned.correlation.pearson:.3g}; per example "
        f"Pearson {raw.pearson:.3g}, Spearman {raw.spearman:.3g} (binned <= {CRITICAL:g})"
    )
    values = {"binned_pearson": binned.correlation.pearson, "pearson": raw.pearson,
              "spearman": raw.spearman}  # fmt: skip
    return verdict(binned.correlation.pearson <= CRITICAL, values, CRITICAL, detail)


def _discriminability(results: RunResults):
    access = results.array("projections", "accessibility_nonlinear")
    raw = correlation(access, results.array("projections", "disc_raw")).pearson
    deep = correlation(access, results.array("projections", "disc_penultimate")).pearson
    detail = (
        f"Pearson of accessibility with discriminability (k = {NEIGHBOURS}): raw inputs "
        f"{raw:.3g}, penultimate layer {deep:.3g} (both > 0, penultimate > raw?)"
    )
    return verdict(0 < raw < deep, {"raw": raw, "penultimate": deep}, 0.0, detail)


PROJECTION_CLAIMS: list[Claim] = [
    Claim(
        "small-p-peaks-first",
        "Fig. 5: networks trained on the original data reach their best accuracy on data "
        "projected onto few PCs early; on more PCs later.",
        "002 §4.2, Fig. 5",
        "epoch of the peak mean test accuracy on the smallest-P projection < on the largest P",
        _small_peaks_first,
    ),
    Claim(
        "small-p-declines",
        "Fig. 5: for P = 1 and 10 the accuracy peaks after a few epochs and then declines.",
        "002 §4.2, Fig. 5",
        f"largest peak-minus-final mean test accuracy over P <= 10 >= {DECLINE:g}",
        _small_declines,
    ),
    Claim(
        "linear-nonlinear-accessibility",
        "Fig. 6a: linear and non-linear networks learn the examples in a similar order "
        "(r = 0.85 for st-VGG vs linear nets).",
        "002 §4.2, Fig. 6a",
        f"Pearson of the two ensembles' accessibility >= {AGREE:g}",
        _linear_agrees,
    ),
    Claim(
        "critical-pc-vs-accessibility",
        "Fig. 6b: examples with a lower critical principal component are learned earlier "
        "(binned correlation −0.93).",
        "002 §4.2, Fig. 6b",
        f"Pearson of the critical PC with the binned, smoothed accessibility <= {CRITICAL:g}",
        _critical_pc,
    ),
    Claim(
        "discriminability-vs-accessibility",
        "Table 1: accessibility correlates with discriminability, more in the penultimate "
        "layer than in the raw inputs (0.46 vs 0.85 on small mammals).",
        "002 §5.3, Table 1",
        "0 < Pearson(accessibility, raw discriminability) < Pearson(accessibility, "
        "penultimate discriminability)",
        _discriminability,
    ),
]
"""The claims of ``pcbias-projections``."""
