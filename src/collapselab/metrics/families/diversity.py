r"""The diversity family: how alike the samples' features, gates and gradients are (paper 000).

Per layer, the mean pairwise cosine similarity of the features (M2), over cross-class,
within-class (class average and pooled) and all pairs, and the number of zero feature
vectors; for ReLU-type layers, the similarity of the gating patterns ``z > 0`` of their input
(cosine and agreement, M14); with ``gradients=True``, the cosines of the per-sample
gradients of the loss with respect to the features (M3) and, for ReLU-type layers, to the
pre-activations. Formulas in :mod:`collapselab.metrics.diversity`; the sums are kept by
:class:`~collapselab.stats.CosineSimilarityAccumulator` and
:class:`~collapselab.stats.GatingSimilarityAccumulator`, one pass over the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from collapselab.checks import check_bool, check_choice
from collapselab.metrics.diversity import mean_cosine_similarity, mean_gating_similarity
from collapselab.metrics.family import SIGNALS, Family, Key, LayerView, Layout, Needs, Values
from collapselab.stats import CosineSimilarityAccumulator, GatingSimilarityAccumulator

_SETS = ("cross_class", "within_class", "within_class_pooled", "all")
_SET_TEXT = {
    "cross_class": "over pairs of samples of different classes",
    "within_class": "over same-class pairs, averaged over classes",
    "within_class_pooled": "over all same-class pairs",
    "all": "over all pairs",
}
# (key prefix, signal, where, what) of each group of four pair-set keys.
_GROUPS = (
    ("feature_cosine", "features", "layer", "cos(h_i, h_j) of the features"),
    ("gating_cosine", "gates", "gated", "cos(a_i, a_j) of the gates a = (z > 0)"),
    ("gating_agreement", "gates", "gated", "fraction of units in the same state"),
    ("gradient_cosine", "feature_gradients", "layer", "cos of the per-sample ∂ℓ_i/∂h_i"),
    (
        "preact_gradient_cosine",
        "preactivation_gradients",
        "gated",
        "cos of the per-sample ∂ℓ_i/∂z_i",
    ),
)
_GRADIENT_PREFIXES = ("gradient_cosine", "preact_gradient_cosine")


def _group_keys(prefix: str, signal: str, where: str, what: str) -> tuple[Key, ...]:
    needs = Needs(signals=frozenset({signal}))
    return tuple(
        Key(f"{prefix}_{s}", f"mean {what} {_SET_TEXT[s]}", "000 M2-M3, M14", needs, where=where)
        for s in _SETS
    )


class Diversity(Family):
    """Feature, gating and gradient diversity of every layer.

    Args:
        keys: keys to compute (default: the feature and gating keys, plus the gradient keys
            with ``gradients=True``).
        gradients: also the gradient cosines (the Monitor then takes per-sample gradients
            in pass 1, from one backward pass per batch of the summed per-sample loss).
        zero_vectors: ``"exclude"`` (zero vectors leave every pair) or ``"zero_cosine"``
            (they count with cosine 0); see :mod:`collapselab.metrics.diversity`.
    """

    name = "diversity"
    keys = (
        *(k for group in _GROUPS for k in _group_keys(*group)),
        Key(
            "feature_zero_vectors",
            "number of samples whose feature vector is exactly zero",
            "000 note A25",
            Needs(signals=frozenset({"features"})),
        ),
    )

    def __init__(
        self,
        keys: Sequence[str] | None = None,
        *,
        gradients: bool = False,
        zero_vectors: str = "exclude",
    ) -> None:
        self.gradients = check_bool("gradients", gradients)
        super().__init__(keys)
        self.zero_vectors = check_choice("zero_vectors", zero_vectors, ("exclude", "zero_cosine"))

    def default_keys(self) -> tuple[str, ...]:
        if self.gradients:
            return self.own_keys()
        return tuple(k for k in self.own_keys() if not k.startswith(_GRADIENT_PREFIXES))

    def accumulators(self, split: str, layout: Layout, keys: frozenset[str]) -> dict[str, Any]:
        c = layout.n_classes
        wanted = {s for k in keys for s in self.key(k).needs.signals}
        out: dict[str, Any] = {}
        # In the fixed order of SIGNALS: every process must list its accumulators alike
        # for the distributed reduction (set order varies between processes).
        for signal in (s for s in SIGNALS if s in wanted):
            layers = layout.layers if signal in ("features", "feature_gradients") else layout.gated
            make = GatingSimilarityAccumulator if signal == "gates" else CosineSimilarityAccumulator
            out[signal] = {name: make(c) for name in layers}
        return out

    def update(
        self, accs: dict[str, Any], layer: str, signal: str, values: torch.Tensor, y: torch.Tensor
    ) -> None:
        acc = accs.get(signal, {}).get(layer)
        if acc is not None:
            acc.update(values, y)

    def compute_layer(self, keys: frozenset[str], layer: LayerView, accs: dict) -> Values:
        out: Values = {}
        name, zero = layer.name, self.zero_vectors
        features = accs.get("features", {}).get(name)
        if features is not None:
            result = mean_cosine_similarity(features, zero)
            out |= result.as_dict("feature_cosine")
            out["feature_zero_vectors"] = float(result.n_zero)
        gates = accs.get("gates", {}).get(name)
        if gates is not None:
            out |= mean_gating_similarity(gates, "cosine", zero).as_dict("gating_cosine")
            out |= mean_gating_similarity(gates, "agreement").as_dict("gating_agreement")
        for signal, prefix in (
            ("feature_gradients", "gradient_cosine"),
            ("preactivation_gradients", "preact_gradient_cosine"),
        ):
            acc = accs.get(signal, {}).get(name)
            if acc is not None:
                out |= mean_cosine_similarity(acc, zero).as_dict(prefix)
        return {k: v for k, v in out.items() if k in keys}
