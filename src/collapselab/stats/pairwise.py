r"""Per-class sums of unit vectors and of ReLU gating patterns (paper 000's diversity metrics).

The mean cosine similarity over every pair of samples in a class-structured pair set needs
no ``N x N`` Gram matrix: with ``u_i = x_i/||x_i||`` and per-class sums ``S_c = sum_{i in c} u_i``,
``sum_{i != j} <u_i, u_j> = ||S||^2 - sum_i ||u_i||^2`` over any set
(:mod:`collapselab.metrics._pairwise` turns the sums into the means). These accumulators keep
exactly those sums, so the metrics of a whole data set stream in ``O(N D)`` time and
``O(C D)`` memory and merge across batches and processes.

A vector whose norm is ``<= zero_atol`` has no direction (a dead ReLU layer gives all-zero
features): it is counted apart (``n_zero``) and adds nothing to the sums.

Several accumulators fed the same rows (the layers of one network) can be updated together
(:func:`update_stacked`): the blocks of equal shape are stacked into one ``(L, n, D)``
tensor and every step below runs once over the stack, with the same values bit for bit
(every step is row-wise or a row-by-row ``index_add_``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from collapselab.checks import ArrayLike, as_labels, as_matrix, check_float, check_int
from collapselab.stats.accumulator import Accumulator
from collapselab.stats.scratch import scratch, stacked_float64


def _unit_rows(x: torch.Tensor, zero_atol: float) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Rows (the last axis of ``x``, ``(n, D)`` or a stack ``(L, n, D)``) scaled to unit
    norm (zero rows stay zero), the mask of zero rows, and whether there is any."""
    norms = torch.linalg.vector_norm(x, dim=-1)
    zero = norms <= zero_atol
    # In a reused buffer: a fresh multi-MiB tensor per layer and measurement costs page
    # faults (see collapselab.stats.scratch); the caller consumes it at once.
    out = scratch("unit_rows", tuple(x.shape), x)
    u = torch.div(x, torch.where(zero, 1.0, norms).unsqueeze(-1), out=out)
    any_zero = bool(zero.any())
    if any_zero:  # rows under zero_atol, or whose norm underflowed: exactly zero
        u[zero] = 0.0
    return u, zero, any_zero


def _add_unit_sums(
    sums: dict[str, torch.Tensor], prefix: str, x: torch.Tensor, y: torch.Tensor, zero_atol: float
) -> None:
    """Add the unit rows of ``x`` to ``sums[prefix + "unit_sums" | "sq_norms" | "n_nonzero" |
    "n_zero"]`` per class ``y``: ``x (n, D)`` into sums ``(C, D)``, ``(C,)``, or a stack
    ``x (L, n, D)`` into stacked sums ``(L, C, D)``, ``(L, C)`` (the rows of every layer
    added in the same order: the same values as one layer at a time)."""
    axis = x.ndim - 2  # the rows' axis
    c = sums[prefix + "n_zero"].shape[-1]
    u, zero, any_zero = _unit_rows(x, zero_atol)
    sums[prefix + "unit_sums"].index_add_(axis, y, u)
    # The squared norms of the unit rows as computed (1 up to rounding), so that the pair
    # identity ||S||^2 - sum ||u||^2 cancels exactly for a single vector.
    squares = torch.mul(u, u, out=scratch("unit_squares", tuple(u.shape), u))
    sums[prefix + "sq_norms"].index_add_(axis, y, squares.sum(dim=-1))
    if not any_zero:  # the common case: one count, no masks
        sums[prefix + "n_nonzero"] += torch.bincount(y, minlength=c)
    elif axis == 0:
        sums[prefix + "n_nonzero"] += torch.bincount(y[~zero], minlength=c)
        sums[prefix + "n_zero"] += torch.bincount(y[zero], minlength=c)
    else:  # per layer of the stack: the same integer counts as bincount
        sums[prefix + "n_nonzero"].index_add_(axis, y, (~zero).to(torch.int64))
        sums[prefix + "n_zero"].index_add_(axis, y, zero.to(torch.int64))


def _unit_sum_tensors(
    prefix: str, c: int, d: int, device: torch.device, layers: tuple[int, ...] = ()
) -> dict[str, torch.Tensor]:
    """Zero sums of one accumulator, or of a stack of ``layers = (L,)`` accumulators."""
    f64 = {"dtype": torch.float64, "device": device}
    i64 = {"dtype": torch.int64, "device": device}
    return {
        prefix + "unit_sums": torch.zeros(*layers, c, d, **f64),
        prefix + "sq_norms": torch.zeros(*layers, c, **f64),
        prefix + "n_nonzero": torch.zeros(*layers, c, **i64),
        prefix + "n_zero": torch.zeros(*layers, c, **i64),
    }


class CosineSimilarityAccumulator(Accumulator):
    r"""Per-class sums of unit vectors, for mean pairwise cosine similarities.

    State, per class ``c``: ``unit_sums`` ``S_c = sum_{i in c} x_i/||x_i||`` ``(C, D)``,
    ``sq_norms`` ``sum ||u_i||^2`` ``(C,)``, the numbers of non-zero and zero vectors
    ``n_nonzero``, ``n_zero`` ``(C,)``. The means over cross-class, within-class and all
    pairs are :func:`collapselab.metrics.diversity.mean_cosine_similarity`.

    Args:
        n_classes: number of classes C (fixed, as a batch need not contain every class).
        zero_atol: a vector with norm ``<= zero_atol`` counts as zero.

    Example::

        acc = CosineSimilarityAccumulator(n_classes=10)
        for feats, y in batches:
            acc.update(feats, y)
        m2 = mean_cosine_similarity(acc).cross_class
    """

    settings = ("n_classes", "zero_atol")

    def __init__(self, n_classes: int, zero_atol: float = 0.0) -> None:
        super().__init__()
        self.n_classes = check_int("n_classes", n_classes, minimum=1)
        self.zero_atol = check_float("zero_atol", zero_atol, minimum=0.0)

    @property
    def dim(self) -> int | None:
        """Vector dimension D (None before the first update)."""
        return None if self.is_empty else int(self._sums["unit_sums"].shape[1])

    def update(self, vectors: ArrayLike, labels: ArrayLike) -> CosineSimilarityAccumulator:
        """Add a batch of vectors ``(B, D)`` with labels ``(B,)``; returns ``self``."""
        device = None if self.is_empty else self._sums["unit_sums"].device
        x = as_matrix("vectors", vectors, device)
        y, _ = as_labels("labels", labels, x.shape[0], self.n_classes, x.device)
        if self.is_empty:
            self._sums = _unit_sum_tensors("", self.n_classes, x.shape[1], x.device)
        elif x.shape[1] != self.dim:
            raise ValueError(
                f"vectors have dimension {x.shape[1]} but earlier batches had {self.dim}"
            )
        _add_unit_sums(self._sums, "", x, y, self.zero_atol)
        return self

    @property
    def stack(self) -> tuple[_UnitSumStack, int] | None:
        """``(stack, i)`` while this accumulator's sums are row ``i`` of the stacked sums of
        :func:`update_stacked` (views of them), else ``None``."""
        member = getattr(self, "_stack", None)
        if member is None or member[0].members[member[1]] is not self:
            return None
        if self._sums is not member[0].views[member[1]]:  # merged into while empty: own sums
            return None
        return member


class _UnitSumStack:
    """The stacked sums ``(L, C, D)``, ``(L, C)`` of ``L`` accumulators updated together;
    accumulator ``i``'s state is ``views[i]``, row ``i`` of every stacked tensor."""

    def __init__(self, members: list[CosineSimilarityAccumulator], d: int, device: torch.device):
        first = members[0]
        self.members = members
        self.sums = _unit_sum_tensors("", first.n_classes, d, device, (len(members),))
        self.views = [{k: v[i] for k, v in self.sums.items()} for i in range(len(members))]
        for i, acc in enumerate(members):
            acc._sums = self.views[i]
            acc._stack = (self, i)


def stacked_sums(accs: Sequence[CosineSimilarityAccumulator]) -> dict[str, torch.Tensor] | None:
    """The stacked sums ``(L, C, D)``, ``(L, C)`` of ``accs`` when they are, in this order,
    the members of one stack of :func:`update_stacked` (each one's state a row of it), else
    ``None``."""
    if not accs:
        return None
    first = accs[0].stack
    if first is None or first[0].members != list(accs):
        return None
    if any(acc.stack != (first[0], i) for i, acc in enumerate(accs)):
        return None
    return first[0].sums


def update_stacked(
    accs: Sequence[CosineSimilarityAccumulator], vectors: Sequence[torch.Tensor], labels: ArrayLike
) -> None:
    """``accs[i].update(vectors[i], labels)`` for every ``i``, with the same values bit for
    bit, in a few kernels over the stack ``(L, n, D)`` of the blocks.

    The stacked path needs accumulators with equal ``n_classes`` and ``zero_atol``, blocks
    of equal shape with finite entries, and accumulators that are all empty (their sums
    then become rows of one stacked tensor, :func:`stacked_sums`) or already one stack in
    this order; otherwise (or for fewer than two) each accumulator is updated on its own,
    which also raises the errors of :meth:`CosineSimilarityAccumulator.update`.

    Args:
        accs: the accumulators, one per layer.
        vectors: ``(n, D)`` blocks (any real or bool dtype), one per accumulator, the rows
            of the same samples.
        labels: ``(n,)`` the samples' labels.
    """
    if len(accs) != len(vectors):
        raise ValueError(f"got {len(vectors)} blocks of vectors for {len(accs)} accumulators")
    first = vectors[0] if vectors else None
    stacked = stacked_sums(accs)
    if (
        first is None
        or len(accs) < 2
        or first.ndim != 2
        or any(v.is_complex() for v in vectors)
        or any(v.shape != first.shape or v.device != first.device for v in vectors)
        or any((a.n_classes, a.zero_atol) != (accs[0].n_classes, accs[0].zero_atol) for a in accs)
        or (stacked is None and not all(a.is_empty for a in accs))
        or (stacked is not None and stacked["unit_sums"].shape[-1] != first.shape[1])
    ):
        for acc, v in zip(accs, vectors, strict=True):
            acc.update(v, labels)
        return
    device = first.device if stacked is None else stacked["unit_sums"].device
    x = stacked_float64("stacked_vectors", vectors)  # as as_matrix converts each
    if x.device != device or not bool(torch.isfinite(x.sum())):
        for acc, v in zip(accs, vectors, strict=True):
            acc.update(v, labels)  # the stack's device, or a layer's error, one at a time
        return
    head = accs[0]
    y, _ = as_labels("labels", labels, x.shape[1], head.n_classes, device)
    if stacked is None:
        stacked = _UnitSumStack(list(accs), x.shape[2], device).sums
    _add_unit_sums(stacked, "", x, y, head.zero_atol)


class GatingSimilarityAccumulator(Accumulator):
    r"""Per-class sums of ReLU gating patterns ``a in {0, 1}^h``.

    State: the unit-vector sums of the 0/1 patterns (as :class:`CosineSimilarityAccumulator`,
    keys prefixed ``cosine_``), and per class the sum of the patterns ``on_sums`` ``A_c``
    ``(C, h)``, the number of "on" entries ``on_counts`` and the sample count ``counts``.
    The means are :func:`collapselab.metrics.diversity.mean_gating_similarity`.

    Args:
        n_classes: number of classes C.
    """

    settings = ("n_classes",)

    def __init__(self, n_classes: int) -> None:
        super().__init__()
        self.n_classes = check_int("n_classes", n_classes, minimum=1)

    def update(self, gates: ArrayLike, labels: ArrayLike) -> GatingSimilarityAccumulator:
        """Add a batch of gating patterns ``(B, h)`` (0/1 or bool) with labels ``(B,)``."""
        device = None if self.is_empty else self._sums["on_sums"].device
        g = as_matrix("gates", gates, device)
        if not bool(((g == 0) | (g == 1)).all()):
            raise ValueError(
                "gates must hold only 0 and 1 (the ReLU gating pattern, e.g. preact > 0)"
            )
        y, _ = as_labels("labels", labels, g.shape[0], self.n_classes, g.device)
        c = self.n_classes
        if self.is_empty:
            f64 = {"dtype": torch.float64, "device": g.device}
            self._sums = _unit_sum_tensors("cosine_", c, g.shape[1], g.device) | {
                "on_sums": torch.zeros(c, g.shape[1], **f64),
                "on_counts": torch.zeros(c, **f64),
                "counts": torch.zeros(c, **f64),
            }
        elif g.shape[1] != self._sums["on_sums"].shape[1]:
            raise ValueError(
                f"gates have {g.shape[1]} units but earlier batches had "
                f"{self._sums['on_sums'].shape[1]}"
            )
        _add_unit_sums(self._sums, "cosine_", g, y, 0.0)
        self._sums["on_sums"].index_add_(0, y, g)
        self._sums["on_counts"].index_add_(0, y, g.sum(dim=1))
        self._sums["counts"] += torch.bincount(y, minlength=c).to(torch.float64)
        return self
