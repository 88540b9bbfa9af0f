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
from collapselab.experiments.registry import Experiment, register_paper

TWO_PHASE, OPERATIONS, ROBUSTNESS, DIRECTIONS = register_paper(
    "000",
    [
        Experiment(
            id="fd-two-phase",
            title="two-phase training of a deep plain MLP: loss plateau while M2, M3, M4 rise",
            presets=presets.TWO_PHASE,
            run=run_two_phase,
            dry_run=dry_run,
            figure="Figs 1-2",
            claims=claims.TWO_PHASE_CLAIMS,
            draw=figures.draw_two_phase,
            captions=figures.TWO_PHASE_CAPTIONS,
        ),
        Experiment(
            id="fd-operations",
            title="the four operations (normalisation, momentum, init variance, L2) and stuck runs",
            presets=presets.OPERATIONS,
            run=run_sweep,
            dry_run=dry_run,
            figure="Fig. 8, S-Fig. 24, 28-29",
            claims=claims.OPERATION_CLAIMS,
            draw=figures.draw_operations,
            captions=figures.OPERATION_CAPTIONS,
        ),
        Experiment(
            id="fd-robustness",
            title="the two phases across depth, width, learning rate, batch size and activation",
            presets=presets.ROBUSTNESS,
            run=run_sweep,
            dry_run=dry_run,
            figure="Appendix A.1-A.11",
            claims=claims.ROBUSTNESS_CLAIMS,
            draw=figures.draw_robustness,
            captions=figures.ROBUSTNESS_CAPTIONS,
        ),
        Experiment(
            id="fd-directions",
            title="common directions over phase 1: s_i, Theorem 1's S_primary vs S_k, ΔV, o^(l)",
            presets=presets.DIRECTIONS,
            run=run_directions,
            dry_run=dry_run_directions,
            figure="Figs 4-7, Table 1",
            claims=claims.DIRECTION_CLAIMS,
            draw=figures.draw_directions,
            captions=figures.DIRECTION_CAPTIONS,
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
