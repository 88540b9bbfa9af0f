r"""Matrix-free curvature operators: one class per matrix, products by :mod:`torch.func`.

Every operator is a symmetric ``P × P`` matrix that is never formed: it applies to a block
of vectors ``V (P, m)`` (:meth:`CurvatureOperator.matmat`), one pass over the data per
block, with the ``m`` products of a batch vectorised by :func:`torch.func.vmap` (the
forward pass of the batch is computed once for all of them). Memory is ``O(P·m)``.

For an :class:`~collapselab.curvature.objective.Objective`
:math:`\mathcal{L}(\theta) = \rho\sum_n \ell(f_n(\theta), y_n)` with Jacobians
:math:`J_n = \partial f_n/\partial\theta` (``C × P``):

* :class:`HessianOperator`: :math:`H = \nabla^2_\theta \mathcal{L}` (forward-over-reverse:
  ``jvp`` of ``grad``);
* :class:`GGNOperator`: the generalized Gauss–Newton matrix
  :math:`G = \rho\sum_n J_n^\top \nabla_f^2\ell_n\, J_n` (``jvp``, the loss's output
  Hessian, ``vjp``); for piece-wise linear networks with MSE, :math:`G = H`;
* :class:`EmpiricalFisherOperator`: :math:`F = \rho\sum_n g_n g_n^\top` with the
  per-sample gradients :math:`g_n = J_n^\top \nabla_f\ell_n` (never formed: ``jvp``, a
  scalar per sample, ``vjp``);
* :class:`LowRankOperator`: :math:`A\,\mathrm{diag}(w)\,A^\top` from explicit factors
  (Papyan's class and cross-class parts); :class:`LinearCombination`: sums and
  differences of operators (``G - G_class - G_cross``, knock-outs).

:func:`gradient_covariance` is :math:`F - \bar g\bar g^\top` with ``reduction="mean"``:
the covariance of the per-sample gradients (paper 004, Appendix E.1).

:meth:`CurvatureOperator.dense` forms the matrix from ``P`` products (small problems and
tests); :meth:`CurvatureOperator.to_scipy` gives a :class:`scipy.sparse.linalg.LinearOperator`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.func import jvp, vjp, vmap

from collapselab.checks import ArgumentTypeError, check_int
from collapselab.curvature.objective import Objective, check_finite_loss

DEFAULT_BLOCK = 16
"""Vectors per vectorised product (``vmap`` chunk): bounds the memory of the tangents."""


class CurvatureOperator:
    """A symmetric matrix-free ``P × P`` operator (see the module docstring).

    Subclasses implement :meth:`_matmat` for ``V (P, m)``. Operators add, subtract and
    scale (``G - G_class``, ``2 * H``), giving a :class:`LinearCombination`.
    """

    dim: int
    dtype: torch.dtype
    device: torch.device

    @property
    def shape(self) -> tuple[int, int]:
        return (self.dim, self.dim)

    def matmat(self, V: torch.Tensor) -> torch.Tensor:
        """``A V`` for a block ``V (P, m)`` (or ``A v`` for ``v (P,)``)."""
        if not isinstance(V, torch.Tensor):
            raise ArgumentTypeError(f"V must be a torch.Tensor, got {type(V).__name__}")
        if V.ndim == 1:
            return self.matmat(V[:, None])[:, 0]
        if V.ndim != 2 or V.shape[0] != self.dim:
            raise ValueError(f"V must have shape ({self.dim}, m), got {tuple(V.shape)}")
        V = V.to(device=self.device, dtype=self.dtype)
        if V.shape[1] == 0:
            return V.clone()
        return self._matmat(V)

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        """``A v`` for ``v (P,)``."""
        return self.matmat(v.reshape(-1))

    def __matmul__(self, V: torch.Tensor) -> torch.Tensor:
        return self.matmat(V)

    def _matmat(self, V: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def dense(self, block: int = 64) -> torch.Tensor:
        """The ``P × P`` matrix, from ``P`` products in blocks of ``block`` columns."""
        eye = torch.eye(self.dim, dtype=self.dtype, device=self.device)
        cols = [self.matmat(eye[:, i : i + block]) for i in range(0, self.dim, block)]
        return torch.cat(cols, dim=1)

    def to_scipy(self) -> object:
        """A :class:`scipy.sparse.linalg.LinearOperator` on float64 NumPy vectors."""
        from scipy.sparse.linalg import LinearOperator

        def mm(x: np.ndarray) -> np.ndarray:
            X = torch.as_tensor(np.asarray(x).reshape(self.dim, -1))
            return self.matmat(X).detach().cpu().to(torch.float64).numpy()

        return LinearOperator(self.shape, matvec=mm, matmat=mm, rmatvec=mm, dtype=np.float64)

    # ------------------------------------------------------------------ algebra
    def __add__(self, other: CurvatureOperator) -> LinearCombination:
        return LinearCombination([self, other], [1.0, 1.0])

    def __sub__(self, other: CurvatureOperator) -> LinearCombination:
        return LinearCombination([self, other], [1.0, -1.0])

    def __rmul__(self, scalar: float) -> LinearCombination:
        return LinearCombination([self], [float(scalar)])

    def __neg__(self) -> LinearCombination:
        return LinearCombination([self], [-1.0])


class _DataOperator(CurvatureOperator):
    """An operator that sums per-batch products over one pass of an objective's data."""

    def __init__(self, objective: Objective, block: int = DEFAULT_BLOCK) -> None:
        if not isinstance(objective, Objective):
            raise ArgumentTypeError(
                f"objective must be a collapselab.curvature.Objective, got "
                f"{type(objective).__name__}"
            )
        self.objective = objective
        self.block = check_int("block", block, minimum=1)
        self.dim = objective.dim
        self.dtype = objective.dtype
        self.device = objective.device

    def _matmat(self, V: torch.Tensor) -> torch.Tensor:
        return self.objective.accumulate(lambda x, y: self._batch(x, y, V))

    def _batch(self, x: torch.Tensor, y: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _columns(self, fn: object, V: torch.Tensor) -> torch.Tensor:
        """``fn`` applied to every column of ``V``, vectorised in chunks of ``block``."""
        out = vmap(fn, in_dims=1, out_dims=1, chunk_size=self.block)(V)
        if not bool(torch.isfinite(out).all()):
            raise ValueError(
                f"{type(self).__name__}: NaN or Inf in a product on a batch (is the loss or "
                "the model's output NaN there?)"
            )
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.objective!r})"


class HessianOperator(_DataOperator):
    r"""The Hessian of the objective in its parameter group.

    .. math::
        H = \nabla^2_\theta \mathcal{L}
          = \rho\sum_n \Big(J_n^\top \nabla_f^2\ell_n\, J_n
            + \sum_{c} \frac{\partial \ell_n}{\partial f_c}\,\nabla^2_\theta f_{n,c}\Big),
        \qquad Hv = \frac{d}{dt}\,\nabla_\theta\mathcal{L}(\theta + t v)\Big|_{t=0}.

    Products are forward-over-reverse (``jvp`` of ``grad``), one pass per block.
    """

    def _batch(self, x: torch.Tensor, y: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        obj = self.objective

        grad = torch.func.grad(lambda theta: obj.batch_loss(theta, x, y))

        def hvp(v: torch.Tensor) -> torch.Tensor:
            return jvp(grad, (obj.theta,), (v,))[1]

        return self._columns(hvp, V)


class GGNOperator(_DataOperator):
    r"""The generalized Gauss–Newton matrix of the objective in its parameter group.

    .. math::
        G = \rho\sum_n J_n^\top\, \nabla_f^2\ell(f_n, y_n)\, J_n,
        \qquad G v = \rho\sum_n J_n^\top \big(\nabla_f^2\ell_n\,(J_n v)\big),

    with the output Hessians of :mod:`~collapselab.curvature.losses` (cross-entropy:
    :math:`\mathrm{diag}(p) - pp^\top`; MSE :math:`s\lVert f-e_y\rVert^2`: :math:`2sI`).
    Positive semi-definite. Products: ``jvp`` (``J V``), the output Hessian, ``vjp``.
    """

    def _batch(self, x: torch.Tensor, y: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        obj = self.objective

        def f(theta: torch.Tensor) -> torch.Tensor:
            return obj.forward(theta, x)

        out, pullback = vjp(f, obj.theta)
        check_finite_loss(obj.loss.value(out, y).sum())

        def product(v: torch.Tensor) -> torch.Tensor:
            jv = jvp(f, (obj.theta,), (v,))[1]
            return pullback(obj.loss.hessian_apply(out, jv))[0]

        return self._columns(product, V)


class EmpiricalFisherOperator(_DataOperator):
    r"""The (uncentred) empirical Fisher: the second moment of the per-sample gradients.

    .. math::
        F = \rho\sum_n g_n g_n^\top,\qquad g_n = J_n^\top\nabla_f\ell(f_n, y_n),\qquad
        F v = \rho\sum_n J_n^\top\,\nabla_f\ell_n\,\big(\nabla_f\ell_n^\top J_n v\big).

    The per-sample gradients are never formed: ``jvp`` gives :math:`J_n v`, one scalar per
    sample weights :math:`\nabla_f\ell_n`, and one ``vjp`` sums the batch.
    """

    def _batch(self, x: torch.Tensor, y: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        obj = self.objective

        def f(theta: torch.Tensor) -> torch.Tensor:
            return obj.forward(theta, x)

        out, pullback = vjp(f, obj.theta)
        check_finite_loss(obj.loss.value(out, y).sum())
        r = obj.loss.gradient(out, y)

        def product(v: torch.Tensor) -> torch.Tensor:
            jv = jvp(f, (obj.theta,), (v,))[1]
            return pullback(r * (r * jv).sum(-1, keepdim=True))[0]

        return self._columns(product, V)


class LowRankOperator(CurvatureOperator):
    r"""An explicit low-rank symmetric operator :math:`A\,\mathrm{diag}(w)\,A^\top`.

    Args:
        factors: ``A (P, r)``.
        weights: ``w (r,)`` (default ones).
    """

    def __init__(self, factors: torch.Tensor, weights: torch.Tensor | None = None) -> None:
        if not isinstance(factors, torch.Tensor) or factors.ndim != 2:
            raise ValueError("factors must be a (P, r) tensor")
        self.factors = factors
        self.weights = (
            torch.ones(factors.shape[1], dtype=factors.dtype, device=factors.device)
            if weights is None
            else weights.to(factors)
        )
        if self.weights.shape != (factors.shape[1],):
            raise ValueError(
                f"weights must have shape ({factors.shape[1]},), got {tuple(self.weights.shape)}"
            )
        self.dim = int(factors.shape[0])
        self.dtype = factors.dtype
        self.device = factors.device

    @property
    def rank_bound(self) -> int:
        """``r``, the number of factors."""
        return int(self.factors.shape[1])

    def _matmat(self, V: torch.Tensor) -> torch.Tensor:
        return self.factors @ (self.weights[:, None] * (self.factors.T @ V))

    def eigenpairs(self, rtol: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Every non-zero eigenpair, exactly, from the ``r × r`` Gram matrix.

        With :math:`w \\ge 0`: :math:`A\\,\\mathrm{diag}(w)A^\\top = BB^\\top`,
        :math:`B = A\\,\\mathrm{diag}(\\sqrt{w})`, whose non-zero eigenvalues are those of
        :math:`B^\\top B` and eigenvectors :math:`B u/\\sqrt{\\lambda}`. Eigenvalues at most
        ``rtol · λ_max`` (default ``r · P · ε``) count as zero and are dropped. Returns
        ``(values (k,) descending, vectors (P, k))``.
        """
        if bool((self.weights < 0).any()):
            raise ValueError("eigenpairs of a LowRankOperator need non-negative weights")
        B = self.factors * self.weights.sqrt()[None, :]
        gram = B.T @ B
        vals, vecs = torch.linalg.eigh(gram)
        vals, vecs = vals.flip(0), vecs.flip(1)
        top = float(vals[0]) if vals.numel() else 0.0
        tol = (rtol if rtol is not None else B.shape[1] * self.dim * _eps(self.dtype)) * top
        keep = vals > max(tol, 0.0)
        vals, vecs = vals[keep], vecs[:, keep]
        return vals, (B @ vecs) / vals.sqrt()[None, :]


class LinearCombination(CurvatureOperator):
    """``Σ_i c_i A_i`` of operators of one dimension (products: one per term)."""

    def __init__(self, operators: Sequence[CurvatureOperator], coefs: Sequence[float]) -> None:
        ops: list[CurvatureOperator] = []
        cs: list[float] = []
        for op, c in zip(operators, coefs, strict=True):
            if isinstance(op, LinearCombination):  # flatten nested sums
                ops += op.operators
                cs += [c * ci for ci in op.coefs]
            elif isinstance(op, CurvatureOperator):
                ops.append(op)
                cs.append(float(c))
            else:
                raise ArgumentTypeError(f"cannot combine a {type(op).__name__} with an operator")
        dims = {op.dim for op in ops}
        if len(dims) != 1:
            raise ValueError(f"operators of different dimensions cannot be combined: {dims}")
        self.operators, self.coefs = ops, cs
        self.dim = ops[0].dim
        self.dtype = ops[0].dtype
        self.device = ops[0].device

    def _matmat(self, V: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(V)
        for op, c in zip(self.operators, self.coefs, strict=True):
            out = out + c * op.matmat(V)
        return out


def gradient_covariance(objective: Objective, block: int = DEFAULT_BLOCK) -> LinearCombination:
    r"""The covariance of the per-sample gradients (paper 004, Appendix E.1):

    .. math::
        C = \frac1N\sum_n (g_n - \bar g)(g_n - \bar g)^\top = F - \bar g\bar g^\top,
        \qquad \bar g = \frac1N\sum_n g_n,

    the empirical Fisher (mean reduction) minus the outer product of the mean gradient
    (one extra pass for :math:`\bar g`).
    """
    if objective.reduction != "mean":
        raise ValueError("gradient_covariance needs an objective with reduction='mean'")
    g = objective.gradient()
    mean_part = LowRankOperator(g[:, None], torch.tensor([-1.0], dtype=g.dtype, device=g.device))
    return EmpiricalFisherOperator(objective, block) + mean_part


def _eps(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).eps)


__all__ = [
    "DEFAULT_BLOCK",
    "CurvatureOperator",
    "EmpiricalFisherOperator",
    "GGNOperator",
    "HessianOperator",
    "LinearCombination",
    "LowRankOperator",
    "gradient_covariance",
]
