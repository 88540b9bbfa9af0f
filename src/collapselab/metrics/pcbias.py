r"""The PC-bias and learning-order metrics of paper 002 (note 002 §2.3-2.6, R22-R30).

Pure math: arrays (numpy or torch) in, numbers or float64 arrays out. The principal frame
is :mod:`collapselab.metrics.pc_frame`; the model side (the compact matrix, the
gradient-scale matrices) lives in :mod:`collapselab.theory.pcbias`, and these functions take
what it produces.

Conventions and the decisions note 002 §7 leaves open (docs/catalogue.md, "pcbias"):

* **Layout.** The compact matrix in the PC frame is ``W̃ = W U`` of shape ``(K, q)``:
  column ``j`` (a ``K``-vector) belongs to principal direction ``j``, row ``r`` is the
  one-vs-all hyperplane of class ``r``. An ensemble over epochs is ``(E, N, K, q)``
  (epochs, members). Correctness arrays are ``(N, E, n)`` (networks, epochs, examples).
* **Per-PC distance and std (R22, §7.15).** The default reduces a column by its Euclidean
  norm, ``‖w̃_j - w̃_j^{opt}‖_2`` and ``‖std_i(w̃_j)‖_2`` (the root of the total variance of
  the column); ``row=r`` gives Fig. 4's ``|W̃_{rj} - W̃^{opt}_{rj}|`` and ``std_i W̃_{rj}``.
  Distances are averaged over members, stds use ``ddof = 1``. Under Eq. 10 both decay
  exactly as ``|λ_j|^s`` in either reduction.
* **Gradient-scale statistics (R23, §7.7).** Means and stds are over the entries of one
  matrix (the diagonal, or the off-diagonal entries); the std across networks is the
  caller's (stack the statistics of each network). The reference scale is Thm 3's
  ``α_l, β_l`` at initialisation when given, the per-epoch scalar part ``tr A_l / K``
  (``reference="trace"``), or none (statistics of the diagonal itself).
* **Fastest x% (R25, §7.16).** :func:`loc_correlation` ranks the examples by the first
  ensemble's accessibility (``rank_by="a"``, the default; the second ensemble then tests
  whether it agrees on them) or by the mean of the two (``rank_by="mean"``, symmetric in
  the two but biased downwards by selecting on their sum); the ``ceil(x n)`` highest are
  kept, ties at the cut broken by the lower example index (``ties="index"``, exactly
  ``ceil(x n)`` kept) or all kept (``ties="include"``).
* **Critical PC / frequency (R26-R27, §7.18).** "Correct for all ``P' >= P``" over the
  scanned grid (``rule="all_above"``, the default) or the first correct ``P``
  (``rule="first"``); never correct at the largest ``P``: sentinel ``q + 1`` (``m + 1``
  terms for the frequency). The classifier is least squares on one-hot targets in the
  paper's uncentred frame (no bias) unless ``center=True`` or a classifier is given.
* **Discriminability (R28, §7.19).** Euclidean k-NN among the reference set (the examples
  themselves, the example excluded), neighbour ties broken by the lower index.
* **Binned correlation (R29, §7.17).** Examples grouped by their (integer or discrete)
  score; per group the mean and standard error ``std(ddof=1)/sqrt(count)`` of the value;
  the group means smoothed by a centred moving average of ``width`` groups (truncated at
  the ends); Pearson and Spearman of score against the smoothed means.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from collapselab.checks import (
    ArgumentTypeError,
    as_label_array,
    as_real_array,
    check_choice,
    check_float,
    check_int,
)
from collapselab.data.frequency import PAPER_KAPPA, PAPER_PHI, frequency_partial_sums
from collapselab.metrics.pc_frame import principal_frame

__all__ = [
    "BinnedCorrelation",
    "Correlation",
    "ScaleStatistics",
    "accessibility",
    "bin_pc_index",
    "binned_correlation",
    "checkpoint_weights",
    "convergence_epoch",
    "correlation",
    "critical_frequency",
    "critical_principal_component",
    "discriminability",
    "early_stopping_benefit",
    "fastest_subset",
    "gradient_scale_statistics",
    "loc_correlation",
    "moving_average",
    "pc_distance",
    "pc_ensemble_std",
    "scale_matrix_statistics",
]

RULES = ("all_above", "first")
"""How a critical index is read from the per-P correctness (R26): the smallest ``P`` with
every ``P' >= P`` correct, or the first correct ``P``."""


# ---------------------------------------------------------------------------------------
# R22: per-PC convergence


def _ensemble(name: str, w: object, q: int | None = None) -> np.ndarray:
    a = as_real_array(name, w, ndim=4, layout="(E, N, K, q)")
    if q is not None and a.shape[-1] != q:
        raise ValueError(f"{name} has {a.shape[-1]} PCs (last axis) but the optimum has {q}")
    return a


def _row(row: int | None, k: int) -> int | None:
    return None if row is None else check_int("row", row, minimum=0, maximum=k - 1)


def pc_distance(compact_pc: object, optimum_pc: object, row: int | None = None) -> np.ndarray:
    r"""Distance to the optimum per PC, ``(E, q)`` (R22; Fig. 4 top, Eq. 10).

    .. math::

        \text{column (default):}\quad
        \mathrm{dist}_j^s = \frac1N \sum_{i=1}^{N} \lVert \tilde w_j^{s,(i)} -
        \tilde w_j^{opt}\rVert_2, \qquad
        \text{row } r:\quad \frac1N \sum_i \lvert \tilde W^{s,(i)}_{rj} -
        \tilde W^{opt}_{rj}\rvert .

    Args:
        compact_pc: ``W̃ = W U`` of every member at every epoch, ``(E, N, K, q)``
            (``N = 1`` allowed).
        optimum_pc: ``W̃_opt`` in the same frame, ``(K, q)``
            (:meth:`collapselab.metrics.pc_frame.PCFrame.optimum`).
        row: a class row ``r`` for the paper's Fig. 4 variant, else the column norm.
    """
    opt = as_real_array("optimum_pc", optimum_pc, ndim=2, layout="(K, q)")
    w = _ensemble("compact_pc", compact_pc, opt.shape[1])
    if w.shape[2] != opt.shape[0]:
        raise ValueError(f"compact_pc has {w.shape[2]} rows (K) but optimum_pc has {opt.shape[0]}")
    diff = w - opt
    r = _row(row, opt.shape[0])
    per_member = np.abs(diff[:, :, r, :]) if r is not None else np.linalg.norm(diff, axis=2)
    return per_member.mean(axis=1)


def pc_ensemble_std(compact_pc: object, row: int | None = None, ddof: int = 1) -> np.ndarray:
    r"""Across-member std per PC, ``(E, q)`` (R22; Fig. 2, Fig. 4 bottom):

    .. math::

        \text{column (default):}\quad \Big(\sum_{k=1}^{K}
        \operatorname{std}_i\big(\tilde W^{s,(i)}_{kj}\big)^2\Big)^{1/2}, \qquad
        \text{row } r:\quad \operatorname{std}_i\big(\tilde W^{s,(i)}_{rj}\big),

    with ``ddof`` (default 1). Needs ``N >= 2`` members (``N > ddof``).
    """
    w = _ensemble("compact_pc", compact_pc)
    ddof = check_int("ddof", ddof, minimum=0)
    if w.shape[1] < 2 or w.shape[1] <= ddof:
        raise ValueError(
            f"compact_pc must hold an ensemble of N >= 2 members (N > ddof={ddof}) for a std, "
            f"got N = {w.shape[1]} (shape {w.shape}, axes (E, N, K, q))"
        )
    var = w.var(axis=1, ddof=ddof)  # (E, K, q)
    r = _row(row, w.shape[2])
    return np.sqrt(var[:, r, :]) if r is not None else np.sqrt(var.sum(axis=1))


def bin_pc_index(values: object, bins: int | Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    r"""Average ``values`` ``(..., q)`` over contiguous bins of the PC index.

    ``bins`` is a number ``B`` of equal-width bins (edges ``round(b q / B)``, so every bin
    holds ``floor(q/B)`` or ``ceil(q/B)`` PCs) or integer edges
    ``0 = e_0 < e_1 < ... < e_B = q`` (e.g. geometric, for many PCs). Bin ``b`` is the mean
    of PCs ``e_b <= j < e_{b+1}`` (0-based). Returns ``(binned (..., B), edges (B + 1,))``.
    """
    v = as_real_array("values", values)
    if v.ndim < 1:
        raise ValueError("values must have the PC index as its last axis, got a scalar")
    q = v.shape[-1]
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        b = check_int("bins", bins, minimum=1, maximum=q)
        edges = np.round(np.arange(b + 1) * q / b).astype(np.int64)
    else:
        edges = np.asarray(bins)
        if edges.ndim != 1 or edges.dtype.kind not in "iu" or len(edges) < 2:
            raise ArgumentTypeError(f"bins must be an int or 1-D integer edges, got {bins!r}")
        if edges[0] != 0 or edges[-1] != q or (np.diff(edges) <= 0).any():
            raise ValueError(
                f"bins edges must increase strictly from 0 to q = {q}, got {edges.tolist()}"
            )
    sums = np.add.reduceat(v, edges[:-1], axis=-1)
    return sums / np.diff(edges), edges


# ---------------------------------------------------------------------------------------
# R23: gradient-scale-matrix statistics


@dataclass(frozen=True)
class ScaleStatistics:
    r"""Entry statistics of gradient-scale matrices (Fig. 3), one value per layer.

    Attributes:
        diagonal_mean, diagonal_std: mean and std (``ddof = 0``, over the entries) of
            ``|M_ii - s|`` with reference scale ``s`` (or of ``M_ii`` itself without one).
        offdiagonal_mean, offdiagonal_std: mean and std of the off-diagonal entries
            ``M_ij, i != j`` (signed).
        offdiagonal_abs_mean: mean of ``|M_ij|``, ``i != j``.
        reference: the scale ``s`` used per layer (NaN where none).
    """

    diagonal_mean: np.ndarray
    diagonal_std: np.ndarray
    offdiagonal_mean: np.ndarray
    offdiagonal_std: np.ndarray
    offdiagonal_abs_mean: np.ndarray
    reference: np.ndarray


def scale_matrix_statistics(
    matrix: object, reference: float | str | None = None
) -> dict[str, float]:
    r"""Statistics of one square gradient-scale matrix ``M`` (``A_l`` or ``B_l``, Eq. 7).

    ``reference``: a number ``s`` (Thm 3's ``α_l`` or ``β_l``): the diagonal statistics are
    of ``|M_ii - s|``; ``"trace"``: ``s = tr M / dim`` (the per-epoch scalar part, the
    reading "α_l^s" of Fig. 3); ``None``: of ``M_ii`` itself. Off-diagonal statistics are
    over the ``dim (dim - 1)`` entries ``M_ij, i != j`` (NaN for ``dim = 1``). Returns
    the fields of :class:`ScaleStatistics` as floats.
    """
    m = as_real_array("matrix", matrix, ndim=2, layout="(dim, dim)")
    if m.shape[0] != m.shape[1]:
        raise ValueError(f"matrix must be square, got shape {m.shape}")
    diag = np.diag(m)
    if reference is None:
        s, dev = math.nan, diag
    else:
        if isinstance(reference, str):
            check_choice("reference", reference, ("trace",))
            s = float(diag.mean())
        else:
            s = check_float("reference", reference)
        dev = np.abs(diag - s)
    off = m[~np.eye(m.shape[0], dtype=bool)]
    nan = math.nan
    return {
        "diagonal_mean": float(dev.mean()),
        "diagonal_std": float(dev.std()),
        "offdiagonal_mean": float(off.mean()) if off.size else nan,
        "offdiagonal_std": float(off.std()) if off.size else nan,
        "offdiagonal_abs_mean": float(np.abs(off).mean()) if off.size else nan,
        "reference": s,
    }


def gradient_scale_statistics(
    matrices: Sequence[object], reference: Sequence[float] | str | None = None
) -> ScaleStatistics:
    r"""R23: :func:`scale_matrix_statistics` of each layer's matrix, stacked into ``(L,)``.

    Args:
        matrices: ``[A_1, ..., A_L]`` or ``[B_1, ..., B_L]``
            (:func:`collapselab.theory.pcbias.gradient_scale_matrices`).
        reference: per-layer scales (``α`` or ``β`` of
            :func:`collapselab.theory.pcbias.expected_scales`, length ``L``), ``"trace"``
            or ``None`` (see :func:`scale_matrix_statistics`).
    """
    if isinstance(matrices, np.ndarray) or not isinstance(matrices, Sequence) or not matrices:
        raise ArgumentTypeError("matrices must be a non-empty list [M_1, ..., M_L] of matrices")
    n = len(matrices)
    if reference is None or isinstance(reference, str):
        refs: list = [reference] * n
    else:
        r = as_real_array("reference", reference, ndim=1, numbers=True)
        if len(r) != n:
            raise ValueError(f"reference has {len(r)} scales but matrices has {n} layers")
        refs = [float(v) for v in r]
    rows = []
    for i, (mat, ref) in enumerate(zip(matrices, refs, strict=True)):
        try:
            rows.append(scale_matrix_statistics(mat, ref))
        except ValueError as err:
            raise type(err)(f"matrices[{i}]: {err}") from None
    return ScaleStatistics(**{f: np.array([r[f] for r in rows]) for f in rows[0]})


# ---------------------------------------------------------------------------------------
# R24-R25: accessibility and learning-order constancy


def accessibility(correct: object, weights: object | None = None) -> np.ndarray:
    r"""Accessibility of every example, ``(n,)`` in ``[0, 1]`` (R24; Hacohen et al. 2020):

    .. math::

        \mathrm{acc}(x) = \frac{1}{N E}\sum_{i=1}^{N}\sum_{e=1}^{E}
        \mathbf 1[f_i^e(x) = y(x)] ,

    from ``correct`` of shape ``(N, E, n)`` (networks, epoch checkpoints, examples) holding
    booleans or 0/1. Higher means learned earlier.

    ``weights`` ``(E,)`` (non-negative, not all zero): the number of epochs each checkpoint
    stands for, when the checkpoints are not every epoch (e.g. log-spaced GD steps, each
    held until the next: :func:`checkpoint_weights`); the mean over epochs is then
    ``Σ_e w_e 1[...] / (N Σ_e w_e)``, the formula above with checkpoint ``e`` repeated
    ``w_e`` times.
    """
    c = as_real_array("correct", correct, ndim=3, layout="(N, E, n)", allow_bool=True)
    if c.size and not np.isin(c, (0.0, 1.0)).all():
        raise ValueError("correct must hold booleans or 0/1 (correct or not), got other values")
    if c.shape[0] == 0 or c.shape[1] == 0:
        raise ValueError(f"correct needs >= 1 network and >= 1 epoch, got shape {c.shape}")
    if weights is None:
        return c.mean(axis=(0, 1))
    w = as_real_array("weights", weights, ndim=1, shape=(c.shape[1],), numbers=True)
    if np.any(w < 0) or not w.sum() > 0:
        raise ValueError(f"weights must be >= 0 and not all 0 (epochs per checkpoint), got {w}")
    return np.einsum("e,ien->n", w, c) / (c.shape[0] * w.sum())


def checkpoint_weights(steps: object, end: float) -> np.ndarray:
    """The number of epochs (steps) each checkpoint of ``steps`` (increasing) stands for when
    it is held until the next one and the last until ``end``: ``steps[k+1] − steps[k]``,
    ``end − steps[-1]``; the ``weights`` of :func:`accessibility` for a sparse grid."""
    s = as_real_array("steps", steps, ndim=1, numbers=True)
    if s.size == 0 or np.any(np.diff(s) <= 0) or not float(end) > s[-1]:
        raise ValueError(
            f"steps must be increasing and end ({end}) after the last of them, got {s}"
        )
    return np.diff(np.append(s, float(end)))


@dataclass(frozen=True)
class Correlation:
    """Pearson and Spearman correlation of two vectors, with two-sided p-values
    (scipy.stats; NaN where undefined: fewer than 3 points or a constant vector)."""

    pearson: float
    pearson_p: float
    spearman: float
    spearman_p: float
    n: int


def _pair(a: object, b: object, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    x = as_real_array(names[0], a, ndim=1, layout="(n,)", numbers=True, allow_bool=True)
    y = as_real_array(names[1], b, ndim=1, layout="(n,)", numbers=True, allow_bool=True)
    if len(x) != len(y):
        raise ValueError(
            f"{names[1]} has {len(y)} entries but {names[0]} has {len(x)}: one value per example"
        )
    return x, y


def correlation(a: object, b: object) -> Correlation:
    r"""R29: per-example Pearson ``r`` and Spearman ``ρ`` of ``a`` and ``b`` (both ``(n,)``),
    with scipy's two-sided p-values. Undefined cases (``n < 3``, a constant vector) give
    NaN, not an error: whitened ensembles and top-x% subsets can produce them (§7.16)."""
    x, y = _pair(a, b, ("a", "b"))
    nan = math.nan
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Correlation(nan, nan, nan, nan, len(x))
    # Imported here, not at the top: scipy.stats takes about 0.6 s to import, and every
    # `import collapselab` (the command line, each sweep worker's start) would pay it.
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = stats.pearsonr(x, y)
        s = stats.spearmanr(x, y)
    return Correlation(
        float(p.statistic), float(p.pvalue), float(s.statistic), float(s.pvalue), len(x)
    )


def fastest_subset(
    accessibility_a: object,
    accessibility_b: object | None = None,
    fraction: float = 0.2,
    ties: str = "index",
) -> np.ndarray:
    r"""Indices of the fastest-learned ``fraction`` of examples (R25; Fig. 7), sorted.

    Examples are ranked by the accessibility ``a`` or, with two ensembles, by
    ``(a + b) / 2`` (symmetric in the two). The ``k = ceil(fraction n)`` highest are kept;
    ``ties="index"``: ties at the cut go to the lower example index, so exactly ``k`` are
    kept; ``ties="include"``: every example tied with the ``k``-th is kept too.
    """
    a = as_real_array("accessibility_a", accessibility_a, ndim=1, layout="(n,)", numbers=True)
    if accessibility_b is not None:
        a, b = _pair(a, accessibility_b, ("accessibility_a", "accessibility_b"))
        a = (a + b) / 2.0
    frac = check_float("fraction", fraction, minimum=0.0, maximum=1.0, strict=True)
    ties = check_choice("ties", ties, ("index", "include"))
    n = len(a)
    if n == 0:
        raise ValueError("accessibility_a is empty: no examples to select from")
    k = max(1, math.ceil(frac * n - 1e-9))  # 1e-9: 0.2 * 10 is 2.0000000000000004
    order = np.lexsort((np.arange(n), -a))  # descending score, then ascending index
    if ties == "include":
        return np.flatnonzero(a >= a[order[k - 1]])
    return np.sort(order[:k])


RANK_BY = ("a", "mean")


def loc_correlation(
    accessibility_a: object,
    accessibility_b: object,
    fraction: float | None = None,
    ties: str = "index",
    rank_by: str = "a",
) -> Correlation:
    r"""Learning-order constancy (R25; Fig. 6a, Fig. 7): :func:`correlation` of two
    ensembles' accessibility vectors over the same examples, on all of them
    (``fraction=None``) or on the :func:`fastest_subset` of ``fraction`` (e.g. 0.2).

    The paper does not say how the fastest examples are chosen (note 002 §7, item 16).
    ``rank_by="a"`` (default) ranks them by the first ensemble alone, so the second one
    tests whether it agrees on them. ``rank_by="mean"`` ranks by ``(a + b) / 2``: selecting
    on the sum of the two variables being correlated biases their correlation inside the
    subset downwards (Berkson's paradox; for independent ensembles it is clearly negative,
    see the tests), which is why it is not the default.
    """
    a, b = _pair(accessibility_a, accessibility_b, ("accessibility_a", "accessibility_b"))
    if fraction is None:
        return correlation(a, b)
    rank_by = check_choice("rank_by", rank_by, RANK_BY)
    keep = fastest_subset(a, b if rank_by == "mean" else None, fraction, ties)
    return correlation(a[keep], b[keep])


# ---------------------------------------------------------------------------------------
# R26-R27: critical principal component and critical frequency


def _critical_index(correct: np.ndarray, grid: np.ndarray, sentinel: int, rule: str) -> np.ndarray:
    """``correct (n, G)`` at increasing grid values -> the critical grid value per row."""
    rule = check_choice("rule", rule, RULES)
    n, g = correct.shape
    if rule == "first":
        pos = np.where(correct.any(1), correct.argmax(1), g)
    else:
        # the smallest position after which every later one is correct
        wrong = ~correct
        last_wrong = np.where(wrong.any(1), g - 1 - wrong[:, ::-1].argmax(1), -1)
        pos = last_wrong + 1
    out = np.full(n, sentinel, dtype=np.int64)
    hit = pos < g
    out[hit] = grid[pos[hit]]
    return out


def _grid(grid: Sequence[int] | None, q: int) -> np.ndarray:
    if grid is None:
        return np.arange(1, q + 1)
    g = np.asarray(grid)
    if g.ndim != 1 or g.size == 0 or g.dtype.kind not in "iu":
        raise ArgumentTypeError(f"grid must be a non-empty 1-D sequence of ints, got {grid!r}")
    if (np.diff(g) <= 0).any() or g[0] < 1:
        raise ValueError(f"grid must increase strictly from >= 1, got {g.tolist()}")
    if g[-1] > q:
        raise ValueError(
            f"grid asks for P = {int(g[-1])} principal components but the data have "
            f"dimension q = {q}: P must be <= q"
        )
    return g.astype(np.int64)


def _least_squares(x: np.ndarray, onehot: np.ndarray) -> np.ndarray:
    """``W = Y^T X (X^T X)^+`` (R26's default classifier, no bias), shape ``(K, q)``."""
    return np.linalg.lstsq(x, onehot, rcond=None)[0].T


def critical_principal_component(
    x: object,
    y: object,
    n_classes: int | None = None,
    *,
    grid: Sequence[int] | None = None,
    rule: str = "all_above",
    center: bool = False,
    classifier: tuple[object, object | None] | None = None,
    evaluate: tuple[object, object] | None = None,
    block: int = 1 << 20,
) -> np.ndarray:
    r"""Critical principal component of every example (R26; Sec. 4.2, Fig. 6b).

    The PCs ``U`` come from the fit data ``x`` ``(n, q)``: eigenvectors of the uncentred
    :math:`X^T X` (the paper's frame; ``center=True``: of the centred scatter about the mean
    ``x̄``), descending. A linear classifier :math:`f(v) = \arg\max_k (W v + b)_k` (ties to
    the lowest class) is fitted on the full-dimensional data: least squares on one-hot
    targets, :math:`W = Y^T X (X^T X)^+` without bias (``center=True``: on centred data,
    with bias :math:`b = \bar y - W \bar x`), or the given ``classifier = (W (K, q), b)``.
    Each example is projected on the first ``P`` PCs,
    :math:`x_P = \bar x + U_P U_P^T (x - \bar x)` (``x̄ = 0`` uncentred), and

    .. math::

        \mathrm{cpc}(x) = \min\{P \in \text{grid} : f(x_{P'}) = y(x)\ \forall P' \in
        \text{grid}, P' \ge P\}

    (``rule="all_above"``; ``"first"``: the first ``P`` with ``f(x_P) = y``); ``q + 1``
    when ``f(x_P) != y`` at the largest ``P``. ``grid`` defaults to ``1..q``.

    Args:
        x, y: the fit data ``(n, q)`` and integer labels ``(n,)``.
        n_classes: ``K`` (default ``max(y) + 1``).
        evaluate: ``(x_eval, y_eval)`` to score other examples (default: ``x, y``).
        block: the largest ``examples x grid x K`` block held in memory at once.

    Returns:
        int64 ``(n_eval,)`` in the grid values or ``q + 1``.
    """
    xa = as_real_array("x", x, ndim=2, layout="(n, q)")
    ya = as_label_array("y", y, xa.shape[0], n_classes, source="x")
    k = int(n_classes) if n_classes is not None else int(ya.max()) + 1
    q = xa.shape[1]
    g = _grid(grid, q)
    rule = check_choice("rule", rule, RULES)
    block = check_int("block", block, minimum=1)
    mean = xa.mean(0) if center else np.zeros(q)
    xc = xa - mean
    onehot = np.eye(k)[ya]
    target = onehot - onehot.mean(0) if center else onehot
    basis = principal_frame(xc, target).basis  # eigenvectors of xc^T xc, descending
    if classifier is None:
        w = _least_squares(xc, target)
        b = onehot.mean(0) - w @ mean if center else np.zeros(k)
    else:
        if not isinstance(classifier, tuple) or len(classifier) != 2:
            raise ArgumentTypeError(
                f"classifier must be a tuple (W (K, q), b (K,) or None), got {type(classifier)}"
            )
        w = as_real_array("classifier[0]", classifier[0], ndim=2, shape=(k, q))
        b = (
            np.zeros(k)
            if classifier[1] is None
            else as_real_array("classifier[1]", classifier[1], ndim=1, shape=(k,))
        )
    if evaluate is None:
        xe, ye = xa, ya
    else:
        xe = as_real_array("evaluate[0]", evaluate[0], ndim=2, layout="(n, q)", shape=(None, q))
        ye = as_label_array("evaluate[1]", evaluate[1], xe.shape[0], k, source="evaluate[0]")
    w_pc = w @ basis  # (K, q): column j is the classifier's weight on PC j
    offset = w @ mean + b  # the scores of x̄ itself
    coords = (xe - mean) @ basis  # (n, q)
    correct = np.empty((len(xe), len(g)), dtype=bool)
    rows = max(1, block // max(1, q * k))
    for start in range(0, len(xe), rows):
        part = coords[start : start + rows]
        scores = np.cumsum(part[:, :, None] * w_pc.T[None], axis=1)[:, g - 1] + offset
        correct[start : start + rows] = scores.argmax(-1) == ye[start : start + rows, None]
    return _critical_index(correct, g, q + 1, rule)


def critical_frequency(
    x: object,
    y: object,
    kappa: Sequence[float] | None = None,
    phi: Sequence[float] | None = None,
    rule: str = "all_above",
) -> np.ndarray:
    r"""Critical frequency of every point of the frequency dataset (R27; Sec. 5.2, Fig. 8).

    With the dataset's rule ``y = 1[x_2 <= λ(x_1)]``
    (:func:`collapselab.data.frequency.frequency_dataset`) and the partial sums
    :math:`\lambda_j(z) = \sum_{i=1}^{j} \sin(2\pi\kappa_i z + \varphi_i)`, the classifier
    with ``j`` terms predicts :math:`\mathbf 1[x_2 \le \lambda_j(x_1)]`; the critical
    frequency is the smallest ``j`` whose classifier and every one with more terms is
    correct (``rule="all_above"``; ``"first"``: the first correct ``j``), ``m + 1`` if the
    full sum is wrong (a label not from this rule). Returned as the **number of terms**
    ``j`` in ``1..m``; the paper's Fig. 16 labels it by ``κ_j = kappa[j - 1]``, which for
    the paper's ``κ = (0, ..., 9)`` is ``j - 1``.

    Args:
        x: points ``(n, 2)``; y: labels ``(n,)`` in ``{0, 1}``.
        kappa, phi: the terms (default the paper's, :data:`collapselab.data.frequency.PAPER_KAPPA`).
    """
    xa = as_real_array("x", x, ndim=2, layout="(n, 2)", shape=(None, 2))
    ya = as_label_array("y", y, xa.shape[0], 2, source="x")
    k = np.asarray(PAPER_KAPPA if kappa is None else kappa, dtype=np.float64)
    p = np.asarray(PAPER_PHI if phi is None else phi, dtype=np.float64)
    if k.ndim != 1 or k.size == 0 or p.shape != k.shape:
        raise ValueError(
            f"kappa and phi must be 1-D of the same non-zero length, got {k.shape} and {p.shape}"
        )
    partial = frequency_partial_sums(xa[:, 0], k, p)  # (n, m)
    correct = (xa[:, 1:2] <= partial) == (ya[:, None] == 1)
    return _critical_index(correct, np.arange(1, k.size + 1), k.size + 1, rule)


# ---------------------------------------------------------------------------------------
# R28: discriminability


def _squared_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.maximum(d, 0.0)


def discriminability(
    features: object,
    labels: object,
    k: int = 10,
    reference: tuple[object, object] | None = None,
    block: int = 1 << 22,
) -> np.ndarray:
    r"""k-NN same-class fraction of every example, ``(n,)`` in ``{0, 1/k, ..., 1}`` (R28;
    Sec. 5.3, Fig. 8b, Table 1):

    .. math::

        \mathrm{disc}(x) = \frac1k\,\#\{x' \in \mathrm{kNN}(x) : y(x') = y(x)\},

    Euclidean distance, neighbour ties to the lower reference index. Without ``reference``
    the neighbours are the other examples of ``features`` (the example itself excluded);
    with ``reference = (ref_features, ref_labels)`` they are those (no exclusion).
    ``features`` ``(n, D)`` are raw inputs or any embedding (penultimate-layer features);
    ``(N, n, D)`` gives each network's embedding and returns the mean over the ``N``.
    """
    f = as_real_array("features", features)
    if f.ndim == 3:
        return np.mean([discriminability(e, labels, k, reference, block) for e in f], axis=0)
    if f.ndim != 2:
        raise ValueError(f"features must be (n, D) or (N, n, D), got shape {f.shape}")
    y = as_label_array("labels", labels, f.shape[0], source="features")
    if reference is None:
        ref, ref_y, self_excluded = f, y, True
    else:
        ref = as_real_array(
            "reference[0]", reference[0], ndim=2, layout="(m, D)", shape=(None, f.shape[1])
        )
        ref_y = as_label_array("reference[1]", reference[1], ref.shape[0], source="reference[0]")
        self_excluded = False
    available = ref.shape[0] - (1 if self_excluded else 0)
    k = check_int("k", k, minimum=1)
    if k > available:
        raise ValueError(f"k = {k} neighbours asked for but only {available} are available")
    rows = max(1, check_int("block", block, minimum=1) // max(1, ref.shape[0]))
    out = np.empty(f.shape[0])
    for start in range(0, f.shape[0], rows):
        d = _squared_distances(f[start : start + rows], ref)
        if self_excluded:
            d[np.arange(d.shape[0]), np.arange(start, start + d.shape[0])] = np.inf
        out[start : start + rows] = _same_class_fraction(d, ref_y, y[start : start + rows], k)
    return out


def _same_class_fraction(d: np.ndarray, ref_y: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """Per row of distances ``d`` ``(r, m)``: the share of the ``k`` nearest with label ``y``.

    The ``k`` nearest are every distance below the ``k``-th smallest plus, of those equal to
    it, the lowest indices (a stable sort's order) -- in O(m) per row, not a full sort."""
    kth = np.partition(d, k - 1, axis=1)[:, k - 1 : k]
    below = d < kth
    tied = d == kth
    room = k - below.sum(1, keepdims=True)
    chosen = below | (tied & (np.cumsum(tied, axis=1) <= room))
    return (chosen & (ref_y[None, :] == y[:, None])).sum(1) / k


# ---------------------------------------------------------------------------------------
# R29: binned correlation


@dataclass(frozen=True)
class BinnedCorrelation:
    """A value binned by a discrete score (Figs. 6b, 8): one entry per distinct score.

    Attributes:
        scores: the distinct score values, ascending, ``(G,)``.
        counts: examples per score.
        means, sems: mean and standard error ``std(ddof=1)/sqrt(count)`` of the value
            (SE NaN for a single example).
        smoothed: the means after the centred moving average of ``width`` groups.
        correlation: :class:`Correlation` of ``scores`` against ``smoothed``.
        width: the smoothing width.
    """

    scores: np.ndarray
    counts: np.ndarray
    means: np.ndarray
    sems: np.ndarray
    smoothed: np.ndarray
    correlation: Correlation
    width: int


def moving_average(values: object, width: int) -> np.ndarray:
    """Centred moving average of ``width`` entries (window ``[i - (w-1)//2, i + w//2]``),
    truncated at the ends (the mean of the entries that exist)."""
    v = as_real_array("values", values, ndim=1, numbers=True)
    w = check_int("width", width, minimum=1)
    lo, hi = (w - 1) // 2, w // 2
    csum = np.concatenate([[0.0], np.cumsum(v)])
    i = np.arange(len(v))
    a, b = np.maximum(i - lo, 0), np.minimum(i + hi + 1, len(v))
    return (csum[b] - csum[a]) / (b - a)


def binned_correlation(score: object, value: object, width: int = 10) -> BinnedCorrelation:
    r"""R29: ``value`` (e.g. accessibility) grouped by a discrete ``score`` (critical PC,
    critical frequency, discriminability), mean ± SE per score, the means smoothed by a
    centred moving average of ``width`` groups (Fig. 6b: 10), and the Pearson/Spearman
    correlation of the scores with the smoothed means (note 002 §7.17)."""
    s, v = _pair(score, value, ("score", "value"))
    if len(s) == 0:
        raise ValueError("score is empty: nothing to bin")
    scores, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=v) / counts
    sq = np.bincount(inverse, weights=(v - means[inverse]) ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(sq / np.maximum(counts - 1, 1))
        sems = np.where(counts > 1, sd / np.sqrt(counts), np.nan)
    smoothed = moving_average(means, width)
    return BinnedCorrelation(
        scores, counts, means, sems, smoothed, correlation(scores, smoothed), int(width)
    )


# ---------------------------------------------------------------------------------------
# R30: early stopping and convergence speed


def early_stopping_benefit(accuracy: object) -> tuple[float, int]:
    r"""R30 (Fig. 9): :math:`\max_e \mathrm{acc}(e) - \mathrm{acc}(E)` and the first epoch
    index ``e*`` (0-based position in ``accuracy`` ``(E,)``) attaining the maximum."""
    a = as_real_array("accuracy", accuracy, ndim=1, layout="(E,)", numbers=True)
    if len(a) == 0:
        raise ValueError("accuracy is empty: needs at least one epoch")
    best = int(a.argmax())
    return float(a[best] - a[-1]), best


def convergence_epoch(
    curve: object,
    threshold: float,
    direction: str = "above",
    epochs: object | None = None,
    interpolate: bool = False,
) -> np.ndarray:
    r"""R30: the first epoch at which ``curve`` ``(..., E)`` reaches ``threshold``,
    ``curve >= threshold`` (``direction="above"``, accuracy) or ``<=`` (``"below"``, loss),
    as a float array ``(...)``: the matching entry of ``epochs`` (default ``0..E-1``), NaN
    when never reached.

    ``interpolate``: on a sparse grid of checkpoints, the crossing of the straight line
    between the last checkpoint before the first hit, ``(e_{k-1}, c_{k-1})``, and the hit
    ``(e_k, c_k)``: ``e_{k-1} + (t − c_{k-1}) / (c_k − c_{k-1}) (e_k − e_{k-1})``, so two
    curves that cross between the same two checkpoints are still ordered (the first entry
    when it already reaches the threshold)."""
    c = as_real_array("curve", curve, numbers=True)
    if c.ndim < 1 or c.shape[-1] == 0:
        raise ValueError(f"curve must have epochs on its last axis, got shape {c.shape}")
    t = check_float("threshold", threshold)
    direction = check_choice("direction", direction, ("above", "below"))
    e = (
        np.arange(c.shape[-1], dtype=np.float64)
        if epochs is None
        else as_real_array("epochs", epochs, ndim=1, shape=(c.shape[-1],), numbers=True)
    )
    hit = c >= t if direction == "above" else c <= t
    first = hit.argmax(-1)
    found = np.where(hit.any(-1), e[first], np.nan)
    if not interpolate:
        return found
    before = np.maximum(first - 1, 0)
    c0 = np.take_along_axis(c, before[..., None], -1)[..., 0]
    c1 = np.take_along_axis(c, first[..., None], -1)[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = np.where(first > 0, (t - c0) / (c1 - c0), 0.0)
    return np.where(hit.any(-1), e[before] + fraction * (e[first] - e[before]), np.nan)
