"""A prototype of faster ClassStats batch updates, for the benchmarks only.

``collapselab.stats.ClassStats`` is owned by the stats layer; this subclass shows, with
numbers, what the changes proposed in ``benchmarks/README.md`` would buy. It reuses the
parent's state layout (``_p1``, ``_p2``, ``_fixed``) and changes only how a batch is
added:

1. finiteness is checked with one reduction in the input's own dtype: ``h.sum()`` is NaN
   or infinite whenever an entry is, and allocates nothing; only when it is not finite
   (a bad entry, or a finite overflow) does an element-wise check run, in row blocks, to
   count the bad entries. ``torch.isfinite(h)`` on the whole matrix allocates about twice
   the input (a float copy for ``abs`` plus bool masks; 2.3 GB for a 1 GB float32
   input), and ``h.sum(dtype=float64)`` a float64 copy. ``check_features`` does the former
   on every batch and, in ``measure``, twice on the whole input;
2. squared norms use ``einsum("ij,ij->i")`` instead of materialising ``dev * dev``;
3. pass 2 computes the deviations ``dev = h - mu_y`` once and gets the projection on the
   between-class basis, the nearest-class-mean scores and the classifier scores from ONE
   matrix product ``dev @ [P, (nu - r)^T, W^T]``, using
   ``(h - r) . c_k = dev . c_k + (mu_y - r) . c_k`` and ``W h = W dev + W mu_y``; the parent
   makes three passes (``dev @ P``, ``(h - r) @ c^T`` with a second ``n x D`` temporary,
   ``h @ W^T``).

Values agree with the parent to rounding (the benchmark checks 1e-10 relative on every
metric). Exact ties between class-mean distances may resolve differently because the
scores are rounded differently.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import torch

import collapselab.stats._validate as validate_module
import collapselab.stats.class_stats as stats_module
from collapselab import _checks
from collapselab.stats import ClassStats
from collapselab.stats.class_stats import _confusion

_BLOCK_ROWS = 256


def _check_finite(h: torch.Tensor, name: str) -> None:
    if not h.is_floating_point() or bool(torch.isfinite(h.sum())):
        return
    bad = sum(
        int((~torch.isfinite(h[i : i + _BLOCK_ROWS])).sum()) for i in range(0, len(h), _BLOCK_ROWS)
    )
    if bad:
        raise ValueError(f"{name} contains {bad} NaN or Inf entries; expected finite values")


_original_check_features = validate_module.check_features


def check_features_fast(x: object, name: str = "features", dim: int | None = None) -> torch.Tensor:
    """``check_features`` with the allocation-free finiteness test of :func:`_check_finite`."""
    t = _checks.as_tensor(name, x)
    if t.ndim == 2 and not t.is_complex() and t.dtype != torch.bool and t.shape[1] > 0:
        if dim is not None and t.shape[1] != dim:
            raise ValueError(f"{name} has dimension {t.shape[1]}, expected {dim}")
        _check_finite(t, name)
        return t
    return _original_check_features(x, name, dim)  # shape errors, worded as before


@contextlib.contextmanager
def proposed() -> Iterator[None]:
    """Swap the proposed ``ClassStats`` and ``check_features`` into the library."""
    measure_module = sys.modules["collapselab.metrics.measure"]
    saved = (stats_module.ClassStats, stats_module.check_features, measure_module.check_features)
    stats_module.ClassStats = ProposedClassStats
    stats_module.check_features = check_features_fast
    measure_module.check_features = check_features_fast
    try:
        yield
    finally:
        stats_module.ClassStats, stats_module.check_features = saved[:2]
        measure_module.check_features = saved[2]


class ProposedClassStats(ClassStats):
    """``ClassStats`` with the batch updates described in the module docstring."""

    def _batch(self, features, labels):
        h, y = features, labels
        if not isinstance(h, torch.Tensor) or h.ndim != 2:
            return super()._batch(features, labels)
        if self.dim is None:
            self._init_pass1(h.shape[1], self.device or h.device)
        if h.shape[1] != self.dim:
            raise ValueError(f"features has dimension {h.shape[1]}, expected {self.dim}")
        _check_finite(h, "features")
        return h.to(self.device, torch.float64), y.to(self.device, torch.int64)

    def update_means(self, features, labels):
        if self.phase != "means":
            raise RuntimeError("update_means() after finalize_means(); pass 1 is closed")
        h, y = self._batch(features, labels)
        p = self._p1
        p["counts"] += torch.bincount(y, minlength=self.n_classes)
        p["sums"].index_add_(0, y, h)
        p["sq_norms"].index_add_(0, y, torch.einsum("ij,ij->i", h, h))

    def finalize_means(self, **kwargs):
        super().finalize_means(**kwargs)
        f = self._fixed
        ref = f["ncc_means"].mean(dim=0)
        cen = f["ncc_means"] - ref
        blocks = [cen.T]
        if self.mode == "projected":
            blocks.insert(0, f["basis"])
        if "W" in f:
            blocks.append(f["W"].T)
        f["_stack"] = torch.cat(blocks, dim=1).contiguous()
        f["_cen_sq"] = (cen * cen).sum(dim=1)
        # Per true class y: (mu_y - r) . c_k and W mu_y + b.
        f["_mean_ncc"] = (f["means"] - ref) @ cen.T
        if "W" in f:
            f["_mean_clf"] = f["means"] @ f["W"].T + f["b"]

    def update_scatter(self, features, labels):
        if self.phase != "scatter":
            raise RuntimeError("update_scatter() before finalize_means()")
        h, y = self._batch(features, labels)
        f, p, c = self._fixed, self._p2, self.n_classes
        dev = h - f["means"][y]
        del h
        p["counts"] += torch.bincount(y, minlength=c)
        p["dev_sq"].index_add_(0, y, torch.einsum("ij,ij->i", dev, dev))
        prod = dev @ f["_stack"]
        r = f["basis"].shape[1] if self.mode == "projected" else 0
        if self.mode == "projected":
            proj = prod[:, :r]
            p["within"] += (proj * f["sample_weight"][y].unsqueeze(1)).T @ proj
        else:
            p["within"] += (dev * f["sample_weight"][y].unsqueeze(1)).T @ dev
        dots = prod[:, r : r + c] + f["_mean_ncc"][y]
        ncc = torch.argmin(f["_cen_sq"] - 2.0 * dots, dim=1)
        p["ncc_confusion"] += _confusion(y, ncc, c)
        if "W" in f:
            scores = prod[:, r + c :] + f["_mean_clf"][y]
            pred = torch.argmax(scores, dim=1)
            p["clf_confusion"] += _confusion(y, pred, c)
            p["mismatch"] += torch.bincount(y[pred != ncc], minlength=c)
