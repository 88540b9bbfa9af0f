"""Test helper: small experiments registered for the length of a test."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from collapselab.experiments import Experiment, register, unregister


def experiment(exp_id: str, run: Any, paper: str | None = None, **fields: Any) -> Experiment:
    """An experiment with a quick preset ``{}`` and a 1 s runtime unless ``fields`` say
    otherwise; the paper defaults to the id."""
    defaults: dict[str, Any] = {"title": exp_id, "presets": {"quick": {}}, "runtime_quick": "1 s"}
    return Experiment(id=exp_id, paper=paper or exp_id, run=run, **(defaults | fields))


@contextlib.contextmanager
def registered(*experiments: Experiment) -> Iterator[None]:
    """Register ``experiments`` inside the block, unregister them after it."""
    for spec in experiments:
        register(spec)
    try:
        yield
    finally:
        for spec in experiments:
            unregister(spec.id)
