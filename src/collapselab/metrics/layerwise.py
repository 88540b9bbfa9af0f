"""Per-layer collapse metrics and straight-line (geodesic) diagnostics (paper 001, PFC).

Progressive feedforward collapse: in a trained ResNet the degree of collapse grows with
depth, and under the "geodesic curve assumption" every sample travels on a straight line
from its input feature ``h^(0)`` to its last-layer feature ``h^(1)``. Given the per-layer
feature matrices ``[H_0, ..., H_L]`` (rows are the same samples, in the same order; ``H_0``
is "layer0", the input of the first analysed block) and the labels, this module computes

* the PFC metrics of every layer (:func:`per_layer_pfc`),
* the relative depth position, mean displacements and the optimal-transport regulariser
  (§2.6, §2.9; :func:`relative_positions`, :func:`mean_displacements`,
  :func:`ot_regulariser`; streamed by :class:`LayerPathAccumulator`),
* the ε-empirical effective depth of Galanti et al. (§2.4; :func:`effective_depth`),
* Theorem 1's quantity S, the class-mean transport cost and per-sample straightness,
* the straight-line prediction of the PFC metrics (§2.7; :func:`geodesic_curve`,
  :func:`geodesic_prediction`) and the closed form of PFC1 along the line
  (Appendix A; :func:`pfc1_along_line`), its t-derivative (:func:`dpfc1_along_line`) and
  PFC2 along the line (:func:`pfc2_along_line`).

Conventions (paper 001 §2.1 and DESIGN.md): class means over the samples of each class
present in ``labels``; for balanced classes ``h_G`` is the mean of the class means,
``Tr(Σ_W)`` is normalised by the total sample count N and ``Tr(Σ_B)`` by the number of
classes K. The PFC metrics come from :mod:`collapselab.metrics.nc` and follow its
``weighting`` option: ``"auto"`` (default) is the paper's balanced form for equal class
counts and the sample-weighted one (``π_k = n_k/N``) otherwise, ``"balanced"`` and
``"sample"`` force one; a function with a ``weighting`` argument resolves it once from the
labels and warns at most once per call on imbalanced classes. Theorem 1's S, the
transport cost and the effective depth have fixed definitions (unweighted sums over
classes with ``h_G`` the mean of the class means; a fraction of samples). Inputs may
be torch tensors or numpy arrays; statistics are float64. Per-layer and per-t values come
back as numpy arrays, scalars as floats.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from collapselab.checks import (
    ArrayLike,
    as_labels,
    as_layers,
    as_matrix,
    as_series,
    check_choice,
    check_float,
    resolve_for_labels,
    to_f64,
)
from collapselab.metrics.nc import _pfc_values

__all__ = [
    "PFC_METRICS",
    "GeodesicPrediction",
    "LayerPathAccumulator",
    "class_mean_transport_cost",
    "dpfc1_along_line",
    "effective_depth",
    "effective_depth_from_accuracy",
    "geodesic_curve",
    "geodesic_prediction",
    "interpolate",
    "mean_displacements",
    "ot_regulariser",
    "path_lengths",
    "per_layer_pfc",
    "pfc1_along_line",
    "pfc2_along_line",
    "relative_positions",
    "straightness",
    "theorem1_s",
]

PFC_METRICS: tuple[str, ...] = ("nc1_trace_ratio", "nc2_etf_distance", "ncc_accuracy")
"""Catalogue keys of PFC1, PFC2 and PFC3 (paper 001, Eqs. 7-9)."""

Endpoint = Literal["empirical", "class_means"]
Weighting = Literal["auto", "balanced", "sample"]


def _metric_names(names: Sequence[str]) -> tuple[str, ...]:
    """The requested catalogue keys, checked against ``PFC_METRICS``."""
    unknown = [n for n in names if n not in PFC_METRICS]
    if unknown or not names:
        raise ValueError(f"metrics must be a non-empty subset of {PFC_METRICS}, got {list(names)}")
    return tuple(names)


def _pfc_of(
    hs: Iterable[torch.Tensor], y: torch.Tensor, names: tuple[str, ...], weighting: str
) -> dict[str, np.ndarray]:
    """PFC metrics of each feature matrix in ``hs`` with an already resolved weighting."""
    rows = [_pfc_values(to_f64(h), y, names, weighting) for h in hs]
    return {name: np.array([row[name] for row in rows], dtype=np.float64) for name in names}


def _labels_for(labels: ArrayLike, h: torch.Tensor) -> torch.Tensor:
    y, _ = as_labels("labels", labels, h.shape[0], None, h.device)
    return y


def per_layer_pfc(
    layers: Sequence[ArrayLike],
    labels: ArrayLike,
    metrics: Sequence[str] = PFC_METRICS,
    weighting: Weighting = "auto",
) -> dict[str, np.ndarray]:
    """PFC1-PFC3 of every layer (paper 001, Eqs. 7-9; Fig. 2-3 green points).

    Args:
        layers: ``[H_0, ..., H_L]``, each ``(N, D_l)`` (dimensions may differ here).
        labels: ``(N,)`` integer labels.
        metrics: catalogue keys among ``PFC_METRICS``: ``nc1_trace_ratio``
            (Tr Σ_W / Tr Σ_B), ``nc2_etf_distance``, ``ncc_accuracy``.
        weighting: class weights of :mod:`collapselab.metrics.nc`: ``"auto"`` (default;
            the paper's ``"balanced"`` for equal class counts, else ``"sample"``),
            ``"balanced"`` or ``"sample"``; they differ only for imbalanced classes, which
            give one warning per call.

    Returns:
        ``{key: (L+1,) array}``, one value per layer.
    """
    hs = as_layers("layers", layers, same_dim=False)
    y = _labels_for(labels, hs[0])
    names = _metric_names(metrics)
    return _pfc_of(hs, y, names, resolve_for_labels(y, weighting))


class LayerPathAccumulator:
    """Streams the per-sample displacements between consecutive layers.

    Per transition ``l -> l+1`` it keeps ``sum_i ||h_i^{l+1} - h_i^l||`` (un-squared) and
    ``sum_i ||h_i^{l+1} - h_i^l||^2``, plus the straightness sums, all additive over
    batches, so the relative positions, displacements and OT regulariser of a large set can
    be computed batch by batch and merged across processes.
    """

    def __init__(self) -> None:
        self.lengths: torch.Tensor | None = None  # (L,) sum of norms
        self.sq_lengths: torch.Tensor | None = None  # (L,) sum of squared norms
        self.n_samples = 0
        self.straightness_sum = 0.0
        self.n_straight = 0  # samples with a non-zero chord ||h^L - h^0||

    def update(self, layers: Sequence[ArrayLike]) -> LayerPathAccumulator:
        """Add one batch: ``[H_0, ..., H_L]`` for the same B samples, each ``(B, D)``."""
        hs = as_layers("layers", layers, min_layers=2)
        if self.lengths is not None and len(hs) - 1 != self.lengths.shape[0]:
            raise ValueError(
                f"layers has {len(hs)} entries but earlier batches had {self.lengths.shape[0] + 1}"
            )
        norms = _step_norms(hs)
        if self.lengths is None:
            self.lengths = torch.zeros(norms.shape[0], dtype=torch.float64, device=norms.device)
            self.sq_lengths = torch.zeros_like(self.lengths)
        self.lengths += norms.sum(dim=1).to(self.lengths.device)
        self.sq_lengths += (norms * norms).sum(dim=1).to(self.lengths.device)
        self.n_samples += int(norms.shape[1])
        ratio = _straightness_from(norms, hs[0], hs[-1])
        ok = np.isfinite(ratio)
        self.straightness_sum += float(ratio[ok].sum())
        self.n_straight += int(ok.sum())
        return self

    def merge(self, other: LayerPathAccumulator) -> LayerPathAccumulator:
        """Add another accumulator's sums into this one; returns ``self``."""
        if not isinstance(other, LayerPathAccumulator):
            raise TypeError(f"other must be a LayerPathAccumulator, got {type(other).__name__}")
        if other.lengths is None:
            return self
        if self.lengths is None:
            self.lengths = other.lengths.clone()
            self.sq_lengths = other.sq_lengths.clone()
        else:
            if other.lengths.shape != self.lengths.shape:
                raise ValueError("cannot merge accumulators over different numbers of layers")
            self.lengths += other.lengths.to(self.lengths.device)
            self.sq_lengths += other.sq_lengths.to(self.lengths.device)
        self.n_samples += other.n_samples
        self.straightness_sum += other.straightness_sum
        self.n_straight += other.n_straight
        return self

    def _need(self) -> None:
        if self.lengths is None:
            raise ValueError("the accumulator is empty; call update() with data first")

    def path_lengths(self) -> np.ndarray:
        """``(L,)`` total un-squared displacement per transition, summed over samples."""
        self._need()
        return self.lengths.cpu().numpy().copy()

    def relative_positions(self) -> np.ndarray:
        """``(L+1,)`` normalised cumulative path length (see :func:`relative_positions`)."""
        lengths = self.path_lengths()
        total = lengths.sum()
        if not total > 0:
            raise ValueError(
                "relative positions are undefined: no sample moves between any two layers "
                "(total path length 0)"
            )
        return np.concatenate([[0.0], np.cumsum(lengths) / total])

    def mean_displacements(self) -> np.ndarray:
        """``(L,)`` mean over samples of ``||h^{l+1} - h^l||``."""
        return self.path_lengths() / self.n_samples

    def ot_regulariser(self) -> float:
        """``(1/N) sum_l sum_i ||h_i^{l+1} - h_i^l||^2`` (see :func:`ot_regulariser`)."""
        self._need()
        return float(self.sq_lengths.sum()) / self.n_samples

    def mean_straightness(self) -> float:
        """Mean of :func:`straightness` over samples whose chord is non-zero (NaN if none)."""
        self._need()
        return self.straightness_sum / self.n_straight if self.n_straight else float("nan")


def _step_norms(hs: list[torch.Tensor]) -> torch.Tensor:
    """``(L, N)`` norms ``||h_i^{l+1} - h_i^l||``, one layer pair in float64 at a time."""
    return torch.stack(
        [torch.linalg.vector_norm(to_f64(b) - to_f64(a), dim=1) for a, b in itertools.pairwise(hs)]
    )


def _straightness_from(norms: torch.Tensor, h0: torch.Tensor, h_last: torch.Tensor) -> np.ndarray:
    path = norms.sum(dim=0).cpu().numpy()
    chord = torch.linalg.vector_norm(to_f64(h_last) - to_f64(h0), dim=1).cpu().numpy()
    out = np.full(path.shape, np.nan)
    moving = chord > 0
    out[moving] = path[moving] / chord[moving]
    out[(~moving) & (path > 0)] = np.inf
    return out


def path_lengths(layers: Sequence[ArrayLike]) -> np.ndarray:
    """``(L,)`` per-transition path length ``sum_i ||h_i^{l+1} - h_i^l||`` (un-squared)."""
    return LayerPathAccumulator().update(layers).path_lengths()


def relative_positions(layers: Sequence[ArrayLike]) -> np.ndarray:
    """Relative depth position of every layer (paper 001, §IV-A, Fig. 3 x-axis).

    .. math::
        \\mathrm{pos}(l) = \\frac{\\sum_{l'=0}^{l-1} \\sum_{k,i}
            \\|h_{k,i}^{l'+1} - h_{k,i}^{l'}\\|_2}
          {\\sum_{l'=0}^{L-1} \\sum_{k,i} \\|h_{k,i}^{l'+1} - h_{k,i}^{l'}\\|_2}

    with un-squared norms (the paper reuses l for the summation index and the bound; this
    is the evident reading, note §2.6). ``pos(0) = 0``, ``pos(L) = 1``.

    Args:
        layers: ``[H_0, ..., H_L]``, ``L >= 1``, each ``(N, D)`` with the same D.

    Raises:
        ValueError: if no sample moves at all (the positions are 0/0).
    """
    return LayerPathAccumulator().update(layers).relative_positions()


def mean_displacements(layers: Sequence[ArrayLike]) -> np.ndarray:
    """``(L,)`` mean displacement ``(1/N) sum_i ||h_i^{l+1} - h_i^l||`` per transition."""
    return LayerPathAccumulator().update(layers).mean_displacements()


def ot_regulariser(layers: Sequence[ArrayLike]) -> float:
    """Optimal-transport regulariser, the empirical kinetic energy (paper 001, §II-C, Eq. 12).

    .. math::
        R_{OT} = \\frac{1}{Kn} \\sum_{l=0}^{L-1} \\sum_{k,i} \\|h_{k,i}^{l+1} - h_{k,i}^{l}\\|_2^2

    with ``Kn = N`` samples (without MUFM's factor λ/2).
    """
    return LayerPathAccumulator().update(layers).ot_regulariser()


def straightness(layers: Sequence[ArrayLike]) -> np.ndarray:
    """Per-sample straightness ``sum_l ||h_i^{l+1} - h_i^l|| / ||h_i^L - h_i^0||`` (note R1.6).

    1 for a sample moving along a straight segment (in any steps, monotonically),
    larger for a bent or back-tracking path. Not in the paper; a diagnostic of its
    geodesic assumption.

    Returns:
        ``(N,)`` values; ``inf`` where the path returns to its start (chord 0, path > 0),
        NaN where the sample never moves.
    """
    hs = as_layers("layers", layers, min_layers=2)
    return _straightness_from(_step_norms(hs), hs[0], hs[-1])


def effective_depth_from_accuracy(
    ncc_accuracy: ArrayLike,
    eps: float = 0.01,
    rule: Literal["first", "stable"] = "first",
    include_input: bool = False,
) -> int | None:
    """ε-empirical effective depth from per-layer NCC accuracies (see :func:`effective_depth`)."""
    acc = as_series("ncc_accuracy", ncc_accuracy)
    eps = check_float("eps", eps, minimum=0.0)
    check_choice("rule", rule, ("first", "stable"))
    start = 0 if include_input else 1
    if acc.shape[0] <= start:
        raise ValueError(
            f"need at least {start + 1} layer(s) to search from index {start}, got {acc.shape[0]}"
        )
    # A small slack so that, e.g., accuracy 0.99 counts as error <= 0.01 despite rounding.
    separable = (1.0 - acc) <= eps + 1e-12
    candidates = range(start, acc.shape[0])
    if rule == "first":
        return next((i for i in candidates if separable[i]), None)
    stable = None
    for i in reversed(candidates):
        if not separable[i]:
            break
        stable = i
    return stable


def effective_depth(
    layers: Sequence[ArrayLike],
    labels: ArrayLike,
    eps: float = 0.01,
    rule: Literal["first", "stable"] = "first",
    include_input: bool = False,
) -> int | None:
    """ε-empirical effective depth (Galanti et al.; paper 001, §II-B, note §2.4, R1.4).

    The minimal layer index l in ``[L] = {1, ..., L}`` whose nearest-class-centre training
    error is at most ε:

    .. math::
        \\frac{1}{N} \\sum_{k,i} \\mathbb{1}\\big[\\arg\\min_c \\|h_{k,i}^l - h_c^l\\| \\ne k\\big]
        \\le \\varepsilon,

    with class means from the same features: ``1 - ncc_accuracy`` with
    ``weighting="sample"`` (the definition counts samples; for balanced classes this equals
    PFC3 of :func:`per_layer_pfc`).

    Args:
        layers: ``[H_0, ..., H_L]``; ``H_0`` (the input) is not a hidden layer and is
            searched only with ``include_input=True``.
        labels: ``(N,)`` integer labels.
        eps: the tolerated NCC error ε (the paper gives no value).
        rule: ``"first"``, the definition (the first separable layer); ``"stable"``, the
            first layer from which every deeper layer is separable (the premise the paper
            relies on: once separable, always separable).
        include_input: also consider index 0.

    Returns:
        The layer index into ``layers``, or None when no layer qualifies.
    """
    hs = as_layers("layers", layers, same_dim=False)
    acc = _pfc_of(hs, _labels_for(labels, hs[0]), ("ncc_accuracy",), "sample")["ncc_accuracy"]
    return effective_depth_from_accuracy(acc, eps, rule, include_input)


def _pair(h0: ArrayLike, h1: ArrayLike, labels: ArrayLike):
    a = as_matrix("h0", h0)
    b = as_matrix("h1", h1, a.device)
    if b.shape != a.shape:
        raise ValueError(
            f"h1 has shape {tuple(b.shape)} but h0 has {tuple(a.shape)}; the end points must "
            "hold the same samples in the same space"
        )
    y = _labels_for(labels, a)
    if y.numel() == 0:
        raise ValueError("labels is empty; need at least one sample")
    _, inverse = torch.unique(y, return_inverse=True)
    return a, b, inverse


def _class_means(h: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    k = int(inverse.max()) + 1
    sums = torch.zeros(k, h.shape[1], dtype=torch.float64, device=h.device).index_add_(
        0, inverse, h
    )
    counts = torch.bincount(inverse, minlength=k).to(torch.float64)
    return sums / counts[:, None]


def _centred_means(h: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    m = _class_means(h, inverse)
    return m - m.mean(dim=0, keepdim=True)


def theorem1_s(h0: ArrayLike, h1: ArrayLike, labels: ArrayLike) -> float:
    """Theorem 1's condition ``S = sum_k <h̃_k^(0), h̃_k^(1)>`` (paper 001, §III-B, note §2.8).

    ``h̃_k = h_k - h_G`` are the centred class means (``h_G`` the mean of the class means) of
    the start (layer 0) and end (last layer) features. PFC1 decreases monotonically along
    the straight line when ``S >= 0``.
    """
    a, b, inv = _pair(h0, h1, labels)
    return float((_centred_means(a, inv) * _centred_means(b, inv)).sum())


def class_mean_transport_cost(h0: ArrayLike, h1: ArrayLike, labels: ArrayLike) -> float:
    """Class-mean transport cost ``||H̃(1) - H̃(0)||_F^2 = sum_k ||h̃_k^(1) - h̃_k^(0)||^2``.

    Theorem 2 (PFC2 monotone) needs it small (paper 001, §III-B, note §2.8).
    """
    a, b, inv = _pair(h0, h1, labels)
    diff = _centred_means(b, inv) - _centred_means(a, inv)
    return float((diff * diff).sum())


def _endpoint(b: torch.Tensor, inv: torch.Tensor, endpoint: str) -> torch.Tensor:
    if check_choice("endpoint", endpoint, ("empirical", "class_means")) == "empirical":
        return b
    return _class_means(b, inv)[inv]


def interpolate(
    h0: ArrayLike, h1: ArrayLike, t: float | ArrayLike | Sequence[float]
) -> torch.Tensor:
    """The straight line ``H(t) = (1 - t) H_0 + t H_1`` (paper 001, Eq. 10, R2).

    Args:
        h0: ``(N, D)`` start features.
        h1: ``(N, D)`` end features.
        t: a number, giving ``(N, D)``, or a 1-D sequence of T times (list, array or
            tensor), giving the stacked ``(T, N, D)`` points of the line.
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


def _ts(ts: ArrayLike | Sequence[float]) -> np.ndarray:
    arr = as_series("ts", ts)
    if arr.size == 0:
        raise ValueError("ts must hold at least one time")
    return arr


def geodesic_curve(
    h0: ArrayLike,
    h1: ArrayLike,
    labels: ArrayLike,
    ts: ArrayLike | Sequence[float],
    metrics: Sequence[str] = PFC_METRICS,
    endpoint: Endpoint = "empirical",
    weighting: Weighting = "auto",
) -> dict[str, np.ndarray]:
    """PFC metrics along the straight line between two layers (paper 001, §IV-A, Fig. 3 blue).

    Evaluates each metric on ``H(t) = (1 - t) H_0 + t H_1`` at every t (usually in [0, 1]).

    Args:
        h0: ``(N, D)`` start features (layer 0).
        h1: ``(N, D)`` end features (the last layer).
        labels: ``(N,)`` integer labels.
        ts: times at which to evaluate.
        metrics: catalogue keys among ``PFC_METRICS``.
        endpoint: ``"empirical"``, the actual end features; ``"class_means"``, every end
            feature replaced by its class mean (the collapsed end point of Eq. 10).
        weighting: class weights, as in :func:`per_layer_pfc`.

    Returns:
        ``{key: (len(ts),) array}``.
    """
    names = _metric_names(metrics)
    a, b, y = _line_ends(h0, h1, labels, endpoint)
    times = _ts(ts)
    return _pfc_of(_points(a, b, times), y, names, resolve_for_labels(y, weighting))


def _line_ends(
    h0: ArrayLike, h1: ArrayLike, labels: ArrayLike, endpoint: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Start, end (after the ``endpoint`` rule) and labels of a straight line."""
    a, b, inv = _pair(h0, h1, labels)
    return a, _endpoint(b, inv, endpoint), _labels_for(labels, a)


def _points(a: torch.Tensor, b: torch.Tensor, times: np.ndarray) -> Iterator[torch.Tensor]:
    """``H(t) = (1 - t) a + t b`` for each t, one at a time (never all T x N x D at once)."""
    for t in times:
        yield (1.0 - t) * a + t * b


def _class_weights(
    inv: torch.Tensor, weighting: str, stacklevel: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Class weights ``π_k`` and the per-sample weights ``π_k / n_k`` of ``Σ_W = Σ_k π_k Cov_k``.

    ``inv`` indexes the classes present (``0..K-1``); ``weighting`` is resolved here, and
    the one imbalance warning of the call is attributed ``stacklevel`` frames up from here.
    """
    weighting = resolve_for_labels(inv, weighting, stacklevel=stacklevel + 1)
    counts = torch.bincount(inv).to(torch.float64)
    k = counts.shape[0]
    if weighting == "balanced":
        pi = torch.full((k,), 1.0 / k, dtype=torch.float64, device=inv.device)
    else:
        pi = counts / counts.sum()
    return pi, (pi / counts)[inv]


def _line_moments(
    h0: ArrayLike, h1: ArrayLike, labels: ArrayLike, endpoint: str, weighting: str
) -> tuple[np.ndarray, np.ndarray]:
    """The coefficients ``(w_00, w_01, w_11)`` and ``(b_00, b_01, b_11)`` of PFC1 on the line."""
    a, b, inv = _pair(h0, h1, labels)
    b = _endpoint(b, inv, endpoint)
    ma, mb = _class_means(a, inv), _class_means(b, inv)
    ea, eb = a - ma[inv], b - mb[inv]
    pi, sample_w = _class_weights(inv, weighting, stacklevel=4)
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
    h0: ArrayLike,
    h1: ArrayLike,
    labels: ArrayLike,
    ts: ArrayLike | Sequence[float],
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
    h0: ArrayLike,
    h1: ArrayLike,
    labels: ArrayLike,
    ts: ArrayLike | Sequence[float],
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

    (implemented separately, as printed, in :func:`collapselab.theory.geodesic.dpfc1_appendix_a`).
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
    h0: ArrayLike,
    h1: ArrayLike,
    labels: ArrayLike,
    ts: ArrayLike | Sequence[float],
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
    a, b, inv = _pair(h0, h1, labels)
    b = _endpoint(b, inv, endpoint)
    ma, mb = _class_means(a, inv), _class_means(b, inv)
    pi, _ = _class_weights(inv, weighting, stacklevel=3)
    ca, cb = (ma - pi @ ma).cpu().numpy(), (mb - pi @ mb).cpu().numpy()
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
    layers: Sequence[ArrayLike],
    labels: ArrayLike,
    metrics: Sequence[str] = PFC_METRICS,
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
    hs = as_layers("layers", layers, min_layers=2)
    names = _metric_names(metrics)
    pos = relative_positions(hs)
    a, b, y = _line_ends(hs[0], hs[-1], labels, endpoint)
    resolved = resolve_for_labels(y, weighting)
    return GeodesicPrediction(
        positions=pos,
        observed=_pfc_of(hs, y, names, resolved),
        predicted=_pfc_of(_points(a, b, pos), y, names, resolved),
    )
