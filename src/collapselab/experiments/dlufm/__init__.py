"""Paper 004 (DLUFM): the deep linear unconstrained feature model and the low-rank
structures it unifies. Importing this package registers (``collapselab reproduce 004``):

==========================  ================================================  ==============
id                          what                                              figure
==========================  ================================================  ==============
``dlufm-linear``            gradient descent on the deep linear UFM: Hessian  Figs 3-8, 12-14
                            outliers, alignment, knockouts, gradient, weights,
                            App. E; every theorem verified at the endpoint
``dlufm-relu``              the deep ReLU UFM swept over widths and seeds;    Figs 9-11,
                            symmetric vs lower-rank endpoints reported        Tables 1-4
``dlufm-regularisation``    β/β_c across condition (2): zero optimum beyond   §3.2, (2)
``dlufm-layers``            unequal λ, K ≠ 3, several L: λ_out(l) ∝ λ_W(l)    Thm 4.1
``dlufm-mlp``               beyond the paper: a bias-free MLP trained with    Thms 4.1-4.3
                            MSE on real images; its last layers' spectra
==========================  ================================================  ==============

Presets (:mod:`~collapselab.experiments.dlufm.presets`): ``quick`` (minutes on 2 cores),
``standard`` (longer runs, more seeds and widths), ``paper`` (the scale the figures
suggest: still a CPU job, every problem is small) and ``tiny`` (the test suite's). The theory
is :mod:`collapselab.theory.dlufm`, :mod:`~collapselab.theory.dlufm_layerwise` and
:mod:`~collapselab.theory.dlufm_theorems`.
"""

from collapselab.experiments.dlufm import presets
from collapselab.experiments.dlufm._common import PAPER
from collapselab.experiments.dlufm.figures import (
    LAYER_CAPTIONS,
    LINEAR_CAPTIONS,
    MLP_CAPTIONS,
    REGULARISATION_CAPTIONS,
    RELU_CAPTIONS,
    draw_layers,
    draw_linear,
    draw_mlp,
    draw_regularisation,
    draw_relu,
)
from collapselab.experiments.dlufm.linear import LINEAR_CLAIMS, run_linear
from collapselab.experiments.dlufm.mlp import MLP_CLAIMS, mlp_dry_run, run_mlp
from collapselab.experiments.dlufm.relu import RELU_CLAIMS, classify, run_relu
from collapselab.experiments.dlufm.snapshots import layer_snapshot
from collapselab.experiments.dlufm.sweeps import (
    LAYER_CLAIMS,
    REGULARISATION_CLAIMS,
    lambda_for_ratio,
    run_layers,
    run_regularisation,
)
from collapselab.experiments.registry import Experiment, register
from collapselab.experiments.runtimes import stated_runtimes

LINEAR = register(
    Experiment(
        id="dlufm-linear",
        paper=PAPER,
        title="deep linear UFM by gradient descent: Hessian, Papyan, gradient, weights, App. E",
        presets=presets.LINEAR,
        **stated_runtimes("dlufm-linear"),
        run=run_linear,
        figures=list(LINEAR_CAPTIONS),
        figure="Figs 3-8, 12-14",
        claims=LINEAR_CLAIMS,
        draw=draw_linear,
        captions=LINEAR_CAPTIONS,
        uses_device=False,
    )
)

RELU = register(
    Experiment(
        id="dlufm-relu",
        paper=PAPER,
        title="deep ReLU UFM over widths and seeds: outliers, knockouts, weights, Tables 1-4",
        presets=presets.RELU,
        **stated_runtimes("dlufm-relu"),
        run=run_relu,
        figures=list(RELU_CAPTIONS),
        figure="Figs 9-11, Tables 1-4",
        claims=RELU_CLAIMS,
        draw=draw_relu,
        captions=RELU_CAPTIONS,
        uses_device=False,
    )
)

REGULARISATION = register(
    Experiment(
        id="dlufm-regularisation",
        paper=PAPER,
        title="across the threshold of condition (2): the optimum collapses to zero",
        presets=presets.REGULARISATION,
        **stated_runtimes("dlufm-regularisation"),
        run=run_regularisation,
        figures=list(REGULARISATION_CAPTIONS),
        figure="§3.2, condition (2)",
        claims=REGULARISATION_CLAIMS,
        draw=draw_regularisation,
        captions=REGULARISATION_CAPTIONS,
        uses_device=False,
    )
)

LAYERS = register(
    Experiment(
        id="dlufm-layers",
        paper=PAPER,
        title="unequal λ, K ≠ 3, several L: λ_out(l) ∝ λ_W(l) and every theorem verified",
        presets=presets.LAYERS,
        **stated_runtimes("dlufm-layers"),
        run=run_layers,
        figures=list(LAYER_CAPTIONS),
        figure="Theorem 4.1 (layer sweep)",
        claims=LAYER_CLAIMS,
        draw=draw_layers,
        captions=LAYER_CAPTIONS,
        uses_device=False,
    )
)

MLP = register(
    Experiment(
        id="dlufm-mlp",
        paper=PAPER,
        title="beyond the paper: a trained MLP's last layers against the deep UFM's predictions",
        presets=presets.MLP,
        **stated_runtimes("dlufm-mlp"),
        dry_run=mlp_dry_run,
        run=run_mlp,
        figures=list(MLP_CAPTIONS),
        figure="Thms 4.1-4.3 on a real network",
        claims=MLP_CLAIMS,
        draw=draw_mlp,
        captions=MLP_CAPTIONS,
    )
)

__all__ = [
    "LAYERS",
    "LAYER_CLAIMS",
    "LINEAR",
    "LINEAR_CLAIMS",
    "MLP",
    "MLP_CLAIMS",
    "REGULARISATION",
    "REGULARISATION_CLAIMS",
    "RELU",
    "RELU_CLAIMS",
    "classify",
    "lambda_for_ratio",
    "layer_snapshot",
    "mlp_dry_run",
    "run_layers",
    "run_linear",
    "run_mlp",
    "run_regularisation",
    "run_relu",
]
