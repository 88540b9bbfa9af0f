"""The accumulators a monitor fills during a sweep, and the metric families computed from them.

One sweep over a split fills, for every measured layer, a
:class:`~collapselab.stats.ClassStats` (both passes) and, for the diversity family, the
streaming pairwise-cosine accumulators of :mod:`collapselab.metrics.diversity`; for the
ordered path layers a :class:`~collapselab.metrics.layerwise.LayerPathAccumulator`; and the
confusion counts of the model's own predictions. The functions below turn them into
``{layer: {metric: value}}`` with the catalogue's keys.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch

from collapselab.metrics.diversity import CosineSimilarityAccumulator, GatingSimilarityAccumulator
from collapselab.metrics.layerwise import LayerPathAccumulator, effective_depth_from_accuracy
from collapselab.metrics.mse import mse_decomposition, nc1_snr_if_defined
from collapselab.metrics.nc import etf_distance, nc_metrics, trace_ratio, weighted_accuracy
from collapselab.stats import ClassStats

FAMILIES: tuple[str, ...] = ("nc", "mse", "pfc", "diversity")
"""Metric families a :class:`~collapselab.track.Monitor` can compute."""

MODEL_LAYER = ""
"""The ``layer`` value of model-level rows (accuracy of the outputs, path summaries)."""

# Keys that describe the classifier or the statistics mode, not a split (as in measure()).
_NOT_PER_SPLIT = frozenset(
    {
        "nc1_dense",
        "nc2_equinorm_classifiers",
        "nc2_equiangle_classifiers",
        "nc2_maxangle_classifiers",
    }
)


@dataclass
class LayerAccumulators:
    """Everything one sweep accumulates for one layer of one split."""

    stats: ClassStats
    cosine: CosineSimilarityAccumulator | None = None
    gating: GatingSimilarityAccumulator | None = None
    gradient: CosineSimilarityAccumulator | None = None
    preact_gradient: CosineSimilarityAccumulator | None = None


@dataclass
class SplitAccumulators:
    """One split's sweep: per-layer accumulators, the path accumulator, output confusion."""

    layers: dict[str, LayerAccumulators]
    confusion: torch.Tensor  # (C, C) int64: rows labels, columns argmax of the outputs
    path: LayerPathAccumulator | None = None
    failures: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FamilyOptions:
    """Conventions of the metric families (see :class:`~collapselab.track.Monitor`)."""

    families: frozenset[str]
    nc1_divide_by_c: bool = True
    ddof: int = 1
    pairs: str = "unordered"
    lam: float | None = None
    zero_vectors: str = "exclude"
    effective_depth_eps: float = 0.01


def _guard(
    out: dict[str, float], failures: list[str], where: str, fn: Callable[[], dict[str, float]]
) -> None:
    """Add ``fn()``'s values to ``out``; a metric that is undefined for this state of the
    network (e.g. zero between-class scatter in a dead layer) is skipped with a warning
    instead of stopping the measurement of every other layer."""
    try:
        out.update(fn())
    except ValueError as err:
        failures.append(f"{where}: {err}")
        warnings.warn(f"collapselab.track: {where} skipped: {err}", UserWarning, stacklevel=4)


def _nc(stats: ClassStats, opts: FamilyOptions, test: bool) -> dict[str, float]:
    out = nc_metrics(stats, nc1_divide_by_c=opts.nc1_divide_by_c, ddof=opts.ddof, pairs=opts.pairs)
    snr = nc1_snr_if_defined(stats)
    if snr is not None:
        out["nc1_snr"] = snr
    out["nc1_dense"] = 1.0 if stats.mode == "dense" else 0.0
    if test:
        out = {k: v for k, v in out.items() if k not in _NOT_PER_SPLIT}
    return out


def _pfc_layer(stats: ClassStats) -> dict[str, float]:
    """PFC1-3 (note 001, Eqs. 7-9) from class statistics."""
    return {
        "nc1_trace_ratio": trace_ratio(stats),
        "nc2_etf_distance": etf_distance(stats.centred_means),
        "ncc_accuracy": weighted_accuracy(stats.ncc_confusion, stats.class_weights),
    }


def _mse(
    stats: ClassStats, lam: float, W: torch.Tensor, b: torch.Tensor | None
) -> dict[str, float]:
    return mse_decomposition(stats, lam, W, b).as_dict()


def _diversity(acc: LayerAccumulators, zero_vectors: str) -> dict[str, float]:
    out: dict[str, float] = {}
    if acc.cosine is not None:
        res = acc.cosine.result(zero_vectors)
        out |= res.as_dict("feature_cosine")
        out["feature_zero_vectors"] = float(res.n_zero)
    if acc.gating is not None:
        out |= acc.gating.result("cosine", zero_vectors).as_dict("gating_cosine")
        out |= acc.gating.result("agreement").as_dict("gating_agreement")
    if acc.gradient is not None:
        out |= acc.gradient.result(zero_vectors).as_dict("gradient_cosine")
    if acc.preact_gradient is not None:
        out |= acc.preact_gradient.result(zero_vectors).as_dict("preact_gradient_cosine")
    return out


def _path(
    split: SplitAccumulators, path_layers: list[str], opts: FamilyOptions, test: bool
) -> dict[str, dict[str, float]]:
    """Relative positions, displacements and effective depth over the ordered path layers."""
    out: dict[str, dict[str, float]] = {n: {} for n in path_layers}
    model_level: dict[str, float] = {}
    acc = split.path
    if acc is not None:
        positions = acc.relative_positions()
        steps = acc.mean_displacements()
        for i, name in enumerate(path_layers):
            out[name]["pfc_position"] = float(positions[i])
            if i > 0:
                out[name]["mean_displacement"] = float(steps[i - 1])
        model_level["ot_regulariser"] = acc.ot_regulariser()
        model_level["straightness"] = acc.mean_straightness()
    if not test:
        # Galanti et al.'s definition counts samples: the unweighted NCC error.
        acc_per_layer = []
        for name in path_layers:
            conf = split.layers[name].stats.ncc_confusion
            acc_per_layer.append(float(torch.diagonal(conf).sum()) / float(conf.sum()))
        depth = effective_depth_from_accuracy(acc_per_layer, eps=opts.effective_depth_eps)
        model_level["effective_depth"] = float("nan") if depth is None else float(depth)
    out[MODEL_LAYER] = model_level
    return out


def split_metrics(
    name: str,
    split: SplitAccumulators,
    opts: FamilyOptions,
    *,
    penultimate: str | None,
    classifier: tuple[torch.Tensor, torch.Tensor | None] | None,
    path_layers: list[str],
) -> dict[str, dict[str, float]]:
    """``{layer: {metric: value}}`` of one split (``name`` is ``"train"`` or ``"test"``)."""
    test = name != "train"
    fams = opts.families
    out: dict[str, dict[str, float]] = {}
    for layer, acc in split.layers.items():
        jobs: list[tuple[str, Callable[[], dict[str, float]]]] = []
        if "nc" in fams:
            jobs.append(("nc", partial(_nc, acc.stats, opts, test)))
        elif "pfc" in fams:
            jobs.append(("pfc", partial(_pfc_layer, acc.stats)))
        if "mse" in fams and not test and layer == penultimate and classifier is not None:
            W, b = classifier
            jobs.append(("mse", partial(_mse, acc.stats, opts.lam, W, b)))
        if "diversity" in fams:
            jobs.append(("diversity", partial(_diversity, acc, opts.zero_vectors)))
        values: dict[str, float] = {}
        for family, job in jobs:
            _guard(values, split.failures, f"{name} split, layer {layer!r}, family {family!r}", job)
        out[layer] = values
    model_level = {"accuracy": _output_accuracy(split)}
    if "pfc" in fams and path_layers:
        holder: dict[str, float] = {}

        def path_values() -> dict[str, float]:
            per_layer = _path(split, path_layers, opts, test)
            for layer, vals in per_layer.items():
                if layer != MODEL_LAYER:
                    out[layer].update(vals)
            return per_layer[MODEL_LAYER]

        _guard(holder, split.failures, f"{name} split, family 'pfc' (layer path)", path_values)
        model_level |= holder
    out[MODEL_LAYER] = model_level
    return out


def _output_accuracy(split: SplitAccumulators) -> float:
    """Accuracy of ``argmax(model(x))``, class-weighted as the layer statistics are."""
    any_stats = next(iter(split.layers.values())).stats
    return weighted_accuracy(split.confusion, any_stats.class_weights)


def all_correct(split: SplitAccumulators) -> bool:
    """Whether every sample's output argmax is its label (zero training error)."""
    conf = split.confusion
    return int(torch.diagonal(conf).sum()) == int(conf.sum())
