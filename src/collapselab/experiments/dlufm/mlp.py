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

Data: the preset's :class:`~collapselab.data.DataSpec`, read by
:func:`~collapselab.data.load_data` (flattened, standardised with one scalar mean and
standard deviation of the training inputs, sorted class-major, float32:
:data:`~collapselab.experiments.dlufm.presets.MLP_STEPS`). ``tiny`` and ``quick`` use
scikit-learn's digits (bundled); ``standard`` and ``paper`` read Fashion-MNIST's IDX files,
found as every file dataset is (``--data-dir``, ``$COLLAPSELAB_DATA_DIR``, Debian's
``dataset-fashion-mnist``); without them those presets stop before running with the data
plan's one-line error (no stand-in data).

Stored: ``arrays/mlp_<stage>_layer<l>.npz`` (``stage`` ``init`` or ``final``: the
snapshot of :func:`~collapselab.experiments.dlufm.ufm.layer_snapshot`), rows of the
training loop, and rows of split ``"mlp"`` (``layer`` = ``<stage>:W<l>``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from collapselab._threads import serial_threads
from collapselab.curvature import count_outliers
from collapselab.data import DataSplits, LabeledData, load_data
from collapselab.experiments.dlufm.presets import MlpPreset
from collapselab.experiments.dlufm.ufm import layer_snapshot
from collapselab.experiments.preset import sgd_config
from collapselab.experiments.registry import RunContext
from collapselab.families.curvature import Curvature
from collapselab.models import MLP
from collapselab.store import Run
from collapselab.theory.dlufm import DeepReLUUFM, UFMParameters
from collapselab.track import Monitor
from collapselab.train import seed_everything, train

__all__ = [
    "FAMILY_KEYS",
    "as_deep_ufm",
    "build_mlp",
    "bulk_outliers",
    "finite_median",
    "mlp_dry_run",
    "run_mlp",
]


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


def build_mlp(config: MlpPreset, data: DataSplits, seed: int) -> MLP:
    """The preset's bias-free ReLU MLP (``width``, ``depth``), seeded."""
    seed_everything(seed)
    return MLP(int(data.train.x.shape[1]), data.n_classes, width=config.width,
               depth=config.depth, bias=False)  # fmt: skip


def mlp_dry_run(
    config: MlpPreset, data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """Build ``dlufm-mlp``'s data and network without training (the paper preset's check on
    local files) and say what the run would compute: the dataset actually read, the
    training set's size and class counts, the widths, and the size ``P = d_{l+1} d_l`` of
    every analysed layer-wise Hessian (a dense ``P x P`` matrix)."""
    data = load_data(config.data, data_dir, seed)
    model = build_mlp(config, data, seed)
    _, point = as_deep_ufm(model, data.train, config.weight_decay)
    dims = [w.shape[1] for w in point.W] + [data.n_classes]
    return {
        "dataset": config.data.name,
        "n_train": int(data.train.y.numel()),
        "train_class_counts": torch.bincount(data.train.y).tolist(),
        "input_dim": int(data.train.x.shape[1]),
        "dims": dims,
        "hessian_sizes": {ell: dims[ell] * dims[ell - 1] for ell in config.layers},
        "epochs": config.epochs,
    }


def run_mlp(run: Run, context: RunContext) -> None:
    """Train the MLP, then the layer-wise analysis of its last layers before and after."""
    c: MlpPreset = context.config
    data = load_data(c.data, context.data_dir, context.seed)
    run.update_manifest(dataset=c.data.name, n_train=int(data.train.y.numel()))
    model = build_mlp(c, data, context.seed)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    config = sgd_config(
        c,
        loss="mse",
        schedule=c.schedule,
        milestones=c.milestones,
        mse_reduction="sum_classes",
        seed=context.seed,
        eval_every=c.eval_every,
        checkpoint_every=c.eval_every,  # a checkpoint per epoch costs more than training
        device=context.device,
    )
    with serial_threads():  # small matrices: threads only add synchronisation on 2 cores
        result = train(model, data, config, context.callbacks, run, finish_run=False)
    if result.error:
        raise FloatingPointError(result.error)
    model.cpu()  # the layer-wise analysis is float64 numpy
    final = {k: v.clone() for k, v in model.state_dict().items()}
    layers = list(c.layers)
    with serial_threads(), context.progress.task("layer-wise spectra", 2 * len(layers), "") as done:
        for i, (stage, state) in enumerate((("init", initial), ("final", final))):
            model.load_state_dict(state)
            ufm, point = as_deep_ufm(model, data.train, c.weight_decay)
            family = _curvature_family(model, data.train, layers)
            for j, ell in enumerate(layers):
                snap = layer_snapshot(ufm, point, ell, centrings=("logit",), appendix=False)
                snap.pop("top_vectors")
                run.save_array(f"mlp_{stage}_layer{ell}", **snap)
                k = data.n_classes
                top = float(snap["hessian"][0])
                run.log_dict(0, {
                    "outliers": float(bulk_outliers(snap["hessian"], k)),
                    "median_alignment": finite_median(snap["alignment"]),
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


def finite_median(values: np.ndarray) -> float:
    """Median of the finite entries (NaN when none: a dead network has ``Hv = 0``)."""
    finite = np.asarray(values)[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else float("nan")


def _spread(values: np.ndarray, top: int) -> float:
    """``1 − λ_top/λ_1`` (NaN for a zero spectrum)."""
    return float(1 - values[top - 1] / values[0]) if values[0] > 0 else float("nan")


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
