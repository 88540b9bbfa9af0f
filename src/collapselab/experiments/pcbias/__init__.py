"""Paper 002, the principal-components bias of deep linear networks: its experiments.

Importing this package registers (``collapselab reproduce pcbias``):

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

The package, one file per concern:

- :mod:`~collapselab.experiments.pcbias.presets`: the typed presets and every experiment's
  tiers, ``tiny`` (the test suite's, generated or bundled data), ``quick`` (minutes on 2
  cores), ``standard`` (real images, about an hour on 2 cores), ``paper`` (the paper's data
  and architectures, for a GPU; dry-run tested); ``quick-bundled`` is derived where
  ``quick`` reads Fashion-MNIST's files.
- The run functions, one module per experiment: :mod:`.convergence`, :mod:`.scales`,
  :mod:`.initialisation`, :mod:`.relu`, :mod:`.learning_order`, :mod:`.projections` (with
  Fig. 1's images), :mod:`.manipulations` (amplification and P-separable data),
  :mod:`.frequency`, :mod:`.stvgg`; the networks they train in ensembles: deep linear nets
  by exact GD (:mod:`.training`, which also holds the SGD step the others share), linear nets
  by SGD (:mod:`.linear_sgd`), MLPs (:mod:`.projections`), st-VGGs (:mod:`.stvgg`) and the
  two-layer ReLU model (:mod:`.relu`); :mod:`.evaluation`, the transformed test sets they
  are scored on.
- :mod:`~collapselab.experiments.pcbias.claims`: every claim, with its thresholds.
- :mod:`~collapselab.experiments.pcbias.figures`: the figures and their captions.
- ``_common``: the data as the networks see it (one :class:`~collapselab.data.DataSpec`
  read by :func:`~collapselab.data.load_data`, cached per process) and the ensembles (typed
  members run as one sweep).

The theory is :mod:`collapselab.theory.pcbias` and :mod:`~collapselab.theory.pcbias_relu`.
"""

from collapselab.experiments.pcbias import claims, figures, presets
from collapselab.experiments.pcbias.convergence import run_convergence
from collapselab.experiments.pcbias.frequency import run_frequency
from collapselab.experiments.pcbias.initialisation import run_init
from collapselab.experiments.pcbias.learning_order import loc_dry_run, run_loc
from collapselab.experiments.pcbias.manipulations import run_amplification, run_separable
from collapselab.experiments.pcbias.projections import (
    mlp_dry_run,
    projections_dry_run,
    run_projections,
)
from collapselab.experiments.pcbias.relu import run_relu
from collapselab.experiments.pcbias.scales import run_scales
from collapselab.experiments.pcbias.stvgg import run_stvgg, stvgg_dry_run
from collapselab.experiments.pcbias.training import linear_dry_run
from collapselab.experiments.registry import Experiment, register_paper

(
    CONVERGENCE,
    SCALES,
    INIT,
    RELU,
    LOC,
    PROJECTIONS,
    AMPLIFICATION,
    SEPARABLE,
    FREQUENCY,
    STVGG,
) = register_paper(
    "002",
    [
        Experiment(
            id="pcbias-convergence",
            title="per-PC convergence of deep linear ensembles, natural and whitened, vs Eq. 10",
            presets=presets.CONVERGENCE,
            run=run_convergence,
            dry_run=linear_dry_run,
            figure="Figs. 2 (left), 4a, 4c",
            claims=claims.CONVERGENCE_CLAIMS,
            draw=figures.draw_convergence,
            captions=figures.CONVERGENCE_CAPTIONS,
            uses_device=False,
        ),
        Experiment(
            id="pcbias-scales",
            title="gradient-scale matrices A_l, B_l stay near α_l I, β_l I early in training",
            presets=presets.SCALES,
            run=run_scales,
            dry_run=linear_dry_run,
            figure="Fig. 3",
            claims=claims.SCALES_CLAIMS,
            draw=figures.draw_scales,
            captions=figures.SCALES_CAPTIONS,
            uses_device=False,
        ),
        Experiment(
            id="pcbias-init",
            title="Def. 3 vs Glorot uniform: learning curves and Eq. 10's effective factor",
            presets=presets.INIT,
            run=run_init,
            dry_run=linear_dry_run,
            figure="Fig. 12",
            claims=claims.INIT_CLAIMS,
            draw=figures.draw_init,
            captions=figures.INIT_CAPTIONS,
            uses_device=False,
        ),
        Experiment(
            id="pcbias-relu",
            title="two-layer ReLU net: per-PC std against the approximate dynamics (¼ vs ½)",
            presets=presets.RELU,
            run=run_relu,
            figure="Fig. 2 (right)",
            claims=claims.RELU_CLAIMS,
            draw=figures.draw_relu,
            captions=figures.RELU_CAPTIONS,
            uses_device=False,
        ),
        Experiment(
            id="pcbias-loc",
            title="learning-order constancy of linear and ReLU nets: natural vs whitened, real "
            "vs shuffled labels",
            presets=presets.LOC,
            run=run_loc,
            dry_run=loc_dry_run,
            figure="Figs. 7a-b, 10",
            claims=claims.LOC_CLAIMS,
            draw=figures.draw_loc,
            captions=figures.LOC_CAPTIONS,
            uses_device=False,
        ),
        Experiment(
            id="pcbias-projections",
            title="ReLU MLPs and linear twins: PC projections, accessibility, critical PC",
            presets=presets.PROJECTIONS,
            run=run_projections,
            dry_run=projections_dry_run,
            figure="Figs. 1, 5, 6a-b, Table 1",
            claims=claims.PROJECTION_CLAIMS,
            draw=figures.draw_projections,
            captions=figures.PROJECTION_CAPTIONS,
        ),
        Experiment(
            id="pcbias-amplification",
            title="PC amplification (top / bottom 1.5%) and the benefit of early stopping",
            presets=presets.AMPLIFICATION,
            run=run_amplification,
            dry_run=mlp_dry_run,
            figure="Fig. 9",
            claims=claims.AMPLIFICATION_CLAIMS,
            draw=figures.draw_amplification,
            captions=figures.AMPLIFICATION_CAPTIONS,
        ),
        Experiment(
            id="pcbias-separable",
            title="P-separable relabelled data: fewer PCs, faster learning",
            presets=presets.SEPARABLE,
            run=run_separable,
            dry_run=mlp_dry_run,
            figure="Fig. 11",
            claims=claims.SEPARABLE_CLAIMS,
            draw=figures.draw_separable,
            captions=figures.SEPARABLE_CAPTIONS,
        ),
        Experiment(
            id="pcbias-frequency",
            title="frequency dataset: critical frequency vs accessibility; decision boundaries",
            presets=presets.FREQUENCY,
            run=run_frequency,
            figure="Figs. 8, 13, 16",
            claims=claims.FREQUENCY_CLAIMS,
            draw=figures.draw_frequency,
            captions=figures.FREQUENCY_CAPTIONS,
        ),
        Experiment(
            id="pcbias-stvgg",
            title="st-VGG: the PC-bias of a non-linear CNN's linear part, and its accuracy on "
            "PC projections",
            presets=presets.STVGG,
            run=run_stvgg,
            dry_run=stvgg_dry_run,
            figure="Figs. 4d, 5a",
            claims=claims.STVGG_CLAIMS,
            draw=figures.draw_stvgg,
            captions=figures.STVGG_CAPTIONS,
        ),
    ],
)

__all__ = [
    "AMPLIFICATION",
    "CONVERGENCE",
    "FREQUENCY",
    "INIT",
    "LOC",
    "PROJECTIONS",
    "RELU",
    "SCALES",
    "SEPARABLE",
    "STVGG",
]
