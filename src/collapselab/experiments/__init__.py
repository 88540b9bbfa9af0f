"""Registered, resumable experiments: presets, run functions, figures and claims.

Public API:

- :class:`Experiment`, :class:`RunContext`, :func:`register`, :func:`register_paper`,
  :func:`unregister`, :func:`get_experiment`, :func:`all_experiments`,
  :func:`experiments_for_paper`: the registry (a paper package registers its experiments
  from one table on import, a :func:`table_row` per experiment).
- :class:`Preset`, :func:`tiers`, :data:`TIERS`, :class:`PresetError`: typed presets, the
  same four tiers for every experiment.
- :func:`run_experiment`, :func:`refresh_run`, :func:`run_id_for`: run one experiment
  resumably (claims and report included); rebuild a finished run's figures, claims and
  report without training.
- :func:`reproduce`, :class:`ReproduceResult`, :func:`select_experiments`,
  :func:`estimated_seconds`: run a paper's experiments and write the index; what a
  reproduction runs and how long each experiment takes, from measurements.
- :class:`ProgressDisplay`, :class:`NoProgress`: where solvers and sweeps show progress.
- :class:`Claim`, :class:`Erratum` (marks an erratum demonstration), :class:`ClaimResult`,
  :class:`RunResults`, :class:`NotEvaluable`,
  :func:`evaluate_claim`, :func:`evaluate_claims` and the claim builders
  :func:`decreases_by`, :func:`rank_correlation`, :func:`value_below`,
  :func:`value_above`, :func:`decays_faster` with the selectors :class:`Series`,
  :class:`AcrossLayers`, :class:`Final`.
- :func:`plan_data`, :class:`DataPlan`, :class:`MissingDataError`: which preset runs on which
  data (a preset's fallback to bundled data when its files are missing), decided before a run.
- :func:`dry_run_experiment`, :class:`DryRunResult`: build a preset's data pipelines, models
  and schedules from local files without training.
- :data:`PAPERS`, :func:`find_paper`: the five papers and their names.
- :mod:`collapselab.experiments.runtimes`: the measured wall times of the built-in
  experiments (``runtimes.json``, written by ``benchmarks/record_runtimes.py``).
"""

from collapselab.experiments.claims import (
    ZERO_ERROR,
    AcrossLayers,
    Claim,
    ClaimResult,
    Erratum,
    Final,
    NotEvaluable,
    RunResults,
    Series,
    check_decrease,
    check_log_slopes,
    check_rank_correlation,
    check_value,
    decays_faster,
    decreases_by,
    evaluate_claim,
    evaluate_claims,
    rank_correlation,
    value_above,
    value_below,
)
from collapselab.experiments.data_plan import DataPlan, MissingDataError, plan_data
from collapselab.experiments.dry_run import DryRunResult, dry_run_experiment
from collapselab.experiments.papers import PAPERS, Paper, find_paper
from collapselab.experiments.preset import TIERS, Preset, PresetError, tiers
from collapselab.experiments.progress import NoProgress, ProgressDisplay
from collapselab.experiments.registry import (
    BUILTIN_PACKAGES,
    Experiment,
    RunContext,
    all_experiments,
    experiments_for_paper,
    get_experiment,
    register,
    register_paper,
    table_row,
    unregister,
)
from collapselab.experiments.reproduce import (
    ExperimentOutcome,
    ReproduceResult,
    estimated_seconds,
    reproduce,
    select_experiments,
)
from collapselab.experiments.runner import refresh_run, run_experiment, run_id_for

__all__ = [
    "BUILTIN_PACKAGES",
    "PAPERS",
    "TIERS",
    "ZERO_ERROR",
    "AcrossLayers",
    "Claim",
    "ClaimResult",
    "DataPlan",
    "DryRunResult",
    "Erratum",
    "Experiment",
    "ExperimentOutcome",
    "Final",
    "MissingDataError",
    "NoProgress",
    "NotEvaluable",
    "Paper",
    "Preset",
    "PresetError",
    "ProgressDisplay",
    "ReproduceResult",
    "RunContext",
    "RunResults",
    "Series",
    "all_experiments",
    "check_decrease",
    "check_log_slopes",
    "check_rank_correlation",
    "check_value",
    "decays_faster",
    "decreases_by",
    "dry_run_experiment",
    "estimated_seconds",
    "evaluate_claim",
    "evaluate_claims",
    "experiments_for_paper",
    "find_paper",
    "get_experiment",
    "plan_data",
    "rank_correlation",
    "refresh_run",
    "register",
    "register_paper",
    "reproduce",
    "run_experiment",
    "run_id_for",
    "select_experiments",
    "table_row",
    "tiers",
    "unregister",
    "value_above",
    "value_below",
]
