r"""The NC family: neural collapse NC1-NC4 and the nearest-class-mean rule (docs/catalogue.md).

Formulas in :mod:`collapselab.metrics.nc` (:func:`~collapselab.metrics.nc.nc_values` maps
the class statistics of a layer to the catalogue keys); this module declares what each key
needs, so that a request for, say, ``nc1`` + ``nc1_trace_ratio`` +
``nc2_etf_distance`` collects the projected statistics only, never the dense ``D x D``
scatter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collapselab.checks import PAIRS, check_bool, check_choice, check_int
from collapselab.families.family import Family, Key, LayerView, Needs, Values
from collapselab.metrics.nc import nc_values


def _key(name: str, definition: str, source: str, needs: Needs, **kwargs: object) -> Key:
    """An NC key: every one is invariant to the scale of the features."""
    return Key(name, definition, source, needs, scale_invariant=True, **kwargs)


_MEANS = Needs(scatter="means")
_SCATTER = Needs(scatter="projected")
_NCC = Needs(scatter="projected", ncc=True)
_DECISIONS = Needs(scatter="projected", ncc=True, classifier=True)
_TRAIN = ("train",)


class NC(Family):
    """Neural collapse of a layer's features (and of the classifier reading them).

    Args:
        keys: subset of the keys below to compute (default: all).
        divide_by_c: ``nc1`` with the PNAS ``1/C`` (default) or without (the MSE-NC
            notebook's ``Tr(Sigma_W Sigma_B^+)``).
        ddof: delta degrees of freedom of the NC2 standard deviations (1: unbiased, as
            ``torch.std`` in the papers' code).
        pairs: ``"unordered"`` (each class pair once) or ``"ordered"`` (both orders, the
            notebook's choice) for the cosine statistics.
        schedule: when the Monitor measures this family (a
            :class:`collapselab.track.Schedule`; default: the Monitor's schedule).

    Distributed mode ``"reduced"``: its values come from sums over samples (the class
    statistics), which the engine adds over the processes under ``torch.distributed``.
    """

    name = "nc"
    distributed = "reduced"
    keys = (
        _key("nc1", "Tr(Σ_W Σ_B†)/C, † on the rank-(C−1) range of Σ_B", "003 §2.2", _SCATTER),
        _key("nc1_trace_ratio", "Tr Σ_W / Tr Σ_B (PFC1)", "001 Eq. 7", _SCATTER),
        _key(
            "nc1_cdnv",
            "Avg_{c≠c'} (σ_c² + σ_c'²) / (2‖μ_c − μ_c'‖²)",
            "Galanti et al. 2022",
            _SCATTER,
        ),
        _key(
            "nc1_snr",
            "Σ_j ω_j⁻², ω the nonzero singular values of Σ_W^{-1/2} M̄; absent unless Σ_W is "
            "dense and nonsingular",
            "003 Eq. 8",
            Needs(scatter="auto"),
        ),
        _key(
            "nc1_dense",
            "1 if the within-class scatter was kept dense (D × D), 0 if projected",
            "collapselab",
            _SCATTER,
            splits=_TRAIN,
        ),
        _key("nc2_equinorm_means", "Std_c ‖μ_c − μ_G‖ / Avg_c ‖μ_c − μ_G‖", "003 Fig. 3", _MEANS),
        _key(
            "nc2_equiangle_means",
            "Std over class pairs of cos(μ_c − μ_G, μ_c' − μ_G)",
            "003 Fig. 4",
            _MEANS,
        ),
        _key("nc2_maxangle_means", "Avg over c≠c' of |cos + 1/(C−1)|", "003 Fig. 5", _MEANS),
        _key(
            "nc2_etf_distance",
            "‖M̄ᵀM̄/‖M̄ᵀM̄‖_F − E‖_F, E the simplex ETF Gram (PFC2)",
            "001 Eq. 8",
            _MEANS,
        ),
        _key(
            "nc2_orthogonal_frame",
            "‖MᵀM/‖MᵀM‖_F − I/√C‖_F on the uncentred means",
            "004 §4",
            _MEANS,
        ),
        _key("ncc_accuracy", "fraction with argmin_c ‖h − μ_c‖ = label (PFC3)", "001 Eq. 9", _NCC),
        _key(
            "nc2_equinorm_classifiers",
            "Std_c ‖w_c‖ / Avg_c ‖w_c‖",
            "003 Fig. 3",
            _MEANS,
            where="penultimate",
            splits=_TRAIN,
        ),
        _key(
            "nc2_equiangle_classifiers",
            "Std over class pairs of cos(w_c, w_c')",
            "003 Fig. 4",
            _MEANS,
            where="penultimate",
            splits=_TRAIN,
        ),
        _key(
            "nc2_maxangle_classifiers",
            "Avg over c≠c' of |cos(w_c, w_c') + 1/(C−1)|",
            "003 Fig. 5",
            _MEANS,
            where="penultimate",
            splits=_TRAIN,
        ),
        _key(
            "nc3_self_duality",
            "‖Wᵀ/‖W‖_F − M̄/‖M̄‖_F‖²_F",
            "003 Fig. 6",
            _MEANS,
            where="penultimate",
        ),
        _key(
            "nc3_self_duality_classwise",
            "Avg_c ‖w_c/‖w_c‖ − (μ_c − μ_G)/‖μ_c − μ_G‖‖²",
            "003 §2.2",
            _MEANS,
            where="penultimate",
        ),
        _key(
            "nc4_ncc_mismatch",
            "fraction with argmax(Wh + b) ≠ argmin_c ‖h − μ_c‖",
            "003 Fig. 8",
            _DECISIONS,
            where="penultimate",
        ),
        _key(
            "accuracy", "fraction with argmax(Wh + b) = label", "", _DECISIONS, where="penultimate"
        ),
    )

    def __init__(
        self,
        keys: Sequence[str] | None = None,
        *,
        divide_by_c: bool = True,
        ddof: int = 1,
        pairs: str = "unordered",
        schedule: Any = None,
    ) -> None:
        super().__init__(keys, schedule=schedule)
        self.divide_by_c = check_bool("divide_by_c", divide_by_c)
        self.ddof = check_int("ddof", ddof, minimum=0)
        self.pairs = check_choice("pairs", pairs, PAIRS)

    def compute_layer(self, keys: frozenset[str], layer: LayerView, accs: dict) -> Values:
        W = layer.classifier[0] if layer.classifier is not None else None
        values = nc_values(
            layer.stats, keys, W=W, divide_by_c=self.divide_by_c, ddof=self.ddof, pairs=self.pairs
        )
        return {k: values[k] for k in self.own_keys() if k in values}
