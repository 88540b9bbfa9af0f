"""What the theory modules' dynamics share: :func:`integrate`, a gradient flow
``dy/dt = rate(t, y)`` from ``t = 0`` (:mod:`~collapselab.theory.ufm` Eq. 21,
:mod:`~collapselab.theory.central_path`, :mod:`~collapselab.theory.snr_dynamics`), and
:func:`diverged`, the error of a gradient descent whose iterates overflow
(:mod:`~collapselab.theory.dlufm`, :mod:`~collapselab.theory.ufm_mse`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["diverged", "integrate"]


def integrate(
    rate: Callable[[float, np.ndarray], np.ndarray],
    start: np.ndarray,
    times: np.ndarray,
    *,
    rtol: float,
    atol: float,
    method: str = "DOP853",
) -> np.ndarray:
    """The states ``y(t)`` at ``times`` of ``dy/dt = rate(t, y)``, ``y(0) = start`` (flat),
    by :func:`scipy.integrate.solve_ivp` on ``[0, times[-1]]``.

    Args:
        times: non-decreasing, ``>= 0``, the last ``> 0`` (the solver needs an interval).

    Returns:
        ``(len(times), start.size)``: a row per time. Raises ``RuntimeError`` when the solver
        fails.
    """
    # scipy.integrate takes a noticeable time to import: only when a flow is integrated
    from scipy.integrate import solve_ivp

    sol = solve_ivp(
        rate,
        (0.0, float(times[-1])),
        start,
        method=method,
        t_eval=times,
        rtol=rtol,
        atol=atol,
    )
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    return sol.y.T


def diverged(step: int, lr: float) -> FloatingPointError:
    """The error to raise (``from`` numpy's overflow) when gradient descent with step ``lr``
    overflows at ``step``."""
    return FloatingPointError(f"gradient descent diverged (overflow) at step {step}; lower lr={lr}")
