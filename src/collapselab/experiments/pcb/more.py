"""Registers paper 002's experiments on non-linear networks and manipulated data:

==========================  ================================================  ==============
id                          what                                              figure
==========================  ================================================  ==============
``pcbias-frequency``        frequency dataset: critical frequency vs          Figs. 8, 13, 16
                            accessibility and discriminability; boundaries
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
from collapselab.experiments.registry import Experiment, register

__all__ = ["FREQUENCY"]

FREQUENCY = register(
    Experiment(
        id="pcbias-frequency",
        paper=PAPER,
        title="frequency dataset: critical frequency vs accessibility, decision boundaries",
        presets=FREQUENCY_PRESETS,
        runtime_quick="~1 min",
        run=run_frequency,
        figures=list(FREQUENCY_CAPTIONS),
        figure="Figs. 8, 13, 16",
        claims=FREQUENCY_CLAIMS,
        draw=draw_frequency,
        captions=FREQUENCY_CAPTIONS,
    )
)
