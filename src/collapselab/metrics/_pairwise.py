"""Mean pairwise inner products over class-structured pair sets, in O(N*D).

For vectors ``u_1..u_N`` with labels, the sum of inner products over ordered pairs
``i != j`` inside a set follows from the set's vector sum ``S`` and its squared norms:

    sum_{i != j} <u_i, u_j> = ||S||^2 - sum_i ||u_i||^2.

With per-class sums ``S_c`` the three pair sets of the diversity metrics are

    within class c : ||S_c||^2 - q_c                    over n_c (n_c - 1) pairs,
    all            : ||sum_c S_c||^2 - sum_c q_c        over N (N - 1) pairs,
    cross-class    : ||sum_c S_c||^2 - sum_c ||S_c||^2  over N^2 - sum_c n_c^2 pairs,

where ``q_c = sum_{i in c} ||u_i||^2``. Ordered pairs count each unordered pair twice in
numerator and denominator alike, so the means equal the means over unordered pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class PairDotSums:
    """Sums of ``<u_i, u_j>`` over ordered pairs ``i != j`` (float64 tensors); with a
    leading axis of ``L`` layers, ``(L, C)`` and ``(L,)``."""

    within: torch.Tensor  # (C,)
    cross: torch.Tensor  # ()
    all_pairs: torch.Tensor  # ()

    def __add__(self, other: PairDotSums) -> PairDotSums:
        return PairDotSums(
            self.within + other.within, self.cross + other.cross, self.all_pairs + other.all_pairs
        )

    def scaled(self, factor: float) -> PairDotSums:
        return PairDotSums(self.within * factor, self.cross * factor, self.all_pairs * factor)


def pair_dot_sums(sums: torch.Tensor, sq_norms: torch.Tensor) -> PairDotSums:
    """Pair sums from per-class vector sums ``(C, D)`` and squared-norm sums ``(C,)``, or
    from those of ``L`` layers at once, ``(L, C, D)`` and ``(L, C)`` (the same values)."""
    gram = sums @ sums.mT
    diag = torch.diagonal(gram, dim1=-2, dim2=-1)
    total = gram.sum(dim=(-2, -1))
    return PairDotSums(
        within=diag - sq_norms,
        cross=total - diag.sum(dim=-1),
        all_pairs=total - sq_norms.sum(dim=-1),
    )


def pair_counts(counts: torch.Tensor) -> PairDotSums:
    """Numbers of ordered pairs ``i != j`` in each pair set, from per-class counts ``(C,)``
    (or ``(L, C)``)."""
    n = counts.to(torch.float64)
    total = n.sum(dim=-1)
    within = n * (n - 1.0)
    return PairDotSums(
        within=within, cross=total * total - (n * n).sum(dim=-1), all_pairs=total * (total - 1.0)
    )


def _ratio(num: torch.Tensor, den: torch.Tensor) -> np.ndarray:
    """``num / den`` elementwise, NaN where there are no pairs (no division warning)."""
    num_np = np.atleast_1d(num.detach().cpu().numpy()).astype(np.float64)
    den_np = np.atleast_1d(den.detach().cpu().numpy()).astype(np.float64)
    out = np.full(num_np.shape, np.nan)
    ok = den_np > 0
    out[ok] = num_np[ok] / den_np[ok]
    return out


@dataclass(frozen=True)
class PairwiseSimilarity:
    """Mean pairwise similarity of samples over three pair sets (ordered pairs ``i != j``).

    Attributes:
        cross_class: mean over pairs of samples from different classes (paper 000, M2).
        within_class: the class average of ``per_class`` over classes with at least two
            counted samples (paper 000, M3 "class average").
        within_class_pooled: mean over all same-class pairs (classes weighted by their
            number of pairs).
        all_pairs: mean over all pairs.
        per_class: ``(C,)`` mean over the pairs inside each class; NaN for a class with
            fewer than two counted samples.
        counts: ``(C,)`` samples that entered the pair counts of each class.
        n_zero: zero vectors seen (all classes).
        n_excluded: zero vectors left out of the pairs (``n_zero`` under the ``"exclude"``
            rule, 0 under ``"zero_cosine"``).

    A value is NaN when its pair set is empty (e.g. ``cross_class`` with one class).
    """

    cross_class: float
    within_class: float
    within_class_pooled: float
    all_pairs: float
    per_class: np.ndarray
    counts: np.ndarray
    n_zero: int
    n_excluded: int

    def as_dict(self, prefix: str, per_class: bool = False) -> dict[str, float]:
        """Flat ``{prefix}_{set}`` entries for a metric table (per-class optional)."""
        out = {
            f"{prefix}_cross_class": self.cross_class,
            f"{prefix}_within_class": self.within_class,
            f"{prefix}_within_class_pooled": self.within_class_pooled,
            f"{prefix}_all": self.all_pairs,
        }
        if per_class:
            out.update(
                {f"{prefix}_within_class_{c}": float(v) for c, v in enumerate(self.per_class)}
            )
        return out


def similarity_from_sums(
    dots: PairDotSums, pairs: PairDotSums, counts: torch.Tensor, n_zero: int, n_excluded: int
) -> PairwiseSimilarity:
    """Divide pair sums by pair counts and package the result."""
    one = similarities_from_sums(dots, pairs, counts[None], [n_zero], [n_excluded], stacked=False)
    return one[0]


def similarities_from_sums(
    dots: PairDotSums,
    pairs: PairDotSums,
    counts: torch.Tensor,
    n_zero: list[int],
    n_excluded: list[int],
    *,
    stacked: bool = True,
) -> list[PairwiseSimilarity]:
    """:func:`similarity_from_sums` of ``L`` layers at once: ``dots`` and ``pairs`` of
    ``(L, C)`` and ``(L,)`` tensors (``stacked=False``: of one layer, ``(C,)`` and ``()``),
    ``counts (L, C)``; one result per layer, every ratio in one transfer."""

    # The per-class sums, then cross, pooled and all pairs, of every layer.
    def rows(p: PairDotSums) -> torch.Tensor:
        within = p.within if stacked else p.within[None]
        rest = [p.cross, within.sum(dim=-1) if stacked else p.within.sum(), p.all_pairs]
        return torch.cat([within, torch.stack(rest, dim=-1).reshape(within.shape[0], 3)], dim=-1)

    ratios = _ratio(rows(dots), rows(pairs)).reshape(counts.shape[0], -1)
    counts_np = counts.detach().cpu().numpy().astype(np.int64)
    out = []
    for i, row in enumerate(ratios):
        per_class, (cross, pooled, all_pairs) = row[:-3], row[-3:]
        defined = ~np.isnan(per_class)
        out.append(
            PairwiseSimilarity(
                cross_class=float(cross),
                within_class=float(per_class[defined].mean()) if defined.any() else float("nan"),
                within_class_pooled=float(pooled),
                all_pairs=float(all_pairs),
                per_class=per_class.copy(),
                counts=counts_np[i].copy(),
                n_zero=int(n_zero[i]),
                n_excluded=int(n_excluded[i]),
            )
        )
    return out
