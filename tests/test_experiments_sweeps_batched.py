"""sweeps.batched: members of one batch key trained in chunks, stored member by member as
run_members stores them; members without a key or failed in their chunk trained alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.experiments.sweeps.batched import chunks, run_batched_members
from collapselab.store import Run

CALLS: list[tuple[str, list[int]]] = []


def alone(config: dict[str, Any]) -> dict[str, Any]:
    CALLS.append(("alone", [config["x"]]))
    return {"y": config["x"] * 10}


def together(configs: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    CALLS.append(("batch", [c["x"] for c in configs]))
    return [None if c["x"] == 3 else {"y": c["x"] * 10} for c in configs]


def _key(config: dict[str, Any]) -> str | None:
    return None if config["x"] == 0 else config["kind"]


def test_chunks_group_by_key_one_chunk_per_worker():
    keys = ["a", "a", "b", None, "a", "b"]
    assert chunks(keys, range(6), workers=2) == [[0, 1, 4], [2, 5]]
    assert chunks(keys, range(6), workers=4) == [[0, 1], [4], [2], [5]]
    assert chunks(keys, [1, 4, 5], workers=1) == [[1, 4], [5]]


def test_batched_members_are_stored_as_run_members_stores_them(tmp_path: Path):
    configs = [{"x": x, "kind": "even" if x % 2 == 0 else "odd"} for x in range(6)]
    context = RunContext("tiny", {}, executor="serial", workers=1)
    CALLS.clear()
    runs = [Run.create(tmp_path, name, config={}) for name in ("b", "p")]
    batched = run_batched_members(alone, together, configs, runs[0], context, batch_key=_key,
                                  label="s")  # fmt: skip
    assert batched == [{"y": 10 * x} for x in range(6)]
    # x = 0 has no key and x = 3 failed in its chunk: both trained alone, after the chunks
    assert CALLS == [("batch", [1, 3, 5]), ("batch", [2, 4]), ("alone", [0]), ("alone", [3])]
    plain = run_members(alone, configs, runs[1], context, label="s")
    assert plain == batched
    names = [sorted(p.name for p in (r.path / "members" / "s").glob("member-*.json"))
             for r in runs]  # fmt: skip
    assert names[0] == names[1] and len(names[0]) == 6
    # a rerun loads every member: nothing is trained again
    CALLS.clear()
    again = run_batched_members(alone, together, configs, runs[0], context, batch_key=_key,
                                label="s")  # fmt: skip
    assert again == batched and CALLS == []
