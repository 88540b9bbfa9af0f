"""Every claim of paper 001, with the thresholds fixed before any run (module constants).

A claim is evaluated on a run's stored rows and arrays
(:class:`~collapselab.experiments.RunResults`):

* :data:`TOY_CLAIMS` (``pfc-toy``, Fig. 1): PFC1 falls along the straight lines, and the end
  is collapsed;
* :data:`TRAINING_CLAIMS` (``pfc-training-fc``, ``pfc-training-conv``, §IV-A, Figs. 2-3):
  the last layer NCC separable, PFC1-3 monotone in depth at the end and not at the start,
  Theorem 1's S >= 0, the geodesic prediction within a band and monotone;
* :data:`MUFM_CLAIMS` (``pfc-mufm``, Fig. 4) and :data:`SWEEP_CLAIMS` (``pfc-lambda-sweep``,
  Fig. 5): the UFM exactly collapsed, the MUFM more collapsed than the data but not exactly,
  the trends in λ, and the paper's literal solver against a converged one;
* :data:`THEOREM_CLAIMS` (``pfc-theorems``, §III): Theorems 1-4, Theorem 3 as published and
  corrected.

Claims marked with an :class:`~collapselab.experiments.Erratum` run what the paper printed
where note 001 found it wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from collapselab.experiments.claims import (
    AcrossLayers,
    Claim,
    ClaimResult,
    Erratum,
    Final,
    NotEvaluable,
    RunResults,
    rank_correlation,
    value_above,
)
from collapselab.experiments.pfc.theorems import SPLIT
from collapselab.metrics import PFC_KEYS

__all__ = [
    "BAND",
    "DEPTH_RHO",
    "EARLY_MARGIN",
    "EXACT_PFC1",
    "EXACT_PFC2",
    "FLOW_RATIO",
    "MONOTONE_TOL",
    "MUFM_CLAIMS",
    "NOT_COLLAPSED",
    "OBJECTIVE_GAP",
    "SAME_SOLUTION",
    "SPACING",
    "SWEEP_CLAIMS",
    "SWEEP_RHO",
    "THEOREM_CLAIMS",
    "TOY_CLAIMS",
    "TOY_TOL",
    "TRAINING_CLAIMS",
]

Evaluate = Callable[[RunResults], ClaimResult]


def _row_value(results: RunResults, metric: str, layer: str, split: str = "train") -> float:
    """The last logged value of ``metric`` at ``layer`` (NotEvaluable when absent)."""
    rows = results.rows(metric, split=split, layer=layer)
    return float(rows.sort_values("step", kind="stable")["value"].iloc[-1])


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (NaN for a constant series)."""
    from scipy import stats

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def _max_rise(values: np.ndarray) -> float:
    """The largest increase between neighbours (<= 0 for a non-increasing series)."""
    values = np.asarray(values, dtype=np.float64)
    return float(np.max(np.diff(values))) if values.size > 1 else 0.0


# ---------------------------------------------------------------------------------------
# Fig. 1 (pfc-toy)

TOY_TOL = 1e-12


def _monotone(results: RunResults) -> ClaimResult:
    s = float(results.array("toy", "s"))
    pfc1 = results.array("toy", "curve_nc1_trace_ratio")
    rise = _max_rise(pfc1) / pfc1[0]
    ok = s >= 0 and rise <= TOY_TOL
    values = {"theorem1_s": s, "pfc1_max_relative_rise": rise, "pfc1_start": float(pfc1[0])}
    detail = f"S = {s:.4g} (>= 0?); largest rise of PFC1 along t {rise:.3g} (<= {TOY_TOL:g}?)"
    return ClaimResult.decided(ok, values, TOY_TOL, detail)


def _collapsed_at_end(results: RunResults) -> ClaimResult:
    pfc1 = float(results.array("toy", "curve_nc1_trace_ratio")[-1])
    pfc2 = float(results.array("toy", "curve_nc2_etf_distance")[-1])
    pfc3 = float(results.array("toy", "curve_ncc_accuracy")[-1])
    ok = pfc1 <= TOY_TOL and pfc2 <= 1e-6 and pfc3 == 1.0
    values = {"pfc1": pfc1, "pfc2": pfc2, "pfc3": pfc3}
    detail = f"at t = 1: PFC1 {pfc1:.3g}, PFC2 {pfc2:.3g}, PFC3 {pfc3:g}"
    return ClaimResult.decided(ok, values, TOY_TOL, detail)


TOY_CLAIMS: list[Claim] = [
    Claim(
        name="toy-pfc1-decreases-along-the-line",
        statement="In the illustration, features become more collapsed along the straight "
        "line: PFC1 decreases monotonically (Theorem 1 with S >= 0).",
        source="001 Fig. 1, §III-B Theorem 1",
        threshold=f"S >= 0 and no rise of PFC1 larger than {TOY_TOL:g} x PFC1(0) on the t grid",
        evaluate=_monotone,
    ),
    Claim(
        name="toy-collapses-at-the-end",
        statement="At the end of the line the features are collapsed onto a simplex ETF.",
        source="001 Fig. 1, Eq. 10",
        threshold=f"at t = 1: PFC1 <= {TOY_TOL:g}, PFC2 <= 1e-6, PFC3 = 1",
        evaluate=_collapsed_at_end,
    ),
]


# ---------------------------------------------------------------------------------------
# Figs. 2-3 (pfc-training-fc, pfc-training-conv)


DEPTH_RHO = 0.8
"""Spearman correlation with depth a PFC metric must reach at the final epoch (|rho|).

The paper claims monotonicity (rho = -1 for PFC1/PFC2, +1 for PFC3); 0.8 tolerates one
adjacent swap among five to seven layers and ties of PFC3 at 1 behind the effective depth.
"""

EARLY_MARGIN = 0.5
"""How much weaker (less negative) PFC1's depth correlation must be early in training than
at the final epoch for "the order is not yet established" to hold."""

BAND = 0.25
"""Largest deviation of the geodesic prediction from a measured layer, as a fraction of the
measured values' span across layers (PFC1 on a log10 scale, as plotted). The paper prints
no numbers (note §5.1): its Fig. 3 shows the blue curve "predicting" the green points at
the scale of the panels, which we read as within a quarter of the panel's span."""

MONOTONE_TOL = 1e-9
"""Numerical slack of "non-increasing" for the predicted curves (relative to the value at
t = 0 for PFC1, absolute for PFC2 in [0, 2]); PFC3 is an exact count."""

_IV_A = "001 §IV-A"


def _last_layer_separable(results: RunResults) -> ClaimResult:
    _, acc = AcrossLayers("ncc_accuracy")(results)
    last = float(acc[-1])
    values: dict[str, float] = {"last_layer_ncc_accuracy": last, "n_blocks": float(acc.size - 1)}
    try:
        values["effective_depth"] = Final("effective_depth")(results)
    except NotEvaluable:
        values["effective_depth"] = math.nan
    zero = results.zero_error_epoch()
    values["zero_error_epoch"] = math.nan if zero is None else float(zero)
    holds = last == 1.0
    detail = (
        f"last measured layer: train NCC accuracy {last:.6g} ({'=' if holds else '<'} 1); "
        f"effective depth (eps 0.01) {values['effective_depth']:g} of {acc.size - 1} blocks; "
        f"zero training error from epoch {values['zero_error_epoch']:g}"
    )
    return ClaimResult.decided(holds, values, 1.0, detail)


def _early_weaker(epoch: int) -> Evaluate:
    def evaluate(results: RunResults) -> ClaimResult:
        x_f, y_f = AcrossLayers("nc1_trace_ratio")(results)
        x_e, y_e = AcrossLayers("nc1_trace_ratio", epoch=epoch)(results)
        rho_final, rho_early = _spearman(x_f, y_f), _spearman(x_e, y_e)
        values = {"rho_early": rho_early, "rho_final": rho_final, "early_epoch": float(epoch)}
        if not (math.isfinite(rho_final) and math.isfinite(rho_early)):
            raise NotEvaluable("a rank correlation is undefined (constant PFC1 across layers)")
        gap = rho_early - rho_final
        values["rho_early_minus_final"] = gap
        holds = gap >= EARLY_MARGIN
        detail = (
            f"Spearman rho of PFC1 with depth: {rho_early:.3g} at epoch {epoch}, "
            f"{rho_final:.3g} at the final epoch; difference {gap:.3g} "
            f"({'>=' if holds else '<'} {EARLY_MARGIN:g})"
        )
        return ClaimResult.decided(holds, values, EARLY_MARGIN, detail)

    return evaluate


def _span(values: np.ndarray) -> float:
    return float(np.max(values) - np.min(values))


def _band(results: RunResults) -> ClaimResult:
    layers = [str(s) for s in results.array("geodesic", "layers")]
    values: dict[str, float] = {}
    worst = 0.0
    parts = []
    for key in PFC_KEYS:
        _, observed = AcrossLayers(key, layers=layers)(results)
        predicted = results.array("geodesic", f"predicted_{key}")
        if key == "nc1_trace_ratio":
            if np.any(observed <= 0) or np.any(predicted <= 0):
                raise NotEvaluable("PFC1 is not positive at every layer; no log scale")
            observed, predicted = np.log10(observed), np.log10(predicted)
        span = _span(observed)
        if span == 0:
            raise NotEvaluable(f"{key} is constant across layers; the band is undefined")
        deviation = float(np.max(np.abs(predicted - observed))) / span
        values[f"{key}_deviation"] = deviation
        worst = max(worst, deviation)
        parts.append(f"{key} {deviation:.3g}")
    values["max_deviation"] = worst
    holds = worst <= BAND
    detail = (
        "max |prediction - measured| / span of the measured layers (PFC1 in log10): "
        + ", ".join(parts)
        + f" ({'<=' if holds else '>'} {BAND:g})"
    )
    return ClaimResult.decided(holds, values, BAND, detail)


def _prediction_monotone(results: RunResults) -> ClaimResult:
    pfc1 = results.array("geodesic", "curve_nc1_trace_ratio")
    pfc2 = results.array("geodesic", "curve_nc2_etf_distance")
    pfc3 = results.array("geodesic", "curve_ncc_accuracy")
    rise1 = _max_rise(pfc1) / abs(pfc1[0]) if pfc1[0] != 0 else _max_rise(pfc1)
    rise2 = _max_rise(pfc2)
    drop3 = _max_rise(-pfc3)
    values = {"pfc1_max_relative_rise": rise1, "pfc2_max_rise": rise2, "pfc3_max_drop": drop3}
    ok = rise1 <= MONOTONE_TOL and rise2 <= MONOTONE_TOL and drop3 <= 0
    detail = (
        f"along the line from layer 0 to the last layer: largest rise of PFC1 {rise1:.3g} "
        f"(relative), of PFC2 {rise2:.3g}, largest drop of PFC3 {drop3:.3g}; monotone needs "
        f"rises <= {MONOTONE_TOL:g} and no drop"
    )
    return ClaimResult.decided(ok, values, MONOTONE_TOL, detail)


TRAINING_CLAIMS: list[Claim] = [
    Claim(
        name="last-layer-ncc-separable",
        statement=(
            "The setting of the paper: at the final epoch the last layer is NCC separable on "
            "the training set (PFC3 = 1), so the network is in the terminal phase."
        ),
        source="001 §II-B, §IV-A (architectures chosen so that the last layer is NCC separable)",
        threshold="train NCC accuracy of the last measured layer at the final epoch == 1",
        evaluate=_last_layer_separable,
    ),
    rank_correlation(
        name="pfc1-decreases-with-depth",
        statement="At the final epoch PFC1 (Tr Σ_W / Tr Σ_B) decreases with depth.",
        source=f"{_IV_A}, Fig. 3 (PFC conjecture, Eq. 17)",
        series=AcrossLayers("nc1_trace_ratio"),
        threshold=DEPTH_RHO,
        direction="decreasing",
    ),
    rank_correlation(
        name="pfc2-decreases-with-depth",
        statement="At the final epoch PFC2 (distance of the class means to a simplex ETF) "
        "decreases with depth.",
        source=f"{_IV_A}, Fig. 3 (PFC conjecture, Eq. 18)",
        series=AcrossLayers("nc2_etf_distance"),
        threshold=DEPTH_RHO,
        direction="decreasing",
    ),
    rank_correlation(
        name="pfc3-increases-with-depth",
        statement="At the final epoch PFC3 (NCC accuracy) increases with depth towards 1.",
        source=f"{_IV_A}, Fig. 3 (PFC conjecture, Eq. 19)",
        series=AcrossLayers("ncc_accuracy"),
        threshold=DEPTH_RHO,
        direction="increasing",
    ),
    Claim(
        name="order-not-established-at-initialization",
        statement=(
            "Early in training the per-layer metrics are not yet ordered by depth: at the "
            "random initialization PFC1's depth order is weaker than at the final epoch."
        ),
        source=f"{_IV_A}, Fig. 2 ('these metrics start at random initialization')",
        threshold=(
            f"Spearman rho(PFC1, depth) at epoch 0 >= rho at the final epoch + {EARLY_MARGIN:g}"
        ),
        evaluate=_early_weaker(0),
    ),
    Claim(
        name="order-not-established-after-first-epoch",
        statement=(
            "Early in training the per-layer metrics are not yet ordered by depth: after the "
            "first epoch PFC1's depth order is weaker than at the final epoch."
        ),
        source=f"{_IV_A}, Fig. 2",
        threshold=(
            f"Spearman rho(PFC1, depth) at epoch 1 >= rho at the final epoch + {EARLY_MARGIN:g}"
        ),
        evaluate=_early_weaker(1),
    ),
    value_above(
        name="theorem1-s-nonnegative",
        statement=(
            "Theorem 1's assumption holds on the trained network: S = Σ_k <h̃_k^(0), h̃_k^(L)> "
            ">= 0 between layer 0 and the last layer."
        ),
        source=(
            "001 §III-B, Theorem 1 ('Empirical result in Section IV-A shows that this "
            "assumption is valid')"
        ),
        value=Final("theorem1_s"),
        threshold=0.0,
    ),
    Claim(
        name="geodesic-within-band",
        statement=(
            "The geodesic (straight-line) prediction from layer 0 to the last layer predicts "
            "the measured PFC metrics of the intermediate layers at their relative positions."
        ),
        source=f"{_IV_A}, Fig. 3 (blue curve vs green points)",
        threshold=(
            f"for PFC1 (log10), PFC2 and PFC3: max over layers |predicted - measured| <= "
            f"{BAND:g} x the span of the measured values across layers"
        ),
        evaluate=_band,
    ),
    Claim(
        name="geodesic-prediction-monotone",
        statement="The predicted curves are monotone: PFC1 and PFC2 decrease, PFC3 increases.",
        source=f"{_IV_A}, Fig. 3 caption ('both observations and predictions are monotonic')",
        threshold=(
            f"on the t grid: rises of PFC1 (relative to t = 0) and PFC2 <= {MONOTONE_TOL:g}, "
            "no drop of PFC3"
        ),
        evaluate=_prediction_monotone,
    ),
]
"""The claims of a PFC training run, thresholds fixed before any run (module constants)."""


# ---------------------------------------------------------------------------------------
# Fig. 4 (pfc-mufm)


EXACT_PFC1 = 1e-8
"""PFC1 below which a solution counts as exactly collapsed (NC1). The data's PFC1 is of order
10; the solver stops at a gradient norm of 1e-9, and PFC1, a ratio of squared norms, is
second order in the remaining feature error."""

EXACT_PFC2 = 1e-4
"""PFC2 below which the class means count as an exact simplex ETF. PFC2 is a norm of the
normalised Gram matrix's deviation, first order in the remaining feature error, hence a
looser bound than PFC1's (the data's PFC2 is of order 0.1-1)."""

NOT_COLLAPSED = 0.01
"""PFC1 and PFC2 at or above which an MUFM optimum is "not exact collapse" (Fig. 4a)."""

SWEEP_RHO = 0.9
"""Spearman correlation with λ/λ_W a sweep trend must reach (|rho|; 1 is monotone)."""


def _exact_collapse(method: str) -> Evaluate:
    def evaluate(results: RunResults) -> ClaimResult:
        layer = f"ufm_{method}"
        v = {k: _row_value(results, k, layer) for k in PFC_KEYS}
        ok = (
            v["nc1_trace_ratio"] <= EXACT_PFC1
            and v["nc2_etf_distance"] <= EXACT_PFC2
            and v["ncc_accuracy"] == 1.0
        )
        detail = (
            f"UFM ({method} solver): PFC1 {v['nc1_trace_ratio']:.3g} (<= {EXACT_PFC1:g}?), "
            f"PFC2 {v['nc2_etf_distance']:.3g} (<= {EXACT_PFC2:g}?), "
            f"PFC3 {v['ncc_accuracy']:.6g} (== 1?)"
        )
        return ClaimResult.decided(ok, v, EXACT_PFC1, detail)

    return evaluate


def _more_collapsed(pfc: dict[str, float], data: dict[str, float]) -> tuple[bool, str]:
    ok = (
        pfc["nc1_trace_ratio"] < data["nc1_trace_ratio"]
        and pfc["nc2_etf_distance"] < data["nc2_etf_distance"]
        and pfc["ncc_accuracy"] > data["ncc_accuracy"]
    )
    text = (
        f"PFC1 {pfc['nc1_trace_ratio']:.4g} vs data {data['nc1_trace_ratio']:.4g}, "
        f"PFC2 {pfc['nc2_etf_distance']:.4g} vs {data['nc2_etf_distance']:.4g}, "
        f"PFC3 {pfc['ncc_accuracy']:.4g} vs {data['ncc_accuracy']:.4g}"
    )
    return ok, text


def _mufm_vs_data(method: str) -> Evaluate:
    def evaluate(results: RunResults) -> ClaimResult:
        data = {k: _row_value(results, k, "data") for k in PFC_KEYS}
        pfc = {k: _row_value(results, k, f"mufm_{method}") for k in PFC_KEYS}
        ok, text = _more_collapsed(pfc, data)
        values = {f"mufm_{k}": v for k, v in pfc.items()} | {
            f"data_{k}": v for k, v in data.items()
        }
        detail = f"MUFM ({method} solver): {text}; all three must be more collapsed"
        return ClaimResult.decided(ok, values, None, detail)

    return evaluate


def _mufm_not_collapsed(results: RunResults) -> ClaimResult:
    pfc1 = _row_value(results, "nc1_trace_ratio", "mufm_converged")
    pfc2 = _row_value(results, "nc2_etf_distance", "mufm_converged")
    ok = pfc1 >= NOT_COLLAPSED and pfc2 >= NOT_COLLAPSED
    detail = f"converged MUFM: PFC1 {pfc1:.4g}, PFC2 {pfc2:.4g}; both >= {NOT_COLLAPSED:g}?"
    values = {"nc1_trace_ratio": pfc1, "nc2_etf_distance": pfc2}
    return ClaimResult.decided(ok, values, NOT_COLLAPSED, detail)


def _converged_below_literal(results: RunResults) -> ClaimResult:
    values, parts, ok = {}, [], True
    for name in ("ufm", "mufm"):
        conv = _row_value(results, "objective", f"{name}_converged")
        lit = _row_value(results, "objective", f"{name}_literal")
        values[f"{name}_converged"], values[f"{name}_literal"] = conv, lit
        ok &= conv < lit
        parts.append(f"{name.upper()} {conv:.6g} vs {lit:.6g}")
    detail = "objective, converged vs literal: " + "; ".join(parts)
    return ClaimResult.decided(ok, values, None, detail)


MUFM_CLAIMS: list[Claim] = [
    Claim(
        name="ufm-exact-collapse",
        statement="The UFM optimum is (numerically) exact neural collapse: PFC metrics many "
        "orders of magnitude below the data's (Fig. 4, log scale).",
        source="001 §IV-B, Fig. 4",
        threshold=(f"converged UFM: PFC1 <= {EXACT_PFC1:g}, PFC2 <= {EXACT_PFC2:g} and PFC3 == 1"),
        evaluate=_exact_collapse("converged"),
    ),
    Claim(
        name="ufm-exact-collapse-literal-solver",
        statement="The same with the paper's own solver (plain GD, lr 0.1, 5e4 steps).",
        source="001 §IV-B, Fig. 4",
        threshold=f"literal UFM: PFC1 <= {EXACT_PFC1:g}, PFC2 <= {EXACT_PFC2:g}, PFC3 == 1",
        evaluate=_exact_collapse("literal"),
        erratum=Erratum(subject="solver"),
    ),
    Claim(
        name="mufm-more-collapsed-than-data",
        statement="MUFM optima are more collapsed than the data on all three metrics "
        "(PFC1, PFC2 below X's, PFC3 above).",
        source="001 §IV-B, Fig. 4; Theorem 4",
        threshold="converged MUFM: PFC1 < PFC1(X), PFC2 < PFC2(X) and PFC3 > PFC3(X)",
        evaluate=_mufm_vs_data("converged"),
    ),
    Claim(
        name="mufm-more-collapsed-than-data-literal-solver",
        statement="The same with the paper's own solver.",
        source="001 §IV-B, Fig. 4",
        threshold="literal MUFM: PFC1 < PFC1(X), PFC2 < PFC2(X) and PFC3 > PFC3(X)",
        evaluate=_mufm_vs_data("literal"),
        erratum=Erratum(subject="solver"),
    ),
    Claim(
        name="mufm-not-exact-collapse",
        statement="MUFM optima are not exact neural collapse (unlike the UFM's).",
        source="001 §IV-B, Fig. 4a",
        threshold=f"converged MUFM: PFC1 >= {NOT_COLLAPSED:g} and PFC2 >= {NOT_COLLAPSED:g}",
        evaluate=_mufm_not_collapsed,
    ),
    Claim(
        name="converged-below-literal",
        statement="The converged solver reaches a lower objective than the paper's literal "
        "gradient descent (note §5.2: the literal procedure is not converged).",
        source="note 001 §5.2 (on §IV-B's solver)",
        threshold="objective(converged) < objective(literal) for the UFM and the MUFM",
        evaluate=_converged_below_literal,
        erratum=Erratum(confirmed_when="holds", subject="solver"),
    ),
]


# ---------------------------------------------------------------------------------------
# Fig. 5 claims


def _sweep_trend(key: str, direction: str) -> Evaluate:
    def evaluate(results: RunResults) -> ClaimResult:
        ratio = results.array("sweep", "ratio")
        values = results.array("sweep", f"converged_{key}")
        if ratio.size < 3:
            raise NotEvaluable(f"{ratio.size} λ values; a trend needs at least 3")
        rho = _spearman(ratio, values)
        if not np.isfinite(rho):
            raise NotEvaluable(f"{key} is constant over the sweep")
        signed = rho if direction == "increasing" else -rho
        ok = signed >= SWEEP_RHO
        bound = SWEEP_RHO if direction == "increasing" else -SWEEP_RHO
        detail = (
            f"Spearman rho({key}, λ/λ_W) = {rho:.4g} over {ratio.size} values from "
            f"{ratio[0]:.3g} to {ratio[-1]:.3g}; {key} from {values[0]:.4g} to {values[-1]:.4g} "
            f"(need {'>=' if direction == 'increasing' else '<='} {bound:g})"
        )
        out = {"spearman": rho, "first": float(values[0]), "last": float(values[-1])}
        return ClaimResult.decided(ok, out, bound, detail)

    return evaluate


def _sweep_vs_data(results: RunResults) -> ClaimResult:
    ratio = results.array("sweep", "ratio")
    data = {k: float(results.array("sweep", f"data_{k}")) for k in PFC_KEYS}
    failing = []
    for i, r in enumerate(ratio):
        pfc = {k: float(results.array("sweep", f"converged_{k}")[i]) for k in PFC_KEYS}
        ok, _ = _more_collapsed(pfc, data)
        if not ok:
            failing.append(float(r))
    values = {f"data_{k}": v for k, v in data.items()} | {"n_failing": float(len(failing))}
    detail = (
        f"converged MUFM more collapsed than X on all three metrics at "
        f"{ratio.size - len(failing)} of {ratio.size} λ values"
        + (f"; not at λ/λ_W = {', '.join(f'{r:.3g}' for r in failing)}" if failing else "")
    )
    return ClaimResult.decided(not failing, values, 0.0, detail)


def _sweep_converged_below(results: RunResults) -> ClaimResult:
    conv = results.array("sweep", "converged_objective")
    lit = results.array("sweep", "literal_objective")
    worse = int(np.sum(conv >= lit))
    ratio = conv / lit
    values = {"max_objective_ratio": float(np.max(ratio)), "n_not_lower": float(worse)}
    detail = (
        f"objective(converged)/objective(literal) between {np.min(ratio):.3g} and "
        f"{np.max(ratio):.3g} over {conv.size} λ values; not lower at {worse}"
    )
    return ClaimResult.decided(worse == 0, values, 1.0, detail)


SWEEP_CLAIMS: list[Claim] = [
    Claim(
        name="sweep-pfc1-increases-with-lambda",
        statement="As λ/λ_W grows the MUFM optimum moves away from neural collapse: PFC1 "
        "increases.",
        source="001 §IV-B, Fig. 5",
        threshold=f"Spearman rho(PFC1 of the converged MUFM, λ/λ_W) >= {SWEEP_RHO:g}",
        evaluate=_sweep_trend("nc1_trace_ratio", "increasing"),
    ),
    Claim(
        name="sweep-pfc2-increases-with-lambda",
        statement="As λ/λ_W grows PFC2 increases.",
        source="001 §IV-B, Fig. 5",
        threshold=f"Spearman rho(PFC2 of the converged MUFM, λ/λ_W) >= {SWEEP_RHO:g}",
        evaluate=_sweep_trend("nc2_etf_distance", "increasing"),
    ),
    Claim(
        name="sweep-alignment-decreases-with-lambda",
        statement="As λ/λ_W grows the MUFM optimum moves towards the data: the alignment "
        "distance ||H/||H||_F - X/||X||_F||_F decreases.",
        source="001 §IV-B, Fig. 5 (third panel)",
        threshold=f"Spearman rho(alignment of the converged MUFM, λ/λ_W) <= -{SWEEP_RHO:g}",
        evaluate=_sweep_trend("alignment", "decreasing"),
    ),
    Claim(
        name="sweep-more-collapsed-than-data",
        statement="At every λ the MUFM optimum stays more collapsed than the data.",
        source="001 §IV-B ('more collapsed than the data', Theorem 4)",
        threshold="converged MUFM: PFC1, PFC2 below X's and PFC3 above at every λ of the grid",
        evaluate=_sweep_vs_data,
    ),
    Claim(
        name="sweep-converged-below-literal",
        statement="At every λ the converged solver reaches a lower objective than the paper's "
        "literal gradient descent.",
        source="note 001 §5.2",
        threshold="objective(converged) < objective(literal) at every λ of the grid",
        evaluate=_sweep_converged_below,
        erratum=Erratum(confirmed_when="holds", subject="solver"),
    ),
]


# ---------------------------------------------------------------------------------------
# Theorems 1-4 (pfc-theorems)


SAME_SOLUTION = 1e-3
"""Relative feature error below which two solved instances are the same optimum (three
digits; the solvers stop at gradient norm 1e-10 on objectives of order 1e-3, and the MUFM
objective is flat in some directions)."""

SPACING = 1e-4
"""Theorem 3's equal spacing: ``max_l ||Δ_l - Δ̄||_F / ||Δ̄||_F`` at most this."""

OBJECTIVE_GAP = 1e-8
"""Relative gap between optimal objective values that counts as equal."""

FLOW_RATIO = (1.5, 2.5)
"""Theorem 4 is first order in 1/λ: doubling λ must divide the relative error by about 2."""


def _theorem1(results: RunResults) -> ClaimResult:
    n = _row_value(results, "n_s_nonnegative", "theorem1", SPLIT)
    frac = _row_value(results, "fraction_monotone_given_s_nonnegative", "theorem1", SPLIT)
    ok = frac >= 1.0
    detail = f"PFC1 monotone in {frac:.4%} of the {n:g} random instances with S >= 0 (need all)"
    return ClaimResult.decided(ok, {"fraction": frac, "n": n}, 1.0, detail)


def _theorem2_small(results: RunResults) -> ClaimResult:
    scales = results.array("theorem2", "scales")
    fraction = results.array("theorem2", "fraction_monotone")
    i = int(np.argmin(scales))
    ok = fraction[i] >= 1.0
    values = {"scale": float(scales[i]), "fraction_monotone": float(fraction[i])}
    values |= {f"fraction_at_{s:g}": float(f) for s, f in zip(scales, fraction, strict=True)}
    detail = (
        "fraction of instances with PFC2 monotone on [0, 1] per start distance ε: "
        + ", ".join(f"ε={s:g}: {f:.3g}" for s, f in zip(scales, fraction, strict=True))
        + f"; need 1 at the smallest ε = {scales[i]:g}"
    )
    return ClaimResult.decided(ok, values, 1.0, detail)


def _theorem2_local(results: RunResults) -> ClaimResult:
    interval = results.array("theorem2", "min_monotone_interval")
    curvature = results.array("theorem2", "curvature")
    ok = bool(np.all(interval > 0) and np.all(curvature > 0))
    values = {"min_interval": float(interval.min()), "min_curvature": float(curvature.min())}
    detail = (
        f"shortest final interval on which PFC2 decreases: {interval.min():.3g} (> 0?); "
        f"smallest d²PFC2~/dt² at t = 1: {curvature.min():.3g} (> 0?)"
    )
    return ClaimResult.decided(ok, values, 0.0, detail)


def _theorem3(variant: str) -> Evaluate:
    def evaluate(results: RunResults) -> ClaimResult:
        spacing = _row_value(results, "spacing_error", "theorem3", SPLIT)
        feature = _row_value(results, f"{variant}_feature_error", "theorem3", SPLIT)
        gap = _row_value(results, f"{variant}_objective_gap", "theorem3", SPLIT)
        ok = spacing <= SPACING and feature <= SAME_SOLUTION and gap <= OBJECTIVE_GAP
        values = {"spacing_error": spacing, "feature_error": feature, "objective_gap": gap}
        detail = (
            f"multilayer optimum: spacing error {spacing:.3g} (<= {SPACING:g}); vs the "
            f"{variant} reduction: feature error {feature:.3g} (<= {SAME_SOLUTION:g}), "
            f"objective gap {gap:.3g} (<= {OBJECTIVE_GAP:g})"
        )
        return ClaimResult.decided(ok, values, SAME_SOLUTION, detail)

    return evaluate


def _theorem4_flow(results: RunResults) -> ClaimResult:
    within = results.array("theorem4", "trace_within")
    between = results.array("theorem4", "trace_between")
    pfc1 = results.array("theorem4", "pfc1")
    dw, db, dp = np.diff(within), np.diff(between), np.diff(pfc1)
    ok = bool(np.all(dw < 0) and np.all(db > 0) and np.all(dp < 0))
    values = {
        "max_step_trace_within": float(dw.max()),
        "min_step_trace_between": float(db.min()),
        "pfc1_start": float(pfc1[0]),
        "pfc1_end": float(pfc1[-1]),
    }
    detail = (
        f"along Eq. 21 on {pfc1.size} times: Tr Σ_W steps <= {dw.max():.3g} (< 0?), "
        f"Tr Σ_B steps >= {db.min():.3g} (> 0?), PFC1 {pfc1[0]:.4g} -> {pfc1[-1]:.4g}"
    )
    return ClaimResult.decided(ok, values, 0.0, detail)


def _theorem4_minimiser(results: RunResults) -> ClaimResult:
    lambdas = results.array("theorem4", "lambdas")
    errors = results.array("theorem4", "relative_error")
    pfc1 = results.array("theorem4", "minimiser_pfc1")
    data = float(results.array("theorem4", "data_pfc1"))
    ratios = errors[:-1] / errors[1:] * (lambdas[:-1] / lambdas[1:]) * 2.0
    lo, hi = FLOW_RATIO
    first_order = bool(np.all((ratios >= lo) & (ratios <= hi))) if ratios.size else True
    collapsed = bool(np.all(pfc1 < data))
    ok = first_order and collapsed
    values = {"largest_lambda_error": float(errors[-1]), "max_minimiser_pfc1": float(pfc1.max())}
    values |= {"data_pfc1": data}
    detail = (
        "relative error of the flow at t = 1/λ vs the minimiser: "
        + ", ".join(f"λ={lam:g}: {e:.3g}" for lam, e in zip(lambdas, errors, strict=True))
        + f" (per doubling of λ divided by {lo:g}-{hi:g}?); PFC1 of the minimisers "
        f"<= {pfc1.max():.5g} vs data {data:.5g} (below?)"
    )
    return ClaimResult.decided(ok, values, None, detail)


THEOREM_CLAIMS: list[Claim] = [
    Claim(
        name="theorem1-monotone-when-s-nonnegative",
        statement="Theorem 1: along the straight line to collapsed end points, PFC1 decreases "
        "monotonically whenever S = Σ_k <h̃_k^(0), h̃_k^(1)> >= 0.",
        source="001 §III-B, Theorem 1, Appendix A",
        threshold="every random instance with S >= 0 has a non-increasing PFC1 on the t grid",
        evaluate=_theorem1,
    ),
    Claim(
        name="theorem2-monotone-for-small-transport-cost",
        statement="Theorem 2: PFC2 decreases monotonically along the line when the class-mean "
        "transport cost is small.",
        source="001 §III-B, Theorem 2, Appendix B",
        threshold="all instances at the smallest start distance ε are monotone on [0, 1]",
        evaluate=_theorem2_small,
    ),
    Claim(
        name="theorem2-local-near-end",
        statement="Theorem 2's proof is local: near an exact ETF end point PFC2 always "
        "decreases (positive curvature of the surrogate at t = 1).",
        source="001 Appendix B; note 001 §3.3",
        threshold="every instance decreases on some final interval (length > 0) and has "
        "d²PFC2~/dt²(1) > 0",
        evaluate=_theorem2_local,
    ),
    Claim(
        name="theorem3-reduction-as-published",
        statement="Theorem 3 as printed: the multilayer MUFM (12) is equivalent to (13) with "
        "the same λ, its optimal layers equally spaced.",
        source="001 §III-C, Theorem 3, Eq. 14",
        threshold=(
            f"spacing error <= {SPACING:g}; published reduction: feature error <= "
            f"{SAME_SOLUTION:g}, objective gap <= {OBJECTIVE_GAP:g}"
        ),
        evaluate=_theorem3("published"),
        erratum=Erratum(),
    ),
    Claim(
        name="theorem3-reduction-corrected",
        statement="Theorem 3 with the Cauchy-Schwarz factor: (12) is equivalent to (13) with "
        "λ/L, its optimal layers equally spaced.",
        source="note 001 §3.5 (erratum of Eq. 14)",
        threshold=(
            f"spacing error <= {SPACING:g}; corrected reduction: feature error <= "
            f"{SAME_SOLUTION:g}, objective gap <= {OBJECTIVE_GAP:g}"
        ),
        evaluate=_theorem3("corrected"),
    ),
    Claim(
        name="theorem4-lemma1-flow",
        statement="Lemma 1: along the gradient flow (21) from non-collapsed data, Tr Σ_W "
        "decreases and Tr Σ_B increases, so PFC1 decreases.",
        source="001 Appendix C, Lemma 1",
        threshold="strictly monotone on every step of the time grid",
        evaluate=_theorem4_flow,
    ),
    Claim(
        name="theorem4-large-lambda",
        statement="Theorem 4: for large λ the MUFM minimiser H_{1/λ} follows the flow (21) at "
        "t = 1/λ to first order and is more collapsed than the data (PFC1 below X's).",
        source="001 §III-C, Theorem 4, Appendix C",
        threshold=(
            f"relative error divided by {FLOW_RATIO[0]:g}-{FLOW_RATIO[1]:g} per doubling of λ; "
            "PFC1(H_{1/λ}) < PFC1(X) at every λ"
        ),
        evaluate=_theorem4_minimiser,
    ),
]
