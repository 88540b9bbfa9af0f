"""collapselab.stats layer: streaming, mergeable class statistics (see DESIGN.md)."""

from collapselab.stats.class_stats import (
    DENSE_MAX_DIM,
    ClassStats,
    class_stats_from_batches,
    class_stats_from_features,
    nearest_class_mean,
)

__all__ = [
    "DENSE_MAX_DIM",
    "ClassStats",
    "class_stats_from_batches",
    "class_stats_from_features",
    "nearest_class_mean",
]
