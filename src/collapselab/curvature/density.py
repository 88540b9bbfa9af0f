r"""Spectral density by stochastic Lanczos quadrature (SLQ).

The spectral density of a symmetric ``P × P`` operator is
:math:`\phi(t) = \frac1P\sum_{i=1}^P \delta(t - \lambda_i)`. For a unit probe ``v``,
``m`` steps of Lanczos from ``v`` give the tridiagonal :math:`T_m = U\,\mathrm{diag}(\theta)U^\top`
and the Gauss quadrature

.. math::
    v^\top g(A)\, v \approx \sum_{j=1}^{m} \tau_j^2\, g(\theta_j),\qquad \tau_j = U_{1j},

exact for polynomials of degree up to ``2m − 1`` (and for every ``g`` when ``m = P``).
With Rademacher probes :math:`\mathbb{E}[v^\top g(A) v] = \frac1P\mathrm{tr}\,g(A)`, so the
average over probes of the nodes :math:`\theta_j` with weights :math:`\tau_j^2` estimates
:math:`\phi` (Ubaru, Chen & Saad 2017; Ghorbani, Krishnan & Xiao 2019). Every probe's
weights sum to 1, so the estimated density has total mass exactly 1.

The probes run together: each Lanczos step is one block product of ``probes`` vectors.
The recurrence is fully reorthogonalised against the probe's earlier vectors (memory
``2 · P · steps · probes``, ``P · steps`` for one probe); a probe whose Krylov space
becomes invariant stops early, its remaining weights zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from collapselab.checks import check_float, check_int
from collapselab.curvature.operators import CurvatureOperator
from collapselab.curvature.trace import rademacher


@dataclass
class SpectralDensity:
    """Quadrature nodes ``(probes, steps)`` and weights (each probe's sum to 1)."""

    nodes: np.ndarray
    weights: np.ndarray
    products: int

    def smoothed(self, grid: np.ndarray, sigma: float) -> np.ndarray:
        """The density convolved with a Gaussian of width ``sigma`` on ``grid``:
        :math:`\\hat\\phi(t) = \\frac1{n_p}\\sum_{p,j} \\tau_{pj}^2\\,
        \\mathcal{N}(t;\\theta_{pj},\\sigma^2)`."""
        sigma = check_float("sigma", sigma, minimum=0.0, strict=True)
        t = np.asarray(grid, dtype=np.float64)[:, None]
        nodes, weights = self.nodes.reshape(-1), self.weights.reshape(-1)
        kernel = np.exp(-0.5 * ((t - nodes[None, :]) / sigma) ** 2) / (sigma * math.sqrt(2 * np.pi))
        return kernel @ weights / self.nodes.shape[0]

    def histogram(self, edges: np.ndarray) -> np.ndarray:
        """The mass of each bin ``[edges[i], edges[i+1])`` (the last bin closed)."""
        mass, _ = np.histogram(self.nodes.reshape(-1), bins=edges, weights=self.weights.reshape(-1))
        return mass / self.nodes.shape[0]


def lanczos_tridiagonal(
    op: CurvatureOperator, V0: torch.Tensor, steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``steps`` Lanczos steps from each column of ``V0 (P, p)`` at once: the diagonals
    ``alpha (p, steps)`` and off-diagonals ``beta (p, steps - 1)`` of each probe's
    tridiagonal matrix (full reorthogonalisation; ``beta = 0`` after an invariant space)."""
    P, p = V0.shape
    steps = min(check_int("steps", steps, minimum=1), P)
    V = V0 / V0.norm(dim=0, keepdim=True)
    basis = _ProbeBases(P, p, steps, V0)
    basis.store(0, V)
    alpha = torch.zeros(p, steps, dtype=V0.dtype, device=V0.device)
    beta = torch.zeros(p, max(steps - 1, 0), dtype=V0.dtype, device=V0.device)
    alive = torch.ones(p, dtype=torch.bool, device=V0.device)
    for j in range(steps):
        W = op.matmat(V)
        alpha[:, j] = (W * V).sum(0) * alive
        if j == steps - 1:
            break
        for _ in range(2):  # full reorthogonalisation, per probe
            W = W - basis.project(j + 1, W)
        b = W.norm(dim=0)
        alive = alive & (b > 1e-10 * alpha[:, : j + 1].abs().amax(dim=1).clamp_min(1e-300))
        beta[:, j] = torch.where(alive, b, torch.zeros_like(b))
        V = torch.where(alive, W / b.clamp_min(1e-300), torch.zeros_like(W))
        basis.store(j + 1, V)
    return alpha, beta


class _ProbeBases:
    r"""Each probe's Lanczos vectors, laid out so that the two products of a
    reorthogonalisation pass, :math:`c = V_q^\top w` and :math:`V_q c`, read one contiguous
    matrix per probe and copy nothing.

    ``rows[q]`` holds probe ``q``'s vectors as rows ``(steps, P)`` (for ``c``); with more
    than one probe, ``cols[q]`` holds them again as columns ``(P, steps)`` (for ``V_q c``),
    so the memory is ``2 · P · steps · probes`` numbers (one copy for a single probe). The
    matrix-vector products are the very ones ``einsum`` made over a ``(steps, P, probes)``
    stack after copying it into these layouts at every pass (and, for a single vector or
    below ``_SMALL_BMM`` multiply-adds, where torch's ``bmm`` takes its own loop, that
    ``einsum`` itself), so the tridiagonals are bit-identical to that implementation's
    (checked in float32 and float64, ``tests/test_curvature_density_layout.py``), without
    the copies, which were most of the reorthogonalisation's time (a pass over 30 vectors
    of 3 probes at ``P = 102,594``: about 3x faster, ``benchmarks/README.md``).
    """

    def __init__(self, P: int, p: int, steps: int, like: torch.Tensor) -> None:
        self.rows = torch.empty(p, steps, P, dtype=like.dtype, device=like.device)
        self.cols = (
            None if p == 1 else torch.empty(p, P, steps, dtype=like.dtype, device=like.device)
        )

    def store(self, j: int, V: torch.Tensor) -> None:
        """Vector ``j`` of every probe, the columns of ``V (P, p)``."""
        self.rows[:, j] = V.T
        if self.cols is not None:
            self.cols[:, :, j] = V.T

    def project(self, n: int, W: torch.Tensor) -> torch.Tensor:
        """``V_q V_qᵀ w_q`` for each column ``w_q`` of ``W (P, p)``, over the first ``n``
        vectors of probe ``q``."""
        P, p = W.shape
        if n == 1 or P * n < _SMALL_BMM:
            # torch's batched product (what einsum calls) takes another kernel here: the
            # same einsum, on the same layout, costs little at this size
            stack = self.rows[:, :n].permute(1, 2, 0).contiguous()  # (n, P, p)
            return torch.einsum("jip,jp->ip", stack, torch.einsum("jip,ip->jp", stack, W))
        # c = V_qᵀ w_q as (n, p) with contiguous columns, the layout einsum gave it
        c = torch.stack([self.rows[q, :n] @ W[:, q] for q in range(p)]).T
        if self.cols is None:  # a single probe: the product einsum made, (Vᵀ)ᵀc
            return (self.rows[0, :n].T @ c[:, 0])[:, None]
        return torch.stack([self.cols[q, :, :n] @ c[:, q] for q in range(p)], 1)


_SMALL_BMM = 400
"""Below this many multiply-adds per vector, torch's CPU ``bmm`` (which ``einsum`` calls)
uses its own loop instead of BLAS, whose sums round differently."""


def slq(
    op: CurvatureOperator, steps: int = 80, probes: int = 8, *, seed: int = 0
) -> SpectralDensity:
    """The SLQ estimate of ``op``'s spectral density (module docstring): ``probes``
    Rademacher probes, ``steps`` Lanczos steps each (``steps · probes`` products)."""
    probes = check_int("probes", probes, minimum=1)
    gen = torch.Generator().manual_seed(seed)
    like = torch.empty(0, dtype=op.dtype, device=op.device)
    alpha, beta = lanczos_tridiagonal(op, rademacher(op.dim, probes, gen, like), steps)
    m = alpha.shape[1]
    nodes = np.zeros((probes, m))
    weights = np.zeros((probes, m))
    for i in range(probes):
        a = alpha[i].detach().cpu().double().numpy()
        b = beta[i].detach().cpu().double().numpy()
        size = m if not (b == 0).any() else int(np.argmax(b == 0)) + 1
        T = np.diag(a[:size]) + np.diag(b[: size - 1], 1) + np.diag(b[: size - 1], -1)
        theta, U = np.linalg.eigh(T)
        nodes[i, :size], weights[i, :size] = theta, U[0] ** 2
    return SpectralDensity(nodes, weights, m * probes)


__all__ = ["SpectralDensity", "lanczos_tridiagonal", "slq"]
