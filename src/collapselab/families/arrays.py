"""Where the Monitor stores a family's arrays, and reading them back in step order.

Each measurement's arrays of a family (:meth:`collapselab.families.Family.take_arrays`) go
to ``arrays/<family>_step<step, 8 digits>.npz`` of the run, with ``step`` and ``epoch``
(``-1`` when none) beside them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import numpy as np

from collapselab.store import Run


def array_name(family: str, step: int) -> str:
    """The array-file name of ``family``'s measurement at ``step``."""
    return f"{family}_step{step:08d}"


def ensemble_runs(runs: Sequence[Run | str | os.PathLike[str]]) -> list[Run]:
    """The runs of an ensemble, opened (a :class:`~collapselab.store.Run` or its directory
    each); a ``ValueError`` unless ``runs`` is a non-empty list of them."""
    if isinstance(runs, str | os.PathLike | Run) or len(runs) == 0:
        raise ValueError("runs must be a non-empty list of runs (an ensemble)")
    return [run if isinstance(run, Run) else Run.open(run) for run in runs]


def measurement_arrays(
    run: Run | str | os.PathLike[str], family: str
) -> list[dict[str, np.ndarray]]:
    """Every stored measurement of ``family`` in ``run`` (a :class:`~collapselab.store.Run`
    or its directory), as the ``.npz`` contents, in step order (empty when none)."""
    run = run if isinstance(run, Run) else Run.open(run)
    pattern = re.compile(re.escape(family) + r"_step\d{8}")
    loaded = [run.load_array(n) for n in run.array_names() if pattern.fullmatch(n)]
    return sorted(loaded, key=lambda arrays: int(arrays["step"]))


__all__ = ["array_name", "ensemble_runs", "measurement_arrays"]
