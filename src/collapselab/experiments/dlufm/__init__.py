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
``curvature-mlp-ce``,       real networks (a ReLU MLP, a two-convolution      Figs 3-7 on a
``curvature-mlp-mse``,      net) trained with CE or MSE on images: layer-     real network
``curvature-conv-ce``,      wise Hessian/GGN spectra, Papyan's decomposition,
``curvature-conv-mse``      f_top, Kronecker alignment, weight outliers
==========================  ================================================  ==============

The package, one file per concern:

- :mod:`~collapselab.experiments.dlufm.presets`: the typed presets and every experiment's
  tiers ``tiny`` (the test suite's), ``quick`` (minutes on 2 cores), ``standard`` (longer
  runs, more seeds and widths; three Fashion-MNIST classes for the networks) and ``paper``
  (the scale the figures suggest: a CPU job for the deep UFM, a GPU one on all of
  Fashion-MNIST for the networks); the networks' ``quick-bundled`` is derived where their
  ``quick`` reads Fashion-MNIST's files.
- :mod:`~collapselab.experiments.dlufm.linear` (``dlufm-linear``),
  :mod:`~collapselab.experiments.dlufm.relu` (``dlufm-relu``),
  :mod:`~collapselab.experiments.dlufm.sweeps` (``dlufm-regularisation``, ``dlufm-layers``),
  :mod:`~collapselab.experiments.dlufm.mlp` (``dlufm-mlp``),
  :mod:`~collapselab.experiments.dlufm.networks` (``curvature-*``: the networks, the run,
  the dry run) and :mod:`~collapselab.experiments.dlufm.terminal` (whether a network's run
  entered the terminal phase): the run functions;
  :mod:`~collapselab.experiments.dlufm.ufm`: what the deep-UFM runs share (the model of a
  preset, its gradient descent, one layer's snapshot).
- :mod:`~collapselab.experiments.dlufm.claims`: every claim, with its thresholds.
- :mod:`~collapselab.experiments.dlufm.figures`: the figures and their captions.

The theory is :mod:`collapselab.theory.dlufm`, :mod:`~collapselab.theory.dlufm_layerwise`
and :mod:`~collapselab.theory.dlufm_theorems`; the networks' curvature is the
:class:`~collapselab.families.Curvature` family (docs/curvature.md).
"""

from collapselab.experiments.dlufm import claims, figures, presets
from collapselab.experiments.dlufm.claims import (
    LAYER_CLAIMS,
    LINEAR_CLAIMS,
    MLP_CLAIMS,
    NETWORK_CLAIMS,
    REGULARISATION_CLAIMS,
    RELU_CLAIMS,
)
from collapselab.experiments.dlufm.linear import run_linear
from collapselab.experiments.dlufm.mlp import mlp_dry_run, run_mlp
from collapselab.experiments.dlufm.networks import (
    SmallConvNet,
    build_network,
    network_dry_run,
    run_curvature,
)
from collapselab.experiments.dlufm.relu import classify, run_relu
from collapselab.experiments.dlufm.sweeps import lambda_for_ratio, run_layers, run_regularisation
from collapselab.experiments.dlufm.ufm import layer_snapshot
from collapselab.experiments.registry import Experiment, register_paper

_NETWORK_TITLES = {"mlp": "a ReLU MLP", "conv": "a two-convolution net"}

LINEAR, RELU, REGULARISATION, LAYERS, MLP, *_NETWORKS = register_paper(
    "004",
    [
        Experiment(
            id="dlufm-linear",
            title="deep linear UFM by gradient descent: Hessian, Papyan, gradient, weights, App. E",
            presets=presets.LINEAR,
            run=run_linear,
            figure="Figs 3-8, 12-14",
            claims=LINEAR_CLAIMS,
            draw=figures.draw_linear,
            captions=figures.LINEAR_CAPTIONS,
            uses_device=False,
        ),
        Experiment(
            id="dlufm-relu",
            title="deep ReLU UFM over widths and seeds: outliers, knockouts, weights, Tables 1-4",
            presets=presets.RELU,
            run=run_relu,
            figure="Figs 9-11, Tables 1-4",
            claims=RELU_CLAIMS,
            draw=figures.draw_relu,
            captions=figures.RELU_CAPTIONS,
            uses_device=False,
        ),
        Experiment(
            id="dlufm-regularisation",
            title="across the threshold of condition (2): the optimum collapses to zero",
            presets=presets.REGULARISATION,
            run=run_regularisation,
            figure="§3.2, condition (2)",
            claims=REGULARISATION_CLAIMS,
            draw=figures.draw_regularisation,
            captions=figures.REGULARISATION_CAPTIONS,
            uses_device=False,
        ),
        Experiment(
            id="dlufm-layers",
            title="unequal λ, K ≠ 3, several L: λ_out(l) ∝ λ_W(l) and every theorem verified",
            presets=presets.LAYERS,
            run=run_layers,
            figure="Theorem 4.1 (layer sweep)",
            claims=LAYER_CLAIMS,
            draw=figures.draw_layers,
            captions=figures.LAYER_CAPTIONS,
            uses_device=False,
        ),
        Experiment(
            id="dlufm-mlp",
            title=(
                "beyond the paper: a trained MLP's last layers against the deep UFM's predictions"
            ),
            presets=presets.MLP,
            run=run_mlp,
            dry_run=mlp_dry_run,
            figure="Thms 4.1-4.3 on a real network",
            claims=MLP_CLAIMS,
            draw=figures.draw_mlp,
            captions=figures.MLP_CAPTIONS,
        ),
        *(
            Experiment(
                id=f"curvature-{net}-{loss}",
                # no dataset in the title: a quick run may read the bundled digits instead
                # of Fashion-MNIST, and the report shows the data it read on its own line
                title=(
                    f"layer-wise Hessian/GGN spectra, Papyan's decomposition and f_top of "
                    f"{_NETWORK_TITLES[net]} trained with {loss.upper()} on images"
                ),
                presets=presets.NETWORKS[net, loss],
                run=run_curvature,
                dry_run=network_dry_run,
                figure="Figs 3-7 on a real network",
                claims=NETWORK_CLAIMS,
                draw=figures.draw_network,
                captions=figures.NETWORK_CAPTIONS,
            )
            for net, loss in presets.NETWORKS
        ),
    ],
)

NETWORKS = dict(zip(presets.NETWORKS, _NETWORKS, strict=True))
"""The four curvature experiments by (network, loss)."""

__all__ = [
    "LAYERS",
    "LAYER_CLAIMS",
    "LINEAR",
    "LINEAR_CLAIMS",
    "MLP",
    "MLP_CLAIMS",
    "NETWORKS",
    "NETWORK_CLAIMS",
    "REGULARISATION",
    "REGULARISATION_CLAIMS",
    "RELU",
    "RELU_CLAIMS",
    "SmallConvNet",
    "build_network",
    "claims",
    "classify",
    "lambda_for_ratio",
    "layer_snapshot",
    "mlp_dry_run",
    "network_dry_run",
    "presets",
    "run_curvature",
    "run_layers",
    "run_linear",
    "run_mlp",
    "run_regularisation",
    "run_relu",
]
