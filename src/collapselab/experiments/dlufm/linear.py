r"""``dlufm-linear``: the deep linear UFM trained by gradient descent (paper 004 §5.1,
Figs 3-8 and 12-14; note 004 §5.2 configuration A).

Full-batch gradient descent from a normal initialisation (the paper's procedure) records
the point at log-spaced checkpoints; at each one, layer ``l``'s every spectrum, alignment
and coefficient (:func:`~collapselab.experiments.dlufm.snapshots.layer_snapshot`). At the
end, :func:`~collapselab.theory.dlufm_theorems.verify_dlufm` holds every theorem against
the gradient-descent endpoint, and the closed form gives the values the figures mark.

Stored: ``arrays/dynamics.npz`` (``steps`` and every snapshot key with a leading
checkpoint axis, plus ``overlap_previous`` / ``overlap_final``: Gur-Ari's top-subspace
overlap), ``arrays/closed_form.npz`` (the predicted values), ``arrays/verify.npz`` (every
check of ``verify_dlufm``); rows of split ``"train"`` (``objective``, ``grad_norm``,
``f_top``, ``dnc1`` per checkpoint, ``step`` the gradient step) and of split ``"verify"``
(``worst_error`` per theorem, ``layer`` the theorem).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.curvature import count_outliers
from collapselab.experiments.claims import Claim, Erratum, NotEvaluable, RunResults
from collapselab.experiments.dlufm._common import (
    build_model,
    claim,
    descend,
    first_step,
    overlaps,
    relative_spread,
)
from collapselab.experiments.dlufm.snapshots import layer_snapshot, stack
from collapselab.experiments.registry import RunContext
from collapselab.store import Run
from collapselab.theory.dlufm import ClosedForm, DeepLinearUFM, require_nontrivial
from collapselab.theory.dlufm_theorems import (
    DLUFMVerification,
    predict_extended_errors,
    predict_features,
    predict_gradient_covariance,
    verify_dlufm,
)

__all__ = [
    "EQUAL",
    "EXACT",
    "LINEAR_CLAIMS",
    "OBJECTIVE_TOL",
    "ZERO",
    "closed_form_arrays",
    "run_linear",
    "save_verification",
    "store_verification",
    "verification_arrays",
]

EXACT = 1e-6
"""Relative error at which a measured eigenvalue or coefficient equals its closed form
(the issue's "to 1e-6 at convergence")."""

ZERO = 1e-10
"""An eigenvalue at most this times the largest counts as zero (a bulk or a knockout)."""

OBJECTIVE_TOL = 1e-8
"""Relative gap ``|F_GD − F*|/F*`` at which gradient descent reached the closed form."""

EQUAL = 1e-3
"""Relative spread ``(max − min)/max`` at which a group of outliers counts as equalised
(for the order in which the Hessian and the weight outliers equalise)."""


def closed_form_arrays(model: DeepLinearUFM, form: ClosedForm, layer: int) -> dict[str, Any]:
    """The closed form's values that the figures and claims compare with."""
    k = model.n_classes
    return {
        "layer": np.int64(layer),
        "n_classes": np.int64(k),
        "t_star": np.float64(form.t_star),
        "objective": np.float64(form.objective),
        "beta": np.float64(form.beta),
        "threshold": np.float64(form.threshold),
        "hessian_outlier": form.hessian_outlier,
        "sigma_w_sq": form.sigma_w_sq,
        "gradient_coefficient": form.gradient_coefficient,
        "cosine": np.float64(math.copysign(1.0 / math.sqrt(k), form.gradient_coefficient[0])),
        "grad_covariance": predict_gradient_covariance(model, layer).eigenvalues,
        "extended_errors": predict_extended_errors(model, layer).eigenvalues,
        "features": np.array(
            [predict_features(model, j).eigenvalues[0] for j in range(1, model.n_layers + 2)]
        ),
        "lambda_w": np.asarray(model.lambda_w),
    }


def save_verification(
    run: Run, check: DLUFMVerification, name: str = "verify", label: str = ""
) -> None:
    """Store every check of ``verify_dlufm`` in ``arrays/<name>.npz`` and the worst error per
    theorem as rows of split ``"verify"`` (``layer`` ``label`` + the theorem, ``step`` 0)."""
    store_verification(run, verification_arrays(check), check.worst(), name, label)


def verification_arrays(check: DLUFMVerification) -> dict[str, np.ndarray]:
    """Every check of ``verify_dlufm`` as arrays (one entry per check), as stored."""
    checks = check.checks
    return {
        "theorem": np.array([c.theorem for c in checks]),
        "quantity": np.array([c.quantity for c in checks]),
        "layer": np.array([c.layer for c in checks]),
        "predicted": np.array([c.predicted for c in checks]),
        "measured": np.array([c.measured for c in checks]),
        "error": np.array([c.error for c in checks]),
        "published": np.array([c.variant == "published" for c in checks]),
    }


def store_verification(
    run: Run,
    arrays: Mapping[str, np.ndarray],
    worst: Mapping[str, float],
    name: str = "verify",
    label: str = "",
) -> None:
    """Write :func:`verification_arrays` and the worst error per theorem into ``run``
    (see :func:`save_verification`)."""
    run.save_array(name, **arrays)
    for theorem, value in worst.items():
        run.log(0, "worst_error", value, split="verify", layer=f"{label}{theorem}")


def run_linear(run: Run, context: RunContext) -> None:
    """Gradient descent, the snapshots at every checkpoint, the verification at the end."""
    c = context.config
    model = build_model(c)
    assert isinstance(model, DeepLinearUFM)
    form = require_nontrivial(model, "dlufm-linear")
    layer = int(c["layer"])
    with serial_threads():
        with context.progress.task("gradient descent", int(c["steps"]), "steps") as progress:
            traj = descend(model, c, progress, seed=context.seed)
        snaps = []
        total = len(traj.points)
        with context.progress.task("layer-wise spectra", total, "checkpoints") as progress:
            for i, point in enumerate(traj.points):
                snaps.append(layer_snapshot(model, point, layer))
                progress(i + 1, total)
        dynamics = stack(snaps)
        previous, final = overlaps(dynamics.pop("top_vectors"))
        run.save_array(
            "dynamics", steps=traj.steps, overlap_previous=previous, overlap_final=final, **dynamics
        )
        run.save_array("closed_form", **closed_form_arrays(model, form, layer))
        save_verification(run, verify_dlufm(model, traj.final))
    for i, step in enumerate(traj.steps):
        run.log_dict(
            int(step),
            {
                "objective": float(dynamics["objective"][i]),
                "grad_norm": float(dynamics["grad_norm"][i]),
                "f_top": float(dynamics["f_top"][i]),
                "dnc1": float(dynamics["dnc1"][i, layer - 1]),
            },
        )
    run.update_manifest(solver=traj.stopped)
    run.flush()


# ---------------------------------------------------------------------------------------
# claims (each reads the stored arrays of the run)


def _final(results: RunResults, key: str) -> np.ndarray:
    return results.array("dynamics", key)[-1]


def _form(results: RunResults, key: str) -> np.ndarray:
    return results.array("closed_form", key)


def _k(results: RunResults) -> int:
    return int(_form(results, "n_classes"))


def _layer(results: RunResults) -> int:
    return int(_form(results, "layer"))


def _rel(measured: np.ndarray, predicted: np.ndarray | float) -> float:
    predicted = np.broadcast_to(np.asarray(predicted, dtype=np.float64), np.shape(measured))
    return float(np.max(np.abs(np.asarray(measured) - predicted) / np.abs(predicted)))


def _hessian_exact(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    k, layer = _k(results), _layer(results)
    values = _final(results, "hessian")
    predicted = float(_form(results, "hessian_outlier")[layer - 1])
    err = _rel(values[: k * k], predicted)
    bulk = float(np.max(np.abs(values[k * k :])) / predicted) if values.size > k * k else 0.0
    ok = err <= EXACT and bulk <= ZERO
    detail = (
        f"top {k * k} eigenvalues of H_{layer} {values[0]:.8g} ... {values[k * k - 1]:.8g} vs "
        f"λ_out({layer}) = {predicted:.8g}: relative error {err:.2g} (<= {EXACT:g}); largest "
        f"bulk eigenvalue / λ_out = {bulk:.2g} (<= {ZERO:g})"
    )
    return ok, {"relative_error": err, "bulk_ratio": bulk, "lambda_out": predicted}, EXACT, detail


def _separate_then_equalise(results: RunResults) -> tuple[bool, Mapping[str, float], None, str]:
    k, steps = _k(results), results.array("dynamics", "steps")
    spectra = results.array("dynamics", "hessian")
    counts = np.array([count_outliers(s) for s in spectra])
    spreads = np.array([relative_spread(s[: k * k]) for s in spectra])
    separated = first_step(steps, counts == k * k)
    equal = first_step(steps, spreads <= EQUAL)
    ok = separated >= 0 and equal >= 0 and separated < equal
    values = {"separated_step": separated, "equalised_step": equal, "initial_spread": spreads[0]}
    detail = (
        f"the top {k * k} eigenvalues are the outliers (largest spectral gap) from step "
        f"{separated} on and equal to a relative spread {EQUAL:g} from step {equal} on "
        f"(spread {spreads[0]:.3g} at step 0); separation first?"
    )
    return ok, values, None, detail


def _alignment(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    align = results.array("dynamics", "alignment")
    start, end = float(np.nanmin(align[0])), float(np.nanmin(align[-1]))
    ok = start < 0.9 and end >= 1 - 1e-8
    detail = (
        f"smallest a(v_kk') {start:.4g} at step 0 (< 0.9) and {end:.12g} at the end (>= 1 - 1e-8)"
    )
    return ok, {"initial_min": start, "final_min": end}, 1 - 1e-8, detail


def _knockout_counts(results: RunResults, centring: str) -> dict[str, int]:
    return {
        part: count_outliers(
            _final(results, f"knockout_{centring}_{part}"), "threshold", threshold=ZERO
        )
        for part in ("none", "within", "cross", "class")
    }


def _knockouts(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    k = _k(results)
    expected = {"none": k * k, "within": k * k, "cross": k, "class": k * (k - 1)}
    values: dict[str, float] = {}
    ok, parts = True, []
    for centring in ("logit", "class"):
        counts = _knockout_counts(results, centring)
        overlap = float(_final(results, f"image_overlap_{centring}"))
        within = float(_final(results, f"within_norm_{centring}"))
        ok &= counts == expected and overlap <= 1e-8 and within <= 1e-8
        values |= {f"{centring}_{p}": float(n) for p, n in counts.items()}
        values |= {f"{centring}_overlap": overlap, f"{centring}_within_norm": within}
        parts.append(
            f"{centring} centring: non-zero eigenvalues of G, G−G_within, G−G_cross, G−G_class "
            f"= {counts['none']}, {counts['within']}, {counts['cross']}, {counts['class']} "
            f"(expected {k * k}, {k * k}, {k}, {k * (k - 1)}); image overlap {overlap:.2g}, "
            f"‖G_within‖/‖G‖ {within:.2g}"
        )
    return ok, values, 1e-8, "; ".join(parts) + " (overlaps and G_within <= 1e-8)"


def _gradient(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    k = _k(results)
    cosines = _final(results, "cosines").reshape(k, k)
    target = float(_form(results, "cosine"))
    diag = float(np.max(np.abs(np.diag(cosines) - target)))
    off = float(np.max(np.abs(cosines - np.diag(np.diag(cosines)))))
    f_top = float(_final(results, "f_top"))
    ok = diag <= EXACT and off <= EXACT and f_top >= 1 - 1e-8
    detail = (
        f"natural-basis cosines: diagonal within {diag:.2g} of {target:.6f} (±1/√K), largest "
        f"off-diagonal {off:.2g} (both <= {EXACT:g}); f_top = {f_top:.12g} (>= 1 - 1e-8)"
    )
    return ok, {"diagonal_error": diag, "off_diagonal": off, "f_top": f_top}, EXACT, detail


def _weights(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    k = _k(results)
    spectra = _final(results, "weights")
    predicted = _form(results, "sigma_w_sq")
    errs = [_rel(s[:k], p) for s, p in zip(spectra, predicted, strict=True)]
    bulk = [
        float(np.nanmax(np.abs(s[k:])) / p) if np.isfinite(s[k:]).any() else 0.0
        for s, p in zip(spectra, predicted, strict=True)
    ]
    ok = max(errs) <= EXACT and max(bulk) <= ZERO
    detail = (
        f"top {k} eigenvalues of W_lW_lᵀ vs σ_W² = {np.round(predicted, 6).tolist()}: largest "
        f"relative error {max(errs):.2g} (<= {EXACT:g}); largest further eigenvalue / σ_W² "
        f"{max(bulk):.2g} (<= {ZERO:g})"
    )
    return ok, {"relative_error": max(errs), "bulk_ratio": max(bulk)}, EXACT, detail


def _weights_first(results: RunResults) -> tuple[bool, Mapping[str, float], None, str]:
    k, steps = _k(results), results.array("dynamics", "steps")
    weights = results.array("dynamics", "weights")
    hessian = results.array("dynamics", "hessian")
    w_spread = np.array([max(relative_spread(s[:k]) for s in layers) for layers in weights])
    h_spread = np.array([relative_spread(s[: k * k]) for s in hessian])
    w_step = first_step(steps, w_spread <= EQUAL)
    h_step = first_step(steps, h_spread <= EQUAL)
    ok = 0 <= w_step <= h_step
    detail = (
        f"weight outliers (every layer) equal to a relative spread {EQUAL:g} from step "
        f"{w_step}, Hessian outliers from step {h_step} (weights first?)"
    )
    return ok, {"weights_step": w_step, "hessian_step": h_step}, None, detail


def _spectrum_check(key: str, predicted_key: str, rank_of: str) -> Any:
    def check(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
        values = _final(results, key)
        predicted = _form(results, predicted_key)
        top = float(np.max(np.abs(values)))
        rank = int(np.sum(np.abs(values) > ZERO * top))
        err = _rel(values[: predicted.size], predicted)
        ok = rank == predicted.size and err <= EXACT
        detail = (
            f"{rank} non-zero eigenvalues (expected {predicted.size}, {rank_of}); "
            f"{np.array2string(values[: predicted.size], precision=6)} vs "
            f"{np.array2string(predicted, precision=6)}: relative error {err:.2g} "
            f"(<= {EXACT:g})"
        )
        return ok, {"rank": float(rank), "relative_error": err}, EXACT, detail

    return check


def _second_moment_published(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    k = _k(results)
    values = _final(results, "grad_moment")
    rank = int(np.sum(np.abs(values) > ZERO * float(np.max(np.abs(values)))))
    detail = (
        f"the uncentred second moment of the per-sample gradients has {rank} non-zero "
        f"eigenvalues ({np.array2string(values[: k + 1], precision=4)}); Theorem E.1 as "
        f"printed says K − 1 = {k - 1}"
    )
    return rank == k - 1, {"rank": float(rank)}, float(k - 1), detail


def _features(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    k = _k(results)
    spectra = _final(results, "features")
    predicted = _form(results, "features")
    errs, ranks = [], []
    for values, value in zip(spectra, predicted, strict=True):
        finite = values[np.isfinite(values)]
        ranks.append(int(np.sum(np.abs(finite) > ZERO * np.max(np.abs(finite)))))
        errs.append(_rel(finite[:k], value))
    ok = all(r == k for r in ranks) and max(errs) <= EXACT
    detail = (
        f"non-zero eigenvalues of H_lH_lᵀ per layer {ranks} (expected {k} each); largest "
        f"relative error against n‖h̄^(l)‖² {max(errs):.2g} (<= {EXACT:g})"
    )
    return ok, {"relative_error": max(errs), "min_rank": float(min(ranks))}, EXACT, detail


def _objective(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    got = float(_final(results, "objective"))
    best = float(_form(results, "objective"))
    gap = abs(got - best) / best
    detail = f"F after gradient descent {got:.12g} vs F* = {best:.12g}: gap {gap:.2g}"
    values = {"objective": got, "optimum": best, "gap": gap}
    return gap <= OBJECTIVE_TOL, values, OBJECTIVE_TOL, detail


def _dnc(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    values = {key: float(np.nanmax(_final(results, key))) for key in
              ("dnc1", "orthogonal_frame", "etf_distance", "dnc3")}  # fmt: skip
    ok = values["dnc1"] <= ZERO and max(values.values()) <= EXACT
    detail = (
        f"largest over layers: DNC1 {values['dnc1']:.2g} (<= {ZERO:g}), orthogonal-frame "
        f"{values['orthogonal_frame']:.2g}, ETF {values['etf_distance']:.2g}, DNC3 "
        f"{values['dnc3']:.2g} (<= {EXACT:g})"
    )
    return ok, values, EXACT, detail


def _verified(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    return verification_check(results, "verify")


def verification_check(
    results: RunResults, name: str
) -> tuple[bool, Mapping[str, float], float, str]:
    """Every non-published check stored by :func:`save_verification` within :data:`EXACT`
    (ranks and counts exactly)."""
    theorem = results.array(name, "theorem")
    error = results.array(name, "error")
    published = results.array(name, "published")
    if theorem.size == 0:
        raise NotEvaluable(f"array {name!r} holds no checks")
    keep = ~published
    worst: dict[str, float] = {}
    for t, e in zip(theorem[keep], error[keep], strict=True):
        worst[str(t)] = max(worst.get(str(t), 0.0), float(e))
    ok = max(worst.values()) <= EXACT
    detail = (
        f"{int(keep.sum())} checks; worst error per theorem: "
        + ", ".join(f"{t} {e:.2g}" for t, e in sorted(worst.items()))
        + f" (<= {EXACT:g})"
    )
    return ok, worst, EXACT, detail


_SOURCE = "004 §5.1"

LINEAR_CLAIMS: list[Claim] = [
    claim(
        "closed-form-objective",
        "Gradient descent on the deep linear UFM reaches the global optimum, whose value is "
        "F* = φ(t*)/2 (note 004 §3.6; the issue's quality bar).",
        "004 Eq. (1), Thm 3.1; note §3.6",
        f"|F_GD − F*| / F* <= {OBJECTIVE_TOL:g} at the last step",
        _objective,
    ),
    claim(
        "dnc-at-the-solution",
        "Theorem 3.1: every global optimiser has DNC1 (features equal their class means), DNC2 "
        "(orthogonal-frame means, ETF after centring) and DNC3 (W_{L:l} ∝ M_lᵀ) at every layer.",
        "004 §3.2, Theorem 3.1 (Dang et al.)",
        f"largest DNC1 over layers <= {ZERO:g}; orthogonal-frame, ETF and DNC3 distances "
        f"<= {EXACT:g}",
        _dnc,
    ),
    claim(
        "hessian-k2-equal-outliers",
        "Theorem 4.1 / Fig. 3: the layer-wise Hessian has rank K², and its K² non-zero "
        "eigenvalues are all equal to λ_out(l).",
        f"{_SOURCE}, Fig. 3; Theorem 4.1",
        f"top K² eigenvalues within relative {EXACT:g} of the closed-form λ_out(l); every "
        f"other eigenvalue <= {ZERO:g} λ_out(l)",
        _hessian_exact,
    ),
    claim(
        "hessian-outliers-separate-then-equalise",
        "Fig. 3: K² outliers separate from the bulk quickly, then converge slowly to one value.",
        f"{_SOURCE}, Fig. 3",
        f"the first step from which the top K² are the outliers (largest spectral gap) comes "
        f"before the first step from which their relative spread stays <= {EQUAL:g}",
        _separate_then_equalise,
    ),
    claim(
        "predicted-eigenvectors-align",
        "Fig. 4: the predicted eigenvectors h̄^(l+1)_k ⊗ h̄^(l)_k' become eigenvectors: "
        "a(v) = ⟨Hv, v⟩/(‖Hv‖‖v‖) rises to 1.",
        f"{_SOURCE}, Fig. 4; Theorem 4.1",
        "smallest a(v) over the K² vectors < 0.9 at step 0 and >= 1 − 1e-8 at the end",
        _alignment,
    ),
    claim(
        "papyan-knockouts",
        "Theorem 4.2 / Figs 5-6: G_within = 0, G_cross has K(K−1) and G_class K non-zero "
        "eigenvalues with orthogonal images, so knocking out G_within changes nothing, "
        "G_cross leaves K outliers and G_class leaves K(K−1).",
        f"{_SOURCE}, Figs 5-6; Theorem 4.2",
        f"in both centrings, non-zero eigenvalues (> {ZERO:g} x the largest) of G, G−G_within, "
        "G−G_cross, G−G_class are K², K², K, K(K−1); ‖G_class G_cross‖ / (‖G_class‖‖G_cross‖) "
        "and ‖G_within‖/‖G‖ <= 1e-8",
        _knockouts,
    ),
    claim(
        "gradient-k-equal-coefficients",
        "Theorem 4.3 / Fig. 7: the gradient g_l = β Σ_k v_kk has K equal non-zero "
        "natural-basis coefficients (±1/√K as cosines) and K(K−1) zeros; it lies in the "
        "top-K² Hessian space (f_top = 1).",
        f"{_SOURCE}, Fig. 7; Theorem 4.3",
        f"diagonal cosines within {EXACT:g} of sign(β)/√K, off-diagonal <= {EXACT:g}; "
        "f_top >= 1 − 1e-8",
        _gradient,
    ),
    claim(
        "weights-k-equal-outliers",
        "Theorem 4.4 / Fig. 8: every W_lW_lᵀ has K equal non-zero eigenvalues "
        "(λ_H/λ_W(l)) n‖h̄^(1)‖².",
        f"{_SOURCE}, Fig. 8; Theorem 4.4",
        f"top K eigenvalues of every layer within relative {EXACT:g} of σ_W(l)²; the rest "
        f"<= {ZERO:g} σ_W(l)²",
        _weights,
    ),
    claim(
        "weights-equalise-before-hessian",
        "Fig. 8: the weight outliers equalise before the Hessian outliers do.",
        f"{_SOURCE}, Fig. 8 (text)",
        f"first step with every layer's top-K relative spread <= {EQUAL:g} (for good) <= the "
        "same step for the Hessian's top K²",
        _weights_first,
    ),
    claim(
        "gradient-covariance-k-minus-1",
        "Theorem E.1 (corrected reading) / Fig. 12: the covariance of the per-sample "
        "gradients has K − 1 equal non-zero eigenvalues (1−t*)²‖a‖²‖h̄^(l)‖²/K.",
        "004 App. E.1, Fig. 12; note §3.12",
        f"K − 1 eigenvalues > {ZERO:g} x the largest, within relative {EXACT:g} of the closed form",
        _spectrum_check("grad_covariance", "grad_covariance", "centred covariance"),
    ),
    claim(
        "gradient-second-moment-as-published",
        "Theorem E.1 as printed: the second moment of the per-sample gradients has K − 1 "
        "non-zero eigenvalues (erratum: that count holds for the centred covariance only; "
        "the uncentred second moment has K).",
        "004 App. E.1, Theorem E.1 (note §3.12, §8.12)",
        f"number of eigenvalues of (1/N) Σ ∇ℓ∇ℓᵀ above {ZERO:g} x the largest = K − 1",
        _second_moment_published,
        erratum=Erratum(),  # confirmed when it does not hold (the rank is K)
    ),
    claim(
        "extended-errors-spectrum",
        "Theorem E.2 / Fig. 13: the extended back-propagated errors have K − 1 eigenvalues "
        "(1+t*²)‖a‖² and one smaller (1−t*)²‖a‖².",
        "004 App. E.2, Fig. 13",
        f"K non-zero eigenvalues, within relative {EXACT:g} of the closed form",
        _spectrum_check("extended_errors", "extended_errors", "K − 1 large and one small"),
    ),
    claim(
        "features-k-equal",
        "Theorem E.3 / Fig. 14: every H_lH_lᵀ has K equal non-zero eigenvalues n‖h̄^(l)‖².",
        "004 App. E.3, Fig. 14",
        f"K eigenvalues > {ZERO:g} x the largest at every layer, within relative {EXACT:g} of "
        "n‖h̄^(l)‖²",
        _features,
    ),
    claim(
        "every-theorem-verified",
        "Every theorem (3.1, 4.1-4.4, E.1-E.3) holds at the gradient-descent solution, at "
        "every layer (verify_dlufm).",
        "004 §3-4, App. E; note §7 R17",
        f"every check's error (relative, or absolute where the prediction is 0) <= {EXACT:g}; "
        "ranks exactly",
        _verified,
    ),
]
"""The claims of ``dlufm-linear``."""
