r"""The MSE family: the decomposition of the MSE loss around the central path (paper 003).

``L = L_NC1 + L_NC2/3 + L_LS⊥`` (Theorems 1-2) on the features the classifier reads, for
the paper's ridge constant ``lam``; formulas in :mod:`collapselab.metrics.mse`. Every key
needs the dense within-class covariance, so a request for them keeps it dense (and fails
clearly when the dimension or ``mode`` does not allow it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collapselab.checks import check_float
from collapselab.families.family import Family, Key, LayerView, Layout, Needs, Values
from collapselab.metrics.mse import mse_decomposition

_LS = Needs(scatter="dense")
_TRAIN = ("train",)


def _key(name: str, definition: str) -> Key:
    return Key(name, definition, "003 §2.4, Thms. 1-2", _LS, where="penultimate", splits=_TRAIN)


class MSE(Family):
    """The MSE decomposition of the penultimate layer's features (train split).

    Args:
        lam: the paper's ``lam >= 0`` (Eq. 2); :func:`collapselab.metrics.paper_lambda`
            converts PyTorch weight decay to it.
        keys: subset of the keys below (default: all). Without a classifier only the
            ``L_LS`` terms are computed.
        schedule: when the Monitor measures this family (a
            :class:`collapselab.track.Schedule`; default: the Monitor's schedule).

    Distributed mode ``"reduced"``: its values come from sums over samples (the class
    statistics with the dense within-class covariance), which the engine adds over the
    processes under ``torch.distributed``.
    """

    name = "mse"
    distributed = "reduced"
    keys = (
        _key("mse_ls_loss", "L_LS = L(W̃_LS), the loss of the least-squares classifier"),
        _key("mse_nc1_term", "L_NC1 = ½ tr(W̃_LS (Σ̃_W + λI) W̃_LSᵀ)"),
        _key("mse_nc23_term", "L_NC2/3 = ½ Σ_c π_c ‖W̃_LS μ̃_c − e_c‖²"),
        _key("mse_loss", "L(W̃) = ½ Ave‖Wh + b − y‖² + (λ/2)(‖W‖² + ‖b‖²)"),
        _key("mse_ls_perp", "L_LS⊥ = ½ tr((W̃ − W̃_LS)(S̃ + λI)(W̃ − W̃_LS)ᵀ)"),
        _key("mse_ls_perp_ratio", "L_LS⊥ / L_LS"),
        _key("mse_ls_distance", "‖W̃ − W̃_LS‖_F"),
    )

    def __init__(
        self, lam: float | None = None, keys: Sequence[str] | None = None, *, schedule: Any = None
    ) -> None:
        if lam is None:
            raise ValueError(
                "the 'mse' family needs lam (the paper's lambda; see paper_lambda): "
                "pass MSE(lam=...)"
            )
        super().__init__(keys, schedule=schedule)
        self.lam = check_float("lam", lam, minimum=0.0)

    def setup(self, layout: Layout, keys: frozenset[str]) -> None:
        if layout.penultimate is None:
            raise ValueError(
                "the 'mse' family needs the penultimate layer (the one the classifier reads) "
                "among the measured layers"
            )

    def compute_layer(self, keys: frozenset[str], layer: LayerView, accs: dict) -> Values:
        W, b = layer.classifier if layer.classifier is not None else (None, None)
        values = mse_decomposition(layer.stats, self.lam, W, b).as_dict()
        return {k: v for k, v in values.items() if k in keys}

    def __repr__(self) -> str:
        return f"MSE(lam={self.lam}, keys={list(self.requested)})"
