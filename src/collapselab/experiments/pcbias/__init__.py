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
from collapselab.experiments.registry import register_paper, table_row

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
        table_row(
            "pcbias-convergence",
            "per-PC convergence of deep linear ensembles, natural and whitened, vs Eq. 10",
            "Figs. 2 (left), 4a, 4c",
            presets.CONVERGENCE,
            run_convergence,
            claims.CONVERGENCE_CLAIMS,
            figures.draw_convergence,
            figures.CONVERGENCE_CAPTIONS,
            dry_run=linear_dry_run,
            uses_device=False,
        ),
        table_row(
            "pcbias-scales",
            "gradient-scale matrices A_l, B_l stay near α_l I, β_l I early in training",
            "Fig. 3",
            presets.SCALES,
            run_scales,
            claims.SCALES_CLAIMS,
            figures.draw_scales,
            figures.SCALES_CAPTIONS,
            dry_run=linear_dry_run,
            uses_device=False,
        ),
        table_row(
            "pcbias-init",
            "Def. 3 vs Glorot uniform: learning curves and Eq. 10's effective factor",
            "Fig. 12",
            presets.INIT,
            run_init,
            claims.INIT_CLAIMS,
            figures.draw_init,
            figures.INIT_CAPTIONS,
            dry_run=linear_dry_run,
            uses_device=False,
        ),
        table_row(
            "pcbias-relu",
            "two-layer ReLU net: per-PC std against the approximate dynamics (¼ vs ½)",
            "Fig. 2 (right)",
            presets.RELU,
            run_relu,
            claims.RELU_CLAIMS,
            figures.draw_relu,
            figures.RELU_CAPTIONS,
            uses_device=False,
        ),
        table_row(
            "pcbias-loc",
            "learning-order constancy of linear and ReLU nets: natural vs whitened, real "
            "vs shuffled labels",
            "Figs. 7a-b, 10",
            presets.LOC,
            run_loc,
            claims.LOC_CLAIMS,
            figures.draw_loc,
            figures.LOC_CAPTIONS,
            dry_run=loc_dry_run,
            uses_device=False,
        ),
        table_row(
            "pcbias-projections",
            "ReLU MLPs and linear twins: PC projections, accessibility, critical PC",
            "Figs. 1, 5, 6a-b, Table 1",
            presets.PROJECTIONS,
            run_projections,
            claims.PROJECTION_CLAIMS,
            figures.draw_projections,
            figures.PROJECTION_CAPTIONS,
            dry_run=projections_dry_run,
        ),
        table_row(
            "pcbias-amplification",
            "PC amplification (top / bottom 1.5%) and the benefit of early stopping",
            "Fig. 9",
            presets.AMPLIFICATION,
            run_amplification,
            claims.AMPLIFICATION_CLAIMS,
            figures.draw_amplification,
            figures.AMPLIFICATION_CAPTIONS,
            dry_run=mlp_dry_run,
        ),
        table_row(
            "pcbias-separable",
            "P-separable relabelled data: fewer PCs, faster learning",
            "Fig. 11",
            presets.SEPARABLE,
            run_separable,
            claims.SEPARABLE_CLAIMS,
            figures.draw_separable,
            figures.SEPARABLE_CAPTIONS,
            dry_run=mlp_dry_run,
        ),
        table_row(
            "pcbias-frequency",
            "frequency dataset: critical frequency vs accessibility; decision boundaries",
            "Figs. 8, 13, 16",
            presets.FREQUENCY,
            run_frequency,
            claims.FREQUENCY_CLAIMS,
            figures.draw_frequency,
            figures.FREQUENCY_CAPTIONS,
        ),
        table_row(
            "pcbias-stvgg",
            "st-VGG: the PC-bias of a non-linear CNN's linear part, and its accuracy on "
            "PC projections",
            "Figs. 4d, 5a",
            presets.STVGG,
            run_stvgg,
            claims.STVGG_CLAIMS,
            figures.draw_stvgg,
            figures.STVGG_CAPTIONS,
            dry_run=stvgg_dry_run,
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
