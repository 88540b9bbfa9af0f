"""The common direction of weight changes and its decompositions (paper 000, §4.2, M6-M7).

Eq. 5 asks for the direction ``C ∈ R^h`` that best explains the weight changes of a layer
over a window of iterations and samples. For a given C, Lemma 1's optimal coefficients are
``ΔV = ΔWᵀ C / (CᵀC)``; substituting them leaves ``max_{||c||=1} sum ||ΔWᵀ c||^2``, so C is
the top eigenvector of the h x h Gram matrix

.. math::
    G = \\sum_{t, x} \\Delta W_t|_x\\, \\Delta W_t|_x^\\top
      = \\eta^2 \\sum_{t, x} \\|F_x\\|^2\\, g_x g_x^\\top

(the second form for per-sample updates ``ΔW|_x = -η g_x F_xᵀ``), i.e. the top left
singular vector of all the ΔW placed side by side. G is h x h in the layer's output width,
accumulated in a stream and merged by addition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from collapselab.checks import (
    ArrayLike,
    as_labels,
    as_matrix,
    as_vector,
    check_choice,
    check_int,
)
from collapselab.stats import CommonDirectionAccumulator


@dataclass(frozen=True)
class CommonDirections:
    """Top-k eigenpairs of the weight-change Gram ``G``.

    Attributes:
        directions: ``(h, k)`` orthonormal columns; column 0 is the primary common
            direction C (``||C|| = 1``), later columns are the recursive-deflation
            directions C_2, C_3, ... of Appendix G.
        eigenvalues: ``(k,)`` eigenvalues of G, descending: ``sum ||ΔWᵀ C_i||^2``, the
            squared singular values of the side-by-side changes.
        total: ``trace(G) = sum ||ΔW||_F^2``.
    """

    directions: torch.Tensor
    eigenvalues: np.ndarray
    total: float

    @property
    def primary(self) -> torch.Tensor:
        """The primary common direction C, shape ``(h,)``, unit norm."""
        return self.directions[:, 0]

    @property
    def explained(self) -> np.ndarray:
        """Fraction of ``sum ||ΔW||_F^2`` along each direction (NaN if G = 0)."""
        if self.total <= 0:
            return np.full_like(self.eigenvalues, np.nan)
        return self.eigenvalues / self.total


def _fix_sign(c: torch.Tensor, reference: torch.Tensor | None) -> torch.Tensor:
    if reference is not None:
        dot = float(c @ reference)
        if dot != 0.0:
            return c if dot > 0 else -c
    idx = int(torch.argmax(c.abs()))
    return c if c[idx] >= 0 else -c


def common_directions(
    gram: ArrayLike | CommonDirectionAccumulator,
    k: int = 1,
    sign_reference: ArrayLike | None = None,
) -> CommonDirections:
    """Common directions as the top eigenvectors of a weight-change Gram (Eq. 5, R10-R11).

    Args:
        gram: ``(h, h)`` symmetric positive semi-definite ``sum ΔW ΔWᵀ``, or a
            :class:`~collapselab.stats.CommonDirectionAccumulator` holding it.
        k: number of directions (``1 <= k <= h``).
        sign_reference: optional ``(h,)`` vector. C is defined only up to sign; each
            direction is oriented so that ``<C_i, sign_reference> > 0`` (e.g. pass the mean
            pre-activation gradient ``-sum g_x``). Without one, or when the inner product is
            exactly 0, the entry of largest magnitude is made positive.
    """
    if isinstance(gram, CommonDirectionAccumulator):
        if gram.is_empty:
            raise ValueError("the accumulator is empty; call update() with data first")
        gram = gram.gram
    g = as_matrix("gram", gram)
    h = g.shape[0]
    if g.shape[1] != h:
        raise ValueError(f"gram must be square (h, h), got shape {tuple(g.shape)}")
    scale = float(g.abs().max()) if g.numel() else 0.0
    if float((g - g.T).abs().max()) > 1e-10 * max(scale, 1e-300):
        raise ValueError("gram must be symmetric (a sum of ΔW ΔWᵀ)")
    k = check_int("k", k, minimum=1, maximum=h)
    ref = None if sign_reference is None else as_vector("sign_reference", sign_reference, g.device)
    if ref is not None and ref.shape[0] != h:
        raise ValueError(f"sign_reference must have length {h}, got {ref.shape[0]}")
    evals, evecs = torch.linalg.eigh(0.5 * (g + g.T))
    order = torch.argsort(evals, descending=True)[:k]
    dirs = torch.stack([_fix_sign(evecs[:, i], ref) for i in order.tolist()], dim=1)
    return CommonDirections(
        directions=dirs,
        eigenvalues=evals[order].clamp_min(0.0).cpu().numpy(),
        total=float(torch.trace(g)),
    )


@dataclass(frozen=True)
class DirectionDecomposition:
    """``Mᵀ = V Cᵀ + ε`` for a weight matrix or weight change M (Lemmas 1-2).

    Attributes:
        v: ``(d,)`` coefficients ``V = Mᵀ C / (CᵀC)`` (ΔV for a change, V for weights).
        eps: ``(d, h)`` residual ``ε = Mᵀ - Mᵀ C Cᵀ / (CᵀC)`` (Δε or ε).
        reconstruction_error: ``||V Cᵀ + ε - Mᵀ||_F / ||M||_F`` (0 up to rounding).
        orthogonality: ``||ε C|| / (||ε||_F ||C||)`` (0 up to rounding; 0 when ε = 0).
    """

    v: torch.Tensor
    eps: torch.Tensor
    reconstruction_error: float
    orthogonality: float


def _check_direction(matrix: ArrayLike, c: ArrayLike) -> tuple[torch.Tensor, torch.Tensor]:
    m = as_matrix("matrix", matrix)
    cv = as_vector("c", c, m.device)
    if cv.shape[0] != m.shape[0]:
        raise ValueError(
            f"c has length {cv.shape[0]} but matrix has {m.shape[0]} rows (output width h); "
            "expected C ∈ R^h for a weight of shape (h, d)"
        )
    if float(cv @ cv) == 0.0:
        raise ValueError("c must be non-zero")
    return m, cv


def common_direction_decomposition(matrix: ArrayLike, c: ArrayLike) -> DirectionDecomposition:
    """Project a weight (change) on a common direction (paper 000, Lemmas 1-2, Eq. 4, M6-M7).

    Lemma 1 (``matrix = ΔW``): ``ΔWᵀ = ΔV Cᵀ + Δε`` with ``ΔV = ΔWᵀC/(CᵀC)`` and
    ``Δε = ΔWᵀ - ΔWᵀCCᵀ/(CᵀC)``, the ΔV minimising ``||Δε||_F``.
    Lemma 2 (``matrix = W``): ``Wᵀ = V Cᵀ + ε`` likewise. In both ``ε C = 0``.

    Args:
        matrix: ``(h, d)`` weight or weight change (``nn.Linear.weight`` layout).
        c: ``(h,)`` common direction (any non-zero scale).
    """
    m, cv = _check_direction(matrix, c)
    mt = m.T
    v = mt @ cv / (cv @ cv)
    eps = mt - torch.outer(v, cv)
    m_norm = float(torch.linalg.matrix_norm(m))
    recon = float(torch.linalg.matrix_norm(torch.outer(v, cv) + eps - mt))
    eps_norm = float(torch.linalg.matrix_norm(eps))
    ortho = float(torch.linalg.vector_norm(eps @ cv))
    return DirectionDecomposition(
        v=v,
        eps=eps,
        reconstruction_error=recon / m_norm if m_norm > 0 else recon,
        orthogonality=ortho / (eps_norm * float(torch.linalg.vector_norm(cv)))
        if eps_norm > 0
        else 0.0,
    )


def residual_singular_values(matrix: ArrayLike, c: ArrayLike) -> np.ndarray:
    """Singular values of the residual ε of :func:`common_direction_decomposition` (R12).

    The paper's account of normalisation, momentum, initialisation and L2 (§4.10) rests on
    these: larger singular values of ε weaken the self-enhancing loop. Returned descending,
    ``min(h, d)`` values (at most ``min(h - 1, d)`` of them non-zero, as ε C = 0).
    """
    m, cv = _check_direction(matrix, c)
    mt = m.T
    eps = mt - torch.outer(mt @ cv / (cv @ cv), cv)
    return torch.linalg.svdvals(eps).cpu().numpy()


def primary_coefficients(pre_grads: ArrayLike, c: ArrayLike) -> np.ndarray:
    """Per-sample scalars ``Cᵀ D Ḟ|_x / ||C||`` (paper 000, Eq. 3 and Theorem 2's hypothesis).

    Args:
        pre_grads: ``(N, h)`` pre-activation gradients ``g_x = D Ḟ``.
        c: ``(h,)`` common direction.
    """
    g = as_matrix("pre_grads", pre_grads)
    cv = as_vector("c", c, g.device)
    if cv.shape[0] != g.shape[1]:
        raise ValueError(f"c has length {cv.shape[0]} but pre_grads has {g.shape[1]} columns")
    norm = torch.linalg.vector_norm(cv)
    if float(norm) == 0.0:
        raise ValueError("c must be non-zero")
    return (g @ (cv / norm)).cpu().numpy()


class SignConsistency(NamedTuple):
    """Per-class sign agreement of :func:`primary_coefficients` (R17).

    ``fraction[c]``: share of class-c samples whose coefficient has the class's majority
    sign (a zero coefficient has neither sign); ``majority_sign[c]`` ∈ {-1, 0, +1}, the
    estimate of α_c (0 for a tie or an empty class). Both NaN/0 for an empty class.
    """

    fraction: np.ndarray
    majority_sign: np.ndarray


def sign_consistency(
    pre_grads: ArrayLike, labels: ArrayLike, c: ArrayLike, n_classes: int | None = None
) -> SignConsistency:
    """Within-class sign consistency of ``Cᵀ D Ḟ|_x`` (paper 000, Theorem 2, M14, R17)."""
    coef = primary_coefficients(pre_grads, c)
    y, k = as_labels("labels", labels, coef.shape[0], n_classes)
    y_np = y.cpu().numpy()
    pos = np.bincount(y_np[coef > 0], minlength=k)
    neg = np.bincount(y_np[coef < 0], minlength=k)
    n = np.bincount(y_np, minlength=k)
    frac = np.full(k, np.nan)
    ok = n > 0
    frac[ok] = np.maximum(pos, neg)[ok] / n[ok]
    return SignConsistency(frac, np.sign(pos - neg).astype(np.int64))


def _stack_changes(name: str, changes: Sequence[ArrayLike]) -> list[torch.Tensor]:
    mats = [as_matrix(f"{name}[{i}]", m) for i, m in enumerate(changes)]
    if not mats:
        raise ValueError(f"{name} must hold at least one (h, d) matrix, got none")
    shape = mats[0].shape
    for i, m in enumerate(mats):
        if m.shape != shape:
            raise ValueError(
                f"{name}[{i}] has shape {tuple(m.shape)} but {name}[0] has {tuple(shape)}; "
                "expected the same layer's (h, d) matrix at every iteration"
            )
    dev = mats[0].device
    return [m.to(dev) for m in mats]


def deflation_directions(
    changes: Sequence[ArrayLike], k: int = 5, sign_reference: ArrayLike | None = None
) -> torch.Tensor:
    """Common directions C_1..C_k by the recursive deflation of Appendix G (R11).

    Solve Eq. 5 on the changes (the top eigenvector of ``sum_t ΔW_t ΔW_tᵀ``), replace every
    change by its Lemma-1 residual ``ΔW_t - C (ΔWᵀ_t C)ᵀ`` and solve again, k times. The
    directions are orthonormal; they equal the top-k left singular vectors of the changes
    placed side by side (tested), computed here the paper's way.

    Args:
        changes: the window's weight changes ``ΔW̄_t``, each ``(h, d)``.
        k: number of directions (``1 <= k <= h``).
        sign_reference: orients each direction as in :func:`common_directions`.

    Returns:
        ``(h, k)`` float64 tensor, column i = C_{i+1}.
    """
    mats = _stack_changes("changes", changes)
    h = mats[0].shape[0]
    k = check_int("k", k, minimum=1, maximum=h)
    dirs = []
    for _ in range(k):
        gram = sum(m @ m.T for m in mats)
        c = common_directions(gram, 1, sign_reference).primary
        dirs.append(c)
        mats = [m - torch.outer(c, m.T @ c) for m in mats]
    return torch.stack(dirs, dim=1)


@dataclass(frozen=True)
class DirectionStrengths:
    """Strengths of the top-k common directions of a window of changes (Fig. 4, M8, R11).

    Attributes:
        directions: ``(h, k)`` C_1..C_k by :func:`deflation_directions`.
        strengths: ``(k,)`` s_i (see :func:`direction_strengths` for the reductions).
        coefficients: ``(T, k, d)`` the per-iteration coefficients ``ΔV̄_{i,t} = ΔW̄_tᵀ C_i``.
        reduction: ``"signed_mean"`` or ``"mean_norm"``.
    """

    directions: torch.Tensor
    strengths: np.ndarray
    coefficients: torch.Tensor
    reduction: str

    @property
    def ratio(self) -> float:
        """``s_1 / s_2`` (the paper's "about 10x"); NaN with one direction or s_2 = 0."""
        if self.strengths.shape[0] < 2 or self.strengths[1] == 0:
            return float("nan")
        return float(self.strengths[0] / self.strengths[1])


def direction_strengths(
    changes: Sequence[ArrayLike],
    k: int = 5,
    reduction: str = "signed_mean",
    sign_reference: ArrayLike | None = None,
) -> DirectionStrengths:
    """Top-k common directions of a window and their strengths s_i (paper 000, Fig. 4, R11).

    With ``ΔV̄_{i,t} = ΔW̄_tᵀ C_i`` (``||C_i|| = 1``) the coefficients of C_i at iteration t:

    * ``"signed_mean"`` (the paper's formula): ``s_i = ||C_i (E_t ΔV̄_{i,t})ᵀ||_F
      = ||E_t ΔV̄_{i,t}||``; coefficients of opposite signs cancel over t (note A10);
    * ``"mean_norm"`` (the other reading of A10): ``s_i = E_t ||ΔV̄_{i,t}||``.

    Args:
        changes: the window's average weight changes ``ΔW̄_t`` (one ``(h, d)`` matrix per
            iteration: the probe-set mean or the mini-batch update of one class or all).
        k: number of directions.
        reduction: ``"signed_mean"`` or ``"mean_norm"``.
        sign_reference: orients the directions (see :func:`common_directions`); s_i do not
            depend on it.
    """
    reduction = check_choice("reduction", reduction, ("signed_mean", "mean_norm"))
    mats = _stack_changes("changes", changes)
    dirs = deflation_directions(mats, k, sign_reference)
    coef = torch.stack([m.T @ dirs for m in mats]).transpose(1, 2)  # (T, k, d)
    if reduction == "signed_mean":
        s = torch.linalg.vector_norm(coef.mean(dim=0), dim=1)
    else:
        s = torch.linalg.vector_norm(coef, dim=2).mean(dim=0)
    return DirectionStrengths(dirs, s.cpu().numpy(), coef, reduction)


@dataclass(frozen=True)
class ResidualTrajectory:
    """The weights' decomposition on C over training (R12, the mechanism of §4.10).

    Attributes:
        singular_values: ``(T, r)`` singular values of ε_t (descending, ``r = min(h, d)``).
        v_norm: ``(T,)`` ``||V_t||`` with ``V_t = W_tᵀ C / (CᵀC)``.
    """

    singular_values: np.ndarray
    v_norm: np.ndarray


def residual_trajectory(weights: Sequence[ArrayLike], c: ArrayLike) -> ResidualTrajectory:
    """ε-singular-value trajectories and ``||V_t||`` of a layer's weights W_t (R12).

    Lemma 2 at every recorded iteration with one fixed C (the window's common direction):
    ``W_tᵀ = V_t Cᵀ + ε_t``. The paper argues that momentum, a larger init and a smaller L2
    keep the singular values of ε_t large relative to ``||V_t|| ||C||``.

    Args:
        weights: ``W_t``, each ``(h, d)``, in order of iteration.
        c: ``(h,)`` common direction.
    """
    mats = _stack_changes("weights", weights)
    svs, norms = [], []
    for w in mats:
        dec = common_direction_decomposition(w, c)
        svs.append(torch.linalg.svdvals(dec.eps).cpu().numpy())
        norms.append(float(torch.linalg.vector_norm(dec.v)))
    return ResidualTrajectory(np.stack(svs), np.asarray(norms))
