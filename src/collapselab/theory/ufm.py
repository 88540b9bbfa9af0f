r"""Unconstrained feature models: UFM, MUFM and the multilayer MUFM (paper 001, §III-C).

**The model.** With classifier ``W`` (``K x d``), optional bias ``b`` (``K``), data
``X = H^0`` (``d x N``, one column per sample, the paper's layout) and free features
``H^1, ..., H^L`` (``d x N`` each), the multilayer MUFM (Eq. 12) is

.. math::
    F = \mathcal L(W H^L + b 1^\top, Y) + \frac{c_W}{2}\|W\|_F^2 + \frac{c_b}{2}\|b\|^2
        + \frac{c_H}{2} \sum_{l=0}^{L-1} \|H^{l+1} - H^l\|_F^2,

``Y`` the one-hot targets (``K x N``; ``I_K ⊗ 1_n^T`` for sorted balanced labels),
``L_MSE(Z) = ||Z - Y||_F^2 / (2N)`` and ``L_CE(Z) = (1/N) Σ_i CE(z_i, y_i)``. The paper's
coefficients (``form="eq13"``) are ``c_W = λ_W/K``, ``c_b = λ_b/K`` and ``c_H = λ/N`` with
``N = Kn``. ``L = 1`` is the MUFM of Eq. 13; with ``X = 0`` it is the UFM. The paper solves
a UFM "in the same setting without sampling X" (§IV-B): the natural reading, used by
:func:`ufm_model`, is Eq. 13 with ``X = 0`` (MSE, ``λ_W/(2K)||W||^2 + λ/(2N)||H||^2``, Eq. 16
without its trace term); the alternative, Eq. 2's ``(λ_W/2)||W||^2 + (λ_H/2)||H||^2``
(usually with CE), is ``form="eq2"``. The bias is not in the paper; it is optional and
regularised by ``λ_b`` (default 0, unregularised).

**Solvers** (:func:`solve_mufm`): ``"literal"``, the paper's full-batch gradient descent on all
variables (learning rate 0.1, ``5 x 10^4`` steps, ``N(0, 1)`` initialisation; note §5.2:
with the mean-normalised losses it does *not* converge at the paper's λ), and
``"converged"``, L-BFGS to a gradient norm ``<= tol``: for MSE on the reduced objective in
the features alone, ``W`` (and ``b``) eliminated in closed form (Theorem 4's ``W*(H)``);
for CE jointly in ``(W, b, H)``. Both report objective, gradient norm and iterations.
The objectives are not convex: at some λ the MSE MUFM has distinct local minima, so the
converged solver starts at the data by default (at a random point for the UFM, where
``X = 0`` is stationary) and can keep the best of several starts (``n_starts``).

**Theorem 3** (:func:`theorem3_reduce`, :func:`theorem3_lift`, :func:`verify_theorem3`):
Eq. 12 reduces to Eq. 13 because ``Σ_l ||Δ_l||^2 >= ||Σ_l Δ_l||^2 / L`` with equality at
equal increments. The paper prints the bound without ``1/L`` (Eq. 14) and carries λ over
unchanged (``variant="published"``); the correct reduced coefficient is λ/L
(``variant="corrected"``, note §3.5 erratum).

**Theorem 4** (:func:`w_star`, :meth:`MUFM.reduced_loss`, :func:`gradient_flow`):
``W*(H) = Y H^T (H H^T + n λ_W I_d)^{-1}``, the reduced problem Eq. 20 and the gradient
flow Eq. 21, ``dH_t/dt = -Kn ∇L(H_t)`` from ``H_0 = X``, which approximates the MUFM
minimiser ``H_{1/λ}`` at ``t = 1/λ`` for large λ.

All arrays are float64 numpy; inputs may be numpy arrays or torch tensors.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.checks import (
    as_label_array,
    as_real_array,
    check_choice,
    check_float,
    check_int,
    infer_n_classes,
)
from collapselab.metrics.nc import pfc_values
from collapselab.stats import class_stats_from_features
from collapselab.theory.dynamics import integrate

__all__ = [
    "MUFM",
    "GradientFlow",
    "MUFMSolution",
    "MUFMVerification",
    "Theorem3Check",
    "alignment",
    "column_pfc",
    "gradient_flow",
    "mufm_model",
    "solve_converged",
    "solve_literal",
    "solve_mufm",
    "theorem3_lift",
    "theorem3_reduce",
    "ufm_model",
    "verify_mufm",
    "verify_theorem3",
    "w_star",
]

Loss = Literal["mse", "ce"]
Form = Literal["eq13", "eq2"]
Variant = Literal["published", "corrected"]

_LOSSES = ("mse", "ce")
_FORMS = ("eq13", "eq2")


# ---------------------------------------------------------------------------------------
# input checks


def _labels(y: object, n: int, n_classes: int | None) -> tuple[np.ndarray, int]:
    """Labels of the ``n`` columns of ``X`` as int64 numpy, and ``K`` (>= 2)."""
    k = infer_n_classes(y, n_classes)
    labels = as_label_array("labels", y, n, k, source="X", unit="column")
    if n == 0:
        raise ValueError("labels is empty; expected at least one sample")
    return labels, k


# ---------------------------------------------------------------------------------------
# the model


@dataclass(frozen=True, eq=False)
class MUFM:
    r"""A (multilayer) unconstrained feature model; see :func:`mufm_model`, :func:`ufm_model`.

    Attributes:
        X: ``(d, N)`` data ``H^0`` (zeros for the UFM).
        labels: ``(N,)`` integer labels in ``[0, K)``.
        n_classes: ``K``.
        lambda_w: ``λ_W``.
        lam: ``λ``, the optimal-transport (feature) coefficient (``λ_H`` for ``form="eq2"``).
        loss: ``"mse"`` or ``"ce"``.
        n_layers: ``L``, the number of free feature layers (1: Eq. 13; > 1: Eq. 12).
        bias: whether the classifier has a bias.
        lambda_b: ``λ_b``, the bias penalty (0: unregularised).
        form: ``"eq13"`` (``c_W = λ_W/K``, ``c_H = λ/N``) or ``"eq2"``
            (``c_W = λ_W``, ``c_H = λ``).
    """

    X: np.ndarray
    labels: np.ndarray
    n_classes: int
    lambda_w: float
    lam: float
    loss: str = "mse"
    n_layers: int = 1
    bias: bool = False
    lambda_b: float = 0.0
    form: str = "eq13"

    # -- sizes and coefficients ------------------------------------------------------

    @property
    def dim(self) -> int:
        """``d``."""
        return self.X.shape[0]

    @property
    def n_samples(self) -> int:
        """``N = Kn``."""
        return self.X.shape[1]

    @property
    def coef_w(self) -> float:
        """``c_W``: ``λ_W/K`` (Eq. 13) or ``λ_W`` (Eq. 2)."""
        return self.lambda_w / self.n_classes if self.form == "eq13" else self.lambda_w

    @property
    def coef_b(self) -> float:
        """``c_b``: ``λ_b/K`` (Eq. 13 scaling) or ``λ_b``."""
        return self.lambda_b / self.n_classes if self.form == "eq13" else self.lambda_b

    @property
    def coef_h(self) -> float:
        """``c_H``: ``λ/N`` (Eq. 13, ``N = Kn``) or ``λ`` (Eq. 2)."""
        return self.lam / self.n_samples if self.form == "eq13" else self.lam

    @functools.cached_property
    def targets(self) -> np.ndarray:
        """``Y``, ``(K, N)`` one-hot columns."""
        y = np.zeros((self.n_classes, self.n_samples))
        y[self.labels, np.arange(self.n_samples)] = 1.0
        return y

    @property
    def is_ufm(self) -> bool:
        """Whether ``X = 0``."""
        return not np.any(self.X)

    # -- variables -------------------------------------------------------------------

    def layers_of(self, layers: object) -> np.ndarray:
        """``(L, d, N)`` float64 from an ``(L, d, N)`` array, a list of L ``(d, N)``
        matrices or, for ``L = 1``, one ``(d, N)`` matrix."""
        if isinstance(layers, list | tuple):
            layers = np.stack([as_real_array(f"layers[{i}]", h) for i, h in enumerate(layers)])
        arr = as_real_array("layers", layers)
        if arr.ndim == 2 and self.n_layers == 1:
            arr = arr[None]
        if arr.shape != (self.n_layers, self.dim, self.n_samples):
            raise ValueError(
                f"layers must have shape ({self.n_layers}, {self.dim}, {self.n_samples}) "
                f"(L, d, N), got {arr.shape}"
            )
        return arr

    def _w(self, W: object) -> np.ndarray:
        return as_real_array("W", W, shape=(self.n_classes, self.dim))

    def _b(self, b: object | None) -> np.ndarray | None:
        if not self.bias:
            if b is not None:
                raise ValueError("b was given but the model has no bias (bias=False)")
            return None
        if b is None:
            raise ValueError("the model has a bias (bias=True); pass b of shape (K,)")
        return as_real_array("b", b, shape=(self.n_classes,))

    # -- objective and gradient --------------------------------------------------------

    def _logits(self, W: np.ndarray, H: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        z = W @ H
        return z if b is None else z + b[:, None]

    def _loss_and_dz(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        """``L(Z)`` and ``∂L/∂Z``."""
        n = self.n_samples
        if self.loss == "mse":
            r = z - self.targets
            return float(np.sum(r * r)) / (2 * n), r / n
        from scipy.special import log_softmax

        logp = log_softmax(z, axis=0)
        value = -float(np.sum(logp[self.labels, np.arange(n)])) / n
        return value, (np.exp(logp) - self.targets) / n

    def _transport(self, layers: np.ndarray) -> tuple[float, np.ndarray]:
        """``(c_H/2) Σ_l ||H^{l+1} - H^l||^2`` and its gradient in each free layer."""
        steps = np.diff(np.concatenate([self.X[None], layers]), axis=0)  # Δ_1..Δ_L
        grad = steps.copy()
        grad[:-1] -= steps[1:]
        return 0.5 * self.coef_h * float(np.sum(steps * steps)), self.coef_h * grad

    def _evaluate(
        self, W: np.ndarray, layers: np.ndarray, b: np.ndarray | None
    ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray | None]:
        loss, dz = self._loss_and_dz(self._logits(W, layers[-1], b))
        transport, g_layers = self._transport(layers)
        g_layers[-1] += W.T @ dz
        value = loss + transport + 0.5 * self.coef_w * float(np.sum(W * W))
        g_w = dz @ layers[-1].T + self.coef_w * W
        g_b = None
        if b is not None:
            value += 0.5 * self.coef_b * float(b @ b)
            g_b = dz.sum(axis=1) + self.coef_b * b
        return value, g_w, g_layers, g_b

    def objective(self, W: object, layers: object, b: object | None = None) -> float:
        """The objective F (Eq. 12; Eq. 13 for ``L = 1``) at ``(W, b, H^1..H^L)``."""
        return self._evaluate(self._w(W), self.layers_of(layers), self._b(b))[0]

    def gradient(
        self, W: object, layers: object, b: object | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        r"""``(∇_W F, ∇_{H^1..H^L} F, ∇_b F)``; the layer gradient is ``(L, d, N)``.

        With ``∂L/∂Z`` = ``(Z - Y)/N`` (MSE) or ``(softmax(Z) - Y)/N`` (CE),
        ``∇_W = (∂L/∂Z) H^{L T} + c_W W``, ``∇_b = (∂L/∂Z) 1 + c_b b``,
        ``∇_{H^l} = c_H (Δ_l - Δ_{l+1})`` for ``l < L`` and
        ``∇_{H^L} = W^T (∂L/∂Z) + c_H Δ_L``, where ``Δ_l = H^l - H^{l-1}``.
        """
        _, g_w, g_layers, g_b = self._evaluate(self._w(W), self.layers_of(layers), self._b(b))
        return g_w, g_layers, g_b

    # -- W eliminated (MSE) ------------------------------------------------------------

    def classifier_star(self, H: object) -> tuple[np.ndarray, np.ndarray | None]:
        r"""The optimal classifier for fixed last-layer features (MSE; Theorem 4).

        ``W*(H) = Y H^T (H H^T + N c_W I_d)^{-1}``, which for Eq. 13 is the paper's
        ``Y H^T (H H^T + n λ_W I_d)^{-1}``. With a bias, the same ridge solution for the
        augmented ``[H; 1^T]`` with penalty ``N diag(c_W, ..., c_W, c_b)``.

        Returns:
            ``(W*, b*)``, ``b*`` None without bias.
        """
        self._need_mse("the closed-form classifier")
        H = as_real_array("H", H, shape=(self.dim, self.n_samples))
        return _ridge_classifier(H, self.targets, self.coef_w, self.coef_b, self.bias)

    def reduced_loss(self, H: object) -> tuple[float, np.ndarray]:
        r"""Eq. 20's ``L(H) = ||W*(H) H - Y||^2/(2Kn) + (λ_W/2K)||W*(H)||^2`` and ``∇L(H)``.

        By the envelope theorem ``∇L(H) = W*^T (W* H + b* 1^T - Y)/N``; equivalently
        ``L(H) = (λ_W/2K) Tr(Y (H^T H + nλ_W I)^{-1} Y^T)`` without bias (note §3.5),
        computed here in the ``d x d`` form. MSE only.
        """
        self._need_mse("the reduced loss")
        H = as_real_array("H", H, shape=(self.dim, self.n_samples))
        W, b = _ridge_classifier(H, self.targets, self.coef_w, self.coef_b, self.bias)
        loss, dz = self._loss_and_dz(self._logits(W, H, b))
        value = loss + 0.5 * self.coef_w * float(np.sum(W * W))
        if b is not None:
            value += 0.5 * self.coef_b * float(b @ b)
        return value, W.T @ dz

    def reduced_objective(self, layers: object) -> tuple[float, np.ndarray]:
        """``min_{W,b} F`` as a function of the feature layers, and its ``(L, d, N)`` gradient."""
        self._need_mse("the reduced objective")
        layers = self.layers_of(layers)
        W, b = _ridge_classifier(layers[-1], self.targets, self.coef_w, self.coef_b, self.bias)
        value, _, g_layers, _ = self._evaluate(W, layers, b)
        return value, g_layers

    def _need_mse(self, what: str) -> None:
        if self.loss != "mse":
            raise ValueError(f"{what} exists for loss='mse' only, got loss={self.loss!r}")


def _ridge_classifier(
    H: np.ndarray, Y: np.ndarray, coef_w: float, coef_b: float, bias: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    n = H.shape[1]
    if not bias:
        gram = H @ H.T + n * coef_w * np.eye(H.shape[0])
        return np.linalg.solve(gram, H @ Y.T).T, None
    aug = np.vstack([H, np.ones((1, n))])
    pen = np.full(H.shape[0] + 1, n * coef_w)
    pen[-1] = n * coef_b
    wa = np.linalg.solve(aug @ aug.T + np.diag(pen), aug @ Y.T).T
    return wa[:, :-1], wa[:, -1]


def mufm_model(
    X: object,
    labels: object,
    lambda_w: float = 0.005,
    lam: float = 0.001,
    *,
    loss: Loss = "mse",
    n_layers: int = 1,
    bias: bool = False,
    lambda_b: float = 0.0,
    n_classes: int | None = None,
) -> MUFM:
    """The MUFM (Eq. 13; ``n_layers > 1``: the multilayer Eq. 12) for data ``X``.

    Args:
        X: ``(d, N)`` data, one column per sample (the paper's ``X``).
        labels: ``(N,)`` integer labels.
        lambda_w: ``λ_W > 0`` (paper: 0.005).
        lam: ``λ > 0``, the optimal-transport coefficient (paper: 0.001 for Fig. 4,
            0.0005 to 0.02 for Fig. 5).
        loss: ``"mse"`` (the paper's experiments) or ``"ce"``.
        n_layers: ``L``, free feature layers between ``X`` and the classifier.
        bias: add a classifier bias (not in the paper).
        lambda_b: its penalty ``λ_b >= 0``.
        n_classes: ``K``; default ``max(labels) + 1``.
    """
    x = as_real_array("X", X, ndim=2, layout="(d, N)")
    y, k = _labels(labels, x.shape[1], n_classes)
    return MUFM(
        X=x,
        labels=y,
        n_classes=k,
        lambda_w=check_float("lambda_w", lambda_w, minimum=0.0, strict=True),
        lam=check_float("lam", lam, minimum=0.0, strict=True),
        loss=check_choice("loss", loss, _LOSSES),
        n_layers=check_int("n_layers", n_layers, minimum=1),
        bias=bool(bias),
        lambda_b=check_float("lambda_b", lambda_b, minimum=0.0),
        form="eq13",
    )


def ufm_model(
    labels: object,
    dim: int,
    lambda_w: float = 0.005,
    lambda_h: float = 0.001,
    *,
    loss: Loss = "mse",
    bias: bool = False,
    lambda_b: float = 0.0,
    form: Form = "eq13",
    n_classes: int | None = None,
) -> MUFM:
    """The UFM: the MUFM "without sampling X" (paper 001, §IV-B; note §4.2, §7.3).

    ``form="eq13"`` (default, the natural reading): Eq. 13 with ``X = 0``,
    ``L(W H, Y) + (λ_W/2K)||W||^2 + (λ_H/2N)||H||^2``. ``form="eq2"``: Eq. 2's
    ``L(W H, Y) + (λ_W/2)||W||^2 + (λ_H/2)||H||^2`` (Eq. 2 uses CE; pass ``loss="ce"``).
    """
    d = check_int("dim", dim, minimum=1)
    n = int(np.shape(labels)[0]) if np.ndim(labels) == 1 else -1
    y, k = _labels(labels, n, n_classes)
    return MUFM(
        X=np.zeros((d, y.shape[0])),
        labels=y,
        n_classes=k,
        lambda_w=check_float("lambda_w", lambda_w, minimum=0.0, strict=True),
        lam=check_float("lambda_h", lambda_h, minimum=0.0, strict=True),
        loss=check_choice("loss", loss, _LOSSES),
        n_layers=1,
        bias=bool(bias),
        lambda_b=check_float("lambda_b", lambda_b, minimum=0.0),
        form=check_choice("form", form, _FORMS),
    )


def w_star(H: object, labels: object, lambda_w: float, n_classes: int | None = None) -> np.ndarray:
    r"""Theorem 4's closed-form classifier ``W*(H) = Y H^T (H H^T + n λ_W I_d)^{-1}``.

    The minimiser over ``W`` of ``||W H - Y||_F^2/(2Kn) + (λ_W/2K)||W||_F^2`` (MSE, no
    bias), with ``n = N/K`` and ``Y`` the one-hot targets of ``labels``.

    Args:
        H: ``(d, N)`` features (columns are samples).
        labels: ``(N,)`` integer labels.
        lambda_w: ``λ_W > 0``.
        n_classes: ``K``; default ``max(labels) + 1``.

    Returns:
        ``(K, d)``.
    """
    h = as_real_array("H", H, ndim=2, layout="(d, N)")
    y, k = _labels(labels, h.shape[1], n_classes)
    targets = np.zeros((k, y.size))
    targets[y, np.arange(y.size)] = 1.0
    return _ridge_classifier(
        h, targets, check_float("lambda_w", lambda_w, minimum=0.0, strict=True) / k, 0.0, False
    )[0]


# ---------------------------------------------------------------------------------------
# metrics of a solution


def column_pfc(H: object, labels: object) -> dict[str, float]:
    """PFC1-3 of ``(d, N)`` features stored as columns (the UFM layout; paper 001, Eqs. 7-9).

    :func:`collapselab.metrics.nc.pfc_values` of the rows ``H^T``: one set of class
    statistics, the catalogue keys ``nc1_trace_ratio``, ``nc2_etf_distance``,
    ``ncc_accuracy``.
    """
    h = torch.from_numpy(as_real_array("H", H).T.copy())
    return pfc_values(h, torch.as_tensor(np.asarray(labels)))


def alignment(H: object, X: object) -> float:
    """``|| H/||H||_F - X/||X||_F ||_F`` (paper 001, §IV-B, Fig. 5 right; note R1.8).

    ``H`` and ``X`` have the same shape and the same sample order; 0 when ``H`` is a
    positive multiple of ``X``, at most 2.
    """
    h = as_real_array("H", H)
    x = as_real_array("X", X)
    if h.shape != x.shape:
        raise ValueError(f"H has shape {h.shape} but X has {x.shape}; expected the same")
    nh, nx = np.linalg.norm(h), np.linalg.norm(x)
    if nh == 0 or nx == 0:
        raise ValueError("alignment is undefined for a zero matrix (||H||_F or ||X||_F is 0)")
    return float(np.linalg.norm(h / nh - x / nx))


def _traces(H: np.ndarray, labels: np.ndarray, k: int) -> tuple[float, float]:
    stats = class_stats_from_features(torch.from_numpy(H.T.copy()), torch.from_numpy(labels), k)
    return stats.within_trace, stats.between_trace


# ---------------------------------------------------------------------------------------
# solvers


@dataclass(frozen=True, eq=False)
class MUFMSolution:
    """A solved (or partly solved) MUFM.

    Attributes:
        W: ``(K, d)`` classifier.
        b: ``(K,)`` bias, or None.
        layers: ``(L, d, N)`` feature layers ``H^1..H^L``.
        objective: F at the returned point.
        grad_norm: Frobenius norm of the full gradient ``(∇_W, ∇_b, ∇_{H^1..H^L})``.
        iterations: gradient steps (literal) or L-BFGS iterations (converged).
        method: ``"literal"`` or ``"converged"``.
        converged: ``grad_norm <= tol``.
        message: the solver's stopping reason.
    """

    W: np.ndarray
    b: np.ndarray | None
    layers: np.ndarray
    objective: float
    grad_norm: float
    iterations: int
    method: str
    converged: bool
    message: str

    @property
    def H(self) -> np.ndarray:
        """``(d, N)`` last-layer features ``H^L``."""
        return self.layers[-1]


def _grad_norm(g_w: np.ndarray, g_layers: np.ndarray, g_b: np.ndarray | None) -> float:
    total = float(np.sum(g_w * g_w) + np.sum(g_layers * g_layers))
    if g_b is not None:
        total += float(g_b @ g_b)
    return math.sqrt(total)


def _solution_at(
    problem: MUFM,
    point: tuple[np.ndarray, np.ndarray, np.ndarray | None],
    tol: float,
    iterations: int,
    method: str,
    message: str,
) -> MUFMSolution:
    """``point = (W, layers, b)`` as a solution: its objective and gradient norm ``||∇F||``,
    converged when ``||∇F|| <= tol``."""
    W, layers, b = point
    value, g_w, g_layers, g_b = problem._evaluate(W, layers, b)
    norm = _grad_norm(g_w, g_layers, g_b)
    return MUFMSolution(
        W=W,
        b=b,
        layers=layers,
        objective=value,
        grad_norm=norm,
        iterations=iterations,
        method=method,
        converged=norm <= tol,
        message=message,
    )


def _random_init(
    problem: MUFM, seed: int | np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((problem.n_classes, problem.dim))
    layers = rng.standard_normal((problem.n_layers, problem.dim, problem.n_samples))
    return W, layers, (np.zeros(problem.n_classes) if problem.bias else None)


def solve_literal(
    problem: MUFM,
    lr: float = 0.1,
    steps: int = 50_000,
    seed: int | np.random.Generator = 0,
    tol: float = 1e-9,
    progress: Callable[[int, int], None] | None = None,
) -> MUFMSolution:
    """The paper's solver (paper 001, §IV-B): plain full-batch gradient descent.

    ``W`` and every free layer start i.i.d. ``N(0, 1)`` (the bias, not in the paper, at 0)
    and all variables take simultaneous steps ``θ <- θ - lr ∇_θ F`` for ``steps``
    iterations. The paper uses ``lr = 0.1`` and ``5 x 10^4`` steps; note §5.2 explains why,
    with the mean-normalised losses, this is far from converged at the paper's λ.

    Args:
        problem: the model.
        lr: learning rate.
        steps: number of gradient steps (fewer for quick tests).
        seed: initialisation seed.
        tol: gradient-norm threshold for the ``converged`` flag (no early stop).
        progress: called as ``progress(steps_done, steps)`` every 1% of the steps.

    Raises:
        FloatingPointError: if the iterates diverge (non-finite objective).
    """
    lr = check_float("lr", lr, minimum=0.0, strict=True)
    steps = check_int("steps", steps, minimum=0)
    W, layers, b = _random_init(problem, seed)
    with serial_threads():
        for step in range(1, steps + 1):
            _, g_w, g_layers, g_b = problem._evaluate(W, layers, b)
            W = W - lr * g_w
            layers = layers - lr * g_layers
            if b is not None:
                b = b - lr * g_b
            if progress is not None and (step % max(steps // 100, 1) == 0 or step == steps):
                progress(step, steps)
        message = f"{steps} gradient steps at lr={lr}"
        solution = _solution_at(problem, (W, layers, b), tol, steps, "literal", message)
    if not math.isfinite(solution.objective):
        raise FloatingPointError(
            f"gradient descent diverged (objective {solution.objective}); lower lr={lr}"
        )
    return solution


def _initial_point(
    problem: MUFM, init: object, seed: int | np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    if isinstance(init, MUFMSolution):
        b = (
            None
            if not problem.bias
            else (init.b if init.b is not None else np.zeros(problem.n_classes))
        )
        return init.W.copy(), problem.layers_of(init.layers.copy()), b
    if init == "random":
        return _random_init(problem, seed)
    if init == "data":
        if problem.is_ufm:
            raise ValueError(
                "init='data' starts at X = 0, a stationary point of the UFM; use init='random'"
            )
        W, _, b = _random_init(problem, seed)
        return W, np.repeat(problem.X[None], problem.n_layers, axis=0), b
    raise ValueError(f"init must be 'random', 'data' or an MUFMSolution, got {init!r}")


def solve_converged(
    problem: MUFM,
    tol: float = 1e-9,
    max_iter: int = 50_000,
    init: Literal["auto", "random", "data"] | MUFMSolution = "auto",
    seed: int = 0,
    max_restarts: int = 5,
    n_starts: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> MUFMSolution:
    """Solve to a gradient norm ``<= tol`` with L-BFGS (scipy ``L-BFGS-B``, no bounds).

    MSE: L-BFGS on the reduced objective of the feature layers alone
    (:meth:`MUFM.reduced_objective`), the classifier eliminated in closed form, so the
    gradient in ``W`` is exactly 0. CE: L-BFGS on ``(W, b, H^1..H^L)`` jointly. Stops when
    the largest gradient entry is below ``tol / sqrt(#variables)``, which guarantees a
    Frobenius norm ``<= tol``; a stalled line search is restarted from the current point
    (at most ``max_restarts`` times). The reported gradient is that of the full objective.

    Args:
        problem: the model.
        tol: target Frobenius norm of the gradient (the objectives are O(1e-3 .. 1), so
            much below 1e-10 is often out of reach in float64, CE especially).
        max_iter: total L-BFGS iteration budget.
        init: ``"random"`` (``N(0, 1)``, the paper's), ``"data"`` (every layer at ``X``;
            not for the UFM, where ``X = 0`` is stationary), ``"auto"`` (``"data"`` for an
            MUFM, ``"random"`` for the UFM) or a previous solution (warm start, e.g. along
            a λ sweep).
        seed: seed of the random initialisation.
        max_restarts: restarts after a stalled line search.
        n_starts: the problem is not convex (at some λ the MSE MUFM has distinct local
            minima); with ``n_starts > 1`` the solver also starts from ``n_starts - 1``
            random points (seeds ``seed + 1, ...``) and keeps the lowest objective.
        progress: called as ``progress(iterations_done, n_starts * max_iter)`` after every
            L-BFGS iteration; the total is the iteration budget, an upper bound (a start
            that converges early jumps to its share of the budget).
    """
    tol = check_float("tol", tol, minimum=0.0, strict=True)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    n_starts = check_int("n_starts", n_starts, minimum=1)
    if init == "auto":
        init = "random" if problem.is_ufm else "data"
    total = n_starts * max_iter

    def report(start_index: int) -> Callable[[int], None] | None:
        if progress is None:
            return None
        return lambda used: progress(start_index * max_iter + used, total)

    with serial_threads():
        start = _initial_point(problem, init, seed)
        best = _lbfgs(problem, start, tol, max_iter, max_restarts, report(0))
        for j in range(1, n_starts):
            start = _initial_point(problem, "random", seed + j)
            other = _lbfgs(problem, start, tol, max_iter, max_restarts, report(j))
            if other.objective < best.objective:
                best = other
            if progress is not None:
                progress((j + 1) * max_iter, total)
    if progress is not None:
        progress(total, total)
    return best


def _lbfgs(
    problem: MUFM,
    start: tuple[np.ndarray, np.ndarray, np.ndarray | None],
    tol: float,
    max_iter: int,
    max_restarts: int,
    on_iteration: Callable[[int], None] | None = None,
) -> MUFMSolution:
    W, layers, b = start
    shape_l = layers.shape
    mse = problem.loss == "mse"

    def unpack(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        if mse:
            return np.empty(0), v.reshape(shape_l), None
        k, d = problem.n_classes, problem.dim
        w = v[: k * d].reshape(k, d)
        lay = v[k * d : k * d + layers.size].reshape(shape_l)
        return w, lay, (v[k * d + layers.size :] if problem.bias else None)

    def fun(v: np.ndarray) -> tuple[float, np.ndarray]:
        w, lay, bb = unpack(v)
        if mse:
            value, g = problem.reduced_objective(lay)
            return value, g.ravel()
        value, g_w, g_l, g_b = problem._evaluate(w, lay, bb)
        parts = [g_w.ravel(), g_l.ravel()] + ([g_b] if bb is not None else [])
        return value, np.concatenate(parts)

    parts = (
        [layers.ravel()] if mse else [W.ravel(), layers.ravel()] + ([b] if b is not None else [])
    )
    v = np.concatenate(parts)
    from scipy.optimize import minimize

    gtol = tol / math.sqrt(v.size)
    used, message = 0, "not started"
    iterations = [0]  # every L-BFGS iteration over the restarts, for the progress report

    def callback(_: object) -> None:
        iterations[0] += 1
        on_iteration(min(iterations[0], max_iter))

    for _ in range(max_restarts + 1):
        res = minimize(
            fun,
            v,
            jac=True,
            method="L-BFGS-B",
            callback=None if on_iteration is None else callback,
            options={"maxiter": max_iter - used, "gtol": gtol, "ftol": 0.0, "maxcor": 20},
        )
        used += int(res.nit)
        v, message = res.x, str(res.message)
        if np.max(np.abs(res.jac)) <= gtol or used >= max_iter or res.nit == 0:
            break
    w, lay, bb = unpack(v)
    if mse:
        w, bb = _ridge_classifier(
            lay[-1], problem.targets, problem.coef_w, problem.coef_b, problem.bias
        )
    return _solution_at(problem, (w, lay, bb), tol, used, "converged", message)


def solve_mufm(
    problem: MUFM, method: Literal["literal", "converged"] = "converged", **options: object
) -> MUFMSolution:
    """Solve with ``method="literal"`` (:func:`solve_literal`) or ``"converged"``
    (:func:`solve_converged`); ``options`` go to that solver."""
    if method == "literal":
        return solve_literal(problem, **options)
    if method == "converged":
        return solve_converged(problem, **options)
    raise ValueError(f"method must be 'literal' or 'converged', got {method!r}")


# ---------------------------------------------------------------------------------------
# Theorem 3


def theorem3_reduce(problem: MUFM, variant: Variant = "corrected") -> MUFM:
    r"""Theorem 3: the single-layer MUFM (Eq. 13) equivalent to a multilayer one (Eq. 12).

    ``Σ_{l<L} ||h^{l+1} - h^l||^2 >= ||h^L - h^0||^2 / L`` (Cauchy-Schwarz), with equality
    exactly at equal increments (Eq. 15), so minimising over the intermediate layers
    leaves ``(λ/L)/(2Kn) ||H - X||_F^2``.

    Args:
        problem: a model with ``n_layers = L``.
        variant: ``"corrected"``: coefficient ``λ/L`` (note §3.5 erratum); ``"published"``:
            λ carried over unchanged, as Eq. 13 and the false bound Eq. 14 print it.
    """
    variant = check_choice("variant", variant, ("published", "corrected"))
    lam = problem.lam / problem.n_layers if variant == "corrected" else problem.lam
    return MUFM(
        X=problem.X,
        labels=problem.labels,
        n_classes=problem.n_classes,
        lambda_w=problem.lambda_w,
        lam=lam,
        loss=problem.loss,
        n_layers=1,
        bias=problem.bias,
        lambda_b=problem.lambda_b,
        form=problem.form,
    )


def theorem3_lift(H: object, X: object, n_layers: int) -> np.ndarray:
    """The equally spaced layers of Eq. 15: ``H^l = X + (l/L)(H - X)``, ``l = 1..L``.

    Returns:
        ``(L, d, N)``; the last entry is ``H``.
    """
    h = as_real_array("H", H)
    x = as_real_array("X", X)
    if h.shape != x.shape or h.ndim != 2:
        raise ValueError(f"H and X must be (d, N) matrices of one shape, got {h.shape}, {x.shape}")
    big_l = check_int("n_layers", n_layers, minimum=1)
    fractions = np.arange(1, big_l + 1)[:, None, None] / big_l
    return x[None] + fractions * (h - x)[None]


def _spacing_error(problem: MUFM, layers: np.ndarray) -> float:
    """``max_l ||Δ_l - Δ̄||_F / ||Δ̄||_F``, Δ̄ the mean increment (0 at equal spacing)."""
    steps = np.diff(np.concatenate([problem.X[None], layers]), axis=0)
    mean = steps.mean(axis=0)
    scale = np.linalg.norm(mean)
    return float(max(np.linalg.norm(s - mean) for s in steps) / (scale if scale > 0 else 1.0))


@dataclass(frozen=True)
class Theorem3Check:
    """Theorem 3 held against a directly solved multilayer MUFM.

    Attributes:
        n_layers: L.
        multilayer_objective: F of Eq. 12 at its solution.
        spacing_error: ``max_l ||Δ_l - Δ̄||_F / ||Δ̄||_F`` of the solution's increments.
        corrected_feature_error: ``||H^L - H_corr||_F / ||H_corr||_F`` with ``H_corr`` the
            solution of the ``corrected`` reduction.
        published_feature_error: the same for the ``published`` reduction.
        corrected_objective_gap: ``|F_12 - F_corr| / |F_12|`` at the two solutions.
        published_objective_gap: ``|F_12 - F_pub| / |F_12|``.
        grad_norms: gradient norms of the multilayer, corrected and published solutions.
    """

    n_layers: int
    multilayer_objective: float
    spacing_error: float
    corrected_feature_error: float
    published_feature_error: float
    corrected_objective_gap: float
    published_objective_gap: float
    grad_norms: tuple[float, float, float]


def verify_theorem3(
    problem: MUFM,
    tol: float = 1e-9,
    init: Literal["random", "data"] = "data",
    seed: int = 0,
    max_iter: int = 50_000,
) -> Theorem3Check:
    """Solve Eq. 12 directly (all L layers free) and compare with both reductions.

    The multilayer problem is solved by :func:`solve_converged` without using the theorem;
    the reduced problems of both variants are solved the same way from the same kind of
    initialisation (default: at the data, where the MUFM's basin is unambiguous).
    """
    if problem.n_layers < 2:
        raise ValueError(
            f"Theorem 3 needs a multilayer model (n_layers >= 2), got {problem.n_layers}"
        )
    multi = solve_converged(problem, tol=tol, init=init, seed=seed, max_iter=max_iter)
    sols = {
        v: solve_converged(
            theorem3_reduce(problem, v), tol=tol, init=init, seed=seed, max_iter=max_iter
        )
        for v in ("corrected", "published")
    }
    h = multi.H

    def feat(v: str) -> float:
        ref = sols[v].H
        return float(np.linalg.norm(h - ref) / np.linalg.norm(ref))

    def gap(v: str) -> float:
        return abs(multi.objective - sols[v].objective) / abs(multi.objective)

    return Theorem3Check(
        n_layers=problem.n_layers,
        multilayer_objective=multi.objective,
        spacing_error=_spacing_error(problem, multi.layers),
        corrected_feature_error=feat("corrected"),
        published_feature_error=feat("published"),
        corrected_objective_gap=gap("corrected"),
        published_objective_gap=gap("published"),
        grad_norms=(multi.grad_norm, sols["corrected"].grad_norm, sols["published"].grad_norm),
    )


# ---------------------------------------------------------------------------------------
# Theorem 4: the gradient flow (21)


@dataclass(frozen=True, eq=False)
class GradientFlow:
    """The flow ``dH_t/dt = -Kn ∇L(H_t)``, ``H_0 = X`` (paper 001, Eq. 21, Lemma 1).

    Attributes:
        ts: ``(T,)`` times; ``t = 1/λ`` matches the MUFM minimiser ``H_{1/λ}``.
        H: ``(T, d, N)`` the flow at ``ts``.
        trace_within: ``(T,)`` ``Tr Σ_W(H_t)`` (Lemma 1: decreasing).
        trace_between: ``(T,)`` ``Tr Σ_B(H_t)`` (Lemma 1: increasing).
        pfc1: ``(T,)`` PFC1(H_t) (decreasing).
    """

    ts: np.ndarray
    H: np.ndarray
    trace_within: np.ndarray
    trace_between: np.ndarray
    pfc1: np.ndarray


def gradient_flow(
    problem: MUFM,
    ts: Sequence[float] | np.ndarray,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    method: str = "DOP853",
) -> GradientFlow:
    """Integrate Eq. 21 with :func:`scipy.integrate.solve_ivp` (MSE, ``L = 1``, Eq. 13 form).

    ``L(H)`` is Eq. 20's loss with ``W*(H)`` substituted (:meth:`MUFM.reduced_loss`); the
    first-order condition of Eq. 20, ``Kn ∇L(H) + λ (H - X) = 0``, is an implicit Euler
    step of this flow of length ``1/λ`` from ``X``, so ``H_{1/λ} = H(t = 1/λ) + O(1/λ^2)``.

    Args:
        problem: an Eq. 13 MSE model (its ``X`` is the start; ``λ`` is not used).
        ts: non-decreasing times ``>= 0`` at which to report the flow.
        rtol, atol, method: passed to ``solve_ivp``.
    """
    problem._need_mse("the gradient flow (21)")
    if problem.n_layers != 1 or problem.form != "eq13":
        raise ValueError("the gradient flow (21) is defined for the Eq. 13 model (n_layers=1)")
    times = np.asarray(ts, dtype=np.float64)
    if times.ndim != 1 or times.size == 0 or not np.all(np.isfinite(times)):
        raise ValueError(f"ts must be a non-empty 1-D sequence of finite times, got {ts!r}")
    if times[0] < 0 or np.any(np.diff(times) < 0):
        raise ValueError("ts must be non-decreasing and >= 0")
    shape, n = problem.X.shape, problem.n_samples

    def rhs(_: float, v: np.ndarray) -> np.ndarray:
        return -n * problem.reduced_loss(v.reshape(shape))[1].ravel()

    if times[-1] > 0:
        with serial_threads():
            flow = integrate(rhs, problem.X.ravel(), times, rtol=rtol, atol=atol, method=method)
        path = flow.reshape(times.size, *shape)
    else:
        path = np.repeat(problem.X[None], times.size, axis=0)
    traces = np.array([_traces(h, problem.labels, problem.n_classes) for h in path])
    return GradientFlow(
        ts=times,
        H=path,
        trace_within=traces[:, 0],
        trace_between=traces[:, 1],
        pfc1=traces[:, 0] / traces[:, 1],
    )


# ---------------------------------------------------------------------------------------
# verification


@dataclass(frozen=True)
class MUFMVerification:
    """Predictions held against a solution; relative errors (NaN where not applicable).

    Attributes:
        grad_norm: the solution's gradient norm (absolute).
        classifier: ``||W - W*(H)||_F / ||W*(H)||_F`` (MSE).
        first_order: Appendix C's condition ``Kn ∇L(H) + λ(H - X) = 0`` (MSE, ``L = 1``,
            Eq. 13 form) as ``||Kn ∇L + λ(H - X)||_F / (||Kn ∇L||_F + ||λ(H - X)||_F)``.
        spacing: Theorem 3's equal spacing, ``max_l ||Δ_l - Δ̄||_F / ||Δ̄||_F`` (``L > 1``).
        corrected_identity: ``|F_12(lift(H^L)) - F_13^corr(H^L)| / |F_13^corr|`` at the
            solution (both with their optimal classifier; MSE): Theorem 3 corrected.
        pfc: PFC metrics of the solution's ``H`` (and ``pfc_data`` of ``X`` unless UFM).
        pfc_data: PFC metrics of ``X`` (empty for the UFM).
    """

    grad_norm: float
    classifier: float
    first_order: float
    spacing: float
    corrected_identity: float
    pfc: dict[str, float]
    pfc_data: dict[str, float]


def verify_mufm(problem: MUFM, solution: MUFMSolution) -> MUFMVerification:
    """Hold the closed forms (``W*(H)``, the first-order condition, Theorem 3's spacing and
    reduction identity) against a solved instance and report relative errors."""
    nan = float("nan")
    classifier = first_order = spacing = identity = nan
    layers = problem.layers_of(solution.layers)
    H = layers[-1]
    if problem.loss == "mse":
        ws, bs = problem.classifier_star(H)
        if bs is not None:  # compare the augmented classifier [W b]
            ws = np.column_stack([ws, bs])
            given = np.column_stack([solution.W, solution.b])
        else:
            given = solution.W
        classifier = float(np.linalg.norm(given - ws) / np.linalg.norm(ws))
        if problem.n_layers == 1 and problem.form == "eq13":
            grad = problem.n_samples * problem.reduced_loss(H)[1]
            pull = problem.lam * (H - problem.X)
            denom = np.linalg.norm(grad) + np.linalg.norm(pull)
            first_order = float(np.linalg.norm(grad + pull) / (denom if denom > 0 else 1.0))
        if problem.n_layers > 1:
            reduced = theorem3_reduce(problem, "corrected")
            f13 = reduced.reduced_objective(H)[0]
            f12 = problem.reduced_objective(theorem3_lift(H, problem.X, problem.n_layers))[0]
            identity = abs(f12 - f13) / abs(f13)
    if problem.n_layers > 1:
        spacing = _spacing_error(problem, layers)
    return MUFMVerification(
        grad_norm=solution.grad_norm,
        classifier=classifier,
        first_order=first_order,
        spacing=spacing,
        corrected_identity=identity,
        pfc=column_pfc(H, problem.labels),
        pfc_data={} if problem.is_ufm else column_pfc(problem.X, problem.labels),
    )
