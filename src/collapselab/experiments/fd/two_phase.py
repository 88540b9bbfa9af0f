r"""``fd-two-phase``: the two-phase baseline (paper 000, Fig. 1-2, S-Fig. 1-11, R20).

A deep plain bias-free ReLU MLP trained with SGD (η = 0.1, batch 100) on an image dataset
(Fashion-MNIST; digits at ``quick-bundled``) and on generated clustered data, measured on
the schedule of :mod:`.measurement`: the training loss stays flat, then falls; the
cross-class feature cosine M2, the within-class gradient cosine M3 and the pseudo-neuron
weight-change cosine M4 rise through phase 1 and fall after it.

Stored per dataset (``arm``): ``arrays/traj_<arm>.npz`` and metric rows of split ``arm``
(:func:`~._common.store_member`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from collapselab.experiments.claims import Claim, NotEvaluable, RunResults, claim_from_check
from collapselab.experiments.fd._common import (
    phase,
    run_arms,
    trajectory,
)
from collapselab.experiments.registry import RunContext
from collapselab.store import Run

__all__ = ["M2_RISE", "M3_RISE", "TWO_PHASE_CLAIMS", "phase_curves", "run_two_phase"]

M2_RISE = 0.02
"""Smallest rise of M2 (cross-class feature cosine, phase layer) counted as a rise."""

M3_RISE = 0.05
"""Smallest rise of M3 (within-class gradient cosine, phase layer) counted as a rise."""

M4_RISE = 0.05
"""Smallest rise of M4 (probe-mean weight change, phase layer) counted as a rise."""


def run_two_phase(run: Run, context: RunContext) -> None:
    """Train and measure the baseline on every configured dataset."""
    arms = context.config["arms"]
    run_arms(run, context, arms, arms={"two_phase": list(arms)})


def arms(results: RunResults, group: str) -> list[str]:
    """The arms a run stored for ``group`` (from its manifest)."""
    stored = (results.manifest.get("arms") or {}).get(group)
    if not stored:
        raise NotEvaluable(f"the run recorded no {group!r} arms")
    return list(stored)


def phase_curves(results: RunResults | Run, arm: str, key: str) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of ``key`` at the phase layer (``loss``: the loss curve); M4 keys
    at the phase layer's linear layer."""
    stored = trajectory(results, arm)
    layer = int(results.manifest.get("phase_layer", 3)) - 1
    values = stored[key]
    return stored["steps"], values if values.ndim == 1 else values[:, layer]


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
