"""Recompute a curvature run's claim quantities with the float64 reference (docs/curvature.md,
"Audit of the failing claims").

    python benchmarks/audit_curvature_run.py RUN_DIR [--step first|last]

Rebuilds the run's network from its last checkpoint (or, ``--step first``, the
initialisation from its seed), the family's fixed subset (the first ``ceil(samples / K)``
images of each class in the training data's order), and recomputes, for the two layers the
claims read, with ``tests/_curvature_reference.py`` (autograd per logit and per sample,
dense ``eigh``, no :mod:`collapselab.curvature`): the top ``2K² + K`` eigenvalues of ``H``
(= ``G``) and of the knock-outs, their outlier counts, ``λ₁(G_within)/λ₁(G)``, the image
overlap, ``f_top`` with the top ``K`` and ``K²`` eigenvectors, the Kronecker alignment with
the layer's output means and with the next layer's input means, and the weight outliers;
each next to the value the run stored. ``--stationarity`` prints instead how far the network
is from a critical point of its regularised training objective.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import _curvature_reference as ref

from collapselab.data import load_data
from collapselab.experiments import get_experiment
from collapselab.experiments.dlufm import build_network
from collapselab.experiments.dlufm.presets import NetworkPreset
from collapselab.experiments.overrides import apply_overrides
from collapselab.train import TrainConfig, seed_everything, stationarity


def run_preset(manifest: dict) -> NetworkPreset:
    """The run's preset: its experiment's registered preset with the fields the run changed
    (``collapselab sweep --set``: where the manifest's ``config`` differs from it)."""
    preset = get_experiment(manifest["experiment"]).config(manifest["preset"])
    registered = json.loads(json.dumps(preset.to_dict()))
    changed = {k: v for k, v in manifest["config"].items() if registered.get(k) != v}
    return apply_overrides(preset, changed)


def load_model(run: Path, step: str) -> tuple[torch.nn.Module, dict, object]:
    manifest = json.loads((run / "manifest.json").read_text())
    config, seed = run_preset(manifest), int(manifest.get("seed", 0))
    data = load_data(config.data, None, seed)
    seed_everything(seed)
    model = build_network(config, data)
    if step == "last":
        last = sorted((run / "checkpoints").glob("step-*.pt"))[-1]
        state = torch.load(last, weights_only=False, map_location="cpu")
        model.load_state_dict(state["model"])
    return model.double().eval(), manifest, data


def fixed_subset(data, samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    K = data.n_classes
    per_class = math.ceil(samples / K)
    keep: list[int] = []
    counts = [0] * K
    for i, label in enumerate(data.train.y.tolist()):
        if counts[label] < per_class:
            counts[label] += 1
            keep.append(i)
    index = torch.tensor(keep)
    order = torch.argsort(data.train.y[index], stable=True)
    index = index[order]
    return data.train.x[index].double(), data.train.y[index]


def stored(run: Path, layer: str, step: str) -> dict[str, float]:
    rows = pd.read_parquet(run / "metrics.parquet")
    rows = rows[(rows["layer"] == layer) & (rows["split"] == "train")]
    rows = rows.dropna(subset=["value"])
    curv = rows[rows["metric"].isin(KEYS)]
    at = curv["step"].max() if step == "last" else curv["step"].min()
    picked = curv[curv["step"] == at]
    return dict(zip(picked["metric"], picked["value"], strict=True))


KEYS = (
    "hessian_outliers",
    "ggn_outliers",
    "ggn_outliers_without_class",
    "ggn_outliers_without_cross",
    "papyan_within_top",
    "ggn_top_eigenvalue",
    "hessian_top_eigenvalue",
    "papyan_class_cross_overlap",
    "gradient_fraction_top",
    "kronecker_alignment_mean",
    "weight_outliers",
)


def audit_layer(model, name: str, next_name: str | None, x, y, loss: str, centring: str, K: int):
    modules = dict(model.named_modules())
    layer = modules[name]
    nxt = modules[next_name] if next_name else None
    samples = ref.layer_samples(model, layer, x, y, loss, next_layer=nxt)
    system = ref.gram_system(samples, loss)
    C = samples.f.shape[1]
    m = 2 * K * K + K
    NC = system.left.shape[0]
    eye = torch.eye(NC, dtype=torch.float64)
    parts = ref.papyan_parts(system, C, K, centring)
    M_class, M_cross = ref.part_matrix(parts["class"]), ref.part_matrix(parts["cross"])
    H = system.values
    H_top = np.concatenate([H.numpy(), np.zeros(max(0, m - H.numel()))])[:m]
    out: dict[str, object] = {"hessian_top": H_top[:3].tolist()}
    out["hessian_outliers"] = ref.count_by_gap(H_top)
    no_class = ref.top_values(system.project(eye - M_class), m)
    no_cross = ref.top_values(system.project(eye - M_cross), m)
    within = ref.top_values(system.project(eye - M_class - M_cross), 1)[0]
    out["ggn_outliers_without_class"] = ref.count_by_gap(no_class)
    out["ggn_outliers_without_cross"] = ref.count_by_gap(no_cross)
    out["within_ratio"] = float(within / H_top[0])
    for rtol in (1e-6, 1e-10):
        U1, s1 = ref.image_basis(system, parts["class"], rtol)
        U2, _ = ref.image_basis(system, parts["cross"], rtol)
        out[f"overlap(rtol={rtol:g})"] = float(torch.linalg.matrix_norm(U1.T @ U2, ord=2))
        out[f"class_rank(rtol={rtol:g})"] = int(U1.shape[1])
    out["class_singular_values"] = (s1 / s1.max()).numpy().round(8).tolist()
    # f_top of the data-term gradient g = ρ Σ_n (J_nᵀ ∇_f ℓ_n) ⊗ x_n (note 004 §3.10)
    g = torch.einsum("nco,nc,ni->oi", samples.jac, samples.grad_f, samples.x) / len(y)
    gt = system.apply_t(g)  # Bᵀ g
    coords = (system.vectors.T @ gt) / system.values.sqrt()  # Uᵀ g in the eigenbasis
    g2 = float((g * g).sum())
    for k in (K, K * K):
        out[f"f_top(k={k})"] = float((coords[:k] ** 2).sum() / g2)
    W = layer.weight.detach()
    out["weight_decay_balance_cos"] = float((g * W).sum() / (g.norm() * W.norm()))
    # Kronecker alignment a(v) = <Hv, v>/(|Hv||v|), v = h_out_k ⊗ h_in_k'
    onehot = torch.nn.functional.one_hot(y, K).double()
    counts = onehot.sum(0)[:, None]
    h_in = onehot.T @ samples.x / counts
    outs = {"output": onehot.T @ samples.z / counts}
    if samples.next_input is not None:
        outs["next_input"] = onehot.T @ samples.next_input / counts
    for label, h_out in outs.items():
        align = []
        for k in range(K):
            for kp in range(K):
                v = torch.outer(h_out[k], h_in[kp])
                Bv = system.apply_t(v)
                Hv = system.apply(Bv)
                align.append(float((Bv @ Bv) / (Hv.norm() * v.norm())))
        out[f"kronecker_mean({label})"] = float(np.mean(align))
    out["weight_outliers"], wvals = ref.weight_outliers(W)
    out["weight_top6"] = (wvals[:6] / wvals[0]).round(4).tolist()
    out["ggn_top_eigenvalue"] = float(H_top[0])
    return out, {"hessian": H_top, "no_class": no_class, "no_cross": no_cross}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--step", choices=("first", "last"), default="last")
    parser.add_argument("--save", type=Path, default=None, help="npz of the spectra")
    parser.add_argument(
        "--stationarity",
        action="store_true",
        help="print only ‖∇L + wd θ‖/‖wd θ‖ on the whole training set, per parameter",
    )
    args = parser.parse_args()
    model, manifest, data = load_model(args.run, args.step)  # float32 draws, as the run's
    torch.set_default_dtype(torch.float64)
    config = manifest["config"]
    if args.stationarity:
        ratios = stationarity(model, data.train, TrainConfig(**manifest["train_config"]))
        print(f"== {args.run.name} ({args.step}): ‖∇L + wd θ‖ / ‖wd θ‖")
        for name, ratio in ratios.items():
            print(f"  {name:28s} {ratio:.3g}")
        return
    info = manifest["curvature"]
    K = int(info["n_classes"])
    x, y = fixed_subset(data, int(config["curvature_samples"]))
    layers = info["weight_layers"]
    loss = config["loss"]
    spectra = {}
    for name in (layers[-1], layers[-2]):
        nxt = layers[layers.index(name) + 1] if name != layers[-1] else None
        values, arrays = audit_layer(model, name, nxt, x, y, loss, config["centring"], K)
        spectra.update({f"{name}:{k}": v for k, v in arrays.items()})
        print(f"== {args.run.name} {name} ({args.step})")
        print("  reference:", json.dumps(values))
        print("  stored:   ", json.dumps(stored(args.run, name, args.step)))
    if args.save:
        np.savez(args.save, **spectra)


if __name__ == "__main__":
    main()
