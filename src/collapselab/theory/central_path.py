r"""The central path and continually renormalised gradient descent (note 003 §3).

Han, Papyan & Donoho (ICLR 2022), §3 and Appendix D, at ``lam = 0`` on the
unconstrained-features model: the classifier is always the least-squares one
(the central path, Eq. 4 / Def. 1), so the loss is a function of the features only,

``L_LS(H) = min_{W, b} (1/2) Ave_{i,c} ||W h_{i,c} + b - y_{i,c}||^2``,

and it is invariant under any invertible linear map of the features (Eq. 7). Each
feature matrix therefore has a representative with identity within-class covariance,
``X = Sigma_W^{-1/2} (H - mu_G)`` (the *renormalised* features), whose class means are
the SNR matrix ``Sigma_W^{-1/2} M̄`` (Eq. 8).

Layout. The paper stores features as columns, ``H`` in ``R^{P x CN}``, stacked
"i-then-c": ``(1,1), (2,1), ..., (N,1), (1,2), ...`` (class-major blocks), so that
``Y = I_C ⊗ 1_N^T``. collapselab's convention is rows-are-samples: every function here
takes and returns ``(n, P)`` features (``H^T``) with ``(n,)`` integer labels, and
:func:`paper_labels` gives the labels of the paper's ordering (``[0]*N + [1]*N + ...``).
Matrix identities translate by transposition, e.g. ``Sigma_W = H̄ C H̄^T`` becomes
``X^T C X`` with :func:`class_centering_matrix` ``C`` (symmetric). The simulators accept
rows in any order (balanced classes) and return them in the order given; they run on the
CPU in float64 numpy (tiny matrices, thousands of steps) and record through the library's
torch statistics and metrics.

Contents:

* the model: :func:`ls_loss` and its gradient :func:`ls_gradient` (envelope theorem);
* constructs: :func:`class_centering_matrix` (Eq. 21), :func:`renormalise`,
  :func:`central_path_predictions` and :func:`invariance_gap` (Eq. 7),
  :func:`manifold_residual` (Def. 6), :func:`tangent_projection` (Prop. 4),
  :func:`snr_instance` (features with prescribed SNR singular values);
* solvers: :class:`RenormalisedGD`, the paper's own discrete procedure (App. D.1, labelled
  ``"literal"``) or its tangent-projected form (Eq. 5 with Prop. 4, ``"projected"``);
  :func:`renormalised_flow`, the converged solver (Eq. 5 integrated by ``solve_ivp``);
* :func:`verify_central_path`: the identities of §3 on a random instance.

The predictions for ``omega_j(t)`` live in :mod:`collapselab.theory.snr_dynamics`.

Time and loss normalisation: ``L_LS`` uses the paper's ``Ave`` (``1/(CN)``), and a step of
size ``lr`` advances flow time by ``lr`` (``t = step * lr``). A sum-normalised loss would
rescale time by ``CN``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from collapselab.checks import (
    check_choice,
    check_float,
    check_int,
    check_labels,
    feature_tensor,
    infer_n_classes,
)
from collapselab.metrics import (
    central_path_losses,
    least_squares_classifier,
    mse_decomposition,
    nc1_pinv,
    snr_matrix,
)
from collapselab.metrics.matrix import matrix_metrics
from collapselab.stats import ClassStats, class_stats_from_features
from collapselab.theory.dynamics import integrate

__all__ = [
    "METHODS",
    "CentralPathCheck",
    "RenormalisedGD",
    "RenormalisedTrajectory",
    "central_path_predictions",
    "class_centering_matrix",
    "invariance_gap",
    "ls_gradient",
    "ls_loss",
    "manifold_residual",
    "paper_labels",
    "renormalise",
    "renormalised_flow",
    "snr_instance",
    "tangent_projection",
    "verify_central_path",
]

_EPS = float(torch.finfo(torch.float64).eps)

METHODS = ("literal", "projected")
"""Discrete solvers of :class:`RenormalisedGD`."""

# ---------------------------------------------------------------------------------------
# layout and input checks


def paper_labels(n_classes: int, n_per_class: int) -> torch.Tensor:
    """Labels of the paper's "i-then-c" column order: ``[0]*N + [1]*N + ... + [C-1]*N``.

    Row ``c N + i`` of a rows-are-samples matrix is the paper's column ``(i+1, c+1)``.
    """
    c = check_int("n_classes", n_classes, minimum=2)
    n = check_int("n_per_class", n_per_class, minimum=1)
    return torch.arange(c).repeat_interleave(n)


@dataclass(frozen=True)
class _Layout:
    """A balanced labelling and the permutation to the paper's class-major order."""

    n_classes: int
    n_per_class: int
    order: np.ndarray
    inverse: np.ndarray

    @property
    def n(self) -> int:
        return self.n_classes * self.n_per_class

    def blocks(self, x: torch.Tensor) -> np.ndarray:
        """``(n, P)`` rows -> ``(C, N, P)`` float64 class blocks (numpy)."""
        rows = x.detach().cpu().to(torch.float64).numpy()[self.order]
        return rows.reshape(self.n_classes, self.n_per_class, -1)

    def rows(self, x3: np.ndarray) -> torch.Tensor:
        """``(C, N, P)`` class blocks -> ``(n, P)`` rows in the caller's order."""
        return torch.from_numpy(np.ascontiguousarray(x3.reshape(self.n, -1)[self.inverse]))


def _layout(labels: object, n_rows: int, n_classes: int | None, name: str = "labels") -> _Layout:
    c = infer_n_classes(labels, n_classes, name)
    y = check_labels(name, labels, n_rows, c, device="cpu")
    counts = torch.bincount(y, minlength=c)
    if bool((counts != counts[0]).any()):
        raise ValueError(
            f"{name} must be balanced (the same number of samples per class, as the central-path "
            f"theory of note 003 assumes); got counts {counts.tolist()}"
        )
    n = int(counts[0])
    if n < 2:
        raise ValueError(f"{name} needs at least two samples per class, got {n}")
    order = torch.argsort(y, stable=True).numpy()
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return _Layout(c, n, order, inverse)


# ---------------------------------------------------------------------------------------
# class-block algebra (balanced, paper normalisation 1/(CN)). numpy: the matrices are tiny
# and a solver takes thousands of steps, where torch's per-op and thread-pool overheads
# dominate (and degrade badly on a shared CPU).


def _centred_blocks(x3: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Class means ``(C, P)``, global mean ``(P,)`` and within-class deviations ``(C, N, P)``."""
    means = x3.mean(axis=1)
    return means, means.mean(axis=0), x3 - means[:, None, :]


def _cross_within(a3: np.ndarray, b3: np.ndarray) -> np.ndarray:
    """``A^T C B = Ave (a - mu_c(A))(b - mu_c(B))^T`` with Eq. 21's ``C``, ``(P, P)``."""
    da = (a3 - a3.mean(axis=1, keepdims=True)).reshape(-1, a3.shape[-1])
    db = (b3 - b3.mean(axis=1, keepdims=True)).reshape(-1, b3.shape[-1])
    return da.T @ db / da.shape[0]


def _inv_sqrt(sym: np.ndarray, what: str) -> np.ndarray:
    evals, evecs = np.linalg.eigh(sym)
    top = float(evals[-1])
    if top <= 0 or float(evals[0]) <= sym.shape[0] * _EPS * top:
        raise ValueError(
            f"{what} is singular (smallest eigenvalue {float(evals[0]):.3g}, largest "
            f"{top:.3g}); renormalisation needs a nonsingular within-class covariance, i.e. "
            "n_samples - n_classes >= dim and no collapsed direction"
        )
    return (evecs / np.sqrt(evals)) @ evecs.T


def _inv_sqrt_t(sym: torch.Tensor, what: str) -> torch.Tensor:
    """:func:`_inv_sqrt` of a tensor, on its device."""
    return torch.from_numpy(_inv_sqrt(sym.detach().cpu().numpy(), what)).to(sym.device)


def _whiten_blocks(x3: np.ndarray) -> np.ndarray:
    """App. D.1 steps 1/4: ``Sigma_W^{-1/2} (x - mu_G)``, blockwise."""
    _, mu_g, dev = _centred_blocks(x3)
    flat = dev.reshape(-1, x3.shape[-1])
    inv = _inv_sqrt(flat.T @ flat / flat.shape[0], "the within-class covariance Sigma_W")
    return (x3 - mu_g) @ inv


def _ls_blocks(x3: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``W_LS = C^{-1} M̄^T Sigma_T^{-1}``, ``b_LS = 1/C - W_LS mu_G`` (Eqs. 6, 16; lam = 0)."""
    c = x3.shape[0]
    means, mu_g, dev = _centred_blocks(x3)
    flat = dev.reshape(-1, x3.shape[-1])
    centred = means - mu_g
    sigma_t = flat.T @ flat / flat.shape[0] + centred.T @ centred / c
    w = np.linalg.solve(sigma_t, centred.T).T / c
    return w, 1.0 / c - w @ mu_g


def _ls_grad_blocks(x3: np.ndarray) -> np.ndarray:
    """Envelope gradient ``(1/(CN)) (X W^T + b - Y) W`` at the least-squares classifier."""
    c, n_per, _ = x3.shape
    w, b = _ls_blocks(x3)
    resid = (x3 @ w.T + b - np.eye(c)[:, None, :]) / (c * n_per)
    return resid @ w


def _project_blocks(x3: np.ndarray, z3: np.ndarray) -> np.ndarray:
    """Prop. 4 in rows: ``Z - (1/2) X (X^T C Z + Z^T C X)``."""
    a = _cross_within(x3, z3)
    return z3 - 0.5 * x3 @ (a + a.T)


# ---------------------------------------------------------------------------------------
# public constructs


def class_centering_matrix(n_classes: int, n_per_class: int) -> torch.Tensor:
    r"""Eq. 21: ``C = (1/(CN)) (I_{CN} - (1/N) Y^T Y)``, ``(CN, CN)`` float64.

    In the paper's "i-then-c" order ``Y^T Y = I_C ⊗ 1_N 1_N^T``. Facts (App. D.2):
    ``C Y^T = 0``, ``C 1 = 0``, ``C^2 = C/(CN)``, and ``X^T C X = Sigma_W(X)`` for rows
    ``X`` ordered as :func:`paper_labels`. Dense: meant for the small instances of the
    theory (the simulators never form it).
    """
    c = check_int("n_classes", n_classes, minimum=2)
    n = check_int("n_per_class", n_per_class, minimum=1)
    blocks = torch.kron(torch.eye(c, dtype=torch.float64), torch.ones(n, n, dtype=torch.float64))
    return (torch.eye(c * n, dtype=torch.float64) - blocks / n) / (c * n)


def renormalise(features: object, labels: object, n_classes: int | None = None) -> torch.Tensor:
    r"""Renormalised features ``X = Sigma_W^{-1/2} (H - mu_G)`` (§3.1, App. D.1 step 1).

    ``Sigma_W^{-1/2}`` is the symmetric inverse square root; ``Sigma_W`` and ``mu_G`` are the
    class-balanced statistics of :class:`~collapselab.stats.ClassStats` (normalised by
    ``N``, note 003 Eq. 1). The result has zero global mean and ``Sigma_W(X) = I``; its class
    means are the SNR matrix (Eq. 8).

    Args:
        features: ``(n, P)`` rows are samples. labels: ``(n,)`` integers.

    Raises:
        ValueError: malformed input, or a singular ``Sigma_W`` (needs ``n - C >= P``).
    """
    h = feature_tensor("features", features)
    c = infer_n_classes(labels, n_classes)
    stats = class_stats_from_features(h, labels, c, mode="dense")
    inv = _inv_sqrt_t(stats.within_cov, "the within-class covariance Sigma_W of features")
    return (h - stats.global_mean) @ inv


def manifold_residual(features: object, labels: object, n_classes: int | None = None) -> float:
    r"""``max |Sigma_W(X) - I|``: distance of ``X`` from the manifold ``X C X^T = I`` (Def. 6)."""
    h = feature_tensor("features", features)
    c = infer_n_classes(labels, n_classes)
    sigma_w = class_stats_from_features(h, labels, c, mode="dense").within_cov
    eye = torch.eye(sigma_w.shape[0], dtype=torch.float64, device=sigma_w.device)
    return float((sigma_w - eye).abs().max())


def _stats(h: torch.Tensor, labels: object, n_classes: int | None) -> ClassStats:
    c = infer_n_classes(labels, n_classes)
    return class_stats_from_features(h, labels, c, mode="dense")


def central_path_predictions(
    features: object, labels: object, lam: float = 0.0, n_classes: int | None = None
) -> torch.Tensor:
    r"""Outputs ``W_LS h + b_LS`` of the least-squares classifier, ``(n, C)`` (Eqs. 4, 6).

    At ``lam = 0`` these equal ``W_LS (h - mu_G) + 1/C`` and are invariant under any
    invertible linear map of the features (Eq. 7; see :func:`invariance_gap`).
    """
    lam = check_float("lam", lam, minimum=0.0)
    h = feature_tensor("features", features)
    w, b = least_squares_classifier(_stats(h, labels, n_classes), lam)
    return h @ w.T + b


def invariance_gap(
    features: object,
    labels: object,
    transform: object,
    lam: float = 0.0,
    n_classes: int | None = None,
) -> float:
    r"""``max |W_LS(AH) A H - W_LS(H) H|`` (with biases): Eq. 7's invariance, numerically.

    ``transform`` is ``A`` (``(P, P)``) acting on each feature as ``h -> A h`` (rows
    ``H A^T``). Zero to rounding for invertible ``A`` at ``lam = 0``; not invariant for
    ``lam > 0`` (the ridge penalty is not).
    """
    h = feature_tensor("features", features)
    a = feature_tensor("transform", transform, h.shape[1])
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"transform must be square (P, P), got shape {tuple(a.shape)}")
    before = central_path_predictions(h, labels, lam, n_classes)
    after = central_path_predictions(h @ a.T, labels, lam, n_classes)
    return float((after - before).abs().max())


def ls_loss(
    features: object, labels: object, lam: float = 0.0, n_classes: int | None = None
) -> float:
    r"""``L_LS(H) = L(W~_LS(H), H)``, the loss on the central path (Theorem 1)."""
    lam = check_float("lam", lam, minimum=0.0)
    h = feature_tensor("features", features)
    return mse_decomposition(_stats(h, labels, n_classes), lam).ls_loss


def ls_gradient(
    features: object, labels: object, lam: float = 0.0, n_classes: int | None = None
) -> torch.Tensor:
    r"""``∇_H L_LS(H)``, ``(n, P)``: the gradient of the loss on the central path.

    By the envelope theorem (``W~_LS`` minimises ``L`` for fixed ``H``; the ridge term does
    not involve ``H``) the dependence of ``W~_LS`` on ``H`` drops out:

    ``∇_{h_i} L_LS = pi_c / n_c (W_LS h_i + b_LS - y_i)^T W_LS``,

    i.e. ``(1/(CN)) (H W^T + b - Y) W`` for balanced classes (note 003 §3.5). Its rows sum
    to zero at ``lam = 0``, so gradient steps keep the global mean.
    """
    h = feature_tensor("features", features)
    stats = _stats(h, labels, n_classes)
    w, b = least_squares_classifier(stats, check_float("lam", lam, minimum=0.0))
    y = check_labels("labels", labels, h.shape[0], stats.n_classes, device=h.device)
    weight = (stats.class_weights / stats.counts.to(torch.float64))[y]
    eye = torch.eye(stats.n_classes, dtype=torch.float64, device=h.device)
    resid = (h @ w.T + b - eye[y]) * weight.unsqueeze(1)
    return resid @ w


def tangent_projection(
    features: object, direction: object, labels: object, n_classes: int | None = None
) -> torch.Tensor:
    r"""Prop. 4: ``Π_{T_X}(Z) = Z - (1/2)(X C Z^T + Z C X^T) X`` in the paper's layout.

    In rows (``X``, ``Z`` of shape ``(n, P)``): ``Z - (1/2) X (X^T C Z + Z^T C X)``, where
    ``X^T C Z = Ave (x - mu_c(X))(z - mu_c(Z))^T`` (Eq. 21's ``C``, never formed). For ``X``
    on the manifold (``X^T C X = I``) the result is tangent, ``X^T C Π + Π^T C X = 0``
    (Prop. 3, whose printed "Z C X" should read ``Z C X^T``), and ``Π`` is idempotent. It is
    **not** the Frobenius-orthogonal projection: ``<Π A, B>_F != <A, Π B>_F`` in general
    (note 003 §3.6, §3.9), which is what Lemma 4 implicitly assumes.

    Args:
        features: ``X``, ``(n, P)``, balanced labels. direction: ``Z``, ``(n, P)``.
    """
    x = feature_tensor("features", features)
    z = feature_tensor("direction", direction, x.shape[1])
    if z.shape[0] != x.shape[0]:
        raise ValueError(
            f"direction has {z.shape[0]} rows but features {x.shape[0]}; expected equal"
        )
    layout = _layout(labels, x.shape[0], n_classes)
    return layout.rows(_project_blocks(layout.blocks(x), layout.blocks(z))).to(x.device)


def snr_instance(
    n_classes: int,
    n_per_class: int,
    dim: int,
    omega: object,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Renormalised features with prescribed SNR singular values (Def. 2), paper order.

    ``X = E + M̄^T[y]`` with within-class noise ``E`` whitened exactly (``Sigma_W = I``, zero
    class means) and ``M̄^T = V diag(omega) U^T`` for random orthonormal ``U`` (``P x (C-1)``)
    and ``V`` (``C x (C-1)``, ``V^T 1 = 0``), so ``mu_G = 0`` and the SNR matrix is
    ``U diag(omega) V^T``.

    Args:
        omega: the ``C - 1`` positive singular values (any order).
        seed: seed of the random orientation and noise.

    Returns:
        ``(features (CN, P), labels (CN,))`` in the order of :func:`paper_labels`.
    """
    c = check_int("n_classes", n_classes, minimum=2)
    n = check_int("n_per_class", n_per_class, minimum=2)
    p = check_int("dim", dim, minimum=1)
    om = torch.as_tensor(np.asarray(omega, dtype=np.float64))
    if om.shape != (c - 1,):
        raise ValueError(
            f"omega must have n_classes - 1 = {c - 1} entries, got shape {tuple(om.shape)}"
        )
    if not bool(torch.isfinite(om).all()) or bool((om <= 0).any()):
        raise ValueError(f"omega must be finite and positive, got {om.tolist()}")
    if p < c - 1:
        raise ValueError(
            f"dim must be at least n_classes - 1 = {c - 1} for rank C-1 means, got {p}"
        )
    if c * (n - 1) < p:
        raise ValueError(
            f"dim={p} exceeds C(N-1) = {c * (n - 1)}: Sigma_W would be singular; "
            "raise n_per_class or lower dim"
        )
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(c, n, p, generator=g, dtype=torch.float64)
    noise = noise - noise.mean(dim=1, keepdim=True)
    flat = noise.reshape(-1, p)
    noise = noise @ _inv_sqrt_t(flat.T @ flat / flat.shape[0], "the sampled noise covariance")
    u, _ = torch.linalg.qr(torch.randn(p, c - 1, generator=g, dtype=torch.float64))
    basis = torch.cat(
        [
            torch.ones(c, 1, dtype=torch.float64),
            torch.randn(c, c - 1, generator=g, dtype=torch.float64),
        ],
        dim=1,
    )
    v = torch.linalg.qr(basis)[0][:, 1:]
    centred = (v * om) @ u.T
    x = (noise + centred.unsqueeze(1)).reshape(c * n, p)
    return x, paper_labels(c, n)


# ---------------------------------------------------------------------------------------
# simulators


@dataclass
class RenormalisedTrajectory:
    """Records of a renormalised descent or flow.

    Attributes:
        times: flow time ``t`` of each record (``step * lr`` for the discrete solvers).
        steps: step index of each record (``None`` for :func:`renormalised_flow`).
        omega: ``(T, C-1)`` SNR singular values ``omega_j(t)``, descending.
        left_drift, right_drift: ``max | |U_t^T U_0| - I |`` over the ``C-1`` nonzero
            singular directions, left (``P``-space) and right (class-space): sign-invariant
            drift of the SNR singular vectors from ``t = 0`` (Lemma 6 predicts zero).
        metrics: catalogue metrics (:func:`~collapselab.metrics.matrix.matrix_metrics`, as
            ``collapselab.measure`` gives them, with the least-squares classifier and
            ``lam = 0``) per record, plus ``nc1_trace``
            ``= Tr(Sigma_W Sigma_B^+)`` (``C * nc1``), ``manifold_residual`` and
            ``global_mean_norm``; empty when recorded without metrics.
        features: the final renormalised features, ``(n, P)``, in the caller's row order.
        labels: the labels, in the caller's order.
        method: ``"literal"``, ``"projected"`` or ``"flow"``; lr: the step size (``None`` for
            the flow).
    """

    times: np.ndarray
    steps: np.ndarray | None
    omega: np.ndarray
    left_drift: np.ndarray
    right_drift: np.ndarray
    metrics: dict[str, np.ndarray]
    features: torch.Tensor
    labels: torch.Tensor
    method: str
    lr: float | None = None
    n_classes: int = 0
    n_per_class: int = 0
    left_vectors: torch.Tensor | None = field(default=None, repr=False)
    right_vectors: torch.Tensor | None = field(default=None, repr=False)


class _Recorder:
    """Per-record quantities, all computed by the library's statistics and metrics."""

    def __init__(self, layout: _Layout, labels: torch.Tensor, with_metrics: bool) -> None:
        self.layout, self.labels, self.with_metrics = layout, labels, with_metrics
        self.times: list[float] = []
        self.steps: list[int] = []
        self.omega: list[np.ndarray] = []
        self.drift: list[tuple[float, float]] = []
        self.metrics: dict[str, list[float]] = {}
        self.u0: torch.Tensor | None = None
        self.v0: torch.Tensor | None = None

    def __call__(self, x3: np.ndarray, t: float, step: int | None) -> None:
        layout = self.layout
        x = layout.rows(x3)
        c = layout.n_classes
        stats = class_stats_from_features(x, self.labels, c, mode="dense")
        u, s, vh = torch.linalg.svd(snr_matrix(stats), full_matrices=False)
        u, s, v = u[:, : c - 1], s[: c - 1], vh[: c - 1].T
        if self.u0 is None:
            self.u0, self.v0 = u, v
        eye = torch.eye(c - 1, dtype=torch.float64, device=u.device)
        left = float(((u.T @ self.u0).abs() - eye).abs().max())
        right = float(((v.T @ self.v0).abs() - eye).abs().max())
        self.times.append(t)
        if step is not None:
            self.steps.append(step)
        self.omega.append(s.cpu().numpy())
        self.drift.append((left, right))
        if not self.with_metrics:
            return
        w, b = least_squares_classifier(stats, 0.0)
        row = matrix_metrics(x, self.labels, w, b, lam=0.0, n_classes=c)
        row.pop("nc1_dense", None)
        eye_p = torch.eye(x.shape[1], dtype=torch.float64, device=x.device)
        row["nc1_trace"] = c * row["nc1"]
        row["manifold_residual"] = float((stats.within_cov - eye_p).abs().max())
        row["global_mean_norm"] = float(stats.global_mean.norm())
        for key, value in row.items():
            self.metrics.setdefault(key, []).append(value)

    def result(
        self, x3: np.ndarray, method: str, lr: float | None, has_steps: bool
    ) -> RenormalisedTrajectory:
        drift = np.asarray(self.drift, dtype=np.float64).reshape(-1, 2)
        return RenormalisedTrajectory(
            times=np.asarray(self.times, dtype=np.float64),
            steps=np.asarray(self.steps, dtype=np.int64) if has_steps else None,
            omega=np.stack(self.omega),
            left_drift=drift[:, 0],
            right_drift=drift[:, 1],
            metrics={k: np.asarray(v, dtype=np.float64) for k, v in self.metrics.items()},
            features=self.layout.rows(x3),
            labels=self.labels,
            method=method,
            lr=lr,
            n_classes=self.layout.n_classes,
            n_per_class=self.layout.n_per_class,
            left_vectors=self.u0,
            right_vectors=self.v0,
        )


class RenormalisedGD:
    r"""Gradient descent with continual renormalisation (App. D.1), ``lam = 0``.

    ``method="literal"`` follows the paper's steps exactly:

    1. ``X_0 = Sigma_W^{-1/2}(H̄_0) H̄_0`` (done at construction);
    2. ``ΔX = -lr ∇_X L_LS(X)``, the ordinary (ambient) gradient (:func:`ls_gradient`);
    3. ``H̄ = X + ΔX``;
    4. ``X = Sigma_W^{-1/2}(H̄) H̄``;
    5. repeat from 2.

    ``method="projected"`` replaces step 2 by the tangent-projected gradient
    ``-lr Π_{T_X}(∇L_LS)`` (Prop. 4), i.e. Euler steps of the continually renormalised flow
    (Eq. 5) with renormalisation as the retraction. Both follow the same SNR dynamics to
    first order in ``lr`` (the SNR singular values are invariant along the fibres that the
    projection removes); see :mod:`collapselab.theory.snr_dynamics` for which ODE that is.

    The features must be balanced (``N`` per class) with ``C(N-1) >= P`` so that ``Sigma_W``
    stays invertible. Time is ``t = step * lr`` with the ``Ave``-normalised loss.

    Args:
        features: ``(n, P)`` initial features (any global mean; rows in any order).
        labels: ``(n,)`` balanced integer labels.
        lr: step size ``eta > 0``.
        method: ``"literal"`` (App. D.1) or ``"projected"`` (Eq. 5, Prop. 4).
        n_classes: default ``max(labels) + 1``.
    """

    def __init__(
        self,
        features: object,
        labels: object,
        lr: float,
        *,
        method: str = "literal",
        n_classes: int | None = None,
    ) -> None:
        h = feature_tensor("features", features)
        self._layout = _layout(labels, h.shape[0], n_classes)
        self._labels = check_labels(
            "labels", labels, h.shape[0], self._layout.n_classes, device="cpu"
        )
        self.method = check_choice("method", method, METHODS)
        self.lr = check_float("lr", lr, minimum=0.0, strict=True)
        self.step_count = 0
        self._x3 = _whiten_blocks(self._layout.blocks(h))

    @property
    def time(self) -> float:
        """Flow time ``t = step_count * lr``."""
        return self.step_count * self.lr

    @property
    def features(self) -> torch.Tensor:
        """The current renormalised features ``X``, ``(n, P)`` (CPU), in the caller's row order."""
        return self._layout.rows(self._x3)

    def step(self, n_steps: int = 1) -> None:
        """Take ``n_steps`` renormalised gradient steps (App. D.1 steps 2-4)."""
        n_steps = check_int("n_steps", n_steps, minimum=0)
        x3 = self._x3
        for _ in range(n_steps):
            grad = _ls_grad_blocks(x3)
            if self.method == "projected":
                grad = _project_blocks(x3, grad)
            x3 = _whiten_blocks(x3 - self.lr * grad)
        self._x3 = x3
        self.step_count += n_steps

    def run(
        self,
        n_steps: int,
        record_every: int = 1,
        *,
        metrics: bool = True,
        progress: Callable[[int, int], None] | None = None,
    ) -> RenormalisedTrajectory:
        """Take ``n_steps`` steps, recording at steps ``0, k, 2k, ...`` and the last one.

        Records are relative to the current state (its step and time continue); the
        singular-vector drift is measured against the first record.

        Args:
            n_steps: number of steps. record_every: ``k``.
            metrics: also record the catalogue NC and MSE metrics (slower).
            progress: called as ``progress(steps_done, n_steps)`` after every record.
        """
        n_steps = check_int("n_steps", n_steps, minimum=0)
        every = check_int("record_every", record_every, minimum=1)
        rec = _Recorder(self._layout, self._labels, metrics)
        rec(self._x3, self.time, self.step_count)
        done = 0
        while done < n_steps:
            k = min(every, n_steps - done)
            self.step(k)
            done += k
            rec(self._x3, self.time, self.step_count)
            if progress is not None:
                progress(done, n_steps)
        return rec.result(self._x3, self.method, self.lr, has_steps=True)


def renormalised_flow(
    features: object,
    labels: object,
    times: object,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    metrics: bool = True,
    n_classes: int | None = None,
) -> RenormalisedTrajectory:
    r"""The continually renormalised gradient flow (Eq. 5) integrated to tolerance.

    ``dX/dt = -Π_{T_X}(∇_X L_LS(X))`` from ``X_0 = Sigma_W^{-1/2} H̄_0``, integrated with
    ``scipy.integrate.solve_ivp`` (DOP853). The projected field keeps ``X^T C X = I``
    exactly in continuous time; each recorded state is renormalised once more to remove the
    integrator's drift (reported as ``manifold_residual`` before that, in ``metrics``). This
    is the ``lr -> 0`` limit of :class:`RenormalisedGD`: the converged solver.

    Args:
        features, labels: as for :class:`RenormalisedGD`.
        times: non-decreasing record times ``>= 0`` (the first record is at ``times[0]``).
        rtol, atol: ``solve_ivp`` tolerances.
        metrics: also record the catalogue metrics.
    """
    h = feature_tensor("features", features)
    layout = _layout(labels, h.shape[0], n_classes)
    y = check_labels("labels", labels, h.shape[0], layout.n_classes)
    t_eval = np.asarray(times, dtype=np.float64).reshape(-1)
    if t_eval.size == 0 or not np.isfinite(t_eval).all() or (t_eval < 0).any():
        raise ValueError("times must be a non-empty sequence of finite values >= 0")
    if (np.diff(t_eval) < 0).any():
        raise ValueError("times must be non-decreasing")
    x3 = _whiten_blocks(layout.blocks(h))
    shape = x3.shape

    def field_(_t: float, state: np.ndarray) -> np.ndarray:
        x = state.reshape(shape)
        return (-_project_blocks(x, _ls_grad_blocks(x))).reshape(-1)

    states = integrate(field_, x3.reshape(-1), t_eval, rtol=rtol, atol=atol)
    rec = _Recorder(layout, y.cpu(), metrics)
    drift: list[float] = []
    for k, t in enumerate(t_eval):
        xk = states[k].reshape(shape)
        drift.append(float(np.abs(_cross_within(xk, xk) - np.eye(shape[-1])).max()))
        xk = _whiten_blocks(xk)
        rec(xk, float(t), None)
    out = rec.result(xk, "flow", None, has_steps=False)
    if metrics:
        out.metrics["manifold_residual"] = np.asarray(drift)
    return out


# ---------------------------------------------------------------------------------------
# verification of the §3 identities


@dataclass(frozen=True)
class CentralPathCheck:
    """Numerical residuals of the central-path identities on one random instance.

    Attributes:
        centering: ``max`` of ``|C Y^T|``, ``|C 1|`` and ``|C^2 - C/(CN)|`` (Eq. 21).
        within_cov: ``max |X^T C X - Sigma_W|`` (App. D.2).
        invariance: :func:`invariance_gap` for a random invertible map (Eq. 7).
        renormalised_identity: :func:`manifold_residual` of :func:`renormalise` output.
        tangency: ``max |X^T C Π(Z) + Π(Z)^T C X|`` (Props. 3-4).
        idempotence: ``max |Π(Π(Z)) - Π(Z)|``.
        self_adjoint_gap: ``|<Π A, B> - <A, Π B>| / (|<Π A, B>| + |<A, Π B>|)`` (nonzero).
        lemma1: relative error of Lemma 1's ``L_LS = (1/2) sum 1/(omega^2 + C)``.
        whitened_nc1: relative error of ``Tr(Sigma_W Sigma_B^+) = C sum omega^{-2}``.
        gradient_column_sum: ``max |sum_i ∇_{h_i} L_LS|`` (global mean is preserved).
    """

    centering: float
    within_cov: float
    invariance: float
    renormalised_identity: float
    tangency: float
    idempotence: float
    self_adjoint_gap: float
    lemma1: float
    whitened_nc1: float
    gradient_column_sum: float


def verify_central_path(
    n_classes: int = 4, n_per_class: int = 6, dim: int = 5, seed: int = 0
) -> CentralPathCheck:
    """Check the §3 identities on random Gaussian features (see :class:`CentralPathCheck`)."""
    c = check_int("n_classes", n_classes, minimum=2)
    n = check_int("n_per_class", n_per_class, minimum=2)
    p = check_int("dim", dim, minimum=1)
    g = torch.Generator().manual_seed(seed)
    y = paper_labels(c, n)
    h = (
        torch.randn(c, p, generator=g, dtype=torch.float64)[y]
        + torch.randn(c * n, p, generator=g, dtype=torch.float64)
        + 0.5
    )
    cmat = class_centering_matrix(c, n)
    targets = torch.eye(c, dtype=torch.float64)[y]
    centering = max(
        float((cmat @ targets).abs().max()),
        float((cmat @ torch.ones(c * n, dtype=torch.float64)).abs().max()),
        float((cmat @ cmat - cmat / (c * n)).abs().max()),
    )
    stats = class_stats_from_features(h, y, c, mode="dense")
    within = float((h.T @ cmat @ h - stats.within_cov).abs().max())
    a = torch.randn(p, p, generator=g, dtype=torch.float64) + 2.0 * torch.eye(
        p, dtype=torch.float64
    )
    x = renormalise(h, y)
    z, b = (torch.randn(c * n, p, generator=g, dtype=torch.float64) for _ in range(2))
    proj_z = tangent_projection(x, z, y)
    cross = x.T @ cmat @ proj_z
    left = float((proj_z * b).sum())
    right = float((z * tangent_projection(x, b, y)).sum())
    xstats = class_stats_from_features(x, y, c, mode="dense")
    omega = torch.linalg.svdvals(snr_matrix(stats))[: c - 1]
    spectral = central_path_losses(omega, c)["ls_loss"]
    loss = mse_decomposition(stats, 0.0).ls_loss
    nc1_trace = nc1_pinv(xstats, divide_by_c=False)
    predicted = c * float((omega**-2).sum())
    return CentralPathCheck(
        centering=centering,
        within_cov=within,
        invariance=invariance_gap(h, y, a),
        renormalised_identity=manifold_residual(x, y),
        tangency=float((cross + cross.T).abs().max()),
        idempotence=float((tangent_projection(x, proj_z, y) - proj_z).abs().max()),
        self_adjoint_gap=abs(left - right) / (abs(left) + abs(right)),
        lemma1=abs(spectral - loss) / loss,
        whitened_nc1=abs(nc1_trace - predicted) / predicted,
        gradient_column_sum=float(ls_gradient(h, y).sum(dim=0).abs().max()),
    )
