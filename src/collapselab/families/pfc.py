r"""The PFC family: progressive feedforward collapse across a network's layers (paper 001).

Per layer, PFC1-3 (the NC family's ``nc1_trace_ratio``, ``nc2_etf_distance`` and
``ncc_accuracy``, which this family requests); across the ordered *path* layers (layers in
one feature space, e.g. the blocks of a ResNet stage), the relative position of each layer
and the mean displacement from the previous one (§2.6), the optimal-transport regulariser
(Eq. 12), the mean straightness of the samples' paths and the ε-empirical effective depth
(§2.4). Formulas in :mod:`collapselab.metrics.layerwise`; the per-sample steps between
layers are summed by a :class:`~collapselab.stats.LayerPathAccumulator`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from collapselab.checks import check_float
from collapselab.families.family import MODEL_LAYER, Family, Key, Layout, Needs, SplitView, Values
from collapselab.metrics.layerwise import (
    effective_depth_from_accuracy,
    path_displacements,
    path_ot_regulariser,
    path_positions,
    path_straightness,
)
from collapselab.metrics.nc import PFC_KEYS
from collapselab.stats import LayerPathAccumulator

_PATH_KEYS = ("pfc_position", "mean_displacement", "ot_regulariser", "straightness")


class PFC(Family):
    """PFC1-3 per layer and the layer-path metrics of paper 001.

    Args:
        keys: keys to compute (default: PFC1-3 and every key below).
        path_layers: the ordered layers of the path. ``"auto"``: all measured layers if they
            share one flattened dimension, else the last run of consecutive measured layers
            with a common dimension (at least two; for
            :class:`~collapselab.models.ConvResNet` the last stage, which note 001
            measures). An explicit list must share one dimension (relative positions sum
            ``||h^(l+1) - h^l||``). ``None``: no path metrics.
        effective_depth_eps: the nearest-class-mean training error tolerated by the
            effective depth.
        schedule: when the Monitor measures this family (a
            :class:`collapselab.track.Schedule`; default: the Monitor's schedule). PFC1-3,
            the NC family's keys, are computed whenever this family is measured.

    Distributed mode ``"reduced"``: its values come from sums over samples (the class
    statistics and the per-sample steps along the path), which the engine adds over the
    processes under ``torch.distributed``.
    """

    name = "pfc"
    distributed = "reduced"
    keys = (
        Key(
            "pfc_position",
            "cumulative Σ_i ‖h_i^(l+1) − h_i^l‖ up to the layer over the whole path's",
            "001 §IV-A",
            Needs(),
            where="path",
        ),
        Key(
            "mean_displacement",
            "(1/N) Σ_i ‖h_i^l − h_i^(l−1)‖ from the previous path layer",
            "001 §2.6",
            Needs(),
            where="path",
        ),
        Key(
            "ot_regulariser",
            "(1/N) Σ_l Σ_i ‖h_i^(l+1) − h_i^l‖²",
            "001 Eq. 12",
            Needs(),
            where="model",
        ),
        Key(
            "straightness",
            "mean over samples of Σ_l ‖h^(l+1) − h^l‖ / ‖h^L − h^0‖",
            "collapselab (001's geodesic assumption)",
            Needs(),
            where="model",
        ),
        Key(
            "effective_depth",
            "index into the path layers of the first layer after the first whose "
            "sample-counted NCC error is ≤ ε (NaN when none is)",
            "001 §2.4 (Galanti et al.)",
            Needs(scatter="projected", ncc=True),
            where="model",
            splits=("train",),
            scale_invariant=True,
        ),
    )

    def __init__(
        self,
        keys: Sequence[str] | None = None,
        *,
        path_layers: Sequence[str] | str | None = "auto",
        effective_depth_eps: float = 0.01,
        schedule: Any = None,
    ) -> None:
        super().__init__(keys, schedule=schedule)
        if isinstance(path_layers, str) and path_layers != "auto":
            path_layers = [path_layers]
        self.path_spec = path_layers
        self.effective_depth_eps = check_float(
            "effective_depth_eps", effective_depth_eps, minimum=0.0
        )
        self.path_layers: list[str] = []

    def default_keys(self) -> tuple[str, ...]:
        return (*PFC_KEYS, *self.own_keys())

    def setup(self, layout: Layout, keys: frozenset[str]) -> None:
        self.path_layers = []
        if self.path_spec is None or not keys & {*_PATH_KEYS, "effective_depth"}:
            return
        if self.path_spec == "auto":
            self.path_layers = _auto_path(layout)
            return
        names = list(self.path_spec)
        missing = [n for n in names if n not in layout.dims]
        if missing:
            raise ValueError(f"path_layers {missing} are not among the measured layers")
        if len(names) < 2:
            raise ValueError("path_layers needs at least two layers")
        if len({layout.dims[n] for n in names}) > 1:
            raise ValueError(
                "path_layers must share one feature dimension (relative positions sum "
                f"||h^(l+1) - h^l||); got { {n: layout.dims[n] for n in names} }"
            )
        self.path_layers = names

    def kept_layers(self) -> Sequence[str]:
        return self.path_layers

    def accumulators(self, split: str, layout: Layout, keys: frozenset[str]) -> dict[str, Any]:
        return {"path": LayerPathAccumulator()} if keys & set(_PATH_KEYS) else {}

    def update_layers(
        self, accs: dict[str, Any], features: Mapping[str, torch.Tensor], y: torch.Tensor
    ) -> None:
        if "path" in accs and self.path_layers:
            accs["path"].update([features[n] for n in self.path_layers])

    def compute_split(
        self, keys: frozenset[str], split: SplitView, accs: dict[str, Any]
    ) -> dict[str, Values]:
        if not self.path_layers:
            return {}
        out: dict[str, Values] = {n: {} for n in self.path_layers}
        model: Values = {}
        if "path" in accs:
            acc = accs["path"]
            positions = path_positions(acc) if "pfc_position" in keys else None
            steps = path_displacements(acc) if "mean_displacement" in keys else None
            for i, name in enumerate(self.path_layers):
                if positions is not None:
                    out[name]["pfc_position"] = float(positions[i])
                if steps is not None and i > 0:
                    out[name]["mean_displacement"] = float(steps[i - 1])
            if "ot_regulariser" in keys:
                model["ot_regulariser"] = path_ot_regulariser(acc)
            if "straightness" in keys:
                model["straightness"] = path_straightness(acc)
        if "effective_depth" in keys:
            # Galanti et al.'s definition counts samples: the unweighted NCC error.
            accuracy = []
            for name in self.path_layers:
                conf = split.layers[name].stats.ncc_confusion
                accuracy.append(float(torch.diagonal(conf).sum()) / float(conf.sum()))
            depth = effective_depth_from_accuracy(accuracy, eps=self.effective_depth_eps)
            model["effective_depth"] = float("nan") if depth is None else float(depth)
        out[MODEL_LAYER] = model
        return out


def _auto_path(layout: Layout) -> list[str]:
    """The last run of at least two consecutive measured layers of one dimension."""
    runs: list[list[str]] = []
    for name in layout.layers:
        if runs and layout.dims[runs[-1][-1]] == layout.dims[name]:
            runs[-1].append(name)
        else:
            runs.append([name])
    long_runs = [r for r in runs if len(r) >= 2]
    if not long_runs:
        warnings.warn(
            "collapselab: no two consecutive measured layers share a dimension; "
            "the layer-path metrics (positions, effective depth) are skipped",
            UserWarning,
            stacklevel=2,
        )
        return []
    return long_runs[-1]
