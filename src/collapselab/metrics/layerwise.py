"""Per-layer collapse metrics and the layer path of a network (paper 001, PFC).

Progressive feedforward collapse: in a trained ResNet the degree of collapse grows with
depth. Given the per-layer feature matrices ``[H_0, ..., H_L]`` (rows are the same samples,
in the same order; ``H_0`` is "layer0", the input of the first analysed block) and the
labels, this module computes

* the PFC metrics of every layer (:func:`per_layer_pfc`),
* the relative depth position, mean displacements and the optimal-transport regulariser
  (§2.6, §2.9; :func:`relative_positions`, :func:`mean_displacements`,
  :func:`ot_regulariser`), from the sums of a
  :class:`~collapselab.stats.LayerPathAccumulator` (:func:`path_positions`,
  :func:`path_displacements`, :func:`path_ot_regulariser`, :func:`path_straightness`),
* the ε-empirical effective depth of Galanti et al. (§2.4; :func:`effective_depth`),
* per-sample straightness (:func:`straightness`).

The straight-line (geodesic) model of the paper and its closed forms live in
:mod:`collapselab.theory.geodesic`.

Conventions (paper 001 §2.1 and docs/catalogue.md): class means over the samples of each class
present in ``labels``; for balanced classes ``h_G`` is the mean of the class means,
``Tr(Σ_W)`` is normalised by the total sample count N and ``Tr(Σ_B)`` by the number of
classes K. The PFC metrics come from :mod:`collapselab.metrics.nc` and follow its
``weighting`` option: ``"auto"`` (default) is the paper's balanced form for equal class
counts and the sample-weighted one (``π_k = n_k/N``) otherwise, ``"balanced"`` and
``"sample"`` force one; a function with a ``weighting`` argument resolves it once from the
labels and warns at most once per call on imbalanced classes. The effective depth counts
samples (a fraction of samples). Inputs may be torch tensors or numpy arrays; statistics are
float64. Per-layer values come back as numpy arrays, scalars as floats.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
import torch

from collapselab.checks import (
    ArrayLike,
    as_labels,
    as_layers,
    as_series,
    check_choice,
    check_float,
    resolve_for_labels,
    to_f64,
)
from collapselab.metrics.nc import PFC_KEYS, check_pfc_keys, pfc_values
from collapselab.stats import LayerPathAccumulator
from collapselab.stats.layer_path import step_norms, straightness_ratios

__all__ = [
    "effective_depth",
    "effective_depth_from_accuracy",
    "mean_displacements",
    "ot_regulariser",
    "path_displacements",
    "path_lengths",
    "path_ot_regulariser",
    "path_positions",
    "path_straightness",
    "per_layer_pfc",
    "relative_positions",
    "straightness",
]

Weighting = Literal["auto", "balanced", "sample"]


def _pfc_of(
    hs: Iterable[torch.Tensor], y: torch.Tensor, names: tuple[str, ...], weighting: str
) -> dict[str, np.ndarray]:
    """PFC metrics of each feature matrix in ``hs`` with an already resolved weighting."""
    rows = [pfc_values(to_f64(h), y, names, weighting=weighting, warn=False) for h in hs]
    return {name: np.array([row[name] for row in rows], dtype=np.float64) for name in names}


def _labels_for(labels: ArrayLike, h: torch.Tensor) -> torch.Tensor:
    y, _ = as_labels("labels", labels, h.shape[0], None, h.device)
    return y


def per_layer_pfc(
    layers: Sequence[ArrayLike],
    labels: ArrayLike,
    metrics: Sequence[str] = PFC_KEYS,
    weighting: Weighting = "auto",
) -> dict[str, np.ndarray]:
    """PFC1-PFC3 of every layer (paper 001, Eqs. 7-9; Fig. 2-3 green points).

    Args:
        layers: ``[H_0, ..., H_L]``, each ``(N, D_l)`` (dimensions may differ here).
        labels: ``(N,)`` integer labels.
        metrics: catalogue keys among ``PFC_KEYS``: ``nc1_trace_ratio``
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
    names = check_pfc_keys(metrics)
    return _pfc_of(hs, y, names, resolve_for_labels(y, weighting))


def _filled(acc: LayerPathAccumulator) -> dict[str, torch.Tensor]:
    if acc.is_empty:
        raise ValueError("the accumulator is empty; call update() with data first")
    return acc.state()


def path_positions(acc: LayerPathAccumulator) -> np.ndarray:
    """``(L+1,)`` normalised cumulative path length (see :func:`relative_positions`)."""
    lengths = _filled(acc)["lengths"].cpu().numpy()
    total = lengths.sum()
    if not total > 0:
        raise ValueError(
            "relative positions are undefined: no sample moves between any two layers "
            "(total path length 0)"
        )
    return np.concatenate([[0.0], np.cumsum(lengths) / total])


def path_displacements(acc: LayerPathAccumulator) -> np.ndarray:
    """``(L,)`` mean over samples of ``||h^{l+1} - h^l||``."""
    s = _filled(acc)
    return s["lengths"].cpu().numpy() / int(s["n_samples"])


def path_ot_regulariser(acc: LayerPathAccumulator) -> float:
    """``(1/N) sum_l sum_i ||h_i^{l+1} - h_i^l||^2`` (see :func:`ot_regulariser`)."""
    s = _filled(acc)
    return float(s["sq_lengths"].sum()) / int(s["n_samples"])


def path_straightness(acc: LayerPathAccumulator) -> float:
    """Mean of :func:`straightness` over samples whose chord is non-zero (NaN if none)."""
    s = _filled(acc)
    n = int(s["n_straight"])
    return float(s["straightness_sum"]) / n if n else float("nan")


def path_lengths(layers: Sequence[ArrayLike]) -> np.ndarray:
    """``(L,)`` per-transition path length ``sum_i ||h_i^{l+1} - h_i^l||`` (un-squared)."""
    return LayerPathAccumulator().update(layers).state()["lengths"].cpu().numpy()


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
    return path_positions(LayerPathAccumulator().update(layers))


def mean_displacements(layers: Sequence[ArrayLike]) -> np.ndarray:
    """``(L,)`` mean displacement ``(1/N) sum_i ||h_i^{l+1} - h_i^l||`` per transition."""
    return path_displacements(LayerPathAccumulator().update(layers))


def ot_regulariser(layers: Sequence[ArrayLike]) -> float:
    """Optimal-transport regulariser, the empirical kinetic energy (paper 001, §II-C, Eq. 12).

    .. math::
        R_{OT} = \\frac{1}{Kn} \\sum_{l=0}^{L-1} \\sum_{k,i} \\|h_{k,i}^{l+1} - h_{k,i}^{l}\\|_2^2

    with ``Kn = N`` samples (without MUFM's factor λ/2).
    """
    return path_ot_regulariser(LayerPathAccumulator().update(layers))


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
    return straightness_ratios(step_norms(hs), hs[0], hs[-1]).cpu().numpy()


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
