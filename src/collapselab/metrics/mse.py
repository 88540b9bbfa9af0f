r"""The MSE-loss family of Han, Papyan & Donoho (note 003 §2.4-2.5, §3.3-3.4, §4.4).

Paper's loss (Eq. 2), with the bias penalised and ``Ave`` the class-weighted average
``sum_c pi_c Ave_{i in c}`` (the plain sample average for balanced data):

``L(W, b) = (1/2) Ave ||W h + b - y||^2 + (lam/2)(||W||_F^2 + ||b||^2)``.

In extended coordinates ``W~ = [W, b]``, ``h~ = [h; 1]``, the loss is quadratic in ``W~``
with Hessian ``S~ + lam I``, ``S~ = Ave h~ h~^T``, and minimiser (Proposition 1)

``W~_LS = Ave(y h~^T) (S~ + lam I)^{-1}``.

Exact decompositions (Theorems 1-2), each term computed from the class statistics only:

* ``L = L_LS + L_LS⊥`` with ``L_LS⊥ = (1/2) tr((W~ - W~_LS)(S~ + lam I)(W~ - W~_LS)^T)``;
* ``L_LS = L_NC1 + L_NC2/3`` with
  ``L_NC1 = (1/2) tr(W~_LS (Sigma~_W + lam I) W~_LS^T)`` and
  ``L_NC2/3 = (1/2) sum_c pi_c ||W~_LS mu~_c - e_c||^2`` (``(1/(2C)) ||W~_LS M~ - I||_F^2``
  when balanced).

Everything here needs the dense within-class covariance (statistics collected with
``mode="dense"``); the SNR quantities need it nonsingular (``N - C >= D``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from collapselab.checks import (
    check_between_rank,
    check_choice,
    check_classifier,
    check_float,
    check_int,
)
from collapselab.stats import ClassStats

_EPS = torch.finfo(torch.float64).eps

REDUCTIONS = ("mean", "sum", "sum_classes", "paper")


def paper_lambda(
    weight_decay: float,
    n_classes: int,
    reduction: str = "mean",
    batch_size: int | None = None,
) -> float:
    r"""The paper's ``lam`` (Eq. 2) equivalent to a PyTorch MSE objective (note 003 §4.4).

    Training minimises ``J = criterion + (wd/2) ||theta||^2`` (coupled L2 weight decay, as
    ``torch.optim.SGD(weight_decay=wd)``; decoupled decay such as AdamW's is not an L2
    penalty and has no such ``lam``). Rescaling ``J`` to the paper's
    ``(1/2) Ave ||f(h) - y||^2 + (lam/2) ||theta||^2`` gives, per ``reduction``:

    * ``"mean"``: ``nn.MSELoss()`` averages over batch *and* classes, ``J = (1/C) Ave||.||^2
      + ...``, so ``lam = C wd / 2`` (2.5e-3 for C=10, wd=5e-4: the paper's training runs);
    * ``"sum_classes"``: sum over classes, mean over the batch, ``lam = wd / 2`` (the value
      the MSE-NC notebook uses in its decomposition);
    * ``"paper"``: the paper's own ``(1/2) Ave||.||^2``, ``lam = wd``;
    * ``"sum"``: ``nn.MSELoss(reduction="sum")`` over a batch of ``B``, ``lam = wd / (2B)``.

    The classifier's ``lam`` governs the decomposition; other decayed parameters do not
    enter it.
    """
    reduction = check_choice("reduction", reduction, REDUCTIONS)
    wd = check_float("weight_decay", weight_decay, minimum=0.0)
    n_classes = check_int("n_classes", n_classes, minimum=2)
    if reduction == "mean":
        return n_classes * wd / 2.0
    if reduction == "sum_classes":
        return wd / 2.0
    if reduction == "paper":
        return wd
    if batch_size is None:
        raise ValueError('reduction="sum" needs batch_size, a positive integer; got None')
    return wd / (2.0 * check_int("batch_size", batch_size, minimum=1))


@dataclass(frozen=True)
class MSEDecomposition:
    """Terms of the MSE decomposition for one feature matrix and ``lam``.

    Attributes:
        lam: the paper's ``lam``.
        ls_loss: ``L_LS = L(W~_LS)``.
        nc1_term: ``L_NC1``.
        nc23_term: ``L_NC2/3``.
        W_ls: ``(C, D)`` least-squares weights; ``b_ls``: ``(C,)`` its bias.
        loss: ``L(W~)`` for the given classifier (``None`` without one).
        ls_perp: ``L_LS⊥(W~)``, the distance from the central path (``None`` without one).
        ls_distance: ``||W~ - W~_LS||_F`` (``None`` without a classifier).
    """

    lam: float
    ls_loss: float
    nc1_term: float
    nc23_term: float
    W_ls: torch.Tensor
    b_ls: torch.Tensor
    loss: float | None = None
    ls_perp: float | None = None
    ls_distance: float | None = None

    @property
    def ls_perp_ratio(self) -> float | None:
        """``L_LS⊥ / L_LS``: negligible on the central path (the paper's Fig. 2 reading)."""
        if self.ls_perp is None:
            return None
        return self.ls_perp / self.ls_loss if self.ls_loss > 0 else math.inf

    def as_dict(self) -> dict[str, float]:
        """Catalogue keys: ``mse_ls_loss``, ``mse_nc1_term``, ``mse_nc23_term`` and, with a
        classifier, ``mse_loss``, ``mse_ls_perp``, ``mse_ls_perp_ratio``, ``mse_ls_distance``."""
        out = {
            "mse_ls_loss": self.ls_loss,
            "mse_nc1_term": self.nc1_term,
            "mse_nc23_term": self.nc23_term,
        }
        if self.loss is not None:
            out |= {
                "mse_loss": self.loss,
                "mse_ls_perp": float(self.ls_perp),
                "mse_ls_perp_ratio": float(self.ls_perp_ratio),
                "mse_ls_distance": float(self.ls_distance),
            }
        return out


def least_squares_classifier(stats: ClassStats, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``W~_LS = [W_LS, b_LS]`` minimising the paper's MSE loss for fixed features.

    Proposition 1 solved by block elimination of the bias (note 003 §2.4, closed form with
    ``lam > 0`` and bias, generalised to class weights ``pi``):

    ``W_LS = diag(pi) (M^T - 1 mu_G^T / (1 + lam)) K^{-1}``,
    ``K = Sigma_W + Sigma_B + (lam / (1 + lam)) mu_G mu_G^T + lam I``,
    ``b_LS = (pi - W_LS mu_G) / (1 + lam)``,

    with ``M`` the uncentred means (``(1/C) M^T`` when balanced). At ``lam = 0``,
    ``K = Sigma_T`` and ``W_LS = C^{-1} M̄^T Sigma_T^{-1}`` (Eq. 16, bias = centring,
    Eq. 6). A singular ``K`` (only possible at ``lam = 0`` with ``Sigma_T`` rank-deficient,
    e.g. ``D >= N``) makes the minimiser non-unique; then the extended system
    ``W~ S~ = Ave(y h~^T)`` is solved with the pseudo-inverse of ``S~``, which gives the
    minimum-norm minimiser ``W~``, the limit of the ridge solutions as ``lam -> 0+``.

    Returns:
        ``(W_LS (C, D), b_LS (C,))`` float64.
    """
    lam = check_float("lam", lam, minimum=0.0)
    sigma_w = _dense_within(stats)
    pi, means, mu_g = stats.class_weights, stats.means, stats.global_mean
    centred = stats.centred_means
    sigma_b = centred.T @ (centred * pi.unsqueeze(1))
    k = sigma_w + sigma_b + (lam / (1.0 + lam)) * torch.outer(mu_g, mu_g)
    k = k + lam * torch.eye(k.shape[0], dtype=k.dtype, device=k.device)
    rhs = pi.unsqueeze(1) * (means - mu_g / (1.0 + lam))
    solved = _cholesky_solve(k, rhs.T)
    if solved is not None:
        w_ls = solved.T
        return w_ls, (pi - w_ls @ mu_g) / (1.0 + lam)
    # Singular K: minimum-norm solution of the extended normal equations.
    d = sigma_w.shape[0]
    second = sigma_w + means.T @ (means * pi.unsqueeze(1))
    s_ext = torch.empty(d + 1, d + 1, dtype=second.dtype, device=second.device)
    s_ext[:d, :d], s_ext[:d, d], s_ext[d, :d], s_ext[d, d] = second, mu_g, mu_g, 1.0
    s_ext += lam * torch.eye(d + 1, dtype=second.dtype, device=second.device)
    rhs_ext = torch.cat([means * pi.unsqueeze(1), pi.unsqueeze(1)], dim=1)
    w_ext = _pinv_solve(s_ext, rhs_ext.T).T
    return w_ext[:, :d], w_ext[:, d]


def mse_loss(stats: ClassStats, lam: float, W: object, b: object | None = None) -> float:
    r"""The paper's loss (Eq. 2) ``(1/2) Ave||W h + b - y||^2 + (lam/2)(||W||^2 + ||b||^2)``.

    Computed without cancellation as
    ``(1/2)[sum_c pi_c ||W mu_c + b - e_c||^2 + tr(W Sigma_W W^T)] + (lam/2)(...)``: within-
    class deviations average to zero in each class. ``b=None`` means no bias (zero).
    """
    lam = check_float("lam", lam, minimum=0.0)
    w, bias = check_classifier(W, b, stats.n_classes, stats.dim, stats.device)
    return _loss(stats, lam, w, bias)


def mse_decomposition(
    stats: ClassStats, lam: float, W: object | None = None, b: object | None = None
) -> MSEDecomposition:
    r"""``L = L_NC1 + L_NC2/3 + L_LS⊥`` (Theorems 1-2) for the statistics and ``lam``.

    ``L_LS⊥`` is computed as ``(1/2)[tr(dW Sigma_W dW^T) + sum_c pi_c ||dW mu_c + db||^2
    + lam (||dW||^2 + ||db||^2)]`` with ``(dW, db) = W~ - W~_LS``, which equals
    ``(1/2) tr(dW~ (S~ + lam I) dW~^T)``. Without ``W`` only the ``L_LS`` terms are given.

    Args:
        stats: statistics after both passes, collected with ``mode="dense"``.
        lam: the paper's ``lam >= 0`` (see :func:`paper_lambda` for PyTorch training).
        W: optional ``(C, D)`` classifier; ``b``: its ``(C,)`` bias (default zero).
    """
    lam = check_float("lam", lam, minimum=0.0)
    w_ls, b_ls = least_squares_classifier(stats, lam)
    sigma_w = _dense_within(stats)
    nc1 = 0.5 * (_quad(w_ls, sigma_w) + lam * (_sq(w_ls) + _sq(b_ls)))
    nc23 = 0.5 * _class_residual(stats, w_ls, b_ls)
    if W is None:
        if b is not None:
            raise ValueError("b was given without W")
        return MSEDecomposition(lam, nc1 + nc23, nc1, nc23, w_ls, b_ls)
    w, bias = check_classifier(W, b, stats.n_classes, stats.dim, stats.device)
    dw, db = w - w_ls, bias - b_ls
    pi, means = stats.class_weights, stats.means
    shifted = means @ dw.T + db
    perp = 0.5 * (
        _quad(dw, sigma_w) + float(pi @ (shifted * shifted).sum(dim=1)) + lam * (_sq(dw) + _sq(db))
    )
    distance = math.sqrt(_sq(dw) + _sq(db))
    loss = _loss(stats, lam, w, bias)
    return MSEDecomposition(lam, nc1 + nc23, nc1, nc23, w_ls, b_ls, loss, perp, distance)


def central_path_losses(omega: object, n_classes: int) -> dict[str, float]:
    r"""Lemma 1 (``lam = 0``, on the central path): the losses from the SNR spectrum.

    ``L = (1/2) sum_j 1/(omega_j^2 + C)``, ``L_NC1 = (1/2) sum_j omega_j^2/(C + omega_j^2)^2``,
    ``L_NC2/3 = (1/2) sum_j C/(C + omega_j^2)^2`` over the ``C - 1`` nonzero singular values
    of the SNR matrix (balanced classes).

    Returns:
        ``{"ls_loss", "nc1_term", "nc23_term"}``.
    """
    w2 = torch.as_tensor(omega, dtype=torch.float64) ** 2
    c = float(n_classes)
    return {
        "ls_loss": float(0.5 * (1.0 / (w2 + c)).sum()),
        "nc1_term": float(0.5 * (w2 / (c + w2) ** 2).sum()),
        "nc23_term": float(0.5 * (c / (c + w2) ** 2).sum()),
    }


def snr_matrix(stats: ClassStats) -> torch.Tensor:
    r"""``SNR = Sigma_W^{-1/2} M̄`` (note 003 Eq. 8), shape ``(D, C)``.

    ``Sigma_W^{-1/2}`` is the symmetric inverse square root (``eigh``). For
    ``weighting="sample"`` column ``c`` is scaled by ``sqrt(C n_c / N)`` so that
    ``Sigma_B = (1/C) M̄ M̄^T`` keeps its balanced form; then :func:`nc1_snr` equals NC1 of
    the whitened features in either weighting. Balanced: exactly the paper's matrix.

    Raises:
        ValueError: projected statistics, or a singular ``Sigma_W`` (needs ``N - C >= D``).
    """
    snr = _snr_or_none(stats)
    if snr is None:
        sigma_w = _dense_within(stats)
        evals = torch.linalg.eigvalsh(sigma_w)
        rank = int((evals > _singular_floor(evals)).sum())
        raise ValueError(
            f"Sigma_W is singular (numerical rank {rank} < D = {sigma_w.shape[0]}); the SNR "
            f"matrix needs a nonsingular within-class covariance, i.e. N - C >= D "
            f"(N = {stats.n_samples}, C = {stats.n_classes}) and no collapsed direction"
        )
    return snr


def snr_singular_values(stats: ClassStats) -> torch.Tensor:
    r"""The nonzero singular values ``omega_1 >= ... >= omega_r`` of :func:`snr_matrix`.

    ``r = rank M̄`` (``C - 1`` generically). They are invariant under any invertible linear
    map of the features (note 003 §3.4).
    """
    check_between_rank(stats.between_rank)
    r = stats.basis.shape[1]
    return torch.linalg.svdvals(snr_matrix(stats))[:r]


def nc1_snr(stats: ClassStats) -> float:
    r"""Invariant NC1: ``sum_j omega_j^{-2} = tr((M̄^T Sigma_W^{-1} M̄)^+)`` (balanced).

    Equals ``Tr(Sigma_W Sigma_B^+)/C`` computed on whitened features (note 003 §2.5: the
    paper's "``= sum_j 1/omega_j^2``" drops this factor ``C`` when written without ``/C``).
    """
    omega = snr_singular_values(stats)
    return float((omega**-2).sum())


def _snr_or_none(stats: ClassStats) -> torch.Tensor | None:
    """The SNR matrix, or ``None`` when ``Sigma_W`` is singular (one ``eigh``)."""
    sigma_w = _dense_within(stats)
    evals, evecs = torch.linalg.eigh(sigma_w)
    if float(evals[-1]) <= 0 or float(evals[0]) <= _singular_floor(evals):
        return None
    inv_sqrt = (evecs / evals.sqrt()) @ evecs.T
    scale = (stats.n_classes * stats.class_weights).sqrt()
    return inv_sqrt @ (stats.centred_means.T * scale)


def _singular_floor(evals: torch.Tensor) -> float:
    """Eigenvalues at or below ``D eps lambda_max`` count as zero."""
    return evals.shape[0] * _EPS * max(float(evals[-1]), 0.0)


def nc1_snr_if_defined(stats: ClassStats) -> float | None:
    """:func:`nc1_snr`, or ``None`` for projected statistics or a singular ``Sigma_W``."""
    if stats.mode != "dense" or stats.basis.shape[1] == 0:
        return None
    snr = _snr_or_none(stats)
    if snr is None:
        return None
    omega = torch.linalg.svdvals(snr)[: stats.basis.shape[1]]
    return float((omega**-2).sum())


# ---------------------------------------------------------------------------------------


def _dense_within(stats: ClassStats) -> torch.Tensor:
    if stats.mode != "dense":
        raise ValueError(
            f"the MSE family and the SNR matrix need the dense within-class covariance; "
            f"these statistics are projected (D = {stats.dim}); collect them with mode='dense'"
        )
    within = stats.within_cov
    if not bool(torch.isfinite(within).all()):
        peak = float(stats.means.abs().max())
        raise ValueError(
            "the within-class covariance overflows float64 (features of magnitude about "
            f"{peak:.3g}: their squares exceed 1.8e308); the MSE decomposition depends on the "
            "features' scale, so they cannot be rescaled for it: scale them down"
        )
    return within


def _cholesky_solve(k: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor | None:
    """``k^{-1} rhs`` for symmetric positive definite ``k``; ``None`` when it is not."""
    chol, info = torch.linalg.cholesky_ex(k)
    if int(info) != 0:
        return None
    evals = torch.linalg.eigvalsh(k)
    if float(evals[0]) <= k.shape[0] * _EPS * float(evals[-1]):
        return None
    return torch.cholesky_solve(rhs, chol)


def _pinv_solve(k: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """``k^+ rhs`` for symmetric PSD ``k`` (eigenvalues below ``D eps max`` count as zero)."""
    evals, evecs = torch.linalg.eigh(k)
    keep = evals > k.shape[0] * _EPS * float(evals.abs().max())
    inv = torch.where(keep, 1.0 / evals.where(keep, torch.ones_like(evals)), 0.0)
    return evecs @ (inv.unsqueeze(1) * (evecs.T @ rhs))


def _quad(w: torch.Tensor, sigma: torch.Tensor) -> float:
    """``tr(w sigma w^T)``."""
    return float(((w @ sigma) * w).sum())


def _sq(x: torch.Tensor) -> float:
    return float((x * x).sum())


def _class_residual(stats: ClassStats, w: torch.Tensor, b: torch.Tensor) -> float:
    """``sum_c pi_c ||W mu_c + b - e_c||^2``."""
    c = stats.n_classes
    resid = stats.means @ w.T + b - torch.eye(c, dtype=torch.float64, device=w.device)
    return float(stats.class_weights @ (resid * resid).sum(dim=1))


def _loss(stats: ClassStats, lam: float, w: torch.Tensor, b: torch.Tensor) -> float:
    sigma_w = _dense_within(stats)
    fit = _class_residual(stats, w, b) + _quad(w, sigma_w)
    return 0.5 * fit + 0.5 * lam * (_sq(w) + _sq(b))
