r"""The principal-components bias of deep linear networks (paper 002, §2-3 and App. A).

A deep linear network ``f(x) = W_L \cdots W_1 x`` (no biases) is trained by full-batch
gradient descent on the **summed** squared loss (Eq. 5)

.. math::

    \mathcal L(W) = \tfrac12 \lVert W X - Y\rVert_F^2, \qquad W = W_L \cdots W_1,

with ``X`` of shape ``(q, n)`` in the paper. **Layout here: rows** (docs/theory.md,
Conventions), ``x`` of shape ``(n, q)`` and targets ``y`` of shape ``(n, K)`` (one-hot
labels or any real targets), so ``Sigma_XX = x.T @ x`` and ``Sigma_YX = y.T @ x``. Because
the covariance is a sum, the eigenvalues ``d_j`` grow with ``n`` and ``mu`` is the step size
of the summed loss; a mean-reduced loss rescales ``mu`` by ``n`` (note 002 §7.5). Weights are
given as the list ``[W_1, ..., W_L]``, ``W_l`` of shape ``(m_l, m_{l-1})`` (``(out, in)``),
``m_0 = q``, ``m_L = K``.

**Indexing.** Layer ``l = 1..L`` is ``W_l``, and per-layer lists and arrays hold it at index
``l - 1``. Products are written ``W_{a:b} = W_a W_{a-1} \cdots W_b`` (``a >= b``; the empty
product ``W_{a:a+1}`` is the identity), the paper's :math:`\prod_{j=a}^{b} W_j`: the compact
matrix is ``W_{L:1}``, and layer ``l``'s gradient-scale matrices (Eq. 7) are
``A_l = W_{L:l+1} W_{L:l+1}^T`` (``A_L = I_K``) and ``B_l = W_{l-1:1}^T W_{l-1:1}``
(``B_1 = I_q``).

In the principal coordinate system (Def. 1; :class:`~collapselab.metrics.pc_frame.PCFrame`,
from :func:`~collapselab.metrics.pc_frame.principal_frame`, data below this layer)
``Sigma_XX = U D U^T`` the compact matrix is
``W̃ = W U`` and, with the gradient-scale matrices ``A_l ≈ α_l I``, ``B_l ≈ β_l I``
(Thm 3), its columns evolve independently with ratio ``λ_j = 1 - μ c d_j``.

Published vs corrected (note 002 §3.6 and errata 1-2, 4, 6; docs/architecture.md, principle 6):

* ``W_opt`` is printed ``Y X^T (X X^T)`` (the inverse is missing); corrected
  ``Sigma_YX Sigma_XX^{+}``, i.e. ``m_j / d_j`` per PC column
  (:meth:`~collapselab.metrics.pc_frame.PCFrame.optimum`).
* Eqs. 4 and 10 print ``w^{s+1} = λ^s w^0 + (1 - λ^s) w^opt`` (an index shift); the
  recursion ``w^{s+1} = λ w^s + μ c m_j`` solves to ``w^s = λ^s w^0 + (1 - λ^s) w^opt``
  (``variant`` of the closed-form functions).
* App. A prints the gradient-scale matrix ``B^l = Q^l Q^{lT}`` (``(m_{l-1}, m_{l-1})``);
  Eq. 7 and Eq. 17 need ``Q^{lT} Q^l`` (``(q, q)``), erratum 4
  (``variant`` of :func:`gradient_scale_matrices`).
* The paper's rate uses ``c = L`` (exact for Def. 3 as widths grow); for any initialisation
  the first-order dynamics give ``c = Σ_l α_l β_l`` (:func:`effective_factor`), which for
  Glorot init at ``q = 20``, width 512, ``L = 3`` is 7.74, not 3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from collapselab.checks import as_real_array, check_choice, check_float, check_int
from collapselab.metrics.pc_frame import (
    VARIANTS,
    PCFrame,
    frame_data,
    frame_matrices,
    principal_frame,
)
from collapselab.models.deep_linear import layer_variances

__all__ = [
    "VARIANTS",
    "PCBiasVerification",
    "ScaleMonteCarlo",
    "ScalesAgainstWidth",
    "closed_form_columns",
    "compact_matrix",
    "compact_update_residual",
    "driving_matrix",
    "effective_factor",
    "expected_scales",
    "first_order_update",
    "gd_step",
    "gradient_scale_matrices",
    "iterated_product_columns",
    "layer_gradients",
    "measured_factor",
    "pc_decay",
    "pc_ratio",
    "predicted_distance",
    "predicted_ensemble_std",
    "predicted_loss",
    "product_entry_variance",
    "scale_monte_carlo",
    "scales_against_width",
    "time_to_epsilon",
    "verify_pcbias",
]

# ---------------------------------------------------------------------------------------
# the network: compact matrix, gradients (Lemma 1), gradient-scale matrices (Eq. 7)


def _weights(weights: Sequence[object]) -> list[np.ndarray]:
    if isinstance(weights, np.ndarray) or not isinstance(weights, Sequence) or not weights:
        raise TypeError("weights must be a non-empty list [W_1, ..., W_L] of matrices")
    out = [as_real_array(f"weights[{i}]", w, ndim=2) for i, w in enumerate(weights)]
    for i in range(1, len(out)):
        if out[i].shape[1] != out[i - 1].shape[0]:
            raise ValueError(
                f"weights[{i}] has shape {out[i].shape} but weights[{i - 1}] has "
                f"{out[i - 1].shape}: W_l must be (m_l, m_(l-1))"
            )
    return out


def _product(mats: Sequence[np.ndarray], dim: int) -> np.ndarray:
    """``mats[-1] @ ... @ mats[0]``; the identity of size ``dim`` when empty."""
    out = np.eye(dim)
    for m in mats:
        out = m @ out
    return out


def _above(ws: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``[W_{L:2}, ..., W_{L:L}, W_{L:L+1} = I_K]``: entry ``l - 1`` is the product of the
    layers above layer ``l`` (``K x m_l``), built from the top, ``((I_K W_L) W_{L-1}) ⋯``:
    every product has ``K`` rows, ``O(K Σ_l m_l m_{l-1})`` for all of them."""
    out = [np.eye(ws[-1].shape[0])]
    for w in ws[:0:-1]:
        out.append(out[-1] @ w)
    out.reverse()
    return out


def _backward(
    ws: Sequence[np.ndarray], above: Sequence[np.ndarray], err: np.ndarray
) -> list[np.ndarray]:
    """Lemma 1's gradients ``W_{L:l+1}^T Er W_{l-1:1}^T``, ``l = 1..L``, by the recursion
    ``Er W_{l:1}^T = (Er W_{l-1:1}^T) W_l^T`` from the bottom (``K``-row products only)."""
    left, grads = err, []
    for a, w in zip(above, ws, strict=True):
        grads.append(a.T @ left)
        left = left @ w.T
    return grads


def _b_scalars(ws: Sequence[np.ndarray]) -> list[float]:
    """``tr B_l / q = ‖W_{l-1:1}‖_F^2 / q``, ``l = 1..L`` (1 at ``l = 1``), the scalar parts
    of the ``B_l``, with ``W_{l-1:1}`` built from the bottom."""
    q = ws[0].shape[1]
    below, out = np.eye(q), []
    for w in ws:
        out.append(float(np.sum(below * below)) / q)
        below = w @ below
    return out


def compact_matrix(weights: Sequence[object]) -> np.ndarray:
    r"""The compact (end-to-end) matrix :math:`W = W_{L:1} = \prod_{l=L}^{1} W_l`,
    ``(K, q)``."""
    ws = _weights(weights)
    return _product(ws, ws[0].shape[1])


def gradient_scale_matrices(
    weights: Sequence[object], variant: str = "corrected"
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    r"""The gradient-scale matrices of Eq. 7, ``(A_1..A_L, B_1..B_L)`` (layer ``l`` at index
    ``l - 1``):

    .. math::

        A_l = \Big(\prod_{j=L}^{l+1} W_j\Big)\Big(\prod_{j=L}^{l+1} W_j\Big)^T \in
        \mathbb R^{K\times K},\qquad
        B_l = \Big(\prod_{j=l-1}^{1} W_j\Big)^T\Big(\prod_{j=l-1}^{1} W_j\Big) \in
        \mathbb R^{q\times q},

    i.e. ``A_l = W_{L:l+1}W_{L:l+1}^T`` and ``B_l = W_{l-1:1}^T W_{l-1:1}``, with
    ``A_L = I_K`` and ``B_1 = I_q`` (empty products).

    ``variant`` (note 002 §7 item 4): ``"corrected"`` is the ``B_l`` above (Eq. 7, and
    Eq. 17 of App. A). ``"published"`` is App. A's printed
    :math:`B^l = \mathbf Q^l \mathbf Q^{lT}` with :math:`\mathbf Q^l = W_{l-1}\cdots W_1`,
    of shape ``(m_{l-1}, m_{l-1})`` rather than the stated ``(m_0, m_0)`` (``B_1 = I_q``);
    with square layers it has the right shape but is not the factor of Theorem 1: Eq. 6
    built with it misses the exact GD step at first order. ``A_l`` is the same in both.
    """
    ws = _weights(weights)
    published = check_choice("variant", variant, VARIANTS) == "published"
    a, b = [], []
    # Each product rebuilt from the identity (not the K-row recursion of layer_gradients):
    # B_l is a full (q, q) matrix anyway, and the PC-bias family records these matrices, so
    # their product order fixes its stored numbers.
    for layer in range(len(ws)):
        above = _product(ws[layer + 1 :], ws[layer].shape[0])
        below = _product(ws[:layer], ws[0].shape[1])
        a.append(above @ above.T)
        b.append(below @ below.T if published else below.T @ below)
    return a, b


def layer_gradients(weights: Sequence[object], x: object, y: object) -> list[np.ndarray]:
    r"""Exact gradients of Eq. 5 w.r.t. each layer (Lemma 1, Eq. 26), layer ``l`` at index
    ``l - 1``:

    .. math::

        \nabla_{W_l}\mathcal L = W_{L:l+1}^T\, Er\, W_{l-1:1}^T
        = \Big(\prod_{j=L}^{l+1} W_j\Big)^T\, Er\,
        \Big(\prod_{j=l-1}^{1} W_j\Big)^T, \qquad Er = W\Sigma_{XX} - \Sigma_{YX}\ (\text{Eq. 1}),

    by back-propagation: ``W_{L:l+1}`` from the top and ``Er W_{l-1:1}^T`` from the bottom,
    so every product has ``K`` rows (``O(K Σ_l m_l m_{l-1})``; never ``W_{l-1:1}`` itself).
    """
    ws = _weights(weights)
    xa, ya = frame_data(x, y)
    _check_io(ws, xa, ya)
    above = _above(ws)
    err = (above[0] @ ws[0]) @ (xa.T @ xa) - ya.T @ xa
    return _backward(ws, above, err)


def _check_io(ws: list[np.ndarray], xa: np.ndarray, ya: np.ndarray) -> None:
    if ws[0].shape[1] != xa.shape[1] or ws[-1].shape[0] != ya.shape[1]:
        raise ValueError(
            f"the network maps {ws[0].shape[1]} -> {ws[-1].shape[0]} but x has "
            f"{xa.shape[1]} features and y {ya.shape[1]} outputs"
        )


def gd_step(weights: Sequence[object], x: object, y: object, mu: float) -> list[np.ndarray]:
    r"""One exact full-batch GD step :math:`W_l \leftarrow W_l - \mu\nabla_{W_l}\mathcal L`."""
    mu = check_float("mu", mu, minimum=0.0)
    grads = layer_gradients(weights, x, y)
    return [w - mu * g for w, g in zip(_weights(weights), grads, strict=True)]


def first_order_update(weights: Sequence[object], x: object, y: object, mu: float) -> np.ndarray:
    r"""Theorem 1 (Eq. 6) without its remainder: the predicted next compact matrix

    .. math::

        W^{s+1} \approx W^s - \mu \sum_{l=1}^{L} A_l^s\, Er^s\, B_l^s .
    """
    mu = check_float("mu", mu, minimum=0.0)
    ws = _weights(weights)
    xa, ya = frame_data(x, y)
    _check_io(ws, xa, ya)
    w = _product(ws, xa.shape[1])
    err = w @ (xa.T @ xa) - ya.T @ xa
    a, b = gradient_scale_matrices(ws)
    return w - mu * sum(al @ err @ bl for al, bl in zip(a, b, strict=True))


def compact_update_residual(weights: Sequence[object], x: object, y: object, mu: float) -> float:
    r"""``‖W^{s+1}_{exact} - W^{s+1}_{Eq. 6}‖_F``: the :math:`O(\mu^2)` remainder of
    Theorem 1 (for ``L = 1`` it is 0: Eq. 3 is exact)."""
    exact = compact_matrix(gd_step(weights, x, y, mu))
    return float(np.linalg.norm(exact - first_order_update(weights, x, y, mu)))


# ---------------------------------------------------------------------------------------
# random-matrix scales (Thm 3, Lemma 2) and the effective factor c


def _widths_variances(widths: Sequence[int], variances: Sequence[float] | str) -> tuple:
    if isinstance(widths, (str, bytes)) or not isinstance(widths, Sequence) or len(widths) < 2:
        raise ValueError(f"widths must be a sequence [m_0, ..., m_L] of >= 2 ints, got {widths!r}")
    m = [check_int(f"widths[{i}]", w, minimum=1) for i, w in enumerate(widths)]
    if isinstance(variances, str):
        variances = layer_variances(m, variances)
    if len(variances) != len(m) - 1:
        raise ValueError(
            f"variances has {len(variances)} entries but widths define {len(m) - 1} layers"
        )
    var = [check_float(f"variances[{i}]", v, minimum=0.0) for i, v in enumerate(variances)]
    return m, var


def expected_scales(
    widths: Sequence[int], variances: Sequence[float] | str
) -> tuple[np.ndarray, np.ndarray]:
    r"""Theorem 3's scales ``(alpha, beta)``, each of shape ``(L,)``:

    .. math::

        \mathbb E[A_l] = \alpha_l I,\quad \alpha_l = \prod_{n=l+1}^{L} m_{n-1}\sigma_n^2
        \ (\text{Eq. 13}),\qquad
        \mathbb E[B_l] = \beta_l I,\quad \beta_l = \prod_{n=1}^{l-1} m_n\sigma_n^2
        \ (\text{Eq. 12}),

    for i.i.d. zero-mean entries of variance :math:`\sigma_n^2` in ``W_n`` (shape
    ``(m_n, m_{n-1})``). ``variances`` is a list of :math:`\sigma_n^2` or the name of a
    :class:`~collapselab.models.DeepLinear` init (``"def3"``, ``"glorot_uniform"``, ...).
    """
    m, var = _widths_variances(widths, variances)
    big_l = len(var)
    alpha = np.array(
        [
            math.prod(m[n - 1] * var[n - 1] for n in range(layer + 1, big_l + 1))
            for layer in range(1, big_l + 1)
        ]
    )
    beta = np.array(
        [math.prod(m[n] * var[n - 1] for n in range(1, layer)) for layer in range(1, big_l + 1)]
    )
    return alpha, beta


def product_entry_variance(widths: Sequence[int], variances: Sequence[float] | str) -> float:
    r"""Lemma 2: each entry of :math:`Q = \prod_{n=L}^{1} W_n` has mean 0 and variance

    .. math:: \operatorname{var}[Q_{ij}] = \frac{1}{m_L}\prod_{n=1}^{L} m_n \sigma_n^2 .
    """
    m, var = _widths_variances(widths, variances)
    return math.prod(m[n] * var[n - 1] for n in range(1, len(m))) / m[-1]


def effective_factor(
    widths: Sequence[int], variances: Sequence[float] | str, variant: str = "corrected"
) -> float:
    r"""The factor ``c`` in the per-PC ratio :math:`\lambda_j = 1 - \mu c d_j`.

    ``"published"`` (Eq. 10): ``c = L``. ``"corrected"``: with :math:`A_l \approx \alpha_l I`
    and :math:`B_l \approx \beta_l I` (Thm 3), Eq. 6 becomes
    :math:`W^{s+1} = W^s - \mu (\sum_l \alpha_l\beta_l) Er^s`, so
    :math:`c = \sum_{l=1}^{L}\alpha_l\beta_l` (note 002 §3.6, [derived]). Def. 3 gives
    ``L + O(1/m)``; Glorot init does not.
    """
    if check_choice("variant", variant, VARIANTS) == "published":
        return float(len(_widths_variances(widths, variances)[1]))
    alpha, beta = expected_scales(widths, variances)
    return float(alpha @ beta)


def measured_factor(weights: Sequence[object]) -> float:
    r"""``c`` measured on actual weights: :math:`\sum_l \bar a_l \bar b_l` with
    :math:`\bar a_l = \operatorname{tr}A_l / K` and :math:`\bar b_l = \operatorname{tr}B_l / q`
    (the scalar parts of the gradient-scale matrices)."""
    a, b = gradient_scale_matrices(weights)
    pairs = zip(a, b, strict=True)
    return float(sum(np.trace(al) / len(al) * np.trace(bl) / len(bl) for al, bl in pairs))


@dataclass(frozen=True)
class ScaleMonteCarlo:
    """Monte-Carlo moments of the gradient-scale matrices at initialisation.

    Attributes:
        alpha, beta: Thm 3's predictions, ``(L,)``.
        a_mean, a_var: per layer ``l``, the entrywise sample mean and (unbiased) variance
            of ``A_l`` over the draws, each ``(K, K)``.
        b_mean, b_var: the same for ``B_l``, each ``(q, q)``.
        product_var: entrywise sample variance of the compact matrix, ``(K, q)`` (Lemma 2).
        n_samples: the number of independent draws.
    """

    alpha: np.ndarray
    beta: np.ndarray
    a_mean: list[np.ndarray]
    a_var: list[np.ndarray]
    b_mean: list[np.ndarray]
    b_var: list[np.ndarray]
    product_var: np.ndarray
    n_samples: int


def _draw(rng: np.random.Generator, shape: tuple[int, int], var: float, dist: str) -> np.ndarray:
    if dist == "normal":
        return rng.normal(0.0, math.sqrt(var), size=shape)
    half = math.sqrt(3.0 * var)  # U(-a, a) has variance a^2 / 3
    return rng.uniform(-half, half, size=shape)


def scale_monte_carlo(
    widths: Sequence[int],
    variances: Sequence[float] | str,
    n_samples: int = 200,
    seed: int = 0,
    distribution: str = "normal",
) -> ScaleMonteCarlo:
    r"""Sample ``n_samples`` networks with i.i.d. entries (``"normal"`` or ``"uniform"`` of
    variance :math:`\sigma_n^2`) and return the moments of ``A_l``, ``B_l`` (Eq. 7) and of
    the compact matrix, for comparison with Thm 3 (:math:`\alpha_l I`, :math:`\beta_l I`),
    Thm 4 (variance :math:`O(1/\mathfrak m)` under Def. 3) and Lemma 2."""
    m, var = _widths_variances(widths, variances)
    n = check_int("n_samples", n_samples, minimum=2)
    dist = check_choice("distribution", distribution, ("normal", "uniform"))
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    big_l = len(var)
    a_draws = [np.empty((n, m[-1], m[-1])) for _ in range(big_l)]
    b_draws = [np.empty((n, m[0], m[0])) for _ in range(big_l)]
    prods = np.empty((n, m[-1], m[0]))
    for i in range(n):
        ws = [_draw(rng, (m[k + 1], m[k]), var[k], dist) for k in range(big_l)]
        a, b = gradient_scale_matrices(ws)
        for layer in range(big_l):
            a_draws[layer][i], b_draws[layer][i] = a[layer], b[layer]
        prods[i] = _product(ws, m[0])
    alpha, beta = expected_scales(m, var)
    return ScaleMonteCarlo(
        alpha,
        beta,
        [d.mean(0) for d in a_draws],
        [d.var(0, ddof=1) for d in a_draws],
        [d.mean(0) for d in b_draws],
        [d.var(0, ddof=1) for d in b_draws],
        prods.var(0, ddof=1),
        n,
    )


# ---------------------------------------------------------------------------------------
# the per-PC closed form (Eqs. 8-10) and its consequences


def pc_ratio(eigenvalues: object, mu: float, c: float) -> np.ndarray:
    r"""The per-PC ratio :math:`\lambda_j = 1 - \mu c d_j` (Eq. 10; ``c = L`` in the paper)."""
    d = as_real_array("eigenvalues", eigenvalues, ndim=1)
    mu = check_float("mu", mu, minimum=0.0)
    return 1.0 - mu * check_float("c", c, minimum=0.0) * d


def _steps(steps: object) -> np.ndarray:
    if isinstance(steps, (int, np.integer)) and not isinstance(steps, bool):
        return np.arange(check_int("steps", steps, minimum=0) + 1)
    s = np.asarray(steps)
    if s.ndim != 1 or s.dtype.kind not in "iu" or (s < 0).any():
        raise ValueError(f"steps must be an int or a 1-D array of step indices >= 0, got {steps!r}")
    return s.astype(np.int64)


def _exponents(steps: object, variant: str) -> np.ndarray:
    """``s`` (corrected) or the printed ``s - 1`` of Eqs. 4/10 (published; 0 at ``s = 0``,
    where every variant starts from ``w^0``)."""
    s = _steps(steps)
    if check_choice("variant", variant, VARIANTS) == "published":
        return np.maximum(s - 1, 0)
    return s


def pc_decay(
    eigenvalues: object, mu: float, c: float, steps: object, variant: str = "corrected"
) -> np.ndarray:
    r"""``|λ_j|^e`` of shape ``(S, q)``: ``e = s`` (corrected) or ``s - 1`` (published).

    Every per-PC deviation decays by it: the ensemble std, the distance to ``w_j^opt`` and
    the initialisation's contribution (note 002 §2.3)."""
    lam = pc_ratio(eigenvalues, mu, c)
    return np.abs(lam)[None, :] ** _exponents(steps, variant)[:, None]


def closed_form_columns(
    frame: PCFrame, w0_pc: object, mu: float, c: float, steps: object, variant: str = "corrected"
) -> np.ndarray:
    r"""Eq. 10: the compact matrix in PC coordinates at each step, ``(S, ..., K, q)``.

    .. math::

        \tilde w_j^s = \lambda_j^{s}\, \tilde w_j^0 + (1 - \lambda_j^{s})\, m_j / d_j,
        \qquad \lambda_j = 1 - \mu c d_j

    (``"corrected"``, the solution of :math:`w^{s+1} = \lambda w^s + \mu c\, m_j`); the
    ``"published"`` Eq. 10 has exponent ``s - 1`` for :math:`\tilde w^s`. ``w0_pc`` has shape
    ``(..., K, q)`` (an ensemble allowed); ``steps`` an int ``S - 1`` or step indices.
    """
    w0 = frame_matrices("w0_pc", w0_pc, frame.n_pcs)
    lam = pc_ratio(frame.eigenvalues, mu, c)
    powers = lam[None, :] ** _exponents(steps, variant)[:, None]  # (S, q)
    powers = powers.reshape(powers.shape[:1] + (1,) * (w0.ndim - 1) + powers.shape[1:])
    w_opt = frame.optimum("corrected")
    return powers * w0 + (1.0 - powers) * w_opt


def predicted_ensemble_std(
    frame: PCFrame, w0_pc: object, mu: float, c: float, steps: object, variant: str = "corrected"
) -> np.ndarray:
    r"""Predicted across-member std of each entry of ``W̃^s``, ``(S, K, q)``, from an
    ensemble of initial matrices ``w0_pc`` ``(N, K, q)``, ``N >= 2`` (ddof = 1):
    :math:`\operatorname{std}(\tilde w_{kj}^s) =
    |\lambda_j|^{s}\operatorname{std}(\tilde w_{kj}^0)`."""
    w0 = frame_matrices("w0_pc", w0_pc, frame.n_pcs)
    if w0.ndim != 3 or w0.shape[0] < 2:
        raise ValueError(
            f"w0_pc must be an ensemble of shape (N, K, q) with N >= 2 members for a std, "
            f"got shape {w0.shape}"
        )
    decay = pc_decay(frame.eigenvalues, mu, c, steps, variant)
    return decay[:, None, :] * w0.std(0, ddof=1)[None]


def predicted_distance(
    frame: PCFrame, w0_pc: object, mu: float, c: float, steps: object, variant: str = "corrected"
) -> np.ndarray:
    r"""Entrywise distance to the optimum, ``(S, ..., K, q)``:
    :math:`|\tilde w^s_{kj} - \tilde w^{opt}_{kj}| = |\lambda_j|^{s}\,|\tilde w^0_{kj} -
    \tilde w^{opt}_{kj}|` (Fig. 4 uses row ``k = 0``)."""
    w0 = frame_matrices("w0_pc", w0_pc, frame.n_pcs)
    decay = pc_decay(frame.eigenvalues, mu, c, steps, variant)
    decay = decay.reshape(decay.shape[:1] + (1,) * (w0.ndim - 1) + decay.shape[1:])
    return decay * np.abs(w0 - frame.optimum("corrected"))


def predicted_loss(
    frame: PCFrame, w0_pc: object, mu: float, c: float, steps: object, variant: str = "corrected"
) -> np.ndarray:
    r"""The learning curve implied by Eq. 10, ``(S, ...)`` (note 002 §2.3, [derived]):

    .. math::

        \mathcal L(s) = \mathcal L^* + \tfrac12 \sum_j d_j \lambda_j^{2s}
        \lVert \tilde w_j^0 - m_j/d_j\rVert^2 .
    """
    w0 = frame_matrices("w0_pc", w0_pc, frame.n_pcs)
    lam = pc_ratio(frame.eigenvalues, mu, c)
    e = _exponents(steps, variant)
    gap = ((w0 - frame.optimum("corrected")) ** 2).sum(-2)  # (..., q)
    weights = frame.eigenvalues[None, :] * lam[None, :] ** (2 * e[:, None])  # (S, q)
    return frame.optimal_loss() + 0.5 * np.einsum("sq,...q->s...", weights, gap)


def time_to_epsilon(
    eigenvalues: object, mu: float, c: float, eps: float, approximate: bool = False
) -> np.ndarray:
    r"""Steps for PC ``j`` to shrink its deviation by ``eps``, shape ``(q,)``:

    .. math::

        s_j(\varepsilon) = \frac{\ln\varepsilon}{\ln|\lambda_j|}
        \;\approx\; \frac{\ln(1/\varepsilon)}{\mu c d_j}\ (\texttt{approximate}).

    Real-valued (round up for a step count); ``inf`` where the PC never gets there
    (``d_j = 0`` or ``|λ_j| >= 1``, i.e. ``μ c d_j >= 2``: GD diverges along it); 0 where
    ``λ_j = 0`` (reached in the first step)."""
    eps = check_float("eps", eps, minimum=0.0, maximum=1.0, strict=True)
    lam = pc_ratio(eigenvalues, mu, c)
    d = np.asarray(eigenvalues, dtype=np.float64)
    rate = mu * c * d
    with np.errstate(divide="ignore"):
        if approximate:
            out = np.where(rate > 0, math.log(1.0 / eps) / np.where(rate > 0, rate, 1.0), np.inf)
        else:
            log_lam = np.log(np.abs(lam))
            out = np.where(
                log_lam < 0, math.log(eps) / np.where(log_lam < 0, log_lam, -1.0), np.inf
            )
    if eps == 1.0:
        out = np.zeros_like(out)
    return out


# ---------------------------------------------------------------------------------------
# the iterated-product simulator (Eq. 9)


def driving_matrix(weights: Sequence[object], variant: str = "corrected") -> np.ndarray:
    r"""The matrix ``A^s`` that drives Eq. 9 at the current weights, ``(K, K)``.

    ``"published"`` (Eq. 8-9, which set :math:`B_l \approx I`): :math:`A^s = \sum_l A_l^s`.
    ``"corrected"``: :math:`A^s = \sum_l \bar b_l A_l^s` with
    :math:`\bar b_l = \operatorname{tr}B_l^s / q`, the scalar part of ``B_l`` (so
    :math:`\mathbb E A^s = c I` with ``c = Σ α_l β_l``, as in :func:`effective_factor`);
    under Def. 3 :math:`\bar b_l = 1 + O(1/\mathfrak m)` and the two agree.
    """
    published = check_choice("variant", variant, VARIANTS) == "published"
    ws = _weights(weights)
    return _drivers(ws, _above(ws))["published" if published else "corrected"]


def _drivers(ws: Sequence[np.ndarray], above: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Both variants of :func:`driving_matrix` from the products ``W_{L:l+1}`` (:func:`_above`):
    ``A_l = W_{L:l+1}W_{L:l+1}^T`` and ``tr B_l / q`` (:func:`_b_scalars`)."""
    a = [u @ u.T for u in above]
    scalars = _b_scalars(ws)
    return {
        "published": sum(a),
        "corrected": sum(al * bl for al, bl in zip(a, scalars, strict=True)),
    }


def iterated_product_columns(
    frame: PCFrame, w0_pc: object, mu: float, a_sums: object
) -> np.ndarray:
    r"""Eq. 9 driven by given ``A^s = Σ_l A_l^s``, ``a_sums`` of shape ``(S, K, K)``.

    With :math:`B_l \approx I` (Eq. 8) every column evolves by

    .. math::

        \tilde w_j^{s+1} = (I - \mu d_j A^s)\,\tilde w_j^s + \mu A^s m_j,
        \quad\text{i.e.}\quad \tilde W^{s+1} = \tilde W^s - \mu A^s (\tilde W^s D - M),

    whose unrolled form is Eq. 9. Returns ``(S + 1, K, q)``, ``W̃^0`` first. With
    ``A^s = c I`` it is Eq. 10 (corrected). :func:`driving_matrix` gives ``A^s`` from
    weights (``"published"``: ``Σ_l A_l``; ``"corrected"``: weighted by the scalar part of
    ``B_l``); to keep the full matrices ``B_l`` use :func:`first_order_update` instead.
    """
    w = frame_matrices("w0_pc", w0_pc, frame.n_pcs)
    k = frame.n_outputs
    if w.shape != (k, frame.n_pcs):
        raise ValueError(f"w0_pc must have shape ({k}, {frame.n_pcs}), got {w.shape}")
    a = as_real_array("a_sums", a_sums, ndim=3, layout="(S, K, K)", shape=(None, k, k))
    mu = check_float("mu", mu, minimum=0.0)
    out = np.empty((a.shape[0] + 1, k, frame.n_pcs))
    out[0] = w
    for s, a_s in enumerate(a):
        err = out[s] * frame.eigenvalues - frame.class_sums
        out[s + 1] = out[s] - mu * a_s @ err
    return out


# ---------------------------------------------------------------------------------------
# Monte Carlo against width (Thm 4) and an end-to-end check against gradient descent


@dataclass(frozen=True)
class ScalesAgainstWidth:
    """Monte-Carlo moments of ``A_l``, ``B_l`` at init for a range of hidden widths.

    Attributes:
        widths: the hidden widths ``m`` (every hidden layer has width ``m``).
        mean_error_a, mean_error_b: ``max_l max_ij |E[A_l] - α_l I|`` (resp. ``B``) over
            the layers with a random product (``l < L`` for ``A``, ``l > 1`` for ``B``).
        var_a, var_b: the entrywise variance averaged over entries and those layers.
        slope_a, slope_b: least-squares slopes of ``log var`` against ``log m`` (Thm 4
            under Def. 3 predicts ``-1``).
    """

    widths: np.ndarray
    mean_error_a: np.ndarray
    mean_error_b: np.ndarray
    var_a: np.ndarray
    var_b: np.ndarray
    slope_a: float
    slope_b: float


def scales_against_width(
    input_dim: int,
    n_outputs: int,
    n_layers: int,
    hidden_widths: Sequence[int],
    init: str = "def3",
    n_samples: int = 200,
    seed: int = 0,
) -> ScalesAgainstWidth:
    r"""Thm 3-4 against width: for each ``m`` in ``hidden_widths`` sample ``n_samples``
    networks ``[input_dim, m, ..., m, n_outputs]`` (``n_layers`` layers, init scheme
    ``init``) with :func:`scale_monte_carlo` and summarise the deviation of the mean from
    :math:`\alpha_l I`, :math:`\beta_l I` and the variance, with its log-log slope."""
    big_l = check_int("n_layers", n_layers, minimum=2)
    ms = np.array([check_int("hidden_widths[i]", m, minimum=1) for m in hidden_widths])
    if len(ms) < 2:
        raise ValueError(f"hidden_widths needs at least 2 widths for a slope, got {list(ms)}")
    rows = []
    for i, m in enumerate(ms):
        widths = [input_dim, *[int(m)] * (big_l - 1), n_outputs]
        mc = scale_monte_carlo(widths, init, n_samples, seed + i)
        a_layers, b_layers = range(big_l - 1), range(1, big_l)
        rows.append(
            (
                max(np.abs(mc.a_mean[k] - mc.alpha[k] * np.eye(n_outputs)).max() for k in a_layers),
                max(np.abs(mc.b_mean[k] - mc.beta[k] * np.eye(input_dim)).max() for k in b_layers),
                np.mean([mc.a_var[k].mean() for k in a_layers]),
                np.mean([mc.b_var[k].mean() for k in b_layers]),
            )
        )
    err_a, err_b, var_a, var_b = (np.array(c) for c in zip(*rows, strict=True))
    log_m = np.log(ms)
    return ScalesAgainstWidth(
        ms,
        err_a,
        err_b,
        var_a,
        var_b,
        float(np.polyfit(log_m, np.log(var_a), 1)[0]),
        float(np.polyfit(log_m, np.log(var_b), 1)[0]),
    )


@dataclass(frozen=True)
class PCBiasVerification:
    """The closed form and Eq. 9 held against exact full-batch GD of a deep linear net.

    Errors are relative to the motion, ``‖pred^s - W̃^s‖_F / ‖W̃^s - W̃^0‖_F``, at
    ``checkpoints``.

    Attributes:
        checkpoints: the steps compared (``>= 1``).
        factor: ``{"published": L, "corrected": Σ α_l β_l}`` (Thm 3 at these widths).
        measured_factor: :func:`measured_factor` of the initial weights.
        closed_form_error: per variant, the error of Eq. 10 (published: ``c = L`` and the
            printed index shift; corrected: ``c = Σ α_l β_l``, exponent ``s``).
        iterated_error: per variant of :func:`driving_matrix`, the error of Eq. 9 driven
            by the ``A_l`` measured along the GD run.
        loss: the simulated loss at the checkpoints.
        loss_error: per variant, the relative error of :func:`predicted_loss` in
            ``L - L*``.
        follows: the variant whose closed form has the smaller largest error.
    """

    checkpoints: np.ndarray
    factor: dict[str, float]
    measured_factor: float
    closed_form_error: dict[str, np.ndarray]
    iterated_error: dict[str, np.ndarray]
    loss: np.ndarray
    loss_error: dict[str, np.ndarray]
    follows: str


def verify_pcbias(
    x: object,
    y: object,
    widths: Sequence[int],
    init: str | Sequence[float] = "def3",
    steps: int = 200,
    lr: float = 0.1,
    checkpoints: Sequence[int] | None = None,
    seed: int = 0,
    weights: Sequence[object] | None = None,
) -> PCBiasVerification:
    r"""Train one deep linear net of ``widths`` ``[q, m_1, ..., K]`` by exact full-batch GD
    on ``x`` ``(n, q)``, ``y`` ``(n, K)`` for ``steps`` steps with
    :math:`\mu = \texttt{lr} / (L d_1)` and hold the published and corrected closed forms
    (Eq. 10) and Eq. 9 against it.

    The run starts from ``weights`` ``[W_1, ..., W_L]`` (``W_l`` of shape
    ``(m_l, m_{l-1})``) when given, else from i.i.d. normal entries with the variances of
    ``init`` drawn from ``seed``. ``init`` (an init name of
    :func:`~collapselab.models.layer_variances` or the variances ``σ_l^2``) gives the
    predicted factor ``c`` (:func:`effective_factor`) either way: name the distribution the
    given weights were drawn from.

    Each step is :func:`gd_step`'s exact step computed by back-propagation: ``W_{L:l+1}``
    from the top and ``Er W_{l-1:1}^T`` from the bottom (:func:`layer_gradients`), the same
    products giving Eq. 9's drivers (:func:`driving_matrix`) and the compact matrix
    ``W_{L:1}``, so a step costs ``O(K Σ_l m_l m_{l-1})`` plus ``O(q Σ_l m_l m_{l-1})`` for
    the ``tr B_l`` (``L = 5``, width 128, 120 steps: well under a second)."""
    frame = principal_frame(x, y)
    xa, ya = frame_data(x, y)
    m, var = _widths_variances(widths, init)
    if m[0] != xa.shape[1] or m[-1] != ya.shape[1]:
        raise ValueError(
            f"widths {m} must start with q = {xa.shape[1]} and end with K = {ya.shape[1]}"
        )
    steps = check_int("steps", steps, minimum=1)
    mu = check_float("lr", lr, minimum=0.0, strict=True) / ((len(m) - 1) * frame.eigenvalues[0])
    marks = _steps(
        np.unique(np.geomspace(1, steps, 6).astype(int))
        if checkpoints is None
        else np.asarray(checkpoints)
    )
    if marks.min() < 1 or marks.max() > steps:
        raise ValueError(f"checkpoints must lie in [1, steps={steps}], got {marks.tolist()}")
    ws = _initial_weights(m, var, seed, weights)
    c0 = measured_factor(ws)
    sxx, syx = xa.T @ xa, ya.T @ xa
    compact: list[np.ndarray] = []
    drivers: dict[str, list[np.ndarray]] = {v: [] for v in VARIANTS}
    for step in range(steps + 1):
        above = _above(ws)
        w = above[0] @ ws[0]  # W_{L:1}
        compact.append(w)
        if step == steps:
            break
        for v, a_s in _drivers(ws, above).items():
            drivers[v].append(a_s)
        grads = _backward(ws, above, w @ sxx - syx)
        ws = [wl - mu * g for wl, g in zip(ws, grads, strict=True)]
    sim = frame.rotate(np.stack(compact))
    motion = np.linalg.norm(sim[marks] - sim[0], axis=(1, 2))

    def rel(pred: np.ndarray) -> np.ndarray:
        return np.linalg.norm(pred - sim[marks], axis=(1, 2)) / motion

    factor = {v: effective_factor(m, var, v) for v in VARIANTS}
    loss = frame.loss(sim[marks])
    excess = loss - frame.optimal_loss()
    closed, iterated, loss_err = {}, {}, {}
    for v in VARIANTS:
        closed[v] = rel(closed_form_columns(frame, sim[0], mu, factor[v], marks, v))
        iterated[v] = rel(iterated_product_columns(frame, sim[0], mu, np.stack(drivers[v]))[marks])
        pred_loss = predicted_loss(frame, sim[0], mu, factor[v], marks, v)
        loss_err[v] = np.abs(pred_loss - loss) / excess
    follows = min(VARIANTS, key=lambda v: closed[v].max())
    return PCBiasVerification(marks, factor, c0, closed, iterated, loss, loss_err, follows)


def _initial_weights(
    m: Sequence[int], var: Sequence[float], seed: int, weights: Sequence[object] | None
) -> list[np.ndarray]:
    """:func:`verify_pcbias`'s start: ``weights`` checked against the widths ``m``, else
    ``N(0, σ_l^2)`` entries drawn from ``seed`` (layer by layer, ``W_1`` first)."""
    if weights is None:
        rng = np.random.default_rng(check_int("seed", seed, minimum=0))
        return [rng.normal(0.0, math.sqrt(v), (m[i + 1], m[i])) for i, v in enumerate(var)]
    ws = _weights(weights)
    shapes = [(m[i + 1], m[i]) for i in range(len(m) - 1)]
    if [w.shape for w in ws] != shapes:
        raise ValueError(
            f"weights have shapes {[w.shape for w in ws]} but widths {list(m)} need {shapes}"
        )
    return ws
