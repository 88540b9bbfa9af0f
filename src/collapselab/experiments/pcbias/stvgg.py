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

With ``pcs`` in the preset, every network is also scored after every epoch on the
test set projected onto its top ``P`` PCs for each ``P``
(:class:`~collapselab.data.pca.PCAProjection` fitted on the training inputs, reconstructed
in input space: :mod:`~collapselab.experiments.pcbias.evaluation`), Fig. 5a on the paper's own
architecture (``pcbias-projections`` draws Fig. 5 with ReLU MLPs). Its two claims are
``pcbias-projections``' Fig. 5 claims with the same thresholds
(:func:`~collapselab.experiments.pcbias.claims.projection_peaks_first`,
:func:`~collapselab.experiments.pcbias.claims.projection_decline`).

Stored: ``arrays/stvgg.npz`` (``epochs``, ``eigenvalues``, ``std`` ``(E+1, q)``,
``train_accuracy`` ``(N, E+1)``; with ``pcs``, ``pcs`` and ``projected`` ``(N, E+1,
len(pcs))``) and rows of split ``projected`` (``layer`` ``P=<p>``: the ensemble-mean
accuracy per epoch).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.experiments.gpu_hours import Training, forward_flops
from collapselab.experiments.pcbias._common import (
    Member,
    one_hot,
    read_inputs,
    run_ensembles,
    run_fields,
)
from collapselab.experiments.pcbias.evaluation import set_accuracies, transformed_sets
from collapselab.experiments.pcbias.presets import StVGGPreset
from collapselab.experiments.pcbias.projections import log_projected
from collapselab.experiments.pcbias.training import sgd_epoch
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pc_frame import principal_frame
from collapselab.metrics.pcbias import pc_ensemble_std
from collapselab.models import StVGG, compact_representation
from collapselab.store import Run

__all__ = ["StVGGMember", "linearised_matrix", "run_stvgg", "stvgg_dry_run", "stvgg_member"]


@dataclass(frozen=True, kw_only=True)
class StVGGMember(Member):
    """One st-VGG trained by minibatch SGD (:func:`stvgg_member`): its ``width_multiplier``,
    ``lr``, ``batch_size`` and ``epochs``; ``pcs``, the ``P`` of the top-``P`` projections of
    the test set it is scored on after every epoch."""

    width_multiplier: float
    lr: float
    batch_size: int
    epochs: int
    pcs: tuple[int, ...] = ()

    def train(self) -> dict[str, Any]:
        return stvgg_member(self)


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


def stvgg_member(member: StVGGMember) -> dict[str, Any]:
    """Train ``member``; ``compact`` ``(E+1, K, q)`` its linearisation after every epoch (in
    input coordinates) and ``train_accuracy`` ``(E+1,)``; with ``pcs``, ``projected``
    ``(E+1, len(pcs))`` its test accuracy on each top-``P`` projection."""
    data = member.inputs()
    side = _side(data.x.shape[1])
    flat = torch.from_numpy(data.x).float()
    x = flat.reshape(-1, 1, side, side)
    y = torch.from_numpy(data.y).long()
    projected_test = transformed_sets([f"pca:{p}" for p in member.pcs], flat,
                                      torch.from_numpy(data.x_test).float(),
                                      torch.from_numpy(data.y_test).long())  # fmt: skip
    torch.manual_seed(1000 * member.seed + member.member)
    net = StVGG(data.n_classes, 1, input_size=side, width_multiplier=member.width_multiplier)
    optimiser = torch.optim.SGD(net.parameters(), lr=member.lr)
    order = torch.Generator().manual_seed(1000 * member.seed + member.member)
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
    for _ in range(member.epochs):
        sgd_epoch(net, x, y, optimiser, member.batch_size, order)
        record()
    out = {"compact": np.stack(compact), "train_accuracy": np.asarray(accuracy)}
    if projected:
        out["projected"] = np.asarray(projected)
    return out


def run_stvgg(run: Run, context: RunContext) -> None:
    """Train the ensemble; store the per-PC std of the linearised networks."""
    preset: StVGGPreset = context.config
    member = StVGGMember(data=preset.data, width_multiplier=preset.width_multiplier,
                         lr=preset.lr, batch_size=preset.batch_size, epochs=preset.epochs,
                         pcs=preset.pcs, **run_fields(context))  # fmt: skip
    with serial_threads():
        results = run_ensembles({"stvgg": member.ensemble(preset.members)}, run, context)["stvgg"]
        data = member.inputs()
        frame = principal_frame(data.x, one_hot(data.y, data.n_classes))
    compact = np.stack([r["compact"] for r in results], axis=1)  # (E+1, N, K, q)
    std = pc_ensemble_std(frame.rotate(compact))
    accuracy = np.stack([r["train_accuracy"] for r in results])
    arrays = {"epochs": np.arange(compact.shape[0]), "eigenvalues": frame.eigenvalues,
              "std": std, "train_accuracy": accuracy}  # fmt: skip
    if preset.pcs:
        arrays["pcs"] = np.asarray(preset.pcs)
        arrays["projected"] = np.stack([r["projected"] for r in results])
    run.save_array("stvgg", **arrays)
    for e in range(compact.shape[0]):
        run.log(e, "std_top_pc", float(std[e, 0]), epoch=e, split="stvgg")
    if "projected" in arrays:
        log_projected(run, arrays["pcs"], arrays["projected"])
    run.flush()


def stvgg_dry_run(
    config: StVGGPreset, data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """Read and standardise the data, check that it is single-channel square images and
    every ``P`` of ``pcs`` lies in ``[1, q]``, build the st-VGG at the preset's width and
    pass a batch through it; nothing is trained."""
    data = read_inputs(config.data, None if data_dir is None else str(data_dir), seed)
    q = data.x.shape[1]
    side = _side(q)
    if side * side != q:
        raise ValueError(f"pcbias-stvgg needs single-channel square images; the data has "
                         f"{q} inputs per example, not a square number")  # fmt: skip
    bad = [p for p in config.pcs if not 1 <= p <= q]
    if bad:
        raise ValueError(f"pcs {bad} must lie in [1, q = {q}] (the input dimension)")
    net = StVGG(data.n_classes, 1, input_size=side, width_multiplier=config.width_multiplier)
    batch = torch.from_numpy(data.x[: config.batch_size]).float()
    with torch.no_grad():
        net.eval()(batch.reshape(-1, 1, side, side))
    n_train, n_test = int(data.x.shape[0]), int(data.x_test.shape[0])
    work = Training(  # scored on the training set, the projections and the q basis images
        f"st-VGG x{config.width_multiplier}, {config.data.name}",
        forward_flops(net, batch.reshape(-1, 1, side, side)),
        n_train,
        config.epochs,
        config.members,
        n_train + n_test * len(config.pcs) + q,
        config.epochs + 1,
    )
    return {"dataset": config.data.name, "n_train": n_train, "gpu_work": [work.to_dict()],
            "n_test": n_test, "input_dim": q, "pcs": list(config.pcs),
            "width_multiplier": config.width_multiplier,
            "parameters": sum(p.numel() for p in net.parameters()),
            "members": config.members, "epochs": config.epochs}  # fmt: skip
