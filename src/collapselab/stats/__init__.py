"""collapselab.stats layer: streaming, mergeable accumulators and their reduction (docs/index.md).

Every accumulator holds sums over samples only (formulas live in :mod:`collapselab.metrics`),
merges by addition and reduces over ``torch.distributed`` through the one generic
:func:`all_reduce`:

- :class:`Accumulator`: the protocol (``update``, ``merge``, ``state``, ``all_reduce``).
- :class:`ClassStats`: two-pass class statistics (counts, means, within-class scatter,
  nearest-class-mean and classifier decisions).
- :class:`CosineSimilarityAccumulator`, :class:`GatingSimilarityAccumulator`: per-class
  sums of unit vectors and of ReLU gating patterns (pairwise similarities, paper 000).
- :class:`LayerPathAccumulator`: per-sample steps between consecutive layers (paper 001).
- :class:`CommonDirectionAccumulator`: the Gram of a layer's weight changes (paper 000).
- :class:`ConfusionCounts`: (label, decision) counts.
"""

from collapselab.stats.accumulator import Accumulator, all_reduce
from collapselab.stats.class_stats import (
    DENSE_MAX_DIM,
    ClassStats,
    class_stats_from_batches,
    class_stats_from_features,
    nearest_class_mean,
)
from collapselab.stats.confusion import ConfusionCounts
from collapselab.stats.layer_path import LayerPathAccumulator
from collapselab.stats.pairwise import CosineSimilarityAccumulator, GatingSimilarityAccumulator
from collapselab.stats.weight_changes import CommonDirectionAccumulator

__all__ = [
    "DENSE_MAX_DIM",
    "Accumulator",
    "ClassStats",
    "CommonDirectionAccumulator",
    "ConfusionCounts",
    "CosineSimilarityAccumulator",
    "GatingSimilarityAccumulator",
    "LayerPathAccumulator",
    "all_reduce",
    "class_stats_from_batches",
    "class_stats_from_features",
    "nearest_class_mean",
]
