"""Test helper: small experiments registered for the length of a test."""

from __future__ import annotations

import contextlib
import json
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


def stored_claims(run: Any) -> dict[str, dict]:
    """A run's ``claims.json`` entries by claim name."""
    document = json.loads((run.path / "claims.json").read_text())
    return {entry["name"]: entry for entry in document["claims"]}


def check_completed_run(run: Any, spec: Experiment) -> dict[str, dict]:
    """Assert that ``run`` of ``spec`` completed with every figure a PNG, one stored entry
    per claim (in order, each with its threshold and detail) and a report; return the
    entries by name."""
    assert run.status == "completed"
    for name in spec.figures:
        figure = run.path / "figures" / f"{name}.png"
        assert figure.is_file() and figure.read_bytes()[:4] == b"\x89PNG"
    claims = stored_claims(run)
    assert list(claims) == [c.name for c in spec.claims]
    for entry in claims.values():
        assert entry["threshold_text"] and entry["detail"], entry
    assert (run.path / "report.html").is_file()
    return claims
