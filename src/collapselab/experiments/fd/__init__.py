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

Every run is measured per iteration (:mod:`~collapselab.experiments.fd.measurement`): the
Monitor's ``diversity`` family and M4 on a fixed class-stratified probe set, every 10
iterations and every 2 in a replayed window around the detected phase boundary.

Presets (:mod:`~collapselab.experiments.fd.presets`): ``quick`` (minutes on a 2-core CPU;
Fashion-MNIST, falling back to ``quick-bundled`` on scikit-learn's digits), ``standard``,
``paper`` (the paper's scale, for a GPU) and ``tiny`` (the test suite's).
"""

from collapselab.experiments.fd import presets
from collapselab.experiments.fd._common import PAPER
from collapselab.experiments.fd.directions import DIRECTION_CLAIMS, run_directions
from collapselab.experiments.fd.figures import (
    DIRECTION_CAPTIONS,
    OPERATION_CAPTIONS,
    ROBUSTNESS_CAPTIONS,
    TWO_PHASE_CAPTIONS,
    draw_directions,
    draw_operations,
    draw_robustness,
    draw_two_phase,
)
from collapselab.experiments.fd.measurement import DiversityRecorder, boundary_schedule
from collapselab.experiments.fd.operations import (
    OPERATION_CLAIMS,
    ROBUSTNESS_CLAIMS,
    run_operations,
    run_robustness,
)
from collapselab.experiments.fd.training import dry_run, dry_run_directions, run_member
from collapselab.experiments.fd.two_phase import TWO_PHASE_CLAIMS, run_two_phase
from collapselab.experiments.registry import Experiment, register
from collapselab.experiments.runtimes import stated_runtimes

TWO_PHASE = register(
    Experiment(
        id="fd-two-phase",
        paper=PAPER,
        title="two-phase training of a deep plain MLP: loss plateau while M2, M3, M4 rise",
        presets=presets.TWO_PHASE,
        **stated_runtimes("fd-two-phase"),
        run=run_two_phase,
        dry_run=dry_run,
        figures=list(TWO_PHASE_CAPTIONS),
        figure="Figs 1-2",
        claims=TWO_PHASE_CLAIMS,
        draw=draw_two_phase,
        captions=TWO_PHASE_CAPTIONS,
        fallbacks={"quick": "quick-bundled"},
    )
)

OPERATIONS = register(
    Experiment(
        id="fd-operations",
        paper=PAPER,
        title="the four operations (normalisation, momentum, init variance, L2) and stuck runs",
        presets=presets.OPERATIONS,
        **stated_runtimes("fd-operations"),
        run=run_operations,
        dry_run=dry_run,
        figures=list(OPERATION_CAPTIONS),
        figure="Fig. 8, S-Fig. 24, 28-29",
        claims=OPERATION_CLAIMS,
        draw=draw_operations,
        captions=OPERATION_CAPTIONS,
    )
)

ROBUSTNESS = register(
    Experiment(
        id="fd-robustness",
        paper=PAPER,
        title="the two phases across depth, width, learning rate, batch size and activation",
        presets=presets.ROBUSTNESS,
        **stated_runtimes("fd-robustness"),
        run=run_robustness,
        dry_run=dry_run,
        figures=list(ROBUSTNESS_CAPTIONS),
        figure="Appendix A.1-A.11",
        claims=ROBUSTNESS_CLAIMS,
        draw=draw_robustness,
        captions=ROBUSTNESS_CAPTIONS,
    )
)

DIRECTIONS = register(
    Experiment(
        id="fd-directions",
        paper=PAPER,
        title="common directions over phase 1: s_i, Theorem 1's S_primary vs S_k, ΔV, o^(l)",
        presets=presets.DIRECTIONS,
        **stated_runtimes("fd-directions"),
        run=run_directions,
        dry_run=dry_run_directions,
        figures=list(DIRECTION_CAPTIONS),
        figure="Figs 4-7, Table 1",
        claims=DIRECTION_CLAIMS,
        draw=draw_directions,
        captions=DIRECTION_CAPTIONS,
    )
)

__all__ = [
    "DIRECTIONS",
    "DIRECTION_CLAIMS",
    "OPERATIONS",
    "OPERATION_CLAIMS",
    "ROBUSTNESS",
    "ROBUSTNESS_CLAIMS",
    "TWO_PHASE",
    "TWO_PHASE_CLAIMS",
    "DiversityRecorder",
    "boundary_schedule",
    "dry_run",
    "run_member",
    "run_operations",
    "run_robustness",
    "run_two_phase",
]
