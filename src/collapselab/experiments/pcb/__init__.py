"""Paper 002 (PCB): the principal-components bias of deep linear networks. Importing this
package registers (``collapselab reproduce pcbias``):

==========================  ================================================  ==============
id                          what                                              figure
==========================  ================================================  ==============
``pcbias-convergence``      per-PC convergence of deep linear ensembles,      Figs. 2, 4a, 4c
                            natural and ZCA-whitened, against Eq. 10
``pcbias-scales``           gradient-scale matrices near α_l I, β_l I early   Fig. 3
``pcbias-init``             Def. 3 vs Glorot uniform; Eq. 10's factor c       Fig. 12
``pcbias-relu``             two-layer ReLU: per-PC std vs §2.5's dynamics     Fig. 2 right
==========================  ================================================  ==============

Presets (:mod:`~collapselab.experiments.pcb.presets`): ``quick`` (minutes on 2 cores),
``standard`` (real images, about an hour on 2 cores), ``paper`` (the paper's data and
architectures, for a GPU; dry-run tested) and ``tiny`` (the test suite's). The theory is
:mod:`collapselab.theory.pc_bias` and :mod:`~collapselab.theory.pc_bias_relu`.
"""

from collapselab.experiments.pcb import presets
from collapselab.experiments.pcb._common import PAPER
from collapselab.experiments.pcb.convergence import CONVERGENCE_CLAIMS, run_convergence
from collapselab.experiments.pcb.figures import (
    CONVERGENCE_CAPTIONS,
    INIT_CAPTIONS,
    RELU_CAPTIONS,
    SCALES_CAPTIONS,
    draw_convergence,
    draw_init,
    draw_relu,
    draw_scales,
)
from collapselab.experiments.pcb.initialisation import INIT_CLAIMS, run_init
from collapselab.experiments.pcb.relu import RELU_CLAIMS, run_relu
from collapselab.experiments.pcb.scales import SCALES_CLAIMS, run_scales
from collapselab.experiments.pcb.training import linear_dry_run
from collapselab.experiments.registry import Experiment, register

CONVERGENCE = register(
    Experiment(
        id="pcbias-convergence",
        paper=PAPER,
        title="per-PC convergence of deep linear ensembles, natural and whitened, vs Eq. 10",
        presets=presets.CONVERGENCE,
        runtime_quick="~10 s",
        run=run_convergence,
        dry_run=linear_dry_run,
        figures=list(CONVERGENCE_CAPTIONS),
        figure="Figs. 2 (left), 4a, 4c",
        claims=CONVERGENCE_CLAIMS,
        draw=draw_convergence,
        captions=CONVERGENCE_CAPTIONS,
        uses_device=False,
    )
)

SCALES = register(
    Experiment(
        id="pcbias-scales",
        paper=PAPER,
        title="gradient-scale matrices A_l, B_l stay near α_l I, β_l I early in training",
        presets=presets.SCALES,
        runtime_quick="~20 s",
        fallbacks={"quick": "quick-bundled"},
        run=run_scales,
        dry_run=linear_dry_run,
        figures=list(SCALES_CAPTIONS),
        figure="Fig. 3",
        claims=SCALES_CLAIMS,
        draw=draw_scales,
        captions=SCALES_CAPTIONS,
        uses_device=False,
    )
)

INIT = register(
    Experiment(
        id="pcbias-init",
        paper=PAPER,
        title="Def. 3 vs Glorot uniform: learning curves and Eq. 10's effective factor",
        presets=presets.INIT,
        runtime_quick="~20 s",
        fallbacks={"quick": "quick-bundled"},
        run=run_init,
        dry_run=linear_dry_run,
        figures=list(INIT_CAPTIONS),
        figure="Fig. 12",
        claims=INIT_CLAIMS,
        draw=draw_init,
        captions=INIT_CAPTIONS,
        uses_device=False,
    )
)

RELU = register(
    Experiment(
        id="pcbias-relu",
        paper=PAPER,
        title="two-layer ReLU net: per-PC std against the approximate dynamics (¼ vs ½)",
        presets=presets.RELU,
        runtime_quick="~25 s",
        run=run_relu,
        figures=list(RELU_CAPTIONS),
        figure="Fig. 2 (right)",
        claims=RELU_CLAIMS,
        draw=draw_relu,
        captions=RELU_CAPTIONS,
        uses_device=False,
    )
)

__all__ = [
    "CONVERGENCE",
    "CONVERGENCE_CLAIMS",
    "INIT",
    "INIT_CLAIMS",
    "RELU",
    "RELU_CLAIMS",
    "SCALES",
    "SCALES_CLAIMS",
    "run_convergence",
    "run_init",
    "run_relu",
    "run_scales",
]

from collapselab.experiments.pcb import more  # noqa: E402,F401  registers Figs. 4d, 8, 9, 11, 13
