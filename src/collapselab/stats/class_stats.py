r"""Streaming, mergeable per-class statistics of a feature matrix.

Conventions (docs/catalogue.md). ``C`` classes with ``n_c`` samples each, ``N = sum_c n_c``;
class means ``mu_c``; class weights ``pi_c``: ``1/C`` for ``weighting="balanced"`` (the
papers' definitions) or ``n_c/N`` for ``weighting="sample"``. The default,
``weighting="auto"``, is resolved by :meth:`ClassStats.finalize_means` once the counts are
known: ``"balanced"`` when every class has the same count (where the two coincide),
``"sample"`` otherwise (with a warning). Then

* global mean ``mu_G = sum_c pi_c mu_c`` (the mean of the class means when balanced);
* centred means ``M̄ = [mu_1 - mu_G, ..., mu_C - mu_G]`` (``D x C``);
* within-class covariance
  ``Sigma_W = sum_c pi_c (1/n_c) sum_{i in c} (h_i - mu_c)(h_i - mu_c)^T``,
  i.e. normalised by the total count ``N`` for balanced data (note 003 Eq. 1);
* between-class covariance ``Sigma_B = sum_c pi_c (mu_c - mu_G)(mu_c - mu_G)^T``
  (``(1/C) M̄ M̄^T`` when balanced).

For balanced data both weightings coincide. With ``weighting="sample"`` the identity
``Sigma_T = Sigma_W + Sigma_B`` holds for the empirical total covariance of any data.

The statistics are collected in two passes over the data.

* Pass 1 (:meth:`ClassStats.update_means`): class counts, class sums and per-class sums of
  squared norms. Plain sums, so merging partial results (other batches, other processes)
  is exact up to floating-point summation order.
* :meth:`ClassStats.finalize_means` freezes the class means.
* Pass 2 (:meth:`ClassStats.update_scatter`): with the means fixed, sums of squared
  deviations per class, the within-class scatter (dense ``D x D`` or projected ``r x r``),
  and the nearest-class-mean and classifier decision counts. Again plain sums.

Projected mode. Let ``P`` (``D x r``, ``r = rank M̄ <= C - 1``) be an orthonormal basis of
``range(M̄)``, from the SVD ``M̄ diag(sqrt(pi)) = P S Q^T``. Then ``Sigma_B = P S^2 P^T`` and
``Sigma_B^+ = P S^{-2} P^T``, so

``Tr(Sigma_W Sigma_B^+) = Tr(Sigma_W P S^{-2} P^T) = Tr((P^T Sigma_W P) S^{-2})``

by the cyclic property of the trace: the pseudo-inverse lives in ``range(M̄)``, so only the
``r x r`` block ``P^T Sigma_W P`` of the within-class covariance enters. Pass 2 accumulates
``sum_i w_i P^T (h_i - mu_c)(h_i - mu_c)^T P`` with ``w_i = pi_c / n_c``, which is exact for
that trace (and for anything else that sees ``Sigma_W`` only through ``P``) and never forms
a ``D x D`` matrix.

What each mode supports:

* both: counts, means, traces (``Tr Sigma_W``, ``Tr Sigma_B``), per-class variances, the
  projected block ``P^T Sigma_W P`` (hence the pseudo-inverse NC1), NCC and classifier
  decision counts;
* dense only: the full ``Sigma_W`` (``D x D``), needed by anything that inverts or whitens
  with it: the SNR matrix ``Sigma_W^{-1/2} M̄`` and the MSE least-squares classifier.
  Whitening further needs ``Sigma_W`` nonsingular, which requires ``N - C >= D``.

``mode="auto"`` picks dense when ``D <= dense_max_dim`` (2048 by default).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch

from collapselab.checks import (
    MODES,
    WEIGHTINGS,
    check_bool,
    check_choice,
    check_class_counts,
    check_classifier,
    check_features,
    check_int,
    check_labels,
    counts_balanced,
    imbalance_message,
    resolve_weighting,
)
from collapselab.stats.accumulator import Accumulator
from collapselab.stats.scratch import scratch

DENSE_MAX_DIM = 2048
"""Largest feature dimension for which ``mode="auto"`` accumulates the dense ``Sigma_W``."""

_EPS = torch.finfo(torch.float64).eps

DEFAULT_CHUNK_ENTRIES = 2**19
"""Default chunk of :func:`class_stats_from_features`: this many entries (4 MiB in float64)."""
_MIN_CHUNK_ROWS = 64
_MAX_CHUNK_ENTRIES = 2**23

# Safety factor on the rounding-error bound that decides when a pass-2 decision is
# recomputed the documented way (see ClassStats._decide).
_TIE_SLACK = 64.0
# Column blocks of the symmetric within-class product (see _add_weighted_gram).
_GRAM_BLOCK = 128
_GRAM_MAX_BLOCKS = 8

_BLOCK_ENTRIES = 2**16
"""Entries per row block and torch thread of the element-wise work of both passes (512 KiB
of float64 per thread).

A batch is converted to float64 and (pass 2) turned into deviations block by block, so that
the block's float64 copy, its gathered class means and its deviations stay in a core's L2
cache (1 MiB on the benchmark machine) from the conversion to the last product that reads
them; the per-batch work (counts, squared deviations per class, the projected scatter, the
decisions) runs once per batch on the kept ``n x k`` products. With 4 MiB blocks the NC
request at ``D = 512`` spent most of its time streaming the float64 temporaries through
memory (benchmarks/README.md, issue 32).
"""
_MIN_BLOCK_ROWS = 16


def nearest_class_mean(features: torch.Tensor, means: torch.Tensor) -> torch.Tensor:
    r"""Index of the nearest class mean for each row: ``argmin_c ||h - mu_c||_2``.

    Computed without forming ``n x C x D`` differences as
    ``argmin_c (||mu_c - r||^2 - 2 (h - r) . (mu_c - r))`` (the dropped ``||h - r||^2`` is the
    same for every class) after shifting by ``r``, the average of the means, to reduce
    cancellation. Ties go to the lowest class index (``torch.argmin`` returns the first
    minimiser).

    Args:
        features: ``(n, D)`` float tensor.
        means: ``(C, D)`` float tensor on the same device.

    Returns:
        ``(n,)`` int64 tensor of class indices.
    """
    ref = means.mean(dim=0)
    centred = means - ref
    scores = (centred * centred).sum(dim=1) - 2.0 * (features - ref) @ centred.T
    return torch.argmin(scores, dim=1)


class ClassStats(Accumulator):
    r"""Two-pass, mergeable class statistics of features, accumulated in float64.

    Args:
        n_classes: number of classes ``C >= 2``; labels lie in ``[0, C)``.
        weighting: ``"auto"`` (default), ``"balanced"`` (class weights ``pi_c = 1/C``) or
            ``"sample"`` (``pi_c = n_c/N``); see the module docstring. ``"auto"`` is
            resolved by :meth:`finalize_means` from the class counts of pass 1 (after any
            :meth:`all_reduce`, so every process resolves it alike): ``"balanced"`` for
            equal counts, ``"sample"`` otherwise. :attr:`weighting` then holds the resolved
            value and :attr:`requested_weighting` the argument. Fixed before pass 2
            because the within-class scatter is accumulated already weighted.
        warn_imbalanced: warn (``UserWarning``, naming the counts) when ``"auto"`` resolves
            to ``"sample"``. Explicit weightings do not warn here; callers that report
            once per call (:func:`collapselab.measure`) switch this off.
        mode: ``"dense"`` (keep the ``D x D`` within-class covariance), ``"projected"`` (keep
            only its ``r x r`` block on the span of the centred means) or ``"auto"``
            (dense when ``D <= dense_max_dim``). Resolved by :meth:`finalize_means`.
        dense_max_dim: threshold for ``mode="auto"``.
        dim: feature dimension ``D``; needed only when a process may see no batch before an
            :meth:`all_reduce` (otherwise taken from the first batch).
        device: device of the accumulators (batches are moved there); default: that of
            the first batch, or CPU when ``dim`` is given.
        ncc: count the nearest-class-mean decisions in pass 2 (``ncc_confusion``; with a
            classifier also ``mismatch_counts``). ``False`` skips their ``C x D`` scores
            per sample when no requested metric reads them.
        norms: keep the per-class sums of squared norms in pass 1, from which
            :attr:`class_variances` can be read before pass 2. ``False`` saves a pass over
            each batch when pass 2 will run anyway.
        check_finite: check every batch for NaN/Inf as it comes. ``False`` (for callers
            that feed the same features to both passes, as the measurement engine does)
            checks only the class sums when pass 1 ends, which catches the same inputs: a
            NaN or Inf entry makes its class sum non-finite.

    Usage::

        st = ClassStats(10)
        for h, y in batches:            # pass 1
            st.update_means(h, y)
        st.all_reduce()                 # only under torch.distributed
        st.finalize_means()
        for h, y in batches:            # pass 2 (the same data)
            st.update_scatter(h, y)
        st.all_reduce()                 # only under torch.distributed

    Results do not depend on batch sizes, the order of batches (up to floating-point
    summation order) or the number of processes.
    """

    def __init__(
        self,
        n_classes: int,
        *,
        weighting: str = "auto",
        mode: str = "auto",
        dense_max_dim: int = DENSE_MAX_DIM,
        dim: int | None = None,
        device: torch.device | str | None = None,
        warn_imbalanced: bool = True,
        ncc: bool = True,
        norms: bool = True,
        check_finite: bool = True,
    ) -> None:
        super().__init__()
        self.n_classes = check_int("n_classes", n_classes, minimum=2)
        self.requested_weighting = check_choice("weighting", weighting, WEIGHTINGS)
        # None until finalize_means() resolves "auto" from the class counts.
        self.weighting: str | None = None if weighting == "auto" else self.requested_weighting
        self.warn_imbalanced = bool(warn_imbalanced)
        self.ncc = check_bool("ncc", ncc)
        self.norms = check_bool("norms", norms)
        self.check_finite = check_bool("check_finite", check_finite)
        self.requested_mode = check_choice("mode", mode, MODES)
        self.dense_max_dim = check_int("dense_max_dim", dense_max_dim)
        self.mode: str | None = None
        self.dim: int | None = None
        self.device: torch.device | None = torch.device(device) if device is not None else None
        self.phase = "means"
        self._p1: dict[str, torch.Tensor] = {}
        self._p2: dict[str, torch.Tensor] = {}
        self._fixed: dict[str, Any] = {}
        if dim is not None:
            dim = check_int("dim", dim, minimum=1)
            self._init_pass1(dim, self.device or torch.device("cpu"))

    # ------------------------------------------------------------------ pass 1
    def _init_pass1(self, dim: int, device: torch.device) -> None:
        c = self.n_classes
        self.dim, self.device = dim, device
        f64 = {"dtype": torch.float64, "device": device}
        self._p1 = {
            "counts": torch.zeros(c, dtype=torch.int64, device=device),
            "sums": torch.zeros(c, dim, **f64),
        }
        if self.norms:
            self._p1["sq_norms"] = torch.zeros(c, **f64)

    def _batch(
        self, features: object, labels: object, dtype: torch.dtype | None = torch.float64
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Checked features on the accumulators' device (in ``dtype``; ``None`` keeps it)."""
        h = check_features(features, "features", self.dim, finite=self.check_finite)
        y = check_labels("labels", labels, h.shape[0], self.n_classes)
        if self.dim is None:
            self._init_pass1(h.shape[1], self.device or h.device)
        return h.to(self.device, dtype), y.to(self.device)

    def update(self, features: object, labels: object) -> ClassStats:
        """Add a batch to the current pass: :meth:`update_means` before
        :meth:`finalize_means`, :meth:`update_scatter` after; returns ``self``."""
        if self.phase == "means":
            self.update_means(features, labels)
        else:
            self.update_scatter(features, labels)
        return self

    def update_means(self, features: object, labels: object) -> None:
        """Pass 1: add a batch of ``(n, D)`` features with ``(n,)`` integer labels."""
        if self.phase != "means":
            raise RuntimeError("update_means() after finalize_means(); pass 1 is closed")
        # h keeps its dtype: it is converted to float64 block by block (_BLOCK_ENTRIES), each
        # block added while it is in cache; float64 input is added as it is.
        h, y = self._batch(features, labels, dtype=None)
        p = self._p1
        p["counts"] += torch.bincount(y, minlength=self.n_classes)
        n, d = h.shape
        rows = max(n, 1) if h.dtype == torch.float64 else _block_rows(d)
        buf = (
            None
            if h.dtype == torch.float64
            else scratch("class_block", (min(rows, n), d), p["sums"])
        )
        # The blocks as views made at once (split): the per-block Python work is a large
        # part of a block's time on cache-sized blocks.
        for x, labels_ in zip(h.split(rows), y.split(rows), strict=True):
            if buf is not None:
                x = _rows_of(buf, x.shape[0]).copy_(x)
            p["sums"].index_add_(0, labels_, x)
            if self.norms:
                p["sq_norms"].index_add_(0, labels_, _row_sq_norms(x))

    def finalize_means(
        self,
        *,
        ncc_means: object | None = None,
        W: object | None = None,
        b: object | None = None,
        min_count: int = 2,
    ) -> None:
        """Freeze the class means (end of pass 1), resolve ``weighting="auto"`` and prepare
        pass 2.

        Args:
            ncc_means: ``(C, D)`` reference means for the nearest-class-mean decisions of
                pass 2 (e.g. train means for test features); default: these class means.
            W: optional ``(C, D)`` classifier weights; pass 2 then also counts classifier
                decisions ``argmax_c (W h + b)_c`` (ties to the lowest index).
            b: optional ``(C,)`` classifier bias (default zero).
            min_count: smallest allowed class count (2: a within-class scatter needs it).

        Raises:
            ValueError: a class has fewer than ``min_count`` samples, or a shape is wrong.

        Warns:
            UserWarning: ``weighting="auto"`` on imbalanced counts (sample weights are used),
                unless ``warn_imbalanced=False``.
        """
        if self.phase != "means":
            raise RuntimeError("finalize_means() called twice")
        if self.dim is None:
            raise ValueError("no features were seen in pass 1 (update_means)")
        counts = self._p1["counts"]
        check_class_counts(counts, min_count, "features")
        if not self.check_finite and not bool(torch.isfinite(self._p1["sums"]).all()):
            bad = torch.nonzero(~torch.isfinite(self._p1["sums"]).all(dim=1)).flatten().tolist()
            raise ValueError(
                f"features contain NaN or Inf: the class sums of classes {bad[:8]} are not "
                "finite; expected finite values"
            )
        c, d = self.n_classes, self.dim
        weighting = resolve_weighting(self.requested_weighting, counts)
        means = self._p1["sums"] / counts.to(torch.float64).unsqueeze(1)
        n = counts.to(torch.float64)
        pi = torch.full_like(n, 1.0 / c) if weighting == "balanced" else n / n.sum()
        global_mean = pi @ means
        centred = means - global_mean
        basis, svals = _range_basis(centred, pi, means)
        mode = self.requested_mode
        if mode == "auto":
            mode = "dense" if d <= self.dense_max_dim else "projected"
        self.mode = mode
        fixed: dict[str, Any] = {
            "means": means,
            "pi": pi,
            "global_mean": global_mean,
            "centred": centred,
            "basis": basis,
            "svals": svals,
            "sample_weight": pi / n,
        }
        fixed["own_ncc"] = ncc_means is None
        if ncc_means is None:
            fixed["ncc_means"] = means
        else:
            ref = check_features(ncc_means, "ncc_means", d)
            if ref.shape[0] != c:
                raise ValueError(
                    f"ncc_means must have {c} rows (one per class), got {ref.shape[0]}"
                )
            fixed["ncc_means"] = ref.to(self.device, torch.float64)
        if W is not None:
            fixed["W"], fixed["b"] = check_classifier(W, b, c, d, self.device)
        elif b is not None:
            raise ValueError("b was given without W")
        fixed |= _fused_constants(fixed, mode, self.ncc)
        self._fixed = fixed
        self.weighting = weighting
        if self.warn_imbalanced and self.requested_weighting == "auto":
            message = imbalance_message({"": counts}, "auto")
            if message is not None:
                warnings.warn(message, UserWarning, stacklevel=2)
        zeros = {"dtype": torch.float64, "device": self.device}
        ints = {"dtype": torch.int64, "device": self.device}
        r = basis.shape[1]
        self._p2 = {
            "counts": torch.zeros(c, **ints),
            "dev_sq": torch.zeros(c, **zeros),
            "within": torch.zeros((d, d) if mode == "dense" else (r, r), **zeros),
        }
        if self.ncc:
            self._p2["ncc_confusion"] = torch.zeros(c, c, **ints)
        if W is not None:
            self._p2["clf_confusion"] = torch.zeros(c, c, **ints)
            if self.ncc:
                self._p2["mismatch"] = torch.zeros(c, **ints)
        self.phase = "scatter"

    # ------------------------------------------------------------------ pass 2
    def update_scatter(self, features: object, labels: object) -> None:
        """Pass 2: add a batch (the same data as pass 1) with the means held fixed.

        The deviations ``dev = h - mu_y`` are formed once, and one product
        ``dev @ [P, (nu - r)^T, W^T]`` gives the projection on the between-class basis
        (projected mode), the nearest-class-mean scores and the classifier scores, by
        ``(h - r) . c_k = dev . c_k + (mu_y - r) . c_k`` and ``W h + b = W dev + (W mu_y + b)``
        (``nu``: the NCC means, ``r`` their average, ``c_k = nu_k - r``). Those scores round
        differently from the documented formulas (:func:`nearest_class_mean`,
        ``argmax(W h + b)``), so every row whose two best scores lie within a bound on the
        rounding error of both is decided again by the documented formula: the decisions,
        ties to the lowest class index included, are exactly the documented ones.
        """
        if self.phase != "scatter":
            raise RuntimeError("update_scatter() before finalize_means()")
        # h keeps its dtype: dev = h - mu_y is formed in float64 block by block, without a
        # float64 copy of the batch; the deviations themselves are not kept, only their
        # norms and their products with the fused columns.
        h, y = self._batch(features, labels, dtype=None)
        f, p, c = self._fixed, self._p2, self.n_classes
        n, d = h.shape
        fused, dense = f["fused"], self.mode == "dense"
        # dev F per block, into the rows of one (n, k) buffer. On a block in cache this is
        # faster than (F^T dev^T)^T, which was faster on blocks of 4 MiB and more.
        prod = scratch("products", (n, fused.shape[1]), f["means"])
        dev_norm = scratch("deviation_norms", (n,), f["means"])
        # Dense mode adds each block's D x D scatter: there the product, not the cache,
        # sets the cost, so the whole batch is one block (fewer updates of the D x D sums).
        rows = max(n, 1) if dense else _block_rows(d)
        dev_buf = scratch("deviations", (min(rows, n), d), f["means"])
        means_buf = scratch("gathered", (min(rows, n), d), f["means"])
        splits = (h.split(rows), y.split(rows), prod.split(rows), dev_norm.split(rows))
        for hb, yb, prod_b, norm_b in zip(*splits, strict=True):
            dev = _deviations(hb, f["means"], yb, dev_buf, means_buf)
            torch.linalg.vector_norm(dev, dim=1, out=norm_b)
            if fused.shape[1]:
                torch.mm(dev, fused, out=prod_b)
            if dense:
                _add_weighted_gram(p["within"], dev, f["sample_weight"][yb])
        p["counts"] += torch.bincount(y, minlength=c)
        p["dev_sq"].index_add_(0, y, dev_norm * dev_norm)
        r = f["basis"].shape[1] if self.mode == "projected" else 0
        proj = prod[:, :r]
        if not dense:
            _add_weighted_gram(p["within"], proj, f["sample_weight"][y])
        if not self.ncc and "W" not in f:
            return
        k = c if self.ncc and not f["ncc_in_span"] else 0
        if self.ncc:
            dots = proj @ f["ncc_coef"] if f["ncc_in_span"] else prod[:, r : r + c]
            ncc_scores = f["ncc_sq"] - 2.0 * (dots + f["ncc_const"][y])
            ncc_tol = f["ncc_tol"] * (dev_norm + f["ncc_offset"][y]) + f["ncc_tol0"]
            if f["ncc_in_span"]:
                ncc_tol = ncc_tol + f["ncc_resid_tol"] * dev_norm
            ncc = _decide(
                ncc_scores,
                ncc_tol,
                lambda i: nearest_class_mean(h[i].to(torch.float64), f["ncc_means"]),
                largest=False,
            )
            p["ncc_confusion"] += _confusion(y, ncc, c)
        if "W" in f:
            clf_scores = prod[:, r + k :] + f["clf_const"][y]
            clf_tol = f["clf_tol"] * (dev_norm + f["mean_norm"][y]) + f["clf_tol0"]
            pred = _decide(
                clf_scores,
                clf_tol,
                lambda i: torch.argmax(h[i].to(torch.float64) @ f["W"].T + f["b"], dim=1),
                largest=True,
            )
            p["clf_confusion"] += _confusion(y, pred, c)
            if self.ncc:
                p["mismatch"] += torch.bincount(y[pred != ncc], minlength=c)

    # ------------------------------------------------------------------ merging
    def shard(self) -> ClassStats:
        """An empty partner in the current pass: the same settings and (in pass 2) the same
        fixed means, basis and classifier, with zero sums. Feed it part of the pass's data
        (on another thread, say), then :meth:`merge` it into this object.

        The fixed state is shared, not copied (neither side changes it); pass 2's shard
        keeps this object's pass-1 sums only for reading.
        """
        other = copy.copy(self)
        if self.phase == "means":
            other._p1 = {key: torch.zeros_like(value) for key, value in self._p1.items()}
        else:
            other._p2 = {key: torch.zeros_like(value) for key, value in self._p2.items()}
        return other

    def state(self) -> dict[str, torch.Tensor]:
        """The sums of the current pass: pass 1 ``counts``, ``sums``, ``sq_norms``; pass 2
        ``counts``, ``dev_sq``, ``within`` and the decision counts (see the class docstring).

        :meth:`all_reduce` (one generic reduction, :func:`collapselab.stats.all_reduce`)
        sums them over processes: call it once at the end of pass 1, before
        :meth:`finalize_means`, and once at the end of pass 2.
        """
        return self._p1 if self.phase == "means" else self._p2

    def merge(self, other: ClassStats) -> ClassStats:
        """Add ``other``'s partial sums (same phase, classes, requested weighting; same fixed
        means and resolved weighting in pass 2) to this object in place and return it."""
        if not isinstance(other, ClassStats):
            raise TypeError(f"other must be a ClassStats, got {type(other).__name__}")
        ours, theirs = ((s.n_classes, s.requested_weighting, s.weighting) for s in (self, other))
        if ours != theirs:
            raise ValueError(
                "cannot merge ClassStats with different n_classes or weighting: "
                f"(n_classes, requested, resolved weighting) {theirs} into {ours}"
            )
        if other.phase != self.phase:
            raise ValueError(f"cannot merge a {other.phase!r}-phase into a {self.phase!r}-phase")
        if other.dim is None:
            return self
        if self.dim is None:
            self._init_pass1(other.dim, other.device or torch.device("cpu"))
        if other.dim != self.dim:
            raise ValueError(f"cannot merge dimension {other.dim} into dimension {self.dim}")
        if self.phase == "scatter":
            same = (
                other.mode == self.mode
                and torch.equal(other._fixed["means"].to(self.device), self._fixed["means"])
                and self._p2.keys() == other._p2.keys()
            )
            if not same:
                raise ValueError(
                    "pass-2 statistics merge only with the same fixed means, mode and "
                    "classifier; merge pass 1 first, then finalize once"
                )
        mine = self.state()
        for key, value in other.state().items():
            mine[key] += value.to(self.device)
        return self

    # ------------------------------------------------------------------ results
    def _need_means(self) -> dict[str, Any]:
        if self.phase != "scatter":
            raise RuntimeError("class means are not final; call finalize_means() first")
        return self._fixed

    def _need_pass2(self) -> dict[str, torch.Tensor]:
        self._need_means()
        seen, want = self._p2["counts"], self._p1["counts"]
        if not torch.equal(seen, want):
            raise RuntimeError(
                f"pass 2 saw {int(seen.sum())} samples but pass 1 saw {int(want.sum())} "
                f"(per class {seen.tolist()} vs {want.tolist()}); feed the same data to "
                "update_scatter() (and all_reduce() under torch.distributed)"
            )
        return self._p2

    @property
    def pass2_complete(self) -> bool:
        """Whether pass 2 has seen exactly the samples of pass 1."""
        return self.phase == "scatter" and torch.equal(self._p2["counts"], self._p1["counts"])

    @property
    def counts(self) -> torch.Tensor:
        """Samples per class ``n_c``, shape ``(C,)``, int64."""
        if not self._p1:
            raise RuntimeError("no features were seen")
        return self._p1["counts"]

    @property
    def n_samples(self) -> int:
        """Total number of samples ``N``."""
        return int(self.counts.sum())

    @property
    def is_balanced(self) -> bool:
        """Whether every class has the same number of samples (classes without any ignored)."""
        return counts_balanced(self.counts)

    @property
    def class_weights(self) -> torch.Tensor:
        """Class weights ``pi_c``, shape ``(C,)``, summing to one."""
        return self._need_means()["pi"]

    @property
    def means(self) -> torch.Tensor:
        """Class means ``mu_c`` as rows, shape ``(C, D)``."""
        return self._need_means()["means"]

    @property
    def global_mean(self) -> torch.Tensor:
        """``mu_G = sum_c pi_c mu_c``, shape ``(D,)``."""
        return self._need_means()["global_mean"]

    @property
    def centred_means(self) -> torch.Tensor:
        """Centred means ``mu_c - mu_G`` as rows, shape ``(C, D)`` (this is ``M̄^T``)."""
        return self._need_means()["centred"]

    @property
    def ncc_means(self) -> torch.Tensor:
        """The means used for nearest-class-mean decisions in pass 2, ``(C, D)``."""
        return self._need_means()["ncc_means"]

    @property
    def basis(self) -> torch.Tensor:
        """Orthonormal basis ``P`` of ``range(M̄)``, shape ``(D, r)``, ``r <= C - 1``."""
        return self._need_means()["basis"]

    @property
    def between_rank(self) -> int:
        """``r = rank M̄``: the number of columns of :attr:`basis` (0 when the means coincide)."""
        return int(self.basis.shape[1])

    @property
    def between_singular_values(self) -> torch.Tensor:
        """Nonzero singular values ``s`` of ``M̄ diag(sqrt(pi))``: ``Sigma_B = P diag(s^2) P^T``."""
        return self._need_means()["svals"]

    @property
    def between_trace(self) -> float:
        """``Tr Sigma_B = sum_c pi_c ||mu_c - mu_G||^2``."""
        centred = self.centred_means
        return float(self.class_weights @ (centred * centred).sum(dim=1))

    @property
    def class_variances(self) -> torch.Tensor:
        """``sigma_c^2 = (1/n_c) sum_{i in c} ||h_i - mu_c||^2``, shape ``(C,)``.

        From pass 2 (deviations from the fixed means) once pass 2 is complete; before
        that, from pass 1 as ``(1/n_c) sum ||h_i||^2 - ||mu_c||^2``, which loses relative
        accuracy through cancellation when the variance is small against ``||mu_c||^2``.
        """
        n = self.counts.to(torch.float64)
        if self.pass2_complete:
            return self._p2["dev_sq"] / n
        if not self.norms:
            raise RuntimeError(
                "class variances need pass 2 (these statistics keep no pass-1 norms, "
                "ClassStats(norms=False))"
            )
        means = self.means
        return (self._p1["sq_norms"] / n - (means * means).sum(dim=1)).clamp_min(0.0)

    @property
    def within_trace(self) -> float:
        """``Tr Sigma_W = sum_c pi_c sigma_c^2``."""
        return float(self.class_weights @ self.class_variances)

    @property
    def within_cov(self) -> torch.Tensor:
        """The dense within-class covariance ``Sigma_W``, ``(D, D)`` (dense mode only)."""
        p2 = self._need_pass2()
        if self.mode != "dense":
            raise ValueError(
                f"the full within-class covariance (D x D, D={self.dim}) is not kept in "
                "projected mode; collect the statistics with mode='dense'"
            )
        return p2["within"]

    @property
    def within_projected(self) -> torch.Tensor:
        """``P^T Sigma_W P``, shape ``(r, r)``: the within-class covariance on ``range(M̄)``."""
        p2 = self._need_pass2()
        if self.mode == "dense":
            basis = self.basis
            return basis.T @ p2["within"] @ basis
        return p2["within"]

    @property
    def ncc_confusion(self) -> torch.Tensor:
        """``(C, C)`` counts: row = true label, column = nearest-class-mean decision."""
        return self._need_decisions("ncc_confusion")

    @property
    def has_classifier(self) -> bool:
        """Whether a classifier ``W`` was given to :meth:`finalize_means`."""
        return self.phase == "scatter" and "W" in self._fixed

    @property
    def classifier(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The classifier ``(W, b)`` given to :meth:`finalize_means`, float64."""
        if not self.has_classifier:
            raise ValueError("no classifier: pass W to finalize_means() before pass 2")
        return self._fixed["W"], self._fixed["b"]

    @property
    def classifier_confusion(self) -> torch.Tensor:
        """``(C, C)`` counts: row = true label, column = ``argmax(W h + b)``."""
        return self._need_classifier()["clf_confusion"]

    @property
    def mismatch_counts(self) -> torch.Tensor:
        """Per class: samples whose classifier decision differs from the NCC decision."""
        self._need_classifier()
        return self._need_decisions("mismatch")

    def _need_decisions(self, key: str) -> torch.Tensor:
        p2 = self._need_pass2()
        if not self.ncc:
            raise ValueError(
                "nearest-class-mean decisions were not counted (ClassStats(ncc=False))"
            )
        return p2[key]

    def _need_classifier(self) -> dict[str, torch.Tensor]:
        p2 = self._need_pass2()
        if "W" not in self._fixed:
            raise ValueError("no classifier: pass W to finalize_means() before pass 2")
        return p2


def _block_rows(dim: int) -> int:
    """Rows per block of :data:`_BLOCK_ENTRIES` entries of dimension ``dim`` per torch thread
    (each thread's share of a block stays in its core's cache), at least
    :data:`_MIN_BLOCK_ROWS` (the products of a block need some rows to run efficiently)."""
    entries = _BLOCK_ENTRIES * max(torch.get_num_threads(), 1)
    return max(entries // max(dim, 1), _MIN_BLOCK_ROWS)


def _deviations(
    h: torch.Tensor, means: torch.Tensor, y: torch.Tensor, out: torch.Tensor, gathered: torch.Tensor
) -> torch.Tensor:
    """``h - means[y]`` in float64, in the first rows of ``out`` (``gathered``: a buffer of
    at least as many rows): the exact conversion of ``h`` into ``out``, then the one
    rounding of the difference."""
    k = h.shape[0]
    means_y = torch.index_select(means, 0, y, out=_rows_of(gathered, k))
    out = _rows_of(out, k)
    if h.dtype == torch.float64:
        return torch.sub(h, means_y, out=out)
    return out.copy_(h).sub_(means_y)


def _rows_of(buf: torch.Tensor, k: int) -> torch.Tensor:
    """The first ``k`` rows of ``buf`` (``buf`` itself when it has ``k``: no view to make)."""
    return buf if buf.shape[0] == k else buf[:k]


def _row_sq_norms(x: torch.Tensor) -> torch.Tensor:
    """``||x_i||^2`` per row, as the square of ``torch.linalg.vector_norm``.

    The norm is a dedicated reduction that makes no temporary; ``vecdot`` and
    ``(x * x).sum(1)`` ran 2 to 10 times slower on long rows on CPU (benchmarks/README.md),
    and ``einsum("ij,ij->i")`` runs as a batched matrix product. Squaring the rounded norm
    adds at most two roundings (relative error below ``3 u``).
    """
    norms = torch.linalg.vector_norm(x, dim=1)
    return norms * norms


def _add_weighted_gram(acc: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> None:
    r"""``acc += x^T diag(weight) x`` for nonnegative row weights, exploiting symmetry.

    With ``a = diag(sqrt(weight)) x`` the product is ``a^T a``. For ``D >= 2 B``
    (``B = 128`` columns) only the block upper triangle is multiplied, one product per block
    row, and the strictly upper blocks are mirrored: ``(b + 1) / (2 b)`` of the
    multiply-adds of a full product for ``b`` blocks (62.5 % at ``D = 512``). PyTorch has
    no symmetric rank-k update (BLAS ``syrk``); NumPy's, called between torch operations,
    lost its gain to the two libraries' thread pools competing (benchmarks/README.md).
    """
    a = torch.mul(x, weight.sqrt().unsqueeze(1), out=scratch("weighted", tuple(x.shape), x))
    d = a.shape[1]
    if d < 2 * _GRAM_BLOCK:
        acc += a.T @ a
        return
    edges = torch.linspace(0, d, min(_GRAM_MAX_BLOCKS, d // _GRAM_BLOCK) + 1).round().long()
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        rows = a[:, lo:hi].T @ a[:, lo:]
        acc[lo:hi, lo:] += rows
        acc[hi:, lo:hi] += rows[:, hi - lo :].T


def _fused_constants(fixed: dict[str, Any], mode: str, ncc: bool) -> dict[str, Any]:
    """The matrix and per-class constants of the fused pass-2 product (see ``update_scatter``):
    the columns ``[P (projected mode), (nu - r)^T (with ncc), W^T (with a classifier)]``.

    When the nearest-class-mean references are the statistics' own class means and the
    scatter is projected, the ``C`` columns ``(nu - r)^T`` are not needed: every
    ``c_k = mu_k - r`` is a difference of class means, so it lies in ``range(M̄)``, the span of
    ``P``, and ``dev . c_k = (P^T dev) . (P^T c_k)``. The scores then come from the
    projection already computed (a ``C``-fold smaller product), and the tolerance of the
    re-decision grows by ``2 max_k ||c_k - P P^T c_k|| ||dev||`` (the part of ``c_k`` outside
    the numerical span of ``P``, zero but for rounding) and by a factor ``sqrt(r)`` for the
    two-stage product.

    The ``*_tol`` entries bound, per unit of row norm, twice the sum of the rounding errors
    of the fused and the documented score of a row (dot products of length ``D`` in float64
    err by at most ``D u |a|.|b|`` in any summation order, ``u = 2^-53``), times a safety
    factor: rows whose two best scores differ by more cannot change their decision.
    """
    ncc_means, means = fixed["ncc_means"], fixed["means"]
    d = means.shape[1]
    ref = ncc_means.mean(dim=0)
    centred = ncc_means - ref
    ncc_sq = (centred * centred).sum(dim=1)
    basis = fixed["basis"]
    in_span = ncc and mode == "projected" and fixed["own_ncc"]
    blocks = [centred.T] if ncc and not in_span else []
    if mode == "projected":
        blocks.insert(0, basis)
    unit = _TIE_SLACK * (d + 8) * _EPS / 2
    if in_span:
        unit *= math.sqrt(max(basis.shape[1], 1))
    c_max = float(centred.norm(dim=1).max())
    out: dict[str, Any] = {
        "ncc_in_span": in_span,
        "ncc_sq": ncc_sq,
        "ncc_const": (means - ref) @ centred.T,
        "ncc_offset": (means - ref).norm(dim=1),
        "ncc_tol": unit * 2.0 * c_max,
        "ncc_tol0": unit * c_max * c_max,
    }
    if in_span:
        coef = basis.T @ centred.T  # (r, C): P^T c_k
        resid = (centred.T - basis @ coef).norm(dim=0)
        out["ncc_coef"] = coef
        out["ncc_resid_tol"] = 2.0 * float(resid.max()) * (1.0 + _TIE_SLACK * _EPS)
    if "W" in fixed:
        w, b = fixed["W"], fixed["b"]
        blocks.append(w.T)
        w_max = float(w.norm(dim=1).max())
        out |= {
            "clf_const": means @ w.T + b,
            "mean_norm": means.norm(dim=1),
            "clf_tol": unit * w_max,
            "clf_tol0": unit * float(b.abs().max()),
        }
    fused = torch.cat(blocks, dim=1) if blocks else means.new_zeros(d, 0)
    out["fused"] = fused.contiguous()
    return out


def _decide(
    scores: torch.Tensor,
    tol: torch.Tensor,
    exact: Callable[[torch.Tensor], torch.Tensor],
    *,
    largest: bool,
) -> torch.Tensor:
    """Per row the index of the best score; rows whose two best scores lie within ``tol``
    (a possible tie under rounding) are decided again by ``exact(row_indices)``."""
    pick = torch.argmax(scores, dim=1) if largest else torch.argmin(scores, dim=1)
    top = torch.topk(scores, 2, dim=1, largest=largest).values
    close = torch.nonzero((top[:, 0] - top[:, 1]).abs() <= tol).flatten()
    if close.numel():
        pick[close] = exact(close)
    return pick


def _confusion(labels: torch.Tensor, decisions: torch.Tensor, c: int) -> torch.Tensor:
    return torch.bincount(labels * c + decisions, minlength=c * c).view(c, c)


def _range_basis(
    centred: torch.Tensor, pi: torch.Tensor, means: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Orthonormal basis of ``range(M̄)`` and the nonzero singular values of ``M̄ diag(sqrt pi)``.

    The rank is the number of singular values above ``s_max * max(D, C) * eps`` (numpy's
    ``matrix_rank`` rule), capped at ``C - 1``; all of them count as zero when ``s_max`` is
    at the rounding level of the means themselves (zero between-class scatter), giving
    ``r = 0``. Columns get a canonical sign (largest-magnitude entry positive) so that
    every process of a distributed run derives the same basis from the same means.
    """
    c, d = centred.shape
    u, s, _ = torch.linalg.svd(centred.T * pi.sqrt(), full_matrices=False)
    scale = float(means.norm(dim=1).max())
    if s.numel() == 0 or float(s[0]) <= 8 * max(c, d) * _EPS * scale:
        return u[:, :0], s[:0]
    r = min(int((s > s[0] * max(c, d) * _EPS).sum()), c - 1)
    u = u[:, :r]
    pivot = u.abs().argmax(dim=0)
    signs = torch.sign(u[pivot, torch.arange(r, device=u.device)])
    return u * signs, s[:r]


def class_stats_from_features(
    features: object,
    labels: object,
    n_classes: int,
    *,
    chunk_size: int | None = None,
    min_count: int = 2,
    **kwargs: Any,
) -> ClassStats:
    """Both passes of :class:`ClassStats` over an in-memory ``(N, D)`` feature matrix.

    The rows are fed in chunks of ``chunk_size`` so that the float64 copies stay small;
    the default (:func:`default_chunk_size`) makes a float64 chunk 4 to 64 MiB whatever
    ``D`` (a fixed row count would be 2 GiB per copy at ``D = 32768``).
    ``min_count`` is passed to :meth:`ClassStats.finalize_means`; the other keyword
    arguments are those of :func:`class_stats_from_batches`.
    """
    h = check_features(features, "features")
    chunk_size = default_chunk_size(h.shape[1], chunk_size)
    y = check_labels("labels", labels, h.shape[0], check_int("n_classes", n_classes, minimum=2))
    chunks = [(h[i : i + chunk_size], y[i : i + chunk_size]) for i in range(0, len(y), chunk_size)]
    return class_stats_from_batches(chunks, n_classes, min_count=min_count, **kwargs)


def default_chunk_size(
    dim: int, chunk_size: int | None = None, chunk_bytes: int = 8 * DEFAULT_CHUNK_ENTRIES
) -> int:
    """``chunk_size`` checked (an integer >= 1), or for ``None`` the default row count.

    The default keeps a float64 chunk near ``chunk_bytes`` (4 MiB, :data:`DEFAULT_CHUNK_ENTRIES`
    entries, so the element-wise updates work in cache) but takes at least
    :data:`_MIN_CHUNK_ROWS` rows while those stay within :data:`_MAX_CHUNK_ENTRIES`
    (64 MiB): the per-chunk matrix products need some rows to run efficiently.
    ``max(2**19 // D, min(64, 2**23 // D), 1)``: 1024 rows at ``D = 512``, 64 at
    ``D = 32768``, 8 at ``D = 2**20``.
    """
    if chunk_size is None:
        d = max(1, dim)
        return max(chunk_bytes // (8 * d), min(_MIN_CHUNK_ROWS, _MAX_CHUNK_ENTRIES // d), 1)
    return check_int("chunk_size", chunk_size, minimum=1)


SAFE_MAGNITUDE = (2.0**-400, 2.0**400)
"""Largest entries of features whose squares and products stay well within float64's range."""


def largest_magnitude(block: torch.Tensor) -> float:
    """``max |x|`` over the entries of ``block`` (0 when it is empty): ``aminmax``, one pass
    and no temporary (``block.abs().max()`` is 10 times slower)."""
    if not block.numel():
        return 0.0
    low, high = torch.aminmax(block)
    return max(-float(low), float(high))


def power_of_two_scale(peak: float) -> float:
    """The exact factor that brings features with largest entry ``peak`` into float64's safe
    range, for statistics whose metrics do not depend on the features' scale.

    1 for ``peak`` within :data:`SAFE_MAGNITUDE` (or 0, or not finite), else the power of two
    that brings it into ``[0.5, 1)``; for a subnormal peak (below 2^-1022) 2^1023, the largest
    power of two, which brings it to at least 2^-51. A power of two changes no mantissa, so
    the rescaled features give the same scale-invariant metrics, without their squares
    under- or overflowing.
    """
    low, high = SAFE_MAGNITUDE
    if peak == 0.0 or not math.isfinite(peak) or low <= peak <= high:
        return 1.0
    return math.ldexp(1.0, min(-math.frexp(peak)[1], 1023))


def class_stats_from_batches(
    batches: Iterable[Any] | Callable[[], Iterable[Any]],
    n_classes: int,
    *,
    weighting: str = "auto",
    mode: str = "auto",
    dense_max_dim: int = DENSE_MAX_DIM,
    ncc_means: object | None = None,
    W: object | None = None,
    b: object | None = None,
    device: torch.device | str | None = None,
    min_count: int = 2,
    warn_imbalanced: bool = True,
    ncc: bool = True,
) -> ClassStats:
    """Both passes of :class:`ClassStats` over ``(features, labels)`` batches.

    Args:
        batches: a re-iterable collection (list, DataLoader) of ``(features, labels)`` pairs,
            or a zero-argument callable returning a fresh iterable (it is called twice).
        n_classes, weighting, mode, dense_max_dim, device, warn_imbalanced, ncc: as for
            :class:`ClassStats`.
        ncc_means, W, b, min_count: as for :meth:`ClassStats.finalize_means`.

    Returns:
        A :class:`ClassStats` with both passes done (single process; no all-reduce).
    """
    stats = ClassStats(
        n_classes,
        weighting=weighting,
        mode=mode,
        dense_max_dim=dense_max_dim,
        device=device,
        warn_imbalanced=warn_imbalanced,
        ncc=ncc,
    )

    def fresh() -> Iterable[Any]:
        return batches() if callable(batches) else batches

    if not callable(batches) and iter(batches) is batches:
        raise TypeError(
            "batches must be re-iterable (a list or DataLoader) or a zero-argument callable "
            "returning a fresh iterable; a one-shot iterator cannot feed both passes"
        )

    for h, y in fresh():
        stats.update_means(h, y)
    stats.finalize_means(ncc_means=ncc_means, W=W, b=b, min_count=min_count)
    for h, y in fresh():
        stats.update_scatter(h, y)
    stats._need_pass2()
    return stats
