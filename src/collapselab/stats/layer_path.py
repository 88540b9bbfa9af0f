r"""Per-sample displacements between consecutive layers, summed (paper 001's layer path).

For the ordered layers ``h^0, ..., h^L`` of the same samples (every layer in the same
``D``-dimensional space, e.g. the blocks of a ResNet stage), each transition ``l -> l+1``
moves sample ``i`` by ``||h_i^{l+1} - h_i^l||``. :class:`LayerPathAccumulator` keeps the
sums over samples of those norms and of their squares, and the sum of the per-sample
straightness ``sum_l ||h_i^{l+1} - h_i^l|| / ||h_i^L - h_i^0||``; the relative positions,
mean displacements, optimal-transport regulariser and mean straightness follow from them
(:mod:`collapselab.metrics.layerwise`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from collapselab.checks import ArrayLike, as_layers, to_f64
from collapselab.stats.accumulator import Accumulator


def step_norms(hs: Sequence[torch.Tensor]) -> torch.Tensor:
    """``(L, N)`` norms ``||h_i^{l+1} - h_i^l||``, one layer pair in float64 at a time."""
    return torch.stack(
        [torch.linalg.vector_norm(to_f64(b) - to_f64(a), dim=1) for a, b in itertools.pairwise(hs)]
    )


def straightness_ratios(
    norms: torch.Tensor, h0: torch.Tensor, h_last: torch.Tensor
) -> torch.Tensor:
    """Per sample ``path / chord``: ``sum_l`` of the step ``norms`` over ``||h^L - h^0||``.

    ``inf`` where the chord is 0 but the sample moves, NaN where it never moves.
    """
    path = norms.sum(dim=0)
    chord = torch.linalg.vector_norm(to_f64(h_last) - to_f64(h0), dim=1)
    moving = chord > 0
    out = torch.full_like(path, float("nan"))
    out[moving] = path[moving] / chord[moving]
    out[(~moving) & (path > 0)] = float("inf")
    return out


class LayerPathAccumulator(Accumulator):
    r"""Sums of the per-sample steps between consecutive layers, and of the straightness.

    State: ``lengths`` ``(L,)`` ``sum_i ||h_i^{l+1} - h_i^l||``, ``sq_lengths`` ``(L,)`` the sums
    of their squares, ``n_samples``, ``straightness_sum`` (over samples with a non-zero
    chord ``||h^L - h^0||``) and ``n_straight`` (their number), as 0-d tensors.
    """

    @property
    def n_samples(self) -> int:
        """Samples added so far."""
        return 0 if self.is_empty else int(self._sums["n_samples"])

    def update(self, layers: Sequence[ArrayLike]) -> LayerPathAccumulator:
        """Add one batch: ``[H_0, ..., H_L]`` for the same B samples, each ``(B, D)``."""
        hs = as_layers("layers", layers, min_layers=2)
        if not self.is_empty and len(hs) - 1 != self._sums["lengths"].shape[0]:
            raise ValueError(
                f"layers has {len(hs)} entries but earlier batches had "
                f"{self._sums['lengths'].shape[0] + 1}"
            )
        norms = step_norms(hs)
        if self.is_empty:
            f64 = {"dtype": torch.float64, "device": norms.device}
            i64 = {"dtype": torch.int64, "device": norms.device}
            self._sums = {
                "lengths": torch.zeros(norms.shape[0], **f64),
                "sq_lengths": torch.zeros(norms.shape[0], **f64),
                "n_samples": torch.zeros((), **i64),
                "straightness_sum": torch.zeros((), **f64),
                "n_straight": torch.zeros((), **i64),
            }
        s = self._sums
        norms = norms.to(s["lengths"].device)
        s["lengths"] += norms.sum(dim=1)
        s["sq_lengths"] += (norms * norms).sum(dim=1)
        s["n_samples"] += norms.shape[1]
        ratio = straightness_ratios(norms, hs[0], hs[-1]).to(norms.device)
        finite = torch.isfinite(ratio)
        s["straightness_sum"] += ratio[finite].sum()
        s["n_straight"] += finite.sum()
        return self
