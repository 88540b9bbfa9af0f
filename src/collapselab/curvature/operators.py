r"""Matrix-free curvature operators: one class per matrix, products by batched autograd.

Every operator is a symmetric ``P × P`` matrix that is never formed: it applies to a block
of vectors ``V (P, m)`` (:meth:`CurvatureOperator.matmat`). Per batch the forward pass
(and, for the Hessian, the gradient with its graph) is computed once and the ``m``
products are batched backward passes through that graph
(``torch.autograd.grad(..., is_grads_batched=True)``, ``block`` vectors at a time); the
model is called functionally (:func:`torch.func.functional_call`) at the group values
``θ``. With ``cache=True`` (default) the graphs of every batch are built on the first
product and kept, so later products make no forward pass (memory: the graph of a forward
and backward pass over all the data, which suits the subsets curvature is measured on);
``cache=False`` rebuilds them at each product (a pass over the data each, the memory of
one batch). Memory is otherwise ``O(P·m)``.

For an :class:`~collapselab.curvature.objective.Objective`
:math:`\mathcal{L}(\theta) = \rho\sum_n \ell(f_n(\theta), y_n)` with Jacobians
:math:`J_n = \partial f_n/\partial\theta` (``C × P``):

* :class:`HessianOperator`: :math:`H = \nabla^2_\theta \mathcal{L}` (double backward);
* :class:`GGNOperator`: the generalized Gauss–Newton matrix
  :math:`G = \rho\sum_n J_n^\top \nabla_f^2\ell_n\, J_n`; for piece-wise linear networks
  with MSE, :math:`G = H`;
* :class:`EmpiricalFisherOperator`: :math:`F = \rho\sum_n g_n g_n^\top` with the
  per-sample gradients :math:`g_n = J_n^\top \nabla_f\ell_n` (never formed);
* :class:`LowRankOperator`: :math:`A\,\mathrm{diag}(w)\,A^\top` from explicit factors
  (Papyan's class and cross-class parts); :class:`LinearCombination`: sums and
  differences of operators (``G - G_class - G_cross``, knock-outs);
* :class:`DenseOperator`: an explicit symmetric matrix (the dense layer-wise matrices of
  paper 004's deep UFM, :mod:`collapselab.theory.dlufm_layerwise`; references in tests),
  with its exact eigendecomposition, so that dense and matrix-free matrices share one
  vocabulary (outliers, Papyan's decomposition, alignment).

:func:`gradient_covariance` is :math:`F - \bar g\bar g^\top` with ``reduction="mean"``:
the covariance of the per-sample gradients (paper 004, Appendix E.1).

:meth:`CurvatureOperator.dense` forms the matrix from ``P`` products (small problems and
tests); :meth:`CurvatureOperator.to_scipy` gives a :class:`scipy.sparse.linalg.LinearOperator`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from collapselab.checks import ArgumentTypeError, as_tensor, check_int
from collapselab.curvature.objective import Objective, check_finite_loss

DEFAULT_BLOCK = 16
"""Vectors per batched backward pass: bounds the memory of the products of one batch."""


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
    """An operator that sums per-batch products over an objective's data.

    Args:
        objective: the objective.
        block: vectors per batched backward pass.
        cache: keep every batch's graph after the first product (module docstring).
    """

    def __init__(
        self, objective: Objective, block: int = DEFAULT_BLOCK, *, cache: bool = True
    ) -> None:
        if not isinstance(objective, Objective):
            raise ArgumentTypeError(
                f"objective must be a collapselab.curvature.Objective, got "
                f"{type(objective).__name__}"
            )
        self.objective = objective
        self.block = check_int("block", block, minimum=1)
        self.cache = bool(cache)
        self.dim = objective.dim
        self.dtype = objective.dtype
        self.device = objective.device
        self._graphs: list[tuple[Any, ...]] | None = None
        self._n = 0

    def _matmat(self, V: torch.Tensor) -> torch.Tensor:
        if not self.cache:
            return self.objective.accumulate(lambda x, y: self._apply(self._prepare(x, y), V))
        if self._graphs is None:
            graphs, n = [], 0
            for x, y in self.objective.batches():
                graphs.append(self._prepare(x, y))
                n += int(y.shape[0])
            self._graphs, self._n = graphs, n
        total = sum(self._apply(graph, V) for graph in self._graphs)
        return total / self._n if self.objective.reduction == "mean" else total

    def _prepare(self, x: torch.Tensor, y: torch.Tensor) -> tuple[Any, ...]:
        """The graph of one batch that the products differentiate through."""
        raise NotImplementedError

    def _apply(self, graph: tuple[Any, ...], V: torch.Tensor) -> torch.Tensor:
        """The batch's unscaled products ``(P, m)`` from its graph."""
        raise NotImplementedError

    def _pullbacks(
        self, output: torch.Tensor, theta: torch.Tensor, cotangents: torch.Tensor
    ) -> torch.Tensor:
        """``(∂ output/∂θ)ᵀ c`` for a block of cotangents ``(m, *output.shape)``, as
        ``(P, m)``: batched backward passes through the kept graph, ``block`` at a time."""
        parts = [
            _batched_vjp(output, theta, cotangents[start : start + self.block])
            for start in range(0, cotangents.shape[0], self.block)
        ]
        out = torch.cat(parts).T
        if not all_finite(out):
            raise ValueError(
                f"{type(self).__name__}: NaN or Inf in a product on a batch (is the loss or "
                "the model's output NaN there?)"
            )
        return out

    def _jacobian_products(
        self, jtu: torch.Tensor, u: torch.Tensor, V: torch.Tensor
    ) -> torch.Tensor:
        """``J v`` for every column ``v`` of ``V``, as ``(m, *u.shape)``, by the double
        backward trick: ``jtu = Jᵀu`` is linear in the dummy ``u``, and its vector-Jacobian
        product with ``v`` is ``J v``."""
        parts = [
            _batched_vjp(jtu, u, V[:, start : start + self.block].T)
            for start in range(0, V.shape[1], self.block)
        ]
        return torch.cat(parts)

    def _graph(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(θ as a leaf, f(x; θ))`` with the graph kept for the products."""
        theta = self.objective.theta.detach().requires_grad_(True)
        return theta, self.objective.forward(theta, x)

    def _output_graph(self, x: torch.Tensor, y: torch.Tensor) -> tuple[Any, ...]:
        """``(θ, f, u, Jᵀu, y)``: the outputs' graph and that of ``Jᵀu`` for a dummy ``u``."""
        with torch.enable_grad():
            theta, out = self._graph(x)
            check_finite_loss(self.objective.loss.value(out.detach(), y).sum())
            u = torch.zeros_like(out, requires_grad=True)
            (jtu,) = torch.autograd.grad(out, theta, grad_outputs=u, create_graph=True)
        return theta, out, u, jtu, y

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.objective!r})"


def _batched_vjp(output: torch.Tensor, inputs: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
    """``(∂ output/∂ inputs)ᵀ c`` for each ``c`` of ``chunk (m, *output.shape)``, as
    ``(m, *inputs.shape)``, through a kept graph: one vmapped backward pass, or a plain one
    for a single vector (vmap's batching costs about a third more per vector there)."""
    if chunk.shape[0] == 1:
        (part,) = torch.autograd.grad(output, inputs, grad_outputs=chunk[0], retain_graph=True)
        return part.unsqueeze(0)
    (part,) = torch.autograd.grad(
        output, inputs, grad_outputs=chunk.contiguous(), is_grads_batched=True, retain_graph=True
    )
    return part


class HessianOperator(_DataOperator):
    r"""The Hessian of the objective in its parameter group.

    .. math::
        H = \nabla^2_\theta \mathcal{L}
          = \rho\sum_n \Big(J_n^\top \nabla_f^2\ell_n\, J_n
            + \sum_{c} \frac{\partial \ell_n}{\partial f_c}\,\nabla^2_\theta f_{n,c}\Big),
        \qquad Hv = \frac{d}{dt}\,\nabla_\theta\mathcal{L}(\theta + t v)\Big|_{t=0}.

    Products are double backward passes: per batch the gradient is built with its graph,
    then differentiated along every ``v`` of the block.

    Args:
        objective, block, cache: as for every data operator.
        fused_ce: for a cross-entropy objective, build the gradient through
            ``torch.nn.functional.cross_entropy`` (PyTorch's fused ``log_softmax``
            backward) instead of the loss's log-sum-exp form. Same matrix; in float32 its
            products are rounded about three times less (the log-sum-exp form's second
            derivative goes through ``exp(f - logsumexp(f))`` again: 7.9e-4 against 2.4e-4
            of the largest eigenvalue on the top-10 eigenvectors of the benchmark MLP
            trained 300 steps, ``benchmarks/README.md``). Off by default, so that existing
            results keep their float32 rounding bit for bit.
    """

    def __init__(
        self,
        objective: Objective,
        block: int = DEFAULT_BLOCK,
        *,
        cache: bool = True,
        fused_ce: bool = False,
    ) -> None:
        super().__init__(objective, block, cache=cache)
        self.fused_ce = bool(fused_ce)

    def _batch_loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``Σ_batch ℓ`` with the graph the products differentiate twice."""
        if self.fused_ce and self.objective.loss.name == "ce":
            return torch.nn.functional.cross_entropy(out, y, reduction="sum")
        return self.objective.loss.value(out, y).sum()

    def _prepare(self, x: torch.Tensor, y: torch.Tensor) -> tuple[Any, ...]:
        with torch.enable_grad():
            theta, out = self._graph(x)
            loss = check_finite_loss(self._batch_loss(out, y))
            (grad,) = torch.autograd.grad(loss, theta, create_graph=True)
        return theta, grad

    def _apply(self, graph: tuple[Any, ...], V: torch.Tensor) -> torch.Tensor:
        theta, grad = graph
        return self._pullbacks(grad, theta, V.T)


class GGNOperator(_DataOperator):
    r"""The generalized Gauss–Newton matrix of the objective in its parameter group.

    .. math::
        G = \rho\sum_n J_n^\top\, \nabla_f^2\ell(f_n, y_n)\, J_n,
        \qquad G v = \rho\sum_n J_n^\top \big(\nabla_f^2\ell_n\,(J_n v)\big),

    with the output Hessians of :mod:`~collapselab.curvature.losses` (cross-entropy:
    :math:`\mathrm{diag}(p) - pp^\top`; MSE :math:`s\lVert f-e_y\rVert^2`: :math:`2sI`).
    Positive semi-definite. Products: :math:`JV` by the double backward trick, the output
    Hessian, one batched backward pass.
    """

    def _prepare(self, x: torch.Tensor, y: torch.Tensor) -> tuple[Any, ...]:
        return self._output_graph(x, y)

    def _apply(self, graph: tuple[Any, ...], V: torch.Tensor) -> torch.Tensor:
        theta, out, u, jtu, _ = graph
        jv = self._jacobian_products(jtu, u, V)
        return self._pullbacks(out, theta, self.objective.loss.hessian_apply(out.detach(), jv))


class EmpiricalFisherOperator(_DataOperator):
    r"""The (uncentred) empirical Fisher: the second moment of the per-sample gradients.

    .. math::
        F = \rho\sum_n g_n g_n^\top,\qquad g_n = J_n^\top\nabla_f\ell(f_n, y_n),\qquad
        F v = \rho\sum_n J_n^\top\,\nabla_f\ell_n\,\big(\nabla_f\ell_n^\top J_n v\big).

    The per-sample gradients are never formed: :math:`J_n v` by the double backward trick,
    one scalar per sample weighting :math:`\nabla_f\ell_n`, one batched backward pass.
    """

    def _prepare(self, x: torch.Tensor, y: torch.Tensor) -> tuple[Any, ...]:
        return self._output_graph(x, y)

    def _apply(self, graph: tuple[Any, ...], V: torch.Tensor) -> torch.Tensor:
        theta, out, u, jtu, y = graph
        r = self.objective.loss.gradient(out.detach(), y)
        jv = self._jacobian_products(jtu, u, V)
        return self._pullbacks(out, theta, r * (r * jv).sum(-1, keepdim=True))


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
        :math:`B^\\top B` and eigenvectors :math:`B u/\\sqrt{\\lambda}`. The Gram matrix and
        its eigendecomposition are float64 whatever the factors' dtype, and eigenvalues at
        most ``rtol · λ_max`` (default ``r · P · ε₆₄``) count as zero and are dropped: a
        float32 ``ε`` there (``r · P · 1.2e-7``, 0.6 for 100 factors of 50,176 weights)
        dropped genuine eigenvalues, not only rounding. Returns ``(values (k,) descending,
        vectors (P, k))`` in the factors' dtype.
        """
        if bool((self.weights < 0).any()):
            raise ValueError("eigenpairs of a LowRankOperator need non-negative weights")
        B = self.factors.to(torch.float64) * self.weights.to(torch.float64).sqrt()[None, :]
        gram = B.T @ B
        vals, vecs = torch.linalg.eigh(gram)
        vals, vecs = vals.flip(0), vecs.flip(1)
        top = float(vals[0]) if vals.numel() else 0.0
        tol = (rtol if rtol is not None else B.shape[1] * self.dim * _eps(torch.float64)) * top
        keep = vals > max(tol, 0.0)
        vals, vecs = vals[keep], vecs[:, keep]
        vectors = (B @ vecs) / vals.sqrt()[None, :]
        return vals.to(self.dtype), vectors.to(self.dtype)


class DenseOperator(CurvatureOperator):
    r"""An explicit symmetric ``P × P`` matrix as an operator, in float64.

    The matrix kept is the symmetric part :math:`(A + A^\top)/2` of the one given: ``A``
    itself, to the bit, when ``A`` is symmetric (``A + A = 2A`` and halving are exact);
    an autodiff Hessian is symmetric only up to rounding. Products are ``A V``;
    :meth:`dense` returns the matrix and :meth:`eigenpairs` every eigenpair, exactly.

    Args:
        matrix: ``(P, P)`` finite real numbers, a NumPy array or a tensor (kept on its
            device).
    """

    def __init__(self, matrix: object) -> None:
        A = as_tensor("matrix", matrix, detach=True)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"matrix must be a square (P, P) matrix, got shape {tuple(A.shape)}")
        if A.is_complex() or A.dtype == torch.bool:
            raise ArgumentTypeError(f"matrix must be real, got dtype {A.dtype}")
        A = A.to(torch.float64)
        if not all_finite(A):
            raise ValueError("matrix must be finite (it holds NaN or Inf)")
        self.matrix = 0.5 * (A + A.T)
        self.dim = int(A.shape[0])
        self.dtype = torch.float64
        self.device = A.device
        self._eigen: tuple[torch.Tensor, torch.Tensor] | None = None

    def _matmat(self, V: torch.Tensor) -> torch.Tensor:
        return self.matrix @ V

    def dense(self, block: int = 64) -> torch.Tensor:
        """The matrix itself (a copy; no products)."""
        return self.matrix.clone()

    def eigenpairs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every eigenpair: ``(values (P,) descending, vectors (P, P))``, the vectors as
        orthonormal columns in the order of the values.

        Computed once (the matrix does not change) by LAPACK's symmetric solver through
        NumPy, ``numpy.linalg.eigh``: the dense theory's spectra were NumPy's before it
        used this operator, and within a degenerate eigenspace (paper 004's ``K²`` equal
        outliers at the optimum) the basis a solver returns is its own choice, so the
        same solver keeps every stored coefficient on those vectors.
        """
        if self._eigen is None:
            values, vectors = np.linalg.eigh(self.matrix.cpu().numpy())
            self._eigen = (
                torch.from_numpy(values[::-1].copy()).to(self.device),
                torch.from_numpy(vectors[:, ::-1].copy()).to(self.device),
            )
        return self._eigen[0].clone(), self._eigen[1].clone()


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


def all_finite(t: torch.Tensor) -> bool:
    """Whether every entry of ``t`` is finite. A float64 sum first (a tenth of the cost of
    the elementwise test): it is NaN or infinite whenever an entry is, and finite values
    overflow it only beyond ``1e308 / numel``, when the elementwise test decides."""
    return bool(torch.isfinite(t.sum(dtype=torch.float64))) or bool(torch.isfinite(t).all())


def _eps(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).eps)


__all__ = [
    "DEFAULT_BLOCK",
    "CurvatureOperator",
    "DenseOperator",
    "EmpiricalFisherOperator",
    "GGNOperator",
    "HessianOperator",
    "LinearCombination",
    "LowRankOperator",
    "all_finite",
    "gradient_covariance",
]
