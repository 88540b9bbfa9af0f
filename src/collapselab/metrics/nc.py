r"""Neural-collapse metrics NC1-NC4 and the PFC metrics.

Notation (docs/catalogue.md, note 003 §2.1): ``C`` classes, class means ``mu_c``, class weights
``pi_c`` (``1/C`` balanced, ``n_c/N`` sample-weighted; the default ``weighting="auto"`` is
balanced for equal class counts and sample-weighted, with a warning, otherwise),
``mu_G = sum_c pi_c mu_c``,
``M̄ = [mu_c - mu_G]_c`` (``D x C``), ``Sigma_W`` normalised by ``N``,
``Sigma_B = sum_c pi_c (mu_c - mu_G)(mu_c - mu_G)^T`` (``(1/C) M̄ M̄^T`` when balanced).
Matrices of per-class vectors are passed with one row per class (``(C, D)``), so a
classifier ``W`` and the centred means ``M̄^T`` have the same layout.

Three layers of API:

* metrics of a finished :class:`~collapselab.stats.ClassStats` (:func:`nc1_pinv`,
  :func:`trace_ratio`, :func:`cdnv`, :func:`ncc_mismatch`, :func:`weighted_accuracy`,
  :func:`pfc_metrics`), and the catalogue's NC keys of them (:data:`NC_KEYS`,
  :func:`nc_values`, :func:`nc_metrics`; the NC family, :mod:`collapselab.families.nc`,
  declares what each key needs and computes it here);
* geometry of ``(C, D)`` vector sets (:func:`equinorm`, :func:`equiangularity`,
  :func:`max_equiangularity`, :func:`etf_distance`, :func:`orthogonal_frame_distance`,
  :func:`self_duality`, :func:`self_duality_classwise`);
* one-call functions of raw features and labels (:func:`nc1_trace_ratio`,
  :func:`nc2_etf_distance`, :func:`ncc_accuracy`, :func:`pfc_values`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from collapselab.checks import (
    PAIRS,
    WEIGHTINGS,
    check_between_rank,
    check_choice,
    check_features,
    check_int,
    check_labels,
    infer_n_classes,
    resolve_weighting,
    warn_imbalanced_counts,
)
from collapselab.metrics.mse import nc1_snr_if_defined
from collapselab.stats import ClassStats, class_stats_from_features, nearest_class_mean

# ---------------------------------------------------------------------------------------
# metrics of class statistics


def nc1_pinv(stats: ClassStats, divide_by_c: bool = True) -> float:
    r"""NC1 ``= Tr(Sigma_W Sigma_B^+) / C`` (note 003 §2.2-2.3; PNAS Fig. 6).

    The pseudo-inverse is restricted to the rank-``r`` range of ``Sigma_B`` (``r = C - 1``
    unless the means are degenerate): with ``Sigma_B = P diag(s^2) P^T``,
    ``Tr(Sigma_W Sigma_B^+) = sum_k (P^T Sigma_W P)_{kk} / s_k^2`` (exact; see
    :mod:`collapselab.stats.class_stats`).

    Args:
        stats: statistics after both passes.
        divide_by_c: divide by ``C`` (the PNAS label, default) or not (the MSE-NC notebook
            plots ``Tr(Sigma_W Sigma_B^+)``).
    """
    check_between_rank(stats.between_rank)
    s = stats.between_singular_values
    value = float((torch.diagonal(stats.within_projected) / (s * s)).sum())
    return value / stats.n_classes if divide_by_c else value


def trace_ratio(stats: ClassStats) -> float:
    r"""PFC1 ``= Tr(Sigma_W) / Tr(Sigma_B)`` (note 001 §2.5, Eq. 7/17)."""
    check_between_rank(stats.between_rank)
    return stats.within_trace / stats.between_trace


def cdnv(stats: ClassStats) -> float:
    r"""Class-distance-normalised variance (Galanti et al. 2022).

    ``Avg_{c != c'} (sigma_c^2 + sigma_{c'}^2) / (2 ||mu_c - mu_{c'}||^2)`` with
    ``sigma_c^2 = (1/n_c) sum_{i in c} ||h_i - mu_c||^2``; ordered and unordered pairs give
    the same average. ``inf`` when two class means coincide.
    """
    check_between_rank(stats.between_rank)
    var = stats.class_variances
    centred = stats.centred_means
    gram = centred @ centred.T
    sq = torch.diagonal(gram)
    dist2 = (sq.unsqueeze(0) + sq.unsqueeze(1) - 2.0 * gram).clamp_min(0.0)
    c = stats.n_classes
    off = ~torch.eye(c, dtype=torch.bool, device=gram.device)
    if bool((dist2[off] == 0).any()):
        return math.inf
    ratio = (var.unsqueeze(0) + var.unsqueeze(1)) / (2.0 * dist2.masked_fill(~off, 1.0))
    return float(ratio[off].mean())


def weighted_accuracy(confusion: torch.Tensor, weights: torch.Tensor) -> float:
    r"""``sum_c pi_c (correct_c / n_c)`` from a ``(C, C)`` confusion matrix (rows: labels).

    With ``pi_c = n_c / N`` this is the plain fraction of correct samples; with
    ``pi_c = 1/C`` the class-balanced accuracy (equal for balanced data). Classes without
    samples are skipped and the weights of the others renormalised.
    """
    conf = confusion.to(torch.float64)
    n = conf.sum(dim=1)
    present = n > 0
    w = weights.to(conf.device)[present]
    per_class = torch.diagonal(conf)[present] / n[present]
    return float((w * per_class).sum() / w.sum())


PFC_KEYS: tuple[str, ...] = ("nc1_trace_ratio", "nc2_etf_distance", "ncc_accuracy")
"""Catalogue keys of PFC1, PFC2 and PFC3 (paper 001, Eqs. 7-9)."""


def ncc_mismatch(stats: ClassStats) -> float:
    r"""NC4 ``= sum_c pi_c |{i in c: argmax(W h_i + b) != argmin_k ||h_i - mu_k||}| / n_c``.

    The classifier given to :meth:`~collapselab.stats.ClassStats.finalize_means` against
    the nearest-class-mean rule (note 003 §2.3; the plain fraction for balanced classes).
    """
    return _weighted_fraction(stats.mismatch_counts, stats.counts, stats.class_weights)


def check_pfc_keys(keys: Sequence[str], name: str = "metrics") -> tuple[str, ...]:
    """``keys`` as a tuple, checked to be a non-empty subset of :data:`PFC_KEYS`."""
    if isinstance(keys, str):
        keys = [keys]
    unknown = [k for k in keys if k not in PFC_KEYS]
    if unknown or not keys:
        raise ValueError(f"{name} must be a non-empty subset of {PFC_KEYS}, got {list(keys)}")
    return tuple(keys)


def pfc_metrics(stats: ClassStats, keys: Sequence[str] = PFC_KEYS) -> dict[str, float]:
    r"""PFC1-3 (paper 001, Eqs. 7-9) of class statistics, for the requested ``keys``.

    ``nc1_trace_ratio`` ``= Tr Sigma_W / Tr Sigma_B`` (:func:`trace_ratio`),
    ``nc2_etf_distance`` (:func:`etf_distance` of the centred means) and ``ncc_accuracy``
    (:func:`weighted_accuracy` of the nearest-class-mean decisions of pass 2).
    """
    keys = check_pfc_keys(keys, "keys")
    check_between_rank(stats.between_rank)
    formulas = {
        "nc1_trace_ratio": lambda: trace_ratio(stats),
        "nc2_etf_distance": lambda: etf_distance(stats.centred_means),
        "ncc_accuracy": lambda: weighted_accuracy(stats.ncc_confusion, stats.class_weights),
    }
    return {k: formulas[k]() for k in keys}


NC_KEYS = (
    "nc1",
    "nc1_trace_ratio",
    "nc1_cdnv",
    "nc1_snr",
    "nc1_dense",
    "nc2_equinorm_means",
    "nc2_equiangle_means",
    "nc2_maxangle_means",
    "nc2_etf_distance",
    "nc2_orthogonal_frame",
    "ncc_accuracy",
    "nc2_equinorm_classifiers",
    "nc2_equiangle_classifiers",
    "nc2_maxangle_classifiers",
    "nc3_self_duality",
    "nc3_self_duality_classwise",
    "nc4_ncc_mismatch",
    "accuracy",
)
"""The NC family's catalogue keys, in catalogue order (docs/catalogue.md, "nc")."""

NC_DECISION_KEYS = frozenset({"ncc_accuracy", "nc4_ncc_mismatch", "accuracy"})
"""The NC keys read from the decisions of pass 2 (nearest class mean, classifier)."""


def nc_values(
    stats: ClassStats,
    keys: Sequence[str] = NC_KEYS,
    *,
    W: torch.Tensor | None = None,
    divide_by_c: bool = True,
    ddof: int = 1,
    pairs: str = "unordered",
) -> dict[str, float]:
    r"""The NC keys among ``keys`` of finished class statistics, in :data:`NC_KEYS` order.

    ``nc1`` ``= Tr(Sigma_W Sigma_B^+)/C`` (:func:`nc1_pinv`; without ``/C`` if
    ``divide_by_c=False``), ``nc1_trace_ratio``, ``nc1_cdnv``, ``nc1_snr`` (absent unless
    ``Sigma_W`` is dense and nonsingular), ``nc1_dense`` (1 if the scatter was kept dense),
    NC2 of the centred means (``ddof`` of the standard deviations, ``pairs`` of the
    cosines), ``nc2_etf_distance``, ``nc2_orthogonal_frame`` (uncentred means),
    ``ncc_accuracy``; with the classifier ``W`` ``(C, D)``: NC2 of its rows, NC3 against the
    centred means, and, when ``stats`` were finalised with that classifier,
    ``nc4_ncc_mismatch`` and ``accuracy``. A key without a value here is left out.

    Raises:
        ValueError: zero between-class scatter (every key needs class means that differ).
    """
    check_between_rank(stats.between_rank)
    centred = stats.centred_means
    formulas: dict[str, Callable[[], float | None]] = {
        "nc1": lambda: nc1_pinv(stats, divide_by_c),
        "nc1_cdnv": lambda: cdnv(stats),
        "nc1_snr": lambda: nc1_snr_if_defined(stats),
        "nc1_dense": lambda: 1.0 if stats.mode == "dense" else 0.0,
        "nc2_equinorm_means": lambda: equinorm(centred, ddof, "centred means"),
        "nc2_equiangle_means": lambda: equiangularity(centred, pairs, ddof, "centred means"),
        "nc2_maxangle_means": lambda: max_equiangularity(centred, "centred means"),
        "nc2_orthogonal_frame": lambda: orthogonal_frame_distance(stats.means),
    }
    pfc = [k for k in PFC_KEYS if k in keys]
    out: dict[str, float] = dict(pfc_metrics(stats, pfc)) if pfc else {}
    if W is not None:
        formulas |= {
            "nc2_equinorm_classifiers": lambda: equinorm(W, ddof, "W"),
            "nc2_equiangle_classifiers": lambda: equiangularity(W, pairs, ddof, "W"),
            "nc2_maxangle_classifiers": lambda: max_equiangularity(W, "W"),
            "nc3_self_duality": lambda: self_duality(W, centred),
            "nc3_self_duality_classwise": lambda: self_duality_classwise(W, centred),
        }
        if stats.has_classifier:
            formulas |= {
                "nc4_ncc_mismatch": lambda: ncc_mismatch(stats),
                "accuracy": lambda: weighted_accuracy(
                    stats.classifier_confusion, stats.class_weights
                ),
            }
    for key in NC_KEYS:
        if key in keys and key in formulas:
            value = formulas[key]()
            if value is not None:
                out[key] = value
    return {k: out[k] for k in NC_KEYS if k in out}


def nc_metrics(
    stats: ClassStats,
    *,
    nc1_divide_by_c: bool = True,
    ddof: int = 1,
    pairs: str = "unordered",
) -> dict[str, float]:
    """The NC keys of finished class statistics (:func:`nc_values`), with the classifier
    given to :meth:`~collapselab.stats.ClassStats.finalize_means` if any.

    Every key of :data:`NC_KEYS` except ``nc1_snr`` and ``nc1_dense``, which describe how the
    statistics were kept (dense or projected) rather than the features.
    """
    keys = tuple(k for k in NC_KEYS if k not in ("nc1_snr", "nc1_dense"))
    W = stats.classifier[0] if stats.has_classifier else None
    return nc_values(stats, keys, W=W, divide_by_c=nc1_divide_by_c, ddof=ddof, pairs=pairs)


def _weighted_fraction(hits: torch.Tensor, counts: torch.Tensor, pi: torch.Tensor) -> float:
    """``sum_c pi_c hits_c / n_c``."""
    return float((pi * hits.to(torch.float64) / counts.to(torch.float64)).sum())


# ---------------------------------------------------------------------------------------
# geometry of per-class vectors (rows)


def _rows(vectors: object, name: str) -> torch.Tensor:
    """The rows in float64, rescaled by a power of two to a largest entry in ``[0.5, 1)``.

    Every function of this section is invariant to the scale of its argument; the exact
    rescaling (a power of two changes no mantissa) keeps their squares and Gram entries
    within float64's range for rows of any finite magnitude (1e-200 or 1e200 as well).
    """
    v = check_features(vectors, name, detach=True).to(torch.float64)
    if v.shape[0] < 2:
        raise ValueError(f"{name} must have at least two rows (classes), got {v.shape[0]}")
    peak = float(v.abs().max())
    if peak == 0:
        return v
    shift = -math.frexp(peak)[1]
    # 2**shift overflows for a subnormal peak (shift > 1023): scale up in two exact steps
    half = shift // 2 if shift > 1023 else 0
    return v * math.ldexp(1.0, half) * math.ldexp(1.0, shift - half)


def _unit_rows(v: torch.Tensor, name: str) -> torch.Tensor:
    norms = v.norm(dim=1)
    zero = torch.nonzero(norms == 0).flatten().tolist()
    if zero:
        raise ValueError(f"{name} has zero rows {zero[:8]}; their angles are undefined")
    return v / norms.unsqueeze(1)


def _pair_cosines(vectors: object, pairs: str, name: str) -> tuple[torch.Tensor, int]:
    v = _unit_rows(_rows(vectors, name), name)
    c = v.shape[0]
    cos = v @ v.T
    if pairs == "unordered":
        i, j = torch.triu_indices(c, c, offset=1, device=cos.device)
        return cos[i, j], c
    off = ~torch.eye(c, dtype=torch.bool, device=cos.device)
    return cos[off], c


def equinorm(vectors: object, ddof: int = 1, name: str = "vectors") -> float:
    r"""NC2 equinorm: ``Std_c ||v_c|| / Avg_c ||v_c||`` (note 003 §2.3, MSE Fig. 3).

    Args:
        vectors: ``(C, D)``, e.g. centred means ``mu_c - mu_G`` or classifier rows ``w_c``.
        ddof: the standard deviation divides by ``C - ddof`` (1: unbiased, as the notebook).
    """
    ddof = check_int("ddof", ddof, minimum=0)
    norms = _rows(vectors, name).norm(dim=1)
    if norms.numel() <= ddof:
        raise ValueError(f"ddof={ddof} needs more than {ddof} rows in {name}")
    mean = norms.mean()
    if float(mean) == 0:
        raise ValueError(f"{name} are all zero; the equinorm ratio is undefined")
    return float(norms.std(correction=ddof) / mean)


def equiangularity(
    vectors: object, pairs: str = "unordered", ddof: int = 1, name: str = "vectors"
) -> float:
    r"""NC2 equiangularity: ``Std_{c != c'} cos(v_c, v_{c'})`` (note 003 §2.3, MSE Fig. 4).

    ``pairs="unordered"`` uses the ``C(C-1)/2`` pairs ``c < c'``; ``"ordered"`` the
    ``C(C-1)`` pairs ``c != c'`` (every cosine twice), which changes the ``ddof``
    correction only. A single pair (``C = 2`` unordered) has no spread: 0.
    """
    ddof = check_int("ddof", ddof, minimum=0)
    pairs = check_choice("pairs", pairs, PAIRS)
    cos, _ = _pair_cosines(vectors, pairs, name)
    if cos.numel() == 1:
        return 0.0
    if cos.numel() <= ddof:
        raise ValueError(f"ddof={ddof} needs more than {ddof} pairs in {name}")
    return float(cos.std(correction=ddof))


def max_equiangularity(vectors: object, name: str = "vectors") -> float:
    r"""NC2 maximal equiangularity: ``Avg_{c != c'} |cos(v_c, v_{c'}) + 1/(C-1)|``.

    Note 003 §2.3 (MSE Fig. 5, the notebook's ``coherence``); zero exactly for a simplex
    ETF. Ordered and unordered pairs give the same average.
    """
    cos, c = _pair_cosines(vectors, "unordered", name)
    return float((cos + 1.0 / (c - 1)).abs().mean())


def etf_distance(centred_means: object) -> float:
    r"""PFC2 ``= || G / ||G||_F - E ||_F`` with ``G = M̄^T M̄`` (note 001 §2.5, Eq. 8/18).

    ``E = (I_C - 1 1^T / C) / sqrt(C - 1)`` has unit Frobenius norm, so the value lies in
    ``[0, 2]``; it is zero exactly for a simplex ETF (any rotation and scale).

    Args:
        centred_means: ``(C, D)`` rows ``mu_c - mu_G`` (i.e. ``M̄^T``).
    """
    m = _rows(centred_means, "centred_means")
    c = m.shape[0]
    gram = m @ m.T
    norm = gram.norm()
    if float(norm) == 0:
        raise ValueError("centred_means are all zero (zero between-class scatter)")
    eye = torch.eye(c, dtype=torch.float64, device=m.device)
    etf = (eye - 1.0 / c) / math.sqrt(c - 1)
    return float((gram / norm - etf).norm())


def orthogonal_frame_distance(means: object) -> float:
    r"""``|| M^T M / ||M^T M||_F - I_C / sqrt(C) ||_F`` on the uncentred means ``M``.

    Bias-free MSE models (note 004 §4, M7) collapse the *uncentred* means to an orthogonal
    frame ``M^T M ∝ I``; zero exactly then, and in ``[0, 2]``.

    Args:
        means: ``(C, D)`` rows ``mu_c`` (not centred).
    """
    m = _rows(means, "means")
    c = m.shape[0]
    gram = m @ m.T
    norm = gram.norm()
    if float(norm) == 0:
        raise ValueError("means are all zero; the orthogonal-frame distance is undefined")
    eye = torch.eye(c, dtype=torch.float64, device=m.device)
    return float((gram / norm - eye / math.sqrt(c)).norm())


def _pair(W: object, centred_means: object) -> tuple[torch.Tensor, torch.Tensor]:
    w = _rows(W, "W")
    m = _rows(centred_means, "centred_means").to(w.device)
    if w.shape != m.shape:
        raise ValueError(
            f"W has shape {tuple(w.shape)} but centred_means {tuple(m.shape)}; "
            "expected both (n_classes, dim)"
        )
    return w, m


def self_duality(W: object, centred_means: object) -> float:
    r"""NC3 ``= || W^T/||W||_F - M̄/||M̄||_F ||_F^2`` (note 003 §2.3, MSE Fig. 6).

    Global Frobenius normalisation, bias excluded. Zero iff ``W ∝ M̄^T`` (positive factor).
    """
    w, m = _pair(W, centred_means)
    if float(w.norm()) == 0 or float(m.norm()) == 0:
        raise ValueError("W or the centred means are zero; self-duality is undefined")
    return float((w / w.norm() - m / m.norm()).pow(2).sum())


def self_duality_classwise(W: object, centred_means: object) -> float:
    r"""Formal NC3: ``Avg_c || w_c/||w_c|| - (mu_c - mu_G)/||mu_c - mu_G|| ||^2``.

    Per-class normalisation (note 003 §2.2); zero iff every ``w_c`` points along
    ``mu_c - mu_G``.
    """
    w, m = _pair(W, centred_means)
    diff = _unit_rows(w, "W") - _unit_rows(m, "centred_means")
    return float(diff.pow(2).sum(dim=1).mean())


# ---------------------------------------------------------------------------------------
# one-call functions of features


def nc1_trace_ratio(
    features: object,
    labels: object,
    *,
    n_classes: int | None = None,
    weighting: str = "auto",
) -> float:
    r"""PFC1 ``= Tr(Sigma_W) / Tr(Sigma_B)`` of ``(N, D)`` features (note 001 §2.5).

    Args:
        features: ``(N, D)`` tensor or array; rows are samples.
        labels: ``(N,)`` integer class labels.
        n_classes: default ``max(labels) + 1``; every class needs two samples.
        weighting: ``"auto"`` (default: ``"balanced"`` for equal class counts, where both
            coincide, else ``"sample"``), ``"balanced"`` (``pi_c = 1/C``) or ``"sample"``
            (``pi_c = n_c/N``). Imbalanced classes give one warning naming the counts.
    """
    return _pfc(features, labels, ("nc1_trace_ratio",), n_classes, weighting, True)[
        "nc1_trace_ratio"
    ]


def nc2_etf_distance(
    features: object,
    labels: object,
    *,
    n_classes: int | None = None,
    weighting: str = "auto",
) -> float:
    r"""PFC2 ``= || M̄^T M̄ / ||M̄^T M̄||_F - E ||_F`` of ``(N, D)`` features.

    See :func:`etf_distance`; ``mu_G = sum_c pi_c mu_c`` follows ``weighting``.

    Args:
        features: ``(N, D)`` tensor or array; rows are samples.
        labels: ``(N,)`` integer class labels.
        n_classes: default ``max(labels) + 1``; every class needs a sample.
        weighting: ``"auto"`` (default: ``"balanced"`` for equal class counts, where both
            coincide, else ``"sample"``), ``"balanced"`` (``pi_c = 1/C``) or ``"sample"``
            (``pi_c = n_c/N``). Imbalanced classes give one warning naming the counts.
    """
    return _pfc(features, labels, ("nc2_etf_distance",), n_classes, weighting, True)[
        "nc2_etf_distance"
    ]


def ncc_accuracy(
    features: object,
    labels: object,
    means: object | None = None,
    *,
    n_classes: int | None = None,
    weighting: str = "auto",
) -> float:
    r"""PFC3 ``= Avg_i 1[argmin_c ||h_i - mu_c||_2 = y_i]`` (note 001 §2.5, Eq. 9/19).

    ``sum_c pi_c (correct_c / n_c)``: with ``pi_c = n_c/N`` the fraction of correct
    samples (the paper's ``Avg_i``), with ``pi_c = 1/C`` the average over classes of the
    per-class accuracy; the same for balanced data. Ties go to the lowest class index.

    Args:
        features: ``(N, D)`` tensor or array.
        labels: ``(N,)`` integer labels.
        means: optional ``(C, D)`` reference class means (e.g. train means for test
            features); default: the class means of ``features``. With ``means`` a class may
            be absent from ``labels``; absent classes are skipped (and ignored when
            ``"auto"`` compares the counts).
        n_classes: default ``means.shape[0]`` or ``max(labels) + 1``.
        weighting: ``"auto"`` (default: ``"balanced"`` for equal class counts, where both
            coincide, else ``"sample"``), ``"balanced"`` (``pi_c = 1/C``) or ``"sample"``
            (``pi_c = n_c/N``). Imbalanced classes give one warning naming the counts.
    """
    weighting = check_choice("weighting", weighting, WEIGHTINGS)
    if means is None:
        return _pfc(features, labels, ("ncc_accuracy",), n_classes, weighting, True)["ncc_accuracy"]
    confusion = _ncc_confusion(features, labels, means, n_classes)
    counts = confusion.sum(dim=1)
    warn_imbalanced_counts({"": counts}, weighting)
    resolved = resolve_weighting(weighting, counts)
    counts = counts.to(torch.float64)
    weights = torch.ones_like(counts) if resolved == "balanced" else counts
    return weighted_accuracy(confusion, weights)


def _ncc_confusion(
    features: object, labels: object, means: object, n_classes: int | None
) -> torch.Tensor:
    """``(C, C)`` counts of (label, nearest reference mean) for the reference ``means``."""
    ref = check_features(means, "means")
    c = ref.shape[0] if n_classes is None else n_classes
    if ref.shape[0] != c:
        raise ValueError(f"means has {ref.shape[0]} rows, expected n_classes={c}")
    h = check_features(features, "features", ref.shape[1])
    y = check_labels("labels", labels, h.shape[0], c, device=h.device)
    if y.numel() == 0:
        raise ValueError("features is empty; expected at least one sample")
    pred = nearest_class_mean(h.to(torch.float64), ref.to(h.device, torch.float64))
    return torch.bincount(y * c + pred, minlength=c * c).view(c, c)


def pfc_values(
    features: object,
    labels: object,
    keys: Sequence[str] = PFC_KEYS,
    *,
    n_classes: int | None = None,
    weighting: str = "auto",
    warn: bool = True,
) -> dict[str, float]:
    r"""PFC1-3 (:func:`pfc_metrics`) of one ``(N, D)`` feature matrix, from one set of
    projected class statistics.

    Every class needs two samples for ``nc1_trace_ratio`` and one otherwise. ``weighting``
    is resolved from the class counts (:func:`collapselab.checks.resolve_weighting`);
    imbalanced classes give one warning naming the counts unless ``warn=False`` (for
    callers that evaluate many matrices and warn once themselves).
    """
    return _pfc(features, labels, keys, n_classes, weighting, warn)


def _pfc(
    features: object,
    labels: object,
    keys: Sequence[str],
    n_classes: int | None,
    weighting: str,
    warn: bool,
) -> dict[str, float]:
    """:func:`pfc_values`, warning (when ``warn``) two frames above this one."""
    c = infer_n_classes(labels, n_classes)
    stats = class_stats_from_features(
        features,
        labels,
        c,
        weighting=weighting,
        mode="projected",
        min_count=2 if "nc1_trace_ratio" in keys else 1,
        warn_imbalanced=False,
    )
    if warn:
        warn_imbalanced_counts({"": stats.counts}, stats.requested_weighting, stacklevel=4)
    return pfc_metrics(stats, keys)
