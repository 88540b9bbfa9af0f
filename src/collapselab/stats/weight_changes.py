r"""The Gram matrix of a layer's weight changes, summed over a window (paper 000, Eq. 5).

The common direction ``C in R^h`` of paper 000 is the top eigenvector of
``G = sum_{t, x} ΔW_t|_x ΔW_t|_x^T`` (:func:`collapselab.metrics.diversity.common_directions`).
For per-sample updates ``ΔW|_x = -η g_x F_x^T`` this is ``η^2 sum ||F_x||^2 g_x g_x^T``, an
``h x h`` matrix in the layer's output width, accumulated here without ever forming a
``d x h`` matrix per sample.
"""

from __future__ import annotations

import torch

from collapselab.checks import ArrayLike, as_matrix
from collapselab.stats.accumulator import Accumulator


class CommonDirectionAccumulator(Accumulator):
    """Streams the Gram ``G = sum ΔW ΔWᵀ`` of weight changes (paper 000, Eq. 5, R10).

    State: ``gram`` ``(h, h)`` and ``n_changes`` (a 0-d count). Feed per-sample changes
    through their rank-1 factors with :meth:`update`, or whole changes (a mini-batch update,
    a batch-mean change) with :meth:`update_weight_change`. The window ``[T_start, T_end]``
    and the sample subset (all samples, one class) are whatever the caller feeds.
    """

    def _add(self, gram: torch.Tensor, count: int) -> None:
        if self.is_empty:
            self._sums = {
                "gram": torch.zeros_like(gram),
                "n_changes": torch.zeros((), dtype=torch.int64, device=gram.device),
            }
        elif gram.shape != self._sums["gram"].shape:
            raise ValueError(
                f"weight changes have output width {gram.shape[0]} but earlier ones had "
                f"{self._sums['gram'].shape[0]}"
            )
        self._sums["gram"] += gram.to(self._sums["gram"].device)
        self._sums["n_changes"] += count

    @property
    def gram(self) -> torch.Tensor | None:
        """``G``, ``(h, h)`` float64 (None before the first update)."""
        return self._sums.get("gram")

    @property
    def n_changes(self) -> int:
        """Number of weight changes added (samples or whole updates)."""
        return int(self._sums["n_changes"]) if not self.is_empty else 0

    def update(
        self, pre_grads: ArrayLike, inputs: ArrayLike, lr: float = 1.0
    ) -> CommonDirectionAccumulator:
        """Add the per-sample changes ``ΔW|_x = -lr g_x F_xᵀ`` of a batch.

        Args:
            pre_grads: ``(B, h)`` pre-activation gradients ``g_x = D Ḟ`` (of the per-sample
                loss; the scale only rescales G).
            inputs: ``(B, d)`` layer inputs ``F_x^(l-1)``.
            lr: learning rate η (matters only when mixing with :meth:`update_weight_change`).
        """
        device = None if self.is_empty else self._sums["gram"].device
        g = as_matrix("pre_grads", pre_grads, device)
        f = as_matrix("inputs", inputs, g.device)
        if f.shape[0] != g.shape[0]:
            raise ValueError(
                f"inputs has {f.shape[0]} rows but pre_grads has {g.shape[0]}; "
                "expected one per sample"
            )
        weights = float(lr) ** 2 * (f * f).sum(dim=1)
        self._add((g * weights[:, None]).T @ g, g.shape[0])
        return self

    def update_weight_change(self, delta_w: ArrayLike) -> CommonDirectionAccumulator:
        """Add one whole weight change ``ΔW`` of shape ``(h, d)``: ``G += ΔW ΔWᵀ``."""
        device = None if self.is_empty else self._sums["gram"].device
        w = as_matrix("delta_w", delta_w, device)
        self._add(w @ w.T, 1)
        return self
