r"""The data an experiment reads: described once (:class:`DataSpec`), read by one loader.

A :class:`DataSpec` names a dataset of the registry (:func:`~collapselab.data.load_dataset`:
generated, bundled with a package, or read from local files), the options of its loader, and
the preprocessing **steps** applied to it, in order. :func:`load_data` is the one place that turns
a spec into tensors, so every experiment reads its data the same way and a run records
exactly what it read (:meth:`DataSpec.to_dict`).

.. code-block:: python

    spec = DataSpec(
        "fashion_mnist",
        {"n_train_per_class": 500, "n_test_per_class": 100},
        steps=(steps.Flatten(), steps.StandardizeScalar(), steps.Cast("float32")),
        fallback=DataSpec("digits", {"n_per_class": 170}),
    )
    data = load_data(spec, data_dir=None, seed=0)

The steps are in :mod:`collapselab.data.steps`.

``fallback``: the spec a preset reads instead when this one's files are not found (the
bundled-data fallback of a ``quick`` preset, derived by
:meth:`collapselab.experiments.Preset.bundled`). It must not read files itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collapselab.data.dataset import DataSplits
from collapselab.data.registry import (
    DataOrigin,
    canonical_name,
    data_origin,
    is_file_dataset,
    load_dataset,
    loader_parameters,
)
from collapselab.data.steps import STEPS, Step

__all__ = ["DataSpec", "load_data"]


@dataclass(frozen=True)
class DataSpec:
    """A dataset as an experiment reads it.

    Attributes:
        name: a dataset of the registry (:func:`~collapselab.data.available_datasets`).
        options: keyword options of its loader (``n_train_per_class``, ``classes``,
            ``dim``, ...; ``seed`` and ``data_dir`` come from the run).
        steps: preprocessing steps, applied in order by :func:`load_data`.
        fallback: the spec read instead when this one's files are missing (bundled or
            generated data; see the module docstring), or ``None``.

    Raises:
        ValueError: an unknown dataset, an option its loader does not take, a step that is
            not a :class:`Step`, or a fallback that reads files.
    """

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    steps: tuple[Step, ...] = ()
    fallback: DataSpec | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", canonical_name(self.name))
        object.__setattr__(self, "steps", tuple(self.steps))
        params, accepts_any = loader_parameters(self.name)
        unknown = sorted(k for k in self.options if k not in params and not accepts_any)
        if unknown:
            raise ValueError(
                f"DataSpec {self.name!r}: unknown loader option(s) {unknown}; "
                f"its options: {sorted(params)}"
            )
        for step in self.steps:
            if not isinstance(step, Step):
                raise ValueError(
                    f"DataSpec {self.name!r}: steps must be Step objects "
                    f"({', '.join(STEPS)}), got {step!r}"
                )
        if self.fallback is not None and self.fallback.reads_files:
            raise ValueError(
                f"DataSpec {self.name!r}: its fallback must be bundled or generated data, "
                f"got {self.fallback.name!r}"
            )

    @property
    def reads_files(self) -> bool:
        """Whether the dataset is read from local files."""
        return is_file_dataset(self.name)

    def origin(self, data_dir: str | Path | None = None) -> DataOrigin:
        """Where the data would come from (raises
        :class:`~collapselab.data.DatasetFileError` when its files are not found)."""
        return data_origin(self.name, data_dir)

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data (a run's manifest records it)."""
        return {
            "name": self.name,
            "options": dict(self.options),
            "steps": [step.to_dict() for step in self.steps],
            "fallback": None if self.fallback is None else self.fallback.to_dict(),
        }

    def describe(self) -> str:
        """One line: the dataset, its options and its steps."""
        options = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        steps = " -> ".join(step.name for step in self.steps)
        return f"{self.name}({options})" + (f" -> {steps}" if steps else "")


def load_data(spec: DataSpec, data_dir: str | Path | None = None, seed: int = 0) -> DataSplits:
    """The data of ``spec``: its loader called with ``options`` and ``seed`` (file datasets
    read from ``data_dir``, ``$COLLAPSELAB_DATA_DIR`` or the system package's folder), then
    every step in order."""
    if not isinstance(spec, DataSpec):
        raise TypeError(f"load_data needs a DataSpec, got {type(spec).__name__}")
    data = load_dataset(spec.name, data_dir=data_dir, seed=seed, **dict(spec.options))
    for step in spec.steps:
        data = step.apply(data, seed)
    return data
