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
``eval_transforms`` in the preset, ``eval_<kind>`` ``(N, E+1, len)`` the test
accuracies on those transformed copies, :mod:`~collapselab.experiments.pcbias.evaluation`,
and ``eval_transforms`` their names); for image data ``arrays/pca_images.npz`` (Fig. 1:
:func:`pca_vs_lowpass`, a few test images, their top-20 PC reconstruction and their Fourier
low-pass); rows of split ``projected`` (``layer``
``P=<p>``: ensemble-mean accuracy per epoch).

The networks are :class:`MLPMember` s (:func:`sgd_member`), shared with
``pcbias-amplification``, ``pcbias-separable`` and ``pcbias-frequency``. With ``net="st_vgg"``
(the ``paper`` presets of this experiment, ``pcbias-amplification`` and ``pcbias-separable``)
a member is the paper's own network instead: st-VGG for ``nonlinear``, the linear st-VGG
for ``linear`` (:mod:`~collapselab.experiments.pcbias.image_nets`), trained one by one on
the member's ``device`` with the same SGD, scored in evaluation mode (dropout off).

Fig. 1 (R32): images projected onto their top ``P`` principal components look like low-pass
filtered images. A few test images of the experiment's own inputs (standardised as the
networks see them) are shown three ways: as they are, reconstructed from the top ``P`` PCs
of the training inputs (:class:`~collapselab.data.pca.PCAProjection`: ``m + U_P U_Pᵀ (x −
m)``, centred PCs, ``P = 20`` unless the preset's ``image_pcs`` says otherwise), and
low-pass filtered by a 2-D DFT (:func:`~collapselab.data.fourier.fourier_lowpass`, per
channel). The low-pass keeps at least as many real coefficients per image as the projection
keeps PCs: ``ceil(P / C)`` frequency bins per channel (``C`` channels), rounded up to whole
rings of equal frequency (``P = 20`` on grey images keeps 21).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.checks import check_choice, check_int
from collapselab.data.fourier import fourier_lowpass, lowpass_mask
from collapselab.data.pca import PCAProjection
from collapselab.experiments.gpu_hours import Training, forward_flops
from collapselab.experiments.pcbias._common import (
    Member,
    read_inputs,
    run_ensembles,
    run_fields,
    stacked,
)
from collapselab.experiments.pcbias.evaluation import set_accuracies, transformed_sets
from collapselab.experiments.pcbias.image_nets import (
    chunked_features,
    chunked_logits,
    image_network,
)
from collapselab.experiments.pcbias.presets import MLPPreset, ProjectionsPreset
from collapselab.experiments.pcbias.training import batched_sgd_step, sgd_epoch
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pcbias import (
    accessibility,
    binned_correlation,
    critical_principal_component,
    discriminability,
)
from collapselab.models import MLP
from collapselab.store import Run
from collapselab.train.batched import BatchedModel

__all__ = [
    "IMAGE_PCS",
    "KINDS",
    "NEIGHBOURS",
    "N_IMAGES",
    "MLPMember",
    "image_shape",
    "log_projected",
    "member_fields",
    "mlp_dry_run",
    "pca_vs_lowpass",
    "projections_dry_run",
    "run_projections",
    "sgd_batch",
    "sgd_member",
]

KINDS = ("nonlinear", "linear")

NEIGHBOURS = 10
"""k of the k-NN discriminability."""


@dataclass(frozen=True, kw_only=True)
class MLPMember(Member):
    """One MLP trained by minibatch SGD on cross-entropy (:func:`sgd_member`).

    Attributes:
        kind: ``"nonlinear"`` (ReLU) or ``"linear"`` (its twin: every activation the
            identity, a LeakyReLU of slope 1); width, depth: the MLP (biases on).
        lr, batch_size, epochs: SGD (no momentum, no weight decay).
        pcs: the ``P`` of the top-``P`` projections of the test set scored after every epoch.
        eval_transforms: further transformed test sets scored after every epoch
            (:mod:`~collapselab.experiments.pcbias.evaluation`).
        discriminability: keep the penultimate features' discriminability (non-linear only).
        boundary_epochs, boundary_grid: for 2-D inputs, the epochs after which the decision
            regions are kept on a ``boundary_grid x boundary_grid`` grid.
        net: ``"mlp"`` (width, depth as above) or ``"st_vgg"`` (the paper's st-VGG, or the
            linear st-VGG for ``kind="linear"``; width and depth unused).
        device: where an st-VGG trains (``"cpu"``, ``"cuda"``); MLPs train on the CPU.
    """

    kind: Literal["nonlinear", "linear"]
    width: int
    depth: int
    lr: float
    batch_size: int
    epochs: int
    pcs: tuple[int, ...] = ()
    eval_transforms: tuple[str, ...] = ()
    discriminability: bool = True
    boundary_epochs: tuple[int, ...] = ()
    boundary_grid: int = 60
    net: Literal["mlp", "st_vgg"] = "mlp"
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, KINDS)
        check_choice("net", self.net, ("mlp", "st_vgg"))

    @classmethod
    def of(cls, preset: MLPPreset, **fields: Any) -> MLPMember:
        """Member 0 of an ensemble of ``preset``: its data, MLP and SGD, and ``fields``
        (``kind``, the run's seeds and folder, what differs from the preset)."""
        base = {"data": preset.data, "width": preset.width, "depth": preset.depth, "lr": preset.lr,
                "batch_size": preset.batch_size, "epochs": preset.epochs,
                "net": preset.net}  # fmt: skip
        return cls(**{**base, **fields})

    def network(self, q: int, k: int) -> torch.nn.Module:
        """The untrained network for ``q`` inputs and ``k`` classes: the MLP, or the st-VGG
        (linear st-VGG for ``kind="linear"``) on the rows as ``(C, H, W)`` images."""
        linear = self.kind == "linear"
        if self.net == "st_vgg":
            return image_network("st_vgg", q, k, linear=linear)
        return MLP(q, k, width=self.width, depth=self.depth, bias=True,
                   activation="leaky_relu" if linear else "relu",
                   negative_slope=1.0 if linear else 0.01)  # fmt: skip

    def train(self) -> dict[str, Any]:
        return sgd_member(self)

    @classmethod
    def train_batch(cls, members: Sequence[Member]) -> list[dict[str, Any] | None]:
        return sgd_batch(list(members))  # type: ignore[arg-type]

    def batch_key(self) -> Member | None:
        """None for st-VGGs (the batched trainer stacks MLPs only): they train one by one."""
        return None if self.net != "mlp" else super().batch_key()


def _grid(x: np.ndarray, size: int) -> torch.Tensor:
    """``size x size`` points (row-major, the second coordinate fastest) spanning the
    bounding box of 2-D inputs ``x``."""
    axes = [np.linspace(x[:, i].min(), x[:, i].max(), size) for i in range(2)]
    first, second = np.meshgrid(*axes, indexing="ij")
    return torch.from_numpy(np.stack([first.ravel(), second.ravel()], 1)).float()


class _Tensors:
    """A member's data as float32 tensors and its transformed test sets (shared by the
    members of a batch, who train on the same data)."""

    def __init__(self, member: MLPMember) -> None:
        self.data = data = member.inputs()
        self.x = torch.from_numpy(data.x).float()
        self.y = torch.from_numpy(data.y).long()
        self.x_test = torch.from_numpy(data.x_test).float()
        self.y_test = torch.from_numpy(data.y_test).long()
        x, x_test, y_test = self.x, self.x_test, self.y_test
        self.projected_test = transformed_sets([f"pca:{p}" for p in member.pcs], x, x_test,
                                               y_test)  # fmt: skip
        self.extra_test = transformed_sets(member.eval_transforms, x, x_test, y_test)
        snapshots = member.boundary_epochs
        self.grid = _grid(data.x, member.boundary_grid) if snapshots else None


class _Scores:
    """What one member records after every epoch (:func:`sgd_member`)."""

    def __init__(self, member: MLPMember, net: MLP, tensors: _Tensors) -> None:
        self.member, self.net, self.t = member, net, tensors
        self.lists: dict[str, list] = {k: [] for k in ("correct", "test_correct", "projected",
                                                       "extra", "accuracy", "test_accuracy",
                                                       "boundary")}  # fmt: skip

    def score(self, epoch: int) -> None:
        """Score the network after ``epoch`` (0: untrained; an st-VGG in evaluation mode)."""
        t, out = self.t, self.lists
        net = self._logits()
        with torch.no_grad():
            hits = net(t.x).argmax(1) == t.y
            out["correct"].append(hits.numpy())
            out["accuracy"].append(float(hits.double().mean()))
            test_hits = net(t.x_test).argmax(1) == t.y_test
            out["test_correct"].append(test_hits.numpy())
            out["test_accuracy"].append(float(test_hits.double().mean()))
        out["projected"].append(set_accuracies(net, t.projected_test))
        out["extra"].append(set_accuracies(net, t.extra_test))
        if epoch in self.member.boundary_epochs and epoch > 0:
            with torch.no_grad():
                out["boundary"].append(net(t.grid).argmax(1).numpy().astype(np.int8))

    def _logits(self):
        """The MLP itself, or the st-VGG in evaluation mode by chunks, logits on the CPU."""
        if self.member.net == "mlp":
            return self.net
        self.net.eval()
        return lambda x: chunked_logits(self.net, x)

    def result(self) -> dict[str, Any]:
        """The member's measurements at the end of its training."""
        net, t, lists, member = self.net, self.t, self.lists, self.member
        out: dict[str, Any] = {"correct": np.stack(lists["correct"]),
                               "test_correct": np.stack(lists["test_correct"]),
                               "projected": np.asarray(lists["projected"]),
                               "train_accuracy": np.asarray(lists["accuracy"]),
                               "test_accuracy": np.asarray(lists["test_accuracy"])}  # fmt: skip
        if t.extra_test:
            out["eval_accuracy"] = np.asarray(lists["extra"])
        if lists["boundary"]:
            out["boundary"] = np.stack(lists["boundary"])
        if member.kind == "nonlinear" and member.discriminability:
            if member.net == "mlp":
                with torch.no_grad():
                    features = net.flatten(t.x)
                    for layer in net.layers:
                        features = layer(features)
            else:
                net.eval()
                features = chunked_features(net, t.x)
            out["penultimate"] = discriminability(features.double().numpy(), t.data.y, NEIGHBOURS)
        return out


def _initial_network(member: MLPMember, tensors: _Tensors) -> torch.nn.Module:
    """The member's untrained network, drawn after seeding torch with ``1000 seed +
    member`` (an st-VGG then moved to the member's device)."""
    torch.manual_seed(1000 * member.seed + member.member)
    net = member.network(tensors.x.shape[1], tensors.data.n_classes)
    return net if member.net == "mlp" else net.to(member.device)


def sgd_member(member: MLPMember) -> dict[str, Any]:
    """Train ``member`` (``kind`` ``nonlinear`` or ``linear``) for ``epochs`` epochs of SGD;
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
    return _sgd_alone(member).result()


def _sgd_alone(member: MLPMember) -> _Scores:
    """Train ``member`` alone; its scores, holding the trained network."""
    tensors = _Tensors(member)
    net = _initial_network(member, tensors)
    optimiser = torch.optim.SGD(net.parameters(), lr=member.lr)
    order = torch.Generator().manual_seed(1000 * member.seed + member.member)
    scores = _Scores(member, net, tensors)
    scores.score(0)
    # an st-VGG trains on its device (the data moved there once), in training mode
    device = "cpu" if member.net == "mlp" else member.device
    x, y = tensors.x.to(device), tensors.y.to(device)
    for epoch in range(1, member.epochs + 1):
        net.train()
        sgd_epoch(net, x, y, optimiser, member.batch_size, order)
        scores.score(epoch)
    return scores


def sgd_batch(members: list[MLPMember]) -> list[dict[str, Any] | None]:
    r"""Train ``members`` (all fields equal but ``member``) as one batched MLP
    (:class:`~collapselab.train.batched.BatchedModel`: stacked weights, one batched product
    per layer): each member draws its own initial weights and batch order exactly as
    :func:`sgd_member` does, its loss is its own batch mean cross-entropy (the backward of
    the members' summed losses gives each member the gradient of its own), and its SGD step
    is ``θ_e ← θ_e − lr ∇L_e``, the same element-wise update as ``torch.optim.SGD``. Each
    member is scored by its own network (a view of its slice) as :func:`sgd_member` scores
    it. Equal to one-by-one training up to float32 rounding (the batched products sum in
    another order; measured in tests/test_experiments_pcbias_batched.py). A member whose
    loss or parameters turn non-finite is ``None`` (trained alone again by the caller)."""
    return [None if s is None else s.result() for s in _sgd_batched(members)]


def _sgd_batched(members: list[MLPMember]) -> list[_Scores | None]:
    """Train ``members`` as one batch (:func:`sgd_batch`); their scores, each holding its
    trained network (its own tensors again), ``None`` for a member that failed."""
    tensors = _Tensors(members[0])
    nets = [_initial_network(m, tensors) for m in members]
    batched = BatchedModel(nets, [torch.Generator() for _ in members])
    batched.attach()
    try:
        return _train_attached(members, batched, tensors)
    finally:
        batched.release()


def _train_attached(
    members: list[MLPMember], batched: BatchedModel, tensors: _Tensors
) -> list[_Scores | None]:
    size, n, lr = len(members), len(tensors.y), members[0].lr
    orders = [torch.Generator().manual_seed(1000 * m.seed + m.member) for m in members]
    nets = batched.members
    scores: list[_Scores | None] = [
        _Scores(m, net, tensors) for m, net in zip(members, nets, strict=True)
    ]
    for s in scores:
        s.score(0)  # type: ignore[union-attr]
    params = batched.trainable()
    for epoch in range(1, members[0].epochs + 1):
        batches = [torch.randperm(n, generator=g).split(members[0].batch_size) for g in orders]
        for idx in zip(*batches, strict=True):
            rows = torch.stack(idx, 1).reshape(-1)  # row b E + e: member e's sample b
            x, y = tensors.x[rows], tensors.y[rows]
            losses = batched_sgd_step(batched.module, params, x, y, size, lr)
            for e, value in enumerate(losses):
                if scores[e] is not None and not math.isfinite(value):
                    scores[e] = None
        for e, s in enumerate(scores):
            if s is None:
                continue
            if not all(bool(torch.isfinite(t).all()) for t in s.net.state_dict().values()):
                scores[e] = None
                continue
            s.score(epoch)
    return scores


def mlp_dry_run(
    config: MLPPreset, data_dir: str | Path | None = None, seed: int = 0, pcs: tuple[int, ...] = ()
) -> dict[str, Any]:
    """Read and standardise the data, build both networks and pass a batch through them,
    check every ``P`` of ``pcs`` against the input dimension; nothing is trained."""
    data = read_inputs(config.data, None if data_dir is None else str(data_dir), seed)
    q = data.x.shape[1]
    bad = [p for p in pcs if not 1 <= p <= q]
    if bad:
        raise ValueError(f"pcs {bad} must lie in [1, q = {q}] (the input dimension)")
    batch = torch.from_numpy(data.x[: config.batch_size]).float()
    parameters, flops = {}, {}
    for kind in KINDS:
        net = MLPMember.of(config, kind=kind).network(q, data.n_classes).eval()
        with torch.no_grad():
            net(batch)
        parameters[kind] = sum(p.numel() for p in net.parameters())
        flops[kind] = forward_flops(net, batch)
    n_train, n_test = int(data.x.shape[0]), int(data.x_test.shape[0])
    work = Training(
        f"{config.net}, {config.data.name}", flops["nonlinear"], n_train, config.epochs,
        config.ensembles * config.members,
        evaluated=n_train + n_test * (1 + len(pcs) + len(getattr(config, "eval_transforms", ()))),
        evaluations=config.epochs + 1,
    )  # fmt: skip
    return {"dataset": config.data.name, "n_train": n_train, "n_test": n_test,
            "input_dim": q, "pcs": list(pcs), "net": config.net, "parameters": parameters,
            "forward_flops": flops["nonlinear"], "networks": work.networks,
            "members": config.members, "epochs": config.epochs,
            "gpu_work": [work.to_dict()]}  # fmt: skip


def projections_dry_run(
    config: ProjectionsPreset, data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """:func:`mlp_dry_run` with the preset's ``pcs``."""
    return mlp_dry_run(config, data_dir, seed, config.pcs)


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


def member_fields(preset: MLPPreset, context: RunContext) -> dict[str, Any]:
    """The run's fields of an ensemble's members (:func:`~collapselab.experiments.pcbias.
    _common.run_fields`) and, for st-VGGs, the run's device (``--device``)."""
    fields = run_fields(context)
    return fields if preset.net == "mlp" else {**fields, "device": context.device}


def run_projections(run: Run, context: RunContext) -> None:
    """Train both ensembles; store the curves, accessibility, critical PCs and
    discriminability."""
    preset: ProjectionsPreset = context.config
    first = {kind: MLPMember.of(preset, kind=kind, pcs=preset.pcs,
                                eval_transforms=preset.eval_transforms,
                                **member_fields(preset, context))
             for kind in KINDS}  # fmt: skip
    ensembles = {kind: member.ensemble(preset.members) for kind, member in first.items()}
    with serial_threads():
        found = run_ensembles(ensembles, run, context, batched=preset.batched)
        data = first["nonlinear"].inputs()
        critical = critical_principal_component(data.x, data.y, data.n_classes)
        raw = discriminability(data.x, data.y, NEIGHBOURS)
    arrays: dict[str, Any] = {"epochs": np.arange(preset.epochs + 1),
                              "pcs": np.asarray(preset.pcs), "critical_pc": critical,
                              "disc_raw": raw}  # fmt: skip
    for kind in KINDS:
        results = found[kind]
        correct = np.stack([r["correct"] for r in results])  # (N, E+1, n)
        arrays[f"accessibility_{kind}"] = accessibility(correct[:, 1:])
        arrays[f"projected_{kind}"] = np.stack([r["projected"] for r in results])
        arrays[f"train_accuracy_{kind}"] = np.stack([r["train_accuracy"] for r in results])
        arrays |= _optional_records(results, kind, list(preset.eval_transforms))
    arrays["disc_penultimate"] = np.mean([r["penultimate"] for r in found["nonlinear"]], axis=0)
    binned = binned_correlation(critical, arrays["accessibility_nonlinear"], width=10)
    arrays |= {"binned_scores": binned.scores, "binned_smoothed": binned.smoothed,
               "binned_means": binned.means, "binned_sems": binned.sems}  # fmt: skip
    run.save_array("projections", **arrays)
    images = pca_vs_lowpass(data.x, data.x_test, data.y_test, preset.image_pcs)
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


# ------------------------------------------------------------------------- Fig. 1's images

IMAGE_PCS = 20
"""The paper's ``P`` (Fig. 1: "the largest 20 PCs")."""

N_IMAGES = 4
"""Images shown: the first test image of each of the first classes."""


def image_shape(n_features: int) -> tuple[int, int, int] | None:
    """``(C, H, W)`` of flattened square images: one channel when ``n_features`` is a
    square, three (channels first) when a third of it is; ``None`` for anything else."""
    n = check_int("n_features", n_features, minimum=1)
    for channels in (1, 3):
        side = math.isqrt(n // channels)
        if n % channels == 0 and side * side * channels == n:
            return channels, side, side
    return None


def _picks(y: np.ndarray, n: int) -> np.ndarray:
    """Index of the first example of each of the ``n`` smallest labels present."""
    return np.array([int(np.flatnonzero(y == label)[0]) for label in np.unique(y)[:n]])


def pca_vs_lowpass(
    x_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, n_pcs: int = IMAGE_PCS
) -> dict[str, np.ndarray] | None:
    """Fig. 1's arrays for flattened images (``None`` when the rows are not images, see
    :func:`image_shape`): ``original``, ``projected``, ``lowpass`` ``(k, C, H, W)``,
    ``indices`` and ``labels`` ``(k,)`` of the test images shown, ``pcs`` the number of PCs
    used (``n_pcs`` clipped to the training rank), ``lowpass_bins`` per channel,
    ``lowpass_coefficients`` (``C`` times that) and ``mask`` ``(H, W)``."""
    shape = image_shape(x_train.shape[1])
    if shape is None:
        return None
    n_pcs = check_int("n_pcs", n_pcs, minimum=1, maximum=x_train.shape[1])
    channels, height, width = shape
    indices = _picks(np.asarray(y_test), N_IMAGES)
    picked = torch.from_numpy(np.asarray(x_test, dtype=np.float64)[indices])
    projection = PCAProjection(n_pcs).fit(torch.from_numpy(np.asarray(x_train, np.float64)))
    bins = math.ceil(projection.n_components_used / channels)
    mask = lowpass_mask(height, width, bins)
    original = picked.numpy().reshape(-1, *shape)
    return {
        "original": original,
        "projected": projection.apply(picked).numpy().reshape(-1, *shape),
        "lowpass": fourier_lowpass(original, bins),
        "indices": indices,
        "labels": np.asarray(y_test)[indices],
        "pcs": np.int64(projection.n_components_used),
        "lowpass_bins": np.int64(mask.sum()),
        "lowpass_coefficients": np.int64(channels * mask.sum()),
        "mask": mask,
    }
