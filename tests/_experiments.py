"""Test helper: small experiments registered for the length of a test."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

from collapselab.experiments import TIERS, Experiment, Preset, find_paper, register, unregister


def typed(presets: dict[str, dict[str, Any]], paper: str | None = None) -> dict[str, Preset]:
    """A test's presets, written as field values per tier (or already typed), as typed presets: one
    :class:`Preset` class whose fields are the names the tiers use (typed by their values,
    ``None`` where a tier leaves one out). A tier the experiment must have and the test does
    not give (``tiny``; ``standard`` and ``paper`` for one of the papers) is ``quick``."""
    if all(isinstance(p, Preset) for p in presets.values()):
        return _with_tiers(dict(presets), paper)
    kinds: dict[str, Any] = {}
    for values in presets.values():
        for name, value in values.items():
            kinds.setdefault(name, type(value))
    fields = [(name, kind | None, dataclasses.field(default=None)) for name, kind in kinds.items()]
    cls = dataclasses.make_dataclass(
        "TestPreset", fields, bases=(Preset,), frozen=True, kw_only=True
    )
    return _with_tiers({name: cls(**values) for name, values in presets.items()}, paper)


def _with_tiers(table: dict[str, Preset], paper: str | None) -> dict[str, Preset]:
    """``table`` with every tier the experiment must have (the missing ones ``quick``)."""
    needed = TIERS if paper is not None and find_paper(paper) is not None else TIERS[:2]
    for tier in needed:
        table.setdefault(tier, table["quick"])
    return table


def experiment(exp_id: str, run: Any, paper: str | None = None, **fields: Any) -> Experiment:
    """An experiment with an empty quick preset and a 1 s runtime unless ``fields`` say
    otherwise (``presets`` as field values per tier, :func:`typed`); the paper defaults to
    the id."""
    paper = paper or exp_id
    presets = typed(fields.pop("presets", {"quick": {}}), paper)
    defaults: dict[str, Any] = {"title": exp_id, "runtime_quick": "1 s"}
    return Experiment(id=exp_id, paper=paper, run=run, presets=presets, **(defaults | fields))


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
