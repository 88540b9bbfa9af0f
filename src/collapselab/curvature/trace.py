r"""Stochastic trace estimators: Hutchinson and Hutch++.

* :func:`hutchinson`: :math:`\widehat{\mathrm{tr}}(A) = \frac1m\sum_{j=1}^m z_j^\top A z_j`
  with Rademacher :math:`z_j` (unbiased; variance :math:`2\lVert A\rVert_F^2 -
  2\sum_i A_{ii}^2` per probe); its standard error is the probes' sample standard
  deviation over :math:`\sqrt m`.
* :func:`hutchpp`: Hutch++ (Meyer, Musco, Musco & Woodruff, 2021). With ``m`` products:
  :math:`S` (``P × m/3`` Rademacher), :math:`Q = \mathrm{orth}(AS)`, then

  .. math::
      \widehat{\mathrm{tr}}(A) = \mathrm{tr}(Q^\top A Q)
        + \frac{3}{m}\,\mathrm{tr}\big(G^\top (I - QQ^\top) A (I - QQ^\top) G\big),

  :math:`G` another ``P × m/3`` Rademacher block. Exact when the rank of ``A`` is at most
  ``m/3``; its error falls as ``1/m`` instead of Hutchinson's ``1/√m`` for matrices whose
  spectrum decays, as curvature spectra do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from collapselab.checks import check_int
from collapselab.curvature.operators import CurvatureOperator


@dataclass(frozen=True)
class TraceEstimate:
    """``value``, its ``std_error`` (``nan`` where the estimator gives none), the number of
    ``products``."""

    value: float
    std_error: float
    products: int


def rademacher(n: int, m: int, gen: torch.Generator, like: torch.Tensor) -> torch.Tensor:
    """A ``(n, m)`` block of independent ±1 entries with ``like``'s dtype and device."""
    z = torch.randint(0, 2, (n, m), generator=gen).to(like.dtype) * 2 - 1
    return z.to(like.device)


def _probe_like(op: CurvatureOperator) -> torch.Tensor:
    return torch.empty(0, dtype=op.dtype, device=op.device)


def hutchinson(op: CurvatureOperator, probes: int = 100, *, seed: int = 0) -> TraceEstimate:
    """Hutchinson's estimate from ``probes`` Rademacher probes (module docstring)."""
    probes = check_int("probes", probes, minimum=1)
    gen = torch.Generator().manual_seed(seed)
    Z = rademacher(op.dim, probes, gen, _probe_like(op))
    quad = (Z * op.matmat(Z)).sum(0)
    std = float(quad.std()) / math.sqrt(probes) if probes > 1 else math.nan
    return TraceEstimate(float(quad.mean()), std, probes)


def hutchpp(op: CurvatureOperator, products: int = 99, *, seed: int = 0) -> TraceEstimate:
    """The Hutch++ estimate from ``products`` products (a multiple of 3, at least 3)."""
    products = check_int("products", products, minimum=3)
    if products % 3:
        raise ValueError(f"products must be a multiple of 3 for Hutch++, got {products}")
    third = products // 3
    gen = torch.Generator().manual_seed(seed)
    like = _probe_like(op)
    S = rademacher(op.dim, min(third, op.dim), gen, like)
    G = rademacher(op.dim, third, gen, like)
    Q, _ = torch.linalg.qr(op.matmat(S))
    G = G - Q @ (Q.T @ G)
    both = op.matmat(torch.cat([Q, G], dim=1))
    AQ, AG = both[:, : Q.shape[1]], both[:, Q.shape[1] :]
    low_rank = float((Q * AQ).sum())
    AG = AG - Q @ (Q.T @ AG)
    rest = float((G * AG).sum()) / third
    return TraceEstimate(low_rank + rest, math.nan, S.shape[1] + Q.shape[1] + third)


__all__ = ["TraceEstimate", "hutchinson", "hutchpp", "rademacher"]
