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

The package, one file per concern:

- :mod:`~collapselab.experiments.pfc.presets`: the typed presets (:class:`TrainingPreset`,
  :class:`ToyPreset`, :class:`MufmPreset`, :class:`SweepPreset`, :class:`TheoremsPreset`)
  and every experiment's tiers: ``tiny`` (the test suite's), ``quick`` (the whole paper in
  minutes on a 2-core CPU), ``standard`` (Fashion-MNIST, within about an hour), ``paper``
  (the paper's scale: Table I's networks on local dataset files, 350 epochs; the conv
  experiment also has ``paper-cifar10``, ``paper-stl10`` and ``paper-cifar100`` for the other
  Table I rows); ``quick-bundled`` is derived where ``quick`` reads Fashion-MNIST's files.
- :mod:`~collapselab.experiments.pfc.toy` (Fig. 1), :mod:`~collapselab.experiments.pfc.networks`
  and :mod:`~collapselab.experiments.pfc.training` (Figs. 2-3: what a training run builds,
  and the run), :mod:`~collapselab.experiments.pfc.mufm` (Figs. 4-5),
  :mod:`~collapselab.experiments.pfc.theorems` (§III): the run functions.
- :mod:`~collapselab.experiments.pfc.claims`: every claim, with its thresholds.
- :mod:`~collapselab.experiments.pfc.figures`: the figures and their captions.

Public API:

- :data:`TABLE_I`: the paper-scale training preset of every Table I row.
- :func:`build_network_setup`, :class:`NetworkSetup`, :func:`dry_run`,
  :func:`measured_layers`: build (or check without training) a training experiment.
- :func:`toy_instance`, :func:`mufm_data`: the Fig. 1 and §IV-B instances.
- The experiments (module globals ``TOY``, ``TRAINING_FC``, ``TRAINING_CONV``, ``MUFM``,
  ``LAMBDA_SWEEP``, ``THEOREMS``) and their claim lists.
"""

from collapselab.experiments.pfc import figures, presets
from collapselab.experiments.pfc.claims import (
    MUFM_CLAIMS,
    SWEEP_CLAIMS,
    THEOREM_CLAIMS,
    TOY_CLAIMS,
    TRAINING_CLAIMS,
)
from collapselab.experiments.pfc.mufm import mufm_data, run_lambda_sweep, run_mufm
from collapselab.experiments.pfc.networks import (
    NetworkSetup,
    build_network_setup,
    dry_run,
    measured_layers,
)
from collapselab.experiments.pfc.presets import (
    TABLE_I,
    MufmPreset,
    SweepPreset,
    TheoremsPreset,
    ToyPreset,
    TrainingPreset,
)
from collapselab.experiments.pfc.theorems import run_theorems
from collapselab.experiments.pfc.toy import run_toy, toy_instance
from collapselab.experiments.pfc.training import run_training
from collapselab.experiments.registry import Experiment, register_paper, table_row


def _training(id: str, title: str, figure: str, presets: dict[str, TrainingPreset]) -> Experiment:
    """A training experiment: the two share the run, the claims, the figures, the dry run."""
    return table_row(
        id,
        title,
        figure,
        presets,
        run_training,
        TRAINING_CLAIMS,
        figures.draw_training,
        figures.TRAINING_CAPTIONS,
        dry_run=dry_run,
    )


TOY, TRAINING_FC, TRAINING_CONV, MUFM, LAMBDA_SWEEP, THEOREMS = register_paper(
    "001",
    [
        table_row(
            "pfc-toy",
            "straight-line trajectories of 2-D features to simplex-ETF class means",
            "Fig. 1",
            presets.TOY,
            run_toy,
            TOY_CLAIMS,
            figures.draw_toy,
            figures.TOY_CAPTIONS,
            uses_device=False,
        ),
        _training(
            "pfc-training-fc",
            "progressive collapse in a fully connected ResNet (PFC1-3 per layer, geodesic)",
            "Figs 2-3 (a)",
            presets.TRAINING_FC,
        ),
        _training(
            "pfc-training-conv",
            "progressive collapse in a conv ResNet's last stage (PFC1-3 per block, geodesic)",
            "Figs 2-3 (b-e)",
            presets.TRAINING_CONV,
        ),
        table_row(
            "pfc-mufm",
            "UFM vs MUFM optima vs the data (literal and converged solvers)",
            "Fig. 4",
            presets.MUFM,
            run_mufm,
            MUFM_CLAIMS,
            figures.draw_mufm,
            figures.MUFM_CAPTIONS,
            uses_device=False,
        ),
        table_row(
            "pfc-lambda-sweep",
            "MUFM optima against λ/λ_W from 0.1 to 4",
            "Fig. 5",
            presets.LAMBDA_SWEEP,
            run_lambda_sweep,
            SWEEP_CLAIMS,
            figures.draw_lambda_sweep,
            figures.SWEEP_CAPTIONS,
            uses_device=False,
        ),
        table_row(
            "pfc-theorems",
            "numerical checks of Theorems 1-4 (Monte-Carlo and solved instances)",
            "§III, Theorems 1-4",
            presets.THEOREMS,
            run_theorems,
            THEOREM_CLAIMS,
            figures.draw_theorems,
            figures.THEOREM_CAPTIONS,
            uses_device=False,
        ),
    ],
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
    "MufmPreset",
    "NetworkSetup",
    "SweepPreset",
    "TheoremsPreset",
    "ToyPreset",
    "TrainingPreset",
    "build_network_setup",
    "dry_run",
    "measured_layers",
    "mufm_data",
    "toy_instance",
]
