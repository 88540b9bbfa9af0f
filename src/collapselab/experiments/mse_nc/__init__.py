"""Paper 003 (MSE-NC): neural collapse under MSE loss, the central path and its dynamics.

Two experiments (``collapselab reproduce mse-nc``), registered from the table below:

``mse-nc-collapse``
    Trains every (dataset, network) combination with MSE and with cross-entropy (the same
    data, initialisation and budget), measuring the penultimate features on the paper's
    log-spaced epochs, train and test, and DeepFool robustness during the terminal phase.
    Draws Fig. 2 (the decomposition ``L = L_NC1 + L_NC2/3 + L_LS⊥``), Figs. 3-8 (equinorm,
    equiangularity, maximal equiangularity, self-duality, NC1, NCC mismatch), Fig. 9
    (robustness), Table 1 (test accuracy at the zero-error epoch and at the end),
    Fig. 10-11 (MSE versus cross-entropy: NC1, robustness) and Fig. 12 (NC1 on test data).
``mse-nc-theory``
    The renormalised-gradient simulator's ``omega_j(t)`` against the paper's closed form
    (Prop. 2) and the corrected one, the frozen singular vectors, and the
    unconstrained-features analogue of Fig. 2.

Where each thing is:

- :mod:`.presets`: the typed presets (:class:`CollapsePreset`, :class:`TheoryPreset`), their
  tiers (``tiny``, ``quick``, ``standard``, ``paper``) and the paper's protocol as data.
- :mod:`.collapse`: the run function of ``mse-nc-collapse`` (every arm, resumable, side
  by side on a process pool); :mod:`.arms`: one arm (its data, network, training and
  measurement); :mod:`.sweep`: the learning-rate sweep; :mod:`.dry_run`: the paper
  preset built from local files without training; :mod:`.results`: a run's arms read back.
- :mod:`.theory`: the run function of ``mse-nc-theory``.
- :mod:`.claims`: every claim of both; :mod:`.figures`: every figure and caption.
- :mod:`.threads`: the torch thread count both run functions set.

Public API:

- :data:`COLLAPSE`, :data:`THEORY`: the registered :class:`~collapselab.experiments.Experiment`\\ s.
- :data:`PAPER_TABLE`, :data:`PAPER_N_PER_CLASS`, :data:`PAPER_TABLE1`, :data:`PAPER_EPOCHS`,
  :func:`paper_lr_grid`, :data:`COLLAPSE_PRESETS`, :data:`THEORY_PRESETS` and the preset
  classes: the protocol as data.
- :func:`dry_run_training`: build every arm of a preset without training.
- :func:`paper_dry_run`, :class:`PaperDryRun`: build a paper-preset arm from local files
  without training (the configuration check).
- :func:`sweep_rates`, :func:`select_rate`: the learning-rate sweep.
- :class:`StoredArms`: read a training run's results arm by arm.
"""

from collapselab.experiments.mse_nc.claims import THEORY_CLAIMS, TRAINING_CLAIMS
from collapselab.experiments.mse_nc.collapse import run_collapse
from collapselab.experiments.mse_nc.dry_run import PaperDryRun, dry_run_training, paper_dry_run
from collapselab.experiments.mse_nc.figures import (
    CAPTIONS,
    FIGURES,
    THEORY_CAPTIONS,
    THEORY_FIGURES,
    draw_theory,
    draw_training,
    table1_rows,
)
from collapselab.experiments.mse_nc.presets import (
    COLLAPSE_PRESETS,
    PAPER_EPOCHS,
    PAPER_N_PER_CLASS,
    PAPER_TABLE,
    PAPER_TABLE1,
    THEORY_PRESETS,
    CollapsePreset,
    Combination,
    Net,
    RateSweep,
    Robustness,
    SNRSimulation,
    TheoryPreset,
    UFMDescent,
    paper_lr_grid,
)
from collapselab.experiments.mse_nc.results import StoredArms
from collapselab.experiments.mse_nc.sweep import select_rate, sweep_rates
from collapselab.experiments.mse_nc.theory import run_theory
from collapselab.experiments.registry import register_paper, table_row

COLLAPSE, THEORY = register_paper(
    "003",
    [
        table_row(
            "mse-nc-collapse",
            "neural collapse, the central path and robustness under MSE vs cross-entropy",
            "Figs. 2-12, Table 1",
            COLLAPSE_PRESETS,
            run_collapse,
            TRAINING_CLAIMS,
            draw_training,
            CAPTIONS,
            dry_run=dry_run_training,
        ),
        table_row(
            "mse-nc-theory",
            "SNR dynamics on the central path (published vs corrected) and the UFM Fig. 2",
            "Prop. 2, Cor. 1, Lemma 6; Fig. 2 (UFM analogue)",
            THEORY_PRESETS,
            run_theory,
            THEORY_CLAIMS,
            draw_theory,
            THEORY_CAPTIONS,
            uses_device=False,
        ),
    ],
)

__all__ = [
    "COLLAPSE",
    "COLLAPSE_PRESETS",
    "FIGURES",
    "PAPER_EPOCHS",
    "PAPER_N_PER_CLASS",
    "PAPER_TABLE",
    "PAPER_TABLE1",
    "THEORY",
    "THEORY_FIGURES",
    "THEORY_PRESETS",
    "CollapsePreset",
    "Combination",
    "Net",
    "PaperDryRun",
    "RateSweep",
    "Robustness",
    "SNRSimulation",
    "StoredArms",
    "TheoryPreset",
    "UFMDescent",
    "draw_theory",
    "draw_training",
    "dry_run_training",
    "paper_dry_run",
    "paper_lr_grid",
    "run_collapse",
    "run_theory",
    "select_rate",
    "sweep_rates",
    "table1_rows",
]
