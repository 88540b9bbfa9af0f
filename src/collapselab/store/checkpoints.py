"""A run's checkpoints: ``checkpoints/step-<step>.pt``, and resuming from the newest one that
can be read.

A checkpoint file written by the store is replaced atomically, so the store never leaves a
half-written one; a disk that fills up, a copy interrupted or a file edited by hand can.
:func:`newest_readable` then falls back to the newest checkpoint that loads, moving each
unreadable newer one to ``checkpoints/damaged/`` with a warning that names it and the step
the run resumes from, so a run never dead-ends on one bad file.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collapselab.store.layout import CHECKPOINTS_DIR

_CHECKPOINT_RE = re.compile(r"^step-(\d+)\.pt$")

DAMAGED_CHECKPOINTS = "damaged"
"""The folder under ``checkpoints/`` that unreadable checkpoints are moved to."""


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read (truncated, overwritten, not a checkpoint)."""


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint file of a run, saved after global step ``step``."""

    step: int
    path: Path

    def load(self, map_location: Any = "cpu", weights_only: bool = True) -> dict[str, Any]:
        """Load the saved state dict with :func:`torch.load`.

        ``weights_only=True`` (default) refuses arbitrary pickled objects: checkpoints hold
        tensors and plain Python containers of numbers and strings only.

        Raises:
            CheckpointError: the file cannot be read as a checkpoint, with torch's reason.
        """
        import torch

        try:
            state = torch.load(self.path, map_location=map_location, weights_only=weights_only)
        except Exception as error:  # a damaged file fails in many ways: name it and why
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error)
            raise CheckpointError(f"{self.path.name} cannot be read ({reason})") from None
        if not isinstance(state, dict):
            raise CheckpointError(f"{self.path.name} holds a {type(state).__name__}, not a state")
        return state


def checkpoints(run_dir: str | os.PathLike[str]) -> list[Checkpoint]:
    """The checkpoints of ``run_dir``, sorted by step."""
    directory = Path(run_dir) / CHECKPOINTS_DIR
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _CHECKPOINT_RE.match(path.name)
        if match and path.is_file():
            found.append(Checkpoint(int(match.group(1)), path))
    return sorted(found, key=lambda c: c.step)


def readable_problem(run_dir: str | os.PathLike[str]) -> str | None:
    """``None`` when ``run_dir`` has no checkpoint or one of them loads (newest first), else
    why none does."""
    found = checkpoints(run_dir)
    first_error = None
    for checkpoint in reversed(found):
        try:
            checkpoint.load()
            return None
        except CheckpointError as error:
            first_error = first_error or str(error)
    return (
        None if not found else f"none of its {len(found)} checkpoint(s) can be read ({first_error})"
    )


def newest_readable(
    run_dir: str | os.PathLike[str], map_location: Any = "cpu"
) -> tuple[Checkpoint, dict[str, Any]] | None:
    """The newest checkpoint that loads and its state; ``None`` without checkpoints.

    Each unreadable newer checkpoint is moved to ``checkpoints/damaged/`` with a warning.

    Raises:
        CheckpointError: there are checkpoints and none can be read.
    """
    found = checkpoints(run_dir)
    skipped: list[str] = []
    for checkpoint in reversed(found):
        try:
            state = checkpoint.load(map_location=map_location)
        except CheckpointError as error:
            skipped.append(str(error))
            _set_aside(checkpoint)
            continue
        if skipped:
            warnings.warn(
                f"run {Path(run_dir).name}: {'; '.join(skipped)}; moved to "
                f"{CHECKPOINTS_DIR}/{DAMAGED_CHECKPOINTS}/ and resuming from the checkpoint "
                f"of step {checkpoint.step}",
                stacklevel=2,
            )
        return checkpoint, state
    if found:
        raise CheckpointError(
            f"run {Path(run_dir).name}: none of its {len(found)} checkpoint(s) can be read "
            f"({skipped[-1]}); they were moved to {CHECKPOINTS_DIR}/{DAMAGED_CHECKPOINTS}/"
        )
    return None


def _set_aside(checkpoint: Checkpoint) -> None:
    target = checkpoint.path.parent / DAMAGED_CHECKPOINTS
    target.mkdir(exist_ok=True)
    checkpoint.path.rename(target / checkpoint.path.name)


__all__ = [
    "DAMAGED_CHECKPOINTS",
    "Checkpoint",
    "CheckpointError",
    "checkpoints",
    "newest_readable",
    "readable_problem",
]
