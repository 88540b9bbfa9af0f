r"""Dynamics of the SNR singular values under continually renormalised flow (note 003 §3.8-3.9).

Under the continually renormalised gradient flow on the central path (Eq. 5; ``lam = 0``,
zero global mean, balanced classes, ``Ave``-normalised loss) the nonzero singular values
``omega_j`` of the SNR matrix ``Sigma_W^{-1/2} M̄`` evolve independently of each other and of
the (frozen) singular vectors. Two rates, selected by ``variant`` (docs/architecture.md,
principle 6):

* ``"published"``: Lemma 5, Eq. 27, ``d omega/dt = (1/N) omega / (C + omega^2)^2``, with
  Prop. 2's closed form ``c1 log omega + c2 omega^2 + c3 omega^4 = a + t``,
  ``c1 = C^2 N``, ``c2 = C N``, ``c3 = N/4``, and Cor. 1's ``omega ~ (t / c3)^{1/4}``.
* ``"corrected"``: the rate the renormalised flow actually follows,
  ``d omega/dt = omega / (C N (C + omega^2))``, i.e. ``(C + omega^2)/C`` times Eq. 27, with
  closed form ``C^2 N log omega + (C N / 2) omega^2 = a + t`` and ``omega ~ (2t/(CN))^{1/2}``.

Why they differ (note 003 §3.9). Lemma 4 moves the projection ``Π`` of Prop. 4 across the
Frobenius inner product, which needs ``Π`` self-adjoint; it is not. The resulting
``dx_j/dt`` is the *ambient* gradient ``-(dL/d omega_j) ((1/N) y_j - omega_j C x_j)`` and
Eq. 29 contracts it with the tangent-restricted differential ``(1/N) y_j``, giving
``(1/N) omega/(C+omega^2)^2``. Contracting with the ambient differential
``(1/N) y_j - omega_j C x_j`` instead (valid: ``omega`` is invariant along the fibres that
the projection removes) gives ``|(1/N) y_j - omega_j C x_j|^2 = 1/N + omega_j^2/(CN)`` and
the corrected rate. The simulators of :mod:`collapselab.theory.central_path` (the paper's
discrete procedure and the tolerance-integrated flow) follow ``"corrected"``;
:func:`verify_snr_dynamics` measures both gaps.

Everything qualitative survives the correction: ``omega_j -> inf``, ``max/min -> 1``,
frozen singular vectors, Cor. 2's limits and hence NC; the growth is ``t^{1/2}``, not
``t^{1/4}``.

NC1 on the renormalised features (Cor. 2): ``Tr(Sigma_W Sigma_B^+) = C sum_j omega_j^{-2}``;
the proof's last step prints ``sum_j omega_j^{-2}`` (a dropped factor ``C``), see
:func:`predicted_nc1_trace`. The catalogue's ``nc1`` (``Tr(...)/C``) and ``nc1_snr`` are both
``sum_j omega_j^{-2}`` there.

Arrays: functions accept scalars or arrays and use numpy float64. ``omega0`` holds the
initial values ``omega_j(0)`` and ``t`` the times; results have shape
``shape(t) + shape(omega0)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from collapselab.checks import as_real_array, check_choice, check_float, check_int
from collapselab.metrics import central_path_losses, snr_matrix
from collapselab.stats import class_stats_from_features
from collapselab.theory.central_path import (
    RenormalisedGD,
    RenormalisedTrajectory,
    paper_labels,
    renormalised_flow,
    snr_instance,
)
from collapselab.theory.dynamics import integrate

__all__ = [
    "VARIANTS",
    "ClosedFormConstants",
    "SNRVerification",
    "closed_form_constants",
    "closed_form_lhs",
    "omega_asymptotic",
    "omega_closed_form",
    "omega_ode",
    "predicted_nc1_trace",
    "snr_rate",
    "verify_snr_dynamics",
]

VARIANTS = ("published", "corrected")


def _sizes(n_classes: object, n_per_class: object) -> tuple[int, int]:
    c = check_int("n_classes", n_classes, minimum=2)
    return c, check_int("n_per_class", n_per_class, minimum=1)


def _array(x: object, name: str, *, positive: bool = False, nonneg: bool = False) -> np.ndarray:
    a = as_real_array(name, x, numbers=True)
    if positive and (a <= 0).any():
        raise ValueError(f"{name} must be positive (singular values of the SNR matrix), got {x!r}")
    if nonneg and (a < 0).any():
        raise ValueError(f"{name} must be >= 0 (times after entering the central path), got {x!r}")
    return a


@dataclass(frozen=True)
class ClosedFormConstants:
    r"""Constants of ``c1 log omega + c2 omega^2 + c3 omega^4 = a + t`` (Prop. 2 form).

    ``published``: ``(C^2 N, C N, N/4)``; ``corrected``: ``(C^2 N, C N / 2, 0)``.
    """

    c1: float
    c2: float
    c3: float


def closed_form_constants(
    n_classes: int, n_per_class: int, variant: str = "corrected"
) -> ClosedFormConstants:
    """The constants of the closed form for ``variant`` (see :class:`ClosedFormConstants`)."""
    c, n = _sizes(n_classes, n_per_class)
    if check_choice("variant", variant, VARIANTS) == "published":
        return ClosedFormConstants(float(c * c * n), float(c * n), n / 4.0)
    return ClosedFormConstants(float(c * c * n), c * n / 2.0, 0.0)


def snr_rate(
    omega: object, n_classes: int, n_per_class: int, variant: str = "corrected"
) -> np.ndarray:
    r"""``d omega/dt``: ``(1/N) omega/(C+omega^2)^2`` (published, Eq. 27) or
    ``omega/(C N (C+omega^2))`` (corrected)."""
    c, n = _sizes(n_classes, n_per_class)
    w = _array(omega, "omega", positive=True)
    if check_choice("variant", variant, VARIANTS) == "published":
        return w / (n * (c + w * w) ** 2)
    return w / (c * n * (c + w * w))


def closed_form_lhs(
    omega: object, n_classes: int, n_per_class: int, variant: str = "corrected"
) -> np.ndarray:
    r"""``c1 log omega + c2 omega^2 + c3 omega^4``: strictly increasing in ``omega > 0``."""
    k = closed_form_constants(n_classes, n_per_class, variant)
    w = _array(omega, "omega", positive=True)
    return k.c1 * np.log(w) + k.c2 * w**2 + k.c3 * w**4


def _solve_one(s0: float, t: float, k: ClosedFormConstants) -> float:
    """``log omega(t)`` from ``log omega(0) = s0`` by bracketed root finding (brentq)."""
    from scipy.optimize import brentq

    if t == 0.0:
        return s0

    def excess(s: float) -> float:
        # Differences to the t = 0 value via expm1, so that small t keeps full precision
        # instead of cancelling against the constant a.
        d = s - s0
        return (
            k.c1 * d
            + k.c2 * math.exp(2 * s0) * math.expm1(2 * d)
            + k.c3 * math.exp(4 * s0) * math.expm1(4 * d)
            - t
        )

    # Each term of the LHS is increasing, so each alone reaching t bounds the root above.
    hi = s0 + t / k.c1
    if k.c3 > 0:
        hi = min(hi, 0.25 * np.logaddexp(4 * s0, math.log(t / k.c3)))
    if k.c2 > 0:
        hi = min(hi, 0.5 * np.logaddexp(2 * s0, math.log(t / k.c2)))
    if excess(hi) <= 0:  # hi is the exact root up to rounding
        return hi
    return brentq(excess, s0, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=200)


def omega_closed_form(
    omega0: object,
    t: object,
    n_classes: int,
    n_per_class: int,
    variant: str = "corrected",
) -> np.ndarray:
    r"""``omega_j(t)`` from the closed form ``c1 log omega + c2 omega^2 + c3 omega^4 = a_j + t``.

    ``a_j`` is the left side at ``omega_j(0)``; the root is found by ``scipy.optimize.brentq``
    in ``log omega`` on a bracket ``[log omega_j(0), s_hi]`` where ``s_hi`` is where one term
    alone reaches ``t`` (the left side is strictly increasing). Shape
    ``shape(t) + shape(omega0)``.

    Args:
        omega0: initial singular values ``> 0``. t: times ``>= 0``.
        variant: ``"published"`` (Prop. 2) or ``"corrected"``.
    """
    k = closed_form_constants(n_classes, n_per_class, variant)
    w0 = _array(omega0, "omega0", positive=True)
    tt = _array(t, "t", nonneg=True)
    out = np.empty(tt.shape + w0.shape)
    logs = np.log(w0).reshape(-1)
    flat = out.reshape(tt.size, w0.size)
    for i, ti in enumerate(tt.reshape(-1)):
        for j, s0 in enumerate(logs):
            flat[i, j] = _solve_one(float(s0), float(ti), k)
    # exp(log(w0)) may differ from w0 in the last bit; t = 0 returns omega0 exactly
    return np.where((tt == 0).reshape(tt.shape + (1,) * w0.ndim), w0, np.exp(out))


def omega_ode(
    omega0: object,
    t: object,
    n_classes: int,
    n_per_class: int,
    variant: str = "corrected",
    *,
    rtol: float = 1e-10,
    atol: float = 1e-12,
) -> np.ndarray:
    r"""``omega_j(t)`` by integrating :func:`snr_rate` with ``scipy.integrate.solve_ivp``.

    DOP853 from ``t = 0``; an independent check of :func:`omega_closed_form`. Shape
    ``shape(t) + shape(omega0)``.
    """
    c, n = _sizes(n_classes, n_per_class)
    variant = check_choice("variant", variant, VARIANTS)
    w0 = _array(omega0, "omega0", positive=True)
    tt = _array(t, "t", nonneg=True)
    grid = np.unique(tt)
    if grid.size == 0:
        return np.empty(tt.shape + w0.shape)
    values = np.tile(w0.reshape(-1), (grid.size, 1))
    if grid[-1] > 0:  # solve_ivp needs a non-empty interval
        values = integrate(
            lambda _t, w: snr_rate(w, c, n, variant), w0.reshape(-1), grid, rtol=rtol, atol=atol
        )
    idx = np.searchsorted(grid, tt.reshape(-1))
    return values[idx].reshape(tt.shape + w0.shape)


def omega_asymptotic(
    t: object, n_classes: int, n_per_class: int, variant: str = "corrected"
) -> np.ndarray:
    r"""Leading-order growth: ``(t/c3)^{1/4} = (4t/N)^{1/4}`` (published, Cor. 1) or
    ``(t/c2)^{1/2} = (2t/(CN))^{1/2}`` (corrected). The ratio ``omega(t)/asymptotic -> 1``."""
    k = closed_form_constants(n_classes, n_per_class, variant)
    tt = _array(t, "t", nonneg=True)
    return (tt / k.c3) ** 0.25 if k.c3 > 0 else (tt / k.c2) ** 0.5


def predicted_nc1_trace(omega: object, n_classes: int, variant: str = "corrected") -> np.ndarray:
    r"""``Tr(Sigma_W Sigma_B^+)`` of the renormalised features from the SNR spectrum (Cor. 2).

    ``"corrected"``: ``C sum_j omega_j^{-2}`` (``Sigma_W = I``, ``Sigma_B = SNR SNR^T / C``);
    ``"published"``: ``sum_j omega_j^{-2}`` as printed (the factor ``C`` dropped). Sums over
    the last axis of ``omega``.
    """
    c = check_int("n_classes", n_classes, minimum=2)
    w = _array(omega, "omega", positive=True)
    total = (w**-2.0).sum(axis=-1)
    return total if check_choice("variant", variant, VARIANTS) == "published" else c * total


# ---------------------------------------------------------------------------------------
# verification against the simulator


@dataclass
class SNRVerification:
    r"""Simulated ``omega_j(t)`` held against both variants' closed forms.

    Relative errors are ``|omega_sim - omega_pred| / omega_pred``, maximised over the
    singular values (``final_*``: at the last record; ``max_*``: over all records).

    Attributes:
        times: record times. omega_simulated, omega_published, omega_corrected: ``(T, C-1)``.
        final_rel_error, max_rel_error: per variant (``{"published": ..., "corrected": ...}``).
        follows: the variant with the smaller ``max_rel_error``; gap_factor: the ratio of
            the larger to the smaller ``max_rel_error``.
        drift: largest sign-invariant drift of the SNR singular vectors (left and right).
        nc1_trace_rel_error: relative error of :func:`predicted_nc1_trace` (from the
            simulated ``omega``) against the simulated ``Tr(Sigma_W Sigma_B^+)``, per variant.
        lemma1_rel_error: largest relative error of Lemma 1's ``L_LS`` (from the simulated
            ``omega``) against the simulated ``L_LS``.
        eq10_residual, eq10_predicted: ``||SNR_t/omega_max(t) - U_0 V_0^T||_F`` at the end,
            simulated and from the corrected closed form (Eq. 10's limit is zero).
        eq11_residual, eq11_predicted: RMS over samples of
            ``X_t/omega_max - (U_0 V_0^T)[:, c]`` at the end (Eq. 11); predicted
            ``sqrt(P + sum_j (omega_j - omega_max)^2 / C) / omega_max``.
        trajectory: the simulator's
            :class:`~collapselab.theory.central_path.RenormalisedTrajectory`.
    """

    times: np.ndarray
    omega_simulated: np.ndarray
    omega_published: np.ndarray
    omega_corrected: np.ndarray
    final_rel_error: dict[str, float]
    max_rel_error: dict[str, float]
    follows: str
    gap_factor: float
    drift: float
    nc1_trace_rel_error: dict[str, float]
    lemma1_rel_error: float
    eq10_residual: float
    eq10_predicted: float
    eq11_residual: float
    eq11_predicted: float
    trajectory: RenormalisedTrajectory

    def summary(self) -> dict[str, float | str]:
        """Flat scalar summary (for reports and run stores)."""
        out: dict[str, float | str] = {"follows": self.follows, "gap_factor": self.gap_factor}
        for v in VARIANTS:
            out[f"final_rel_error_{v}"] = self.final_rel_error[v]
            out[f"max_rel_error_{v}"] = self.max_rel_error[v]
            out[f"nc1_trace_rel_error_{v}"] = self.nc1_trace_rel_error[v]
        out |= {
            "drift": self.drift,
            "lemma1_rel_error": self.lemma1_rel_error,
            "eq10_residual": self.eq10_residual,
            "eq10_predicted": self.eq10_predicted,
            "eq11_residual": self.eq11_residual,
            "eq11_predicted": self.eq11_predicted,
        }
        return out


def verify_snr_dynamics(
    n_classes: int = 4,
    n_per_class: int = 10,
    dim: int = 4,
    *,
    omega0: object | None = None,
    seed: int = 0,
    t_end: float = 4000.0,
    lr: float = 0.5,
    method: str = "literal",
    n_records: int = 21,
    progress: Callable[[int, int], None] | None = None,
) -> SNRVerification:
    r"""Run a renormalised simulator and compare ``omega_j(t)`` with both closed forms.

    The instance is zero-mean and renormalised: with ``omega0=None``, Gaussian class means
    plus unit Gaussian noise (``seed``); otherwise :func:`~collapselab.theory.central_path.
    snr_instance` with those initial singular values (the note's example is ``C=4, N=10,
    P=4``, ``omega0 = (1.026, 0.329, 0.162)``, ``t = 4000``, where it reports
    ``omega(4000) = (13.43, 13.06, 12.85)``). Time is ``t = step * lr`` (``Ave`` loss).

    Args:
        method: ``"literal"`` (App. D.1), ``"projected"`` (Euler steps of Eq. 5) or
            ``"flow"`` (Eq. 5 by ``solve_ivp``; ``lr`` unused).
        lr: step size of the discrete methods; ``t_end / lr`` steps are taken (rounded).
        n_records: number of equally spaced records including ``t = 0``.
        progress: ``progress(steps_done, n_steps)`` of the discrete methods, per record.
    """
    c, n = _sizes(n_classes, n_per_class)
    p = check_int("dim", dim, minimum=1)
    records = check_int("n_records", n_records, minimum=2)
    t_end = check_float("t_end", t_end, minimum=0.0, strict=True)
    method = check_choice("method", method, ("literal", "projected", "flow"))
    if omega0 is None:
        g = torch.Generator().manual_seed(seed)
        y = paper_labels(c, n)
        h = torch.randn(c, p, generator=g, dtype=torch.float64)[y] + torch.randn(
            c * n, p, generator=g, dtype=torch.float64
        )
    else:
        h, y = snr_instance(c, n, p, omega0, seed)

    if method == "flow":
        times = np.linspace(0.0, float(t_end), records)
        traj = renormalised_flow(h, y, times)
    else:
        lr = check_float("lr", lr, minimum=0.0, strict=True)
        n_steps = max(round(t_end / lr), records - 1)
        every = max(n_steps // (records - 1), 1)
        traj = RenormalisedGD(h, y, lr, method=method).run(n_steps, every, progress=progress)

    times = traj.times
    sim = traj.omega
    pred = {v: omega_closed_form(sim[0], times, c, n, v) for v in VARIANTS}
    rel = {v: np.abs(sim - pred[v]) / pred[v] for v in VARIANTS}
    final = {v: float(rel[v][-1].max()) for v in VARIANTS}
    worst = {v: float(rel[v].max()) for v in VARIANTS}
    follows = min(VARIANTS, key=lambda v: worst[v])
    other = max(VARIANTS, key=lambda v: worst[v])
    gap = worst[other] / worst[follows] if worst[follows] > 0 else math.inf

    nc1_sim = traj.metrics["nc1_trace"]
    nc1_rel = {
        v: float(np.max(np.abs(predicted_nc1_trace(sim, c, v) - nc1_sim) / nc1_sim))
        for v in VARIANTS
    }
    lemma1 = np.array([central_path_losses(row, c)["ls_loss"] for row in sim])
    ls = traj.metrics["mse_ls_loss"]
    lemma1_err = float(np.max(np.abs(lemma1 - ls) / ls))

    end_sim, end_pred = sim[-1], pred["corrected"][-1]
    x = traj.features.cpu().to(torch.float64)
    u0, v0 = traj.left_vectors.cpu(), traj.right_vectors.cpu()
    frame = u0 @ v0.T  # (P, C): the limiting ETF direction of Eq. 10
    snr = snr_matrix(class_stats_from_features(x, traj.labels, c, mode="dense"))
    eq10 = float((snr / end_sim.max() - frame).norm())
    eq10_pred = float(np.linalg.norm(end_pred / end_pred.max() - 1.0))
    target = frame.T[traj.labels.cpu()]
    eq11 = float((x / end_sim.max() - target).norm() / math.sqrt(x.shape[0]))
    spread = float(((end_pred - end_pred.max()) ** 2).sum() / c)
    eq11_pred = math.sqrt(p + spread) / float(end_pred.max())

    return SNRVerification(
        times=times,
        omega_simulated=sim,
        omega_published=pred["published"],
        omega_corrected=pred["corrected"],
        final_rel_error=final,
        max_rel_error=worst,
        follows=follows,
        gap_factor=gap,
        drift=float(max(traj.left_drift.max(), traj.right_drift.max())),
        nc1_trace_rel_error=nc1_rel,
        lemma1_rel_error=lemma1_err,
        eq10_residual=eq10,
        eq10_predicted=eq10_pred,
        eq11_residual=eq11,
        eq11_predicted=eq11_pred,
        trajectory=traj,
    )
