"""Registered, resumable experiments: presets, run functions and (later) claims."""

from collapselab.experiments.registry import (
    Experiment,
    RunContext,
    all_experiments,
    get_experiment,
    register,
)
from collapselab.experiments.runner import run_experiment

__all__ = [
    "Experiment",
    "RunContext",
    "all_experiments",
    "get_experiment",
    "register",
    "run_experiment",
]
