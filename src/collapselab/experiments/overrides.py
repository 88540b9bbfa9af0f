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
    config: Preset, overrides: Mapping[str, Any] | None, where: str = "preset"
) -> Preset:
    """``config`` with the values of ``overrides`` in place of its own
    (:meth:`~collapselab.experiments.Preset.replace`: an int where the preset has a float is
    taken as that float, a list as a tuple).

    Raises ``KeyError`` naming the preset's keys, ``ValueError`` naming the expected kind
    (``config key 'width' takes a int like the preset's 8, got 0.5``); both say ``where``.
    """
    changes = dict(overrides or {})
    try:
        return config.replace(**changes)
    except KeyError as error:
        raise KeyError(f"{where}: {error.args[0]}") from None
    except PresetError as error:
        raise ValueError(f"{where}: {_wrong_kind(config, changes) or error}") from None


def _wrong_kind(config: Preset, changes: Mapping[str, Any]) -> str | None:
    """The first change that the preset refuses on its own, said against the preset's value
    of that key (``None`` when no single change is refused, or the key's value is not a field
    of the preset itself)."""
    for key, value in changes.items():
        try:
            config.replace(**{key: value})
        except PresetError:
            if hasattr(config, key):
                current = getattr(config, key)
                return (
                    f"config key {key!r} takes a {type(current).__name__} like the preset's "
                    f"{current!r}, got {value!r}"
                )
            return None
    return None


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
