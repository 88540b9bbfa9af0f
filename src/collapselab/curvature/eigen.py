r"""Top eigenpairs of a symmetric operator by restarted block Lanczos; the exact spectrum of a
small one (:func:`dense_spectrum`).

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

The Rayleigh–Ritz problem is solved in float64. The basis and its products are float64
(a float32 model's products are converted) unless the operator computes in float32 and
``tol >= FLOAT32_BASIS_TOL`` (10⁻⁴): then they stay float32, which halves the memory the
steps read (the basis work is memory-bound), while full reorthogonalisation (a second
Gram–Schmidt pass when the first removed much) keeps the basis orthonormal to float32
rounding: about 10⁻⁶ of the largest eigenvalue in the residuals, a few 10⁻⁶ in the
values, far below such a ``tol``. Residual norms come from the small Gram matrix ``(AB)ᵀAB``
(:math:`\lVert R\rVert^2 = y^\top (AB)^\top AB\, y - \theta^2`). With a float64 basis
that is exact up to float64 rounding, and the residual vectors are formed only below its
resolution (``100·sqrt(eps)`` of the largest Ritz value, float64 ``eps``). With a float32
basis it resolves no better than ``sqrt(eps₃₂) ≈ 3·10⁻⁴`` of it, so it only steers: the
pairs it calls unconverged are checked by their residual vectors (which are the
expansion), and convergence is certified by the residual vectors of every wanted pair,
so the returned ``residuals`` are then the norms of the residual vectors (float32) and
meet ``tol``. A step costs ``O(P · max_dim · block)`` besides its products. Memory is
``2 · P · (max_dim + block)`` numbers of the basis dtype in preallocated buffers
(``O(P·k)``); products come in blocks, which the operators of
:mod:`~collapselab.curvature.operators` vectorise.
When ``max_dim`` reaches ``P`` the basis spans the space and the result is exact (a dense
eigendecomposition from ``P`` products).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from collapselab.checks import ArgumentTypeError, check_choice, check_float, check_int
from collapselab.curvature.operators import CurvatureOperator, DenseOperator, all_finite

WHICH = ("LA", "LM", "SA")
"""Which end of the spectrum: largest algebraic, largest magnitude, smallest algebraic."""

FLOAT32_BASIS_TOL = 1e-4
"""The smallest ``tol`` at which a float32 operator gets a float32 basis (module docstring):
10⁻⁴ is a hundred times float32's rounding of the residuals and of the basis's
orthogonality (about 10⁻⁶ of the largest eigenvalue; the values move by a few 10⁻⁶)."""


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
    start: torch.Tensor | int | None = None,
) -> Eigenpairs:
    """The ``k`` extreme eigenpairs of ``op`` (module docstring).

    Args:
        op: a symmetric operator of dimension ``P``.
        k: how many pairs, ``1 <= k <= P``.
        which: ``"LA"`` (largest, default), ``"LM"`` (largest magnitude), ``"SA"``.
        tol: relative residual tolerance. For a float32 operator, ``tol >= 1e-4``
            (:data:`FLOAT32_BASIS_TOL`) keeps the basis in float32 (module docstring):
            the residuals still meet ``tol``, the values differ from a float64 basis's
            (same start) by a few ``1e-6`` of the largest (at most ``5e-6`` measured on
            the benchmark MLP's Hessian and GGN, where the float32 operator's own rounding
            moves them by ``4e-5``); the vectors, returned in float64, are orthonormal to
            about ``1e-6``.
        block: vectors added per step. The start is ``k`` random vectors whatever the
            block, so an eigenvalue of multiplicity up to ``k`` is found (e.g. paper 004's
            K² equal outliers). Default: 1 on the CPU, where a block product costs as much
            per vector as single ones and expanding by one residual at a time needs the
            fewest products (30 against 42 with blocks of 4 for the top 10 of a 100k-
            parameter MLP's Hessian, ``benchmarks/README.md``); ``min(k, 4)`` on other
            devices, where block products are cheaper per vector.
        max_dim: largest basis before a restart (default ``max(2k + 2·block, 6k, 40)``,
            at most ``P``).
        max_products: stop (``converged=False``) after this many products (default
            ``50 · max_dim``).
        seed: seed of the random starting block.
        start: the starting block. ``None`` (default): ``max(k, block)`` random vectors.
            An integer ``s``: ``s`` random vectors. A tensor ``(P, s)`` (or ``(P,)``): those
            vectors. With ``s < k`` the basis first grows by residuals (a Krylov space of
            the start) to ``k`` vectors. ``start=1`` is single-vector Lanczos with full
            reorthogonalisation and thick restarts: every product after the first extends
            one Krylov space, the fewest products for well-separated eigenvalues (21
            against 29 for the top 10 of the benchmark MLP's Hessian at ``tol=1e-3``,
            ``benchmarks/README.md``), but, as any single-vector Krylov method, it finds one
            vector of each multiple eigenvalue (in exact arithmetic): use a start of at
            least the multiplicity when eigenvalues may repeat (the default's ``k``).

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
    if block is None:
        block = 1 if torch.device(op.device).type == "cpu" else min(k, 4)
    b = min(check_int("block", block, minimum=1), P)
    dim_cap = max_dim if max_dim is not None else max(2 * k + 2 * b, 6 * k, 40)
    dim_cap = min(check_int("max_dim", dim_cap, minimum=k + 1) if dim_cap < P else P, P)
    budget = max_products if max_products is not None else 50 * dim_cap
    if dim_cap >= P:
        return _full_space(op, k, which)
    dtype = basis_dtype(op.dtype, tol)
    gen = torch.Generator().manual_seed(seed)
    # k random starting vectors: the basis always holds k Ritz pairs, and an eigenvalue of
    # multiplicity up to k is seen (a block Krylov space finds at most its start's rank).
    if start is None or (isinstance(start, int) and not isinstance(start, bool)):
        s = max(k, b) if start is None else check_int("start", start, minimum=1)
        if s > dim_cap - b:
            raise ValueError(f"start = {s} random vectors exceed max_dim - block = {dim_cap - b}")
        start = torch.randn(P, s, generator=gen, dtype=dtype)
    else:
        start = _start_block(start, P, dim_cap - b).to(dtype)
    basis = _Basis(P, max(dim_cap, k + 2 * b) + b, op.device, dtype)
    first = _orthonormal(start.to(op.device), None, gen)
    if first.shape[1] == 1 and b == 1:
        # Single-vector Lanczos until its own residual estimates say converged; the loop
        # below then certifies (and continues, with restarts, where they were wrong).
        products = _lanczos_phase(op, basis, first[:, 0], (k, dim_cap - b, budget), which, tol)
    else:
        # With block 1 (the CPU default) every product is a single vector, the start's too.
        basis.extend(first, _apply(op, first, 1 if b == 1 else first.shape[1]))
        products = first.shape[1]
    scale = 0.0
    # A float64 basis: the Gram estimate is exact up to float64 rounding, which it sees
    # squared. A float32 basis: the estimate steers, exact residuals certify (see _Basis).
    reach = 100 * float(torch.finfo(torch.float64).eps) ** 0.5
    while True:
        theta, Y = _ritz(basis.T, which)
        scale = max(scale, float(theta.abs().max()))
        n_check = min(len(theta), k + b)
        step = _Step(
            basis,
            Y,
            theta,
            basis.residual_norms(Y[:, :n_check], theta[:n_check]),
            (k, b, dim_cap),
            tol * scale,
            products >= budget and basis.size >= k,
        )
        if dtype == torch.float64:
            W = _estimated_step(step, reach * scale)
        else:
            W = _certified_step(step)
        if W is None:
            X = basis.combine(step.Y[:, :k]).to(torch.float64)
            res = step.res[:k]
            converged = bool((res <= step.threshold).all())
            return Eigenpairs(theta[:k], X, res, products, converged)
        if W.shape[1] == 0:  # every pair of a basis smaller than k converged: a new direction
            W = torch.randn(P, b, generator=gen, dtype=dtype).to(op.device)
        W = _orthonormal(W, basis.B, gen)
        basis.extend(W, _apply(op, W))
        products += W.shape[1]


def _lanczos_phase(
    op: CurvatureOperator,
    basis: _Basis,
    v: torch.Tensor,
    sizes: tuple[int, int, int],
    which: str,
    tol: float,
) -> int:
    r"""Single-vector Lanczos from the unit ``v`` with full reorthogonalisation, written
    into ``basis`` (its rows and products, then ``T`` and ``M`` once): the number of
    products.

    Step ``j`` costs one product and two or four passes over the basis (classical
    Gram–Schmidt, repeated when the first pass removed much), against about seven for a
    step of the block loop. The tridiagonal :math:`T_m` gives the residual norms of its
    Ritz pairs as :math:`\beta_m |s_{m,i}|` (the Lanczos relation
    :math:`AV_m = V_m T_m + \beta_m v_{m+1} e_m^\top`); it stops when those of the ``k``
    wanted pairs are below ``tol`` times the largest Ritz value, the basis holds
    ``most`` vectors, ``budget`` products are spent or the Krylov space is invariant.
    The estimates only steer: the caller certifies from the residual vectors.
    """
    k, most, budget = sizes
    Bt, ABt = basis._Bt, basis._ABt  # the phase fills the basis's buffers itself
    alpha: list[float] = []
    beta: list[float] = []
    m = 0
    while True:
        Bt[m] = v
        Av = _apply(op, v[:, None])[:, 0]
        ABt[m] = Av
        m += 1
        alpha.append(float(torch.dot(v.double(), Av.double())))
        w = Av - alpha[-1] * v
        if m > 1:
            w = w - beta[-1] * Bt[m - 2]
        before = float(w.norm())
        B = Bt[:m]
        w = w - B.T @ (B @ w)
        if float(w.norm()) < 0.7 * before:  # "twice is enough" (Kahan-Parlett)
            w = w - B.T @ (B @ w)
        beta.append(float(w.norm()))
        if m >= k:
            T = torch.diag(torch.tensor(alpha, dtype=torch.float64))
            off = torch.tensor(beta[:-1], dtype=torch.float64)
            T = T + torch.diag(off, 1) + torch.diag(off, -1)
            theta, S = torch.linalg.eigh(T)
            order = _order(theta, which)[:k]
            res = beta[-1] * S[-1, order].abs()
            if bool((res <= tol * float(theta.abs().max())).all()):
                break
        if m >= min(most, budget) or beta[-1] <= 1e-10 * max(abs(a) for a in alpha):
            break
        v = w / beta[-1]
    basis.adopt(m)
    return m


@dataclass
class _Step:
    """One Lanczos step's state: the basis, the Ritz coordinates ``Y`` (changed by a
    restart) and values ``theta``, the residual norms ``res`` of the first pairs (Gram
    estimates, replaced by exact norms where those are computed), ``sizes =
    (k, block, max_dim)``, the convergence ``threshold`` and whether the budget is
    ``spent``."""

    basis: _Basis
    Y: torch.Tensor
    theta: torch.Tensor
    res: torch.Tensor
    sizes: tuple[int, int, int]
    threshold: float
    spent: bool

    def residuals(self, idx: list[int] | torch.Tensor) -> torch.Tensor:
        """The residual vectors of the pairs ``idx``."""
        return self.basis.residuals(self.Y[:, idx], self.theta[idx])

    def restart_if_full(self, m: int) -> None:
        """A thick restart on the best Ritz vectors when ``m`` more vectors would pass
        ``max_dim`` (the Ritz pairs keep their order)."""
        k, b, dim_cap = self.sizes
        if self.basis.size + m <= dim_cap:
            return
        keep = max(k + b, dim_cap - 2 * b)
        self.basis.restart(self.Y[:, :keep], self.theta[:keep])
        self.Y = torch.eye(keep, dtype=self.Y.dtype, device=self.Y.device)


def _estimated_step(step: _Step, floor: float) -> torch.Tensor | None:
    """A step with a float64 basis: the residuals to expand by, ``None`` when every
    wanted pair has converged or the budget is spent."""
    (k, b, _), res, threshold = step.sizes, step.res, step.threshold
    # The estimate resolves residuals down to ~floor; only a tolerance below that
    # needs exact residuals, for the pairs the estimate cannot tell from converged.
    # Pairs above max(threshold, floor) are not converged and drive the expansion.
    unconverged = res > max(threshold, floor)
    # A start block of fewer than k vectors: the basis grows to k before any decision.
    full = len(res) >= k
    deciding = (full and not bool(unconverged[:k].any())) or step.spent
    # Every pair when the wanted ones might all have converged, else only those before
    # the b-th unconverged pair (the expansion takes the first b not converged).
    cut = len(res)
    if not deciding and bool(unconverged.any()):
        cut = int(torch.nonzero(unconverged).flatten()[:b][-1]) + 1
    if threshold < floor:
        idx = torch.nonzero(~unconverged[:cut]).flatten()
        if idx.numel():
            res[idx] = step.residuals(idx).norm(dim=0)
    done = res <= threshold
    if deciding and ((full and bool(done[:k].all())) or step.spent):
        return None
    # Expand by the residuals of the first b pairs that have not converged.
    pending = [i for i in range(cut) if not bool(done[i])][:b]
    step.restart_if_full(len(pending))
    return step.residuals(pending) if pending else step.basis.B[:, :0]


def _certified_step(step: _Step) -> torch.Tensor | None:
    """A step with a float32 basis (as :func:`_estimated_step`): the Gram estimates only
    steer. The pairs they call unconverged are checked in order by their residual
    vectors, which are the expansion; when no wanted pair is left unconverged (or the
    budget is spent), every wanted pair's residual is computed, and only those certify
    convergence."""
    (k, b, _), res, threshold = step.sizes, step.res, step.threshold
    checked: set[int] = set()

    def exact(idx: list[int]) -> torch.Tensor:
        R = step.residuals(idx)
        res[idx] = R.norm(dim=0).to(res.dtype)
        checked.update(idx)
        return R

    if not step.spent:
        step.restart_if_full(b)
        pending, columns = [], []
        for i in range(len(res)):
            if len(pending) == b:
                break
            if float(res[i]) > threshold:
                R = exact([i])
                if float(res[i]) > threshold:
                    pending.append(i)
                    columns.append(R)
        if any(i < k for i in pending):
            return torch.cat(columns, dim=1)
        if len(res) < k:  # a start block of fewer than k vectors, every pair converged
            return step.basis.B[:, :0]
    rest = [i for i in range(k) if i not in checked]
    if rest:
        exact(rest)
    left = [i for i in range(k) if float(res[i]) > threshold]
    if not left or step.spent:
        return None
    return step.residuals(left[:b])


def basis_dtype(op_dtype: torch.dtype, tol: float) -> torch.dtype:
    """The dtype of :func:`top_eigenpairs`'s basis: float32 for a float32 operator when
    ``tol >= FLOAT32_BASIS_TOL``, float64 otherwise (module docstring)."""
    if op_dtype == torch.float32 and tol >= FLOAT32_BASIS_TOL:
        return torch.float32
    return torch.float64


class _Basis:
    """An orthonormal basis ``B (P, n)`` with ``AB`` in preallocated buffers of the basis
    dtype (no copy per step), the projected matrix ``T = BᵀAB`` and the Gram matrix
    ``M = (AB)ᵀAB`` in float64.

    The residual of a Ritz pair ``(θ, x = By)`` (``y`` a unit eigenvector of the symmetric
    part of ``T``) is ``ABy − θBy``; with ``BᵀB = I`` its squared norm is
    ``yᵀMy − 2θ·yᵀTy + θ² = yᵀMy − θ²``, since ``yᵀTy = θ`` for the exact, not necessarily
    symmetric, ``T`` (rounded float32 products make ``A`` slightly asymmetric). This screens
    convergence at the cost of an ``n × n`` product instead of a ``P × n`` one, accurate to
    float64 rounding with a float64 basis. With a float32 basis ``T`` and ``M`` carry
    float32 sums of ``P`` products, and ``B`` is orthonormal to float32 rounding, so the
    estimate has no guaranteed resolution below ``sqrt(eps₃₂)``: it only steers, and
    :func:`top_eigenpairs` certifies convergence from the residual vectors.
    """

    def __init__(self, P: int, capacity: int, device: torch.device, dtype: torch.dtype) -> None:
        # Stored transposed, (capacity, P): the first n rows are contiguous, so B and AB
        # are transposed views that matrix products take without a copy.
        self.dtype = dtype
        self._Bt = torch.empty(capacity, P, dtype=dtype, device=device)
        self._ABt = torch.empty(capacity, P, dtype=dtype, device=device)
        self.T = torch.empty(0, 0, dtype=torch.float64, device=device)
        self.M = torch.empty(0, 0, dtype=torch.float64, device=device)
        self.size = 0

    @property
    def B(self) -> torch.Tensor:
        return self._Bt[: self.size].T

    @property
    def AB(self) -> torch.Tensor:
        return self._ABt[: self.size].T

    def extend(self, W: torch.Tensor, AW: torch.Tensor) -> None:
        """Append orthonormal columns ``W`` (orthogonal to ``B``) and their products."""
        # T is the exact projection BᵀAB, lower block WᵀAB computed rather than mirrored:
        # float32 products are not exactly symmetric, and with the exact T the Rayleigh
        # quotient yᵀTy equals the Ritz value θ of its symmetric part, which makes the
        # Gram-matrix residual estimate exact up to float64 rounding (see the class).
        C, L, D = (t.double() for t in (self.B.T @ AW, W.T @ self.AB, W.T @ AW))
        E, F = (t.double() for t in (self.AB.T @ AW, AW.T @ AW))
        self.T = torch.cat([torch.cat([self.T, C], 1), torch.cat([L, D], 1)], 0)
        self.M = torch.cat([torch.cat([self.M, E], 1), torch.cat([E.T, F], 1)], 0)
        n, m = self.size, W.shape[1]
        self._Bt[n : n + m] = W.T
        self._ABt[n : n + m] = AW.T
        self.size = n + m

    def adopt(self, n: int) -> None:
        """Take the first ``n`` rows of the buffers, written by the caller (orthonormal
        rows and their products), as the basis: ``T`` and ``M`` computed once."""
        self.size = n
        self.T = (self.B.T @ self.AB).double()
        self.M = (self.AB.T @ self.AB).double()

    def restart(self, Y: torch.Tensor, theta: torch.Tensor) -> None:
        """``B ← BY``, ``AB ← (AB)Y`` for orthonormal Ritz vectors ``Y`` with values ``θ``."""
        q = Y.shape[1]
        B, AB = self.combine(Y), self.combine(Y, self._ABt)
        self._Bt[:q], self._ABt[:q] = B.T, AB.T
        self.T, self.M, self.size = Y.T @ self.T @ Y, Y.T @ self.M @ Y, q

    def residual_norms(self, Y: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """``‖ABy − θBy‖`` for each column ``y`` of ``Y``, from ``M`` (see the class)."""
        squared = ((self.M @ Y) * Y).sum(0) - theta**2
        return squared.clamp_min(0.0).sqrt()

    def combine(self, Y: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """``BY`` (or ``ABY`` with ``rows=self._ABt``) for float64 ``Y (n, m)``, in the basis
        dtype, as a ``(P, m)`` view of a row-major ``(m, P)`` product (float32 matrix
        products of this shape are several times faster than ``B @ Y``)."""
        rows = self._Bt if rows is None else rows
        return (Y.T.to(self.dtype) @ rows[: self.size]).T

    def residuals(self, Y: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """The residual vectors ``ABY − BYΘ`` (``P × m``), in the basis dtype."""
        return self.combine(Y, self._ABt) - self.combine(Y) * theta.to(self.dtype)


def _apply(op: CurvatureOperator, V: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """``A V`` in the dtype of ``V`` (the operator computes in its own), ``chunk`` columns
    per product (default all), checked finite."""
    step = chunk or V.shape[1]
    parts = [op.matmat(V[:, i : i + step]) for i in range(0, V.shape[1], step)]
    AV = (parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)).to(V.dtype)
    if not all_finite(AV):
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
    """Columns of ``W`` orthonormalised against ``B`` (classical Gram–Schmidt, repeated when
    the first pass removed much of a column) and
    among themselves; a column that vanishes (an invariant subspace was reached: less
    than ``max(1e-8, 1000·eps)`` of it is left) is
    replaced by a random direction, so the basis keeps growing."""
    scale = W.norm(dim=0).clamp_min(torch.finfo(W.dtype).tiny)
    W = W / scale
    if B is not None and B.shape[1]:
        W = W - B @ (B.T @ W)
        if bool((W.norm(dim=0) < 0.7).any()):  # "twice is enough" (Kahan-Parlett)
            W = W - B @ (B.T @ W)
    if W.shape[1] == 1:  # the QR of one column is its normalisation
        norm = W.norm(dim=0)
        Q, left = W / norm.clamp_min(torch.finfo(W.dtype).tiny), norm
    else:
        Q, Rf = torch.linalg.qr(W)
        left = Rf.diagonal().abs()
    weak = left < max(1e-8, 1000 * float(torch.finfo(W.dtype).eps))
    if bool(weak.any()) and gen is not None:
        fresh = torch.randn(W.shape[0], int(weak.sum()), generator=gen, dtype=W.dtype)
        fresh = fresh.to(W)
        basis = Q[:, ~weak] if B is None else torch.cat([B, Q[:, ~weak]], dim=1)
        for _ in range(2):
            fresh = fresh - basis @ (basis.T @ fresh)
        Q = torch.cat([Q[:, ~weak], torch.linalg.qr(fresh)[0]], dim=1)
    return Q


def _start_block(start: torch.Tensor, P: int, most: int) -> torch.Tensor:
    """A user's start block as ``(P, s)``, ``1 <= s <= most``, checked finite."""
    if not isinstance(start, torch.Tensor):
        raise ArgumentTypeError(f"start must be a torch.Tensor, got {type(start).__name__}")
    block = start.detach().reshape(P, -1) if start.ndim == 1 else start.detach()
    if block.ndim != 2 or block.shape[0] != P or not 1 <= block.shape[1] <= most:
        raise ValueError(
            f"start must have shape ({P}, s) with 1 <= s <= {most}, got {tuple(start.shape)}"
        )
    if not bool(torch.isfinite(block).all()):
        raise ValueError("start holds NaN or Inf")
    return block


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


def dense_spectrum(op: object) -> torch.Tensor:
    """Every eigenvalue of ``op``, descending, exactly: a
    :class:`~collapselab.curvature.operators.DenseOperator`'s eigenpairs, another operator's
    dense matrix (``P`` products: small problems), or an explicit symmetric matrix (a
    tensor or NumPy array, wrapped as a ``DenseOperator``)."""
    if not isinstance(op, CurvatureOperator):
        op = DenseOperator(op)
    elif not isinstance(op, DenseOperator):
        op = DenseOperator(op.dense())
    return op.eigenpairs()[0]


__all__ = [
    "FLOAT32_BASIS_TOL",
    "WHICH",
    "Eigenpairs",
    "basis_dtype",
    "dense_spectrum",
    "top_eigenpairs",
]
