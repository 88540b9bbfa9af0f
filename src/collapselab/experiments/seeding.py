r"""A run's seed: how ``--seed S`` moves every seed of a preset (issue 35 item 7).

A run at seed ``S`` draws every random number from the **seed block** of ``S``, the
integers ``[1000 S, 1000 S + 1000)``:

* the experiment receives ``RunContext.seed = base(S) = 1000 S`` (:func:`base`), from which
  every initialisation, data draw and data order of the run is derived (the experiments add
  small offsets to it: a member's index, ``+ 1`` for a probe subset, the further seeds of a
  repeated arm);
* every seed the preset itself names (:func:`seed_fields`: an ``int`` field ``seed`` or
  ``*_seed``, a ``tuple[int, ...]`` field ``seeds``, at any depth) becomes
  ``base(S) + s`` (:func:`move_seeds`); the run's manifest records the moved preset.

At ``S = 0`` nothing moves (``base(0) = 0``): the seed-0 runs are the runs the presets
describe. Two run seeds never share a seed as long as an experiment's offsets stay below
:data:`SEED_BLOCK` (an ensemble of up to 1000 members, a sweep of up to 1000 seeds), so
``--seed 1`` is a fresh draw of every member, data order and initialisation, not the seed-0
run shifted by one member. An ``int`` field named ``seeds`` is a *count* of seeds (fd's
``Repeat.seeds``: the run's seed and the next ``seeds − 1``), not a seed: its seeds are
offsets from the base and move with it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from collapselab.checks import check_int

SEED_BLOCK = 1000
"""The width of a run seed's block of seeds."""

T = TypeVar("T")


def base(run_seed: int) -> int:
    """The first seed of ``run_seed``'s block: ``1000 · run_seed`` (0 at seed 0)."""
    return SEED_BLOCK * check_int("seed", run_seed, minimum=0)


def is_seed_field(name: str, value: Any) -> bool:
    """Whether a preset field is a seed (or a tuple of seeds) that a run seed moves: an
    ``int`` named ``seed`` or ``*_seed``, a tuple of ``int`` named ``seeds``."""
    if isinstance(value, bool):
        return False
    if name == "seed" or name.endswith("_seed"):
        return isinstance(value, int)
    if name == "seeds":
        return isinstance(value, tuple) and all(isinstance(s, int) for s in value)
    return False


def seed_fields(preset: Any, path: str = "") -> list[tuple[str, int | tuple[int, ...]]]:
    """Every seed field of ``preset`` at any depth (nested presets, tuples and mappings of
    them), as ``(dotted path, value)``."""
    found: list[tuple[str, int | tuple[int, ...]]] = []
    if dataclasses.is_dataclass(preset) and not isinstance(preset, type):
        for f in dataclasses.fields(preset):
            value = getattr(preset, f.name)
            where = f"{path}.{f.name}" if path else f.name
            if is_seed_field(f.name, value):
                found.append((where, value))
            else:
                found += seed_fields(value, where)
    elif isinstance(preset, (tuple, list)):
        for i, value in enumerate(preset):
            found += seed_fields(value, f"{path}[{i}]")
    elif isinstance(preset, dict):
        for key, value in preset.items():
            found += seed_fields(value, f"{path}[{key!r}]")
    return found


def move_seeds(preset: T, run_seed: int) -> T:
    """``preset`` with every seed field ``s`` (:func:`seed_fields`) replaced by
    ``base(run_seed) + s`` (each entry of a tuple of seeds likewise); ``preset`` itself at
    run seed 0."""
    offset = base(run_seed)
    return preset if offset == 0 else _moved(preset, offset)


def _moved(value: Any, offset: int) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if is_seed_field(f.name, item):
                moved = offset + item if isinstance(item, int) else tuple(offset + s for s in item)
            else:
                moved = _moved(item, offset)
            if moved is not item:
                changes[f.name] = moved
        return dataclasses.replace(value, **changes) if changes else value
    if isinstance(value, tuple):
        items = tuple(_moved(v, offset) for v in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, list):
        return [_moved(v, offset) for v in value]
    if isinstance(value, dict):
        return {k: _moved(v, offset) for k, v in value.items()}
    return value
