"""Paper 000, the trap of feature diversity in MLPs: its experiments.

Importing this package registers (``collapselab reproduce diversity``, or ``reproduce 000``):

====================  ========================================================  ===========
id                    what                                                      figure
====================  ========================================================  ===========
``fd-two-phase``      the two-phase baseline: loss flat then falling; M2, M3    Figs 1-2
                      and M4 rise through phase 1 and fall after
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
from collapselab.experiments.fd.figures import TWO_PHASE_CAPTIONS, draw_two_phase
from collapselab.experiments.fd.measurement import BoundarySchedule, DiversityRecorder
from collapselab.experiments.fd.training import run_member
from collapselab.experiments.fd.two_phase import TWO_PHASE_CLAIMS, run_two_phase
from collapselab.experiments.registry import Experiment, register

TWO_PHASE = register(
    Experiment(
        id="fd-two-phase",
        paper=PAPER,
        title="two-phase training of a deep plain MLP: loss plateau while M2, M3, M4 rise",
        presets=presets.TWO_PHASE,
        runtime_quick="~40 s",
        run=run_two_phase,
        figures=list(TWO_PHASE_CAPTIONS),
        figure="Figs 1-2",
        claims=TWO_PHASE_CLAIMS,
        draw=draw_two_phase,
        captions=TWO_PHASE_CAPTIONS,
        fallbacks={"quick": "quick-bundled"},
    )
)

__all__ = [
    "TWO_PHASE",
    "TWO_PHASE_CLAIMS",
    "BoundarySchedule",
    "DiversityRecorder",
    "run_member",
    "run_two_phase",
]
