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

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.curvature import count_outliers
from collapselab.experiments.dlufm.presets import ReluPreset
from collapselab.experiments.dlufm.ufm import (
    build_model,
    descend,
    layer_snapshot,
    overlaps,
    relative_spread,
    stack,
)
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.experiments.sweeps.batched import run_batched_members
from collapselab.store import Run
from collapselab.theory.dlufm import DeepUFM, DescentTrajectory
from collapselab.theory.dlufm_batched import batched_gradient_descent
from collapselab.theory.dlufm_layerwise import preactivation_signs

__all__ = [
    "FRAME_TOL",
    "LOWER_RANK",
    "RANK_RTOL",
    "SYMMETRIC_ACTIVE",
    "SYMMETRIC_CONSTANT",
    "classify",
    "regime",
    "relu_endpoint",
    "relu_endpoints",
    "run_name",
    "run_relu",
]

RANK_RTOL = 1e-3
"""An eigenvalue of ``W_lW_lᵀ`` above this times the largest counts towards its rank."""

FRAME_TOL = 0.05
"""Orthogonal-frame distance of the output class means at which they form a frame."""


def run_name(width: int, seed: int) -> str:
    """The name of the sweep's run at ``width`` from ``seed`` (``d<width>_s<seed>``)."""
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
    c: ReluPreset = context.config
    layer, k = c.layer, c.n_classes
    pairs = [(width, seed) for width in c.widths for seed in c.seeds]
    # how the members train is not part of what they are: one config (and hash) either way
    member_preset = dataclasses.replace(c, batched=True)
    members = [{"preset": member_preset, "width": width, "seed": seed} for width, seed in pairs]
    summary: dict[str, list[float]] = {}
    # one thread per member (threads=1), as collapselab._threads.serial_threads
    if c.batched:  # the seeds of one width share every shape: one batched descent
        finals = run_batched_members(relu_endpoint, relu_endpoints, members, run, context,
                                     batch_key=_width)  # fmt: skip
    else:
        finals = run_members(relu_endpoint, members, run, context)
    for (width, seed), final in zip(pairs, finals, strict=True):
        run.save_array(f"final_{run_name(width, seed)}", **final)
        row = classify(final, k, layer) | {"width": float(width), "seed": float(seed)}
        for key, value in row.items():
            summary.setdefault(key, []).append(value)
        run.log_dict(0, row, split="sweep", layer=run_name(width, seed))
    run.save_array("sweep", **{key: np.asarray(v) for key, v in summary.items()})
    featured = _featured(pairs, summary)
    with serial_threads():
        model = build_model(c.at_width(featured[0]), relu=True)
        with context.progress.task("featured run", c.steps, "steps") as progress:
            traj = descend(model, c, steps=c.steps, checkpoints=c.checkpoints,
                           seed=featured[1], progress=progress)  # fmt: skip
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
    run.update_manifest(featured_run=run_name(*featured))
    run.flush()


def relu_endpoint(member: dict[str, Any]) -> dict[str, Any]:
    """A sweep task: gradient descent of the ReLU UFM of the preset ``member["preset"]`` at
    ``member["width"]`` from the start of ``member["seed"]``; the endpoint's full snapshot
    (without its top vectors) and where its ReLUs act
    (:func:`~collapselab.theory.dlufm_layerwise.preactivation_signs`)."""
    c: ReluPreset = member["preset"]
    model = build_model(c.at_width(member["width"]), relu=True)
    traj = descend(model, c, steps=c.steps, checkpoints=c.checkpoints, seed=member["seed"])
    return _endpoint(model, c, traj)


def relu_endpoints(members: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """A batched sweep task: the members of :func:`relu_endpoint` at one width (their seeds
    differ) descend together
    (:func:`~collapselab.theory.dlufm_batched.batched_gradient_descent`, bit for bit the
    lone descents); each endpoint as :func:`relu_endpoint` gives it. ``None`` for every
    member when the batch diverges (each is then descended alone, which reports which)."""
    c: ReluPreset = members[0]["preset"]
    model = build_model(c.at_width(members[0]["width"]), relu=True)
    try:
        trajs = batched_gradient_descent(
            model,
            c.lr,
            c.steps,
            seeds=[m["seed"] for m in members],
            w_scale=c.w_scale,
            h_scale=c.h_scale,
            checkpoints=c.checkpoints,
        )
    except FloatingPointError:
        return [None] * len(members)
    return [_endpoint(model, c, traj) for traj in trajs]


def _width(member: Mapping[str, Any]) -> int:
    """The batch key of a member: its width (the seeds of a width share every shape)."""
    return int(member["width"])


def _endpoint(model: DeepUFM, c: ReluPreset, traj: DescentTrajectory) -> dict[str, Any]:
    """The endpoint's full snapshot (without its top vectors) and where its ReLUs act."""
    final = layer_snapshot(model, traj.final, c.layer)
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
