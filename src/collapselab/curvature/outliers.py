r"""Counting the outliers of a spectrum: the one outlier rule of the library, and a count
above a threshold.

:func:`count_outliers` holds the library's one outlier rule, the largest resolved log-gap
among the first half of the sorted eigenvalues (its docstring gives the rule, why, and the
references); ``method="threshold"`` counts the values above a threshold instead (a
numerical rank). Every outlier count of the library, matrix-free (the curvature family)
or dense (paper 004's deep UFM, :mod:`collapselab.theory.dlufm_layerwise`), is this
function's.

A count is only as good as the eigenvalues it compares. Lanczos's convergence test
(:func:`~collapselab.curvature.eigen.top_eigenpairs`) bounds each residual by
``tol · λ_1``, so a returned value far below ``tol · λ_1`` is not resolved: any direction
of small enough curvature passes the test, and such values fall short of the true ones
(measured on a cross-entropy MLP's layer, at ``tol = 1e-3``: the 60th to 210th of the top
210 were 3 to 50 times too small, which put the largest log-gap at 59 or 86 where the
exact spectrum has none beyond 8 or 1). :func:`counted_spectrum` therefore computes the
top ``m`` eigenpairs for a count at ``tol`` and, while the smallest value the gap rule
reads, :math:`\lambda_{\lfloor m/2\rfloor+1}`, is below ``RESOLUTION_MARGIN · tol · λ_1``,
again at a finer tolerance,

.. math::
    \text{tol}' = \max\Big(\frac{\lambda_{\lfloor m/2\rfloor+1}}
        {\text{RESOLUTION\_MARGIN}\cdot\lambda_1},\ \frac{\text{tol}}{10},\
        \text{tol}_{\min}\Big),

from the last pass's values: at most ten times finer per pass, because an unresolved
value can be far below the true one (Ritz values do not exceed the eigenvalues they
approximate), and jumping by its ratio would ask for more than the spectrum needs (on the
standard MLP-CE layers, ``1e-5`` and a float64 basis, 101 s per spectrum, where ``1e-4``,
22 s, resolves them). ``tol_min`` is the finest tolerance the operator's dtype resolves
(:data:`FINEST_TOL`). :meth:`CountedSpectrum.outliers` floors the values at the tolerance
reached: values below it are indistinguishable from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from collapselab.checks import check_choice, check_float, check_int
from collapselab.curvature.eigen import Eigenpairs, top_eigenpairs
from collapselab.curvature.operators import CurvatureOperator

METHODS = ("gap", "threshold")


def count_outliers(
    eigenvalues: object,
    method: str = "gap",
    *,
    threshold: float = 0.1,
    relative: bool = True,
    floor: float = 1e-12,
) -> int:
    r"""The number of outliers among ``eigenvalues`` (any order, any shape).

    **The outlier rule** (``method="gap"``). With the eigenvalues sorted in decreasing
    order, :math:`\lambda_1 \ge \dots \ge \lambda_m`, and floored at
    :math:`\varepsilon\lambda_1` (``floor``), :math:`\tilde\lambda_j = \max(\lambda_j,
    \varepsilon\lambda_1)`, the count is the position of the largest log-gap among the
    first half of the values,

    .. math::
        n_{\text{out}} = \min \operatorname*{arg\,max}_{j \in J}
            \big(\log\tilde\lambda_j - \log\tilde\lambda_{j+1}\big),\qquad
        J = \big\{1 \le j \le \lfloor m/2 \rfloor :
            \tilde\lambda_j - \tilde\lambda_{j+1} > \varepsilon\lambda_1\big\},

    and 0 when ``J`` is empty (no resolved gap: every compared value equal, to the
    resolution), when :math:`\lambda_1 \le 0` or when ``m < 2``. Ties go to the smallest
    count.

    *Why.* An outlier is one of a few eigenvalues separated from the bulk that holds most of
    the spectrum: Sagun et al. (2017) and Papyan (2019, 2020, "Traces of class/cross-class
    structure pervade deep learning spectra", JMLR) identify the ``C`` class outliers and the
    ``C(C−1)`` cross-class ones as the values standing apart from the bulk, and paper 004's
    claims (``K²`` Hessian outliers, ``K`` and ``K(K−1)`` left by the knock-outs, ``K`` weight
    outliers; Figs 3, 5, 6, 8-10) are counts of such values. Neither gives a numerical
    criterion (note 004 §8.10), so the rule states the two properties those claims use:

    * *separated*: the count ends at the widest gap, measured as a ratio, because the bulk
      sits near 0 while the outliers spread over decades (cross-entropy's are graded) and the
      count must not depend on the loss's scale; the floor turns an exactly zero bulk (the
      deep UFM at its optimum) into a finite gap, :math:`\log(\lambda_{K^2}/\varepsilon\lambda_1)`;
    * *from the bulk*: the outliers are fewer than the values below them, so only the first
      half of the gaps is read. A bulk has gaps of its own, and the widest is usually at its
      bottom: the step into the null space of a rank-deficient matrix (a layer's Gauss-Newton
      matrix has rank at most ``N · C``, often below its size) or into the unresolved
      tail of a truncated Lanczos spectrum. A rule reading every gap counts the rank there
      (``K² = 16`` outliers in ``[1, 2]``, 300 bulk values in ``[10⁻³, 2·10⁻²]``, 200 zeros:
      316), this one the outliers (16).

    * *resolved*: ``ε`` is the resolution of the values, relative to the largest (a dense
      solver's rounding, or Lanczos's residual bound ``tol · λ_1``,
      :meth:`CountedSpectrum.outliers`): values below ``ελ_1`` are the floor, and two
      values less than ``ελ_1`` apart are not told apart, so their gap separates nothing.
      Without this, equal outliers that differ by rounding (``10⁻¹⁷``) would make a count
      of the position of the largest rounding error whenever the half read holds no real
      gap.

    A spectrum of equal values has no bulk to stand apart from: 0 outliers. What the rule
    cannot see is a gap in the upper half of the values passed that is wider than the
    outliers' (a bulk of a few separated clusters, or a full spectrum whose rank is below half
    its size): the caller passes a window in which the bulk is represented and the null space
    is not. The curvature family passes the top ``2K² + K`` eigenvalues, the ``K²`` outliers
    expected and as many of the bulk; paper 004's dense spectra are whole.

    **A threshold count** (``method="threshold"``): the number of eigenvalues above
    ``threshold · λ_1`` (relative; 0 without a positive eigenvalue) or above ``threshold``
    (``relative=False``). It is a numerical rank, not an outlier rule: it tells a zero bulk from
    a non-zero one at a known scale (the knock-out ranks at an exact optimum).

    Args:
        method: ``"gap"`` (the outlier rule) or ``"threshold"``.
        threshold, relative: the threshold count's cut, ``threshold · λ_1`` or
            ``threshold``.
        floor: ``ε``, relative to ``λ_1``; in ``(0, ∞)``.

    Raises:
        ValueError: no eigenvalue, a NaN or an infinite one, an unknown ``method``, a
            ``floor`` not in ``(0, ∞)``.
    """
    check_choice("method", method, METHODS)
    vals = np.sort(np.asarray(eigenvalues, dtype=np.float64).reshape(-1))[::-1]
    if vals.size == 0:
        raise ValueError("count_outliers needs at least one eigenvalue")
    if not np.isfinite(vals).all():
        raise ValueError("eigenvalues must be finite")
    top = vals[0]
    if method == "threshold":
        threshold = check_float("threshold", threshold)
        if relative and top <= 0:
            return 0
        cut = threshold * top if relative else threshold
        return int((vals > cut).sum())
    floor = check_float("floor", floor, minimum=0.0, strict=True)
    if vals.size < 2 or top <= 0:
        return 0
    read = np.maximum(vals, floor * top)[: vals.size // 2 + 1]  # the first half's gaps
    logs = np.log(read)
    gaps = np.where(read[:-1] - read[1:] > floor * top, logs[:-1] - logs[1:], 0.0)
    if gaps.max() <= 0:
        return 0
    return int(np.argmax(gaps)) + 1


RESOLUTION_MARGIN = 10.0
"""A counted spectrum is resolved when its smallest compared eigenvalue is at least this many
times Lanczos's residual bound ``tol · λ_1`` (module docstring)."""

FINEST_TOL = {torch.float32: 1e-5, torch.float64: 1e-8}
"""The finest Lanczos tolerance a refinement asks for, per operator dtype: float32 products
move the eigenvalues by a few ``1e-5`` of the largest (docs/curvature.md), so a finer
tolerance resolves nothing more and may not converge; float64's is far below any count."""


@dataclass(frozen=True)
class CountedSpectrum:
    """Top eigenpairs for an outlier count and the Lanczos tolerance they were resolved to
    (``tol``: the first pass's, or the refinement's)."""

    pairs: Eigenpairs
    tol: float

    @property
    def values(self) -> torch.Tensor:
        return self.pairs.values

    def outliers(self) -> int:
        """:func:`count_outliers` by the largest log-gap, values floored at ``tol · λ_1``."""
        return count_outliers(self.values.detach().cpu().numpy(), floor=self.tol)


def counted_spectrum(
    op: CurvatureOperator, m: int, *, tol: float, seed: int = 0
) -> CountedSpectrum:
    """The top ``m`` eigenpairs of ``op``, refined until the values the gap rule reads are
    resolved or the dtype's finest tolerance is reached (module docstring)."""
    m = check_int("m", m, minimum=2)
    tol = check_float("tol", tol, minimum=0.0, strict=True)
    pairs = top_eigenpairs(op, m, tol=tol, seed=seed)
    while (finer := finer_tolerance(pairs.values, tol, op.dtype)) is not None:
        tol = finer
        pairs = top_eigenpairs(op, m, tol=tol, seed=seed)
    return CountedSpectrum(pairs, tol)


def finer_tolerance(values: torch.Tensor, tol: float, dtype: torch.dtype) -> float | None:
    """``tol'`` of the module docstring, or ``None`` when the values at ``tol`` are resolved
    (or ``tol`` is already at the dtype's finest)."""
    top = float(values[0])
    compared = float(values[values.numel() // 2])  # λ_{⌊m/2⌋+1}, the last the gaps read
    if top <= 0.0 or compared >= RESOLUTION_MARGIN * tol * top:
        return None
    finest = FINEST_TOL.get(dtype, tol)
    finer = max(compared / (RESOLUTION_MARGIN * top), tol / 10.0, finest)
    return finer if finer < tol else None


__all__ = [
    "FINEST_TOL",
    "METHODS",
    "RESOLUTION_MARGIN",
    "CountedSpectrum",
    "count_outliers",
    "counted_spectrum",
    "finer_tolerance",
]
