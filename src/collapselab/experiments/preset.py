r"""Typed presets: the configuration of an experiment, one frozen dataclass per experiment.

An experiment's configuration is a subclass of :class:`Preset` whose fields are typed plain
data (numbers, strings, tuples, mappings, nested presets, :class:`~collapselab.data.DataSpec`
for the data it reads). A preset is checked field by field against its annotations when it
is made (and again when the experiment is registered), so a typo or a wrong kind fails at
once, naming the field, instead of deep inside a run:

.. code-block:: python

    @dataclass(frozen=True, kw_only=True)
    class TwoPhase(Preset):
        data: DataSpec
        depth: int = 9
        lr: float = 0.1

    PRESETS = tiers(
        tiny=TwoPhase(data=GENERATED, depth=4),
        quick=TwoPhase(data=FASHION_MNIST),
        standard=TwoPhase(data=FASHION_MNIST_WHOLE),
        paper=TwoPhase(data=CIFAR10, depth=9),
    )

Every experiment of a paper has the same four **tiers** (:data:`TIERS`): ``tiny`` (the test
suite's, seconds), ``quick`` (minutes on a laptop CPU), ``standard`` (real images, about an
hour per paper on two CPU cores) and ``paper`` (the paper's own experiment, for a GPU); one
that reproduces no paper (the demo) has the first two. Where one
tier's data is read from local files, the **bundled fallback** is derived, not written:
:meth:`Preset.bundled` replaces every file dataset by its :attr:`DataSpec.fallback`, and
the registry adds it as ``<tier>-bundled`` for the tiers meant to run anywhere
(:data:`FALLBACK_TIERS`).

Conversions while checking: an ``int`` where a ``float`` is declared becomes that float,
a ``list`` where a ``tuple`` is declared becomes a tuple. Nothing else is converted.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from collapselab.data import DataSpec
from collapselab.data.steps import Step
from collapselab.train import TrainConfig

__all__ = [
    "FALLBACK_TIERS",
    "RUNNABLE_TIERS",
    "TIERS",
    "Preset",
    "PresetError",
    "sgd_config",
    "tiers",
]

TIERS: tuple[str, ...] = ("tiny", "quick", "standard", "paper")
"""The tiers every experiment of a paper defines, in increasing size."""

RUNNABLE_TIERS: tuple[str, ...] = ("tiny", "quick")
"""The tiers every experiment defines, a paper's or not (the demo reproduces no paper)."""

FALLBACK_TIERS: tuple[str, ...] = ("tiny", "quick")
"""Tiers that fall back to bundled or generated data when their dataset files are missing
(``standard`` and ``paper`` need their data: a missing file is an error naming it)."""

P = TypeVar("P", bound="Preset")


class PresetError(ValueError):
    """A preset field of the wrong kind, or an unknown field."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Preset:
    """Base class of every experiment's configuration (see the module docstring).

    Subclasses are ``@dataclass(frozen=True, kw_only=True)`` with typed fields.
    """

    def __post_init__(self) -> None:
        hints = _hints(type(self))
        for f in dataclasses.fields(self):
            where = f"{type(self).__name__}.{f.name}"
            object.__setattr__(self, f.name, _checked(getattr(self, f.name), hints[f.name], where))

    def replace(self: P, **changes: Any) -> P:
        """A copy with ``changes`` (checked like the preset itself).

        Raises:
            KeyError: a field (config key) the preset does not have (the message lists its
                keys, sorted).
            PresetError: a value of the wrong kind.
        """
        names = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise KeyError(
                f"{type(self).__name__} has no config key {', '.join(map(repr, unknown))}; "
                f"its keys: {', '.join(sorted(names))}"
            )
        return dataclasses.replace(self, **changes)

    def data_specs(self) -> list[DataSpec]:
        """Every dataset the preset reads, in field order, without repeats."""
        found: list[DataSpec] = []
        _walk(self, lambda spec: found.append(spec) if spec not in found else None)
        return found

    def reads_files(self) -> bool:
        """Whether any of its datasets is read from local files."""
        return any(spec.reads_files for spec in self.data_specs())

    def bundled(self: P) -> P | None:
        """The same preset on bundled or generated data: every dataset read from files
        replaced by its :attr:`~collapselab.data.DataSpec.fallback`.

        ``None`` when the preset reads no files, or when a file dataset has no fallback.
        An experiment whose fallback needs more than other data (paper 000's digits run
        another init scale, say) overrides this method and says why.
        """
        if not self.reads_files() or any(
            spec.reads_files and spec.fallback is None for spec in self.data_specs()
        ):
            return None
        return _map_specs(self, lambda spec: spec.fallback if spec.reads_files else spec)

    def to_dict(self) -> dict[str, Any]:
        """The preset as plain JSON-able data (a run's manifest records it)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def tiers(
    *,
    tiny: Preset,
    quick: Preset,
    standard: Preset | None = None,
    paper: Preset | None = None,
    **more: Preset,
) -> dict[str, Preset]:
    """The preset table of an experiment: its :data:`TIERS` (the same object may serve two
    tiers: ``standard=PAPER`` where the paper's experiment fits two CPU cores; an
    experiment that reproduces no paper, the demo, may stop at ``quick``) and any further
    named variants (``paper-cifar10``); every entry of one :class:`Preset` class."""
    table = {"tiny": tiny, "quick": quick, "standard": standard, "paper": paper, **more}
    table = {name: preset for name, preset in table.items() if preset is not None}
    kinds = {type(p) for p in table.values()}
    if len(kinds) != 1 or not issubclass(next(iter(kinds)), Preset):
        names = ", ".join(sorted(k.__name__ for k in kinds))
        raise PresetError(f"every tier must be an instance of one Preset class, got {names}")
    return table


def sgd_config(preset: Any, **settings: Any) -> TrainConfig:
    """The :class:`~collapselab.train.TrainConfig` of a preset that trains by SGD: its
    ``epochs``, ``lr``, ``batch_size``, ``momentum`` and ``weight_decay``; ``settings`` are
    the rest (schedule, loss, seed, device...)."""
    return TrainConfig(
        epochs=preset.epochs,
        lr=preset.lr,
        batch_size=preset.batch_size,
        momentum=preset.momentum,
        weight_decay=preset.weight_decay,
        **settings,
    )


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _kind(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is None:
        return getattr(annotation, "__name__", repr(annotation))
    args = ", ".join(_kind(a) for a in typing.get_args(annotation))
    name = "or" if origin in (typing.Union, types.UnionType) else getattr(origin, "__name__", "")
    return f"one of {args}" if name == "or" else f"{name}[{args}]"


def _checked(value: Any, annotation: Any, where: str) -> Any:
    """``value`` checked against ``annotation`` (converted where the module docstring says)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for option in args:
            try:
                return _checked(value, option, where)
            except PresetError:
                continue
        raise _wrong(value, annotation, where)
    if origin is typing.Literal:
        if value in args:
            return value
        raise PresetError(f"{where} must be one of {list(args)}, got {value!r}")
    if annotation is type(None):
        if value is None:
            return None
        raise _wrong(value, annotation, where)
    if origin is tuple:
        return _checked_tuple(value, args, annotation, where)
    if origin in (dict, Mapping, typing.Mapping) or annotation in (dict, Mapping):
        return _checked_mapping(value, args, annotation, where)
    return _checked_scalar(value, annotation, where)


def _checked_scalar(value: Any, annotation: Any, where: str) -> Any:
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation in (int, float) and isinstance(value, bool):
        raise _wrong(value, annotation, where)
    if isinstance(annotation, type) and isinstance(value, annotation):
        return value
    raise _wrong(value, annotation, where)


def _checked_tuple(value: Any, args: tuple, annotation: Any, where: str) -> tuple:
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple):
        raise _wrong(value, annotation, where)
    if not args:
        return value
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_checked(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
    if len(args) != len(value):
        raise PresetError(f"{where} must have {len(args)} entries ({_kind(annotation)}), "
                          f"got {value!r}")  # fmt: skip
    pairs = enumerate(zip(args, value, strict=True))
    return tuple(_checked(v, a, f"{where}[{i}]") for i, (a, v) in pairs)


def _checked_mapping(value: Any, args: tuple, annotation: Any, where: str) -> dict:
    if not isinstance(value, Mapping):
        raise _wrong(value, annotation, where)
    key_type, value_type = args if args else (Any, Any)
    return {
        _checked(k, key_type, f"{where} key"): _checked(v, value_type, f"{where}[{k!r}]")
        for k, v in value.items()
    }


def _wrong(value: Any, annotation: Any, where: str) -> PresetError:
    return PresetError(f"{where} takes {_kind(annotation)}, got {value!r}")


def _plain(value: Any) -> Any:
    if isinstance(value, (Preset, DataSpec, Step)):
        return value.to_dict()
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _walk(value: Any, visit: Any) -> None:
    """Call ``visit`` on every :class:`DataSpec` inside ``value`` (presets, tuples, mappings)."""
    if isinstance(value, DataSpec):
        visit(value)
    elif isinstance(value, Preset):
        for f in dataclasses.fields(value):
            _walk(getattr(value, f.name), visit)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _walk(v, visit)
    elif isinstance(value, Mapping):
        for v in value.values():
            _walk(v, visit)


def _map_specs(value: Any, fn: Any) -> Any:
    """``value`` with every :class:`DataSpec` inside it replaced by ``fn(spec)``."""
    if isinstance(value, DataSpec):
        return fn(value)
    if isinstance(value, Preset):
        fields = dataclasses.fields(value)
        return dataclasses.replace(value, **{f.name: _map_specs(getattr(value, f.name), fn)
                                             for f in fields})  # fmt: skip
    if isinstance(value, tuple):
        return tuple(_map_specs(v, fn) for v in value)
    if isinstance(value, Mapping):
        return {k: _map_specs(v, fn) for k, v in value.items()}
    return value
