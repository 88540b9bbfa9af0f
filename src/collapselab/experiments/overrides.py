"""Changing a preset's config for one run (``collapselab sweep --set key=value``).

A run with overrides is its own run in the store: its id is the usual
``<experiment>-<preset>-seed<N>`` followed by :func:`overrides_tag` (``-lr0.1-width64``),
so a sweep's members never share a directory and rerunning the sweep resumes each one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from collapselab.experiments.preset import Preset, PresetError

_UNSAFE = re.compile(r"[^A-Za-z0-9._]+")
MAX_TAG = 60
"""Longest readable tag; longer (or not name-safe) overrides are tagged by their hash."""


def apply_overrides(
    config: Preset | Mapping[str, Any], overrides: Mapping[str, Any] | None, where: str = "preset"
) -> Preset | dict[str, Any]:
    """``config`` with the values of ``overrides`` in place of its own.

    Every key must be a field of ``config``, and every value of the field's kind (an int
    where the preset has a float is taken as that float). Raises ``KeyError`` naming the
    known fields, ``ValueError`` naming the expected kind.
    """
    if isinstance(config, Preset):
        try:
            return config.replace(**dict(overrides or {}))
        except KeyError as error:
            raise KeyError(f"{where}: {error.args[0]}") from None
        except PresetError as error:
            raise ValueError(f"{where}: {error}") from None
    result = dict(config)
    for key, value in (overrides or {}).items():
        if key not in config:
            known = ", ".join(sorted(config)) or "none"
            raise KeyError(f"{where} has no config key {key!r}; its keys: {known}")
        result[key] = _like(config[key], value, key)
    return result


def _like(current: Any, value: Any, key: str) -> Any:
    """``value`` as the kind of ``current``: ints widen to floats; other kinds must match."""
    if isinstance(current, bool) or isinstance(value, bool):
        if isinstance(current, bool) and isinstance(value, bool):
            return value
    elif isinstance(current, float) and isinstance(value, (int, float)):
        return float(value)
    elif current is None or type(value) is type(current):
        return value
    elif isinstance(current, (list, tuple)) and isinstance(value, (list, tuple)):
        return list(value)
    raise ValueError(
        f"config key {key!r} takes a {type(current).__name__} like the preset's {current!r}, "
        f"got {value!r}"
    )


def overrides_tag(overrides: Mapping[str, Any] | None) -> str:
    """``-key1value1-key2value2`` (keys sorted) for run ids; ``""`` without overrides.

    Characters outside letters, digits, ``.`` and ``_`` are dropped, so the tag is
    hashed instead (``-set<8 hex>``) when that would make two configs look alike or the tag
    is longer than :data:`MAX_TAG`.
    """
    if not overrides:
        return ""
    parts = []
    for key in sorted(overrides):
        text = json.dumps(overrides[key], sort_keys=True)
        parts.append(f"{key}{text.strip(chr(34))}")
    tag = "-" + "-".join(parts)
    if len(tag) <= MAX_TAG and all(not _UNSAFE.search(p) for p in parts):
        return tag
    digest = hashlib.sha256(json.dumps(dict(overrides), sort_keys=True).encode()).hexdigest()
    return f"-set{digest[:8]}"
