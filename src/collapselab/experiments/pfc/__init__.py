"""Paper 001, Progressive Feedforward Collapse of ResNet Training: its experiments.

Importing this package registers (``collapselab reproduce pfc``):

=========================  ===================================================  ==========
id                         what                                                 figure
=========================  ===================================================  ==========
``pfc-toy``                2-D straight-line trajectories to simplex-ETF means  Fig. 1
``pfc-training-fc``        FC ResNet: PFC1-3 per layer over epochs and depth,   Figs 2-3
                           geodesic prediction, Theorem 1's S
``pfc-training-conv``      conv ResNet, the same (last stage's blocks)          Figs 2-3
``pfc-mufm``               UFM vs MUFM vs data, literal and converged solvers   Fig. 4
``pfc-lambda-sweep``       MUFM against λ/λ_W from 0.1 to 4                     Fig. 5
``pfc-theorems``           Monte-Carlo / solved checks of Theorems 1-4          §III
=========================  ===================================================  ==========

Presets (:mod:`~collapselab.experiments.pfc.presets`): ``quick`` (the whole paper in minutes
on a 2-core CPU), ``paper`` (the paper's scale: Table I's networks on local dataset files,
350 epochs; the conv experiment also has ``paper-cifar10``, ``paper-stl10`` and
``paper-cifar100`` for the other Table I rows) and ``tiny`` (the test-suite's).

Public API:

- :data:`TABLE_I`: the paper-scale training configuration of every Table I row.
- :func:`build_network_setup`, :class:`NetworkSetup`, :func:`dry_run`,
  :func:`measured_layers`: build (or check without training) a training experiment.
- :func:`toy_instance`, :func:`mufm_data`: the Fig. 1 and §IV-B instances.
- The experiments (module globals ``TOY``, ``TRAINING_FC``, ``TRAINING_CONV``, ``MUFM``,
  ``LAMBDA_SWEEP``, ``THEOREMS``) and their claim lists.
"""

from collapselab.experiments.pfc import presets
from collapselab.experiments.pfc._common import PAPER
from collapselab.experiments.pfc.figures import (
    draw_lambda_sweep,
    draw_mufm,
    draw_theorems,
    draw_toy,
    draw_training,
)
from collapselab.experiments.pfc.mufm import (
    MUFM_CLAIMS,
    SWEEP_CLAIMS,
    mufm_data,
    run_lambda_sweep,
    run_mufm,
)
from collapselab.experiments.pfc.networks import (
    NetworkSetup,
    build_network_setup,
    dry_run,
    measured_layers,
)
from collapselab.experiments.pfc.presets import TABLE_I
from collapselab.experiments.pfc.theorems import THEOREM_CLAIMS, run_theorems
from collapselab.experiments.pfc.toy import TOY_CLAIMS, run_toy, toy_instance
from collapselab.experiments.pfc.training import TRAINING_CLAIMS, run_training
from collapselab.experiments.registry import Experiment, register
from collapselab.experiments.runtimes import stated_runtimes

TOY = register(
    Experiment(
        id="pfc-toy",
        paper=PAPER,
        title="straight-line trajectories of 2-D features to simplex-ETF class means",
        presets=presets.TOY,
        **stated_runtimes("pfc-toy"),
        run=run_toy,
        figures=["toy"],
        figure="Fig. 1",
        claims=TOY_CLAIMS,
        draw=draw_toy,
        captions={
            "toy": (
                "Fig. 1: 2-D features moving in straight lines from their start h(0) to a "
                "simplex ETF h(1) (dots grow with t; stars: the ETF class means). Right: PFC1 "
                "(within/between trace ratio), PFC2 (distance of the class means to an ETF) "
                "and PFC3 (nearest-class-centre accuracy) along the line; green dots mark "
                "t = 0, 0.25, ..., 1."
            )
        },
        uses_device=False,
    )
)

_TRAINING_FIGURES = ["pfc_over_epochs", "pfc_vs_depth", "training"]
_TRAINING_CAPTIONS = {
    "pfc_over_epochs": (
        "Fig. 2: PFC1 (within/between trace ratio, log scale), PFC2 (distance of the class "
        "means to a simplex ETF) and PFC3 (nearest-class-centre accuracy) of every measured "
        "layer over training; darker is shallower. Dotted red line: first epoch with zero "
        "training error. Collapse is progressive when deeper layers sit below (PFC1, PFC2) "
        "or above (PFC3) shallower ones."
    ),
    "pfc_vs_depth": (
        "Fig. 3: the same metrics at the final epoch against each layer's relative position "
        "pos(l) (green dots), with the geodesic (straight-line) prediction from the first to "
        "the last measured layer (blue line)."
    ),
    "training": (
        "Loss (log scale) and accuracy on the training and test splits per epoch; dotted red "
        "line: first epoch with zero training error."
    ),
}

TRAINING_FC = register(
    Experiment(
        id="pfc-training-fc",
        paper=PAPER,
        title="progressive collapse in a fully connected ResNet (PFC1-3 per layer, geodesic)",
        presets=presets.TRAINING_FC,
        **stated_runtimes("pfc-training-fc"),
        run=run_training,
        figures=_TRAINING_FIGURES,
        figure="Figs 2-3 (a)",
        claims=TRAINING_CLAIMS,
        draw=draw_training,
        dry_run=dry_run,
        captions=_TRAINING_CAPTIONS,
        fallbacks={"quick": "quick-bundled"},
    )
)

TRAINING_CONV = register(
    Experiment(
        id="pfc-training-conv",
        paper=PAPER,
        title="progressive collapse in a conv ResNet's last stage (PFC1-3 per block, geodesic)",
        presets=presets.TRAINING_CONV,
        **stated_runtimes("pfc-training-conv"),
        run=run_training,
        figures=_TRAINING_FIGURES,
        figure="Figs 2-3 (b-e)",
        claims=TRAINING_CLAIMS,
        draw=draw_training,
        dry_run=dry_run,
        captions=_TRAINING_CAPTIONS,
        fallbacks={"quick": "quick-bundled"},
    )
)

MUFM = register(
    Experiment(
        id="pfc-mufm",
        paper=PAPER,
        title="UFM vs MUFM optima vs the data (literal and converged solvers)",
        presets=presets.MUFM,
        **stated_runtimes("pfc-mufm"),
        run=run_mufm,
        figures=["ufm_vs_mufm"],
        figure="Fig. 4",
        claims=MUFM_CLAIMS,
        draw=draw_mufm,
        captions={
            "ufm_vs_mufm": (
                "Fig. 4: PFC1-3 of the optima of the unconstrained feature model (UFM) and of "
                "the multilayer UFM tied to the data (MUFM), each found by the paper's plain "
                "gradient descent (literal) and by L-BFGS to a gradient norm of 1e-9 "
                "(converged); red line: the same metric of the data X."
            )
        },
        uses_device=False,
    )
)

LAMBDA_SWEEP = register(
    Experiment(
        id="pfc-lambda-sweep",
        paper=PAPER,
        title="MUFM optima against λ/λ_W from 0.1 to 4",
        presets=presets.LAMBDA_SWEEP,
        **stated_runtimes("pfc-lambda-sweep"),
        run=run_lambda_sweep,
        figures=["lambda_sweep"],
        figure="Fig. 5",
        claims=SWEEP_CLAIMS,
        draw=draw_lambda_sweep,
        captions={
            "lambda_sweep": (
                "Fig. 5: PFC1-3 of the MUFM optimum and its alignment with the data against "
                "λ/λ_W (log scale), for the converged and the literal solver; flat line: the "
                "data's value. Larger λ keeps the features closer to the data."
            )
        },
        uses_device=False,
    )
)

THEOREMS = register(
    Experiment(
        id="pfc-theorems",
        paper=PAPER,
        title="numerical checks of Theorems 1-4 (Monte-Carlo and solved instances)",
        presets=presets.THEOREMS,
        **stated_runtimes("pfc-theorems"),
        run=run_theorems,
        figures=["theorems"],
        figure="§III, Theorems 1-4",
        claims=THEOREM_CLAIMS,
        draw=draw_theorems,
        captions={
            "theorems": (
                "Theorem 1: largest rise of PFC1 along random straight lines against S (rises "
                "only where S < 0). Theorem 2: fraction of lines on which PFC2 is monotone, and "
                "the shortest final monotone interval, against the start's distance from the "
                "ETF. Theorem 3: feature error of the published and the corrected reduction. "
                "Theorem 4: PFC1 along the gradient flow (21) and at the MUFM minimisers at "
                "t = 1/λ."
            )
        },
        uses_device=False,
    )
)

__all__ = [
    "LAMBDA_SWEEP",
    "MUFM",
    "MUFM_CLAIMS",
    "SWEEP_CLAIMS",
    "TABLE_I",
    "THEOREMS",
    "THEOREM_CLAIMS",
    "TOY",
    "TOY_CLAIMS",
    "TRAINING_CLAIMS",
    "TRAINING_CONV",
    "TRAINING_FC",
    "NetworkSetup",
    "build_network_setup",
    "dry_run",
    "measured_layers",
    "mufm_data",
    "toy_instance",
]
