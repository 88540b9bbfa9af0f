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

    Raises ``KeyError`` naming the preset's fields, ``ValueError`` naming the expected kind;
    both say ``where``.
    """
    try:
        return config.replace(**dict(overrides or {}))
    except KeyError as error:
        raise KeyError(f"{where}: {error.args[0]}") from None
    except PresetError as error:
        raise ValueError(f"{where}: {error}") from None


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
