"""Paper 000, the trap of feature diversity in MLPs: its experiments.

Importing this package registers (``collapselab reproduce diversity``, or ``reproduce 000``):

====================  ========================================================  ===========
id                    what                                                      figure
====================  ========================================================  ===========
``fd-two-phase``      the two-phase baseline: loss flat then falling; M2, M3    Figs 1-2
                      and M4 rise through phase 1 and fall after
``fd-operations``     normalisation, momentum (with an equal-effective-LR       Fig. 8,
                      control), init variance γ, L2 λ; stuck vs unstuck         S-Fig. 24-29
``fd-robustness``     depth, width, learning rate, batch size, activation       App. A
``fd-directions``     common directions over the detected phase 1: s_i,         Figs 4-7,
                      S_primary vs S_k, cos(α_c ΔV, F), o^(l), Lemma 3,         Table 1
                      Theorem 2, per-class accuracy, ε spectra
====================  ========================================================  ===========

Where things are:

* :mod:`.presets`: the typed presets (a base :class:`~.presets.Member`: data, model,
  training, measurement; arms, sweep groups, repeats; the direction analysis) and each
  experiment's tiers ``tiny``, ``quick`` (Fashion-MNIST for ``fd-two-phase``, falling back
  to ``quick-bundled`` on scikit-learn's digits), ``standard`` and ``paper``;
* :mod:`.training`: one measured run (a sweep member) and its phase detection, every arm
  run through the sweep executor; :mod:`.measurement`: the per-iteration measurement (the
  Monitor's ``diversity`` family and M4 on a fixed class-stratified probe set, every 10
  iterations and every 2 in a replayed window around the detected phase boundary);
* :mod:`.two_phase`, :mod:`.operations` (``fd-operations`` and ``fd-robustness``),
  :mod:`.directions`: the run of each experiment;
* :mod:`.results`: what a run stores per arm and how it is read back;
* :mod:`.claims`: every claim of the paper; :mod:`.figures`: the figures and captions.
"""

from collapselab.experiments.fd import claims, figures, presets
from collapselab.experiments.fd.directions import run_directions
from collapselab.experiments.fd.measurement import DiversityRecorder, boundary_schedule
from collapselab.experiments.fd.operations import run_sweep
from collapselab.experiments.fd.training import (
    Job,
    dry_run,
    dry_run_directions,
    measure,
    run_member,
)
from collapselab.experiments.fd.two_phase import run_two_phase
from collapselab.experiments.registry import register_paper, table_row

TWO_PHASE, OPERATIONS, ROBUSTNESS, DIRECTIONS = register_paper(
    "000",
    [
        table_row(
            "fd-two-phase",
            "two-phase training of a deep plain MLP: loss plateau while M2, M3, M4 rise",
            "Figs 1-2",
            presets.TWO_PHASE,
            run_two_phase,
            claims.TWO_PHASE_CLAIMS,
            figures.draw_two_phase,
            figures.TWO_PHASE_CAPTIONS,
            dry_run=dry_run,
        ),
        table_row(
            "fd-operations",
            "the four operations (normalisation, momentum, init variance, L2) and stuck runs",
            "Fig. 8, S-Fig. 24, 28-29",
            presets.OPERATIONS,
            run_sweep,
            claims.OPERATION_CLAIMS,
            figures.draw_operations,
            figures.OPERATION_CAPTIONS,
            dry_run=dry_run,
        ),
        table_row(
            "fd-robustness",
            "the two phases across depth, width, learning rate, batch size and activation",
            "Appendix A.1-A.11",
            presets.ROBUSTNESS,
            run_sweep,
            claims.ROBUSTNESS_CLAIMS,
            figures.draw_robustness,
            figures.ROBUSTNESS_CAPTIONS,
            dry_run=dry_run,
        ),
        table_row(
            "fd-directions",
            "common directions over phase 1: s_i, Theorem 1's S_primary vs S_k, ΔV, o^(l)",
            "Figs 4-7, Table 1",
            presets.DIRECTIONS,
            run_directions,
            claims.DIRECTION_CLAIMS,
            figures.draw_directions,
            figures.DIRECTION_CAPTIONS,
            dry_run=dry_run_directions,
        ),
    ],
)

__all__ = [
    "DIRECTIONS",
    "OPERATIONS",
    "ROBUSTNESS",
    "TWO_PHASE",
    "DiversityRecorder",
    "Job",
    "boundary_schedule",
    "dry_run",
    "measure",
    "run_directions",
    "run_member",
    "run_sweep",
    "run_two_phase",
]
