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
from collapselab.experiments.pcbias._common import run_ensemble, run_fields
from collapselab.experiments.pcbias.presets import ScalesPreset
from collapselab.experiments.pcbias.training import GDMember, data_frame
from collapselab.experiments.registry import RunContext
from collapselab.store import Run
from collapselab.theory.pcbias import expected_scales

__all__ = ["run_scales"]


def run_scales(run: Run, context: RunContext) -> None:
    """Train the ensemble, recording the scale statistics at every checkpoint."""
    preset: ScalesPreset = context.config
    member = GDMember.of(preset, init=preset.init, scale_layers=preset.scale_layers,
                         **run_fields(context))  # fmt: skip
    with serial_threads():
        results = run_ensemble(
            member.ensemble(preset.members), run, context, "scales", batched=preset.batched
        )
    frame, _ = data_frame(member)
    alpha, beta = expected_scales(member.widths(frame), preset.init)
    layers = np.array(preset.scale_layers)
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
