r"""``dlufm-relu``: the deep ReLU UFM swept over widths and seeds (paper 004 §5.2,
Figs 9-11 and Tables 1-4; note 004 §5.2).

Each (width, seed) runs the paper's full-batch gradient descent; its endpoint is
classified as **symmetric** (the DNC-like solution: every ``W_lW_lᵀ`` has ``K`` outliers,
i.e. exactly ``K`` eigenvalues above :data:`RANK_RTOL` times the largest, and the class
means of every layer after ``W_1`` (the outputs included) form an orthogonal frame to
:data:`FRAME_TOL`) or **lower-rank / asymmetric**
(anything else). Súkeník et al. show that for ``K >= 3`` the symmetric solution need not be
optimal; the note found lower-rank endpoints at ``d = 10`` and symmetric ones at ``d = 30``.
Both are reported run by run, never hidden.

A symmetric run is further split by how its ReLUs act (:func:`~collapselab.theory.
dlufm_layerwise.preactivation_signs`, tolerance the float64 rounding bound of each
pre-activation): every layer-``l`` quantity the claims read (the Hessian
``(1/N) Σ_i (A_iᵀA_i) ⊗ h_ih_iᵀ``, the gradient, the alignment, Tables 2 and 4) depends on
the ReLUs only through ``A_i = W_L D_{L−1,i} ⋯ W_{l+1} D_{l,i}``, i.e. through the masks of
the ReLUs after ``W_l, ..., W_{L−1}``. Where no unit of those ReLUs is *mixed* (each is on
for every sample or off for every sample), the masks are the same for every sample on a
neighbourhood, ``A_i = A`` and the layer-``l`` Hessian is the Kronecker product
``(AᵀA) ⊗ (1/N) Σ_i h_ih_iᵀ``: the form of App. A, that of a deep linear model on layers
``l..L`` with the dead units pruned, fed with the ReLU model's own features ``h_i``:
**symmetric, sample-independent masks**. Such a run is held against the
linear model's predictions (near-equal outliers, ``a(v)`` near 1, Table 4 equal to Table 3),
not the ReLU ones, whose mechanism (App. F: ``A_i`` varying over the samples) it lacks; they
concern the runs with a mixed unit (**symmetric, ReLU active**). The fraction of
non-positive pre-activations and the dead and mixed units of every layer are stored for
every run.

The figures follow one *featured* run: the first seed at the largest width that ended
symmetric (else the first run), with snapshots at every checkpoint; every run has its full
endpoint snapshot (both centrings, App. E, the Gram tables).

Stored: ``arrays/sweep.npz`` (one entry per run: ``width``, ``seed``, ``objective``,
``grad_norm``, ``symmetric``, ``weight_rank`` (the smallest over layers), ``output_frame``,
the Hessian's top-``K²`` relative spread and gap-rule outlier count, the weights' largest
top-``K`` spread, ``masks_constant`` (no mixed unit at the ReLUs after ``W_l..W_{L−1}``),
``relu_inactive`` (no truncation there), ``linear_everywhere`` (no truncation at any
ReLU)), ``arrays/final_d<d>_s<seed>.npz`` (the
endpoint snapshot, with ``preactivation_nonpositive``, ``preactivation_margin``,
``dead_units`` and ``mixed_units`` per rectified layer),
``arrays/dynamics.npz`` (the featured run, as in ``dlufm-linear``); rows of split
``"sweep"`` (``layer`` = ``d<d>_s<seed>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.curvature import count_outliers
from collapselab.experiments.claims import Claim, NotEvaluable, RunResults
from collapselab.experiments.dlufm._common import (
    build_model,
    claim,
    descend,
    overlaps,
    relative_spread,
)
from collapselab.experiments.dlufm.snapshots import layer_snapshot, stack
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.store import Run
from collapselab.theory.dlufm_layerwise import preactivation_signs

__all__ = [
    "ALIGNED_IF_NEAR_EQUAL",
    "FRAME_TOL",
    "LOWER_RANK",
    "NEAR_EQUAL",
    "RANK_RTOL",
    "RELU_CLAIMS",
    "SYMMETRIC_ACTIVE",
    "SYMMETRIC_CONSTANT",
    "UNEQUAL",
    "classify",
    "regime",
    "run_relu",
]

RANK_RTOL = 1e-3
"""An eigenvalue of ``W_lW_lᵀ`` above this times the largest counts towards its rank."""

FRAME_TOL = 0.05
"""Orthogonal-frame distance of the output class means at which they form a frame."""

NEAR_EQUAL = 0.05
"""Relative spread ``(max − min)/max`` at which a group of outliers counts as equal."""

UNEQUAL = 0.05
"""Relative spread of the Hessian's top ``K²`` at or above which they are *not* equal."""

ALIGNED_IF_NEAR_EQUAL = 2 * np.sqrt(1 - NEAR_EQUAL) / (2 - NEAR_EQUAL)
r"""The smallest ``a(v)`` of a vector in the span of eigenvectors whose eigenvalues lie within
:data:`NEAR_EQUAL` of each other (Kantorovich's inequality:
:math:`a(v) \geq 2\sqrt{\kappa}/(1 + \kappa)`, :math:`\kappa = 1 - \text{NEAR\_EQUAL}` the
smallest ratio of two of them): ``0.99967``. With outliers equal to within ``NEAR_EQUAL``, this is
what "the predicted vectors are eigenvectors" can mean at a point that is not a global
optimum to round-off."""

ALIGNED = 0.9
"""Smallest ``a(v)`` of the predicted eigenvectors that counts as close to 1 (Table 1)."""

COEFFICIENT = 0.05
"""``|⟨g/‖g‖, u_j⟩|`` above which a true-eigenvector coefficient counts as non-zero (Table 2)."""

NEAR_ONE = 0.999
"""``a(v)`` from which a predicted vector is counted as aligned in the detail of
``relu-alignment-close-to-one`` (reported, not judged)."""

EXACTLY_ONE = 1e-9
"""``a(v) >= 1 − EXACTLY_ONE`` counts as exactly 1 (Table 1's "not exactly 1" is below it)."""

TABLE4_CONSTANT = 0.01
"""Relative spread of Table 4's diagonal below which it counts as constant."""

IDENTITY = 1e-9
"""Relative difference below which two matrices that an identity makes equal count as equal
(Tables 3 and 4 at a locally linear point; float64 round-off is ~1e-15)."""


def _run_name(width: int, seed: int) -> str:
    return f"d{width}_s{seed}"


def classify(snapshot: Mapping[str, np.ndarray], k: int, layer: int) -> dict[str, float]:
    """The endpoint's summary: the smallest weight rank over layers, the largest
    orthogonal-frame distance of the class means of layers ``2..L+1``, whether it is
    symmetric, whether no unit of the ReLUs after ``W_layer..W_{L−1}`` is mixed (on for
    some samples, off for others: ``masks_constant``), whether those ReLUs truncate nothing
    (``relu_inactive``) and whether no ReLU does (``linear_everywhere``), the largest
    top-``K`` weight spread, the Hessian's top-``K²`` spread and gap-rule outlier count, the
    objective."""
    ranks, spreads = [], []
    for values in snapshot["weights"]:
        finite = values[np.isfinite(values)]
        ranks.append(int(np.sum(finite > RANK_RTOL * finite.max())) if finite.max() > 0 else 0)
        spreads.append(relative_spread(finite[:k]))
    frame = float(np.max(snapshot["orthogonal_frame"][1:]))
    symmetric = all(r == k for r in ranks) and frame <= FRAME_TOL
    hessian = snapshot["hessian"]
    nonpositive = np.asarray(snapshot["preactivation_nonpositive"])  # ReLUs after W_1..W_{L−1}
    mixed = np.asarray(snapshot["mixed_units"])
    return {
        "weight_rank": float(min(ranks)),
        "output_frame": frame,
        "symmetric": float(symmetric),
        "masks_constant": float(np.all(mixed[layer - 1 :] == 0)),
        "relu_inactive": float(np.all(nonpositive[layer - 1 :] == 0)),
        "linear_everywhere": float(np.all(nonpositive == 0)),
        "weight_spread": float(max(spreads)),
        "hessian_spread": relative_spread(hessian[: k * k]),
        "hessian_outliers": float(count_outliers(hessian)),
        "objective": float(snapshot["objective"]),
        "grad_norm": float(snapshot["grad_norm"]),
    }


SYMMETRIC_CONSTANT = "symmetric, sample-independent masks"
SYMMETRIC_ACTIVE = "symmetric, ReLU active"
LOWER_RANK = "lower-rank/asymmetric"


def regime(row: Mapping[str, float]) -> str:
    """:data:`SYMMETRIC_ACTIVE`, :data:`SYMMETRIC_CONSTANT` or :data:`LOWER_RANK` for a row
    of :func:`classify`."""
    if not row["symmetric"]:
        return LOWER_RANK
    if row["masks_constant"]:
        return SYMMETRIC_CONSTANT
    return SYMMETRIC_ACTIVE


def run_relu(run: Run, context: RunContext) -> None:
    """The width x seed sweep (every endpoint's snapshot: the members of a sweep on the
    run's executor, :func:`relu_endpoint`), then the featured run's dynamics (its gradient
    descent run again here, deterministic from its seed, for the snapshots at every
    checkpoint)."""
    c = context.config
    layer, k = int(c["layer"]), int(c["n_classes"])
    pairs = [(int(w), int(s)) for w in c["widths"] for s in c["seeds"]]
    members = [{"config": dict(c), "width": width, "seed": seed} for width, seed in pairs]
    summary: dict[str, list[float]] = {}
    # one thread per member (threads=1), as collapselab._threads.serial_threads
    finals = run_members(relu_endpoint, members, run, context)
    for (width, seed), final in zip(pairs, finals, strict=True):
        run.save_array(f"final_{_run_name(width, seed)}", **final)
        row = classify(final, k, layer) | {"width": float(width), "seed": float(seed)}
        for key, value in row.items():
            summary.setdefault(key, []).append(value)
        run.log_dict(0, row, split="sweep", layer=_run_name(width, seed))
    run.save_array("sweep", **{key: np.asarray(v) for key, v in summary.items()})
    featured = _featured(pairs, summary)
    with serial_threads():
        model = build_model(c, relu=True, width=featured[0])
        with context.progress.task("featured run", int(c["steps"]), "steps") as progress:
            traj = descend(model, c, progress, seed=featured[1])
        snaps = []
        with context.progress.task("featured run spectra", len(traj.points), "checkpoints") as done:
            for i, point in enumerate(traj.points):
                snaps.append(
                    layer_snapshot(model, point, layer, centrings=("logit",), appendix=False)
                )
                done(i + 1, len(traj.points))
    dynamics = stack(snaps)
    previous, last = overlaps(dynamics.pop("top_vectors"))
    run.save_array(
        "dynamics",
        steps=traj.steps,
        overlap_previous=previous,
        overlap_final=last,
        featured=np.array(featured),
        layer=np.int64(layer),
        n_classes=np.int64(k),
        **dynamics,
    )
    run.update_manifest(featured_run=_run_name(*featured))
    run.flush()


def relu_endpoint(member: dict[str, Any]) -> dict[str, Any]:
    """A sweep task: gradient descent of the ReLU UFM of ``member["width"]`` from the start
    of ``member["seed"]``; the endpoint's full snapshot (without its top vectors) and where
    its ReLUs act (:func:`~collapselab.theory.dlufm_layerwise.preactivation_signs`)."""
    c = member["config"]
    model = build_model(c, relu=True, width=int(member["width"]))
    traj = descend(model, c, seed=int(member["seed"]))
    final = layer_snapshot(model, traj.final, int(c["layer"]))
    final.pop("top_vectors")
    signs = preactivation_signs(model, traj.final)
    final["preactivation_nonpositive"] = signs.nonpositive_fraction
    final["preactivation_margin"] = signs.min_margin
    final["dead_units"] = signs.dead_units
    final["mixed_units"] = signs.mixed_units
    return final


def _featured(pairs: list[tuple[int, int]], summary: Mapping[str, list[float]]) -> tuple[int, int]:
    widest = max(w for w, _ in pairs)
    for i, pair in enumerate(pairs):
        if pair[0] == widest and summary["symmetric"][i]:
            return pair
    for i, pair in enumerate(pairs):
        if summary["symmetric"][i]:
            return pair
    return pairs[-1]


# ---------------------------------------------------------------------------------------
# claims


def _sweep(results: RunResults) -> dict[str, np.ndarray]:
    keys = ("width", "seed", "symmetric", "masks_constant", "weight_rank", "output_frame",
            "weight_spread", "hessian_spread", "hessian_outliers", "objective")  # fmt: skip
    return {key: results.array("sweep", key) for key in keys}


def _k(results: RunResults) -> int:
    return int(results.array("dynamics", "n_classes"))


_RUNS = {
    None: "symmetric run(s)",
    SYMMETRIC_ACTIVE: "symmetric ReLU-active run(s)",
    SYMMETRIC_CONSTANT: "symmetric run(s) with sample-independent masks",
}
"""How a claim's detail names the runs it read: every symmetric run, or those of one regime
(:func:`regime`)."""


def _symmetric_runs(results: RunResults, relu: str | None = None) -> list[str]:
    """The symmetric runs, or those of them in the regime ``relu``
    (:data:`SYMMETRIC_ACTIVE`: a mixed unit after the analysed layer;
    :data:`SYMMETRIC_CONSTANT`: none)."""
    s = _sweep(results)
    names = [
        _run_name(int(w), int(seed))
        for w, seed, sym, constant in zip(
            s["width"], s["seed"], s["symmetric"], s["masks_constant"], strict=True
        )
        if sym and (relu is None or bool(constant) == (relu == SYMMETRIC_CONSTANT))
    ]
    if not names:
        raise NotEvaluable(
            "no run reached the symmetric solution"
            + ("" if relu is None else f" with {relu.removeprefix('symmetric, ')}")
            + "; see relu-symmetric-at-widest"
        )
    return names


def _describe_runs(s: Mapping[str, np.ndarray]) -> str:
    return "; ".join(
        f"d={int(w)} seed {int(seed)}: "
        f"{regime({'symmetric': sym, 'masks_constant': constant})} "
        f"(F {obj:.6g}, weight rank {int(rank)}, frame {frame:.2g})"
        for w, seed, sym, constant, obj, rank, frame in zip(
            s["width"], s["seed"], s["symmetric"], s["masks_constant"], s["objective"],
            s["weight_rank"], s["output_frame"], strict=True,
        )
    )  # fmt: skip


def _symmetric_at_widest(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    s = _sweep(results)
    widest = s["width"] == s["width"].max()
    fraction = float(np.mean(s["symmetric"][widest]))
    values = {"fraction_widest": fraction, "n_symmetric": float(s["symmetric"].sum())}
    for w in np.unique(s["width"]):
        values[f"fraction_d{int(w)}"] = float(np.mean(s["symmetric"][s["width"] == w]))
    detail = (
        f"{fraction:.0%} of the seeds at the largest width d={int(s['width'].max())} reached "
        f"the symmetric solution (>= 2/3?). Every run: {_describe_runs(s)}"
    )
    return fraction >= 2 / 3, values, 2 / 3, detail


def _final(results: RunResults, name: str, key: str) -> np.ndarray:
    return results.array(f"final_{name}", key)


def _per_symmetric_run(
    results: RunResults, measure: Any, ok: Any, text: str, bound: float, relu: str | None = None
) -> Any:
    names = _symmetric_runs(results, relu)
    measured = {name: measure(results, name) for name in names}
    holds = all(ok(v) for v in measured.values())
    detail = f"{text} in the {len(names)} {_RUNS[relu]}: " + ", ".join(
        f"{name} {v:.4g}" for name, v in measured.items()
    )
    return holds, measured, bound, detail


def _hessian_outliers(results: RunResults) -> Any:
    k = _k(results)
    return _per_symmetric_run(
        results,
        lambda r, n: float(count_outliers(_final(r, n, "hessian"))),
        lambda v: v == k * k,
        f"outliers of the layer-wise Hessian by the largest spectral gap (need K² = {k * k})",
        float(k * k),
    )


def _hessian_unequal(results: RunResults) -> Any:
    k = _k(results)
    return _per_symmetric_run(
        results,
        lambda r, n: relative_spread(_final(r, n, "hessian")[: k * k]),
        lambda v: v >= UNEQUAL,
        f"relative spread of the top K² Hessian eigenvalues (need >= {UNEQUAL:g}; the "
        f"linear model's is ~1e-12)",
        UNEQUAL,
        SYMMETRIC_ACTIVE,
    )


def _weights_equal(results: RunResults) -> Any:
    k = _k(results)

    def spread(r: RunResults, n: str) -> float:
        return max(relative_spread(v[np.isfinite(v)][:k]) for v in _final(r, n, "weights"))

    return _per_symmetric_run(
        results,
        spread,
        lambda v: v <= NEAR_EQUAL,
        f"largest relative spread over layers of the top K eigenvalues of W_lW_lᵀ (need <= "
        f"{NEAR_EQUAL:g})",
        NEAR_EQUAL,
    )


def _knockouts(results: RunResults) -> tuple[bool, Mapping[str, float], None, str]:
    k = _k(results)
    expected = {"none": k * k, "within": k * k, "cross": k, "class": k * (k - 1)}
    names = _symmetric_runs(results)
    ok, values, parts = True, {}, []
    for name in names:
        counts = {p: count_outliers(_final(results, name, f"knockout_logit_{p}")) for p in expected}
        ok &= counts == expected
        values |= {f"{name}_{p}": float(v) for p, v in counts.items()}
        parts.append(f"{name}: " + ", ".join(f"{p} {v}" for p, v in counts.items()))
    detail = (
        "gap-rule outliers of G and of G minus each part (none, within, cross, class; need "
        f"{k * k}, {k * k}, {k}, {k * (k - 1)}): " + "; ".join(parts)
    )
    return ok, values, None, detail


def _alignment(results: RunResults) -> Any:
    holds, measured, bound, detail = _per_symmetric_run(
        results,
        lambda r, n: float(np.nanmin(_final(r, n, "alignment"))),
        lambda v: ALIGNED <= v < 1 - EXACTLY_ONE,
        f"smallest a(v_kk') (need in [{ALIGNED:g}, 1 − {EXACTLY_ONE:g}): close to but not "
        "exactly 1)",
        ALIGNED,
        SYMMETRIC_ACTIVE,
    )
    # how the K² vectors split: a run can hold most of them at ~1 and a few far off
    counts = {n: int(np.sum(_final(results, n, "alignment") >= NEAR_ONE)) for n in measured}
    k2 = _k(results) ** 2
    detail += f"; vectors with a(v) >= {NEAR_ONE:g} of the {k2}: " + ", ".join(
        f"{name} {count}" for name, count in counts.items()
    )
    return holds, measured, bound, detail


def _true_coefficients(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    k = _k(results)
    names = _symmetric_runs(results, SYMMETRIC_ACTIVE)
    ok, values, parts = True, {}, []
    for name in names:
        coef = np.abs(_final(results, name, "true_coefficients"))
        big = np.sort(coef[coef > COEFFICIENT])[::-1]
        unequal = big.size > 1 and relative_spread(big) >= 0.01
        ok &= big.size == k and unequal
        values |= {f"{name}_nonzero": float(big.size), f"{name}_spread": relative_spread(big)
                   if big.size else float("nan")}  # fmt: skip
        parts.append(f"{name}: {np.array2string(big, precision=3)}")
    detail = (
        f"|⟨g/‖g‖, u_j⟩| above {COEFFICIENT:g} on the top K² true eigenvectors (need exactly "
        f"K = {k}, with relative spread >= 0.01) in the {len(names)} "
        f"{_RUNS[SYMMETRIC_ACTIVE]}: " + "; ".join(parts)
    )
    return ok, values, float(k), detail


def _table3(results: RunResults) -> Any:
    layer = int(results.array("dynamics", "layer"))

    def off(r: RunResults, n: str) -> float:
        q = _final(r, n, "table3")[layer - 1]
        diag = np.diag(q)
        return max(relative_spread(diag), float(np.max(np.abs(q - np.diag(diag)))) / diag.mean())

    return _per_symmetric_run(
        results,
        off,
        lambda v: v <= 0.1,
        f"W_{{L:{layer}}}W_{{L:{layer}}}ᵀ: max(diagonal spread, largest |off-diagonal| / mean "
        "diagonal) (need <= 0.1: constant diagonal, small off-diagonal)",
        0.1,
    )


def _table4(results: RunResults) -> Any:
    layer = int(results.array("dynamics", "layer"))
    return _per_symmetric_run(
        results,
        lambda r, n: relative_spread(np.diag(_final(r, n, "table4")[layer - 1])),
        lambda v: v >= TABLE4_CONSTANT,
        f"relative spread of the diagonal of (1/N) Σ B_iB_iᵀ at layer {layer} (need >= "
        f"{TABLE4_CONSTANT:g}: not constant)",
        TABLE4_CONSTANT,
        SYMMETRIC_ACTIVE,
    )


def _constant_masks_linear(results: RunResults) -> tuple[bool, Mapping[str, float], float, str]:
    """The deep linear model's predictions in the symmetric runs whose ReLUs after
    ``W_l..W_{L−1}`` have no mixed unit: there ``A_i = A`` for every sample and the
    layer-``l`` Hessian is App. A's Kronecker product with ``A`` and the ReLU features. At
    a critical point the weights out of a dead unit get no data gradient, so
    weight decay sets them to 0 and ``A = W_{L:l+1}``: Table 4 equals Table 3."""
    k, layer = _k(results), int(results.array("dynamics", "layer"))
    names = _symmetric_runs(results, SYMMETRIC_CONSTANT)
    ok, values, parts = True, {}, []
    for name in names:
        spread = relative_spread(_final(results, name, "hessian")[: k * k])
        align = float(np.nanmin(_final(results, name, "alignment")))
        t3 = _final(results, name, "table3")[layer - 1]
        t4 = _final(results, name, "table4")[layer - 1]
        gram_gap = float(np.max(np.abs(t4 - t3)) / np.max(np.abs(t3)))
        ok &= spread <= NEAR_EQUAL and align >= ALIGNED_IF_NEAR_EQUAL and gram_gap <= IDENTITY
        values |= {f"{name}_spread": spread, f"{name}_min_alignment": align,
                   f"{name}_table4_vs_table3": gram_gap}  # fmt: skip
        parts.append(
            f"{name}: top-K² spread {spread:.4g}, 1 − min a(v) {1 - align:.3g}, "
            f"|Table 4 − Table 3| / |Table 3| {gram_gap:.2g}"
        )
    detail = (
        f"the linear model's predictions (top-K² relative spread <= {NEAR_EQUAL:g}, "
        f"1 − min a(v) <= {1 - ALIGNED_IF_NEAR_EQUAL:.2g}, Table 4 = Table 3 to {IDENTITY:g}) "
        f"in the {len(names)} {_RUNS[SYMMETRIC_CONSTANT]}: " + "; ".join(parts)
    )
    return ok, values, NEAR_EQUAL, detail


_SOURCE = "004 §5.2"
_ACTIVE_RUNS = (
    "every symmetric run where the ReLU acts at the analysed layer (a mixed unit after "
    "W_l..W_{L−1}: on for some samples, off for others)"
)

RELU_CLAIMS: list[Claim] = [
    claim(
        "relu-symmetric-at-widest",
        "The deep ReLU UFM reaches the symmetric (DNC-like) solution the paper analyses; "
        "at small widths gradient descent may end lower-rank (Súkeník et al.; note §5.2).",
        f"{_SOURCE}; note 004 §5.2",
        f"at least 2/3 of the seeds at the largest width end symmetric (every W_lW_lᵀ has "
        f"exactly K eigenvalues above {RANK_RTOL:g} x its largest, the class means of layers "
        f"2..L+1 orthogonal frames to {FRAME_TOL:g}); every run is reported",
        _symmetric_at_widest,
    ),
    claim(
        "relu-hessian-k2-outliers",
        "Fig. 9: the layer-wise Hessian of the ReLU model has K² outliers.",
        f"{_SOURCE}, Fig. 9",
        "in every symmetric run, the largest spectral gap of the endpoint Hessian falls after "
        "the K²-th eigenvalue",
        _hessian_outliers,
    ),
    claim(
        "relu-hessian-outliers-unequal",
        "Fig. 9: the K² Hessian outliers approach each other but do not converge to equality.",
        f"{_SOURCE}, Fig. 9",
        f"in {_ACTIVE_RUNS}, (max − min)/max of the top K² eigenvalues >= {UNEQUAL:g}",
        _hessian_unequal,
    ),
    claim(
        "relu-knockouts",
        "Fig. 10: knocking out Papyan's components removes the same numbers of outliers as in "
        "the linear model (K² with G_within out, K with G_cross out, K(K−1) with G_class out).",
        f"{_SOURCE}, Fig. 10",
        "in every symmetric run (logit centring), gap-rule outlier counts of G, G−G_within, "
        "G−G_cross, G−G_class are K², K², K, K(K−1)",
        _knockouts,
    ),
    claim(
        "relu-weight-outliers-equal",
        "Fig. 11: the K outliers of every W_lW_lᵀ do converge to (near) equality.",
        f"{_SOURCE}, Fig. 11",
        f"in every symmetric run, every layer's top-K relative spread <= {NEAR_EQUAL:g}",
        _weights_equal,
    ),
    claim(
        "relu-alignment-close-to-one",
        "Table 1: the predicted eigenvectors h̄^(l+1)_k ⊗ h̄^(l)_k' are close to, but not "
        "exactly, eigenvectors.",
        f"{_SOURCE}, Table 1",
        f"in {_ACTIVE_RUNS}, {ALIGNED:g} <= min a(v) < 1 − {EXACTLY_ONE:g}",
        _alignment,
    ),
    claim(
        "relu-gradient-k-unequal-true-coefficients",
        "Table 2: on the true top-K² eigenvectors the gradient has only K non-zero "
        "coefficients, and they are unequal.",
        f"{_SOURCE}, Table 2",
        f"in {_ACTIVE_RUNS}, exactly K coefficients |⟨g/‖g‖, u_j⟩| > {COEFFICIENT:g}, with "
        "relative spread >= 0.01",
        _true_coefficients,
    ),
    claim(
        "relu-table3-constant-diagonal",
        "Table 3: W_{L:l}W_{L:l}ᵀ has a constant diagonal and small off-diagonal entries.",
        f"{_SOURCE}, App. G.2, Table 3",
        "in every symmetric run, diagonal spread and largest |off-diagonal| / mean diagonal <= 0.1",
        _table3,
    ),
    claim(
        "relu-table4-diagonal-not-constant",
        "Table 4: the data-averaged (1/N) Σ A_iA_iᵀ has a non-constant diagonal.",
        f"{_SOURCE}, App. G.2, Table 4",
        f"in {_ACTIVE_RUNS}, relative spread of its diagonal >= {TABLE4_CONSTANT:g}",
        _table4,
    ),
    claim(
        "relu-constant-masks-follow-the-linear-model",
        "Where no ReLU after W_l switches between samples (each unit on for every sample or "
        "off for every sample, beyond float64 rounding), A_i is the same for every sample and "
        "the layer-l Hessian is the Kronecker product of App. A (a deep linear model on layers "
        "l..L with the dead units pruned, fed with the ReLU features; App. F): at the "
        "symmetric solution its K² outliers (near) "
        "equal, the predicted eigenvectors eigenvectors (a(v) near 1), Table 4 equal to "
        "Table 3.",
        f"{_SOURCE}; 004 Theorem 4.1, App. A, App. F",
        f"in every symmetric run with sample-independent masks, top-K² relative spread <= "
        f"{NEAR_EQUAL:g}, min a(v) >= {ALIGNED_IF_NEAR_EQUAL:.5f} (what outliers equal to "
        f"{NEAR_EQUAL:g} allow, Kantorovich), max|Table 4 − Table 3| / max|Table 3| <= "
        f"{IDENTITY:g}",
        _constant_masks_linear,
    ),
]
"""The claims of ``dlufm-relu``."""
