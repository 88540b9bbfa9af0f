"""Which data a run will use, decided before it starts: the data plan of an experiment.

A preset names its datasets as :class:`~collapselab.data.DataSpec` fields
(:meth:`~collapselab.experiments.Preset.data_specs`); an experiment that reads none
generates its own instances.

:func:`plan_data` locates every dataset of the requested preset without loading it
(:meth:`collapselab.data.DataSpec.origin`). When a dataset's files are missing and the
experiment has a fallback for the preset (``Experiment.fallbacks``, derived when it is
registered: ``quick`` -> ``quick-bundled``, the same preset on its datasets' bundled or
generated fallbacks), the fallback preset runs instead and the plan says why; without a
fallback, :class:`MissingDataError` names every missing dataset, every place looked and
how to install it, before anything is run.

The plan is recorded in the run manifest (``data``: :meth:`DataPlan.record`), shown in the
report and the index, so that every run says which data it ran on. :func:`reproduce` and
the command line plan every experiment once, before the first runs, and hand the plan to
:func:`~collapselab.experiments.run_experiment`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collapselab.data import DatasetFileError
from collapselab.data.locations import DATA_DIR_ENV
from collapselab.data.registry import DataOrigin, data_origin
from collapselab.experiments.preset import Preset

if TYPE_CHECKING:
    from collapselab.experiments.registry import Experiment

NO_DATASET = "no dataset: the experiment generates its own instances"


class MissingDataError(FileNotFoundError, ValueError):
    """Datasets a preset needs are not found (and the preset has no fallback).

    Attributes:
        errors: one :class:`~collapselab.data.DatasetFileError` per missing dataset, each
            naming every place looked and how to install the dataset.
    """

    def __init__(self, experiment: str, preset: str, errors: list[DatasetFileError]) -> None:
        self.experiment, self.preset, self.errors = experiment, preset, list(errors)
        names = ", ".join(_dataset_of(e) for e in errors)
        head = f"{experiment} (preset {preset}) needs data that is not found: {names}"
        super().__init__("\n\n".join([head, *(str(e) for e in errors)]))

    def __reduce__(self) -> tuple:
        return (type(self), (self.experiment, self.preset, self.errors))

    def one_line(self) -> str:
        """The error in one line: what is missing, where it was looked for, how to get it."""
        names = ", ".join(_dataset_of(e) for e in self.errors)
        looked = list(dict.fromkeys(p for e in self.errors for p in e.looked_in))
        if len(self.errors) == 1:
            hint = self.errors[0].install
        else:
            hint = (
                "Put each dataset's official files in a folder and pass it as --data-dir or set "
                "COLLAPSELAB_DATA_DIR (collapselab never downloads data; docs/data.md lists "
                "the sources)."
            )
        return (
            f"{self.experiment} (preset {self.preset}): {names} not found (looked in "
            f"{'; '.join(looked)}). {hint}"
        )


def _dataset_of(error: DatasetFileError) -> str:
    return str(error.args[0]).split(":", 1)[0]


def config_datasets(config: Preset) -> list[str]:
    """The dataset names a preset reads (its :class:`~collapselab.data.DataSpec` fields,
    :meth:`~collapselab.experiments.Preset.data_specs`), in order, without repeats; an
    experiment that reads none generates its own instances."""
    return list(dict.fromkeys(spec.name for spec in config.data_specs()))


@dataclass(frozen=True)
class DataPlan:
    """The preset that runs and the data it reads.

    Attributes:
        experiment: the experiment's id.
        requested: the preset asked for.
        preset: the preset that runs: ``requested``, or its fallback when the requested
            preset's data is missing.
        origins: where each dataset comes from (empty when the experiment generates its
            own instances).
        fallback_reason: why the fallback runs (what is missing, where it was looked for,
            how to install it); ``None`` when ``requested`` runs.
        data_dir: the ``--data-dir`` given, if any.
    """

    experiment: str
    requested: str
    preset: str
    origins: tuple[DataOrigin, ...] = ()
    fallback_reason: str | None = None
    data_dir: str | None = None

    @property
    def fell_back(self) -> bool:
        return self.preset != self.requested

    @property
    def reads_files(self) -> bool:
        return any(o.kind == "files" for o in self.origins)

    @property
    def data_dir_unused(self) -> bool:
        """A ``--data-dir`` was given but the preset reads no dataset files."""
        return self.data_dir is not None and not self.reads_files

    def summary(self) -> str:
        """One line naming the data, e.g. ``"Fashion-MNIST, files in ... (Debian package
        dataset-fashion-mnist)"``."""
        if not self.origins:
            return NO_DATASET
        return "; ".join(o.description for o in self.origins)

    def notes(self) -> list[str]:
        """Remarks for the user and the report: the fallback, an unused ``--data-dir``."""
        out = []
        if self.fallback_reason:
            out.append(self.fallback_reason)
        if self.data_dir_unused:
            out.append(
                f"--data-dir {self.data_dir} is not used: {self.experiment} at preset "
                f"{self.preset} reads no dataset files ({self.summary()})"
            )
        return out

    def record(self) -> dict[str, Any]:
        """The manifest's ``data`` entry."""
        return {
            "summary": self.summary(),
            "requested_preset": self.requested,
            "preset": self.preset,
            "fell_back": self.fell_back,
            "datasets": [o.to_dict() for o in self.origins],
            "notes": self.notes(),
        }


def _origins(
    config: Preset, data_dir: str | os.PathLike[str] | None
) -> tuple[tuple[DataOrigin, ...], list[DatasetFileError]]:
    origins, missing = [], []
    for name in config_datasets(config):
        try:
            origins.append(data_origin(name, data_dir))
        except DatasetFileError as error:
            missing.append(error)
    return tuple(origins), missing


class DataDirError(NotADirectoryError, ValueError):
    """A ``data_dir`` that was given is not a folder (both exception types catch it)."""


def check_data_dir(data_dir: str | os.PathLike[str] | None) -> None:
    """A ``data_dir`` that is given must be a folder.

    A typo must stop the run: otherwise a quick preset would fall back to bundled data and
    a standard one would report the dataset missing, both without naming the typo.

    Raises:
        DataDirError: ``data_dir`` does not exist or is not a folder.
    """
    if data_dir is None:
        return
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        state = "does not exist" if not path.exists() else "is not a folder"
        raise DataDirError(
            f"--data-dir {data_dir} {state}: give the folder that holds the dataset files, or "
            f"leave it out to search ${DATA_DIR_ENV} and the system package folders "
            "(docs/data.md)"
        )


def plan_data(
    experiment: Experiment, preset: str, data_dir: str | os.PathLike[str] | None = None
) -> DataPlan:
    """Locate the data of ``experiment`` at ``preset``; fall back when declared.

    Raises:
        KeyError: ``preset`` is not one of the experiment's presets.
        MissingDataError: a dataset is missing and the preset has no fallback (or the
            fallback's data is missing too).
        DataDirError: ``data_dir`` is given but is not a folder.
    """
    given = None if data_dir is None else str(data_dir)
    check_data_dir(data_dir)
    origins, missing = _origins(experiment.config(preset), data_dir)
    if not missing:
        return DataPlan(experiment.id, preset, preset, origins, None, given)
    fallback = experiment.fallbacks.get(preset)
    if fallback is None:
        raise MissingDataError(experiment.id, preset, missing)
    origins, still = _origins(experiment.config(fallback), data_dir)
    if still:
        raise MissingDataError(experiment.id, fallback, still)
    absent = ", ".join(_dataset_of(e) for e in missing)
    used = "; ".join(o.description for o in origins) or "generated data"
    reason = (
        f"preset {preset} needs {absent}, which is not found (looked in "
        f"{'; '.join(missing[0].looked_in)}): ran the fallback preset {fallback} on {used} "
        f"instead. {missing[0].install}"
    )
    return DataPlan(experiment.id, preset, fallback, origins, reason, given)
