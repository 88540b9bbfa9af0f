r"""Top eigenpairs of a symmetric operator by restarted block Lanczos.

:func:`top_eigenpairs` builds an orthonormal basis ``B`` of a block Krylov space and keeps
the products ``AB``; every step solves the Rayleigh–Ritz problem

.. math::
    T = B^\top A B = Y\,\Theta\,Y^\top,\qquad X = BY,\qquad R = AX - X\Theta ,

and extends ``B`` by the orthonormalised residuals ``R`` of the wanted Ritz pairs that have
not converged (the residuals lie in the next Krylov block, so without restarts this is
block Lanczos with full reorthogonalisation). When the basis reaches ``max_dim`` vectors it
restarts thick: ``B ← BY_{:, :q}``, ``AB ← (AB)Y_{:, :q}`` for the ``q`` best Ritz vectors
(no product is recomputed). A Ritz pair is converged when
:math:`\lVert A x - \theta x\rVert \le \mathrm{tol}\cdot \max|\theta|`; the eigenvalue
error is then at most that residual, and of order its square over the spectral gap.

The basis and the Rayleigh–Ritz problem are kept in float64 whatever the operator's dtype
(a float32 model's products are converted), so orthogonality does not break down with the
products' rounding. Memory is ``2 · P · max_dim`` float64 numbers (``O(P·k)``); products
come in blocks, which the operators
of :mod:`~collapselab.curvature.operators` vectorise. When ``max_dim`` reaches ``P`` the
basis spans the space and the result is exact (a dense eigendecomposition from ``P``
products).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from collapselab.checks import check_choice, check_float, check_int
from collapselab.curvature.operators import CurvatureOperator

WHICH = ("LA", "LM", "SA")
"""Which end of the spectrum: largest algebraic, largest magnitude, smallest algebraic."""


@dataclass
class Eigenpairs:
    """Eigenvalues ``values (k,)`` (ordered by ``which``), orthonormal ``vectors (P, k)``,
    residual norms ``residuals (k,)``, the number of operator-vector ``products`` used, and
    whether every pair ``converged``."""

    values: torch.Tensor
    vectors: torch.Tensor
    residuals: torch.Tensor
    products: int
    converged: bool


def top_eigenpairs(
    op: CurvatureOperator,
    k: int,
    *,
    which: str = "LA",
    tol: float = 1e-6,
    block: int | None = None,
    max_dim: int | None = None,
    max_products: int | None = None,
    seed: int = 0,
) -> Eigenpairs:
    """The ``k`` extreme eigenpairs of ``op`` (module docstring).

    Args:
        op: a symmetric operator of dimension ``P``.
        k: how many pairs, ``1 <= k <= P``.
        which: ``"LA"`` (largest, default), ``"LM"`` (largest magnitude), ``"SA"``.
        tol: relative residual tolerance.
        block: vectors added per step (default ``min(k, 4)``; the start is ``k`` random
            vectors, so an eigenvalue of multiplicity up to ``k`` is found, e.g. paper
            004's K² equal outliers).
        max_dim: largest basis before a restart (default ``max(2k + 2·block, 6k, 40)``,
            at most ``P``).
        max_products: stop (``converged=False``) after this many products (default
            ``50 · max_dim``).
        seed: seed of the random starting block.

    Raises:
        ValueError: ``k`` larger than the dimension, or not positive.
    """
    P = op.dim
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if k > P:
        raise ValueError(f"k = {k} exceeds the operator's dimension P = {P}")
    which = check_choice("which", which, WHICH)
    tol = check_float("tol", tol, minimum=0.0, strict=True)
    b = min(check_int("block", block, minimum=1) if block is not None else min(k, 4), P)
    dim_cap = max_dim if max_dim is not None else max(2 * k + 2 * b, 6 * k, 40)
    dim_cap = min(check_int("max_dim", dim_cap, minimum=k + 1) if dim_cap < P else P, P)
    budget = max_products if max_products is not None else 50 * dim_cap
    if dim_cap >= P:
        return _full_space(op, k, which)
    gen = torch.Generator().manual_seed(seed)
    # k random starting vectors: the basis always holds k Ritz pairs, and an eigenvalue of
    # multiplicity up to k is seen (a block Krylov space finds at most its start's rank).
    start = torch.randn(P, max(k, b), generator=gen, dtype=torch.float64)
    B = _orthonormal(start, None).to(op.device)
    AB = _apply(op, B)
    T = B.T @ AB  # the projected matrix, kept up to date block by block
    products = B.shape[1]
    scale = 0.0
    while True:
        theta, Y = _ritz(T, which)
        scale = max(scale, float(theta.abs().max()))
        n_check = min(len(theta), k + b)
        X = B @ Y[:, :n_check]
        R = AB @ Y[:, :n_check] - X * theta[:n_check]
        res = R.norm(dim=0)
        done = res <= tol * scale
        if bool(done[:k].all()) or products >= budget:
            return Eigenpairs(theta[:k], X[:, :k], res[:k], products, bool(done[:k].all()))
        # Expand by the residuals of the first b wanted pairs that have not converged.
        pending = [i for i in range(n_check) if not bool(done[i])][:b]
        W = R[:, pending]
        if B.shape[1] + W.shape[1] > dim_cap:  # thick restart: BᵀAB becomes diagonal
            keep = max(k + b, dim_cap - 2 * b)
            B, AB, T = B @ Y[:, :keep], AB @ Y[:, :keep], torch.diag(theta[:keep])
        W = _orthonormal(W, B, gen)
        AW = _apply(op, W)
        products += W.shape[1]
        C = B.T @ AW
        T = torch.cat([torch.cat([T, C], dim=1), torch.cat([C.T, W.T @ AW], dim=1)], dim=0)
        B, AB = torch.cat([B, W], dim=1), torch.cat([AB, AW], dim=1)


def _apply(op: CurvatureOperator, V: torch.Tensor) -> torch.Tensor:
    """``A V`` in float64 (the operator computes in its own dtype), checked finite."""
    AV = op.matmat(V).to(torch.float64)
    if not bool(torch.isfinite(AV).all()):
        raise ValueError(f"{type(op).__name__}: a product is NaN or Inf")
    return AV


def _ritz(T: torch.Tensor, which: str) -> tuple[torch.Tensor, torch.Tensor]:
    theta, Y = torch.linalg.eigh((T + T.T) / 2)
    order = _order(theta, which)
    return theta[order], Y[:, order]


def _order(values: torch.Tensor, which: str) -> torch.Tensor:
    """Indices of ``values`` from the wanted end of the spectrum first."""
    if which == "LA":
        return torch.argsort(values, descending=True)
    if which == "LM":
        return torch.argsort(values.abs(), descending=True)
    return torch.argsort(values)


def _orthonormal(
    W: torch.Tensor, B: torch.Tensor | None, gen: torch.Generator | None = None
) -> torch.Tensor:
    """Columns of ``W`` orthonormalised against ``B`` (twice, classical Gram–Schmidt) and
    among themselves; a column that vanishes (an invariant subspace was reached) is
    replaced by a random direction, so the basis keeps growing."""
    scale = W.norm(dim=0).clamp_min(torch.finfo(W.dtype).tiny)
    W = W / scale
    for _ in range(2):
        if B is not None and B.shape[1]:
            W = W - B @ (B.T @ W)
    Q, Rf = torch.linalg.qr(W)
    weak = Rf.diagonal().abs() < 1e-8
    if bool(weak.any()) and gen is not None:
        fresh = torch.randn(W.shape[0], int(weak.sum()), generator=gen, dtype=torch.float64)
        fresh = fresh.to(W)
        basis = Q[:, ~weak] if B is None else torch.cat([B, Q[:, ~weak]], dim=1)
        for _ in range(2):
            fresh = fresh - basis @ (basis.T @ fresh)
        Q = torch.cat([Q[:, ~weak], torch.linalg.qr(fresh)[0]], dim=1)
    return Q


def _full_space(op: CurvatureOperator, k: int, which: str) -> Eigenpairs:
    """The exact answer from ``P`` products when the basis would span the whole space."""
    A = op.dense().to(torch.float64)
    if not bool(torch.isfinite(A).all()):
        raise ValueError(f"{type(op).__name__}: a product is NaN or Inf")
    A = (A + A.T) / 2
    vals, vecs = torch.linalg.eigh(A)
    order = _order(vals, which)
    vals, vecs = vals[order][:k], vecs[:, order][:, :k]
    res = (A @ vecs - vecs * vals).norm(dim=0)
    return Eigenpairs(vals, vecs, res, op.dim, True)


__all__ = ["WHICH", "Eigenpairs", "top_eigenpairs"]
