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
``pcbias-loc``              LOC natural vs whitened; real vs shuffled labels  Figs. 7a, 10
``pcbias-projections``      ReLU MLPs vs linear twins: top-P projections,     Figs. 1, 5, 6,
                            accessibility, critical PC, discriminability;     Table 1
                            images on top PCs vs low-pass filtered
``pcbias-amplification``    PC amplification and early stopping               Fig. 9
``pcbias-separable``        P-separable relabelled data                       Fig. 11
``pcbias-frequency``        frequency dataset: critical frequency vs          Figs. 8, 13,
                            accessibility and discriminability; boundaries    16
``pcbias-stvgg``            linearised st-VGG: per-PC std                     Fig. 4d
==========================  ================================================  ==============

Presets (:mod:`~collapselab.experiments.pcbias.presets`): ``quick`` (minutes on 2 cores),
``standard`` (real images, about an hour on 2 cores), ``paper`` (the paper's data and
architectures, for a GPU; dry-run tested) and ``tiny`` (the test suite's). The theory is
:mod:`collapselab.theory.pcbias` and :mod:`~collapselab.theory.pcbias_relu`.
"""

from collapselab.experiments.pcbias import presets
from collapselab.experiments.pcbias._common import PAPER
from collapselab.experiments.pcbias.convergence import CONVERGENCE_CLAIMS, run_convergence
from collapselab.experiments.pcbias.figures import (
    AMPLIFICATION_CAPTIONS,
    CONVERGENCE_CAPTIONS,
    FREQUENCY_CAPTIONS,
    INIT_CAPTIONS,
    LOC_CAPTIONS,
    PROJECTION_CAPTIONS,
    RELU_CAPTIONS,
    SCALES_CAPTIONS,
    SEPARABLE_CAPTIONS,
    STVGG_CAPTIONS,
    draw_amplification,
    draw_convergence,
    draw_frequency,
    draw_init,
    draw_loc,
    draw_projections,
    draw_relu,
    draw_scales,
    draw_separable,
    draw_stvgg,
)
from collapselab.experiments.pcbias.frequency import FREQUENCY_CLAIMS, run_frequency
from collapselab.experiments.pcbias.initialisation import INIT_CLAIMS, run_init
from collapselab.experiments.pcbias.learning_order import LOC_CLAIMS, loc_dry_run, run_loc
from collapselab.experiments.pcbias.manipulations import (
    AMPLIFICATION_CLAIMS,
    SEPARABLE_CLAIMS,
    run_amplification,
    run_separable,
)
from collapselab.experiments.pcbias.projections import (
    PROJECTION_CLAIMS,
    projections_dry_run,
    run_projections,
)
from collapselab.experiments.pcbias.relu import RELU_CLAIMS, run_relu
from collapselab.experiments.pcbias.scales import SCALES_CLAIMS, run_scales
from collapselab.experiments.pcbias.stvgg import STVGG_CLAIMS, run_stvgg, stvgg_dry_run
from collapselab.experiments.pcbias.training import linear_dry_run
from collapselab.experiments.registry import Experiment, register
from collapselab.experiments.runtimes import stated_runtimes

CONVERGENCE = register(
    Experiment(
        id="pcbias-convergence",
        paper=PAPER,
        title="per-PC convergence of deep linear ensembles, natural and whitened, vs Eq. 10",
        presets=presets.CONVERGENCE,
        **stated_runtimes("pcbias-convergence"),
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
        **stated_runtimes("pcbias-scales"),
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
        **stated_runtimes("pcbias-init"),
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
        **stated_runtimes("pcbias-relu"),
        run=run_relu,
        figures=list(RELU_CAPTIONS),
        figure="Fig. 2 (right)",
        claims=RELU_CLAIMS,
        draw=draw_relu,
        captions=RELU_CAPTIONS,
        uses_device=False,
    )
)

LOC = register(
    Experiment(
        id="pcbias-loc",
        paper=PAPER,
        title="learning-order constancy of linear and ReLU nets: natural vs whitened, real vs "
        "shuffled labels",
        presets=presets.LOC,
        **stated_runtimes("pcbias-loc"),
        fallbacks={"quick": "quick-bundled"},
        run=run_loc,
        dry_run=loc_dry_run,
        figures=list(LOC_CAPTIONS),
        figure="Figs. 7a-b, 10",
        claims=LOC_CLAIMS,
        draw=draw_loc,
        captions=LOC_CAPTIONS,
        uses_device=False,
    )
)

PROJECTIONS = register(
    Experiment(
        id="pcbias-projections",
        paper=PAPER,
        title="ReLU MLPs and linear twins: PC projections, accessibility, critical PC",
        presets=presets.PROJECTIONS,
        **stated_runtimes("pcbias-projections"),
        fallbacks={"quick": "quick-bundled"},
        run=run_projections,
        dry_run=projections_dry_run,
        figures=list(PROJECTION_CAPTIONS),
        figure="Figs. 1, 5, 6a-b, Table 1",
        claims=PROJECTION_CLAIMS,
        draw=draw_projections,
        captions=PROJECTION_CAPTIONS,
    )
)

AMPLIFICATION = register(
    Experiment(
        id="pcbias-amplification",
        paper=PAPER,
        title="PC amplification (top / bottom 1.5%) and the benefit of early stopping",
        presets=presets.AMPLIFICATION,
        **stated_runtimes("pcbias-amplification"),
        fallbacks={"quick": "quick-bundled"},
        run=run_amplification,
        dry_run=projections_dry_run,
        figures=list(AMPLIFICATION_CAPTIONS),
        figure="Fig. 9",
        claims=AMPLIFICATION_CLAIMS,
        draw=draw_amplification,
        captions=AMPLIFICATION_CAPTIONS,
    )
)

SEPARABLE = register(
    Experiment(
        id="pcbias-separable",
        paper=PAPER,
        title="P-separable relabelled data: fewer PCs, faster learning",
        presets=presets.SEPARABLE,
        **stated_runtimes("pcbias-separable"),
        fallbacks={"quick": "quick-bundled"},
        run=run_separable,
        dry_run=projections_dry_run,
        figures=list(SEPARABLE_CAPTIONS),
        figure="Fig. 11",
        claims=SEPARABLE_CLAIMS,
        draw=draw_separable,
        captions=SEPARABLE_CAPTIONS,
    )
)

FREQUENCY = register(
    Experiment(
        id="pcbias-frequency",
        paper=PAPER,
        title="frequency dataset: critical frequency vs accessibility; decision boundaries",
        presets=presets.FREQUENCY,
        **stated_runtimes("pcbias-frequency"),
        run=run_frequency,
        figures=list(FREQUENCY_CAPTIONS),
        figure="Figs. 8, 13, 16",
        claims=FREQUENCY_CLAIMS,
        draw=draw_frequency,
        captions=FREQUENCY_CAPTIONS,
    )
)

STVGG = register(
    Experiment(
        id="pcbias-stvgg",
        paper=PAPER,
        title="st-VGG: the PC-bias of a non-linear CNN's linear part, and its accuracy on PC "
        "projections",
        presets=presets.STVGG,
        **stated_runtimes("pcbias-stvgg"),
        fallbacks={"quick": "quick-bundled"},
        run=run_stvgg,
        dry_run=stvgg_dry_run,
        figures=list(STVGG_CAPTIONS),
        figure="Figs. 4d, 5a",
        claims=STVGG_CLAIMS,
        draw=draw_stvgg,
        captions=STVGG_CAPTIONS,
    )
)

__all__ = [
    "AMPLIFICATION",
    "AMPLIFICATION_CLAIMS",
    "CONVERGENCE",
    "CONVERGENCE_CLAIMS",
    "FREQUENCY",
    "FREQUENCY_CLAIMS",
    "INIT",
    "INIT_CLAIMS",
    "LOC",
    "LOC_CLAIMS",
    "PROJECTIONS",
    "PROJECTION_CLAIMS",
    "RELU",
    "RELU_CLAIMS",
    "SCALES",
    "SCALES_CLAIMS",
    "SEPARABLE",
    "SEPARABLE_CLAIMS",
    "STVGG",
    "STVGG_CLAIMS",
    "run_amplification",
    "run_convergence",
    "run_frequency",
    "run_init",
    "run_loc",
    "run_projections",
    "run_relu",
    "run_scales",
    "run_separable",
    "run_stvgg",
]
