r"""The principal coordinate system of paper 002 (Def. 1): a dataset's PC frame.

``Sigma_XX = X^T X = U D U^T`` (uncentred, a **sum** over examples, as in the paper), the
class sums ``M = Sigma_YX U`` along each principal direction and the least-squares optimum
in that frame. **Layout: rows**, ``x`` of shape ``(n, q)`` and targets ``y`` of shape
``(n, K)``. The theory of the PC bias (:mod:`collapselab.theory.pcbias`) and the metrics
that read a network in this frame (:mod:`collapselab.metrics.pcbias`) both take it from
here: it is data, below both.

Published vs corrected (note 002 §3.6, erratum 1): ``W_opt`` is printed ``Y X^T (X X^T)``
(the inverse is missing); corrected ``Sigma_YX Sigma_XX^{+}``, i.e. ``m_j / d_j`` per PC
column (:meth:`PCFrame.optimum`, ``variant``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collapselab.checks import as_real_array, check_choice

__all__ = ["VARIANTS", "PCFrame", "frame_data", "frame_matrices", "principal_frame"]

VARIANTS = ("published", "corrected")
"""The two readings of a formula of paper 002 where the printed one fails (note 002 §3.6)."""


@dataclass(frozen=True)
class PCFrame:
    r"""A dataset in its principal coordinate system (Def. 1, uncentred, summed).

    Attributes:
        eigenvalues: ``d`` of shape ``(q,)``, descending, eigenvalues of
            ``Sigma_XX = X^T X`` (squared singular values of ``x``); those below
            ``q * eps * d_1`` are set to exactly 0.
        basis: ``U`` of shape ``(q, q)``, orthonormal eigenvectors as columns (each
            column's largest-magnitude entry positive, for reproducible signs).
        class_sums: ``M = Sigma_YX U`` of shape ``(K, q)``; column ``m_j`` is the class-sum
            vector along PC ``j`` (row ``k`` is the sum of class ``k``'s points with
            one-hot targets).
        target_energy: ``‖Y‖_F²``, needed for the loss.
    """

    eigenvalues: np.ndarray
    basis: np.ndarray
    class_sums: np.ndarray
    target_energy: float

    @property
    def n_pcs(self) -> int:
        return int(self.eigenvalues.shape[0])

    @property
    def n_outputs(self) -> int:
        return int(self.class_sums.shape[0])

    def rotate(self, w: object) -> np.ndarray:
        """``W̃ = W U`` for ``w`` of shape ``(..., K, q)`` (input coordinates -> PCs)."""
        return frame_matrices("w", w, self.n_pcs) @ self.basis

    def unrotate(self, w_pc: object) -> np.ndarray:
        """``W = W̃ U^T`` (PCs -> input coordinates)."""
        return frame_matrices("w_pc", w_pc, self.n_pcs) @ self.basis.T

    def optimum(self, variant: str = "corrected") -> np.ndarray:
        r"""``W̃_opt`` in PC coordinates, shape ``(K, q)``.

        ``"corrected"``: :math:`W_{opt} = \Sigma_{YX}\Sigma_{XX}^{+}`, so column ``j`` is
        :math:`m_j / d_j` (0 where ``d_j = 0``; there ``m_j = 0`` too).
        ``"published"``: the printed :math:`W_{opt} = Y X^T (X X^T)`, i.e. column ``j`` is
        :math:`m_j d_j` (not a stationary point of the loss).
        """
        d = self.eigenvalues
        if check_choice("variant", variant, VARIANTS) == "published":
            return self.class_sums * d
        inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
        return self.class_sums * inv

    def loss(self, w_pc: object) -> np.ndarray:
        r"""Eq. 5 in PC coordinates, shape ``w_pc.shape[:-2]``:

        .. math::

            \mathcal L = \tfrac12 \sum_j d_j \lVert \tilde w_j\rVert^2
                - \sum_j \tilde w_j \cdot m_j + \tfrac12 \lVert Y\rVert_F^2 .
        """
        w = frame_matrices("w_pc", w_pc, self.n_pcs)
        quad = 0.5 * np.einsum("...kj,j->...", w * w, self.eigenvalues)
        return quad - np.einsum("...kj,kj->...", w, self.class_sums) + 0.5 * self.target_energy

    def optimal_loss(self) -> float:
        r""":math:`\mathcal L^* = \tfrac12\lVert Y\rVert_F^2 - \tfrac12 \sum_{d_j>0}
        \lVert m_j\rVert^2 / d_j`."""
        return float(self.loss(self.optimum("corrected")))


def frame_data(x: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    """``x`` ``(n, q)`` and targets ``y`` ``(n, K)`` as float64 arrays, one row per example
    (a clear error otherwise)."""
    xa = as_real_array("x", x, ndim=2, layout="(n, q)")
    ya = as_real_array("y", y, ndim=2, layout="(n, K)")
    if ya.shape[0] != xa.shape[0]:
        raise ValueError(
            f"y has {ya.shape[0]} rows but x has {xa.shape[0]}: one target row per example"
        )
    return xa, ya


def principal_frame(x: object, y: object) -> PCFrame:
    r"""The principal coordinate system of ``x`` ``(n, q)`` with targets ``y`` ``(n, K)``.

    :math:`\Sigma_{XX} = X^T X = U D U^T` (uncentred, a **sum** over examples, as in the
    paper; :class:`collapselab.data.pca.PCA` instead normalises by ``n`` and drops null
    directions, which the closed form needs: there ``w_j`` never moves) and
    :math:`M = \Sigma_{YX} U`.
    """
    xa, ya = frame_data(x, y)
    q = xa.shape[1]
    evals, evecs = np.linalg.eigh(xa.T @ xa)
    evals, evecs = evals[::-1].copy(), evecs[:, ::-1].copy()
    evals[evals < q * np.finfo(np.float64).eps * max(evals[0], 0.0)] = 0.0
    pivot = np.abs(evecs).argmax(0)
    evecs *= np.sign(evecs[pivot, np.arange(q)])
    return PCFrame(evals, evecs, ya.T @ xa @ evecs, float((ya * ya).sum()))


def frame_matrices(name: str, w: object, q: int) -> np.ndarray:
    """``w`` as a float64 array of ``(K, q)`` matrices, ``(..., K, q)``: one column per PC of
    a ``q``-dimensional frame (a clear error naming ``name`` otherwise)."""
    a = as_real_array(name, w)
    if a.ndim < 2 or a.shape[-1] != q:
        raise ValueError(f"{name} must have shape (..., K, {q}), got {a.shape}")
    return a
