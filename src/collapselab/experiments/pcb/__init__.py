"""Paper 002 (PCB): the principal-components bias of deep linear networks. Importing this
package registers (``collapselab reproduce pcbias``):

==========================  ================================================  ==============
id                          what                                              figure
==========================  ================================================  ==============
``pcbias-convergence``      per-PC convergence of deep linear ensembles,      Figs. 2, 4a, 4c
                            natural and ZCA-whitened, against Eq. 10
==========================  ================================================  ==============

Presets (:mod:`~collapselab.experiments.pcb.presets`): ``quick`` (minutes on 2 cores),
``standard`` (real images, about an hour on 2 cores), ``paper`` (the paper's data and
architectures, for a GPU; dry-run tested) and ``tiny`` (the test suite's). The theory is
:mod:`collapselab.theory.pc_bias` and :mod:`~collapselab.theory.pc_bias_relu`.
"""

from collapselab.experiments.pcb import presets
from collapselab.experiments.pcb._common import PAPER
from collapselab.experiments.pcb.convergence import CONVERGENCE_CLAIMS, run_convergence
from collapselab.experiments.pcb.figures import CONVERGENCE_CAPTIONS, draw_convergence
from collapselab.experiments.registry import Experiment, register

CONVERGENCE = register(
    Experiment(
        id="pcbias-convergence",
        paper=PAPER,
        title="per-PC convergence of deep linear ensembles, natural and whitened, vs Eq. 10",
        presets=presets.CONVERGENCE,
        runtime_quick="~10 s",
        run=run_convergence,
        figures=list(CONVERGENCE_CAPTIONS),
        figure="Figs. 2 (left), 4a, 4c",
        claims=CONVERGENCE_CLAIMS,
        draw=draw_convergence,
        captions=CONVERGENCE_CAPTIONS,
        uses_device=False,
    )
)

__all__ = ["CONVERGENCE", "CONVERGENCE_CLAIMS", "run_convergence"]
