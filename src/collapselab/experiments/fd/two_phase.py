r"""``fd-two-phase``: the two-phase baseline (paper 000, Fig. 1-2, S-Fig. 1-11, R20).

A deep plain bias-free ReLU MLP trained with SGD (η = 0.1, batch 100) on an image dataset
(Fashion-MNIST; digits at ``quick-bundled``) and on generated clustered data, measured on
the schedule of :mod:`.measurement`: the training loss stays flat, then falls; the
cross-class feature cosine M2, the within-class gradient cosine M3 and the pseudo-neuron
weight-change cosine M4 rise through phase 1 and fall after it (claims:
:data:`~.claims.TWO_PHASE_CLAIMS`).

Stored per dataset (``arm``): ``arrays/traj_<arm>.npz`` and metric rows of split ``arm``
(:func:`~.results.store_member`).
"""

from __future__ import annotations

from collapselab.experiments.fd.presets import TwoPhase
from collapselab.experiments.fd.training import Job, run_arms
from collapselab.experiments.registry import RunContext
from collapselab.store import Run

__all__ = ["run_two_phase"]


def run_two_phase(run: Run, context: RunContext) -> None:
    """Train and measure the baseline on every configured dataset."""
    config: TwoPhase = context.config
    jobs = [Job.of(context, arm, config.member(arm)) for arm in config.arms]
    run_arms(run, context, jobs, arms={"two_phase": list(config.arms)})
