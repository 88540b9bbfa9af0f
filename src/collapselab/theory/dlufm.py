r"""The deep linear and deep ReLU unconstrained feature models of paper 004 (note 004 §2-3).

**The models.** ``K`` classes of ``n`` samples (``N = Kn``), labels class-major, so the
paper's targets are ``Y = I_K ⊗ 1_nᵀ`` (``K x N``). Free features ``H_1`` (``d_1 x N``)
pass through ``L`` bias-free layers ``W_l`` (``d_{l+1} x d_l``, ``d_{L+1} = K``):
``h^{(l+1)} = σ(W_l h^{(l)})`` for ``l < L`` and outputs ``f = W_L h^{(L)}``, with ``σ`` the
identity (:class:`DeepLinearUFM`, Eq. 1) or ReLU (:class:`DeepReLUUFM`, §3.1; optionally
also on ``H_1``). ``h^{(l)}`` is the *input* of ``W_l`` (note §2).

**Layout** (docs/theory.md, Conventions). Parameters are the paper's matrices in the
``(out, in)`` layout of ``nn.Linear.weight``: ``W_l`` is ``(d_{l+1}, d_l)`` and ``H_1`` is
``(d_1, N)``, the weight of a first layer fed the one-hot sample indices (as in
:class:`UFMModule`). Every array with one entry per sample has the samples as **rows**:
:meth:`DeepUFM.features` gives ``(N, d_l)`` (``H_lᵀ``), :attr:`DeepUFM.targets` ``(N, K)``
(``Yᵀ``), :meth:`DeepUFM.masks` ``(N, d_{l+1})``. :meth:`UFMParameters.from_feature_rows`
and :attr:`UFMParameters.feature_rows` convert ``H_1`` from and to rows. The formulas below
are the paper's, in columns; the code evaluates them on the column matrices.

The objective is

.. math::
    F = s\,\|f(H_1) - Y\|_F^2 + \sum_{l=1}^{L} \frac{\lambda_{W_l}}{2}\|W_l\|_F^2
        + \frac{\lambda_{H_1}}{2}\|H_1\|_F^2 ,

with the loss normalisation ``s = 1/(2N)`` by default (``Ave_{k,i} ½‖f_{ki} − y_k‖²``, the
reconstruction of note §3.4 and Dang et al.'s code); ``loss_scale`` also takes ``"1/N"``,
``"1/(2n)"`` or any ``s > 0``. Per sample the loss is ``ℓ_{ki} = (κ/2)‖f_{ki} − y_k‖²`` with
``κ = 2sN`` (1 by default), so ``F = (1/N) Σ ℓ_{ki} + penalties``; ``κ`` multiplies every
Hessian, gradient and Gauss-Newton quantity of the data term. ``L = 1`` is the classic UFM.

**Gradients** (:meth:`DeepUFM.gradient`), with ``R = 2s(f − Y)`` and ``D_l`` the ReLU masks:
the back-propagated errors ``B_L = R`` and ``B_l = D_l ⊙ (W_{l+1}ᵀ B_{l+1})`` give
``∂F/∂W_l = B_l H_lᵀ + λ_{W_l} W_l`` and ``∂F/∂H_1 = W_1ᵀ B_1 + λ_{H_1} H_1`` (times the mask
of ``H_1`` when ReLU is applied to it); for the linear model
``∂F/∂W_l = W_{L:l+1}ᵀ R H_lᵀ + λ_{W_l}W_l`` (note §3.5).

**The exact solution** of the linear model (:func:`closed_form`, note §3.6, derived there,
not in the paper). For fixed product ``X = W_L⋯W_1H_1`` the penalties are at least
``((L+1)/2) b Σ_i σ_i(X)^{2/(L+1)}``, ``b = (λ_{H_1} Π_l λ_{W_l})^{1/(L+1)}``, and ``X`` shares
``Y``'s singular vectors, so with every singular value ``√n·t`` the problem is the scalar

.. math::
    φ(t) = (t-1)^2 + β t^{p}, \quad p = \frac{2}{L+1}, \quad
    β = \frac{K(L+1)}{κ}\,(n λ_{H_1} Π_l λ_{W_l})^{1/(L+1)}, \quad F^* = \frac{κ}{2} \min_t φ(t).

A non-zero optimum exists iff ``min_{t>0} φ(t) < φ(0) = 1``, i.e. (the exact form of the
paper's condition (2), whose printed form was lost)

.. math::
    β < β_c = \frac{L+1}{L}\Big(\frac{L-1}{L}\Big)^{\frac{L-1}{L+1}}
    \iff K^{L+1} n λ_{H_1} Π_l λ_{W_l} < κ^{L+1} \frac{(L-1)^{L-1}}{L^{2L}}
    \quad (L = 1: K^2 n λ_H λ_W < κ^2);

beyond it every parameter is zero at the optimum. ``t*`` is the largest root of
``φ'(t) = 0`` in ``(0, 1)``; the optimum has outputs ``t* Y``, every factor has exactly ``K``
equal non-zero singular values with ``λ_{W_l} σ_{W_l}^2 = λ_{H_1} σ_{H_1}^2 = C = b (√n t*)^p``,
and :func:`exact_optimum` builds one from random orthonormal frames ``U_l`` (``d_l x K``,
``U_{L+1} = I_K``): ``H_1 = ‖h̄‖ U_1 ⊗ 1_nᵀ``, ``W_l = σ_{W_l} U_{l+1} U_lᵀ``.

**Solvers**: :func:`gradient_descent` (``"literal"``: the paper's full-batch gradient descent
from a normal initialisation, records at log-spaced checkpoints, optional heavy-ball
momentum) and :func:`minimise` (``"converged"``: L-BFGS to a gradient tolerance, for the
ReLU model, which has no closed form). :func:`is_global_optimum` checks a point against
``F*``, the gradient and the balancedness identities of note §3.5.

All arrays are float64 numpy; inputs may be numpy arrays or torch tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from numbers import Real

import numpy as np
import torch
from torch import nn

from collapselab._threads import serial_threads
from collapselab.checks import ArgumentTypeError, as_real_array, check_float, check_int
from collapselab.theory.dynamics import diverged

__all__ = [
    "LOSS_SCALES",
    "ClosedForm",
    "DeepLinearUFM",
    "DeepReLUUFM",
    "DeepUFM",
    "DescentTrajectory",
    "OptimumCheck",
    "UFMModule",
    "UFMParameters",
    "balancedness_residuals",
    "checkpoint_steps",
    "closed_form",
    "descent_step",
    "exact_optimum",
    "gradient_descent",
    "is_global_optimum",
    "local_minimum_threshold",
    "log_checkpoints",
    "minimise",
    "phi",
    "regularisation_threshold",
    "require_nontrivial",
    "sgd_batches",
    "solve_t_star",
]

LOSS_SCALES: dict[str, Callable[[int, int], float]] = {
    "1/(2N)": lambda k, n: 1.0 / (2 * k * n),
    "1/N": lambda k, n: 1.0 / (k * n),
    "1/(2n)": lambda k, n: 1.0 / (2 * n),
}
"""Named loss normalisations ``s`` of ``s‖f − Y‖²`` (``K``, ``n`` -> ``s``); the default is
``"1/(2N)"``, ``Ave_{k,i} ½‖f_{ki} − y_k‖²``."""


# ---------------------------------------------------------------------------------------
# parameters


@dataclass(frozen=True, eq=False)
class UFMParameters:
    """A point of a deep UFM: the free features, the weights and, for a model with biases,
    the biases.

    Attributes:
        H: ``(d_1, N)`` free features ``H_1``, the paper's matrix: one column per sample
            (class-major), a parameter in the ``(out, in)`` layout of the weights (the
            samples as rows: :attr:`feature_rows`).
        W: ``(W_1, ..., W_L)``, ``W_l`` of shape ``(d_{l+1}, d_l)``.
        b: ``(b_1, ..., b_L)``, ``b_l`` of shape ``(d_{l+1},)``; empty without biases (the
            paper's model).
    """

    H: np.ndarray
    W: tuple[np.ndarray, ...]
    b: tuple[np.ndarray, ...] = ()

    @classmethod
    def from_feature_rows(
        cls, features: object, weights: Sequence[object], biases: Sequence[object] = ()
    ) -> UFMParameters:
        """The point whose free features are the rows of ``features`` ``(N, d_1)`` (one row
        per sample, class-major): ``H_1 = featuresᵀ``; ``weights`` ``(W_1, ..., W_L)`` and
        ``biases`` as stored. Float64 copies; check them against a model with
        :meth:`DeepUFM.check_point`."""
        rows = as_real_array("features", features, ndim=2, layout="(N, d_1)")
        ws = tuple(as_real_array(f"W_{i + 1}", w, ndim=2) for i, w in enumerate(weights))
        bs = tuple(as_real_array(f"b_{i + 1}", v, ndim=1) for i, v in enumerate(biases))
        return cls(rows.T, ws, bs)

    @property
    def feature_rows(self) -> np.ndarray:
        """``H_1ᵀ``, ``(N, d_1)``: the free features with one row per sample (a view)."""
        return self.H.T

    def flat(self) -> np.ndarray:
        """One vector: ``vec_row(H_1)``, ``vec_row(W_1), ..., vec_row(W_L)``, then
        ``b_1, ..., b_L`` if any."""
        return np.concatenate([self.H.ravel()] + [w.ravel() for w in self.W] + list(self.b))

    def copy(self) -> UFMParameters:
        """A copy that owns its arrays."""
        return UFMParameters(
            self.H.copy(), tuple(w.copy() for w in self.W), tuple(v.copy() for v in self.b)
        )

    def norm(self) -> float:
        """Frobenius norm of every block together."""
        return float(np.linalg.norm(self.flat()))

    def scaled(self, factor: float) -> UFMParameters:
        """Every block multiplied by ``factor``."""
        return UFMParameters(
            self.H * factor, tuple(w * factor for w in self.W), tuple(v * factor for v in self.b)
        )


# ---------------------------------------------------------------------------------------
# the models


def _widths(widths: object, n_layers: int | None) -> tuple[int, ...]:
    if isinstance(widths, Real) and not isinstance(widths, bool):
        if n_layers is None:
            raise ValueError(
                "widths is one number: pass n_layers (L) too, or one lambda_w per layer"
            )
        big_l = check_int("n_layers", n_layers, minimum=1)
        return (check_int("widths", widths, minimum=1),) * big_l
    if isinstance(widths, str) or not isinstance(widths, Sequence):
        raise ArgumentTypeError(
            f"widths must be an integer or a sequence of L integers (d_1, ..., d_L), "
            f"got {type(widths).__name__}"
        )
    out = tuple(check_int(f"widths[{i}]", w, minimum=1) for i, w in enumerate(widths))
    if not out:
        raise ValueError("widths is empty; expected L >= 1 widths (d_1, ..., d_L)")
    if n_layers is not None and check_int("n_layers", n_layers, minimum=1) != len(out):
        raise ValueError(
            f"widths has {len(out)} entries but n_layers={n_layers}; expected one width "
            f"per layer (d_1, ..., d_L)"
        )
    return out


def _lambdas(lambda_w: object, n_layers: int) -> tuple[float, ...]:
    if isinstance(lambda_w, Real) and not isinstance(lambda_w, bool):
        value = check_float("lambda_w", lambda_w, minimum=0.0, strict=True)
        return (value,) * n_layers
    if isinstance(lambda_w, str) or not isinstance(lambda_w, Sequence):
        raise ArgumentTypeError(
            f"lambda_w must be a number or a sequence of L = {n_layers} numbers, "
            f"got {type(lambda_w).__name__}"
        )
    if len(lambda_w) != n_layers:
        raise ValueError(
            f"lambda_w has {len(lambda_w)} entries but the model has L = {n_layers} layers; "
            f"expected one λ_W per layer"
        )
    return tuple(
        check_float(f"lambda_w[{i}]", v, minimum=0.0, strict=True) for i, v in enumerate(lambda_w)
    )


def _loss_scale(loss_scale: object, k: int, n: int) -> float:
    if isinstance(loss_scale, str):
        if loss_scale not in LOSS_SCALES:
            raise ValueError(
                f"loss_scale must be one of {tuple(LOSS_SCALES)} or a number > 0, "
                f"got {loss_scale!r}"
            )
        return LOSS_SCALES[loss_scale](k, n)
    return check_float("loss_scale", loss_scale, minimum=0.0, strict=True)


class DeepUFM:
    r"""A deep unconstrained feature model (the base of :class:`DeepLinearUFM` and
    :class:`DeepReLUUFM`; see the module docstring for ``F``).

    Args:
        n_classes: ``K >= 2``.
        n_per_class: ``n >= 1`` samples per class (``N = Kn``).
        widths: ``(d_1, ..., d_L)``, or one width ``d`` with ``n_layers`` (or with one
            ``λ_W`` per layer); every width must be at least ``K`` (Theorem 3.1's ``d >= K``).
        lambda_w: ``λ_{W_l} > 0``, one number or one per layer.
        lambda_h: ``λ_{H_1} > 0``.
        n_layers: ``L >= 1`` when ``widths`` is one number.
        loss_scale: ``s``: ``"1/(2N)"`` (default), ``"1/N"``, ``"1/(2n)"`` or a number > 0.
        bias: give every layer a bias, ``W_l h + b_l`` (off by default: the paper sets them
            to zero; the closed form and the theorems are for the bias-free model).
        lambda_b: ``λ_b >= 0``, the penalty ``(λ_b/2) Σ_l ‖b_l‖²`` (0: unregularised).
    """

    activation = "identity"

    def __init__(
        self,
        n_classes: int,
        n_per_class: int,
        widths: int | Sequence[int],
        lambda_w: float | Sequence[float],
        lambda_h: float,
        *,
        n_layers: int | None = None,
        loss_scale: str | float = "1/(2N)",
        bias: bool = False,
        lambda_b: float = 0.0,
    ) -> None:
        self.n_classes = check_int("n_classes", n_classes, minimum=2)
        self.n_per_class = check_int("n_per_class", n_per_class, minimum=1)
        if (
            n_layers is None
            and isinstance(widths, Real)
            and isinstance(lambda_w, Sequence)
            and not isinstance(lambda_w, str)
        ):
            n_layers = len(lambda_w)  # one width, one λ_W per layer: L is their number
        self.widths = _widths(widths, n_layers)
        for i, d in enumerate(self.widths):
            if d < self.n_classes:
                raise ValueError(
                    f"width d_{i + 1} = {d} is below K = {self.n_classes}; the deep UFM needs "
                    f"every width >= K (Theorem 3.1's d >= K)"
                )
        self.lambda_w = _lambdas(lambda_w, len(self.widths))
        self.lambda_h = check_float("lambda_h", lambda_h, minimum=0.0, strict=True)
        self.loss_scale = _loss_scale(loss_scale, self.n_classes, self.n_per_class)
        if not isinstance(bias, bool):
            raise ArgumentTypeError(f"bias must be a bool, got {bias!r}")
        self.bias = bias
        self.lambda_b = check_float("lambda_b", lambda_b, minimum=0.0)
        if lambda_b and not bias:
            raise ValueError(f"lambda_b={lambda_b} needs bias=True (the model has no biases)")

    # -- sizes ------------------------------------------------------------------------

    @property
    def n_layers(self) -> int:
        """``L``."""
        return len(self.widths)

    @property
    def n_samples(self) -> int:
        """``N = Kn``."""
        return self.n_classes * self.n_per_class

    @property
    def dims(self) -> tuple[int, ...]:
        """``(d_1, ..., d_L, d_{L+1} = K)``."""
        return (*self.widths, self.n_classes)

    @property
    def kappa(self) -> float:
        """``κ = 2sN``: the per-sample loss is ``(κ/2)‖f − y‖²`` (1 for ``s = 1/(2N)``)."""
        return 2.0 * self.loss_scale * self.n_samples

    @property
    def labels(self) -> np.ndarray:
        """``(N,)`` class-major labels ``[0]*n + [1]*n + ...``."""
        return np.repeat(np.arange(self.n_classes), self.n_per_class)

    @property
    def targets(self) -> np.ndarray:
        """``Yᵀ``, ``(N, K)``: one one-hot row per sample (class-major), the transpose of the
        paper's ``Y = I_K ⊗ 1_nᵀ``."""
        return self._target_columns().T

    def _target_columns(self) -> np.ndarray:
        """The paper's ``Y = I_K ⊗ 1_nᵀ``, ``(K, N)``, for the column formulas."""
        return np.kron(np.eye(self.n_classes), np.ones((1, self.n_per_class)))

    def __repr__(self) -> str:
        lam = self.lambda_w[0] if len(set(self.lambda_w)) == 1 else list(self.lambda_w)
        return (
            f"{type(self).__name__}(K={self.n_classes}, n={self.n_per_class}, "
            f"widths={list(self.widths)}, lambda_w={lam}, lambda_h={self.lambda_h}, "
            f"loss_scale={self.loss_scale:.6g}"
            + (f", bias=True, lambda_b={self.lambda_b}" if self.bias else "")
            + ")"
        )

    # -- parameters -------------------------------------------------------------------

    def check_point(self, point: object) -> UFMParameters:
        """``point`` as float64 :class:`UFMParameters` with the model's shapes (an
        :class:`UFMParameters`, a pair ``(H, [W_1, ..., W_L])`` or, with biases, a triple
        ``(H, [W_1, ..., W_L], [b_1, ..., b_L])``)."""
        if isinstance(point, UFMParameters):
            h, ws, bs = point.H, point.W, point.b
        elif isinstance(point, tuple | list) and len(point) in (2, 3):
            h, ws, bs = (*point, ()) if len(point) == 2 else point
        else:
            raise ArgumentTypeError(
                f"point must be UFMParameters or a pair (H, [W_1, ..., W_L]) (with biases, a "
                f"triple (H, [W_1, ..., W_L], [b_1, ..., b_L])), got {type(point).__name__}"
            )
        dims = self.dims
        h = as_real_array("H", h, shape=(dims[0], self.n_samples))
        if isinstance(ws, np.ndarray | torch.Tensor) or not isinstance(ws, Sequence):
            raise ArgumentTypeError("W must be a sequence of L weight matrices (W_1, ..., W_L)")
        if len(ws) != self.n_layers:
            raise ValueError(f"W has {len(ws)} matrices but the model has L = {self.n_layers}")
        weights = tuple(
            as_real_array(f"W_{i + 1}", w, shape=(dims[i + 1], dims[i])) for i, w in enumerate(ws)
        )
        return UFMParameters(h, weights, self._check_biases(bs))

    def _check_biases(self, bs: object) -> tuple[np.ndarray, ...]:
        if not self.bias:
            if len(bs) if isinstance(bs, Sequence) else True:
                raise ValueError("the point has biases but the model has none (bias=False)")
            return ()
        if isinstance(bs, np.ndarray | torch.Tensor) or not isinstance(bs, Sequence):
            raise ArgumentTypeError("b must be a sequence of L bias vectors (b_1, ..., b_L)")
        if len(bs) != self.n_layers:
            raise ValueError(
                f"b has {len(bs)} vectors but the model (bias=True) has L = {self.n_layers}"
            )
        return tuple(
            as_real_array(f"b_{i + 1}", v, shape=(self.dims[i + 1],)) for i, v in enumerate(bs)
        )

    def from_flat(self, theta: np.ndarray) -> UFMParameters:
        """The point whose :meth:`UFMParameters.flat` is ``theta`` (views into it)."""
        dims, n = self.dims, self.n_samples
        shapes = [(dims[0], n)] + [(dims[i + 1], dims[i]) for i in range(self.n_layers)]
        if self.bias:
            shapes += [(dims[i + 1],) for i in range(self.n_layers)]
        ends = np.cumsum([int(np.prod(shape)) for shape in shapes])
        if theta.shape != (ends[-1],):
            raise ValueError(f"theta must have shape ({ends[-1]},), got {theta.shape}")
        blocks = [
            theta[e - int(np.prod(sh)) : e].reshape(sh) for e, sh in zip(ends, shapes, strict=True)
        ]
        return UFMParameters(
            blocks[0], tuple(blocks[1 : 1 + self.n_layers]), tuple(blocks[1 + self.n_layers :])
        )

    def random_point(
        self, seed: int = 0, *, w_scale: float = 1.0, h_scale: float = 1.0
    ) -> UFMParameters:
        """The normal initialisation: ``W_l`` entries ``N(0, w_scale²/d_l)``, ``H_1`` entries
        ``N(0, h_scale²)`` (note §5.2: ``w_scale = h_scale = 0.5`` for the linear model,
        ``w_scale = 1`` for the ReLU model); biases, if any, start at zero."""
        ws = check_float("w_scale", w_scale, minimum=0.0, strict=True)
        hs = check_float("h_scale", h_scale, minimum=0.0, strict=True)
        rng = np.random.default_rng(seed)
        dims = self.dims
        h = rng.normal(scale=hs, size=(dims[0], self.n_samples))
        weights = tuple(
            rng.normal(scale=ws / math.sqrt(dims[i]), size=(dims[i + 1], dims[i]))
            for i in range(self.n_layers)
        )
        biases = tuple(np.zeros(d) for d in dims[1:]) if self.bias else ()
        return UFMParameters(h, weights, biases)

    # -- forward and backward ---------------------------------------------------------

    def _act(self, z: np.ndarray) -> np.ndarray:
        return z

    def _act_mask(self, z: np.ndarray) -> np.ndarray | None:
        """``σ'(z)`` as 0/1, or None for the identity."""
        return None

    def _input(self, h: np.ndarray) -> np.ndarray:
        return h

    def _input_mask(self, h: np.ndarray) -> np.ndarray | None:
        return None

    def _forward(self, p: UFMParameters) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Features ``[H_1, ..., H_L, f]`` and pre-activations ``[W_1H_1, ...]``, the paper's
        ``(d, N)`` columns."""
        feats = [self._input(p.H)]
        pre = []
        for i, w in enumerate(p.W):
            z = w @ feats[-1]
            if p.b:
                z = z + p.b[i][:, None]
            pre.append(z)
            feats.append(z if i == self.n_layers - 1 else self._act(z))
        return feats, pre

    def features(self, point: object) -> list[np.ndarray]:
        """``[H_1ᵀ, ..., H_Lᵀ, H_{L+1}ᵀ = fᵀ]``: every layer's features as ``(N, d_l)`` rows
        (one per sample), ``l = 1..L+1``: index ``l − 1`` holds ``h^{(l)}``, the input of
        ``W_l`` (``σ(H_1)`` first when ReLU acts on the free features), and the last the
        outputs ``(N, K)``."""
        return [h.T for h in self._forward(self.check_point(point))[0]]

    def masks(self, point: object) -> list[np.ndarray]:
        """ReLU masks ``D_l = 1[W_l h^{(l)} > 0]`` as ``(N, d_{l+1})`` rows, ``l = 1..L−1`` at
        index ``l − 1`` (note App. F); all ones for the linear model."""
        p = self.check_point(point)
        _, pre = self._forward(p)
        out = []
        for z in pre[:-1]:
            m = self._act_mask(z)
            out.append((np.ones_like(z) if m is None else m).T)
        return out

    def objective(self, point: object) -> float:
        """``F`` at ``point``."""
        return self._value(self.check_point(point))

    def data_loss(self, point: object) -> float:
        """The data term ``s‖f − Y‖²`` alone."""
        p = self.check_point(point)
        r = self._forward(p)[0][-1] - self._target_columns()
        return self.loss_scale * float(np.sum(r * r))

    def _value(self, p: UFMParameters) -> float:
        r = self._forward(p)[0][-1] - self._target_columns()
        value = self.loss_scale * float(np.sum(r * r)) + 0.5 * self.lambda_h * float(np.sum(p.H**2))
        value += 0.5 * self.lambda_b * sum(float(np.sum(v * v)) for v in p.b)
        return value + sum(
            0.5 * lam * float(np.sum(w * w)) for lam, w in zip(self.lambda_w, p.W, strict=True)
        )

    def gradient(self, point: object) -> UFMParameters:
        """``∇F`` as :class:`UFMParameters` (``∂F/∂H_1``, ``(∂F/∂W_l)_l``)."""
        return self._value_and_grad(self.check_point(point))[1]

    def value_and_gradient(self, point: object) -> tuple[float, UFMParameters]:
        """``(F, ∇F)`` from one forward and backward pass."""
        return self._value_and_grad(self.check_point(point))

    def minibatch_gradient(self, point: object, columns: object) -> tuple[float, UFMParameters]:
        r"""The stochastic estimate of ``(F, ∇F)`` from the samples ``columns`` (``b``
        distinct sample indices into ``0..N−1``, the columns of ``H_1``): the data term on
        them scaled by ``N/b``, the penalties in full,

        .. math::
            \hat F_B = \frac{N}{b}\, s \sum_{i \in B} \|f_i - y_i\|^2
                + \frac{λ_{H_1}}{2}\|H_1\|_F^2 + \sum_l \frac{λ_{W_l}}{2}\|W_l\|_F^2,

        so that its mean over the uniformly drawn ``B`` of size ``b`` is ``(F, ∇F)``. Only
        the columns in ``B`` of ``∂\hat F_B/∂H_1`` carry a data term (a sample's free
        feature moves with its own loss)."""
        p = self.check_point(point)
        cols = np.asarray(columns)
        if cols.ndim != 1 or cols.size == 0 or not np.issubdtype(cols.dtype, np.integer):
            raise ValueError(f"columns must be a non-empty 1-D integer array, got {columns!r}")
        if len(np.unique(cols)) != cols.size or cols.min() < 0 or cols.max() >= self.n_samples:
            raise ValueError(
                f"columns must be distinct sample indices in [0, {self.n_samples}), got "
                f"{cols.tolist()}"
            )
        return self._value_and_grad(p, cols)

    def _value_and_grad(
        self, p: UFMParameters, columns: np.ndarray | None = None
    ) -> tuple[float, UFMParameters]:
        """``(F, ∇F)``, or with ``columns`` the estimate of :meth:`minibatch_gradient`."""
        full_h = p.H
        scale, targets = self.loss_scale, self._target_columns()
        if columns is not None:
            scale *= self.n_samples / columns.size
            targets = targets[:, columns]
            p = UFMParameters(p.H[:, columns], p.W, p.b)
        feats, pre = self._forward(p)
        r = feats[-1] - targets
        value = scale * float(np.sum(r * r)) + 0.5 * self.lambda_h * float(np.sum(full_h**2))
        back = 2.0 * scale * r  # ∂(data)/∂(pre-activation of W_L) = ∂/∂f
        grads: list[np.ndarray] = [np.empty(0)] * self.n_layers
        grads_b: list[np.ndarray] = [np.empty(0)] * len(p.b)
        for i in range(self.n_layers - 1, -1, -1):
            w = p.W[i]
            value += 0.5 * self.lambda_w[i] * float(np.sum(w * w))
            grads[i] = back @ feats[i].T + self.lambda_w[i] * w
            if p.b:
                value += 0.5 * self.lambda_b * float(np.sum(p.b[i] ** 2))
                grads_b[i] = back.sum(axis=1) + self.lambda_b * p.b[i]
            back = w.T @ back  # ∂/∂h^{(i+1)}
            if i > 0:
                mask = self._act_mask(pre[i - 1])
                if mask is not None:
                    back = back * mask
        mask = self._input_mask(p.H)
        if mask is not None:
            back = back * mask
        grad_h = self.lambda_h * full_h
        if columns is None:
            grad_h = grad_h + back
        else:
            grad_h[:, columns] += back
        return value, UFMParameters(grad_h, tuple(grads), tuple(grads_b))

    # -- autodiff -------------------------------------------------------------------

    def as_module(self, point: object) -> UFMModule:
        """The model at ``point`` as a float64 ``nn.Module`` for autodiff (see
        :class:`UFMModule`)."""
        return UFMModule(self, self.check_point(point))


class DeepLinearUFM(DeepUFM):
    """The L-deep linear unconstrained feature model, Eq. (1) of paper 004 (``σ`` the
    identity); the arguments are :class:`DeepUFM`'s. ``L = 1`` is the classic UFM."""


class DeepReLUUFM(DeepUFM):
    """The L-deep unconstrained feature model with ReLU after ``W_1, ..., W_{L−1}`` (paper
    004 §3.1, App. F); ``relu_on_features=True`` also applies it to ``H_1`` (Súkeník et
    al.'s convention; off by default, note §3.3). No biases (the paper sets them to zero).
    The other arguments are :class:`DeepUFM`'s."""

    activation = "relu"

    def __init__(self, *args: object, relu_on_features: bool = False, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.relu_on_features = bool(relu_on_features)

    def _act(self, z: np.ndarray) -> np.ndarray:
        return np.maximum(z, 0.0)

    def _act_mask(self, z: np.ndarray) -> np.ndarray | None:
        return (z > 0).astype(np.float64)

    def _input(self, h: np.ndarray) -> np.ndarray:
        return np.maximum(h, 0.0) if self.relu_on_features else h

    def _input_mask(self, h: np.ndarray) -> np.ndarray | None:
        return (h > 0).astype(np.float64) if self.relu_on_features else None


class UFMModule(nn.Module):
    """A deep UFM as an ``nn.Module`` (float64), for autodiff and curvature tools.

    The free features are the weight of a bias-free first linear layer fed the one-hot
    sample indices: ``forward(x)`` maps ``x`` (``(B, N)``, rows of ``I_N``, cast to float64)
    to the outputs ``(B, K)``, so ``model(torch.eye(N))`` gives every sample's ``f`` (rows);
    ``layers[0].weight`` is ``H_1``, ``layers[l].weight`` is ``W_l`` (and
    ``layers[l].bias`` is ``b_l`` for a model with biases). ``loss(outputs)`` is the data
    term ``s‖f − Y‖²`` on all ``N`` samples; :meth:`objective` adds the penalties.
    """

    def __init__(self, model: DeepUFM, point: UFMParameters) -> None:
        super().__init__()
        self.ufm = model
        dims = model.dims
        self.layers = nn.ModuleList(
            [nn.Linear(model.n_samples, dims[0], bias=False).double()]
            + [
                nn.Linear(dims[i], dims[i + 1], bias=model.bias).double()
                for i in range(model.n_layers)
            ]
        )
        with torch.no_grad():
            for layer, value in zip(self.layers, (point.H, *point.W), strict=True):
                layer.weight.copy_(torch.from_numpy(value))
            for layer, value in zip(self.layers[1:], point.b, strict=False):
                layer.bias.copy_(torch.from_numpy(value))
        self.register_buffer("targets", torch.from_numpy(model.targets.copy()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.layers[0](x.to(torch.float64))
        if isinstance(self.ufm, DeepReLUUFM) and self.ufm.relu_on_features:
            h = torch.relu(h)
        last = len(self.layers) - 1
        for i in range(1, len(self.layers)):
            h = self.layers[i](h)
            if i < last and self.ufm.activation == "relu":
                h = torch.relu(h)
        return h

    def loss(self, outputs: torch.Tensor) -> torch.Tensor:
        """``s‖f − Y‖²`` of the ``(N, K)`` outputs of every sample."""
        return self.ufm.loss_scale * ((outputs - self.targets) ** 2).sum()

    def objective(self) -> torch.Tensor:
        """``F`` at the module's current weights."""
        eye = torch.eye(self.ufm.n_samples, dtype=torch.float64)
        value = self.loss(self(eye)) + 0.5 * self.ufm.lambda_h * self.layers[0].weight.pow(2).sum()
        for lam, layer in zip(self.ufm.lambda_w, self.layers[1:], strict=True):
            value = value + 0.5 * lam * layer.weight.pow(2).sum()
            if layer.bias is not None:
                value = value + 0.5 * self.ufm.lambda_b * layer.bias.pow(2).sum()
        return value


# ---------------------------------------------------------------------------------------
# the exact solution (linear model)


def regularisation_threshold(n_layers: int) -> float:
    r"""``β_c = ((L+1)/L)((L−1)/L)^{(L−1)/(L+1)}`` (2 for ``L = 1``): a non-zero global
    optimum exists iff ``β < β_c`` (the derived exact form of condition (2))."""
    big_l = check_int("n_layers", n_layers, minimum=1)
    if big_l == 1:
        return 2.0
    return (big_l + 1) / big_l * ((big_l - 1) / big_l) ** ((big_l - 1) / (big_l + 1))


def local_minimum_threshold(n_layers: int) -> float:
    r"""``β_m = 2 t_c^{2−p} / (p(1−p))`` with ``t_c = (1−p)/(2−p)``, ``p = 2/(L+1)``: the
    largest ``β`` at which ``φ`` still has a non-zero local minimiser (``φ'`` has a root in
    ``(0, 1)``); ``β_m = β_c = 2`` for ``L = 1``.

    For ``L >= 2``, ``β_c < β_m``: between them the global optimum is zero (condition (2)
    fails) but a non-zero local minimum with ``K`` equal singular values remains, where
    gradient descent can stop. Derivation: ``φ'`` is convex on ``(0, ∞)`` with its minimum
    at ``t_c`` where ``βp t_c^{p−1} = 2t_c/(1−p)``; ``φ'(t_c) = 0`` gives
    ``t_c = (1−p)/(2−p)``."""
    big_l = check_int("n_layers", n_layers, minimum=1)
    if big_l == 1:
        return 2.0
    p = 2.0 / (big_l + 1)
    t_c = (1.0 - p) / (2.0 - p)
    return 2.0 * t_c ** (2.0 - p) / (p * (1.0 - p))


def phi(t: object, beta: float, n_layers: int) -> np.ndarray:
    r"""The scalar problem ``φ(t) = (t − 1)² + β t^{2/(L+1)}`` (``t >= 0``)."""
    tt = np.asarray(t, dtype=np.float64)
    if np.any(tt < 0):
        raise ValueError("phi is defined for t >= 0")
    p = 2.0 / (check_int("n_layers", n_layers, minimum=1) + 1)
    return (tt - 1.0) ** 2 + beta * tt**p


def solve_t_star(beta: float, n_layers: int) -> float:
    r"""``t* = argmin_{t >= 0} φ(t)``: the largest root of ``φ'(t) = 2(t−1) + βp t^{p−1}`` in
    ``(0, 1)`` when ``β < β_c``, else 0 (at ``β = β_c`` both tie; 0 is returned).

    For ``L = 1`` (``p = 1``) ``t* = 1 − β/2``. For ``L >= 2``, ``φ'`` is convex on
    ``(0, ∞)`` with its minimum at ``t_c = (βp(1−p)/2)^{1/(2−p)}``, so the local minimiser
    of ``φ`` is the root of ``φ'`` in ``(t_c, 1)`` (found by Brent's method to ``1e-15``).
    """
    big_l = check_int("n_layers", n_layers, minimum=1)
    beta = check_float("beta", beta, minimum=0.0)
    if beta >= regularisation_threshold(big_l):
        return 0.0
    if big_l == 1:
        return 1.0 - beta / 2.0
    if beta == 0.0:
        return 1.0
    p = 2.0 / (big_l + 1)
    t_c = (beta * p * (1.0 - p) / 2.0) ** (1.0 / (2.0 - p))

    def dphi(t: float) -> float:
        return 2.0 * (t - 1.0) + beta * p * t ** (p - 1.0)

    from scipy.optimize import brentq

    t = brentq(dphi, t_c, 1.0, xtol=1e-16, rtol=4 * np.finfo(float).eps, maxiter=500)
    # Below β_c the local minimum beats φ(0) = 1; guard rounding right at the threshold.
    return float(t) if float(phi(t, beta, big_l)) < 1.0 else 0.0


@dataclass(frozen=True)
class ClosedForm:
    r"""The exact global optimum of a :class:`DeepLinearUFM` (note §3.6-3.12).

    Per-layer arrays follow the library's one indexing (docs/theory.md, Conventions):
    entry ``[l − 1]`` belongs to layer ``l``, counted from 1, whose input is ``h^{(l)}``
    and whose product is ``W_{L:l} = W_L W_{L−1} ⋯ W_l`` (``W_{L:L+1} = I_K``). Arrays of
    length ``L`` run over the weights ``l = 1..L``; arrays of length ``L + 1`` also hold
    ``l = L + 1``, the outputs (``h^{(L+1)} = f``, the empty product ``I_K``). A theorem of
    layer ``l`` that reads the next product ``W_{L:l+1}`` (Theorems 4.1-4.3, E.1-E.2) reads
    entry ``[l]`` of ``row_norm_sq`` and ``dnc3_scale``.

    Attributes:
        beta: ``β`` of ``φ``. threshold: ``β_c``. nontrivial: ``β < β_c``.
        condition: ``K^{L+1} n λ_{H_1} Π λ_{W_l}``; condition_bound:
            ``κ^{L+1}(L−1)^{L−1}/L^{2L}`` (non-trivial iff condition < bound).
        t_star: ``t*`` (0 when trivial): the outputs are ``t* Y``.
        objective: ``F* = (κ/2) φ(t*)``.
        b: ``(λ_{H_1} Π λ_{W_l})^{1/(L+1)}``. scale: ``C = b (√n t*)^{2/(L+1)}``.
        sigma_h_sq: ``σ_{H_1}² = C/λ_{H_1}``, the K equal non-zero eigenvalues of ``H_1H_1ᵀ``.
        sigma_w_sq: ``(L,)`` ``σ_{W_l}² = C/λ_{W_l}``, those of ``W_lW_lᵀ`` (Theorem 4.4).
        mean_norm_sq: ``(L+1,)`` ``‖h̄^{(l)}_k‖²``, ``l = 1..L+1`` (the last is ``t*²``).
        row_norm_sq: ``(L+1,)`` ``s_l = ‖row c of W_{L:l}‖² = Π_{j≥l} σ_{W_j}²``,
            ``l = 1..L+1``: ``W_{L:l}W_{L:l}ᵀ = s_l I_K`` (Theorem 3.1), 1 at ``l = L+1``.
            The theorems' ``‖a‖²`` of layer ``l`` (``a_c`` the rows of ``W_{L:l+1}``) is
            ``s_{l+1}``.
        dnc3_scale: ``(L+1,)`` ``c_l = √s_l / ‖h̄^{(l)}‖``, ``l = 1..L+1``: DNC3's
            ``W_{L:l} = c_l M_lᵀ`` (Theorem 3.1), so ``t* = c_l‖h̄^{(l)}‖²`` at every
            ``l``; ``c_{L+1} = 1/t*`` (``W_{L:L+1} = I_K``, ``M_{L+1} = t* I_K``). The
            paper's ``c`` of layer ``l``'s theorems (``a_c = c h̄^{(l+1)}_c``, note §3.7)
            is ``c_{l+1}``. At the zero optimum every ``c_l`` is 0 and ``s_l`` is 0 but
            ``s_{L+1} = 1``.
        hessian_outlier: ``(L,)`` ``λ_out(l) = κ s_{l+1}‖h̄^{(l)}‖²/K`` (Theorems 4.1-4.2).
        gradient_coefficient: ``(L,)`` ``β_l = κ c_{l+1} (t* − 1)/K`` (Theorem 4.3:
            ``g_l = β_l Σ_k h̄^{(l+1)}_k ⊗ h̄^{(l)}_k``).
    """

    beta: float
    threshold: float
    nontrivial: bool
    condition: float
    condition_bound: float
    t_star: float
    objective: float
    b: float
    scale: float
    sigma_h_sq: float
    sigma_w_sq: np.ndarray
    mean_norm_sq: np.ndarray
    row_norm_sq: np.ndarray
    dnc3_scale: np.ndarray
    hessian_outlier: np.ndarray
    gradient_coefficient: np.ndarray

    def describe_condition(self) -> str:
        """Condition (2) in words, with the numbers."""
        return (
            f"β = {self.beta:.6g} {'<' if self.nontrivial else '>='} β_c = {self.threshold:.6g} "
            f"(K^(L+1) n λ_H Π λ_W = {self.condition:.6g}, bound κ^(L+1) (L-1)^(L-1)/L^(2L) "
            f"= {self.condition_bound:.6g})"
        )


def _need_linear(model: object, what: str) -> DeepUFM:
    if not isinstance(model, DeepUFM):
        raise ArgumentTypeError(f"model must be a DeepLinearUFM, got {type(model).__name__}")
    if model.activation != "identity":
        raise ValueError(
            f"{what} exists for the linear model (DeepLinearUFM) only, got {type(model).__name__}"
        )
    if model.bias:
        raise ValueError(
            f"{what} is derived for the bias-free model (the paper's); this model has bias=True"
        )
    return model


def closed_form(model: DeepLinearUFM) -> ClosedForm:
    """The exact global optimum's every scalar (:class:`ClosedForm`); see the module
    docstring. Beyond the threshold (``β >= β_c``) the optimum is zero: ``t* = 0``,
    ``F* = κ/2`` and every norm 0."""
    m = _need_linear(model, "the closed form")
    big_l, k, n, kappa = m.n_layers, m.n_classes, m.n_per_class, m.kappa
    lam_w = np.asarray(m.lambda_w)
    prod = m.lambda_h * float(np.prod(lam_w))
    b = prod ** (1.0 / (big_l + 1))
    beta = k * (big_l + 1) * (n * prod) ** (1.0 / (big_l + 1)) / kappa
    threshold = regularisation_threshold(big_l)
    t = solve_t_star(beta, big_l)
    p = 2.0 / (big_l + 1)
    scale = b * (math.sqrt(n) * t) ** p
    sigma_w_sq = scale / lam_w
    sigma_h_sq = scale / m.lambda_h
    mean_sq = np.empty(big_l + 1)
    mean_sq[0] = sigma_h_sq / n
    for i in range(big_l):
        mean_sq[i + 1] = mean_sq[i] * sigma_w_sq[i]
    # s_l = ‖rows of W_{L:l}‖² = Π_{j>=l} σ_j², l = 1..L+1 (the empty product last)
    rows_sq = np.array([float(np.prod(sigma_w_sq[i:])) for i in range(big_l + 1)])
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(mean_sq > 0, np.sqrt(rows_sq) / np.sqrt(mean_sq), 0.0)  # W_{L:l} = c_l M_lᵀ
    outlier = kappa * rows_sq[1:] * mean_sq[:big_l] / k  # layer l reads W_{L:l+1}: s_{l+1}
    if t == 0.0:  # the zero optimum: every product vanishes but the empty one
        rows_sq = np.where(np.arange(big_l + 1) == big_l, 1.0, 0.0)
        outlier = np.zeros(big_l)
    return ClosedForm(
        beta=beta,
        threshold=threshold,
        nontrivial=beta < threshold,
        condition=k ** (big_l + 1) * n * prod,
        condition_bound=kappa ** (big_l + 1) * (big_l - 1) ** (big_l - 1) / big_l ** (2 * big_l),
        t_star=t,
        objective=0.5 * kappa * float(phi(t, beta, big_l)),
        b=b,
        scale=scale,
        sigma_h_sq=sigma_h_sq,
        sigma_w_sq=sigma_w_sq,
        mean_norm_sq=mean_sq,
        row_norm_sq=rows_sq,
        dnc3_scale=c,
        hessian_outlier=outlier,
        gradient_coefficient=kappa * c[1:] * (t - 1.0) / k,
    )


def require_nontrivial(model: DeepLinearUFM, what: str = "a non-trivial optimum") -> ClosedForm:
    """:func:`closed_form`, or a ``ValueError`` naming ``β`` and the bound when condition
    (2) fails (the optimum is then zero and the theorems are vacuous)."""
    form = closed_form(model)
    if not form.nontrivial:
        raise ValueError(
            f"{what} needs the regularisation condition (2), which fails: "
            f"{form.describe_condition()}; the global optimum is all zeros. Lower λ_W or λ_H."
        )
    return form


def _orthonormal_frame(rng: np.random.Generator, dim: int, k: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((dim, k)))
    return q * np.sign(np.diag(r))  # Haar-distributed columns


def exact_optimum(
    model: DeepLinearUFM, seed: int | np.random.Generator = 0, *, allow_trivial: bool = False
) -> UFMParameters:
    r"""An exact global minimiser built from random orthonormal frames (note §3.6).

    Draws ``U_l`` (``d_l x K``, orthonormal columns, ``l = 1..L``; ``U_{L+1} = I_K``) and
    returns ``H_1 = ‖h̄^{(1)}‖ U_1 ⊗ 1_nᵀ`` and ``W_l = σ_{W_l} U_{l+1} U_lᵀ``, so that the
    outputs are ``t* Y``. Every global minimiser has this form up to the frames.

    Raises:
        ValueError: condition (2) fails (the optimum is zero), unless ``allow_trivial``, in
            which case the zero point is returned.
    """
    m = _need_linear(model, "the exact optimum")
    form = closed_form(m) if allow_trivial else require_nontrivial(m, "exact_optimum")
    rng = np.random.default_rng(seed)
    k, dims = m.n_classes, m.dims
    frames = [_orthonormal_frame(rng, dims[i], k) for i in range(m.n_layers)] + [np.eye(k)]
    means = math.sqrt(form.mean_norm_sq[0]) * frames[0]
    h = np.repeat(means, m.n_per_class, axis=1)
    weights = tuple(
        math.sqrt(form.sigma_w_sq[i]) * frames[i + 1] @ frames[i].T for i in range(m.n_layers)
    )
    return UFMParameters(h, weights)


@dataclass(frozen=True)
class OptimumCheck:
    """Whether a point is a global optimum of a :class:`DeepLinearUFM`.

    Attributes:
        objective: ``F`` at the point. optimum: ``F*``.
        objective_gap: ``|F − F*| / F*``.
        grad_norm: ``‖∇F‖`` (all blocks).
        balancedness: ``(L,)`` relative residuals of the critical-point identities
            ``λ_{W_1}W_1ᵀW_1 = λ_{H_1}H_1H_1ᵀ`` and
            ``λ_{W_{l+1}}W_{l+1}ᵀW_{l+1} = λ_{W_l}W_lW_lᵀ``:
            ``‖left − right‖_F / max(‖left‖_F, ‖right‖_F)``.
        tol: the tolerance used. is_optimum: every number above within ``tol``
            (the gradient norm relative to ``max(1, ‖θ‖)``).
    """

    objective: float
    optimum: float
    objective_gap: float
    grad_norm: float
    balancedness: np.ndarray
    tol: float
    is_optimum: bool


def balancedness_residuals(model: DeepUFM, point: object) -> np.ndarray:
    r"""Relative residuals of the balancedness identities (note §3.5), ``(L,)``: entry 0 is
    ``λ_{W_1}W_1ᵀW_1`` vs ``λ_{H_1}H_1H_1ᵀ``, entry ``l`` is ``λ_{W_{l+1}}W_{l+1}ᵀW_{l+1}`` vs
    ``λ_{W_l}W_lW_lᵀ``. They hold at every critical point of the linear model."""
    p = model.check_point(point)
    lefts = [model.lambda_w[0] * p.W[0].T @ p.W[0]] + [
        model.lambda_w[i + 1] * p.W[i + 1].T @ p.W[i + 1] for i in range(model.n_layers - 1)
    ]
    rights = [model.lambda_h * p.H @ p.H.T] + [
        model.lambda_w[i] * p.W[i] @ p.W[i].T for i in range(model.n_layers - 1)
    ]
    out = []
    for left, right in zip(lefts, rights, strict=True):
        scale = max(np.linalg.norm(left), np.linalg.norm(right))
        out.append(float(np.linalg.norm(left - right) / scale) if scale > 0 else 0.0)
    return np.asarray(out)


def is_global_optimum(model: DeepLinearUFM, point: object, tol: float = 1e-8) -> OptimumCheck:
    """Compare ``point`` with the exact optimum: the objective against ``F*``, the gradient
    norm and the balancedness residuals (:class:`OptimumCheck`)."""
    m = _need_linear(model, "is_global_optimum")
    tol = check_float("tol", tol, minimum=0.0, strict=True)
    p = m.check_point(point)
    form = closed_form(m)
    value, grad = m._value_and_grad(p)
    gap = abs(value - form.objective) / form.objective
    gnorm = grad.norm()
    bal = balancedness_residuals(m, p)
    ok = gap <= tol and gnorm <= tol * max(1.0, p.norm()) and bool(np.all(bal <= tol))
    return OptimumCheck(value, form.objective, gap, gnorm, bal, tol, ok)


# ---------------------------------------------------------------------------------------
# solvers


def log_checkpoints(n_steps: int, count: int) -> np.ndarray:
    """About ``count`` distinct steps log-spaced in ``[1, n_steps]``, with 0 and ``n_steps``."""
    n_steps = check_int("n_steps", n_steps, minimum=0)
    count = check_int("count", count, minimum=1)
    if n_steps == 0:
        return np.zeros(1, dtype=np.int64)
    steps = np.unique(np.round(np.geomspace(1, n_steps, count)).astype(np.int64))
    return np.unique(np.concatenate([[0], steps, [n_steps]]))


def checkpoint_steps(n_steps: int, checkpoints: Sequence[int] | int) -> set[int]:
    """The steps a descent records: ``checkpoints`` log-spaced ones (a count,
    :func:`log_checkpoints`) or the given ones (a sequence, none beyond ``n_steps``), with
    step 0 and ``n_steps`` always."""
    if isinstance(checkpoints, int):
        return set(log_checkpoints(n_steps, checkpoints).tolist())
    wanted = {check_int("checkpoints entries", s, minimum=0) for s in checkpoints}
    if wanted and max(wanted) > n_steps:
        raise ValueError(f"checkpoints go beyond n_steps={n_steps}: max {max(wanted)}")
    return wanted | {0, n_steps}


def descent_step(
    theta: np.ndarray, grad: np.ndarray, velocity: np.ndarray, lr: float, mu: float
) -> tuple[np.ndarray, np.ndarray]:
    """One step of :func:`gradient_descent`, elementwise: ``θ − lr g``, or heavy-ball
    ``v ← μv − lr g, θ ← θ + v`` when ``mu > 0``; returns the new ``(θ, v)`` (``v``
    unchanged without momentum). The batched descent applies it to stacked members."""
    if mu > 0:
        velocity = mu * velocity - lr * grad
        return theta + velocity, velocity
    return theta - lr * grad, velocity


@dataclass
class DescentTrajectory:
    """Records of :func:`gradient_descent` (or :func:`minimise`).

    Attributes:
        steps: ``(T,)`` recorded steps. objective, grad_norm: ``(T,)`` at those steps.
        points: the :class:`UFMParameters` at those steps.
        final: the last point. lr: the step size.
        method: ``"literal"``, ``"sgd"`` or ``"converged"``.
        stopped: why the run ended.
    """

    steps: np.ndarray
    objective: np.ndarray
    grad_norm: np.ndarray
    points: list[UFMParameters]
    final: UFMParameters
    lr: float
    method: str
    stopped: str = ""
    extra: dict[str, float] = field(default_factory=dict)


def gradient_descent(
    model: DeepUFM,
    lr: float,
    n_steps: int,
    *,
    init: object | None = None,
    seed: int = 0,
    w_scale: float = 1.0,
    h_scale: float = 1.0,
    momentum: float = 0.0,
    checkpoints: Sequence[int] | int = 40,
    tol: float = 0.0,
    batch_size: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    callback: Callable[[int, UFMParameters], None] | None = None,
) -> DescentTrajectory:
    r"""The paper's solver (``"literal"``): full-batch gradient descent on every block,
    ``θ ← θ − lr ∇F(θ)`` (heavy-ball ``v ← μv − lr∇F, θ ← θ + v`` when ``momentum = μ > 0``),
    from :meth:`DeepUFM.random_point` (``seed``, ``w_scale``, ``h_scale``) or ``init``.
    With ``batch_size = b < N`` it is SGD (``"sgd"``): each step follows
    :meth:`DeepUFM.minibatch_gradient` on the next ``b`` samples of a fresh random
    permutation per epoch (seeded by ``seed``; the last batch of an epoch may be smaller).

    Args:
        checkpoints: the steps at which to keep the point (a sequence), or a count of
            log-spaced ones (:func:`log_checkpoints`); step 0 and the last step always.
            The recorded objective and gradient norm are the full ``F`` and ``‖∇F‖``.
        tol: stop early once ``‖∇F‖ <= tol`` (recorded; 0 never stops); with SGD it is
            checked at the checkpoints only (the full gradient is computed there).
        batch_size: ``None`` or ``N`` for full batches (the paper's), else SGD's ``b``.
        progress: called as ``progress(step, n_steps)`` every 1% of the steps.
        callback: called as ``callback(step, point)`` at every recorded step (each
            checkpoint, and the step where ``tol`` stops the run), in order, with a copy of
            the point stored in the trajectory's ``points`` (modifying it changes nothing);
            for measurements along the run (spectra, alignment) without keeping the points.

    Raises:
        FloatingPointError: the iterates overflow (``lr`` too large).
    """
    lr = check_float("lr", lr, minimum=0.0, strict=True)
    n_steps = check_int("n_steps", n_steps, minimum=0)
    mu = check_float("momentum", momentum, minimum=0.0, maximum=1.0)
    tol = check_float("tol", tol, minimum=0.0)
    n = model.n_samples
    b = n if batch_size is None else check_int("batch_size", batch_size, minimum=1, maximum=n)
    wanted = checkpoint_steps(n_steps, checkpoints)
    p = (
        model.random_point(seed, w_scale=w_scale, h_scale=h_scale)
        if init is None
        else model.check_point(init)
    )
    theta = p.flat()
    unflat = model.from_flat

    steps: list[int] = []
    values: list[float] = []
    norms: list[float] = []
    points: list[UFMParameters] = []
    velocity = np.zeros_like(theta)
    stopped = f"{n_steps} steps"
    every = max(n_steps // 100, 1)
    batches = sgd_batches(n, b, seed) if b < n else None
    with serial_threads(), np.errstate(over="raise", invalid="raise"):
        step = 0
        try:
            while True:
                point = unflat(theta)
                recorded = step in wanted or step == n_steps
                if batches is None or recorded:
                    value, grad = model._value_and_grad(point)
                    gnorm = float(np.linalg.norm(grad.flat()))
                done = step == n_steps or (
                    tol > 0 and (batches is None or recorded) and gnorm <= tol
                )
                if recorded or done:
                    steps.append(step)
                    values.append(value)
                    norms.append(gnorm)
                    points.append(point.copy())
                    if callback is not None:
                        with np.errstate(over="warn", invalid="warn"):  # numpy's defaults
                            callback(step, point.copy())
                if done:
                    if step < n_steps:
                        stopped = f"gradient norm {gnorm:.3g} <= tol {tol:g} at step {step}"
                    break
                if batches is not None:
                    grad = model._value_and_grad(point, next(batches))[1]
                theta, velocity = descent_step(theta, grad.flat(), velocity, lr, mu)
                step += 1
                if progress is not None and (step % every == 0 or step == n_steps):
                    progress(step, n_steps)
        except FloatingPointError as err:
            raise diverged(step, lr) from err
    return DescentTrajectory(
        steps=np.asarray(steps, dtype=np.int64),
        objective=np.asarray(values),
        grad_norm=np.asarray(norms),
        points=points,
        final=points[-1],
        lr=lr,
        method="literal" if batches is None else "sgd",
        stopped=stopped,
    )


def sgd_batches(n: int, b: int, seed: int) -> Iterator[np.ndarray]:
    """The batches of :func:`gradient_descent` with ``batch_size = b``: consecutive ``b``
    indices (sorted) of a fresh permutation of ``0..n−1`` per epoch; the last batch of an
    epoch has ``n mod b`` when ``b`` does not divide ``n``."""
    rng = np.random.default_rng([seed, 1])  # apart from the initialisation's stream
    while True:
        order = rng.permutation(n)
        for start in range(0, n, b):
            yield np.sort(order[start : start + b])


def minimise(
    model: DeepUFM,
    *,
    init: object | None = None,
    seed: int = 0,
    w_scale: float = 1.0,
    h_scale: float = 1.0,
    gtol: float = 1e-10,
    max_iter: int = 20_000,
    restarts: int = 3,
) -> DescentTrajectory:
    r"""The ``"converged"`` solver: L-BFGS (``scipy.optimize.minimize``) on every block from
    ``init`` (e.g. a gradient-descent endpoint) or a random point, until the largest
    gradient entry is ``<= gtol`` (restarting a stalled line search up to ``restarts``
    times). For the linear model the exact optimum is :func:`exact_optimum`; this solver is
    for the ReLU model, whose objective is not differentiable on the ReLU kinks (L-BFGS
    still converges where the final point has no pre-activation at 0).

    Returns a two-record :class:`DescentTrajectory` (start and end; ``steps`` holds the
    L-BFGS iteration count at the end).
    """
    from scipy.optimize import minimize

    gtol = check_float("gtol", gtol, minimum=0.0, strict=True)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    start = (
        model.random_point(seed, w_scale=w_scale, h_scale=h_scale)
        if init is None
        else model.check_point(init)
    )
    unflat = model.from_flat

    def fun(v: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = model._value_and_grad(unflat(v))
        return value, grad.flat()

    theta, used = start.flat(), 0
    options = {"gtol": gtol, "ftol": 0.0, "maxcor": 30}
    with serial_threads():
        for _ in range(1 + check_int("restarts", restarts, minimum=0)):
            res = minimize(
                fun, theta, jac=True, method="L-BFGS-B", options={**options, "maxiter": max_iter}
            )
            theta, used = res.x, used + int(res.nit)
            if np.abs(res.jac).max() <= gtol or used >= max_iter:
                break
    end = unflat(theta.copy())
    v0, g0 = model._value_and_grad(start)
    v1, g1 = model._value_and_grad(end)
    return DescentTrajectory(
        steps=np.asarray([0, used], dtype=np.int64),
        objective=np.asarray([v0, v1]),
        grad_norm=np.asarray([g0.norm(), g1.norm()]),
        points=[start, end],
        final=end,
        lr=float("nan"),
        method="converged",
        stopped=f"L-BFGS, {used} iterations, max |∂F| {np.abs(g1.flat()).max():.3g}",
    )
