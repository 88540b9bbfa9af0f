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
from collapselab.experiments.registry import register_paper, table_row

_NETWORK_TITLES = {"mlp": "a ReLU MLP", "conv": "a two-convolution net"}

LINEAR, RELU, REGULARISATION, LAYERS, MLP, *_NETWORKS = register_paper(
    "004",
    [
        table_row(
            "dlufm-linear",
            "deep linear UFM by gradient descent: Hessian, Papyan, gradient, weights, App. E",
            "Figs 3-8, 12-14",
            presets.LINEAR,
            run_linear,
            LINEAR_CLAIMS,
            figures.draw_linear,
            figures.LINEAR_CAPTIONS,
            uses_device=False,
        ),
        table_row(
            "dlufm-relu",
            "deep ReLU UFM over widths and seeds: outliers, knockouts, weights, Tables 1-4",
            "Figs 9-11, Tables 1-4",
            presets.RELU,
            run_relu,
            RELU_CLAIMS,
            figures.draw_relu,
            figures.RELU_CAPTIONS,
            uses_device=False,
        ),
        table_row(
            "dlufm-regularisation",
            "across the threshold of condition (2): the optimum collapses to zero",
            "§3.2, condition (2)",
            presets.REGULARISATION,
            run_regularisation,
            REGULARISATION_CLAIMS,
            figures.draw_regularisation,
            figures.REGULARISATION_CAPTIONS,
            uses_device=False,
        ),
        table_row(
            "dlufm-layers",
            "unequal λ, K ≠ 3, several L: λ_out(l) ∝ λ_W(l) and every theorem verified",
            "Theorem 4.1 (layer sweep)",
            presets.LAYERS,
            run_layers,
            LAYER_CLAIMS,
            figures.draw_layers,
            figures.LAYER_CAPTIONS,
            uses_device=False,
        ),
        table_row(
            "dlufm-mlp",
            "beyond the paper: a trained MLP's last layers against the deep UFM's predictions",
            "Thms 4.1-4.3 on a real network",
            presets.MLP,
            run_mlp,
            MLP_CLAIMS,
            figures.draw_mlp,
            figures.MLP_CAPTIONS,
            dry_run=mlp_dry_run,
        ),
        *(
            table_row(
                f"curvature-{net}-{loss}",
                # no dataset in the title: a quick run may read the bundled digits instead
                # of Fashion-MNIST, and the report shows the data it read on its own line
                f"layer-wise Hessian/GGN spectra, Papyan's decomposition and f_top of "
                f"{_NETWORK_TITLES[net]} trained with {loss.upper()} on images",
                "Figs 3-7 on a real network",
                presets.NETWORKS[net, loss],
                run_curvature,
                NETWORK_CLAIMS,
                figures.draw_network,
                figures.NETWORK_CAPTIONS,
                dry_run=network_dry_run,
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
