"""Feature-diversity metrics (paper 000, "Trap of Feature Diversity in the Learning of MLPs").

The paper tracks how similar the samples' features, feature gradients and weight changes
become during the first ("plateau") phase of MLP training. This module computes those
similarities exactly and in time linear in the number of samples:

* :func:`feature_cosine_similarity` (M2) and :func:`gradient_cosine_similarity` (M3): the
  mean cosine similarity over cross-class, within-class and all sample pairs, from sums of
  normalised vectors (see :mod:`collapselab.metrics._pairwise` for the identity); streamed,
  from the sums of a :class:`~collapselab.stats.CosineSimilarityAccumulator`
  (:func:`mean_cosine_similarity`);
* :func:`gating_similarity` (M14, R19): similarity of the ReLU on/off patterns;
* :func:`pseudo_neuron_similarity` (M4): the mean cosine between columns of a weight change;
* the common direction and its decompositions (M6, M7, Lemmas 1-2, R10, R12, R17), the
  top-k directions by recursive deflation and their strengths s_i (M8, Fig. 4, R11), the
  ε-singular-value trajectories (R12);
* phase detection on metric curves (M5, R9), analysis windows (:func:`select_window`);
* per-class accuracy (M13, R18) and the probe set's class check.

Conventions. Pairs are ordered pairs ``i != j`` (a sample is never paired with itself).
Inputs may be ``torch.Tensor`` or ``numpy.ndarray``; everything is accumulated in float64
on the input's device. Scalars come back as Python floats, per-class vectors as numpy
arrays, directions and decompositions as float64 tensors.

Zero vectors (a dead ReLU layer gives all-zero features; paper 000 note A25) have no
direction. Two rules are offered, chosen by ``zero_vectors``:

* ``"exclude"`` (default): zero vectors are left out of every pair; the number left out is
  reported in :attr:`PairwiseSimilarity.n_excluded`;
* ``"zero_cosine"``: the cosine of any pair containing a zero vector is defined as 0; the
  zero vectors stay in the pair counts and pull the means towards 0.

A vector counts as zero when its Euclidean norm is ``<= zero_atol`` (default 0: exactly
zero, which is what a dead ReLU produces).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np
import torch

from collapselab.checks import (
    ArrayLike,
    as_labels,
    as_matrix,
    as_real_tensor,
    check_choice,
    check_finite_stack,
    check_float,
    check_int,
)
from collapselab.metrics._common_direction import (
    CommonDirections,
    DirectionDecomposition,
    DirectionStrengths,
    ResidualTrajectory,
    SignConsistency,
    common_direction_decomposition,
    common_directions,
    deflation_directions,
    direction_strengths,
    primary_coefficients,
    residual_singular_values,
    residual_trajectory,
    sign_consistency,
)
from collapselab.metrics._pairwise import (
    PairwiseSimilarity,
    pair_counts,
    pair_dot_sums,
    similarities_from_sums,
    similarity_from_sums,
)
from collapselab.metrics._phases import PhaseDetection, detect_phases, select_window, smooth_curve
from collapselab.stats import CosineSimilarityAccumulator, GatingSimilarityAccumulator
from collapselab.stats.scratch import as_float64, scratch, stacked_float64, stacks_by

__all__ = [
    "CommonDirections",
    "DirectionDecomposition",
    "DirectionStrengths",
    "PairwiseSimilarity",
    "PhaseDetection",
    "ResidualTrajectory",
    "SignConsistency",
    "check_probe_classes",
    "column_cosine_means",
    "common_direction_decomposition",
    "common_directions",
    "deflation_directions",
    "detect_phases",
    "direction_strengths",
    "dominant_classes",
    "feature_cosine_similarity",
    "gating_similarity",
    "gradient_cosine_similarity",
    "mean_cosine_similarity",
    "mean_gating_similarity",
    "per_class_accuracy",
    "per_sample_pseudo_neuron_values",
    "primary_coefficients",
    "pseudo_neuron_similarities",
    "pseudo_neuron_similarity",
    "pseudo_neuron_similarity_per_sample",
    "residual_singular_values",
    "residual_trajectory",
    "select_window",
    "sign_consistency",
    "smooth_curve",
    "stacked_mean_cosine_similarity",
    "stacked_per_sample_pseudo_neuron_values",
    "weight_change_from_factors",
]

ZeroRule = Literal["exclude", "zero_cosine"]
_ZERO_RULES = ("exclude", "zero_cosine")


def mean_cosine_similarity(
    acc: CosineSimilarityAccumulator, zero_vectors: ZeroRule = "exclude"
) -> PairwiseSimilarity:
    """Mean pairwise cosine similarity over the cross-class, within-class and all pairs.

    From the per-class sums of unit vectors of ``acc`` (see :mod:`collapselab.metrics._pairwise`
    for the identity). Under ``zero_vectors="exclude"`` the zero vectors are left out of
    every pair; under ``"zero_cosine"`` they stay in the pair counts with cosine 0.

    Args:
        acc: a filled :class:`~collapselab.stats.CosineSimilarityAccumulator`.
        zero_vectors: ``"exclude"`` or ``"zero_cosine"`` (see the module docstring).
    """
    check_choice("zero_vectors", zero_vectors, _ZERO_RULES)
    return _cosine_from_sums(_filled(acc), "", zero_vectors)


def _filled(
    acc: CosineSimilarityAccumulator | GatingSimilarityAccumulator,
) -> dict[str, torch.Tensor]:
    if acc.is_empty:
        raise ValueError("the accumulator is empty; call update() with data first")
    return acc.state()


def _cosine_from_sums(
    sums: dict[str, torch.Tensor], prefix: str, zero_vectors: ZeroRule
) -> PairwiseSimilarity:
    """Mean cosines from the unit-vector sums ``sums[prefix + ...]`` of an accumulator."""
    stacked = {k: v[None] for k, v in sums.items() if k.startswith(prefix)}
    return stacked_mean_cosine_similarity(stacked, prefix, zero_vectors)[0]


def stacked_mean_cosine_similarity(
    sums: dict[str, torch.Tensor], prefix: str = "", zero_vectors: ZeroRule = "exclude"
) -> list[PairwiseSimilarity]:
    """:func:`mean_cosine_similarity` of ``L`` layers at once, from the stacked sums of
    :func:`collapselab.stats.pairwise.update_stacked` (``sums[prefix + "unit_sums"]``
    ``(L, C, D)``, the others ``(L, C)``): a few kernels over the stack and one transfer,
    the same values as one layer at a time."""
    check_choice("zero_vectors", zero_vectors, _ZERO_RULES)
    n_zero_c = sums[prefix + "n_zero"]
    n_zero = n_zero_c.sum(dim=-1).tolist()
    counts = sums[prefix + "n_nonzero"]
    if zero_vectors != "exclude":
        counts = counts + n_zero_c
    return similarities_from_sums(
        pair_dot_sums(sums[prefix + "unit_sums"], sums[prefix + "sq_norms"]),
        pair_counts(counts),
        counts,
        n_zero=n_zero,
        n_excluded=n_zero if zero_vectors == "exclude" else [0] * len(n_zero),
    )


def feature_cosine_similarity(
    features: ArrayLike,
    labels: ArrayLike,
    n_classes: int | None = None,
    zero_vectors: ZeroRule = "exclude",
    zero_atol: float = 0.0,
) -> PairwiseSimilarity:
    """Mean pairwise cosine similarity of features (paper 000, M2, Fig. 1-2, R6).

    .. math::
        \\mathrm{M2} = \\mathbb{E}_{(x, x')}\\,\\cos(F|_x, F|_{x'})

    over cross-class pairs (the paper's "different categories", :attr:`cross_class`), and
    also over within-class and all pairs. Computed exactly in O(N*D) from per-class sums
    of unit vectors, never from the N x N Gram matrix.

    Args:
        features: ``(N, D)`` features of one layer (post-ReLU per the paper's Eq. 1; pass
            pre-activations for the other reading of note A1).
        labels: ``(N,)`` integer class labels.
        n_classes: number of classes (default ``max(labels) + 1``).
        zero_vectors: zero-vector rule, ``"exclude"`` or ``"zero_cosine"``.
        zero_atol: norm at or below which a vector counts as zero.
    """
    f = as_matrix("features", features)
    _, c = as_labels("labels", labels, f.shape[0], n_classes, f.device)
    return mean_cosine_similarity(
        CosineSimilarityAccumulator(c, zero_atol).update(f, labels), zero_vectors
    )


def gradient_cosine_similarity(
    grads: ArrayLike,
    labels: ArrayLike,
    n_classes: int | None = None,
    zero_vectors: ZeroRule = "exclude",
    zero_atol: float = 0.0,
) -> PairwiseSimilarity:
    """Mean pairwise cosine similarity of per-sample feature gradients (paper 000, M3, R7).

    .. math::
        \\mathrm{M3}_c = \\mathbb{E}_{x \\ne x' \\in X_c}
            \\cos(\\dot F|_x, \\dot F|_{x'}),\\qquad \\dot F = \\partial \\ell / \\partial F

    The paper does not say which class c it plots (note A2); :attr:`per_class` holds every
    class and :attr:`within_class` their average, the default reading. Same computation as
    :func:`feature_cosine_similarity`, applied to the rows of ``grads``.

    Args:
        grads: ``(N, D)`` per-sample gradients of the loss with respect to the features
            (of the per-sample loss: the scale does not affect cosines, note A4).
        labels, n_classes, zero_vectors, zero_atol: as in :func:`feature_cosine_similarity`.
            A zero gradient row (a saturated or fully dead sample) follows ``zero_vectors``.
    """
    return feature_cosine_similarity(grads, labels, n_classes, zero_vectors, zero_atol)


def mean_gating_similarity(
    acc: GatingSimilarityAccumulator,
    measure: Literal["cosine", "agreement"] = "cosine",
    zero_vectors: ZeroRule = "exclude",
) -> PairwiseSimilarity:
    """Mean pairwise gating similarity from the sums of ``acc``; see :func:`gating_similarity`.

    ``"agreement"``: ``agree(a, b) = (<a, b> + <1 - a, 1 - b>) / h``, whose pair sums follow
    from the per-class sums of the patterns ``A_c`` and of their complements.
    """
    measure = check_choice("measure", measure, ("cosine", "agreement"))
    check_choice("zero_vectors", zero_vectors, _ZERO_RULES)
    s = _filled(acc)
    if measure == "cosine":
        return _cosine_from_sums(s, "cosine_", zero_vectors)
    on_sums, on_counts, n = s["on_sums"], s["on_counts"], s["counts"]
    h = on_sums.shape[1]
    if h == 0:
        raise ValueError("gates have zero units; agreement needs h >= 1")
    off_sums = n[:, None] - on_sums
    off_counts = n * h - on_counts
    dots = pair_dot_sums(on_sums, on_counts) + pair_dot_sums(off_sums, off_counts)
    counts = n.to(torch.int64)
    return similarity_from_sums(dots.scaled(1.0 / h), pair_counts(counts), counts, 0, 0)


def gating_similarity(
    gates: ArrayLike,
    labels: ArrayLike,
    n_classes: int | None = None,
    measure: Literal["cosine", "agreement"] = "cosine",
    zero_vectors: ZeroRule = "exclude",
) -> PairwiseSimilarity:
    """Mean pairwise similarity of ReLU gating patterns D^(l) (paper 000, M14, R19).

    The paper names the similarity of the gating states across samples as one cause of
    rising gradient similarity but never defines a metric. Two are offered:

    * ``"cosine"`` (default): the cosine of the 0/1 vectors,
      ``|a AND b| / sqrt(|a| |b|)``, the same quantity as M2 applied to gates; it looks
      only at units that are on. A sample with every unit off is a zero vector and follows
      ``zero_vectors``.
    * ``"agreement"``: the fraction of units in the same state,
      ``(<a, b> + <1-a, 1-b>) / h``; units off in both samples count as agreeing, so
      sparse layers score high. ``zero_vectors`` does not apply.

    Args:
        gates: ``(N, h)`` gating patterns, 0/1 or bool (``preact > 0`` for ReLU).
        labels: ``(N,)`` integer class labels.
        n_classes: number of classes (default ``max(labels) + 1``).
        measure: ``"cosine"`` or ``"agreement"``.
        zero_vectors: zero-vector rule for ``"cosine"``.
    """
    g = as_matrix("gates", gates)
    _, c = as_labels("labels", labels, g.shape[0], n_classes, g.device)
    return mean_gating_similarity(
        GatingSimilarityAccumulator(c).update(g, labels), measure, zero_vectors
    )


def pseudo_neuron_similarity(
    delta_w: ArrayLike, zero_vectors: ZeroRule = "exclude", zero_atol: float = 0.0
) -> float:
    """Mean cosine similarity between pseudo-neuron weight changes (paper 000, M4, Fig. 2c).

    For a weight change ``ΔW ∈ R^{h x d}`` of a layer with h outputs and d inputs, the
    pseudo-neurons are its d columns ``Δw_i ∈ R^h`` and

    .. math::
        \\mathrm{M4} = \\frac{1}{d(d-1)} \\sum_{i \\ne j} \\cos(\\Delta w_i, \\Delta w_j),

    computed in O(d*h) as ``(||sum_i u_i||^2 - sum_i ||u_i||^2) / (d(d-1))`` with
    ``u_i = Δw_i / ||Δw_i||``.

    Which ΔW (note A5, R8). A single sample's change ``ΔW|_x = -η g_x F_xᵀ`` has rank one,
    so all its columns are parallel and the metric is degenerate (it only sees the signs of
    ``F_x``; see :func:`pseudo_neuron_similarity_per_sample`). Pass an aggregated change
    instead: the actual mini-batch update ``W_{t+1} - W_t``, or the probe-set mean
    :func:`weight_change_from_factors`.

    Args:
        delta_w: ``(h, d)`` weight change (PyTorch ``nn.Linear.weight`` layout).
        zero_vectors: rule for zero columns (an input unit that is dead on every sample).
        zero_atol: norm at or below which a column counts as zero.

    Returns:
        The mean cosine; NaN when fewer than two columns are counted.
    """
    check_choice("zero_vectors", zero_vectors, _ZERO_RULES)
    atol = check_float("zero_atol", zero_atol, minimum=0.0)
    w = as_real_tensor("delta_w", delta_w, ndim=2, detach=True, allow_bool=True)
    return _column_cosine_mean(as_float64("m4_matrix", w), zero_vectors, atol)


def pseudo_neuron_similarities(
    delta_ws: Mapping[str, ArrayLike], zero_vectors: ZeroRule = "exclude", zero_atol: float = 0.0
) -> dict[str, float]:
    """:func:`pseudo_neuron_similarity` of several weight changes by name (the layers of a
    network), those of equal shape in a few kernels together (:func:`column_cosine_means`,
    stacks of at most :data:`~collapselab.stats.scratch.STACK_BYTES`): the same values, and
    the same errors.

    Args:
        delta_ws: ``{name: (h, d) weight change}``.
        zero_vectors, zero_atol: as in :func:`pseudo_neuron_similarity`.
    """
    check_choice("zero_vectors", zero_vectors, _ZERO_RULES)
    atol = check_float("zero_atol", zero_atol, minimum=0.0)
    tensors = [
        (name, as_real_tensor("delta_w", w, ndim=2, detach=True, allow_bool=True, finite=False))
        for name, w in delta_ws.items()
    ]
    stacks = stacks_by(
        tensors,
        key=lambda member: (tuple(member[1].shape), member[1].device),
        item_bytes=lambda key: 8 * key[0][0] * key[0][1],
    )
    out: dict[str, float] = {}
    for members in stacks:
        stack = stacked_float64("m4_matrices", [t for _, t in members])
        check_finite_stack("delta_w", stack)
        values = column_cosine_means(stack, zero_vectors, atol)
        out |= {name: v for (name, _), v in zip(members, values, strict=True)}
    return {name: out[name] for name in delta_ws}


def _column_cosine_mean(w: torch.Tensor, zero_vectors: ZeroRule, zero_atol: float) -> float:
    """M4 of a float64 ``(h, d)`` matrix (:func:`column_cosine_means` of one)."""
    return column_cosine_means(w[None], zero_vectors, zero_atol)[0]


def column_cosine_means(
    w: torch.Tensor, zero_vectors: ZeroRule = "exclude", zero_atol: float = 0.0
) -> list[float]:
    """M4 (:func:`pseudo_neuron_similarity`) of each float64 matrix of a stack ``(L, h, d)``.

    In a few whole-stack kernels (it runs at every measurement of a training run, for every
    layer): the unit columns ``u_i`` (zero columns stay zero), ``S = sum_i u_i`` and
    ``(||S||^2 - sum_i ||u_i||^2) / (m (m - 1))`` over the ``m`` counted columns; the pair
    identity of :mod:`collapselab.metrics._pairwise` for one class. The two dot products are
    taken per matrix (a batched dot sums in another order). The ``(L, h, d)`` temporaries
    live in one reused buffer (a fresh one per call costs page faults:
    :mod:`collapselab.stats.scratch`).
    """
    buffer = scratch("m4_columns", tuple(w.shape), w)
    norms = torch.mul(w, w, out=buffer).sum(dim=1).sqrt_()
    zero = norms <= zero_atol
    n_zero = zero.sum(dim=1).tolist()
    u = torch.div(w, torch.where(zero, 1.0, norms).unsqueeze(1), out=buffer)
    if any(n_zero):  # a column under zero_atol (or one whose norm underflowed) adds nothing
        u.masked_fill_(zero.unsqueeze(1), 0.0)
    totals = u.sum(dim=2)
    out = []
    for total, flat, zeros in zip(totals, u.reshape(w.shape[0], -1), n_zero, strict=True):
        m = float(w.shape[2] - zeros if zero_vectors == "exclude" else w.shape[2])
        pairs = m * (m - 1.0)
        out.append(float((total @ total - flat @ flat) / pairs) if pairs > 0 else float("nan"))
    return out


def pseudo_neuron_similarity_per_sample(
    pre_grads: ArrayLike,
    inputs: ArrayLike,
    zero_vectors: ZeroRule = "exclude",
    zero_atol: float = 0.0,
) -> float:
    """M4 evaluated literally on per-sample changes, averaged over samples (note A5).

    The paper writes ``E_{x∈X} cos(Δw_i|_x, Δw_j|_x)``. With ``ΔW|_x = -η g_x F_xᵀ`` the
    columns are ``Δw_i = -η F_x[i] g_x``, so ``cos(Δw_i, Δw_j) = sign(F_x[i]) sign(F_x[j])``
    whenever both are non-zero: the value depends on ``g_x`` only through whether it is zero,
    and equals 1 for post-ReLU inputs. With ``s = sign(F_x)`` over the m non-zero columns,
    the per-sample mean over pairs is ``((sum s)^2 - m) / (m (m - 1))`` (``"exclude"``) or
    ``((sum s)^2 - m) / (d (d - 1))`` (``"zero_cosine"``); it is returned to document the
    degeneracy, not as a diversity measure.

    Args:
        pre_grads: ``(N, h)`` pre-activation gradients ``g_x = D Ḟ`` of the layer's outputs.
        inputs: ``(N, d)`` the layer's inputs ``F_x^(l-1)``.
        zero_vectors, zero_atol: as in :func:`pseudo_neuron_similarity`; a column is zero
            when ``|F_x[i]| * ||g_x|| <= zero_atol``.

    Returns:
        The mean over samples whose value is defined (NaN when none is). η cancels.
    """
    values = per_sample_pseudo_neuron_values(pre_grads, inputs, zero_vectors, zero_atol)
    ok = ~torch.isnan(values)
    if not bool(ok.any()):
        return float("nan")
    return float(values[ok].mean())


def per_sample_pseudo_neuron_values(
    pre_grads: ArrayLike,
    inputs: ArrayLike,
    zero_vectors: ZeroRule = "exclude",
    zero_atol: float = 0.0,
) -> torch.Tensor:
    """Each sample's literal M4 of :func:`pseudo_neuron_similarity_per_sample`, ``(N,)``.

    NaN where it is undefined (fewer than two non-zero columns under ``"exclude"``); the
    streaming form (sum the defined values and count them across batches).
    """
    check_choice("zero_vectors", zero_vectors, _ZERO_RULES)
    atol = check_float("zero_atol", zero_atol, minimum=0.0)
    g = as_matrix("pre_grads", pre_grads)
    f = as_matrix("inputs", inputs, g.device)
    if f.shape[0] != g.shape[0]:
        raise ValueError(
            f"inputs has {f.shape[0]} rows but pre_grads has {g.shape[0]}; expected one per sample"
        )
    return stacked_per_sample_pseudo_neuron_values(g, f, zero_vectors, atol)


def stacked_per_sample_pseudo_neuron_values(
    pre_grads: torch.Tensor,
    inputs: torch.Tensor,
    zero_vectors: ZeroRule = "exclude",
    zero_atol: float = 0.0,
) -> torch.Tensor:
    """:func:`per_sample_pseudo_neuron_values` of float64 ``(N, h)`` and ``(N, d)``
    matrices, or of ``L`` layers at once, stacks ``(L, N, h)`` and ``(L, N, d)`` giving
    ``(L, N)`` (row-wise kernels: the same values as one layer at a time). Not checked."""
    f, g = inputs, pre_grads
    # (N, d) temporaries in one reused buffer (see column_cosine_means)
    buffer = scratch("m4_per_sample", tuple(f.shape), f)
    col_norms = torch.abs(f, out=buffer).mul_(torch.linalg.vector_norm(g, dim=-1).unsqueeze(-1))
    nonzero = col_norms > zero_atol
    s = torch.sign(f, out=buffer).mul_(nonzero)
    m = nonzero.sum(dim=-1).to(torch.float64)
    num = s.sum(dim=-1) ** 2 - m
    d = float(f.shape[-1])
    den = m * (m - 1.0) if zero_vectors == "exclude" else torch.full_like(m, d * (d - 1.0))
    ok = den > 0
    return torch.where(ok, num / torch.where(ok, den, 1.0), torch.nan)


def weight_change_from_factors(
    pre_grads: ArrayLike,
    inputs: ArrayLike,
    lr: float = 1.0,
    reduction: Literal["mean", "sum"] = "mean",
) -> torch.Tensor:
    """Aggregate per-sample weight changes from their rank-1 factors (paper 000, §2, R5, R8).

    .. math::
        \\Delta \\bar W = -\\eta \\,\\frac{1}{N} \\sum_x g_x F_x^\\top
                      = -\\eta\\, G^\\top F / N

    (``reduction="sum"`` drops the 1/N). The per-sample changes are never materialised.

    Args:
        pre_grads: ``(N, h)`` pre-activation gradients ``g_x``.
        inputs: ``(N, d)`` layer inputs ``F_x``.
        lr: learning rate η.
        reduction: ``"mean"`` or ``"sum"`` over samples.

    Returns:
        ``(h, d)`` float64 tensor in the layout of ``nn.Linear.weight``.
    """
    g = as_matrix("pre_grads", pre_grads)
    f = as_matrix("inputs", inputs, g.device)
    if f.shape[0] != g.shape[0]:
        raise ValueError(
            f"inputs has {f.shape[0]} rows but pre_grads has {g.shape[0]}; expected one per sample"
        )
    check_choice("reduction", reduction, ("mean", "sum"))
    out = -check_float("lr", lr) * (g.T @ f)
    if reduction == "mean":
        if g.shape[0] == 0:
            raise ValueError("pre_grads has no rows; the mean over samples is undefined")
        out = out / g.shape[0]
    return out


def check_probe_classes(
    labels: ArrayLike, n_classes: int, n_samples: int | None = None, what: str = "probe set"
) -> torch.Tensor:
    """The labels as int64 ``(n_samples,)``, after checking that every class occurs.

    Per-class diagnostics (M3 per class, Table 1, Fig. 5, Fig. 7) on a probe set that lacks a
    class would silently report NaN for it: raise instead, naming the missing classes.
    """
    n_classes = check_int("n_classes", n_classes, minimum=1)
    n = len(labels) if n_samples is None else n_samples  # type: ignore[arg-type]
    y, _ = as_labels("labels", labels, n, n_classes)
    missing = sorted(set(range(n_classes)) - set(torch.unique(y).tolist()))
    if missing:
        raise ValueError(
            f"the {what} has no sample of class {', '.join(map(str, missing))}; "
            f"expected every class 0..{n_classes - 1} (use a class-stratified probe set)"
        )
    return y


def per_class_accuracy(logits: ArrayLike, labels: ArrayLike, n_classes: int) -> np.ndarray:
    """Training accuracy of each class (paper 000, M13, Fig. 7, R18).

    ``acc[c] = |{x ∈ X_c : argmax f(x) = c}| / |X_c|``, at whatever iteration the logits were
    taken (the default in the paper: the end of phase 1). Assumption 1 reads "only a single
    or two categories" well above chance ``1 / n_classes``.

    Args:
        logits: ``(N, C)`` network outputs (or any scores whose argmax is the prediction).
        labels: ``(N,)`` integer labels; every class must occur (:func:`check_probe_classes`).
        n_classes: number of classes C (must equal the number of columns of ``logits``).
    """
    out = as_matrix("logits", logits)
    if out.shape[1] != n_classes:
        raise ValueError(f"logits has {out.shape[1]} columns but n_classes is {n_classes}")
    y = check_probe_classes(labels, n_classes, out.shape[0]).to(out.device)
    correct = (out.argmax(dim=1) == y).to(torch.float64)
    hits = torch.zeros(n_classes, dtype=torch.float64, device=out.device).index_add_(0, y, correct)
    counts = torch.bincount(y, minlength=n_classes).to(torch.float64)
    return (hits / counts).cpu().numpy()


def dominant_classes(accuracy: ArrayLike, factor: float = 2.0) -> np.ndarray:
    """Classes learnt well above chance: ``acc[c] > factor / C`` (paper 000, Assumption 1).

    The paper says "only a single or two categories" are above random guessing at the end
    of phase 1 but gives no threshold (note A23); ``factor`` is that threshold in units of
    chance ``1 / C`` (default: twice chance).

    Args:
        accuracy: ``(C,)`` per-class accuracies (:func:`per_class_accuracy`).
        factor: multiple of chance (> 0).
    """
    acc = np.asarray(accuracy, dtype=np.float64)
    if acc.ndim != 1 or acc.shape[0] == 0:
        raise ValueError(f"accuracy must be a (C,) vector of per-class accuracies, got {acc.shape}")
    factor = check_float("factor", factor, minimum=0.0, strict=True)
    return np.nonzero(acc > factor / acc.shape[0])[0]
