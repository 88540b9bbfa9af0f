"""Addressing layers of a model: by name, by module type, or by pattern.

A *layer* is a submodule of the model, named as in ``model.named_modules()`` (``"blocks.3"``,
``"layers.0.act"``). :func:`resolve_layers` turns a user's selection into the ordered list of
names that probes hook.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from torch import nn

LayerSpec = str | type | re.Pattern | Sequence["str | type | re.Pattern"]
"""What :func:`resolve_layers` accepts (see there)."""

_GLOB_CHARS = frozenset("*?[")


def _is_module_type(spec: object) -> bool:
    return isinstance(spec, type) and issubclass(spec, nn.Module)


def _match_one(spec: object, names: list[str], modules: dict[str, nn.Module]) -> list[str]:
    """Names selected by one item of a layer specification, in ``named_modules`` order."""
    candidates = [n for n in names if n != ""]  # the root is never a layer by pattern/type
    if isinstance(spec, str):
        if spec in modules:
            return [spec]
        if _GLOB_CHARS & set(spec):
            return [n for n in candidates if fnmatch.fnmatchcase(n, spec)]
        return []
    if isinstance(spec, re.Pattern):
        return [n for n in candidates if spec.fullmatch(n)]
    if _is_module_type(spec):
        return [n for n in candidates if isinstance(modules[n], spec)]
    raise TypeError(
        "a layer must be given as a module name (str), a glob pattern (str with * ? [), "
        f"a compiled regular expression (re.Pattern) or an nn.Module subclass; got {spec!r}"
    )


def resolve_layers(model: nn.Module, layers: LayerSpec) -> list[str]:
    """Names of the submodules of ``model`` selected by ``layers``.

    Each item of ``layers`` (a single item or a list/tuple of them) is one of

    * an exact name from ``model.named_modules()`` (``"blocks.2"``; ``""`` is the model);
    * a glob pattern over those names, if the string contains ``*``, ``?`` or ``[``
      (``"blocks.*"``, matched with :func:`fnmatch.fnmatchcase`, so ``*`` also crosses dots:
      ``"blocks.*"`` matches ``"blocks.0.act1"`` too; use a regex to stay at one level);
    * a compiled regular expression, matched against the whole name
      (``re.compile(r"blocks\\.\\d+")``);
    * an ``nn.Module`` subclass: every submodule of that type (``nn.ReLU``).

    Names from one item come in ``named_modules()`` order (execution order for the models
    of :mod:`collapselab.models`); items keep the order given. A name selected twice is kept
    once, at its first position.

    Raises:
        TypeError: ``model`` is not a module, or an item has an unsupported type.
        ValueError: an item selects nothing (the message lists some available names).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    single = isinstance(layers, str | re.Pattern) or _is_module_type(layers)
    if single:
        items: list[object] = [layers]
    elif isinstance(layers, Sequence):
        items = list(layers)
    else:
        raise TypeError(
            "layers must be a name, pattern, module type or a list of them, "
            f"got {type(layers).__name__}"
        )
    if not items:
        raise ValueError("layers is empty; select at least one layer")
    modules = dict(model.named_modules())
    names = list(modules)
    out: list[str] = []
    for item in items:
        found = _match_one(item, names, modules)
        if not found:
            shown = ", ".join(repr(n) for n in names[1:13])
            more = " ..." if len(names) > 13 else ""
            raise ValueError(
                f"layers item {item!r} matches no submodule of {type(model).__name__}; "
                f"available names include {shown}{more}"
            )
        out.extend(n for n in found if n not in out)
    return out
