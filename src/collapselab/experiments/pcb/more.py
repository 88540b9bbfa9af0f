"""Registers paper 002's experiments on non-linear networks and manipulated data:

==========================  ================================================  ==============
id                          what                                              figure
==========================  ================================================  ==============
``pcbias-frequency``        frequency dataset: critical frequency vs          Figs. 8, 13, 16
                            accessibility and discriminability; boundaries
``pcbias-stvgg``            non-linear st-VGG linearised: per-PC std of its   Fig. 4d
                            compact matrix over training
==========================  ================================================  ==============
"""

from __future__ import annotations

from collapselab.experiments.pcb._common import PAPER
from collapselab.experiments.pcb.frequency import (
    FREQUENCY_CAPTIONS,
    FREQUENCY_CLAIMS,
    FREQUENCY_PRESETS,
    draw_frequency,
    run_frequency,
)
from collapselab.experiments.pcb.stvgg import (
    STVGG_CAPTIONS,
    STVGG_CLAIMS,
    STVGG_PRESETS,
    draw_stvgg,
    run_stvgg,
    stvgg_dry_run,
)
from collapselab.experiments.registry import Experiment, register

__all__ = ["FREQUENCY", "STVGG"]

FREQUENCY = register(
    Experiment(
        id="pcbias-frequency",
        paper=PAPER,
        title="frequency dataset: critical frequency vs accessibility, decision boundaries",
        presets=FREQUENCY_PRESETS,
        runtime_quick="30-64 s",
        run=run_frequency,
        figures=list(FREQUENCY_CAPTIONS),
        figure="Figs. 8, 13, 16",
        claims=FREQUENCY_CLAIMS,
        draw=draw_frequency,
        captions=FREQUENCY_CAPTIONS,
        uses_device=False,
    )
)

STVGG = register(
    Experiment(
        id="pcbias-stvgg",
        paper=PAPER,
        title="non-linear st-VGG, linearised: per-PC std of the compact matrix over training",
        presets=STVGG_PRESETS,
        runtime_quick="~40 s",
        fallbacks={"quick": "quick-bundled"},
        run=run_stvgg,
        dry_run=stvgg_dry_run,
        figures=list(STVGG_CAPTIONS),
        figure="Fig. 4d",
        claims=STVGG_CLAIMS,
        draw=draw_stvgg,
        captions=STVGG_CAPTIONS,
        uses_device=False,
    )
)
