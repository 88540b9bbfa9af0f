r"""Per-PC convergence of an ensemble from runs tracked with the ``pcbias`` family (paper
002 Figs. 2 and 4; note R22).

Each measurement of :class:`~collapselab.metrics.families.PCBias` with a principal frame
stores the network's compact matrix in that frame, ``W̃ = W_L ⋯ W_1 U`` ``(K, q)``
(``arrays/pcbias_step<step>.npz``, ``"compact_pc"``). :func:`compact_pc_from_runs` stacks
the runs of an ensemble into the ``(E, N, K, q)`` array that
:func:`collapselab.metrics.pc_bias.pc_distance` (distance to ``W̃_opt`` per PC) and
:func:`collapselab.metrics.pc_bias.pc_ensemble_std` (the across-run std per PC,

.. math::

    \Big(\sum_{k=1}^{K} \operatorname{std}_i\big(\tilde W^{s,(i)}_{kj}\big)^2\Big)^{1/2}

for PC ``j`` at measurement ``s``) take.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from collapselab.store import Run
from collapselab.track.measurements import ensemble_runs, measurement_arrays


def compact_pc_from_runs(
    runs: Sequence[Run | str | os.PathLike[str]],
) -> tuple[np.ndarray, np.ndarray]:
    """``(steps (E,), compact_pc (E, N, K, q))`` of an ensemble of ``N`` runs tracked with
    the ``pcbias`` family and a frame; every run must hold the same measurement steps."""
    per_run, first_steps = [], None
    for run in ensemble_runs(runs):
        loaded = [a for a in measurement_arrays(run, "pcbias") if "compact_pc" in a]
        if not loaded:
            raise ValueError(
                f"run {run.path} has no pcbias measurement with compact_pc: track it with "
                "Monitor(families=[PCBias.from_data(x, labels, K)]) (the distance keys)"
            )
        steps = np.array([int(a["step"]) for a in loaded])
        if first_steps is None:
            first_steps = steps
        elif not np.array_equal(steps, first_steps):
            raise ValueError(
                f"the runs of an ensemble must measure the same steps: {run.path} has "
                f"{steps.tolist()}, the first run {first_steps.tolist()}"
            )
        per_run.append(np.stack([a["compact_pc"] for a in loaded]))
    shapes = {w.shape[1:] for w in per_run}
    if len(shapes) != 1:
        raise ValueError(f"the runs' compact matrices differ in shape (K, q): {sorted(shapes)}")
    return first_steps, np.stack(per_run, axis=1)


__all__ = ["compact_pc_from_runs"]
