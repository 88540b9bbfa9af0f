r"""``pcbias-scales``: the gradient-scale matrices stay near ``α_l I`` and ``β_l I`` early in
training (paper 002 Fig. 3; Thm 2, Cor. 2.1; note 002 §2.4, §5 item 3).

An ensemble of ``L``-layer linear networks (Def. 3) is trained by full-batch GD
(:mod:`~collapselab.experiments.pcbias.training`); at every checkpoint, for the configured
layers (the paper's 2 and 4 of a 5-layer net), the entry statistics of ``A_l`` and ``B_l``
(Eq. 7) against Thm 3's ``α_l``, ``β_l`` at initialisation
(:func:`~collapselab.metrics.pcbias.gradient_scale_statistics`): the mean ``|M_ii − s|``
and the mean ``|M_ij|``, ``i ≠ j``, each divided by ``s`` (relative), mean over the members.
The "early" window ends at the checkpoint where the ensemble's mean test accuracy peaks
(the paper: "≈ I up to epoch ~200, where test performance peaks").

Stored: ``arrays/scales.npz`` (``steps``, ``layers`` (1-based), ``alpha``, ``beta``,
``a_diagonal``, ``a_offdiagonal``, ``b_diagonal``, ``b_offdiagonal`` ``(N, S, len)``
relative to the scale, ``test_accuracy``/``train_accuracy``/``loss`` ``(N, S)``,
``peak`` the index of the early window's last checkpoint); rows of split ``scales``
(``layer`` ``A<l>``/``B<l>``: ``diagonal`` and ``offdiagonal`` ensemble means).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.experiments.claims import Claim, RunResults
from collapselab.experiments.pcbias._common import member_base, members, verdict
from collapselab.experiments.pcbias.training import data_frame, deep_linear_member
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.store import Run
from collapselab.theory.pcbias import expected_scales

__all__ = ["NEAR", "SCALES_CLAIMS", "run_scales"]

NEAR = 0.25
"""Largest mean relative deviation ``|M_ii − s|/s`` (and mean ``|M_ij|/s``) at which a
gradient-scale matrix counts as ``≈ s I``."""


def run_scales(run: Run, context: RunContext) -> None:
    """Train the ensemble, recording the scale statistics at every checkpoint."""
    c = context.config
    config = member_base(context)
    with serial_threads():
        results = run_members(
            deep_linear_member, members(config, int(c["members"])), run, context, label="scales"
        )
    frame, _ = data_frame(config)
    widths = [frame.n_pcs, *[int(w) for w in c["hidden"]], frame.n_outputs]
    alpha, beta = expected_scales(widths, str(c["init"]))
    layers = np.array([int(ell) for ell in c["scale_layers"]])
    arrays: dict[str, Any] = {"steps": results[0]["steps"], "layers": layers,
                              "alpha": alpha[layers - 1], "beta": beta[layers - 1]}  # fmt: skip
    for key in ("train_accuracy", "test_accuracy", "loss"):
        arrays[key] = np.stack([r[key] for r in results])
    for name, scale in (("a", arrays["alpha"]), ("b", arrays["beta"])):
        for part in ("diagonal", "offdiagonal"):
            arrays[f"{name}_{part}"] = np.stack([r[f"{name}_{part}"] for r in results]) / scale
    arrays["peak"] = np.int64(np.argmax(arrays["test_accuracy"].mean(0)))
    run.save_array("scales", **arrays)
    for i, step in enumerate(arrays["steps"]):
        for j, ell in enumerate(layers):
            for name in ("a", "b"):
                run.log_dict(
                    int(step),
                    {part: float(arrays[f"{name}_{part}"][:, i, j].mean())
                     for part in ("diagonal", "offdiagonal")},
                    split="scales",
                    layer=f"{name.upper()}{ell}",
                )  # fmt: skip
        run.log(int(step), "test_accuracy", float(arrays["test_accuracy"][:, i].mean()))
    run.flush()


def _near_early(results: RunResults):
    peak = int(results.array("scales", "peak"))
    steps = results.array("scales", "steps")
    worst = {}
    for key in ("a_diagonal", "a_offdiagonal", "b_diagonal", "b_offdiagonal"):
        worst[key] = float(results.array("scales", key)[:, : peak + 1].mean(0).max())
    top = max(worst.values())
    detail = (
        f"up to step {steps[peak]} (mean test accuracy peaks): largest mean relative "
        + ", ".join(f"{k.replace('_', ' ')} {v:.3g}" for k, v in worst.items())
        + f" (<= {NEAR:g})"
    )
    return verdict(top <= NEAR, {**worst, "peak_step": float(steps[peak])}, NEAR, detail)


def _largest_change(results: RunResults, name: str) -> float:
    dev = results.array("scales", f"{name}_diagonal").mean(0)  # (S, layers)
    return float(np.max(np.abs(dev - dev[:1])))


def _a_drifts_more(results: RunResults):
    da, db = _largest_change(results, "a"), _largest_change(results, "b")
    layers = results.array("scales", "layers").tolist()
    detail = (
        f"largest change over the run of the mean relative diagonal deviation from its value "
        f"at step 0, over layers {layers}: A {da:.3g}, B {db:.3g} (A > B)"
    )
    return verdict(da > db, {"a_change": da, "b_change": db}, None, detail)


SCALES_CLAIMS: list[Claim] = [
    Claim(
        "scales-near-identity-early",
        "Fig. 3 / Thm 2: A_l ≈ α_l I and B_l ≈ β_l I, with near-zero off-diagonal entries, "
        "until about where test performance peaks.",
        "002 §3.1, Fig. 3; Thm 2, Cor. 2.1",
        f"up to the checkpoint of the peak mean test accuracy: mean |M_ii − s|/s and mean "
        f"|M_ij|/s (i ≠ j), mean over networks, <= {NEAR:g} for A_l and B_l of every recorded "
        "layer",
        _near_early,
    ),
    Claim(
        "a-drifts-b-stays",
        "Fig. 3 / App. A.2: ΔA rises towards convergence while ΔB stays near 0 (B drifts at "
        "rate O(K/m), A at O(q/m)).",
        "002 §3.1, Fig. 3; App. A.2 (Thms 6-7)",
        "largest change over the run of the mean relative diagonal deviation from its step-0 "
        "value (over the recorded layers): A's > B's",
        _a_drifts_more,
    ),
]
"""The claims of ``pcbias-scales``."""
