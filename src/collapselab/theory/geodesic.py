r"""The straight-line (geodesic) model of progressive feedforward collapse (paper 001, §III-B).

Under the geodesic curve assumption (Assumption 1) every sample travels in a straight line
from its input feature ``h^(0)`` to its last-layer feature ``h^(1)``:
``h^(t) = (1 - t) h^(0) + t h^(1)`` (Eq. 10). This module holds

* the model: :func:`straight_line_model`, the PFC metrics along the line from an empirical
  end point or an *ideal* one (:func:`ideal_endpoint`: class means, or an exact simplex ETF
  built by :func:`simplex_etf`, Definition 1), with Theorem 1's S and the class-mean
  transport cost;
* closed-form predictions: PFC1(t), dPFC1/dt and PFC2(t)
  (:func:`collapselab.metrics.layerwise.pfc1_along_line`,
  :func:`~collapselab.metrics.layerwise.dpfc1_along_line`,
  :func:`~collapselab.metrics.layerwise.pfc2_along_line`), Appendix A's derivative exactly
  as printed (:func:`dpfc1_appendix_a`) and Appendix B's curvature of the PFC2 surrogate at
  the end point (:func:`pfc2_end_curvature`);
* Monte-Carlo checks of the theorems: Theorem 1, PFC1 monotone whenever S >= 0
  (:func:`theorem1_monte_carlo`); Theorem 2, PFC2 monotone only near the end unless the
  transport cost is small (:func:`theorem2_study`);
* :func:`verify_straight_line`, which holds every closed form against direct evaluation
  of the metrics on the interpolated features and reports relative errors.

Features are ``(N, D)`` with one row per sample (the library's layout); labels ``(N,)``.
Class means, ``h_G`` (the mean of the class means) and the metrics follow
:mod:`collapselab.metrics.layerwise` with balanced class weights. Results are float64 numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from collapselab._threads import serial_threads
from collapselab.checks import (
    as_label_array,
    check_choice,
    check_float,
    check_int,
    feature_array,
)
from collapselab.metrics.layerwise import (
    PFC_METRICS,
    class_mean_transport_cost,
    dpfc1_along_line,
    geodesic_curve,
    pfc1_along_line,
    pfc2_along_line,
    theorem1_s,
)

__all__ = [
    "GeodesicVerification",
    "StraightLine",
    "Theorem1MonteCarlo",
    "Theorem2Study",
    "dpfc1_appendix_a",
    "ideal_endpoint",
    "pfc2_end_curvature",
    "simplex_etf",
    "straight_line_model",
    "theorem1_monte_carlo",
    "theorem2_study",
    "verify_straight_line",
]

IdealEndpoint = Literal["empirical", "class_means", "simplex_etf"]
Orientation = Literal["random", "nearest"]
SeedLike = int | np.random.Generator | None


# ---------------------------------------------------------------------------------------
# input handling


def _pair(h0: object, h1: object, labels: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start and end features of one shape and their labels."""
    a = feature_array("h0", h0)
    b = feature_array("h1", h1)
    if a.shape != b.shape:
        raise ValueError(f"h1 has shape {b.shape} but h0 has {a.shape}; expected the same")
    return a, b, as_label_array("labels", labels, a.shape[0], source="h0")


def _rng(seed: SeedLike) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or (isinstance(seed, int | np.integer) and not isinstance(seed, bool)):
        return np.random.default_rng(seed)
    raise TypeError(f"seed must be an int, a numpy Generator or None, got {type(seed).__name__}")


def _class_means(h: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(inverse, means)``: each sample's class index and the ``(C, D)`` class means."""
    classes, inverse = np.unique(y, return_inverse=True)
    sums = np.zeros((classes.size, h.shape[1]))
    np.add.at(sums, inverse, h)
    return inverse, sums / np.bincount(inverse)[:, None]


# ---------------------------------------------------------------------------------------
# the simplex ETF and the ideal end points


def _partial_orthogonal(dim: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-random ``(dim, k)`` matrix with orthonormal columns (QR with sign fix)."""
    q, r = np.linalg.qr(rng.standard_normal((dim, k)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def simplex_etf(n_classes: int, dim: int, seed: SeedLike = 0, scale: float = 1.0) -> np.ndarray:
    r"""A simplex equiangular tight frame (paper 001, Definition 1; note R1.7).

    .. math::
        M = \sqrt{\tfrac{K}{K-1}}\; U \big(I_K - \tfrac{1}{K} 1_K 1_K^\top\big),

    with ``U`` a random ``(d, K)`` partial orthogonal matrix (``U^T U = I_K``, Haar
    distributed, drawn from ``seed``). The columns of ``M`` have unit norm, sum to zero and
    have pairwise cosine ``-1/(K-1)``. ``d >= K`` is Definition 1; for ``d = K - 1`` (the
    smallest space holding a simplex) ``U`` maps the ``(K-1)``-dimensional complement of
    ``1_K`` isometrically onto ``R^d`` instead, which gives the same Gram matrix.

    Args:
        n_classes: ``K >= 2``.
        dim: ``d >= K - 1``.
        seed: int, numpy Generator or None, for ``U``.
        scale: the common norm of the vectors (default 1).

    Returns:
        ``(K, d)``: row k is the k-th ETF vector (``M^T``, the library's class-per-row layout).
    """
    k = check_int("n_classes", n_classes, minimum=2)
    d = check_int("dim", dim, minimum=1)
    if d < k - 1:
        raise ValueError(f"dim must be >= n_classes - 1 = {k - 1} to hold a simplex, got {d}")
    scale = check_float("scale", scale, minimum=0.0, strict=True)
    rng = _rng(seed)
    centring = np.eye(k) - 1.0 / k
    if d >= k:
        u = _partial_orthogonal(d, k, rng)
    else:
        # an orthonormal basis of 1^⊥ (d = K-1 columns), rotated at random inside R^d
        basis = np.linalg.svd(centring)[0][:, : k - 1]
        u = _partial_orthogonal(d, d, rng) @ basis.T
    m = np.sqrt(k / (k - 1)) * u @ centring
    return scale * m.T


def ideal_endpoint(
    h1: object,
    labels: object,
    mode: Literal["class_means", "simplex_etf"] = "class_means",
    seed: SeedLike = 0,
    orientation: Orientation = "random",
) -> np.ndarray:
    r"""The collapsed end point of the transparent model (paper 001, Eq. 10, §III-B).

    ``mode="class_means"``: every ``h_{k,i}^(1)`` becomes its class mean ``h_k^(1)`` (NC1).
    ``mode="simplex_etf"``: additionally the class means become an exact simplex ETF about
    the same global mean, ``h_k = h_G^(1) + s m_k``, with the ETF vectors ``m_k`` of
    :func:`simplex_etf` and ``s`` the root-mean-square norm of the centred class means
    ``h̃_k^(1)`` (so ``Tr Σ_B`` is unchanged). The ETF's orientation is a seeded random
    partial orthogonal ``U`` (``orientation="random"``, Definition 1), or the ETF nearest
    to the centred class means in Frobenius norm (``"nearest"``: orthogonal Procrustes,
    ``U`` the polar factor of ``H̃(1)``).

    Args:
        h1: ``(N, D)`` end features.
        labels: ``(N,)`` integer labels.
        mode: ``"class_means"`` or ``"simplex_etf"``.
        seed: for the random orientation.
        orientation: ``"random"`` or ``"nearest"``.

    Returns:
        ``(N, D)`` float64 end features.
    """
    h = feature_array("h1", h1)
    y = as_label_array("labels", labels, h.shape[0], source="h1")
    check_choice("mode", mode, ("class_means", "simplex_etf"))
    check_choice("orientation", orientation, ("random", "nearest"))
    inverse, means = _class_means(h, y)
    if mode == "class_means":
        return means[inverse]
    k, d = means.shape
    g = means.mean(axis=0)
    centred = means - g
    s = np.sqrt(np.mean(np.sum(centred**2, axis=1)))
    if s == 0:
        raise ValueError("h1 has identical class means; the ETF scale would be 0")
    if orientation == "random":
        etf = simplex_etf(k, d, seed, scale=s)
    else:
        if d < k:
            raise ValueError(f"orientation='nearest' needs D >= K, got D={d}, K={k}")
        a, _, bt = np.linalg.svd(centred.T, full_matrices=False)  # H̃(1) = A Σ B^T, (d, K)
        u = a @ bt  # argmax_U <U P, H̃(1)> over U^T U = I (polar factor)
        etf = s * np.sqrt(k / (k - 1)) * (u @ (np.eye(k) - 1.0 / k)).T
    return (g + etf)[inverse]


# ---------------------------------------------------------------------------------------
# the straight-line model


@dataclass(frozen=True)
class StraightLine:
    """The PFC metrics along the straight line (paper 001, Eq. 10; Fig. 3 blue curve).

    Attributes:
        ts: ``(T,)`` times.
        endpoint: the end-point mode used.
        metrics: ``{key: (T,)}`` PFC metrics of the interpolated features, evaluated
            directly by :mod:`collapselab.metrics.nc` (keys of ``PFC_METRICS``).
        pfc1: ``(T,)`` closed-form PFC1(t) (Appendix A).
        dpfc1_dt: ``(T,)`` closed-form dPFC1/dt.
        pfc2: ``(T,)`` closed-form PFC2(t) (Eq. 11).
        s: Theorem 1's ``S = Σ_k <h̃_k^(0), h̃_k^(1)>`` for the end point used.
        transport_cost: ``||H̃(1) - H̃(0)||_F^2`` for the end point used (Theorem 2).
        h1: ``(N, D)`` the end point used.
    """

    ts: np.ndarray
    endpoint: str
    metrics: dict[str, np.ndarray]
    pfc1: np.ndarray
    dpfc1_dt: np.ndarray
    pfc2: np.ndarray
    s: float
    transport_cost: float
    h1: np.ndarray


def straight_line_model(
    h0: object,
    h1: object,
    labels: object,
    ts: Sequence[float] | np.ndarray,
    endpoint: IdealEndpoint = "empirical",
    metrics: Sequence[str] = PFC_METRICS,
    seed: SeedLike = 0,
    orientation: Orientation = "random",
) -> StraightLine:
    """PFC metrics and closed forms along the line from ``h0`` to an (ideal) end point.

    Args:
        h0: ``(N, D)`` start features (layer 0).
        h1: ``(N, D)`` end features (the last layer).
        labels: ``(N,)`` integer labels.
        ts: times, usually a grid on ``[0, 1]``.
        endpoint: ``"empirical"`` (the actual ``h1``, as in Fig. 3), ``"class_means"``
            (collapsed, Eq. 10) or ``"simplex_etf"`` (collapsed onto an exact ETF); see
            :func:`ideal_endpoint`.
        metrics: catalogue keys among ``PFC_METRICS`` evaluated directly.
        seed, orientation: for ``endpoint="simplex_etf"``.
    """
    a, b, y = _pair(h0, h1, labels)
    check_choice("endpoint", endpoint, ("empirical", "class_means", "simplex_etf"))
    end = b if endpoint == "empirical" else ideal_endpoint(b, y, endpoint, seed, orientation)
    times = np.asarray(ts, dtype=np.float64)
    return StraightLine(
        ts=times,
        endpoint=endpoint,
        metrics=geodesic_curve(a, end, y, times, metrics),
        pfc1=pfc1_along_line(a, end, y, times),
        dpfc1_dt=dpfc1_along_line(a, end, y, times),
        pfc2=pfc2_along_line(a, end, y, times),
        s=theorem1_s(a, end, y),
        transport_cost=class_mean_transport_cost(a, end, y),
        h1=end,
    )


def dpfc1_appendix_a(
    h0: object, h1: object, labels: object, ts: Sequence[float] | np.ndarray
) -> np.ndarray:
    r"""dPFC1/dt exactly as printed in Appendix A (paper 001, proof of Theorem 1).

    .. math::
        \frac{d\,\mathrm{PFC1}}{dt} = -\frac{2(1-t)\, E\|h_{k,i}^{(0)} - h_k^{(0)}\|^2}
            {K\, (E\|\tilde h_k^{(t)}\|^2)^2}
            \Big(t \sum_k \|\tilde h_k^{(1)}\|^2 + (1-t) \sum_k \langle \tilde h_k^{(0)},
            \tilde h_k^{(1)} \rangle\Big),

    with ``E||h̃_k^(t)||^2 = (1/K) Σ_k ||(1-t) h̃_k^(0) + t h̃_k^(1)||^2``. The formula assumes
    a collapsed end point (Eq. 10), so ``h1`` enters only through its class means.
    Negative on ``[0, 1)`` whenever ``S >= 0`` (Theorem 1).
    """
    a, b, y = _pair(h0, h1, labels)
    inverse, m0 = _class_means(a, y)
    _, m1 = _class_means(b, y)
    c0, c1 = m0 - m0.mean(axis=0), m1 - m1.mean(axis=0)
    k = m0.shape[0]
    within0 = np.mean(np.sum((a - m0[inverse]) ** 2, axis=1))
    s = float(np.sum(c0 * c1))
    end2 = float(np.sum(c1 * c1))
    t = np.asarray(ts, dtype=np.float64)
    between = ((1 - t) ** 2 * np.sum(c0 * c0) + 2 * t * (1 - t) * s + t**2 * end2) / k
    return -2 * (1 - t) * within0 / (k * between**2) * (t * end2 + (1 - t) * s)


def _centred_means_pair(h0: object, h1: object, labels: object) -> tuple[np.ndarray, np.ndarray]:
    a, b, y = _pair(h0, h1, labels)
    _, m0 = _class_means(a, y)
    _, m1 = _class_means(b, y)
    return (m0 - m0.mean(axis=0)).T, (m1 - m1.mean(axis=0)).T  # H̃(0), H̃(1): (D, K)


def pfc2_end_curvature(h0: object, h1: object, labels: object) -> float:
    r"""Appendix B's second derivative of the PFC2 surrogate at the end point (Theorem 2).

    With ``G(t) = H̃(t)^T H̃(t)``, ``PFC2~(t) = ½||G/||G||_F - E||_F^2 = f(t)/g(t)``,
    ``f = ½||G - ||G||_F E||_F^2`` and ``g = ||G||_F^2``. If ``H̃(1)`` is an exact simplex
    ETF then ``f(1) = f'(1) = 0`` and

    .. math::
        \frac{d^2 \widetilde{\mathrm{PFC2}}}{dt^2}\Big|_{t=1} = \frac{f''(1)}{g(1)}
          = \frac{\|D(1)\|_F^2}{g(1)},\qquad
        D(1) = G'(1) - \frac{\langle G(1), G'(1)\rangle}{\|G(1)\|_F} E,

    ``G'(1) = Δ^T H̃(1) + H̃(1)^T Δ``, ``Δ = H̃(1) - H̃(0)``. The value is > 0 unless the
    motion only rescales the ETF, so PFC2 decreases on some ``(1 - δ, 1]``: the local
    statement Appendix B proves. Meaningful only when the end point is an exact ETF (use
    :func:`ideal_endpoint` with ``mode="simplex_etf"``).
    """
    c0, c1 = _centred_means_pair(h0, h1, labels)
    k = c0.shape[1]
    if k < 2:
        raise ValueError(f"PFC2 needs at least 2 classes, got {k}")
    delta = c1 - c0
    g1 = c1.T @ c1
    dg = delta.T @ c1 + c1.T @ delta
    norm = np.linalg.norm(g1)
    if norm == 0:
        raise ValueError("the end point has identical class means (G(1) = 0)")
    etf = (np.eye(k) - 1.0 / k) / np.sqrt(k - 1)
    d1 = dg - (np.sum(g1 * dg) / norm) * etf
    return float(np.sum(d1 * d1) / norm**2)


# ---------------------------------------------------------------------------------------
# Monte-Carlo checks of Theorems 1 and 2


def _nonincreasing_tail(values: np.ndarray, tol: float) -> int:
    """Index of the first grid point from which ``values`` never increases (by > tol)."""
    rises = np.flatnonzero(np.diff(values) > tol)
    return 0 if rises.size == 0 else int(rises[-1] + 1)


@dataclass(frozen=True)
class Theorem1MonteCarlo:
    """Theorem 1 on random instances (paper 001, §III-B; note §3.2).

    Attributes:
        s: ``(n_trials,)`` Theorem 1's S of each instance.
        monotone: ``(n_trials,)`` whether PFC1 is non-increasing on the grid.
        max_rise: ``(n_trials,)`` the largest increase of PFC1 between grid neighbours,
            relative to PFC1(0) (<= 0 for a monotone curve).
        n_s_nonnegative: instances with ``S >= 0``.
        n_monotone_given_s_nonnegative: of those, how many are monotone (Theorem 1: all).
        fraction_monotone_given_s_nonnegative: the ratio (NaN when there are none).
        n_s_negative: instances with ``S < 0``.
        fraction_nonmonotone_given_s_negative: the fraction of those that are not
            monotone (NaN when there are none).
        counterexample: ``(h0, h1, labels)`` of the first instance with ``S < 0`` that is
            not monotone, or None.
        counterexample_curve: its PFC1 on ``ts``, or None.
        ts: the grid.
    """

    s: np.ndarray
    monotone: np.ndarray
    max_rise: np.ndarray
    n_s_nonnegative: int
    n_monotone_given_s_nonnegative: int
    fraction_monotone_given_s_nonnegative: float
    n_s_negative: int
    fraction_nonmonotone_given_s_negative: float
    counterexample: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    counterexample_curve: np.ndarray | None
    ts: np.ndarray


def _random_start(
    rng: np.random.Generator, means: np.ndarray, n_per_class: int, noise: float
) -> tuple[np.ndarray, np.ndarray]:
    k, d = means.shape
    y = np.repeat(np.arange(k), n_per_class)
    return means[y] + noise * rng.standard_normal((y.size, d)), y


def theorem1_monte_carlo(
    n_trials: int = 1000,
    n_classes: int = 5,
    dim: int = 20,
    n_per_class: int = 10,
    n_grid: int = 201,
    noise: float = 1.0,
    seed: SeedLike = 0,
    method: Literal["analytic", "direct"] = "analytic",
    tol: float = 1e-12,
) -> Theorem1MonteCarlo:
    """Monte-Carlo check of Theorem 1: PFC1 along line (10) is monotone whenever S >= 0.

    Each instance draws start class means ``μ_k ~ N(0, I_d)`` and features
    ``h^(0) = μ_k + noise · N(0, I_d)``, and a collapsed end point on a simplex ETF with a
    random orientation and a random scale (log-uniform in ``[0.1, 10]``) about a random
    centre, so that S takes either sign. PFC1 is evaluated on ``n_grid`` points of
    ``[0, 1]`` in closed form (``method="analytic"``) or directly from the interpolated
    features (``"direct"``, slower). A curve counts as monotone when no step rises by more
    than ``tol · PFC1(0)``. Since ``dPFC1/dt(0)`` has the sign of ``-S``, an instance with
    ``S < 0`` always rises at first: expect the fraction of non-monotone curves among
    ``S < 0`` to be 1 up to the grid resolution.
    """
    n_trials = check_int("n_trials", n_trials, minimum=1)
    k = check_int("n_classes", n_classes, minimum=2)
    d = check_int("dim", dim, minimum=k - 1)
    n_grid = check_int("n_grid", n_grid, minimum=2)
    check_choice("method", method, ("analytic", "direct"))
    rng = _rng(seed)
    ts = np.linspace(0.0, 1.0, n_grid)
    s = np.empty(n_trials)
    monotone = np.empty(n_trials, dtype=bool)
    rise = np.empty(n_trials)
    example = curve_example = None
    with serial_threads():
        for j in range(n_trials):
            h0, y = _random_start(rng, rng.standard_normal((k, d)), n_per_class, noise)
            scale = 10.0 ** rng.uniform(-1, 1)
            end_means = rng.standard_normal(d) + simplex_etf(k, d, rng, scale)
            h1 = end_means[y]
            s[j] = theorem1_s(h0, h1, y)
            if method == "analytic":
                curve = pfc1_along_line(h0, h1, y, ts)
            else:
                curve = geodesic_curve(h0, h1, y, ts, ["nc1_trace_ratio"])["nc1_trace_ratio"]
            rise[j] = np.max(np.diff(curve)) / curve[0]
            monotone[j] = rise[j] <= tol
            if example is None and s[j] < 0 and not monotone[j]:
                example, curve_example = (h0, h1, y), curve
    nonneg = s >= 0
    n_nonneg, n_neg = int(nonneg.sum()), int((~nonneg).sum())
    return Theorem1MonteCarlo(
        s=s,
        monotone=monotone,
        max_rise=rise,
        n_s_nonnegative=n_nonneg,
        n_monotone_given_s_nonnegative=int(monotone[nonneg].sum()),
        fraction_monotone_given_s_nonnegative=(
            float(monotone[nonneg].mean()) if n_nonneg else float("nan")
        ),
        n_s_negative=n_neg,
        fraction_nonmonotone_given_s_negative=(
            float((~monotone[~nonneg]).mean()) if n_neg else float("nan")
        ),
        counterexample=example,
        counterexample_curve=curve_example,
        ts=ts,
    )


@dataclass(frozen=True)
class Theorem2Study:
    """Theorem 2 on random instances at several distances from the end (note §3.3).

    Attributes:
        scales: ``(S,)`` perturbation sizes ε of the start class means around the end ETF.
        transport_cost: ``(S, n_trials)`` ``||H̃(1) - H̃(0)||_F^2`` per instance.
        monotone: ``(S, n_trials)`` PFC2 non-increasing on the whole grid of ``[0, 1]``.
        monotone_interval: ``(S, n_trials)`` the length δ of the longest final interval
            ``[1 - δ, 1]`` of the grid on which PFC2 is non-increasing (1: monotone).
        fraction_monotone: ``(S,)`` fraction of monotone instances per scale.
        min_monotone_interval: ``(S,)`` smallest δ per scale (> 0: the local statement).
        curvature: ``(S, n_trials)`` Appendix B's ``d²PFC2~/dt²`` at ``t = 1``
            (:func:`pfc2_end_curvature`, > 0).
        ts: the grid.
    """

    scales: np.ndarray
    transport_cost: np.ndarray
    monotone: np.ndarray
    monotone_interval: np.ndarray
    fraction_monotone: np.ndarray
    min_monotone_interval: np.ndarray
    curvature: np.ndarray
    ts: np.ndarray


def theorem2_study(
    scales: Sequence[float] = (0.1, 0.3, 1.0, 3.0),
    n_trials: int = 200,
    n_classes: int = 5,
    dim: int = 20,
    n_grid: int = 401,
    seed: SeedLike = 0,
    tol: float = 1e-12,
) -> Theorem2Study:
    """Monte-Carlo study of Theorem 2: PFC2 is monotone near the end, globally only if close.

    The end point is a unit simplex ETF (random orientation) and the start class means are
    ``m_k + ε z_k`` with ``z_k ~ N(0, I_d / d)`` (perturbations of norm about ε), one
    sample per class (PFC2 depends on the class means only). Small ε means a small class-mean
    transport cost; ε of order 1 or more is a start far from the end. PFC2 is evaluated in
    closed form (:func:`~collapselab.metrics.layerwise.pfc2_along_line`) on ``n_grid``
    points; a rise of more than ``tol`` (PFC2 lies in [0, 2]) counts as non-monotone.
    """
    eps = np.asarray(scales, dtype=np.float64)
    if eps.ndim != 1 or eps.size == 0 or not np.all(np.isfinite(eps)) or np.any(eps < 0):
        raise ValueError(f"scales must be a non-empty 1-D sequence of numbers >= 0, got {scales}")
    n_trials = check_int("n_trials", n_trials, minimum=1)
    k = check_int("n_classes", n_classes, minimum=2)
    d = check_int("dim", dim, minimum=k - 1)
    n_grid = check_int("n_grid", n_grid, minimum=2)
    rng = _rng(seed)
    ts = np.linspace(0.0, 1.0, n_grid)
    y = np.arange(k)
    shape = (eps.size, n_trials)
    cost, mono, delta, curv = (
        np.empty(shape),
        np.empty(shape, bool),
        np.empty(shape),
        np.empty(shape),
    )
    with serial_threads():
        for i, e in enumerate(eps):
            for j in range(n_trials):
                h1 = simplex_etf(k, d, rng)
                h0 = h1 + e * rng.standard_normal((k, d)) / np.sqrt(d)
                curve = pfc2_along_line(h0, h1, y, ts)
                start = _nonincreasing_tail(curve, tol)
                cost[i, j] = class_mean_transport_cost(h0, h1, y)
                mono[i, j] = start == 0
                delta[i, j] = 1.0 - ts[start]
                curv[i, j] = pfc2_end_curvature(h0, h1, y)
    return Theorem2Study(
        scales=eps,
        transport_cost=cost,
        monotone=mono,
        monotone_interval=delta,
        fraction_monotone=mono.mean(axis=1),
        min_monotone_interval=delta.min(axis=1),
        curvature=curv,
        ts=ts,
    )


# ---------------------------------------------------------------------------------------
# verification


@dataclass(frozen=True)
class GeodesicVerification:
    """Relative errors of the straight-line closed forms against direct evaluation.

    Each entry is ``max|prediction - reference| / max|reference|`` over the grid.

    Attributes:
        pfc1: closed-form PFC1(t) vs ``nc1_trace_ratio`` of the interpolated features.
        dpfc1_dt: closed-form dPFC1/dt vs central finite differences of PFC1(t).
        appendix_a: Appendix A's printed derivative vs the closed form (collapsed end).
        pfc2: closed-form PFC2(t) vs ``nc2_etf_distance`` of the interpolated features.
        end_curvature: Appendix B's curvature at ``t = 1`` vs a finite-difference second
            derivative of the surrogate; NaN unless the end point is an exact ETF.
        s: Theorem 1's S of the instance.
        monotone_pfc1: whether the closed-form PFC1 is non-increasing on the grid.
    """

    pfc1: float
    dpfc1_dt: float
    appendix_a: float
    pfc2: float
    end_curvature: float
    s: float
    monotone_pfc1: bool

    @property
    def max_error(self) -> float:
        """The largest of the finite relative errors."""
        errs = [self.pfc1, self.dpfc1_dt, self.appendix_a, self.pfc2, self.end_curvature]
        return float(np.nanmax(errs))


def _rel(pred: np.ndarray, ref: np.ndarray) -> float:
    scale = np.max(np.abs(ref))
    return float(np.max(np.abs(pred - ref)) / (scale if scale > 0 else 1.0))


def verify_straight_line(
    h0: object,
    h1: object,
    labels: object,
    endpoint: IdealEndpoint = "simplex_etf",
    n_grid: int = 41,
    step: float = 1e-5,
    seed: SeedLike = 0,
) -> GeodesicVerification:
    """Hold the closed forms of the straight-line model against a concrete instance.

    Args:
        h0, h1, labels: the instance (``(N, D)``, ``(N, D)``, ``(N,)``).
        endpoint: end-point mode (see :func:`straight_line_model`); Appendix A's formula
            is always checked on the collapsed (class-mean) version of the end point.
        n_grid: grid points on ``[0, 1]`` (the derivative check uses the interior).
        step: finite-difference step.
        seed: for the ETF orientation.
    """
    with serial_threads():
        return _verify_line(h0, h1, labels, endpoint, n_grid, step, seed)


def _verify_line(
    h0: object,
    h1: object,
    labels: object,
    endpoint: IdealEndpoint,
    n_grid: int,
    step: float,
    seed: SeedLike,
) -> GeodesicVerification:
    line = straight_line_model(
        h0,
        h1,
        labels,
        np.linspace(0, 1, check_int("n_grid", n_grid, minimum=3)),
        endpoint,
        seed=seed,
    )
    a, end, ts = feature_array("h0", h0), line.h1, line.ts
    y = as_label_array("labels", labels, end.shape[0], source="h1")
    inner = ts[1:-1]
    fd = pfc1_along_line(a, end, y, inner + step) - pfc1_along_line(a, end, y, inner - step)
    collapsed = ideal_endpoint(end, y, "class_means")
    appendix = dpfc1_appendix_a(a, collapsed, y, ts)
    closed = dpfc1_along_line(a, collapsed, y, ts)
    curvature = float("nan")
    if line.pfc2[-1] < 1e-9:

        def surrogate(t: np.ndarray) -> np.ndarray:
            return 0.5 * pfc2_along_line(a, end, y, t) ** 2

        h = 1e-3
        fd2 = (
            surrogate(np.array([1 + h]))
            - 2 * surrogate(np.array([1.0]))
            + surrogate(np.array([1 - h]))
        ) / h**2
        predicted = pfc2_end_curvature(a, end, y)
        curvature = abs(float(fd2[0]) - predicted) / predicted
    return GeodesicVerification(
        pfc1=_rel(line.pfc1, line.metrics["nc1_trace_ratio"]),
        dpfc1_dt=_rel(line.dpfc1_dt[1:-1], fd / (2 * step)),
        appendix_a=_rel(appendix, closed),
        pfc2=_rel(line.pfc2, line.metrics["nc2_etf_distance"]),
        end_curvature=curvature,
        s=line.s,
        monotone_pfc1=bool(np.all(np.diff(line.pfc1) <= 1e-12 * line.pfc1[0])),
    )
