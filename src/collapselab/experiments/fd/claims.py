r"""Every claim of paper 000 (Liu et al., *Trap of feature diversity in the learning of
MLPs*), evaluated on a run's stored results (:mod:`.results`): the trajectories and phase
detection of its arms, the sweep groups in its manifest, the direction analysis.

* :data:`TWO_PHASE_CLAIMS` (``fd-two-phase``): M2, M3 and M4 rise while the loss is flat
  (§3, Fig. 1-2);
* :data:`OPERATION_CLAIMS` (``fd-operations``): normalisation, momentum (and the note's
  equal-effective-step control, an erratum demonstration), init variance, L2, stuck runs
  (§5, Fig. 8, App. B). The paper's explanation of the operations is "a high likelihood"
  argument, not a theorem; these claims test its stated directions on the measured
  phase-1 lengths;
* :data:`ROBUSTNESS_CLAIMS` (``fd-robustness``): the two phases across depth, width,
  learning rate, batch size and activation (App. A);
* :data:`DIRECTION_CLAIMS` (``fd-directions``): the common directions over phase 1 (§4,
  Figs 4-7, Table 1, Lemma 3, Theorem 2, Assumption 1).

The bounds (module constants) were set before the results were seen; the paper gives
numbers only for s_1/s_2 (about 10) and Table 1 (its weakest ratio 9.2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from collapselab.experiments.claims import (
    Claim,
    ClaimResult,
    Erratum,
    NotEvaluable,
    Premise,
    PremiseCheck,
    RunResults,
    check_rank_correlation,
    claim_from_check,
)
from collapselab.experiments.fd.preregistration import LEADING_PREMISE, REGISTER
from collapselab.experiments.fd.results import (
    arms,
    describe_lengths,
    group,
    m2_rise_in_phase1,
    phase,
    phase1_lengths,
    phase_curves,
    replicas,
    seed_lengths,
)
from collapselab.experiments.intervals import bootstrap_interval

__all__ = [
    "DIRECTION_CLAIMS",
    "OPERATION_CLAIMS",
    "ROBUSTNESS_CLAIMS",
    "TWO_PHASE_CLAIMS",
]

M2_RISE = 0.02
"""Smallest rise of M2 (cross-class feature cosine, phase layer) counted as a rise."""

M3_RISE = 0.05
"""Smallest rise of M3 (within-class gradient cosine, phase layer) counted as a rise."""

M4_RISE = 0.05
"""Smallest rise of M4 (probe-mean weight change, phase layer) counted as a rise."""

RANK_THRESHOLD = 0.8
"""|Spearman ρ| between a swept value and the phase-1 length counted as a monotone trend."""

S_RATIO = 9.0
"""S_primary / max_k S_k counted as "an order of magnitude" (the paper's weakest: 9.2)."""

STRENGTH_RATIO = 5.0
"""s_1 / s_2 counted as primary-direction dominance (the paper reports about 10)."""

LEMMA3_DOMINANCE = 10.0
"""Median |primary| / |noise| of Lemma 3's terms counted as "≫" (no threshold given, A13)."""

Outcome = tuple[bool, Mapping[str, float], float | None, str]
"""What a claim's check returns: verdict, values, threshold, detail (:func:`claim_from_check`)."""


# ---------------------------------------------------------------------- fd-two-phase
def _rise_before_drop(
    results: RunResults, key: str, margin: float, falls: bool = True
) -> tuple[bool, dict, str]:
    """Over every arm: ``key`` at the phase layer rises by >= ``margin`` between step 0 and
    the end of the loss plateau (before the loss drops by 5%), and, with ``falls``, falls by
    >= ``margin`` from its peak by the end of the run (the fall is reported either way)."""
    values: dict[str, float] = {}
    ok = True
    notes = []
    for arm in arms(results, "two_phase"):
        steps, curve = phase_curves(results, arm, key)
        end = phase(results, arm, "plateau_end")
        if end < 0:
            values[f"{arm}_left_phase1"] = 0.0
            notes.append(f"{arm}: the loss never left its plateau")
            ok = False
            continue
        before = curve[(steps <= end) & np.isfinite(curve)]
        rise = float(np.max(before) - before[0]) if before.size else float("nan")
        fall = float(np.nanmax(curve) - curve[-1])
        values |= {f"{arm}_rise": rise, f"{arm}_fall_after_peak": fall, f"{arm}_plateau_end": end}
        ok &= bool(rise >= margin and (fall >= margin or not falls))
        notes.append(f"{arm}: rises {rise:+.3f} by step {end:g}, falls {fall:.3f} after its peak")
    return ok, values, "; ".join(notes)


def _claim_rise(key: str, margin: float, falls: bool = True) -> Any:
    def check(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
        ok, values, detail = _rise_before_drop(results, key, margin, falls)
        return ok, values, margin, detail

    return check


TWO_PHASE_CLAIMS: list[Claim] = [
    claim_from_check(
        "m2-rises-before-loss-drops",
        "In phase 1 the loss barely moves while the cosine similarity of features of "
        "different categories keeps rising; it peaks at the phase boundary and falls after.",
        "§3, Fig. 1-2; Appendix A",
        f"on every dataset, M2 (cross-class feature cosine of the third linear layer) rises "
        f"by >= {M2_RISE} between step 0 and the end of the loss plateau (first step with "
        f"the loss 5% below its start), and ends >= {M2_RISE} below its peak",
        _claim_rise("feature_cosine_cross_class", M2_RISE),
    ),
    claim_from_check(
        "m3-rises-in-phase-1",
        "The cosine similarity of feature gradients of samples of the same category rises "
        "in phase 1 and falls after it.",
        "§3, Fig. 2(b)",
        f"on every dataset, M3 (within-class gradient cosine, class average, third linear "
        f"layer) rises by >= {M3_RISE} before the loss plateau ends and ends >= {M3_RISE} "
        "below its peak",
        _claim_rise("gradient_cosine_within_class", M3_RISE),
    ),
    claim_from_check(
        "m4-rises-in-phase-1",
        "The cosine similarity between the weight changes of different pseudo-neurons keeps "
        "increasing in the first phase (read on the probe-set mean weight change; the "
        "per-sample form is degenerate, note A5). Fig. 2(c) states the rise only, not a "
        "fall after the phase boundary.",
        "§3, Fig. 2(c)",
        f"on every dataset, M4 of the probe-mean weight change of the third linear layer "
        f"rises by >= {M4_RISE} before the loss plateau ends (its fall after the peak is "
        "reported, not required)",
        _claim_rise("m4_probe_mean", M4_RISE, falls=False),
    ),
]


# ---------------------------------------------------------------------- fd-operations
def _normalisation(results: RunResults) -> Outcome:
    values, lengths, left = phase1_lengths(results, "normalisation")
    base = lengths[0]
    rises = [m2_rise_in_phase1(results, arm) for _, arm in group(results, "normalisation")]
    ok = bool(left[0]) and all(
        length < base or rise < M2_RISE for length, rise in zip(lengths[1:], rises[1:], strict=True)
    )
    out = {f"{v}_phase1_length": float(x) for v, x in zip(values, lengths, strict=True)}
    out |= {f"{v}_m2_rise": r for v, r in zip(values, rises, strict=True)}
    detail = (
        f"phase-1 length {describe_lengths(values, lengths, left)}; M2 rise in phase 1 "
        + ", ".join(f"{v}: {r:+.3f}" for v, r in zip(values, rises, strict=True))
    )
    return ok, out, M2_RISE, detail


def _seeds_note(results: RunResults, name: str) -> str:
    """Which lengths of the group are medians over seeds: ``" (median of 3 seeds per
    arm)"``, ``" (median of 3 seeds for 0.0; one seed for the others)"``, or ``""``."""
    counts = {value: len(replicas(results, arm)) for value, arm in group(results, name)}
    n = max(counts.values())
    if n == 1:
        return ""
    if min(counts.values()) == n:
        return f" (median of {n} seeds per arm)"
    many = ", ".join(str(v) for v, k in counts.items() if k > 1)
    return f" (median of {n} seeds for {many}; one seed for the others)"


def _largest_rise(*arms: np.ndarray) -> float:
    """The largest step between consecutive arms' median phase-1 lengths (< 0: strictly
    decreasing)."""
    return float(np.max(np.diff([np.median(a) for a in arms])))


def _strictly_decreasing(name: str) -> Callable[[RunResults], ClaimResult]:
    def evaluate(results: RunResults) -> ClaimResult:
        values, lengths, left = phase1_lengths(results, name)
        out = {f"m{v}_phase1_length": float(x) for v, x in zip(values, lengths, strict=True)}
        out |= {f"m{k}": x for k, x in seed_lengths(results, name).items()}
        detail = (
            f"phase-1 length by momentum {describe_lengths(values, lengths, left)}"
            + _seeds_note(results, name)
        )
        if not left[-1]:  # the largest momentum never left phase 1: no decrease to time
            return ClaimResult.decided(False, out, None, detail)
        # each arm's seeds are its members (one seed: the interval is the point)
        arms = [
            np.array([phase(results, r, "phase1_length") for r in replicas(results, arm)])
            for _, arm in group(results, name)
        ]
        interval = bootstrap_interval(arms, _largest_rise)
        return ClaimResult.from_interval(interval, 0.0, "<", out, detail)

    return evaluate


def _rank(name: str, direction: str) -> Outcome:
    def check(results: RunResults) -> Outcome:
        values, lengths, left = phase1_lengths(results, name)
        result = check_rank_correlation(
            np.asarray(values, dtype=float), lengths, RANK_THRESHOLD, direction=direction
        )
        out = dict(result.values)
        out |= {f"{v}_phase1_length": float(x) for v, x in zip(values, lengths, strict=True)}
        out |= seed_lengths(results, name)
        detail = (
            f"{result.detail}; phase-1 length {describe_lengths(values, lengths, left)}"
            + _seeds_note(results, name)
        )
        return result.verdict == "holds", out, result.threshold, detail

    return check


def _stuck(results: RunResults) -> Outcome:
    (small, small_arm), (large, large_arm) = group(results, "stuck")
    stuck = phase(results, small_arm, "left_phase1") == 0
    trains = phase(results, large_arm, "left_phase1") == 1
    out = {
        "small_gamma_left_phase1": float(not stuck),
        "large_gamma_left_phase1": float(trains),
        "small_gamma_loss_end": phase(results, small_arm, "loss_end"),
        "large_gamma_loss_end": phase(results, large_arm, "loss_end"),
        "small_gamma_m2_rise": m2_rise_in_phase1(results, small_arm),
        "budget": phase(results, small_arm, "budget"),
    }
    detail = (
        f"γ = {small}: {'never left phase 1' if stuck else 'left phase 1'} in "
        f"{out['budget']:g} iterations (loss {out['small_gamma_loss_end']:.3f} at the "
        f"end; M2 rose {out['small_gamma_m2_rise']:+.3f}); γ = {large}: "
        f"{'left phase 1' if trains else 'never left phase 1'} (loss "
        f"{out['large_gamma_loss_end']:.3f} at the end)"
    )
    return bool(stuck and trains), out, None, detail


OPERATION_CLAIMS: list[Claim] = [
    claim_from_check(
        "normalisation-breaks-the-trap",
        "Batch normalisation (and the affine-free norm_1) after each linear layer alleviates "
        "the decrease of feature diversity: the feature similarity keeps decreasing instead "
        "of rising, and phase 1 is shorter.",
        "§5 (1), Fig. 8(a), S-Fig. 28",
        f"the plain MLP leaves phase 1, and each normalised arm either has a shorter phase 1 "
        f"or an M2 rise below {M2_RISE} during its phase 1",
        _normalisation,
    ),
    Claim(
        "momentum-shortens-phase-1",
        "A larger momentum m ∈ {0, 0.5, 0.9} usually alleviates the trap: a shorter phase 1.",
        "§5 (2), S-Fig. 12-17, S-Fig. 29(a)",
        REGISTER.reading("momentum-shortens-phase-1"),
        _strictly_decreasing("momentum"),
    ),
    Claim(
        "momentum-shortens-phase-1-at-equal-effective-lr",
        "The paper attributes the shorter phase 1 to momentum itself (it strengthens the "
        "influence of the noisy initial weights W_0, Eq. 27-28) and never separates it from "
        "the larger effective step η/(1 - m) that momentum brings at a fixed η. The note's "
        "control (A19) holds the effective step fixed: if momentum still shortens phase 1 "
        "the paper's attribution stands; if not, its momentum effect is the larger step. "
        "(An erratum demonstration of the note, not an empirical claim of the paper.)",
        "note 000 A19 (control of §5 (2), Eq. 27-28)",
        REGISTER.reading("momentum-shortens-phase-1-at-equal-effective-lr"),
        _strictly_decreasing("momentum_equal_lr"),
        erratum=Erratum(subject="attribution"),
    ),
    claim_from_check(
        "larger-init-variance-shortens-phase-1",
        "A larger variance of the initial weights (γ) gives a shorter phase 1.",
        "§5 (3), Fig. 8(b)",
        f"Spearman ρ(γ, phase-1 length) <= -{RANK_THRESHOLD} (a run that never leaves phase "
        "1 counts at the budget; a diverged run at its last finite step)",
        _rank("gamma", "decreasing"),
    ),
    claim_from_check(
        "smaller-l2-shortens-phase-1",
        "A smaller L2 coefficient λ alleviates the trap: a shorter phase 1.",
        "§5 (4), S-Fig. 18-23, S-Fig. 29(b)",
        f"Spearman ρ(λ, phase-1 length) >= {RANK_THRESHOLD}",
        _rank("l2", "increasing"),
    ),
    claim_from_check(
        "small-gamma-gets-stuck",
        "With γ = 0.1 the MLP gets stuck (the loss never drops); with γ = 1 it trains.",
        "Appendix B, S-Fig. 24",
        "the γ = 0.1 arm never leaves phase 1 within the budget and the γ = 1 arm does",
        _stuck,
    ),
]


# ---------------------------------------------------------------------- fd-robustness
def _persists(name: str) -> Outcome:
    def check(results: RunResults) -> Outcome:
        values, lengths, left = phase1_lengths(results, name)
        rises = [m2_rise_in_phase1(results, arm) for _, arm in group(results, name)]
        shown = [bool(ok) and r >= M2_RISE for ok, r in zip(left, rises, strict=True)]
        out = {f"{v}_m2_rise": r for v, r in zip(values, rises, strict=True)}
        out |= {f"{v}_phase1_length": float(x) for v, x in zip(values, lengths, strict=True)}
        detail = (
            f"phase-1 length {describe_lengths(values, lengths, left)}; M2 rise in phase "
            "1 " + ", ".join(f"{v}: {r:+.3f}" for v, r in zip(values, rises, strict=True))
        )
        return all(shown), out, M2_RISE, detail

    return check


_SWEEPS = {
    "depth": ("depths 5, 7, 9", "Appendix A.1-A.3"),
    "width": ("widths 64, 128, 256", "Appendix A.1-A.3"),
    "learning_rate": ("learning rates 0.1 and 0.01", "Appendix A.10"),
    "batch_size": ("batch sizes 100, 500, 1000", "Appendix A.9"),
    "activation": ("ReLU, LeakyReLU(0.1) and LeakyReLU(0.01)", "Appendix A.11"),
}

ROBUSTNESS_CLAIMS: list[Claim] = [
    claim_from_check(
        f"two-phases-across-{name.replace('_', '-')}",
        f"The two-phase phenomenon (M2 rising while the loss is flat, then the loss "
        f"falling) persists across {what}.",
        source,
        f"every arm of the {name.replace('_', ' ')} sweep leaves phase 1 within its budget "
        f"and its M2 rises by >= {M2_RISE} before",
        _persists(name),
    )
    for name, (what, source) in _SWEEPS.items()
]


# ---------------------------------------------------------------------- fd-directions
def _directions(results: RunResults) -> Mapping[str, np.ndarray]:
    if "directions" not in results.arrays:
        reason = results.manifest.get("directions") or "the run saved no direction analysis"
        raise NotEvaluable(str(reason))
    return results.arrays["directions"]


def _strengths(results: RunResults) -> tuple[bool, dict, float, str]:
    d = _directions(results)
    s = np.asarray(d["strengths"])
    ratios = s[:, 0] / s[:, 1]
    leading = [int(c) for c in d["leading"]]
    values = {f"class{c}_s1_over_s2": float(r) for c, r in zip(leading, ratios, strict=True)}
    detail = "; ".join(
        f"class {c}: s = {np.array2string(row, precision=3)} (s1/s2 = {r:.3g})"
        for c, row, r in zip(leading, s, ratios, strict=True)
    )
    return bool(np.all(ratios >= STRENGTH_RATIO)), values, STRENGTH_RATIO, detail


def _table(results: RunResults) -> tuple[bool, dict, float, str]:
    d = _directions(results)
    prim, noise = np.asarray(d["s_primary"]), np.asarray(d["s_noise"])
    ratio = prim / noise.max(axis=2)
    leading, layers = [int(c) for c in d["leading"]], [int(ell) for ell in d["table_layers"]]
    values = {
        f"class{c}_layer{ell}_ratio": float(ratio[i, j])
        for i, c in enumerate(leading)
        for j, ell in enumerate(layers)
    }
    detail = f"S_primary / max_k S_k over layers {layers}: " + "; ".join(
        f"class {c}: {np.array2string(ratio[i], precision=3)}" for i, c in enumerate(leading)
    )
    return bool(np.all(ratio >= S_RATIO)), values, S_RATIO, detail


def _m10(results: RunResults) -> tuple[bool, dict, float, str]:
    d = _directions(results)
    mean = np.asarray(d["m10_mean"])
    leading = [int(c) for c in d["leading"]]
    values = {f"class{c}_min_mean": float(mean[i].min()) for i, c in enumerate(leading)}
    detail = "; ".join(
        f"class {c}: mean cos(α_c ΔV, F) from {mean[i].min():.3f} to "
        f"{mean[i].max():.3f} over the window"
        for i, c in enumerate(leading)
    )
    return bool(np.all(mean > 0)), values, 0.0, detail


def _o(results: RunResults) -> tuple[bool, dict, float, str]:
    d = _directions(results)
    values, notes = {}, []
    for mode in ("neg_grad", "single_sample_step", "batch_step"):
        mean = np.asarray(d[f"o_{mode}_mean"])
        values[f"{mode}_min_mean"] = float(mean.min())
        values[f"{mode}_first_last"] = float(mean[-1] - mean[0])
        notes.append(f"{mode}: mean o from {mean[0]:.3f} to {mean[-1]:.3f} (min {mean.min():.3f})")
    ok = values["neg_grad_min_mean"] > 0
    return ok, values, 0.0, "; ".join(notes) + " (the claim reads neg_grad, the paper's ΔF ≈ -Ḟ)"


def _lemma3(results: RunResults) -> tuple[bool, dict, float, str]:
    d = _directions(results)
    primary, noise = np.abs(d["lemma3_primary"]), np.abs(d["lemma3_noise"])
    with np.errstate(divide="ignore", invalid="ignore"):
        median = float(np.median(primary / noise))
    return (
        median >= LEMMA3_DOMINANCE,
        {"median_dominance": median},
        LEMMA3_DOMINANCE,
        (f"median |primary| / |noise| over the probe samples at the window's end: {median:.3g}"),
    )


def _few_classes(results: RunResults) -> tuple[bool, dict, float, str]:
    d = _directions(results)
    acc = np.asarray(d["class_accuracy"])
    n = int(np.asarray(d["dominant"]).size)
    return (
        n <= 2,
        {"dominant_classes": float(n), "max_accuracy": float(acc.max())},
        2.0,
        (
            f"{n} classes above twice chance at the end of phase 1; per-class accuracy "
            f"{np.array2string(acc, precision=2)}"
        ),
    )


def _leading_learnt(results: RunResults) -> PremiseCheck:
    """Both leading classes above twice chance at the end of phase 1 (the premise)."""
    d = _directions(results)
    acc = np.asarray(d["class_accuracy"], dtype=np.float64)
    leading = [int(c) for c in d["leading"]]
    learnt = {int(c) for c in np.asarray(d["dominant"]).ravel()}
    twice_chance = 2.0 / acc.size
    values = {f"class{c}_accuracy": float(acc[c]) for c in leading}
    values["twice_chance"] = twice_chance
    detail = (
        "probe accuracy at the end of phase 1: "
        + ", ".join(f"class {c} {acc[c]:.3g}" for c in leading)
        + f" (learnt: above twice chance, {twice_chance:.3g})"
    )
    return PremiseCheck(all(c in learnt for c in leading), values, detail)


LEADING_LEARNT = Premise(LEADING_PREMISE, _leading_learnt)
"""The premise of the common-direction claims: the leading classes were learnt in phase 1."""


def _theorem2(results: RunResults) -> tuple[bool, dict, float, str]:
    d = _directions(results)
    hyp = np.asarray(d["theorem2_hypothesis"])
    leading = [int(c) for c in d["leading"]]
    values = {f"class{c}_hypothesis": float(hyp[c]) for c in leading}
    return (
        bool(np.all(hyp[leading] >= 0.9)),
        values,
        0.9,
        (
            "share of same-class pairs with the same sign of Cᵀ D Ḟ: "
            + ", ".join(f"class {c}: {hyp[c]:.3f}" for c in leading)
        ),
    )


DIRECTION_CLAIMS: list[Claim] = [
    claim_from_check(
        "primary-direction-dominates-average-change",
        "The strength of the primary common direction of the average weight change is "
        "about ten times that of the second; the others are small.",
        "§4.2, Fig. 4, S-Fig. 25",
        REGISTER.reading("primary-direction-dominates-average-change"),
        _strengths,
        premise=LEADING_LEARNT,
    ),
    claim_from_check(
        "s-primary-order-of-magnitude-above-s-k",
        "S_primary is about an order of magnitude above each noise strength S_k.",
        "§4.3, Table 1",
        REGISTER.reading("s-primary-order-of-magnitude-above-s-k"),
        _table,
        premise=LEADING_LEARNT,
    ),
    claim_from_check(
        "feature-similar-to-delta-v",
        "cos(α_c ΔV, F) is positive over the samples of the category in phase 1.",
        "§4.2, Fig. 5",
        REGISTER.reading("feature-similar-to-delta-v"),
        _m10,
        premise=LEADING_LEARNT,
    ),
    claim_from_check(
        "o-positive",
        "For each sample, o^(l) = cos(ΔV, F) cos(V, ΔF) is positive and usually increases.",
        "§4.2, Lemma 3, Fig. 6, S-Fig. 26",
        REGISTER.reading("o-positive"),
        _o,
        premise=LEADING_LEARNT,
    ),
    claim_from_check(
        "lemma3-primary-term-dominates",
        "At the end of phase 1 Lemma 3's primary term is much larger than its noise term.",
        "Lemma 3, S-Fig. 27",
        REGISTER.reading("lemma3-primary-term-dominates"),
        _lemma3,
        premise=LEADING_LEARNT,
    ),
    claim_from_check(
        "one-or-two-classes-learnt-in-phase-1",
        "At the end of phase 1 only one or two categories are well above chance.",
        "Assumption 1, Fig. 7",
        "at most 2 classes with a probe accuracy above twice chance (note A23)",
        _few_classes,
    ),
    claim_from_check(
        "theorem2-sign-consistency",
        "Same-category samples share the sign of Cᵀ D Ḟ (Theorem 2's hypothesis).",
        "Theorem 2",
        REGISTER.reading("theorem2-sign-consistency"),
        _theorem2,
        premise=LEADING_LEARNT,
    ),
]
