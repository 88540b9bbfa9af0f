"""The metric catalogue: the registry of families, and which family computes which key.

Every key belongs to exactly one family (its owner). :func:`plan` turns a request (family
objects or names, and/or keys) into the family objects to run and the keys each computes;
:func:`collapselab.measure` and :class:`collapselab.track.Monitor` both go through it.
A family defined outside the package is added with :func:`register_family`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

from collapselab.checks import ArgumentTypeError
from collapselab.families.builtin import BUILTIN
from collapselab.families.family import Family, Key
from collapselab.families.processes import DISTRIBUTED_MODES

_FAMILIES: dict[str, type[Family]] = {}
_OWNERS: dict[str, str] = {}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

FamilySpec = Family | str


def register_family(cls: type[Family]) -> type[Family]:
    """Add a family class to the catalogue; returns it (so it can decorate the class).

    The family's ``name`` and every one of its keys must be snake_case and new to the
    catalogue (re-registering the same class is a no-op); its ``distributed`` mode, if
    declared, one of :data:`~collapselab.families.processes.DISTRIBUTED_MODES`. Its keys
    become available to :func:`collapselab.measure` (``keys=``) and to the Monitor
    (``families=[...]``).
    """
    if not (isinstance(cls, type) and issubclass(cls, Family)):
        raise ArgumentTypeError(f"register_family needs a Family subclass, got {cls!r}")
    name = cls.name
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"{cls.__name__}.name must be a snake_case string, got {name!r}")
    if cls.distributed is not None and cls.distributed not in DISTRIBUTED_MODES:
        raise ValueError(
            f"{cls.__name__}.distributed must be None or one of {DISTRIBUTED_MODES}, "
            f"got {cls.distributed!r}"
        )
    if _FAMILIES.get(name) is cls:
        return cls
    if name in _FAMILIES:
        raise ValueError(f"a family named {name!r} is already registered ({_FAMILIES[name]})")
    if not cls.keys:
        raise ValueError(f"{cls.__name__}.keys is empty; a family defines at least one key")
    seen: set[str] = set()
    for key in cls.keys:
        if not isinstance(key, Key) or not _NAME.match(key.name):
            raise ValueError(f"{cls.__name__}.keys must be Key objects with snake_case names")
        if key.name in _OWNERS or key.name in seen:
            owner = _OWNERS.get(key.name, name)
            raise ValueError(f"key {key.name!r} of {name!r} is already defined by {owner!r}")
        seen.add(key.name)
    _FAMILIES[name] = cls
    _OWNERS.update(dict.fromkeys(seen, name))
    return cls


def unregister_family(name: str) -> None:
    """Remove a family and its keys from the catalogue (built-in families included)."""
    cls = _FAMILIES.pop(family_class(name).name)
    for key in cls.keys:
        _OWNERS.pop(key.name, None)


def family_names() -> tuple[str, ...]:
    """The registered families, in registration order."""
    return tuple(_FAMILIES)


def family_class(name: str) -> type[Family]:
    """The registered family called ``name``."""
    if name not in _FAMILIES:
        raise ValueError(f"unknown metric family {name!r}; registered: {family_names()}")
    return _FAMILIES[name]


def catalogue() -> list[tuple[str, Key]]:
    """Every key of every registered family, as ``(family name, Key)`` pairs."""
    return [(name, key) for name, cls in _FAMILIES.items() for key in cls.keys]


def owner(key: str) -> str:
    """The name of the family that defines ``key``."""
    if key not in _OWNERS:
        close = difflib.get_close_matches(key, list(_OWNERS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown metric key {key!r}{hint} (collapselab.families.catalogue())")
    return _OWNERS[key]


def plan(
    families: Iterable[FamilySpec] | FamilySpec | None = None, keys: Sequence[str] | None = None
) -> dict[Family, frozenset[str]]:
    """The family objects to run and the keys (their own) each computes.

    Args:
        families: family objects (with their options) or registered names (built with
            default options). Their requested keys are computed; a requested key owned by
            another family (PFC asks for the NC family's PFC1-3) is computed by that
            family's object in ``families`` or, if absent, by a default one.
        keys: further keys, computed by their owners likewise.

    Raises:
        ValueError: an unknown family or key, the same family twice, or a default object
            that cannot be built (the MSE family needs ``lam``).
    """
    objects: dict[str, Family] = {}
    for fam in family_objects(families):
        if fam.name in objects:
            raise ValueError(f"the {fam.name!r} family is given twice")
        family_class(fam.name)  # registered
        objects[fam.name] = fam
    wanted = [k for fam in objects.values() for k in fam.requested] + list(keys or ())
    out: dict[str, set[str]] = {}
    for key in wanted:
        name = owner(key)
        if name not in objects:
            objects[name] = family_class(name)()
        out.setdefault(name, set()).add(key)
    return {objects[name]: frozenset(ks) for name, ks in out.items()}


def family_objects(families: Iterable[FamilySpec] | FamilySpec | None) -> list[Family]:
    """The family objects of a request, in order: objects as given, registered names built
    with their default options."""
    out = []
    for spec in _as_list(families):
        fam = family_class(spec)() if isinstance(spec, str) else spec
        if not isinstance(fam, Family):
            raise ArgumentTypeError(
                f"families must hold Family objects or family names, got {type(spec).__name__}"
            )
        out.append(fam)
    return out


def _as_list(families: Iterable[FamilySpec] | FamilySpec | None) -> list[FamilySpec]:
    if families is None:
        return []
    if isinstance(families, str | Family):
        return [families]
    return list(families)


for _cls in BUILTIN:
    register_family(_cls)
