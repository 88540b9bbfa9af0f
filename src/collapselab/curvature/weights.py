r"""Spectra of weights and features, and the heavy-tail exponent of a spectrum.

* :func:`weight_matrix`: a layer's weight as a matrix: ``nn.Linear`` ``(out, in)``,
  ``nn.Conv*d`` ``(out, in/groups · kernel)``.
* :func:`weight_spectrum` (note 004 M17): the eigenvalues of :math:`WW^\top` (the squared
  singular values of ``W``), in decreasing order.
* :func:`power_law_fit`: the exponent :math:`\alpha` of a power-law tail
  :math:`p(\lambda)\propto\lambda^{-\alpha}` for :math:`\lambda\ge\lambda_{\min}`, as
  weight-spectrum tools report it (WeightWatcher; Martin & Mahoney 2021) after Clauset,
  Shalizi & Newman (2009): for every candidate :math:`\lambda_{\min}` (each eigenvalue
  leaving at least ``min_tail`` above it) the continuous maximum-likelihood estimate

  .. math::
      \hat\alpha = 1 + n\Big/\sum_{i:\lambda_i\ge\lambda_{\min}}\ln(\lambda_i/\lambda_{\min}),

  and the Kolmogorov–Smirnov distance between the tail's empirical distribution and the
  fitted law :math:`1 - (\lambda/\lambda_{\min})^{1-\hat\alpha}`; the fit with the smallest
  distance is returned. Zero eigenvalues (rank deficiency) are left out.
* :func:`covariance_spectrum` (M20): the eigenvalues of
  :math:`\frac1N\sum_n (h_n - \bar h)(h_n - \bar h)^\top` from the singular values of the
  centred ``(N, D)`` matrix (``min(N, D)`` of them, never a ``D × D`` matrix).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from collapselab.checks import check_int


def weight_matrix(layer: nn.Module | torch.Tensor) -> torch.Tensor:
    """The weight of a linear or convolutional layer as ``(out, fan_in)`` (float64, CPU)."""
    w = layer.weight if isinstance(layer, nn.Module) else layer
    if not isinstance(w, torch.Tensor) or w.ndim < 2:
        raise ValueError(
            f"expected a layer with a weight of at least 2 dimensions, got {type(layer).__name__}"
        )
    return w.detach().reshape(w.shape[0], -1).to(torch.float64).cpu()


def weight_spectrum(layer: nn.Module | torch.Tensor) -> np.ndarray:
    """Eigenvalues of ``W Wᵀ`` (``min(out, fan_in)`` of them), decreasing."""
    s = torch.linalg.svdvals(weight_matrix(layer))
    return (s**2).numpy()


def covariance_spectrum(features: torch.Tensor) -> np.ndarray:
    """Eigenvalues of the covariance (``1/N``) of ``features (N, D)``, decreasing."""
    h = features.detach().reshape(features.shape[0], -1).to(torch.float64)
    h = h - h.mean(0, keepdim=True)
    s = torch.linalg.svdvals(h)
    return (s**2 / h.shape[0]).cpu().numpy()


@dataclass(frozen=True)
class PowerLawFit:
    """``alpha``, ``xmin``, the KS distance ``ks`` and the tail size ``n_tail``."""

    alpha: float
    xmin: float
    ks: float
    n_tail: int


def power_law_fit(eigenvalues: object, min_tail: int = 5) -> PowerLawFit:
    """The power-law tail of a spectrum (module docstring)."""
    min_tail = check_int("min_tail", min_tail, minimum=2)
    vals = np.sort(np.asarray(eigenvalues, dtype=np.float64).reshape(-1))
    if not np.isfinite(vals).all():
        raise ValueError("eigenvalues must be finite")
    top = vals[-1] if vals.size else 0.0
    vals = vals[vals > max(top, 0.0) * 1e-12]
    if vals.size < min_tail:
        raise ValueError(
            f"a power-law fit needs at least {min_tail} positive eigenvalues, got {vals.size}"
        )
    logs = np.log(vals)
    # suffix sums of log(lambda): the tail from index i is vals[i:]
    suffix = np.cumsum(logs[::-1])[::-1]
    best: PowerLawFit | None = None
    n = vals.size
    for i in range(n - min_tail + 1):
        xmin = vals[i]
        if i > 0 and xmin == vals[i - 1]:
            continue
        tail = n - i
        denom = suffix[i] - tail * logs[i]
        if denom <= 0:
            continue
        alpha = 1.0 + tail / denom
        x = vals[i:]
        model = 1.0 - (x / xmin) ** (1.0 - alpha)
        upper = np.arange(1, tail + 1) / tail
        lower = np.arange(0, tail) / tail
        ks = float(max(np.abs(upper - model).max(), np.abs(model - lower).max()))
        if best is None or ks < best.ks:
            best = PowerLawFit(float(alpha), float(xmin), ks, int(tail))
    if best is None:
        raise ValueError("no power-law fit: the eigenvalues are all equal")
    return best


__all__ = [
    "PowerLawFit",
    "covariance_spectrum",
    "power_law_fit",
    "weight_matrix",
    "weight_spectrum",
]
