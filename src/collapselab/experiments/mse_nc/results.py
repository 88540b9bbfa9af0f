"""Reading the stored results of a training experiment back, arm by arm.

The run function records every arm's rows with the split prefixed by the arm's key, and
keeps its progress in the manifest (``manifest["mse_nc"]``): ``plan``, the arms the preset
asks for (:meth:`~collapselab.experiments.mse_nc.arms.Arm.to_dict`, in order); ``arms``, a
summary per trained arm (dataset, net, loss, rate, penultimate layer name, ...); ``sweeps``,
the learning-rate sweeps. :class:`StoredArms` gives the figures and the claims the curves of
one arm without knowing that layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from collapselab.experiments.mse_nc.arms import Arm, split_name
from collapselab.store import zero_error_epoch

PROGRESS_KEY = "mse_nc"
"""Manifest key of the run's plan, the per-arm summaries and the sweep progress."""

MODEL = ""
"""``layer`` of model-level rows (accuracy, robustness, learning rate)."""

_MODEL_LEVEL = frozenset(
    {"accuracy", "lr", "zero_error_epoch", "deepfool_ratio", "deepfool_median_ratio",
     "deepfool_norm", "deepfool_n_used", "deepfool_n_failed", "deepfool_iterations"}
)  # fmt: skip


class MissingResult(LookupError):
    """An arm, metric or epoch the stored results do not contain."""


@dataclass
class StoredArms:
    """The arms of a finished (or partial) training run and their measured curves.

    Attributes:
        metrics: the run's long-format metric table.
        manifest: the run's manifest (``config``, the preset's fields, and the ``mse_nc``
            progress record).
    """

    metrics: pd.DataFrame
    manifest: Mapping[str, Any]
    _by_split: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.manifest.get("config") or {})

    @property
    def progress(self) -> dict[str, Any]:
        """The run's ``mse_nc`` record: ``plan``, ``arms`` and ``sweeps``."""
        return dict(self.manifest.get(PROGRESS_KEY) or {})

    @property
    def summaries(self) -> dict[str, dict[str, Any]]:
        """Per-arm summaries of the arms trained so far, by key."""
        return dict(self.progress.get("arms") or {})

    def planned(self, loss: str | None = None) -> list[Arm]:
        """The arms the preset asks for (optionally of one loss), in order."""
        arms = [Arm(**entry) for entry in self.progress.get("plan") or []]
        return [a for a in arms if loss is None or a.loss == loss]

    def pairs(self) -> list[str]:
        """``"<dataset>-<net>"`` combinations trained under every configured loss."""
        arms = self.planned()
        losses = {a.loss for a in arms}
        seen = dict.fromkeys(a.pair for a in arms)
        done = self.summaries
        return [p for p in seen if all(f"{p}-{loss}" in done for loss in losses)]

    def trained(self, loss: str | None = None) -> list[str]:
        """Keys of the planned arms that have results, in configuration order."""
        done = self.summaries
        return [a.key for a in self.planned(loss) if a.key in done]

    def summary(self, key: str) -> dict[str, Any]:
        try:
            return self.summaries[key]
        except KeyError:
            raise MissingResult(f"arm {key!r} has no results in this run") from None

    def title(self, key: str) -> str:
        s = self.summary(key)
        return f"{s['dataset']} / {s['net']} ({s['loss'].upper()})"

    def _rows(self, key: str, split: str) -> pd.DataFrame:
        name = split_name(key, split)
        if name not in self._by_split:
            table = self.metrics
            self._by_split[name] = table[table["split"] == name]
        return self._by_split[name]

    def curve(self, key: str, metric: str, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
        """``(epochs, values)`` of ``metric`` for arm ``key`` (the last value per epoch).

        Model-level metrics (accuracy, robustness, learning rate) are read from layer ``""``,
        the others from the arm's penultimate layer.
        """
        layer = MODEL if metric in _MODEL_LEVEL else self.summary(key)["layer"]
        rows = self._rows(key, split)
        rows = rows[(rows["metric"] == metric) & (rows["layer"] == layer) & (rows["epoch"] >= 0)]
        if rows.empty:
            raise MissingResult(f"no {split} rows of {metric!r} for arm {key!r}")
        last = rows.drop_duplicates(subset=["epoch"], keep="last").sort_values("epoch")
        return last["epoch"].to_numpy(dtype=np.int64), last["value"].to_numpy(dtype=np.float64)

    def value_at(self, key: str, metric: str, epoch: int, split: str = "train") -> float:
        """The value of ``metric`` at a measured ``epoch``."""
        x, y = self.curve(key, metric, split)
        hit = np.flatnonzero(x == epoch)
        if hit.size == 0:
            raise MissingResult(f"arm {key!r} has no {split} {metric!r} at epoch {epoch}")
        return float(y[hit[-1]])

    def final(self, key: str, metric: str, split: str = "train") -> tuple[int, float]:
        """``(epoch, value)`` at the last measured epoch."""
        x, y = self.curve(key, metric, split)
        return int(x[-1]), float(y[-1])

    def zero_error_epoch(self, key: str) -> int | None:
        """First measured epoch with training accuracy exactly 1, from arm ``key``'s rows
        (split ``<key>/train``): :func:`collapselab.store.zero_error_epoch`."""
        return zero_error_epoch(self._rows(key, "train"), split_name(key, "train"))

    def sweep(self, key: str) -> dict[str, Any] | None:
        """The sweep record of arm ``key`` (points and selection), if it was swept."""
        return (self.progress.get("sweeps") or {}).get(key)
