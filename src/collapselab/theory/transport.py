r"""Optimal-transport diagnostics of a layer stack (beyond paper 001; note §7.16).

Paper 001 explains progressive collapse by the view that a ResNet with weight decay learns
the Wasserstein geodesic (displacement interpolation) from the input distribution to the
collapsed one, but never measures it. These diagnostics do, for the layers
``[H_0, ..., H_L]`` of one network on the same N samples (rows, same order), each layer
being the empirical measure ``μ_l = (1/N) Σ_i δ_{h_i^l}``:

* ``W_2^2(μ_l, μ_{l+1})`` between consecutive layers: the exact discrete optimal transport
  with uniform weights and squared Euclidean cost, solved by POT's network simplex
  (``ot.emd``); for equal sample counts the optimum is a permutation (Birkhoff);
* the network's own correspondence cost ``C_l = (1/N) Σ_i ||h_i^{l+1} - h_i^l||^2``, the
  cost of the identity coupling ``h_i^l -> h_i^{l+1}``, and its ratio to the optimum
  (``>= 1``; 1 exactly when the network moves the samples along an optimal coupling);
* how the whole path compares with the geodesic: ``Σ_l C_l`` (the OT regulariser of
  :func:`collapselab.metrics.layerwise.ot_regulariser`) is at least
  ``Σ_l W_2^2(μ_l, μ_{l+1}) >= W_2^2(μ_0, μ_L)/L`` (triangle inequality and
  Cauchy-Schwarz), with equality along a constant-speed geodesic; the efficiency
  ``W_2^2(μ_0, μ_L) / (L Σ_l C_l)`` lies in ``[0, 1]``;
* per-sample straightness of the trajectories
  (:func:`collapselab.metrics.layerwise.straightness`).

The exact solver costs about ``O(N^3)`` time and ``O(N^2)`` memory; use ``subsample`` for
large N (the same samples are drawn from every layer).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from collapselab.checks import as_real_array, check_int
from collapselab.metrics.layerwise import ot_regulariser, straightness

__all__ = [
    "TransportDiagnostics",
    "correspondence_cost",
    "layer_transport",
    "optimal_coupling",
    "w2_squared",
]


def _cloud(x: object, name: str) -> np.ndarray:
    a = as_real_array(name, x, ndim=2, layout="(N, D)")
    if a.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D (N, D) array, got shape {a.shape}")
    return a


def _pair(a: object, b: object) -> tuple[np.ndarray, np.ndarray]:
    x, y = _cloud(a, "a"), _cloud(b, "b")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"a has dimension {x.shape[1]} but b has {y.shape[1]}; expected equal")
    return x, y


def _emd(x: np.ndarray, y: np.ndarray, num_iter_max: int) -> tuple[np.ndarray, np.ndarray]:
    """The optimal plan (uniform weights) and the squared-distance cost matrix."""
    import ot  # POT and scikit-learn take seconds to import: only when a plan is solved
    from scipy.spatial.distance import cdist

    # cdist forms each ||x_i - y_j||^2 from the difference, exactly 0 for equal points
    # (ot.dist's ||x||^2 + ||y||^2 - 2<x, y> leaves rounding of order eps ||x||^2)
    cost = cdist(x, y, metric="sqeuclidean")
    wa = np.full(x.shape[0], 1.0 / x.shape[0])
    wb = np.full(y.shape[0], 1.0 / y.shape[0])
    plan, log = ot.emd(wa, wb, cost, numItermax=num_iter_max, log=True)
    if log["warning"] is not None:
        raise RuntimeError(
            f"the exact OT solver did not reach the optimum ({log['warning']}); raise "
            "num_iter_max or subsample the point clouds"
        )
    return plan, cost


def optimal_coupling(a: object, b: object, num_iter_max: int = 1_000_000) -> np.ndarray:
    """The optimal coupling of two empirical measures with uniform weights.

    Args:
        a: ``(N, D)`` points of the first measure.
        b: ``(M, D)`` points of the second.
        num_iter_max: network-simplex iteration cap (``ot.emd``'s ``numItermax``).

    Returns:
        ``(N, M)`` plan ``π`` with row sums ``1/N`` and column sums ``1/M`` minimising
        ``Σ_ij π_ij ||a_i - b_j||^2``; for ``N = M`` a permutation matrix divided by N.
    """
    return _emd(*_pair(a, b), num_iter_max)[0]


def w2_squared(a: object, b: object, num_iter_max: int = 1_000_000) -> float:
    r"""``W_2^2`` between the empirical measures of two point clouds (uniform weights).

    .. math::
        W_2^2(\mu_a, \mu_b) = \min_{\pi \in \Pi(1/N, 1/M)} \sum_{ij} \pi_{ij} \|a_i - b_j\|^2,

    solved exactly (POT ``ot.emd``, squared Euclidean cost).
    """
    plan, cost = _emd(*_pair(a, b), num_iter_max)
    return float(np.sum(plan * cost))


def correspondence_cost(a: object, b: object) -> float:
    """The cost of the sample correspondence ``a_i -> b_i``: ``(1/N) Σ_i ||b_i - a_i||^2``."""
    x, y = _pair(a, b)
    if x.shape != y.shape:
        raise ValueError(f"a has shape {x.shape} but b has {y.shape}; expected the same samples")
    return float(np.mean(np.sum((y - x) ** 2, axis=1)))


@dataclass(frozen=True)
class TransportDiagnostics:
    """Optimal-transport view of a layer stack ``[H_0, ..., H_L]``.

    Attributes:
        w2_squared: ``(L,)`` ``W_2^2(μ_l, μ_{l+1})``.
        correspondence_cost: ``(L,)`` ``(1/N) Σ_i ||h_i^{l+1} - h_i^l||^2``.
        ratio: ``(L,)`` correspondence cost over ``W_2^2`` (``>= 1``; exactly 1 when the
            network's coupling is optimal, i.e. within 1e-12, and for 0/0; inf when the
            measures coincide but the network still moves samples).
        identity_mass: ``(L,)`` mass the optimal plan puts on the network's own pairs
            ``(i, i)``, ``Σ_i π_ii`` (1 when the optimal plan is the identity).
        w2_squared_end_to_end: ``W_2^2(μ_0, μ_L)``.
        kinetic_energy: ``Σ_l`` correspondence cost, the OT regulariser of Eq. 12.
        geodesic_efficiency: ``W_2^2(μ_0, μ_L) / (L · kinetic_energy)`` in ``[0, 1]``; 1
            exactly for equally spaced layers along optimally coupled straight lines
            (NaN when nothing moves).
        straightness: ``(N,)`` per-sample ``Σ_l ||Δ_l|| / ||h^L - h^0||`` (>= 1).
        mean_straightness: mean over samples with a finite value.
        samples: indices of the samples used (all, or the subsample).
    """

    w2_squared: np.ndarray
    correspondence_cost: np.ndarray
    ratio: np.ndarray
    identity_mass: np.ndarray
    w2_squared_end_to_end: float
    kinetic_energy: float
    geodesic_efficiency: float
    straightness: np.ndarray
    mean_straightness: float
    samples: np.ndarray


def _ratio(own: float, best: float) -> float:
    if best <= 0:
        return 1.0 if own <= 0 else float("inf")
    r = own / best
    # own >= best exactly (the identity is a feasible plan); when the identity is optimal
    # the two are sums over the same costs in different orders, equal up to rounding
    return 1.0 if abs(r - 1.0) <= 1e-12 else r


def layer_transport(
    layers: Sequence[object],
    subsample: int | None = None,
    seed: int = 0,
    num_iter_max: int = 1_000_000,
) -> TransportDiagnostics:
    """Optimal-transport diagnostics between consecutive layers (see the module docstring).

    Args:
        layers: ``[H_0, ..., H_L]``, ``L >= 1``, each ``(N, D)`` with the same samples in
            the same order and the same D.
        subsample: use this many samples, drawn without replacement (seeded), from every
            layer; default all.
        seed: seed of the subsample.
        num_iter_max: network-simplex iteration cap per transport problem.
    """
    if isinstance(layers, torch.Tensor | np.ndarray) or not isinstance(layers, Sequence):
        raise TypeError(
            f"layers must be a list or tuple of (N, D) arrays, got {type(layers).__name__}"
        )
    if len(layers) < 2:
        raise ValueError(f"layers must hold at least 2 layers, got {len(layers)}")
    hs = [_cloud(h, f"layers[{i}]") for i, h in enumerate(layers)]
    for i, h in enumerate(hs[1:], start=1):
        if h.shape != hs[0].shape:
            raise ValueError(
                f"layers[{i}] has shape {h.shape} but layers[0] has {hs[0].shape}; every "
                "layer must hold the same samples in the same space"
            )
    n = hs[0].shape[0]
    idx = np.arange(n)
    if subsample is not None:
        subsample = check_int("subsample", subsample, minimum=1, maximum=n)
        idx = np.sort(np.random.default_rng(seed).choice(n, size=subsample, replace=False))
        hs = [h[idx] for h in hs]
    w2, own, mass = [], [], []
    for a, b in itertools.pairwise(hs):
        plan, cost = _emd(a, b, num_iter_max)
        w2.append(float(np.sum(plan * cost)))
        own.append(float(np.trace(cost)) / a.shape[0])
        mass.append(float(np.trace(plan)))
    end = w2_squared(hs[0], hs[-1], num_iter_max)
    energy = ot_regulariser(hs)
    big_l = len(hs) - 1
    sample_straightness = straightness(hs)
    finite = np.isfinite(sample_straightness)
    return TransportDiagnostics(
        w2_squared=np.asarray(w2),
        correspondence_cost=np.asarray(own),
        ratio=np.asarray([_ratio(o, w) for o, w in zip(own, w2, strict=True)]),
        identity_mass=np.asarray(mass),
        w2_squared_end_to_end=end,
        kinetic_energy=energy,
        geodesic_efficiency=end / (big_l * energy) if energy > 0 else float("nan"),
        straightness=sample_straightness,
        mean_straightness=(
            float(sample_straightness[finite].mean()) if finite.any() else float("nan")
        ),
        samples=idx,
    )
