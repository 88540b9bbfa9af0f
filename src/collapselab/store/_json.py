"""Conversion of configs and results to plain JSON values."""

from __future__ import annotations

import dataclasses
import enum
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np


def to_jsonable(obj: Any, _where: str = "value") -> Any:
    """Recursively convert ``obj`` to JSON-compatible Python values.

    Dataclasses become dicts, tuples and sets become lists, NumPy and 0-d torch scalars
    become Python numbers, paths become strings, enums their value. Small arrays and
    tensors become nested lists. Anything else raises ``TypeError`` naming where it sits.
    """
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value, _where)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: to_jsonable(getattr(obj, f.name), f"{_where}.{f.name}")
            for f in dataclasses.fields(obj)
        }
    if isinstance(obj, Mapping):
        out = {}
        for key, value in obj.items():
            if not isinstance(key, (str, int, float, bool)):
                raise TypeError(f"{_where} has a non-string key {key!r}; JSON keys must be str")
            out[str(key)] = to_jsonable(value, f"{_where}[{key!r}]")
        return out
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, f"{_where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, (set, frozenset)):
        return [to_jsonable(v, _where) for v in sorted(obj, key=repr)]
    # torch is imported lazily: the store must stay usable without touching it.
    tolist = getattr(obj, "tolist", None)
    if callable(tolist) and type(obj).__module__.startswith("torch"):
        return tolist()
    raise TypeError(
        f"{_where} of type {type(obj).__name__} cannot be stored as JSON; "
        "expected dict, list, str, number, bool, None, dataclass, Path or NumPy value"
    )


def json_equal(a: Any, b: Any) -> bool:
    """Equality of two JSON values, treating NaN as equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b
