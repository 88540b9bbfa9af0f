r"""The straight-line (geodesic) model of progressive feedforward collapse (paper 001, §III-B).

Under the geodesic curve assumption (Assumption 1) every sample travels in a straight line
from its input feature ``h^(0)`` to its last-layer feature ``h^(1)``:
``h^(t) = (1 - t) h^(0) + t h^(1)`` (Eq. 10). This module holds

* the model: :func:`straight_line_model`, the PFC metrics along the line from an empirical
  end point or an *ideal* one (:func:`ideal_endpoint`: class means, or an exact simplex ETF
  built by :func:`simplex_etf`, Definition 1), with Theorem 1's S and the class-mean
  transport cost;
* the line itself (:func:`interpolate`) and the PFC metrics along it evaluated directly
  (:func:`geodesic_curve`), Theorem 1's S (:func:`theorem1_s`) and the class-mean transport
  cost (:func:`class_mean_transport_cost`);
* closed-form predictions: PFC1(t), dPFC1/dt and PFC2(t) (:func:`pfc1_along_line`,
  :func:`dpfc1_along_line`, :func:`pfc2_along_line`), Appendix A's derivative exactly
  as printed (:func:`dpfc1_appendix_a`) and Appendix B's curvature of the PFC2 surrogate at
  the end point (:func:`pfc2_end_curvature`);
* Monte-Carlo checks of the theorems: Theorem 1, PFC1 monotone whenever S >= 0
  (:func:`theorem1_monte_carlo`); Theorem 2, PFC2 monotone only near the end unless the
  transport cost is small (:func:`theorem2_study`);
* :func:`verify_straight_line`, which holds every closed form against direct evaluation
  of the metrics on the interpolated features and reports relative errors;
* :func:`geodesic_prediction`: a network's per-layer PFC metrics against the line's at the
  layers' relative positions (Fig. 3).

Features are ``(N, D)`` with one row per sample (the library's layout); labels ``(N,)``.
Class means, ``h_G`` and the class weights follow :mod:`collapselab.metrics.nc`
(``weighting``: balanced for equal class counts, else sample-weighted with one warning per
call); Theorem 1's S and the transport cost use the mean of the class means. Results are
float64 numpy (:func:`interpolate` gives a float64 tensor).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.checks import (
    as_label_array,
    as_layers,
    as_matrix,
    as_series,
    check_choice,
    check_float,
    check_int,
    feature_array,
    resolve_for_labels,
    to_f64,
)
from collapselab.metrics.layerwise import relative_positions
from collapselab.metrics.nc import PFC_KEYS, check_pfc_keys, pfc_values

__all__ = [
    "GeodesicPrediction",
    "GeodesicVerification",
    "StraightLine",
    "Theorem1MonteCarlo",
    "Theorem2Study",
    "class_mean_transport_cost",
    "dpfc1_along_line",
    "dpfc1_appendix_a",
    "geodesic_curve",
    "geodesic_prediction",
    "ideal_endpoint",
    "interpolate",
    "pfc1_along_line",
    "pfc2_along_line",
    "pfc2_end_curvature",
    "simplex_etf",
    "straight_line_model",
    "theorem1_monte_carlo",
    "theorem1_s",
    "theorem2_study",
    "verify_straight_line",
]

Endpoint = Literal["empirical", "class_means"]
IdealEndpoint = Literal["empirical", "class_means", "simplex_etf"]
Weighting = Literal["auto", "balanced", "sample"]
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
# closed forms along the line


def _line_pair(
    h0: object, h1: object, labels: object, endpoint: str = "empirical"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Start, end (after the ``endpoint`` rule: ``"empirical"`` or ``"class_means"``),
    labels, and each sample's index among the classes present."""
    a, b, y = _pair(h0, h1, labels)
    if y.size == 0:
        raise ValueError("labels is empty; need at least one sample")
    inverse, means = _class_means(b, y)
    if check_choice("endpoint", endpoint, ("empirical", "class_means")) == "class_means":
        b = means[inverse]
    return a, b, y, inverse


def _centred(h: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Class means centred on the mean of the class means, ``(K, D)``."""
    _, m = _class_means(h, y)
    return m - m.mean(axis=0)


def theorem1_s(h0: object, h1: object, labels: object) -> float:
    """Theorem 1's condition ``S = sum_k <h̃_k^(0), h̃_k^(1)>`` (paper 001, §III-B, note §2.8).

    ``h̃_k = h_k - h_G`` are the centred class means (``h_G`` the mean of the class means) of
    the start (layer 0) and end (last layer) features. PFC1 decreases monotonically along
    the straight line when ``S >= 0``.
    """
    a, b, y, _ = _line_pair(h0, h1, labels)
    return float(np.sum(_centred(a, y) * _centred(b, y)))


def class_mean_transport_cost(h0: object, h1: object, labels: object) -> float:
    """Class-mean transport cost ``||H̃(1) - H̃(0)||_F^2 = sum_k ||h̃_k^(1) - h̃_k^(0)||^2``.

    Theorem 2 (PFC2 monotone) needs it small (paper 001, §III-B, note §2.8).
    """
    a, b, y, _ = _line_pair(h0, h1, labels)
    diff = _centred(b, y) - _centred(a, y)
    return float(np.sum(diff * diff))


def interpolate(h0: object, h1: object, t: object) -> torch.Tensor:
    """The straight line ``H(t) = (1 - t) H_0 + t H_1`` (paper 001, Eq. 10, R2).

    Args:
        h0: ``(N, D)`` start features.
        h1: ``(N, D)`` end features.
        t: a number, giving ``(N, D)``, or a 1-D sequence of T times (list, array or
            tensor), giving the stacked ``(T, N, D)`` points of the line.

    Returns:
        A float64 tensor on the device of ``h0``.
    """
    a = as_matrix("h0", h0)
    b = as_matrix("h1", h1, a.device)
    if b.shape != a.shape:
        raise ValueError(f"h1 has shape {tuple(b.shape)} but h0 has {tuple(a.shape)}")
    if isinstance(t, torch.Tensor | np.ndarray | list | tuple) and np.ndim(t) > 0:
        times = torch.from_numpy(_ts(t)).to(a.device)[:, None, None]
        return (1.0 - times) * a + times * b
    if isinstance(t, torch.Tensor | np.ndarray):
        t = float(t)
    t = check_float("t", t)
    return (1.0 - t) * a + t * b


def _ts(ts: object) -> np.ndarray:
    arr = as_series("ts", ts)
    if arr.size == 0:
        raise ValueError("ts must hold at least one time")
    return arr


def _pfc_at(
    points: Iterable[np.ndarray], y: np.ndarray, keys: tuple[str, ...], weighting: str
) -> dict[str, np.ndarray]:
    """PFC metrics of each feature matrix in ``points`` (weighting resolved, no warning)."""
    labels = torch.from_numpy(y)
    rows = [
        pfc_values(torch.from_numpy(p), labels, keys, weighting=weighting, warn=False)
        for p in points
    ]
    return {k: np.array([row[k] for row in rows], dtype=np.float64) for k in keys}


def _points(a: np.ndarray, b: np.ndarray, times: np.ndarray) -> Iterator[np.ndarray]:
    """``H(t) = (1 - t) a + t b`` for each t, one at a time (never all T x N x D at once)."""
    for t in times:
        yield (1.0 - t) * a + t * b


def _resolved(y: np.ndarray, weighting: str, stacklevel: int = 4) -> str:
    """``weighting`` resolved from the labels, with the call's one imbalance warning."""
    return resolve_for_labels(torch.from_numpy(y), weighting, stacklevel=stacklevel)


def geodesic_curve(
    h0: object,
    h1: object,
    labels: object,
    ts: object,
    metrics: Sequence[str] = PFC_KEYS,
    endpoint: Endpoint = "empirical",
    weighting: Weighting = "auto",
) -> dict[str, np.ndarray]:
    """PFC metrics along the straight line between two layers (paper 001, §IV-A, Fig. 3 blue).

    Evaluates each metric on ``H(t) = (1 - t) H_0 + t H_1`` at every t (usually in [0, 1])
    directly (:func:`collapselab.metrics.nc.pfc_values`).

    Args:
        h0: ``(N, D)`` start features (layer 0).
        h1: ``(N, D)`` end features (the last layer).
        labels: ``(N,)`` integer labels.
        ts: times at which to evaluate.
        metrics: catalogue keys among ``PFC_KEYS``.
        endpoint: ``"empirical"``, the actual end features; ``"class_means"``, every end
            feature replaced by its class mean (the collapsed end point of Eq. 10).
        weighting: class weights, as in :func:`collapselab.metrics.layerwise.per_layer_pfc`.

    Returns:
        ``{key: (len(ts),) array}``.
    """
    keys = check_pfc_keys(metrics)
    a, b, y, _ = _line_pair(h0, h1, labels, endpoint)
    times = _ts(ts)
    return _pfc_at(_points(a, b, times), y, keys, _resolved(y, weighting))


def _class_weights(inverse: np.ndarray, weighting: str) -> tuple[np.ndarray, np.ndarray]:
    """Class weights ``π_k`` and the per-sample weights ``π_k / n_k`` of ``Σ_W = Σ_k π_k Cov_k``
    (``weighting`` already resolved; ``inverse`` indexes the classes present)."""
    counts = np.bincount(inverse).astype(np.float64)
    k = counts.shape[0]
    pi = np.full(k, 1.0 / k) if weighting == "balanced" else counts / counts.sum()
    return pi, (pi / counts)[inverse]


def _line_moments(
    h0: object, h1: object, labels: object, endpoint: str, weighting: str
) -> tuple[np.ndarray, np.ndarray]:
    """The coefficients ``(w_00, w_01, w_11)`` and ``(b_00, b_01, b_11)`` of PFC1 on the line."""
    a, b, y, inverse = _line_pair(h0, h1, labels, endpoint)
    _, ma = _class_means(a, y)
    _, mb = _class_means(b, y)
    ea, eb = a - ma[inverse], b - mb[inverse]
    pi, sample_w = _class_weights(inverse, _resolved(y, weighting, stacklevel=5))
    ca, cb = ma - pi @ ma, mb - pi @ mb
    w = [float(sample_w @ (x * z).sum(1)) for x, z in ((ea, ea), (ea, eb), (eb, eb))]
    bb = [float(pi @ (x * z).sum(1)) for x, z in ((ca, ca), (ca, cb), (cb, cb))]
    return np.asarray(w), np.asarray(bb)


def _bernstein(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[(1-t)^2, 2t(1-t), t^2]`` and its derivative in t, each ``(3, T)``."""
    basis = np.stack([(1 - t) ** 2, 2 * t * (1 - t), t**2])
    slope = np.stack([-2 * (1 - t), 2 - 4 * t, 2 * t])
    return basis, slope


def pfc1_along_line(
    h0: object,
    h1: object,
    labels: object,
    ts: object,
    endpoint: Endpoint = "empirical",
    weighting: Weighting = "auto",
) -> np.ndarray:
    """PFC1(t) on the straight line in closed form (paper 001, Appendix A, R2).

    Within-class deviations and centred class means are affine in t, so

    .. math::
        \\mathrm{PFC1}(t) = \\frac{(1-t)^2 w_{00} + 2t(1-t) w_{01} + t^2 w_{11}}
                               {(1-t)^2 b_{00} + 2t(1-t) b_{01} + t^2 b_{11}},

    ``w_{ab} = sum_k (π_k/n_k) sum_{i in k} <h_i^(a) - h_k^(a), h_i^(b) - h_k^(b)>``,
    ``b_{ab} = sum_k π_k <h̃_k^(a), h̃_k^(b)>`` with class weights ``π_k = 1/K``
    (``weighting="balanced"``) or ``n_k/N`` (``"sample"``, centring on the weighted mean),
    the conventions of :func:`collapselab.metrics.nc.nc1_trace_ratio`; for balanced
    classes ``w_{ab}`` is the plain average over the N samples. With a collapsed end point
    (``endpoint="class_means"``) ``w_{01} = w_{11} = 0`` and the numerator is Appendix A's
    ``(1-t)^2 E||h^(0) - h_k^(0)||^2``; for balanced weights ``K b_{01}`` is Theorem 1's S.

    Returns:
        ``(len(ts),)`` values; ``inf`` where Tr Σ_B(t) = 0 < Tr Σ_W(t), NaN where both are 0.
    """
    w, bb = _line_moments(h0, h1, labels, endpoint, weighting)
    basis, _ = _bernstein(_ts(ts))
    num, den = w @ basis, bb @ basis
    out = np.full(num.shape, np.nan)
    pos = den > 0
    out[pos] = num[pos] / den[pos]
    out[(~pos) & (num > 0)] = np.inf
    return out


def dpfc1_along_line(
    h0: object,
    h1: object,
    labels: object,
    ts: object,
    endpoint: Endpoint = "empirical",
    weighting: Weighting = "auto",
) -> np.ndarray:
    """dPFC1/dt on the straight line in closed form (paper 001, Appendix A, R2).

    The quotient rule on the quadratics of :func:`pfc1_along_line`,
    ``PFC1' = (N' D - N D') / D^2``. For a collapsed end point (``endpoint="class_means"``)
    and balanced classes it equals Appendix A's

    .. math::
        -\\frac{2(1-t)\\,E\\|h_{k,i}^{(0)} - h_k^{(0)}\\|^2}{K\\,(E\\|\\tilde h_k^{(t)}\\|^2)^2}
        \\Big(t \\sum_k \\|\\tilde h_k^{(1)}\\|^2 + (1-t) S\\Big)

    (implemented separately, as printed, in :func:`dpfc1_appendix_a`).
    This function also covers a non-collapsed (empirical) end point and class weights.

    Returns:
        ``(len(ts),)`` values; NaN where Tr Σ_B(t) = 0.
    """
    w, bb = _line_moments(h0, h1, labels, endpoint, weighting)
    basis, slope = _bernstein(_ts(ts))
    num, den = w @ basis, bb @ basis
    dnum, dden = w @ slope, bb @ slope
    out = np.full(num.shape, np.nan)
    pos = den > 0
    out[pos] = (dnum[pos] * den[pos] - num[pos] * dden[pos]) / den[pos] ** 2
    return out


def pfc2_along_line(
    h0: object,
    h1: object,
    labels: object,
    ts: object,
    endpoint: Endpoint = "empirical",
    weighting: Weighting = "auto",
) -> np.ndarray:
    """PFC2(t) on the straight line, vectorised over t (paper 001, Eq. 11, Appendix B).

    The centred class means move on the line ``H̃(t) = (1-t) H̃(0) + t H̃(1)`` (Eq. 11),
    which lies in the span of the 2K columns of ``H̃(0)`` and ``H̃(1)``; the line is
    evaluated in coordinates of that span (never in D dimensions), and
    ``PFC2(t) = || G(t)/||G(t)||_F - E ||_F`` with ``G(t) = H̃(t)^T H̃(t)`` and
    ``E = (I_K - 11^T/K)/sqrt(K-1)``. Equal to
    :func:`collapselab.metrics.nc.nc2_etf_distance` of the interpolated features (the
    global mean follows ``weighting``), without forming the features.

    Returns:
        ``(len(ts),)`` values; NaN where all centred means vanish (``G(t) = 0`` up to
        rounding: ``||G(t)||_F <= 1e-24 max(||H̃(0)||_F^2, ||H̃(1)||_F^2)``).
    """
    a, b, y, inverse = _line_pair(h0, h1, labels, endpoint)
    _, ma = _class_means(a, y)
    _, mb = _class_means(b, y)
    pi, _ = _class_weights(inverse, _resolved(y, weighting))
    ca, cb = ma - pi @ ma, mb - pi @ mb
    k = ca.shape[0]
    if k < 2:
        raise ValueError(f"PFC2 needs at least 2 classes, got {k}")
    # Coordinates of both mean sets in an orthonormal basis of their joint span (at most
    # 2K dimensions): interpolating there keeps the rounding relative to H̃(t) itself, which
    # a combination of the Gram blocks G_ab would not near a zero crossing.
    r = np.linalg.qr(np.concatenate([ca, cb]).T, mode="r")
    pa, pb = r[:, :k].T, r[:, k:].T
    t = _ts(ts)[:, None, None]
    centred = (1 - t) * pa + t * pb  # (T, K, 2K)
    gram = centred @ np.swapaxes(centred, 1, 2)
    norms = np.linalg.norm(gram, axis=(1, 2))
    etf = (np.eye(k) - 1.0 / k) / np.sqrt(k - 1)
    out = np.full(norms.shape, np.nan)
    scale = max(np.sum(pa * pa), np.sum(pb * pb))
    pos = norms > 1e-24 * scale  # zero up to rounding: the means cross at one point
    out[pos] = np.linalg.norm(gram[pos] / norms[pos, None, None] - etf, axis=(1, 2))
    return out


@dataclass(frozen=True)
class GeodesicPrediction:
    """Observed per-layer PFC metrics against the straight-line prediction (Fig. 3).

    Attributes:
        positions: ``(L+1,)`` relative positions of the layers.
        observed: ``{key: (L+1,)}`` metrics of the actual layers (green points).
        predicted: ``{key: (L+1,)}`` metrics on the line from ``H_0`` to ``H_L`` at the same
            positions (blue curve sampled at the layers).
    """

    positions: np.ndarray
    observed: dict[str, np.ndarray]
    predicted: dict[str, np.ndarray]


def geodesic_prediction(
    layers: Sequence[object],
    labels: object,
    metrics: Sequence[str] = PFC_KEYS,
    endpoint: Endpoint = "empirical",
    weighting: Weighting = "auto",
) -> GeodesicPrediction:
    """Compare each layer's PFC metrics with the geodesic prediction at its relative position.

    Args:
        layers: ``[H_0, ..., H_L]``, ``L >= 1``, same D.
        labels: ``(N,)`` integer labels.
        metrics, endpoint, weighting: as in :func:`geodesic_curve` (one imbalance
            warning per call at most).
    """
    hs = [to_f64(h).cpu().numpy() for h in as_layers("layers", layers, min_layers=2)]
    keys = check_pfc_keys(metrics)
    pos = relative_positions(hs)
    a, b, y, _ = _line_pair(hs[0], hs[-1], labels, endpoint)
    resolved = _resolved(y, weighting)
    return GeodesicPrediction(
        positions=pos,
        observed=_pfc_at(hs, y, keys, resolved),
        predicted=_pfc_at(_points(a, b, pos), y, keys, resolved),
    )


# ---------------------------------------------------------------------------------------
# the straight-line model


@dataclass(frozen=True)
class StraightLine:
    """The PFC metrics along the straight line (paper 001, Eq. 10; Fig. 3 blue curve).

    Attributes:
        ts: ``(T,)`` times.
        endpoint: the end-point mode used.
        metrics: ``{key: (T,)}`` PFC metrics of the interpolated features, evaluated
            directly by :mod:`collapselab.metrics.nc` (keys of ``PFC_KEYS``).
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
    metrics: Sequence[str] = PFC_KEYS,
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
        metrics: catalogue keys among ``PFC_KEYS`` evaluated directly.
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
    progress: Callable[[int, int], None] | None = None,
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
    ``S < 0`` to be 1 up to the grid resolution. ``progress(trials_done, n_trials)`` is
    called after every trial.
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
            if progress is not None:
                progress(j + 1, n_trials)
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
    progress: Callable[[int, int], None] | None = None,
) -> Theorem2Study:
    """Monte-Carlo study of Theorem 2: PFC2 is monotone near the end, globally only if close.

    The end point is a unit simplex ETF (random orientation) and the start class means are
    ``m_k + ε z_k`` with ``z_k ~ N(0, I_d / d)`` (perturbations of norm about ε), one
    sample per class (PFC2 depends on the class means only). Small ε means a small class-mean
    transport cost; ε of order 1 or more is a start far from the end. PFC2 is evaluated in
    closed form (:func:`~collapselab.metrics.layerwise.pfc2_along_line`) on ``n_grid``
    points; a rise of more than ``tol`` (PFC2 lies in [0, 2]) counts as non-monotone.
    ``progress(trials_done, len(scales) * n_trials)`` is called after every trial.
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
                if progress is not None:
                    progress(i * n_trials + j + 1, eps.size * n_trials)
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
