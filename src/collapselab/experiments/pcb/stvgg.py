r"""``pcbias-stvgg``: the PC-bias in non-linear st-VGG networks through their linearised compact
representation (paper 002 §3.3, Fig. 4d; note 002 §2.3, R11, §7 items 11 and 13).

An ensemble of (non-linear) st-VGG networks (:class:`~collapselab.models.StVGG`: ReLU,
max-pooling, dropout) is trained by plain SGD with cross-entropy on a two-class image dataset
(:mod:`~collapselab.experiments.pcb.networks`). At every checkpoint epoch each member is
**linearised** the paper's way, "ignoring any non-linear activation": its weights are loaded
into the linear twin (``StVGG(linear=True)``: identity activations, 2 x 2 average pooling
instead of max-pooling, dropout off in eval mode) and the compact matrix
``W = f_lin(I) − f_lin(0)`` (``K x q``: the twin's response to every unit input image, the
biases' constant output removed) is rotated into the principal frame of the uncentred
training data, ``W̃ = W U`` (:func:`~collapselab.theory.pc_bias.principal_frame`). Per PC
``j``: the across-member std of the column ``w̃_j`` and the mean relative change
``‖w̃_j^s − w̃_j^0‖ / ‖w̃_j^0‖`` (:func:`~collapselab.metrics.pc_bias.pc_ensemble_std`).

The non-linear networks do not converge to one compact matrix, so the distance to an optimum
is not defined (the paper shows only the std).

Stored: ``arrays/stvgg.npz`` (``epochs`` the checkpoints, ``eigenvalues``, ``std``
``(S, q)``, ``change`` ``(S, q)`` (mean over members), ``train_accuracy``/``test_accuracy``
``(N, E+1)``); rows of split ``stvgg`` (ensemble-mean ``train_accuracy``, ``test_accuracy``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.experiments.claims import Claim, NotEvaluable, RunResults
from collapselab.experiments.pcb._common import (
    Inputs,
    members,
    one_hot,
    read_dataset,
    run_members,
    verdict,
)
from collapselab.experiments.pcb.networks import build_network, image_shape, train_network
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pc_bias import pc_ensemble_std
from collapselab.models import StVGG
from collapselab.store import Run
from collapselab.theory.pc_bias import principal_frame

__all__ = [
    "STVGG_CLAIMS",
    "STVGG_PRESETS",
    "linearised_compact_matrix",
    "run_stvgg",
    "stvgg_dry_run",
    "stvgg_member",
]


def _fashion(classes: list[int], n_train: int, n_test: int) -> dict[str, Any]:
    return {"name": "fashion_mnist", "classes": classes, "n_train_per_class": n_train,
            "n_test_per_class": n_test}  # fmt: skip


_NET = {"kind": "st_vgg", "linear": False, "channels": 1, "width_multiplier": 0.25}

STVGG_PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"datasets": {"main": _fashion([1, 8], 300, 100)}, "net": _NET, "lr": 0.05,
              "batch_size": 25, "epochs": 8, "members": 5, "checkpoints": [0, 1, 2, 4, 8]},
    "quick-bundled": {"datasets": {"main": {"name": "digits", "n_per_class": 100,
                                            "test_fraction": 0.3}},
                      "upsample": 2, "net": _NET, "lr": 0.05, "batch_size": 50, "epochs": 12,
                      "members": 5, "checkpoints": [0, 1, 2, 4, 8, 12]},
    "standard": {"datasets": {"main": _fashion([1, 8], 2000, 500)},
                 "net": {**_NET, "width_multiplier": 0.5}, "lr": 0.05, "batch_size": 100,
                 "epochs": 30, "members": 10, "checkpoints": [0, 1, 2, 4, 8, 15, 30]},
    "paper": {"datasets": {"main": {"name": "cifar10", "classes": [3, 5]}},
              "net": {**_NET, "channels": 3, "width_multiplier": 1.0}, "lr": 0.05,
              "batch_size": 100, "epochs": 100, "members": 10,
              "checkpoints": [0, 1, 2, 5, 10, 20, 50, 100]},
    "tiny": {"datasets": {"main": {"name": "digits", "n_per_class": 8,
                                   "test_fraction": 0.25}},
             "upsample": 2, "net": {**_NET, "width_multiplier": 0.125}, "lr": 0.05,
             "batch_size": 20, "epochs": 2, "members": 3, "checkpoints": [0, 1, 2]},
}  # fmt: skip
"""``quick``: Fashion-MNIST's trousers and bags, 300/100 images per class at 28 x 28
(``q = 784``), st-VGG at a quarter width, 5 networks, 8 epochs of SGD at the paper's lr 0.05
with batch 25 (falls back to ``quick-bundled``: scikit-learn's digits, 10 classes, 70/30 per
class, upsampled 2 x to 16 x 16, ``q = 256``). Measured: on two similar classes (pullovers
and coats, like the paper's cats and dogs) the quarter-width st-VGG stays on its initial
plateau (train accuracy 0.5-0.6 after 12 epochs, also at batch 100 or lr 0.1), so nothing
moves; trousers and bags reach 0.9 by epoch 3. ``standard``: 2000/500 per class, half width,
10 networks, 30 epochs; ``paper``: CIFAR-10's cats and dogs (the paper's data), full-width
st-VGG, 10 networks (Fig. 4d), 100 epochs; ``tiny``: the test suite's."""

EARLY_RATIO = 0.9
"""Largest ratio of the top PCs' median ``std_j^s / std_j^0`` to the bottom half's at the
first checkpoint after 0 at which the top PCs count as converging first (their std falls
by at least a tenth more than the bottom half's)."""

HARDLY = 0.5
"""Largest ratio of the bottom half's median relative change to the top PCs' at the end at
which the lowest PCs count as "hardly changing" relative to the top ones."""

TOP = 0.05
"""Fraction of the PCs (with a non-zero eigenvalue) counted as "the top PCs"."""


# ----------------------------------------------------------------------------------- data


def stvgg_inputs(config: Mapping[str, Any]) -> Inputs:
    """The configuration's images, standardised per channel and flattened, upsampled by
    ``upsample`` (nearest neighbour; st-VGG needs at least 16 x 16); cached per process."""
    key = {k: config.get(k) for k in ("datasets", "data_dir", "data_seed", "upsample", "net")}
    return _inputs_cached(json.dumps(key, sort_keys=True))


@functools.lru_cache(maxsize=4)
def _inputs_cached(key: str) -> Inputs:
    c = json.loads(key)
    inputs = read_dataset(c["datasets"]["main"], c["data_dir"], int(c["data_seed"] or 0))
    factor = int(c.get("upsample") or 1)
    if factor == 1:
        return inputs
    channels = int(c["net"].get("channels", 1))

    def up(x: np.ndarray) -> np.ndarray:
        images = x.reshape(len(x), *image_shape(x.shape[1], channels))
        images = images.repeat(factor, axis=2).repeat(factor, axis=3)
        return images.reshape(len(x), -1)

    return Inputs(up(inputs.x), inputs.y, up(inputs.x_test), inputs.y_test, inputs.n_classes,
                  inputs.name)  # fmt: skip


def linearised_compact_matrix(model: StVGG, columns: int | None = None) -> np.ndarray:
    r"""``W = f_lin(I) − f_lin(0)``, ``(K, q)``, computed in float64: the compact matrix of
    ``model``'s linear twin (same weights, identity activations, average pooling, eval mode),
    i.e. the network with its non-linearities ignored (paper 002 §3.3); column ``i`` is the twin's
    response to the ``i``-th unit input image. ``columns``: only the first that many
    (a dry run's check)."""
    twin = StVGG(
        model.n_classes,
        in_channels=model.in_channels,
        linear=True,
        input_size=model.input_size,
        width_multiplier=model.classifier.in_features / 512,
    )
    twin.load_state_dict(model.state_dict())
    twin.eval().double()  # float64: f(I) − f(0) cancels the biases' output exactly enough
    c, (h, w) = model.in_channels, model.input_size
    q = c * h * w
    rows = q if columns is None else min(int(columns), q)
    with torch.no_grad():
        basis = torch.eye(q, dtype=torch.float64)[:rows].reshape(rows, c, h, w)
        zero = twin(torch.zeros(1, c, h, w, dtype=torch.float64))
        out = torch.cat([twin(part) for part in basis.split(512)]) - zero
    return out.numpy().T


class _Compact:
    """The linearised compact matrix at the checkpoint epochs (epoch 0 at the start)."""

    def __init__(self, epochs: list[int]) -> None:
        self.epochs = set(epochs)
        self.taken: list[np.ndarray] = []

    def on_train_start(self, state) -> None:
        if 0 in self.epochs:
            self.taken.append(linearised_compact_matrix(state.model))

    def on_epoch_end(self, state) -> None:
        if state.epoch in self.epochs:
            self.taken.append(linearised_compact_matrix(state.model))


def stvgg_member(config: dict[str, Any]) -> dict[str, Any]:
    """Train one st-VGG; its accuracies and linearised compact matrices ``(S, K, q)``."""
    compact = _Compact([int(e) for e in config["checkpoints"]])
    _, out = train_network(config, stvgg_inputs(config), [compact])
    return {**out, "compact": np.stack(compact.taken)}


def run_stvgg(run: Run, context: RunContext) -> None:
    """Train the ensemble; store the per-PC std and change of the linearised networks."""
    c = context.config
    data_dir = None if context.data_dir is None else str(context.data_dir)
    config = {**c, "seed": context.seed, "data_seed": context.seed, "data_dir": data_dir}
    with serial_threads():
        results = run_members(stvgg_member, members(config, int(c["members"])), run, context,
                              "stvgg")  # fmt: skip
        inputs = stvgg_inputs(config)
        frame = principal_frame(inputs.x, one_hot(inputs.y, inputs.n_classes))
        compact = np.stack([r["compact"] for r in results], axis=1)  # (S, N, K, q)
        w_pc = compact @ frame.basis
        start = np.linalg.norm(w_pc[:1], axis=2)  # (1, N, q)
        with np.errstate(divide="ignore", invalid="ignore"):
            change = (np.linalg.norm(w_pc - w_pc[:1], axis=2) / start).mean(1)
        arrays = {
            "epochs": np.asarray(c["checkpoints"], dtype=np.int64),
            "eigenvalues": frame.eigenvalues,
            "std": pc_ensemble_std(w_pc),
            "change": change,
            "train_accuracy": np.stack([r["train_accuracy"] for r in results]),
            "test_accuracy": np.stack([r["test_accuracy"] for r in results]),
        }
    run.save_array("stvgg", **arrays)
    for epoch in range(arrays["train_accuracy"].shape[1]):
        run.log_dict(epoch, {k: float(arrays[k][:, epoch].mean())
                             for k in ("train_accuracy", "test_accuracy")},
                     split="stvgg")  # fmt: skip
    run.flush()


def stvgg_dry_run(
    config: Mapping[str, Any], data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """Read and standardise the images from local files, build one st-VGG, linearise it
    (the first 16 columns of its twin's compact matrix); nothing is trained."""
    member = {**config, "data_seed": seed, "data_dir": None if data_dir is None else str(data_dir)}
    inputs = stvgg_inputs(member)
    net = build_network(config["net"], inputs.x.shape[1], inputs.n_classes)
    w = linearised_compact_matrix(net, columns=16)
    if not np.all(np.isfinite(w)):
        raise ValueError("the linearised st-VGG is not finite at initialisation")
    return {
        "dataset": config["datasets"]["main"]["name"],
        "n_train": int(inputs.x.shape[0]),
        "n_test": int(inputs.x_test.shape[0]),
        "image": list(image_shape(inputs.x.shape[1], int(config["net"].get("channels", 1)))),
        "compact_shape": [int(w.shape[0]), int(inputs.x.shape[1])],
        "columns_checked": int(w.shape[1]),
        "members": int(config["members"]),
        "epochs": int(config["epochs"]),
    }


# ---------------------------------------------------------------------------------------
# claims


def _groups(results: RunResults) -> tuple[np.ndarray, np.ndarray]:
    d = results.array("stvgg", "eigenvalues")
    moving = int(np.sum(d > d[0] * 1e-12))
    top = max(1, round(TOP * moving))
    if moving < 4:
        raise NotEvaluable(f"only {moving} PCs with a non-zero eigenvalue")
    return np.arange(top), np.arange(moving // 2, moving)


def _top_first(results: RunResults):
    top, bottom = _groups(results)
    std = results.array("stvgg", "std")
    epochs = results.array("stvgg", "epochs")
    if len(epochs) < 2 or epochs[0] != 0:
        raise NotEvaluable("needs the checkpoints 0 and a later one")
    ratio = std[1] / std[0]
    a, b = float(np.median(ratio[top])), float(np.median(ratio[bottom]))
    rel = a / b
    detail = (
        f"epoch {epochs[1]}: median std_j/std_j^0 over the top {len(top)} PCs {a:.4g}, over "
        f"the bottom half ({len(bottom)} PCs) {b:.4g}; ratio {rel:.4g} (< {EARLY_RATIO:g})"
    )
    return verdict(rel < EARLY_RATIO, {"top": a, "bottom": b, "ratio": rel,
                                       "epoch": float(epochs[1])}, EARLY_RATIO, detail)  # fmt: skip


def _bottom_still(results: RunResults):
    top, bottom = _groups(results)
    change = results.array("stvgg", "change")[-1]
    epoch = int(results.array("stvgg", "epochs")[-1])
    a, b = float(np.median(change[top])), float(np.median(change[bottom]))
    rel = b / a if a > 0 else float("inf")
    detail = (
        f"epoch {epoch}: median relative change ‖w̃_j − w̃_j^0‖/‖w̃_j^0‖ (mean over networks) "
        f"of the bottom half of the PCs {b:.4g}, of the top {len(top)} PCs {a:.4g}; ratio "
        f"{rel:.4g} (<= {HARDLY:g})"
    )
    return verdict(rel <= HARDLY, {"bottom": b, "top": a, "ratio": rel}, HARDLY, detail)


STVGG_CLAIMS: list[Claim] = [
    Claim(
        "stvgg-top-pcs-first",
        "Fig. 4d / §3.3: in non-linear st-VGG networks (linearised by ignoring the "
        "non-linearities) the std across models of the weights of the higher principal "
        "components decreases faster, most notably at the beginning of training.",
        "002 §3.3, Fig. 4d",
        f"at the first checkpoint after epoch 0: median std_j^s/std_j^0 over the top "
        f"{TOP:.0%} of the PCs / the same over the bottom half < {EARLY_RATIO:g}",
        _top_first,
    ),
    Claim(
        "stvgg-lowest-pcs-hardly-change",
        "§3.3: a large fraction of the lowest principal components hardly changes throughout "
        "the learning.",
        "002 §3.3, Fig. 4d",
        f"at the last checkpoint: median relative change of the bottom half of the PCs <= "
        f"{HARDLY:g} x that of the top {TOP:.0%}",
        _bottom_still,
    ),
]
"""The claims of ``pcbias-stvgg``."""


# ---------------------------------------------------------------------------------------
# figures


def draw_stvgg(run: Run) -> None:
    """Fig. 4d from ``stvgg.npz``: the per-PC std at every checkpoint, and its ratio to the
    initial std."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from collapselab.report import save_run_figure

    d = run.load_array("stvgg")
    moving = d["eigenvalues"] > d["eigenvalues"][0] * 1e-12
    j = np.arange(1, int(moving.sum()) + 1)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    for i, epoch in enumerate(d["epochs"]):
        color = plt.cm.viridis(i / max(len(d["epochs"]) - 1, 1))
        axes[0].plot(j, d["std"][i, moving], color=color, lw=1, label=f"epoch {epoch}")
        axes[1].plot(j, d["std"][i, moving] / d["std"][0, moving], color=color, lw=1)
    axes[0].set(
        xlabel="principal component j (largest first)",
        yscale="log",
        ylabel="std of w̃_j over networks",
        title="Fig. 4d: linearised st-VGG",
    )
    axes[1].set(xlabel="principal component j (largest first)", yscale="log",
                ylabel="std_j / std_j at epoch 0", title="relative to initialisation")  # fmt: skip
    axes[0].legend(fontsize="small")
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
    save_run_figure(run, fig, "fig4d_stvgg")


STVGG_CAPTIONS = {
    "fig4d_stvgg": "Fig. 4d analogue: across-network std of the compact matrix's PC columns "
    "w̃_j of non-linear st-VGG networks linearised by ignoring their non-linearities (identity "
    "activations, average pooling), per PC index at the checkpoint epochs (left), and "
    "relative to its initial value (right). The leading PCs lose their initial randomness "
    "first; many of the lowest hardly change.",
}
