"""Curvature of real networks (paper 004 and Papyan): its experiments.

Importing this package registers four experiments, one per network and loss
(``collapselab run curvature-mlp-ce``, ``curvature-mlp-mse``, ``curvature-conv-ce``,
``curvature-conv-mse``): a network trained on Fashion-MNIST images (the quick preset falls
back to ``quick-bundled``, bundled digits, without the files), with the
:class:`~collapselab.families.Curvature` family measuring every weight layer's
Hessian and GGN spectra, Papyan's decomposition, f_top, the Kronecker alignment and the
weight spectra at a few epochs; figures of the spectra over training, the decomposition
and the alignment; the claims of :mod:`~collapselab.experiments.curvature.claims`.
"""

from collapselab.experiments.curvature import presets
from collapselab.experiments.curvature.claims import CLAIMS
from collapselab.experiments.curvature.figures import CAPTIONS, FIGURES, draw
from collapselab.experiments.curvature.networks import SmallConvNet, build_network, load_data
from collapselab.experiments.curvature.training import curvature_dry_run, run_curvature
from collapselab.experiments.registry import Experiment, register
from collapselab.experiments.runtimes import stated_runtimes

_TITLES = {"mlp": "a ReLU MLP", "conv": "a two-convolution net"}
EXPERIMENTS = {
    (net, loss): register(
        Experiment(
            id=f"curvature-{net}-{loss}",
            paper="004",
            title=(
                f"layer-wise Hessian/GGN spectra, Papyan's decomposition and f_top of "
                f"{_TITLES[net]} trained with {loss.upper()} on Fashion-MNIST"
            ),
            presets=presets.presets(net, loss),
            **stated_runtimes(f"curvature-{net}-{loss}"),
            fallbacks={"quick": "quick-bundled"},
            run=run_curvature,
            dry_run=curvature_dry_run,
            figures=list(FIGURES),
            figure="Figs 3-7 on a real network",
            claims=list(CLAIMS),
            draw=draw,
            captions=dict(CAPTIONS),
        )
    )
    for net in ("mlp", "conv")
    for loss in ("ce", "mse")
}

__all__ = ["CLAIMS", "EXPERIMENTS", "SmallConvNet", "build_network", "load_data", "run_curvature"]
