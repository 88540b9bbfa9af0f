r"""The approximate dynamics of paper 002's two-layer ReLU model (§2.5, App. B.2).

``f(x) = a^T σ(W x)`` with ``a ∈ R^m`` fixed, ``W ∈ R^{m×d}`` trained by full-batch GD on
``½ Σ_i (f(x_i) - y_i)²`` with labels ``y_i ∈ {+1, -1}`` (the model of
:class:`collapselab.models.TwoLayerReLU`). Layout: **rows**, ``x`` ``(n, d)``, ``y`` ``(n,)``,
``w`` ``(m, d)``, ``a`` ``(m,)``.

The exact row update (App. B.2, the definition at the ReLU kink: ``1_w(x) = 1[w·x ≥ 0]``):

.. math::

    w_r^{s+1} - w_r^s = -\mu a_r \sum_i 1_{w_r^s}(x_i)\,[f(x_i) - y_i]\, x_i^T .

Under symmetric data (``P(x) = P(-x)``) and the paired init (``w_{2i} = -w_{2i-1}``,
``a_{2i} = -a_{2i-1}``), ``Ψ^0(x) = ½ a^T W^0`` and the half-space second moment is
``½ Σ_XX``, which gives, at step 0 and approximately for small ``s``,

.. math::

    W^{s+1} - W^s \approx -\mu \big[\kappa\,(a a^T) W^s \Sigma_{XX} - \tilde M^s\big],
    \qquad \tilde M^s_{r\cdot} = a_r \sum_{i:\,w_r^s\cdot x_i \ge 0} y_i x_i^T .

``variant`` (note 002 §3.8, errata 25):

* ``"corrected"``: ``κ = ¼`` (the two factors ½, from ``Ψ^0`` and from the half-space,
  multiply), exactly the GD step at ``s = 0`` when the sample itself is symmetric (each
  ``x_i`` has its ``-x_i``);
* ``"published"``: the printed ``W^{s+1} - W^s ≈ -μ ½ [(a a^T) W^s Σ_XX - M̃^s]``, i.e. the
  Σ_XX term with ``½`` instead of ``¼`` and the class term halved. ``m̃_r`` is read as the
  difference of the class **sums** in the half-space (the paper says "centroids"; the
  derivation it follows has sums).

In PC coordinates the component of column ``j`` along ``a`` then decays by
``1 - μ κ' ‖a‖² d_j`` per step (:func:`relu_pc_ratio`; ``κ' = ¼`` corrected, ``½``
published): the PC-bias again.
"""

from __future__ import annotations

import numpy as np

from collapselab.checks import as_real_array, check_choice, check_float, check_int

__all__ = [
    "VARIANTS",
    "halfspace_class_sums",
    "relu_approximate_step",
    "relu_approximate_trajectory",
    "relu_gd_step",
    "relu_gd_trajectory",
    "relu_pc_ratio",
]

VARIANTS = ("published", "corrected")


def _inputs(w: object, a: object, x: object, y: object) -> tuple[np.ndarray, ...]:
    wa = as_real_array("w", w, ndim=2, layout="(m, d)")
    aa = as_real_array("a", a, ndim=1, layout="(m,)")
    xa = as_real_array("x", x, ndim=2, layout="(n, d)")
    ya = as_real_array("y", y, ndim=1, layout="(n,)")
    if aa.shape[0] != wa.shape[0]:
        raise ValueError(f"a has {aa.shape[0]} entries but w has {wa.shape[0]} rows (units)")
    if xa.shape[1] != wa.shape[1]:
        raise ValueError(f"x has {xa.shape[1]} features but w has {wa.shape[1]} columns")
    if ya.shape[0] != xa.shape[0]:
        raise ValueError(f"y has {ya.shape[0]} labels but x has {xa.shape[0]} rows")
    if not np.isin(ya, (-1.0, 1.0)).all():
        raise ValueError(f"y must hold labels +1 and -1 (paper 002 §2.5), got {np.unique(ya)}")
    return wa, aa, xa, ya


def halfspace_class_sums(w: object, x: object, y: object) -> np.ndarray:
    r"""``(m, d)``: row ``r`` is :math:`\sum_{i:\, w_r\cdot x_i \ge 0} y_i x_i`, the
    difference of the two class sums inside unit ``r``'s half-space (``m̃_r``)."""
    wa = as_real_array("w", w, ndim=2, layout="(m, d)")
    xa = as_real_array("x", x, ndim=2, layout="(n, d)")
    ya = as_real_array("y", y, ndim=1, layout="(n,)")
    active = (xa @ wa.T >= 0).astype(np.float64)  # (n, m)
    return (active * ya[:, None]).T @ xa


def relu_gd_step(w: object, a: object, x: object, y: object, mu: float) -> np.ndarray:
    r"""One exact GD step of the first layer (App. B.2's row rule), returns ``W^{s+1}``:

    .. math::

        w_r^{s+1} = w_r^s - \mu a_r \sum_i 1[w_r^s\cdot x_i \ge 0]\,(a^T\sigma(W^s x_i) -
        y_i)\, x_i^T .
    """
    wa, aa, xa, ya = _inputs(w, a, x, y)
    mu = check_float("mu", mu, minimum=0.0)
    pre = xa @ wa.T  # (n, m)
    residual = np.maximum(pre, 0.0) @ aa - ya  # (n,)
    active = (pre >= 0).astype(np.float64)
    return wa - mu * aa[:, None] * ((active * residual[:, None]).T @ xa)


def relu_approximate_step(
    w: object, a: object, x: object, y: object, mu: float, variant: str = "corrected"
) -> np.ndarray:
    r"""The approximate step of §2.5, returns ``W^{s+1}``:

    ``"corrected"``: :math:`W - \mu[\tfrac14 (aa^T) W\Sigma_{XX} - \tilde M]`;
    ``"published"``: :math:`W - \tfrac{\mu}{2}[(aa^T) W\Sigma_{XX} - \tilde M]`,
    with :math:`\tilde M_{r\cdot} = a_r \tilde m_r` (:func:`halfspace_class_sums`).
    """
    wa, aa, xa, ya = _inputs(w, a, x, y)
    mu = check_float("mu", mu, minimum=0.0)
    m_tilde = aa[:, None] * halfspace_class_sums(wa, xa, ya)
    drift = np.outer(aa, aa) @ wa @ (xa.T @ xa)
    if check_choice("variant", variant, VARIANTS) == "published":
        return wa - 0.5 * mu * (drift - m_tilde)
    return wa - mu * (0.25 * drift - m_tilde)


def _trajectory(step, w0, a, x, y, mu, steps, *args) -> np.ndarray:
    n_steps = check_int("steps", steps, minimum=0)
    out = [as_real_array("w0", w0, ndim=2, layout="(m, d)")]
    for _ in range(n_steps):
        out.append(step(out[-1], a, x, y, mu, *args))
    return np.stack(out)


def relu_gd_trajectory(
    w0: object, a: object, x: object, y: object, mu: float, steps: int
) -> np.ndarray:
    """``(steps + 1, m, d)``: :func:`relu_gd_step` iterated from ``w0``."""
    return _trajectory(relu_gd_step, w0, a, x, y, mu, steps)


def relu_approximate_trajectory(
    w0: object, a: object, x: object, y: object, mu: float, steps: int, variant: str = "corrected"
) -> np.ndarray:
    """``(steps + 1, m, d)``: :func:`relu_approximate_step` iterated from ``w0`` (the
    half-spaces, hence ``M̃^s``, follow the approximate ``W^s``)."""
    return _trajectory(relu_approximate_step, w0, a, x, y, mu, steps, variant)


def relu_pc_ratio(
    eigenvalues: object, a: object, mu: float, variant: str = "corrected"
) -> np.ndarray:
    r"""Per-PC ratio of the component of column ``j`` (PC coordinates) along ``a``:
    :math:`1 - \mu \kappa' \lVert a\rVert^2 d_j`, ``κ' = ¼`` (corrected) or ``½``
    (published)."""
    d = as_real_array("eigenvalues", eigenvalues, ndim=1)
    aa = as_real_array("a", a, ndim=1)
    mu = check_float("mu", mu, minimum=0.0)
    kappa = 0.5 if check_choice("variant", variant, VARIANTS) == "published" else 0.25
    return 1.0 - mu * kappa * float(aa @ aa) * d
