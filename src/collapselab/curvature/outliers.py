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
"""

from __future__ import annotations

import numpy as np

from collapselab.checks import check_choice, check_float

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


__all__ = ["METHODS", "count_outliers"]
