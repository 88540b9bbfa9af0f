r"""``pcbias-stvgg``: the PC-bias of a non-linear CNN seen through its linearisation (paper
002 Fig. 4d, §3.3; note 002 §7 item 11), and the same networks on top-``P`` projections of
the test set (Fig. 5a, whose networks are st-VGGs).

An ensemble of st-VGGs (:class:`~collapselab.models.StVGG`, ReLU and max-pooling, scaled
width) is trained by minibatch SGD on cross-entropy (the paper's optimiser; dropout as in
the paper). After every epoch each network is **linearised** as the paper does ("ignoring
any non-linear activation", :func:`~collapselab.models.compact_representation`): a copy with
every activation the identity and max-pooling replaced by 2 x 2 average pooling (the linear
twin), in eval mode, an affine map whose compact matrix ``W = [f(e_j) − f(0)]_j`` (``K x
q``, one column per input pixel) is read off the basis images. In the principal frame of the
training images (``W̃ = W U``) the across-network std per PC
(:func:`~collapselab.metrics.pcbias.pc_ensemble_std`) shows which PCs the networks' linear
parts have moved.

With ``pcs`` in the configuration, every network is also scored after every epoch on the
test set projected onto its top ``P`` PCs for each ``P``
(:class:`~collapselab.data.pca.PCAProjection` fitted on the training inputs, reconstructed
in input space: :mod:`~collapselab.experiments.pcbias.evaluation`), Fig. 5a on the paper's own
architecture (``pcbias-projections`` draws Fig. 5 with ReLU MLPs). Its two claims are
``pcbias-projections``' Fig. 5 claims with the same thresholds
(:func:`~collapselab.experiments.pcbias.projections.projection_peaks_first`,
:func:`~collapselab.experiments.pcbias.projections.projection_decline`).

Stored: ``arrays/stvgg.npz`` (``epochs``, ``eigenvalues``, ``std`` ``(E+1, q)``,
``train_accuracy`` ``(N, E+1)``; with ``pcs``, ``pcs`` and ``projected`` ``(N, E+1,
len(pcs))``) and rows of split ``projected`` (``layer`` ``P=<p>``: the ensemble-mean
accuracy per epoch).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.experiments.claims import Claim, NotEvaluable, RunResults
from collapselab.experiments.pcbias._common import (
    member_base,
    one_hot,
    read_dataset,
    run_ensembles,
    verdict,
)
from collapselab.experiments.pcbias.evaluation import set_accuracies, transformed_sets
from collapselab.experiments.pcbias.projections import (
    DECLINE,
    log_projected,
    projection_decline,
    projection_peaks_first,
)
from collapselab.experiments.pcbias.training import sgd_epoch
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pc_frame import principal_frame
from collapselab.metrics.pcbias import pc_ensemble_std
from collapselab.models import StVGG, compact_representation
from collapselab.store import Run

__all__ = ["STVGG_CLAIMS", "linearised_matrix", "run_stvgg", "stvgg_dry_run", "stvgg_member"]

EARLY = -0.5
"""Largest Spearman correlation of ``d_j`` with the early std ratio counted as PC-biased."""


SCORE_CHUNK = 200
"""Images per forward pass when scoring the training set (measured on 2 cores at load 3-4,
half-width st-VGG: the standard preset's 5000 images in one batch 2.8 s, in chunks of 200
0.9 s)."""


def _side(q: int) -> int:
    return round(q**0.5)


def linearised_matrix(net: StVGG) -> np.ndarray:
    """The compact matrix ``(K, q)`` of ``net``'s linearisation, ``W e_j = f(e_j) − f(0)``:
    :func:`~collapselab.models.compact_representation` with
    ``method="ignore_nonlinearities"`` (ReLU the identity, max-pooling the 2 x 2 average
    pooling of the linear twin, eval mode) and ``bias="keep"``, all ``q`` basis images in one
    pass as before (the stored runs' numbers, bit for bit)."""
    h, w = net.input_size
    q = net.in_channels * h * w
    shape = (net.in_channels, h, w)
    matrix = compact_representation(net, shape, "ignore_nonlinearities", chunk_size=q)
    return matrix.numpy()


def _chunked(net: StVGG, side: int):
    """``net`` as a map from flat ``(n, side²)`` images to logits, in chunks of
    :data:`SCORE_CHUNK` (the projected test sets are stored flat)."""

    def logits(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([net(chunk.reshape(-1, 1, side, side)) for chunk in x.split(SCORE_CHUNK)])

    return logits


def stvgg_member(config: dict[str, Any]) -> dict[str, Any]:
    """Train one st-VGG; ``compact`` ``(E+1, K, q)`` its linearisation after every epoch (in
    input coordinates) and ``train_accuracy`` ``(E+1,)``; with ``pcs``, ``projected``
    ``(E+1, len(pcs))`` its test accuracy on each top-``P`` projection."""
    data = read_dataset(config["datasets"]["main"], config.get("data_dir"),
                        int(config.get("data_seed", 0)))  # fmt: skip
    side = _side(data.x.shape[1])
    flat = torch.from_numpy(data.x).float()
    x = flat.reshape(-1, 1, side, side)
    y = torch.from_numpy(data.y).long()
    projected_test = transformed_sets([f"pca:{int(p)}" for p in config.get("pcs", [])], flat,
                                      torch.from_numpy(data.x_test).float(),
                                      torch.from_numpy(data.y_test).long())  # fmt: skip
    torch.manual_seed(1000 * int(config.get("seed", 0)) + int(config["member"]))
    mult = float(config["width_multiplier"])
    net = StVGG(data.n_classes, 1, input_size=side, width_multiplier=mult)
    optimiser = torch.optim.SGD(net.parameters(), lr=float(config["lr"]))
    order = torch.Generator().manual_seed(int(config["member"]))
    compact, accuracy, projected = [], [], []

    def record() -> None:
        net.eval()
        with torch.no_grad():  # in chunks: one 5000-image batch is slower than 25 of 200
            predicted = torch.cat([net(chunk).argmax(1) for chunk in x.split(SCORE_CHUNK)])
            accuracy.append(float((predicted == y).double().mean()))
        compact.append(linearised_matrix(net))
        if not np.all(np.isfinite(compact[-1])):  # finite weights, overflowing outputs
            raise FloatingPointError(f"the linearised network is not finite after epoch "
                                     f"{len(compact) - 1} (lr too large?)")  # fmt: skip
        if projected_test:
            projected.append(set_accuracies(_chunked(net, side), projected_test))
        net.train()

    record()
    for _ in range(int(config["epochs"])):
        sgd_epoch(net, x, y, optimiser, int(config["batch_size"]), order)
        record()
    out = {"compact": np.stack(compact), "train_accuracy": np.asarray(accuracy)}
    if projected:
        out["projected"] = np.asarray(projected)
    return out


def run_stvgg(run: Run, context: RunContext) -> None:
    """Train the ensemble; store the per-PC std of the linearised networks."""
    c = context.config
    base = member_base(context)
    with serial_threads():
        results = run_ensembles(stvgg_member, {"stvgg": base}, run, context)["stvgg"]
        data = read_dataset(c["datasets"]["main"], base["data_dir"], context.seed)
        frame = principal_frame(data.x, one_hot(data.y, data.n_classes))
    compact = np.stack([r["compact"] for r in results], axis=1)  # (E+1, N, K, q)
    std = pc_ensemble_std(frame.rotate(compact))
    accuracy = np.stack([r["train_accuracy"] for r in results])
    arrays = {"epochs": np.arange(compact.shape[0]), "eigenvalues": frame.eigenvalues,
              "std": std, "train_accuracy": accuracy}  # fmt: skip
    if c.get("pcs"):
        arrays["pcs"] = np.asarray([int(p) for p in c["pcs"]])
        arrays["projected"] = np.stack([r["projected"] for r in results])
    run.save_array("stvgg", **arrays)
    for e in range(compact.shape[0]):
        run.log(e, "std_top_pc", float(std[e, 0]), epoch=e, split="stvgg")
    if "projected" in arrays:
        log_projected(run, arrays["pcs"], arrays["projected"])
    run.flush()


def stvgg_dry_run(
    config: dict[str, Any], data_dir: str | None = None, seed: int = 0
) -> dict[str, Any]:
    """Read and standardise the data, check that it is single-channel square images and
    every ``P`` of ``pcs`` lies in ``[1, q]``, build the st-VGG at the configured width and
    pass a batch through it; nothing is trained."""
    member = {**config, "data_dir": None if data_dir is None else str(data_dir)}
    data = read_dataset(config["datasets"]["main"], member["data_dir"], seed)
    q = data.x.shape[1]
    side = _side(q)
    if side * side != q:
        raise ValueError(f"pcbias-stvgg needs single-channel square images; the data has "
                         f"{q} inputs per example, not a square number")  # fmt: skip
    bad = [p for p in config.get("pcs", []) if not 1 <= int(p) <= q]
    if bad:
        raise ValueError(f"pcs {bad} must lie in [1, q = {q}] (the input dimension)")
    net = StVGG(data.n_classes, 1, input_size=side,
                width_multiplier=float(config["width_multiplier"]))  # fmt: skip
    batch = torch.from_numpy(data.x[: int(config["batch_size"])]).float()
    with torch.no_grad():
        net.eval()(batch.reshape(-1, 1, side, side))
    return {"dataset": config["datasets"]["main"]["name"], "n_train": int(data.x.shape[0]),
            "n_test": int(data.x_test.shape[0]), "input_dim": q, "pcs": list(config.get("pcs", [])),
            "width_multiplier": float(config["width_multiplier"]),
            "parameters": sum(p.numel() for p in net.parameters()),
            "members": int(config["members"]), "epochs": int(config["epochs"])}  # fmt: skip


def _early_bias(results: RunResults):
    from scipy import stats

    std = results.array("stvgg", "std")
    d = results.array("stvgg", "eigenvalues")
    keep = d > 0
    ratio = std[1, keep] / std[0, keep]
    rho = float(stats.spearmanr(d[keep], ratio).statistic)
    top = float(np.mean(ratio[: max(1, keep.sum() // 10)]))
    bottom = float(np.mean(ratio[keep.sum() // 2 :]))
    detail = (
        f"after epoch 1: std_j/std_j^0 of the linearised networks, mean {top:.3g} over the "
        f"top 10% PCs, {bottom:.3g} over the bottom half; Spearman with d_j {rho:.3g} "
        f"(<= {EARLY:g})"
    )
    return verdict(rho <= EARLY, {"spearman": rho, "top": top, "bottom": bottom}, EARLY, detail)


def _projection_curves(results: RunResults) -> tuple[np.ndarray, np.ndarray]:
    """``pcs`` and the ensemble-mean projected test accuracy ``(E+1, len(pcs))``."""
    if "projected" not in results.arrays.get("stvgg", {}):
        raise NotEvaluable("the run stored no projected accuracies (a run from before Fig. 5a "
                           "on st-VGG, or a configuration without pcs)")  # fmt: skip
    return results.array("stvgg", "pcs"), results.array("stvgg", "projected").mean(0)


def _stvgg_peaks_first(results: RunResults):
    return projection_peaks_first(*_projection_curves(results))


def _stvgg_declines(results: RunResults):
    return projection_decline(*_projection_curves(results))


STVGG_CLAIMS: list[Claim] = [
    Claim(
        "stvgg-linearised-pc-bias-early",
        "Fig. 4d: in the linearised non-linear st-VGG the PC-bias shows early on: the "
        "across-network std moves first along the leading PCs, the lowest PCs hardly change.",
        "002 §3.3, Fig. 4d",
        f"Spearman(d_j, std_j after epoch 1 / std_j at init) <= {EARLY:g}",
        _early_bias,
    ),
    Claim(
        "stvgg-small-p-peaks-first",
        "Fig. 5a (st-VGG): networks trained on the original data reach their best accuracy "
        "on data projected onto few PCs early; on more PCs later.",
        "002 §4.2, Fig. 5a",
        "epoch of the peak mean test accuracy on the smallest-P projection < on the largest P "
        "(as pcbias-projections' small-p-peaks-first)",
        _stvgg_peaks_first,
    ),
    Claim(
        "stvgg-small-p-declines",
        "Fig. 5a (st-VGG): for P = 1 and 10 the accuracy peaks after a few epochs and then "
        "declines.",
        "002 §4.2, Fig. 5a",
        f"largest peak-minus-final mean test accuracy over P <= 10 >= {DECLINE:g} (as "
        "pcbias-projections' small-p-declines)",
        _stvgg_declines,
    ),
]
"""The claims of ``pcbias-stvgg``."""
