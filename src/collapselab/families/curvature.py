r"""The curvature family: layer-wise Hessian and GGN spectra, Papyan's class structure,
gradient alignment and weight spectra of a model, on its own schedule (paper 004).

A model procedure (``Needs(model=True)``): for every weight layer (``nn.Linear`` and
``nn.Conv*d`` weights; biases and normalisation parameters are left out, as in paper 004's
layer-wise Hessians) it builds the objective of the training loss on a **fixed, balanced
subset** of the training data and computes, with :mod:`collapselab.curvature`, only what the
requested keys need. The formulas are in :mod:`collapselab.curvature` and docs/curvature.md;
this module maps them to catalogue keys. Rows are written per weight layer (the layer column
is the module's name, e.g. ``"layers.0.linear"``, ``"classifier"``), train split only.

It is expensive, so it is usually given a schedule of its own
(``Curvature(schedule=Schedule.build([10, 50], initial=True))``, a
:class:`collapselab.track.Schedule`): the Monitor then measures it at those events only,
and the other families on theirs. Spectra (eigenvalues, SLQ density, the parts of the
decomposition, gradient coefficients, Kronecker alignments, weight and covariance spectra)
are handed to the Monitor (:meth:`Curvature.take_arrays`), which writes them to
``arrays/curvature_step<step>.npz`` as ``"<layer>:<quantity>"``.

Distributed mode ``"replicated"``: under ``torch.distributed`` the fixed subset is the
first samples of each class in the global data order
(:func:`~collapselab.families.processes.global_order`: dataset indices under a
``DistributedSampler``, else the processes' shards rank by rank), gathered from every
process's shard, so every process holds the same subset, computes the same values from the
same weights, and these are one process's on the whole data.

The package :mod:`collapselab.curvature` sits in the layer above the metrics (it runs the
model), so it is imported when a measurement runs, not when the catalogue is loaded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from collapselab import curvature as cv
from collapselab.checks import check_choice, check_float, check_int
from collapselab.curvature import resolve_loss
from collapselab.families.family import Family, Key, ModelAccess, Needs
from collapselab.families.processes import OrderKey, global_order, in_global_order

_MODEL = Needs(model=True)
_TRAIN = ("train",)
_SOURCE_004 = "004 §3.8-3.11 (note M10-M17)"


def _key(name: str, definition: str, source: str = _SOURCE_004) -> Key:
    return Key(name, definition, source, _MODEL, where="weights", splits=_TRAIN)


HESSIAN_KEYS = ("hessian_top_eigenvalue", "hessian_outliers", "hessian_trace")
GGN_KEYS = ("ggn_top_eigenvalue", "ggn_outliers", "ggn_trace")
ALIGNMENT_KEYS = ("gradient_fraction_top", "top_subspace_overlap")
PAPYAN_KEYS = (
    "papyan_class_top",
    "papyan_cross_top",
    "papyan_within_top",
    "papyan_class_rank",
    "papyan_cross_rank",
    "papyan_class_cross_overlap",
    "ggn_outliers_without_class",
    "ggn_outliers_without_cross",
    "ggn_outliers_without_within",
)
KRONECKER_KEYS = ("kronecker_alignment_mean", "kronecker_alignment_min")
WEIGHT_KEYS = ("weight_top_eigenvalue", "weight_outliers", "weight_alpha")
COVARIANCE_KEYS = ("gradient_covariance_top_eigenvalue", "feature_covariance_top_eigenvalue")


class Curvature(Family):
    """Curvature of every weight layer of a model, on a schedule (module docstring).

    Args:
        keys: subset of the keys below (default: all).
        schedule: when the Monitor measures this family (a
            :class:`collapselab.track.Schedule`; default: the Monitor's schedule).
        samples: size of the fixed subset (``ceil(samples / K)`` per class, the first ones
            the training loader gives, in the global data order under
            ``torch.distributed``; fewer where a class has fewer).
        batch_size: batch size of the passes over the subset.
        layers: ``"auto"`` (every ``nn.Linear`` / ``nn.Conv*d`` weight) or module names.
        loss: the loss of the curvature (``"ce"``, ``"mse"``, ``"mse_sum"``, ``"mse_half"``);
            default: the Monitor's loss, which must then be given by name.
        top: eigenvalues computed per spectrum (default ``2K² + K``, at most ``P − 1``):
            the outlier counts look for the largest gap in their first half.
        fraction_k: the top eigenvectors of ``f_top`` and of the subspace overlap: a count,
            ``"K"`` (the default, Gur-Ari et al.'s choice for cross-entropy: the number of
            classes) or ``"K^2"`` (note 004 M14: Theorem 4.1's ``K²`` outliers span the top
            eigenspace Theorem 4.3 puts the gradient in).
        centring: Papyan's centring, ``"logit"`` or ``"class"`` (note 004 §3.9).
        tol: relative residual tolerance of Lanczos.
        trace_products: products of the Hutch++ trace estimates (a multiple of 3).
        density_steps, density_probes: SLQ of the Hessian (stored with the spectra; 0 steps:
            none).
        seed: seed of every random start (Lanczos, Hutch++, SLQ).
    """

    name = "curvature"
    distributed = "replicated"
    keys = (
        _key("hessian_top_eigenvalue", "λ_1(H_l), H_l = ∇²_{W_l} L on the subset"),
        _key(
            "hessian_outliers",
            "outliers of H_l: position of the largest log-gap in its top eigenvalues",
        ),
        _key("hessian_trace", "tr H_l by Hutch++", "Meyer et al. 2021"),
        _key("ggn_top_eigenvalue", "λ_1(G_l), G_l = ρ Σ_n J_nᵀ ∇²_f ℓ_n J_n"),
        _key("ggn_outliers", "outliers of G_l (largest log-gap)"),
        _key("ggn_trace", "tr G_l by Hutch++", "Meyer et al. 2021"),
        _key(
            "gradient_fraction_top",
            "f_top = ‖P_top g‖²/‖g‖², top-k eigenvectors of H_l",
            "004 M14; Gur-Ari et al. 2018",
        ),
        _key(
            "top_subspace_overlap",
            "tr(P_top(t) P_top(t'))/k with the previous measurement",
            "004 M15; Gur-Ari et al. 2018",
        ),
        _key("papyan_class_top", "λ_1(G_class)", "004 §3.9 (M12); Papyan 2020"),
        _key("papyan_cross_top", "λ_1(G_cross)", "004 §3.9 (M12); Papyan 2020"),
        _key(
            "papyan_within_top", "λ_1(G_within), G_within = G − G_class − G_cross", "004 §3.9 (M12)"
        ),
        _key(
            "papyan_class_rank",
            "numerical rank of G_class (K for MSE; ≤ K−1 for CE, class centring)",
            "004 Thm 4.2",
        ),
        _key("papyan_cross_rank", "numerical rank of G_cross (≤ K(K−1))", "004 Thm 4.2"),
        _key(
            "papyan_class_cross_overlap",
            "largest cosine between the images of G_class and G_cross",
            "004 Thm 4.2",
        ),
        _key(
            "ggn_outliers_without_class",
            "outliers of G − G_class (Papyan's knock-out)",
            "004 Figs 5-6",
        ),
        _key("ggn_outliers_without_cross", "outliers of G − G_cross", "004 Figs 5-6"),
        _key("ggn_outliers_without_within", "outliers of G_class + G_cross", "004 Figs 5-6"),
        _key(
            "kronecker_alignment_mean",
            "mean over k,k' of a(v_kk'), v_kk' = h̄^(l+1)_k ⊗ h̄^(l)_k' (linear layers; h^(l+1)"
            " the next weight layer's input)",
            "004 M11, Thm 4.1",
        ),
        _key(
            "kronecker_alignment_min",
            "min over k,k' of a(v_kk') = ⟨Hv,v⟩/(‖Hv‖‖v‖)",
            "004 M11, Thm 4.1",
        ),
        _key("weight_top_eigenvalue", "λ_1(W Wᵀ), W as (out, fan_in)", "004 M17"),
        _key("weight_outliers", "outliers of eig(W Wᵀ) (largest log-gap)", "004 Thm 4.4"),
        _key(
            "weight_alpha",
            "power-law exponent of the tail of eig(W Wᵀ) (MLE, KS-chosen xmin)",
            "Martin & Mahoney 2021",
        ),
        _key(
            "gradient_covariance_top_eigenvalue",
            "λ_1 of the per-sample gradient covariance",
            "004 Thm E.1 (M18)",
        ),
        _key(
            "feature_covariance_top_eigenvalue",
            "λ_1 of the covariance of the layer's input",
            "004 Thm E.3 (M20)",
        ),
    )

    def __init__(
        self,
        keys: Sequence[str] | None = None,
        *,
        schedule: Any = None,
        samples: int = 512,
        batch_size: int = 256,
        layers: str | Sequence[str] = "auto",
        loss: str | None = None,
        top: int | None = None,
        fraction_k: int | str | None = None,
        centring: str = "logit",
        tol: float = 1e-4,
        trace_products: int = 30,
        density_steps: int = 40,
        density_probes: int = 2,
        seed: int = 0,
    ) -> None:
        super().__init__(keys, schedule=schedule)
        self.samples = check_int("samples", samples, minimum=2)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        if layers != "auto" and (
            isinstance(layers, str) or not all(isinstance(n, str) for n in layers)
        ):
            raise ValueError(f"layers must be 'auto' or a list of module names, got {layers!r}")
        self.layers = layers if layers == "auto" else list(layers)
        self.loss = loss
        self.top = None if top is None else check_int("top", top, minimum=2)
        self.fraction_k = _check_fraction_k(fraction_k)
        self.centring = check_choice("centring", centring, ("logit", "class"))
        self.tol = check_float("tol", tol, minimum=0.0, strict=True)
        self.trace_products = check_int("trace_products", trace_products, minimum=3)
        if self.trace_products % 3:
            raise ValueError(f"trace_products must be a multiple of 3, got {trace_products}")
        self.density_steps = check_int("density_steps", density_steps, minimum=0)
        self.density_probes = check_int("density_probes", density_probes, minimum=1)
        self.seed = check_int("seed", seed)
        self._subset: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self._previous: dict[str, torch.Tensor] = {}
        self._arrays: dict[str, Any] = {}

    # ------------------------------------------------------------------ the procedure
    def compute_model(
        self, keys: frozenset[str], access: ModelAccess
    ) -> dict[str, dict[str, dict[str, float]]]:
        loss = resolve_loss(self._loss_name(access))
        K = access.layout.n_classes
        data = self._fixed_subset(access, K)
        values: dict[str, dict[str, float]] = {}
        self._arrays = {}
        for name, module in self._weight_layers(access.model):
            layer_values, arrays = _measure_layer(
                self, keys, access.model, module, name, loss, data, K
            )
            values[name] = layer_values
            self._arrays.update({f"{name}:{k}": v for k, v in arrays.items()})
        return {"train": values}

    def take_arrays(self) -> dict[str, Any]:
        arrays, self._arrays = self._arrays, {}
        return arrays

    def _loss_name(self, access: ModelAccess) -> str:
        if self.loss is not None:
            return self.loss
        if access.loss_name is None:
            raise ValueError(
                "the curvature family needs the loss by name: give the Monitor loss='ce' or "
                "'mse', or Curvature(loss=...)"
            )
        return access.loss_name

    def _weight_layers(self, model: nn.Module) -> list[tuple[str, nn.Module]]:
        modules = dict(model.named_modules())
        if self.layers == "auto":
            kinds = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
            found = [
                (n, m)
                for n, m in modules.items()
                if isinstance(m, kinds) and m.weight.requires_grad
            ]
            if not found:
                raise ValueError("the model has no nn.Linear or nn.Conv weight to measure")
            return found
        missing = [n for n in self.layers if n not in modules or not hasattr(modules[n], "weight")]
        if missing:
            raise ValueError(f"layers {missing} are not modules with a weight in the model")
        return [(n, modules[n]) for n in self.layers]

    def _fixed_subset(self, access: ModelAccess, K: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The first ``ceil(samples / K)`` samples of each class the training data give,
        chosen once and kept (on the CPU), in batches of ``batch_size``, by class. Under
        ``torch.distributed``: the first of each class in the global data order, taken from
        every process's candidates (its own first ones), the same in every process."""
        if self._subset is None:
            per_class = math.ceil(self.samples / K)
            loader, processes = access.data["train"], access.processes
            order = global_order(loader, processes)
            if not processes.active:
                _, xs, ys = _first_per_class(_keyed_samples(loader, order), per_class, K)
            else:  # every process's candidates (or its error: all raise alike), in order
                try:
                    mine = (None, *_first_per_class(_keyed_samples(loader, order), per_class, K))
                except ValueError as err:
                    mine = (str(err), [], [], [])
                parts = processes.all_gather(mine)
                errors = [error for error, *_ in parts if error is not None]
                if errors:
                    raise ValueError(errors[0])
                candidates = [(keys, list(zip(x, y, strict=True))) for _, keys, x, y in parts]
                merged = ((None, x, y) for x, y in in_global_order(candidates))
                _, xs, ys = _first_per_class(merged, per_class, K)
            if not xs:
                raise ValueError("the training data yielded no sample for the curvature subset")
            order = torch.argsort(torch.stack(ys), stable=True)
            X, Y = torch.stack(xs)[order], torch.stack(ys)[order]
            self._subset = [
                (X[i : i + self.batch_size], Y[i : i + self.batch_size])
                for i in range(0, len(Y), self.batch_size)
            ]
        return self._subset

    def __repr__(self) -> str:
        return (
            f"Curvature(schedule={self.schedule}, samples={self.samples}, "
            f"keys={list(self.requested)})"
        )


def _first_per_class(
    samples: Iterable[tuple[Any, torch.Tensor, torch.Tensor]], per_class: int, K: int
) -> tuple[list[Any], list[torch.Tensor], list[torch.Tensor]]:
    """``(keys, xs, ys)`` of the first ``per_class`` samples of each class among
    ``(key, x, y)`` samples, in order (read no further once every class has its own)."""
    keys: list[Any] = []
    xs: list[torch.Tensor] = []
    ys: list[torch.Tensor] = []
    counts = torch.zeros(K, dtype=torch.long)
    for key, x, y in samples:
        c = int(y)
        if counts[c] < per_class:
            counts[c] += 1
            keys.append(key)
            xs.append(x.detach().cpu())
            ys.append(y.detach().cpu())
            if bool((counts >= per_class).all()):
                break
    return keys, xs, ys


def _keyed_samples(
    loader: Any, order: Any
) -> Iterator[tuple[OrderKey, torch.Tensor, torch.Tensor]]:
    """The samples of ``loader`` one by one with their keys in the global data order, which
    must increase along the loader (the first samples are then those of smallest key)."""
    seen, last = 0, None
    for batch in loader:
        x, y = batch[0], batch[1]
        for i in range(len(y)):
            key = order(seen)
            if last is not None and key <= last:
                raise ValueError(
                    "the curvature family picks its fixed subset in the global data order, "
                    "which each process's training loader must follow under "
                    "torch.distributed: use a DistributedSampler with shuffle=False (or "
                    "unshuffled shards in rank order)"
                )
            seen, last = seen + 1, key
            yield key, x[i], y[i]


FRACTION_K = {"K": 1, "K^2": 2}
"""The symbolic ``fraction_k`` values and the power of ``K`` each stands for."""


def _check_fraction_k(fraction_k: int | str | None) -> int | str:
    if isinstance(fraction_k, str):
        if fraction_k not in FRACTION_K:
            raise ValueError(f"fraction_k must be a count, 'K' or 'K^2', got {fraction_k!r}")
        return fraction_k
    return "K" if fraction_k is None else check_int("fraction_k", fraction_k, minimum=1)


def _top_k(fraction_k: int | str, K: int) -> int:
    """The number of top eigenvectors ``f_top`` projects on: ``K``, ``K²`` or a count."""
    return K ** FRACTION_K[fraction_k] if isinstance(fraction_k, str) else fraction_k


def _measure_layer(
    fam: Curvature,
    keys: frozenset[str],
    model: nn.Module,
    module: nn.Module,
    name: str,
    loss: Any,
    data: list[tuple[torch.Tensor, torch.Tensor]],
    K: int,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Every requested key of one weight layer, and its spectra."""
    obj = cv.Objective(model, loss, data, params=[module.weight])
    P = obj.dim
    top = min(fam.top or 2 * K * K + K, P - 1)
    values: dict[str, float] = {}
    arrays: dict[str, np.ndarray] = {}

    def eig(op: Any, k: int = top) -> Any:
        return cv.top_eigenpairs(op, min(k, P - 1), tol=fam.tol, seed=fam.seed)

    def counted(op: Any, quantity: str) -> Any:
        """The top eigenpairs of a spectrum whose outliers are counted, resolved down to
        the values the gap rule reads (:func:`~collapselab.curvature.counted_spectrum`);
        the tolerance reached is kept with the values."""
        spectrum = cv.counted_spectrum(op, top, tol=fam.tol, seed=fam.seed)
        arrays[quantity] = spectrum.values.detach().cpu().numpy()
        arrays[f"{quantity}_tol"] = np.float64(spectrum.tol)
        return spectrum

    need = set(keys)
    wants_hessian = need & {*HESSIAN_KEYS, *ALIGNMENT_KEYS, *KRONECKER_KEYS}
    if wants_hessian:
        H = cv.HessianOperator(obj)
        if need & {"hessian_top_eigenvalue", "hessian_outliers", *ALIGNMENT_KEYS}:
            spectrum = counted(H, "hessian_eigenvalues")
            pairs = spectrum.pairs
            values["hessian_top_eigenvalue"] = float(pairs.values[0])
            values["hessian_outliers"] = float(spectrum.outliers())
            k = min(_top_k(fam.fraction_k, K), pairs.vectors.shape[1])
            top_vectors = pairs.vectors[:, :k]
            if need & set(ALIGNMENT_KEYS):
                g = obj.gradient()
                values["gradient_fraction_top"] = cv.top_fraction(g, top_vectors)
                arrays["gradient_coefficients"] = (
                    cv.gradient_coefficients(g, pairs.vectors).cpu().numpy()
                )
                previous = fam._previous.get(name)
                if previous is not None and previous.shape == top_vectors.shape:
                    values["top_subspace_overlap"] = cv.subspace_overlap(
                        previous, top_vectors.cpu()
                    )
                fam._previous[name] = top_vectors.detach().cpu().clone()
        if "hessian_trace" in need:
            values["hessian_trace"] = cv.hutchpp(H, fam.trace_products, seed=fam.seed).value
        if fam.density_steps:
            density = cv.slq(H, min(fam.density_steps, P), fam.density_probes, seed=fam.seed)
            arrays["hessian_density_nodes"] = density.nodes
            arrays["hessian_density_weights"] = density.weights
        if need & set(KRONECKER_KEYS) and isinstance(module, nn.Linear):
            _kronecker(H, obj, model, module, K, values, arrays)
    if need & {*GGN_KEYS, *PAPYAN_KEYS}:
        if need & set(PAPYAN_KEYS):
            dec = cv.papyan_decomposition(obj, centring=fam.centring, n_classes=K)
            G = dec.ggn
            _papyan(dec, need, values, arrays, eig, counted)
        else:
            G = cv.GGNOperator(obj)
        if need & {"ggn_top_eigenvalue", "ggn_outliers"}:
            spectrum = counted(G, "ggn_eigenvalues")
            values["ggn_top_eigenvalue"] = float(spectrum.values[0])
            values["ggn_outliers"] = float(spectrum.outliers())
        if "ggn_trace" in need:
            values["ggn_trace"] = cv.hutchpp(G, fam.trace_products, seed=fam.seed).value
    if need & set(WEIGHT_KEYS):
        w = cv.weight_spectrum(module)
        arrays["weight_eigenvalues"] = w
        values["weight_top_eigenvalue"] = float(w[0])
        values["weight_outliers"] = float(cv.count_outliers(w))
        if "weight_alpha" in need and (w > w[0] * 1e-12).sum() >= 5:
            values["weight_alpha"] = cv.power_law_fit(w).alpha
    if "gradient_covariance_top_eigenvalue" in need:
        cov = eig(cv.gradient_covariance(obj), min(K, P - 1)).values.detach().cpu().numpy()
        arrays["gradient_covariance_eigenvalues"] = cov
        values["gradient_covariance_top_eigenvalue"] = float(cov[0])
    if "feature_covariance_top_eigenvalue" in need:
        feats = _layer_inputs(obj, module)
        spectrum = cv.covariance_spectrum(feats)
        arrays["feature_covariance_eigenvalues"] = spectrum
        values["feature_covariance_top_eigenvalue"] = float(spectrum[0])
    return {k: v for k, v in values.items() if k in keys}, arrays


def _kronecker(
    H: Any,
    obj: Any,
    model: nn.Module,
    module: nn.Linear,
    K: int,
    values: dict[str, float],
    arrays: dict[str, np.ndarray],
) -> None:
    """Alignment ``a(v_kk')`` of the ``K²`` vectors ``v_kk' = h̄^(l+1)_k ⊗ h̄^(l)_k'`` (note
    004 Thm 4.1, M11). ``h^(l+1)`` is the input of the next weight layer ``W_{l+1}``, i.e.
    ``σ(W_l h^(l) + b_l)`` after an activation (note 004 §2; the rows of ``W_{L:l+1}`` are
    proportional to its class means at collapse, DNC3), not the layer's pre-activation
    output; the last weight layer's is its output ``f``. Nothing is written when the next
    weight layer reads a different number of features (a reshape or pooling between)."""
    following = _next_weight_layer(model, module)
    h_in, h_out = cv.module_class_means(obj, module, K, next_module=following)
    if h_out.shape[1] != module.out_features:
        return
    v = cv.kronecker_vectors(h_out, h_in).reshape(K * K, -1).T
    align = cv.eigenvector_alignment(H, v).cpu().numpy()
    arrays["kronecker_alignment"] = align.reshape(K, K)
    values["kronecker_alignment_mean"] = float(align.mean())
    values["kronecker_alignment_min"] = float(align.min())


def _next_weight_layer(model: nn.Module, module: nn.Module) -> nn.Module | None:
    """The ``nn.Linear`` / ``nn.Conv*d`` module registered after ``module`` (the forward
    order of the sequential networks measured here), or ``None`` after the last one."""
    kinds = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
    layers = [m for m in model.modules() if isinstance(m, kinds)]
    index = next(i for i, m in enumerate(layers) if m is module)
    return layers[index + 1] if index + 1 < len(layers) else None


def _papyan(
    dec: Any,
    need: set[str],
    values: dict[str, float],
    arrays: dict[str, np.ndarray],
    eig: Any,
    counted: Any,
) -> None:
    cls_vals = dec.class_part.eigenpairs()[0].cpu().numpy()
    cross_vals = dec.cross_part.eigenpairs()[0].cpu().numpy()
    arrays["papyan_class_eigenvalues"] = cls_vals
    arrays["papyan_cross_eigenvalues"] = cross_vals
    values["papyan_class_top"] = float(cls_vals[0]) if cls_vals.size else 0.0
    values["papyan_cross_top"] = float(cross_vals[0]) if cross_vals.size else 0.0
    values["papyan_class_rank"] = float(cls_vals.size)
    values["papyan_cross_rank"] = float(cross_vals.size)
    values["papyan_class_cross_overlap"] = cv.image_overlap(dec.class_part, dec.cross_part)
    if "papyan_within_top" in need:
        within = eig(dec.within_part).values.detach().cpu().numpy()
        arrays["papyan_within_eigenvalues"] = within
        values["papyan_within_top"] = float(within[0])
    for part in ("class", "cross", "within"):
        key = f"ggn_outliers_without_{part}"
        if key not in need:
            continue
        knocked = dec.knockout(part)
        if part == "within":  # low rank: its exact spectrum, then its zero bulk
            vals = knocked.eigenpairs()[0].cpu().numpy()
            vals = np.concatenate([vals, np.zeros(max(vals.size, 1))])
            arrays[f"ggn_without_{part}_eigenvalues"] = vals
            values[key] = float(cv.count_outliers(vals))
        else:
            values[key] = float(counted(knocked, f"ggn_without_{part}_eigenvalues").outliers())


def _layer_inputs(obj: Any, module: nn.Module) -> torch.Tensor:
    """The (flattened) inputs of ``module`` over the objective's data."""
    parts: list[torch.Tensor] = []
    handle = module.register_forward_hook(
        lambda m, i, o: parts.append(i[0].detach().reshape(i[0].shape[0], -1))
    )
    try:
        for x, _ in obj.batches():
            obj.forward(obj.theta, x)
    finally:
        handle.remove()
    return torch.cat(parts)
