r"""``fd-operations`` and ``fd-robustness``: sweeps reporting the phase-1 length and the
M2/M3 curves (paper 000, §5 and Fig. 8, S-Fig. 24, 28-29; Appendix A.9-A.11; R21-R23).

Every arm of the :class:`~.presets.Sweep` is one measured run (:func:`~.training.measure`);
the phase-1 length of an arm is the end of its loss plateau (the first measured step with
the loss 5% below its start), censored at the budget when the loss never leaves the plateau
(then "never left phase 1", no boundary invented). The M2 peak is recorded beside it. The
arms of the groups named by ``repeat`` are also trained with further seeds, their lengths
compared as medians (:func:`~.results.phase1_lengths`; claims:
:data:`~.claims.OPERATION_CLAIMS`, :data:`~.claims.ROBUSTNESS_CLAIMS`).
"""

from __future__ import annotations

from collapselab.experiments.fd.presets import Sweep
from collapselab.experiments.fd.training import Job, run_arms
from collapselab.experiments.registry import RunContext
from collapselab.store import Run

__all__ = ["replica_arms", "run_sweep"]


def replica_arms(config: Sweep, seed: int) -> dict[str, list[str]]:
    """The arms trained with several seeds: ``{arm: [arm, "<arm>-seed<s>", ...]}`` for every
    arm of the groups named in ``config.repeat`` (n seeds in all, the run's ``seed`` and the
    next n - 1); ``{}`` without ``repeat``."""
    if config.repeat is None:
        return {}
    n = config.repeat.seeds
    arms = dict.fromkeys(arm for g in config.repeat.groups for _, arm in config.groups[g])
    return {arm: [arm] + [f"{arm}-seed{seed + i}" for i in range(1, n)] for arm in arms}


def run_sweep(run: Run, context: RunContext) -> None:
    """Run every arm of the sweep (and the further seeds of the repeated ones) and record
    its groups: the manifest holds ``groups``, ``arms`` and ``replicas`` for claims and
    figures."""
    config: Sweep = context.config
    replicas = replica_arms(config, context.seed)
    jobs = [Job.of(context, arm, config.member(arm)) for arm in config.arms]
    jobs += [
        Job.of(context, name, config.member(arm), seed_offset=i)
        for arm, names in replicas.items()
        for i, name in enumerate(names[1:], start=1)
    ]
    run_arms(
        run,
        context,
        jobs,
        groups=config.groups,
        arms={"all": list(config.arms)},
        replicas=replicas,
    )
