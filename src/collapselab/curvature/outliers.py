r"""Counting the outliers of a spectrum: by the largest gap, or by a threshold.

* ``"gap"``: with the eigenvalues sorted in decreasing order, :math:`\lambda_1 \ge \dots
  \ge \lambda_m`, and floored at :math:`\varepsilon\lambda_1` (``floor``, so that zeros
  and negative values count as the floor), the count is the position of the largest
  log-gap among the first half,

  .. math::
      n_{\text{out}} = \arg\max_{1 \le j \le \lfloor m/2 \rfloor}\;
          \log\lambda_j - \log\lambda_{j+1} .

  The bulk must be represented: at least as many values as outliers are passed (the
  family passes ``2K² + K``); the cap keeps a small last value of a truncated or
  rank-deficient spectrum (a gap into the bottom of the bulk) from counting everything
  above it as outliers. A spectrum with all values equal has no gap; the count is 0.
* ``"threshold"``: the number of eigenvalues above ``threshold · λ_1`` (relative) or above
  ``threshold`` (``relative=False``).

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
    """The number of outliers among ``eigenvalues`` (module docstring)."""
    check_choice("method", method, METHODS)
    vals = np.sort(np.asarray(eigenvalues, dtype=np.float64).reshape(-1))[::-1]
    if vals.size == 0:
        raise ValueError("count_outliers needs at least one eigenvalue")
    if not np.isfinite(vals).all():
        raise ValueError("eigenvalues must be finite")
    top = vals[0]
    if method == "threshold":
        threshold = check_float("threshold", threshold)
        cut = threshold * top if relative else threshold
        return int((vals > cut).sum())
    floor = check_float("floor", floor, minimum=0.0, strict=True)
    if vals.size < 2 or top <= 0:
        return 0
    clipped = np.maximum(vals, floor * top)
    gaps = -np.diff(np.log(clipped))[: vals.size // 2]
    if gaps.size == 0 or gaps.max() <= 0:
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
