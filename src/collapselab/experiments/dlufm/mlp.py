r"""``dlufm-mlp``: paper 004's predictions held against a real network (beyond the paper;
issue 13).

A bias-free ReLU MLP ``f(x) = W_L σ(⋯σ(W_1 x))`` trained with MSE (one-hot targets, weight
decay) on real images to zero training error *is* a deep ReLU UFM whose free features are
frozen to the inputs: ``H_1 = Xᵀ``. So every layer-wise quantity of
:mod:`collapselab.theory.dlufm_layerwise` applies to it unchanged (the training set sorted
class-major, balanced), with the per-sample loss ``½‖f − y‖²`` averaged over the ``N``
samples: the layer-wise Hessian of the last layers (the data-dependent formula of App. F,
exact for a piece-wise linear network with MSE), its outliers, the alignment of the
predicted Kronecker eigenvectors ``h̄^{(l+1)}_k ⊗ h̄^{(l)}_{k'}`` built from the network's own
class means, Papyan's knockouts and Gur-Ari's ``f_top`` of the gradient, before and after
training. The theory predicts ``K²`` outliers, alignment 1 and ``f_top = 1`` at a DNC
optimum; the claims say how far a trained network is from that. The same layers are also
measured by the library's ``curvature`` family (a Monitor on a float64 copy of the network,
Lanczos on Hessian-vector products of the network itself, loss ``mse_half``): its top
eigenvalue, outlier count, ``f_top`` and Kronecker alignment are logged beside the App. F
values, with ``family_gap``, the relative difference of the two top eigenvalues.

Data: ``quick`` uses scikit-learn's digits (bundled); ``standard`` and ``paper`` read
Fashion-MNIST's IDX files, found as every file dataset is (``--data-dir``,
``$COLLAPSELAB_DATA_DIR``, Debian's ``dataset-fashion-mnist``); without them those presets
stop before running with the data plan's one-line error (no stand-in data).

Stored: ``arrays/mlp_<stage>_layer<l>.npz`` (``stage`` ``init`` or ``final``: the
snapshot of :func:`~collapselab.experiments.dlufm.snapshots.layer_snapshot`), rows of the
training loop, and rows of split ``"mlp"`` (``layer`` = ``<stage>:W<l>``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.curvature import count_outliers
from collapselab.data import DataSplits, LabeledData, digits, load_dataset
from collapselab.experiments.claims import Claim, RunResults
from collapselab.experiments.dlufm._common import claim
from collapselab.experiments.dlufm.snapshots import layer_snapshot
from collapselab.experiments.registry import RunContext
from collapselab.families.curvature import Curvature
from collapselab.models import MLP
from collapselab.store import Run
from collapselab.theory.dlufm import DeepReLUUFM, UFMParameters
from collapselab.track import Monitor
from collapselab.train import TrainConfig, seed_everything, train

__all__ = [
    "ALIGNED",
    "F_TOP",
    "MLP_CLAIMS",
    "as_deep_ufm",
    "build_mlp",
    "bulk_outliers",
    "load_images",
    "mlp_dry_run",
    "run_mlp",
]

ALIGNED = 0.9
"""Median alignment ``a(v)`` of the predicted eigenvectors counted as aligned (1 at DNC)."""

F_TOP = 0.9
"""Fraction of the gradient in the top-``K²`` Hessian space counted as aligned (1 at DNC)."""


def load_images(config: Mapping[str, Any], data_dir: Path | None, seed: int) -> DataSplits:
    """The configured images (``digits``, or ``fashion_mnist`` from local files, optionally
    only the listed ``classes``, relabelled ``0..K-1`` in that order), flattened and
    standardised with the training mean and standard deviation (one scalar each), sorted
    class-major."""
    n = int(config["n_per_class"])
    classes = config.get("classes")
    if config["dataset"] == "fashion_mnist":
        data = load_dataset("fashion_mnist", data_dir=data_dir, seed=seed, classes=classes,
                            n_train_per_class=n, n_test_per_class=max(n // 4, 1))  # fmt: skip
    elif classes is not None:
        raise ValueError(
            f"dlufm-mlp: 'classes' ({classes}) selects Fashion-MNIST classes; dataset "
            f"{config['dataset']!r} takes all of its classes (classes: null)"
        )
    else:
        data = digits(n_per_class=n + max(n // 4, 1), test_fraction=0.2, seed=seed)
    x = data.train.x.reshape(data.train.x.shape[0], -1).double()
    mean, std = float(x.mean()), float(x.std())

    def prepare(split: LabeledData) -> LabeledData:
        flat = (split.x.reshape(split.x.shape[0], -1).double() - mean) / std
        order = torch.argsort(split.y, stable=True)  # class-major, as the UFM's labels
        return LabeledData(flat[order].float(), split.y[order], split.n_classes, split.name,
                           dict(split.meta))  # fmt: skip

    test = prepare(data.test) if data.test is not None else None
    return DataSplits(prepare(data.train), test)


def as_deep_ufm(
    model: MLP, data: LabeledData, weight_decay: float
) -> tuple[DeepReLUUFM, UFMParameters]:
    """The trained bias-free MLP as a :class:`DeepReLUUFM` with ``H_1 = Xᵀ`` (the training
    set class-major and balanced) and its point; ``λ`` the weight decay (used only for
    regularised quantities)."""
    counts = torch.bincount(data.y, minlength=data.n_classes)
    if not bool(torch.all(counts == counts[0])) or not bool(torch.all(data.y[:-1] <= data.y[1:])):
        raise ValueError("the training set must be balanced and sorted class-major")
    weights = [m.weight.detach().double().numpy() for m in model.modules()
               if isinstance(m, torch.nn.Linear)]  # fmt: skip
    if any(m.bias is not None for m in model.modules() if isinstance(m, torch.nn.Linear)):
        raise ValueError("the MLP must be bias-free to be a deep UFM")
    widths = [w.shape[1] for w in weights]
    ufm = DeepReLUUFM(data.n_classes, int(counts[0]), widths, weight_decay, weight_decay)
    return ufm, ufm.check_point(UFMParameters.from_feature_rows(data.x.double(), weights))


def build_mlp(config: Mapping[str, Any], data: DataSplits, seed: int) -> MLP:
    """The configuration's bias-free ReLU MLP (``width``, ``depth``), seeded."""
    seed_everything(seed)
    return MLP(int(data.train.x.shape[1]), data.n_classes, width=int(config["width"]),
               depth=int(config["depth"]), bias=False)  # fmt: skip


def mlp_dry_run(
    config: Mapping[str, Any], data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """Build ``dlufm-mlp``'s data and network without training (the paper preset's check on
    local files) and say what the run would compute: the dataset actually read, the
    training set's size and class counts, the widths, and the size ``P = d_{l+1} d_l`` of
    every analysed layer-wise Hessian (a dense ``P x P`` matrix)."""
    data = load_images(config, Path(data_dir) if data_dir is not None else None, seed)
    model = build_mlp(config, data, seed)
    _, point = as_deep_ufm(model, data.train, float(config["weight_decay"]))
    dims = [w.shape[1] for w in point.W] + [data.n_classes]
    return {
        "dataset": config["dataset"],
        "n_train": int(data.train.y.numel()),
        "train_class_counts": torch.bincount(data.train.y).tolist(),
        "input_dim": int(data.train.x.shape[1]),
        "dims": dims,
        "hessian_sizes": {int(ell): dims[ell] * dims[ell - 1] for ell in config["layers"]},
        "epochs": int(config["epochs"]),
    }


def run_mlp(run: Run, context: RunContext) -> None:
    """Train the MLP, then the layer-wise analysis of its last layers before and after."""
    c = context.config
    data = load_images(c, context.data_dir, context.seed)
    run.update_manifest(dataset=c["dataset"], n_train=int(data.train.y.numel()))
    model = build_mlp(c, data, context.seed)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    config = TrainConfig(
        epochs=int(c["epochs"]), lr=float(c["lr"]), batch_size=int(c["batch_size"]),
        momentum=float(c["momentum"]), weight_decay=float(c["weight_decay"]), loss="mse",
        schedule=c["schedule"],
        milestones=tuple(int(m) for m in c["milestones"]) if c["milestones"] else None,
        mse_reduction="sum_classes", seed=context.seed, eval_every=int(c["eval_every"]),
        checkpoint_every=int(c["eval_every"]),  # a checkpoint per epoch costs more than training
        device=context.device,
    )  # fmt: skip
    with serial_threads():  # small matrices: threads only add synchronisation on 2 cores
        result = train(model, data, config, context.callbacks, run, finish_run=False)
    if result.error:
        raise FloatingPointError(result.error)
    model.cpu()  # the layer-wise analysis is float64 numpy
    final = {k: v.clone() for k, v in model.state_dict().items()}
    depth = int(c["depth"])
    layers = [int(ell) for ell in c["layers"]]
    for ell in layers:
        if not 1 <= ell <= depth:
            raise ValueError(f"layers entries must be in [1, depth={depth}], got {ell}")
    with serial_threads(), context.progress.task("layer-wise spectra", 2 * len(layers), "") as done:
        for i, (stage, state) in enumerate((("init", initial), ("final", final))):
            model.load_state_dict(state)
            ufm, point = as_deep_ufm(model, data.train, float(c["weight_decay"]))
            family = _curvature_family(model, data.train, layers)
            for j, ell in enumerate(layers):
                snap = layer_snapshot(ufm, point, ell, centrings=("logit",), appendix=False)
                snap.pop("top_vectors")
                run.save_array(f"mlp_{stage}_layer{ell}", **snap)
                k = data.n_classes
                top = float(snap["hessian"][0])
                run.log_dict(0, {
                    "outliers": float(bulk_outliers(snap["hessian"], k)),
                    "median_alignment": _median(snap["alignment"]),
                    "f_top": float(snap["f_top"]),
                    "dnc1_input": float(snap["dnc1"][ell - 1]),
                    "top_k2_spread": _spread(snap["hessian"], k * k),
                    **{f"family_{key}": value for key, value in family[ell].items()},
                    "family_gap": abs(family[ell]["hessian_top_eigenvalue"] - top) / top,
                }, split="mlp", layer=f"{stage}:W{ell}")  # fmt: skip
                done(i * len(layers) + j + 1, 2 * len(layers))
    accuracy = np.float64(result.final.get("train_accuracy", np.nan))
    run.save_array("mlp_meta", layers=np.asarray(layers), n_classes=np.int64(data.n_classes),
                   train_accuracy=accuracy)  # fmt: skip
    run.flush()


FAMILY_KEYS = (
    "hessian_top_eigenvalue",
    "hessian_outliers",
    "gradient_fraction_top",
    "kronecker_alignment_mean",
)
"""What the curvature family measures on the analysed layers (logged as ``family_<key>``)."""


def _curvature_family(
    model: MLP, train: LabeledData, layers: list[int]
) -> dict[int, dict[str, float]]:
    """The curvature family's :data:`FAMILY_KEYS` for the weights ``W_l`` (``l`` in
    ``layers``) of a float64 copy of ``model``, on the whole (balanced) training set with
    the UFM's per-sample loss ``½‖f − y‖²`` averaged over the samples: the same Hessian as
    App. F's formula, computed by Lanczos on the network's own Hessian-vector products."""
    from torch.utils.data import DataLoader, TensorDataset

    network = copy.deepcopy(model).double().eval()
    names = [n for n, m in network.named_modules() if isinstance(m, torch.nn.Linear)]
    family = Curvature(
        FAMILY_KEYS,
        layers=[names[ell - 1] for ell in layers],
        samples=int(train.y.numel()),
        loss="mse_half",
        tol=1e-10,
        fraction_k="K^2",  # as the theory's f_top beside it (Thm 4.3: the K² outliers' space)
    )
    loader = DataLoader(TensorDataset(train.x.double(), train.y), batch_size=1024)
    monitor = Monitor(network, loader, families=[family], n_classes=train.n_classes,
                      loss="mse", schedule=None)  # fmt: skip
    measured = monitor.measure_now(log=False)["train"]
    return {ell: {key: float(measured[names[ell - 1]][key]) for key in FAMILY_KEYS}
            for ell in layers}  # fmt: skip


def _median(values: np.ndarray) -> float:
    """Median of the finite entries (NaN when none: a dead network has ``Hv = 0``)."""
    finite = np.asarray(values)[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else float("nan")


def _spread(values: np.ndarray, top: int) -> float:
    """``1 − λ_top/λ_1`` (NaN for a zero spectrum)."""
    return float(1 - values[top - 1] / values[0]) if values[0] > 0 else float("nan")


# ---------------------------------------------------------------------------------------
# claims


def _layers(results: RunResults) -> tuple[list[int], int]:
    return [int(v) for v in results.array("mlp_meta", "layers")], int(
        results.array("mlp_meta", "n_classes")
    )


def bulk_outliers(eigenvalues: np.ndarray, k: int) -> int:
    r"""Outliers above the bulk of a real network's exact layer-wise spectrum: the outlier
    rule (:func:`collapselab.curvature.count_outliers`: the largest log-gap among the first
    half) on the top ``2K² + K`` eigenvalues, the window the ``curvature`` family reads from
    Lanczos, so that the bulk is represented without the null space.

    Why a window: at the UFM's optimum the bulk is exactly 0, and the whole spectrum has one
    gap, after the ``K²`` outliers; a trained network's Hessian has a non-zero bulk *and* a
    null space (its rank is below its size), and where the rank is below half the size the
    step into the null space lies in the half of the gaps the rule reads: on the whole
    spectrum it would count the rank."""
    values = np.sort(np.asarray(eigenvalues, dtype=np.float64).ravel())[::-1]
    return count_outliers(values[: 2 * k * k + k])


def _zero_error(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    acc = float(results.array("mlp_meta", "train_accuracy"))
    return acc == 1.0, {"train_accuracy": acc}, 1.0, f"final training accuracy {acc:.4f} (= 1?)"


def _per_layer(key: str, measure: Any, ok: Any, text: str, bound: float) -> Any:
    def check(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
        layers, k = _layers(results)
        values, parts = {}, []
        for ell in layers:
            final = measure(results.array(f"mlp_final_layer{ell}", key), k)
            start = measure(results.array(f"mlp_init_layer{ell}", key), k)
            values |= {f"W{ell}_final": final, f"W{ell}_init": start}
            parts.append(f"W_{ell}: {start:.4g} at initialisation -> {final:.4g} trained")
        holds = all(ok(values[f"W{ell}_final"], k) for ell in layers)
        return holds, values, bound, f"{text}: " + "; ".join(parts) + _premise(results)

    return check


def _premise(results: RunResults) -> str:
    """How far the trained network is from the theory's premise at each analysed layer:
    DNC1 of the layer's input features ``h^(l)`` and the orthogonal-frame distance of their
    class means (both 0 at a deep UFM's optimum), reported beside every per-layer claim."""
    layers, _ = _layers(results)
    parts = []
    for ell in layers:
        dnc1 = float(results.array(f"mlp_final_layer{ell}", "dnc1")[ell - 1])
        frame = float(results.array(f"mlp_final_layer{ell}", "orthogonal_frame")[ell - 1])
        parts.append(f"W_{ell} {dnc1:.3g} ({frame:.3g})")
    return (
        " [the premise, 0 at the optimum: DNC1 of each layer's trained input (orthogonal-frame "
        "distance of its class means): " + ", ".join(parts) + "]"
    )


def _knockouts(results: RunResults) -> tuple[bool, Mapping[str, float], None, str]:
    layers, k = _layers(results)
    expected = {"none": k * k, "within": k * k, "cross": k, "class": k * (k - 1)}
    ok, values, parts = True, {}, []
    for ell in layers:
        counts = {
            p: bulk_outliers(results.array(f"mlp_final_layer{ell}", f"knockout_logit_{p}"), k)
            for p in expected
        }
        ok &= counts == expected
        values |= {f"W{ell}_{p}": float(v) for p, v in counts.items()}
        parts.append(f"W_{ell}: " + ", ".join(f"{p} {v}" for p, v in counts.items()))
    detail = (
        f"outliers above the bulk of G and G minus each part (none, within, cross, class; theory "
        f"{k * k}, {k * k}, {k}, {k * (k - 1)}): " + "; ".join(parts) + _premise(results)
    )
    return ok, values, None, detail


_SOURCE = "issue 13 (beyond the paper); 004 Theorems 4.1-4.3"

MLP_CLAIMS: list[Claim] = [
    claim(
        "mlp-zero-training-error",
        "The MLP trained with MSE reaches zero training error (the regime the theory is about).",
        "issue 13",
        "final training accuracy = 1",
        _zero_error,
    ),
    claim(
        "mlp-hessian-k2-outliers",
        "Theorem 4.1 on a real network: the layer-wise Hessians of the last layers have K² "
        "outliers.",
        _SOURCE,
        "at every analysed layer, the largest log-gap among the first K² + K/2 of the trained "
        "network's top 2K² + K Hessian eigenvalues falls after the K²-th",
        _per_layer(
            "hessian",
            lambda v, k: float(bulk_outliers(v, k)),
            lambda v, k: v == k * k,
            "outliers above the bulk (theory K²)",
            0.0,
        ),
    ),
    claim(
        "mlp-kronecker-eigenvectors-align",
        "Theorem 4.1 on a real network: h̄^(l+1)_k ⊗ h̄^(l)_k' from the network's own class "
        "means are eigenvectors of the layer-wise Hessian (a(v) = 1).",
        _SOURCE,
        f"at every analysed layer, median a(v) over the K² predicted vectors >= {ALIGNED:g}",
        _per_layer(
            "alignment",
            lambda v, k: _median(v),
            lambda v, k: v >= ALIGNED,
            "median a(v_kk')",
            ALIGNED,
        ),
    ),
    claim(
        "mlp-gradient-in-top-space",
        "Theorem 4.3 / Gur-Ari on a real network: the gradient lies in the top-K² Hessian space.",
        _SOURCE,
        f"at every analysed layer, f_top = ‖P_top g‖²/‖g‖² >= {F_TOP:g}",
        _per_layer(
            "f_top",
            lambda v, k: float(v),
            lambda v, k: v >= F_TOP,
            "f_top",
            F_TOP,
        ),
    ),
    claim(
        "mlp-papyan-knockouts",
        "Theorem 4.2 on a real network: knocking out G_within keeps K² outliers, G_cross "
        "leaves K, G_class leaves K(K−1).",
        _SOURCE,
        "at every analysed layer, outliers above the bulk (as mlp-hessian-k2-outliers) of G, "
        "G−G_within, G−G_cross, G−G_class are K², K², K, K(K−1)",
        _knockouts,
    ),
]
"""The claims of ``dlufm-mlp``."""
