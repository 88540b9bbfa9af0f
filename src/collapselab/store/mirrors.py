"""Mirrors: every metric row a run writes, also sent to TensorBoard, MLflow or W&B.

The run store stays the record (docs/store.md): a mirror receives, after each
:meth:`collapselab.store.Run.flush`, exactly the rows just written to ``metrics.parquet``.
Attach one with :meth:`Run.add_mirror`, or by name with ``train(..., mirrors=["tensorboard"])``
or ``collapselab run EXPERIMENT --mirror tensorboard``.

A mirror is any object with three methods (:class:`Mirror`):

* ``open(run)``: called when attached (the run's id, experiment, config are known);
* ``write(rows)``: a list of rows ``(step, epoch, split, layer, metric, value)``, in the
  order they were logged;
* ``close()``: called by :meth:`Run.close`.

Every row becomes a scalar named by :func:`metric_tag` (``"train/loss"``,
``"train/blocks.3/nc1"``) at its ``step`` (TensorBoard keeps scalars in float32). The
built-in mirrors need their optional packages (``pip install 'collapselab[tracking]'``),
imported only when a mirror is opened:

=============  ==========================================================================
name           where the scalars go (defaults)
=============  ==========================================================================
tensorboard    event files in ``<run>/tensorboard/`` (``tensorboard --logdir <root>``)
mlflow         ``MLFLOW_TRACKING_URI`` if set, else ``sqlite:///<root>/mlflow.db``;
               MLflow experiment = the run's experiment, MLflow run name = the run id
               (a resumed run continues its MLflow run; MLflow stores ±inf as ±1.8e308)
wandb          W&B project ``collapselab``, run id = the run id, files in ``<run>/wandb/``,
               offline unless ``WANDB_MODE`` says otherwise (``wandb sync`` uploads later)
=============  ==========================================================================

A resumed run mirrors the rows it records again after its checkpoint, so a tracker that
also received them before the interruption shows them twice at the same steps (the store
itself drops them: :meth:`Run.truncate_after`, and supersedes a stopped session's rows that
a restarted one writes again: :mod:`collapselab.store.row_keys`). Within one session a
mirror never receives two values for one key: the store refuses the second before buffering it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from collapselab.store.metrics_table import MetricRow

if TYPE_CHECKING:
    from collapselab.store.run import Run

MIRROR_NAMES: tuple[str, ...] = ("tensorboard", "mlflow", "wandb")
"""Names accepted by :func:`make_mirror` (and by ``--mirror`` on the command line)."""

_INSTALL = "pip install 'collapselab[tracking]'"


@runtime_checkable
class Mirror(Protocol):
    """What :meth:`collapselab.store.Run.add_mirror` accepts."""

    def open(self, run: Run) -> None: ...

    def write(self, rows: Sequence[MetricRow]) -> None: ...

    def close(self) -> None: ...


def metric_tag(split: str, layer: str, metric: str) -> str:
    """The scalar name of a row: ``split/metric`` (model level) or ``split/layer/metric``."""
    return f"{split}/{layer}/{metric}" if layer else f"{split}/{metric}"


def _require(module: str, mirror: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"the {mirror} mirror needs the optional package {module.split('.')[0]!r}: "
            f"{_INSTALL} ({error})"
        ) from error


def _root_of(run: Run) -> Path:
    return run.path.parent


class TensorBoardMirror:
    """Scalars in TensorBoard event files (``SummaryWriter.add_scalar(tag, value, step)``).

    Args:
        log_dir: the event-file directory; default ``<run>/tensorboard``, so that
            ``tensorboard --logdir <root>`` shows every run under the root by its id.
    """

    def __init__(self, log_dir: str | os.PathLike[str] | None = None) -> None:
        self.log_dir = None if log_dir is None else Path(log_dir)
        self._writer: Any = None

    def open(self, run: Run) -> None:
        _require("tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        if self.log_dir is None:
            self.log_dir = run.path / "tensorboard"
        self._writer = SummaryWriter(log_dir=str(self.log_dir))

    def write(self, rows: Sequence[MetricRow]) -> None:
        for step, _epoch, split, layer, metric, value in rows:
            self._writer.add_scalar(metric_tag(split, layer, metric), value, global_step=step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


_MLFLOW_STATUS = {"completed": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}
_MLFLOW_BATCH = 1000  # MLflow's limit of metrics per log_batch call


class MLflowMirror:
    """Metrics of an MLflow run (``MlflowClient.log_batch``), one MLflow run per run.

    Args:
        tracking_uri: default ``MLFLOW_TRACKING_URI``, else ``sqlite:///<root>/mlflow.db``
            (``mlflow ui --backend-store-uri sqlite:///<root>/mlflow.db`` shows it).
        experiment: the MLflow experiment name; default the run's experiment.
    """

    def __init__(self, tracking_uri: str | None = None, experiment: str | None = None) -> None:
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.mlflow_run_id: str | None = None
        self._client: Any = None
        self._run: Run | None = None

    def open(self, run: Run) -> None:
        tracking = _require("mlflow.tracking", "mlflow")
        if self.tracking_uri is None:
            self.tracking_uri = os.environ.get("MLFLOW_TRACKING_URI") or (
                f"sqlite:///{_root_of(run).resolve() / 'mlflow.db'}"
            )
        if self.experiment is None:
            self.experiment = run.experiment
        client = tracking.MlflowClient(tracking_uri=self.tracking_uri)
        with _quiet("mlflow", "alembic"):  # creating a database logs its migrations at INFO
            found = client.get_experiment_by_name(self.experiment)
        experiment_id = (
            found.experiment_id if found is not None else client.create_experiment(self.experiment)
        )
        previous = client.search_runs(
            [experiment_id], filter_string=f"tags.`collapselab.run_id` = '{run.id}'"
        )
        if previous:  # a resumed run continues its MLflow run
            self.mlflow_run_id = previous[0].info.run_id
            client.update_run(self.mlflow_run_id, status="RUNNING")
        else:
            tags = {"collapselab.run_id": run.id, "collapselab.path": str(run.path)}
            created = client.create_run(experiment_id, run_name=run.id, tags=tags)
            self.mlflow_run_id = created.info.run_id
            client.log_batch(self.mlflow_run_id, params=_mlflow_params(tracking, run))
        self._client, self._run = client, run

    def write(self, rows: Sequence[MetricRow]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [
            Metric(metric_tag(split, layer, metric), value, now, step)
            for step, _epoch, split, layer, metric, value in rows
        ]
        for start in range(0, len(metrics), _MLFLOW_BATCH):
            self._client.log_batch(
                self.mlflow_run_id, metrics=metrics[start : start + _MLFLOW_BATCH]
            )

    def close(self) -> None:
        if self._client is None or self._run is None:
            return
        status = _MLFLOW_STATUS.get(self._run.status, "FINISHED")
        self._client.set_terminated(self.mlflow_run_id, status=status)
        self._client = None


@contextlib.contextmanager
def _quiet(*names: str) -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _mlflow_params(tracking: Any, run: Run) -> list[Any]:
    from mlflow.entities import Param

    values = {"experiment": run.experiment, "preset": run.preset, "seed": run.seed}
    values |= {f"config.{k}": v for k, v in run.config.items() if not isinstance(v, (dict, list))}
    return [Param(key, str(value)[:500]) for key, value in values.items()]


class WandbMirror:
    """A Weights & Biases run, offline by default (``wandb sync <run>/wandb`` uploads it).

    Every row is logged as ``{"step": step, tag: value}`` with ``step`` declared as the x
    axis of every metric, so rows need not arrive in step order.

    Args:
        project: the W&B project. mode: ``"offline"`` (default unless ``WANDB_MODE`` is
            set), ``"online"`` or ``"disabled"``. directory: where W&B writes; default the
            run directory (files land in ``<run>/wandb/``).
    """

    def __init__(
        self,
        project: str = "collapselab",
        mode: str | None = None,
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        self.project = project
        self.mode = mode
        self.directory = None if directory is None else Path(directory)
        self._wb: Any = None
        self._run: Run | None = None

    def open(self, run: Run) -> None:
        wandb = _require("wandb", "wandb")
        mode = self.mode or os.environ.get("WANDB_MODE") or "offline"
        directory = self.directory or run.path
        self._wb = wandb.init(
            project=self.project,
            id=_wandb_id(run.id),
            name=run.id,
            dir=str(directory),
            mode=mode,
            config={"experiment": run.experiment, "preset": run.preset, "seed": run.seed}
            | run.config,
            resume="allow",
            reinit="create_new",
            # No console capture (it would wrap the progress display) and no banner.
            settings=wandb.Settings(silent=True, console="off", x_disable_stats=True),
        )
        self._wb.define_metric("step")
        self._wb.define_metric("*", step_metric="step")
        self._run = run

    def write(self, rows: Sequence[MetricRow]) -> None:
        by_step: dict[int, dict[str, float]] = {}
        for step, _epoch, split, layer, metric, value in rows:
            by_step.setdefault(step, {})[metric_tag(split, layer, metric)] = value
        for step, values in by_step.items():
            self._wb.log({"step": step, **values})

    def close(self) -> None:
        """Finish the W&B run and, when no other W&B run is active in this process, shut
        W&B's service down: ``finish()`` alone may return before the service has written the
        run's files (seen offline with W&B 0.31), ``teardown()`` waits for them."""
        if self._wb is None:
            return
        import wandb

        failed = self._run is not None and self._run.status in ("failed", "interrupted")
        self._wb.finish(exit_code=1 if failed else 0)
        self._wb = None
        if wandb.run is None:
            wandb.teardown()


def _wandb_id(run_id: str) -> str:
    # W&B run ids allow letters, digits, '_' and '-' only.
    return re.sub(r"[^A-Za-z0-9_-]", "_", run_id)[:128]


def make_mirror(name: str) -> Mirror:
    """A built-in mirror with its defaults, by name (:data:`MIRROR_NAMES`)."""
    factories = {"tensorboard": TensorBoardMirror, "mlflow": MLflowMirror, "wandb": WandbMirror}
    if name not in factories:
        raise ValueError(f"unknown mirror {name!r}; mirrors: {', '.join(MIRROR_NAMES)}")
    return factories[name]()


def check_mirror_available(name: str) -> None:
    """Raise ``ImportError`` (with the install command) when mirror ``name``'s package is
    missing, before anything runs; ``ValueError`` for an unknown name."""
    import importlib.util

    if name not in MIRROR_NAMES:
        raise ValueError(f"unknown mirror {name!r}; mirrors: {', '.join(MIRROR_NAMES)}")
    if importlib.util.find_spec(name) is None:
        raise ImportError(f"the {name} mirror needs the optional package {name!r}: {_INSTALL}")


def attach_mirrors(run: Run | None, mirrors: Sequence[Mirror | str] | str) -> list[Mirror]:
    """Attach ``mirrors`` (objects, or names among :data:`MIRROR_NAMES`) to ``run``.

    Returns the mirrors now attached (one whose ``open`` failed is left out, with the
    warning of :meth:`Run.add_mirror`); detach them with :meth:`Run.remove_mirror`, which
    flushes and closes them.

    Raises:
        ValueError: mirrors without a run, or an unknown name; ``ImportError``: the
            package a named mirror needs is not installed.
    """
    if isinstance(mirrors, str):
        mirrors = [mirrors]
    if not mirrors:
        return []
    if run is None:
        raise ValueError("mirrors forward the rows of a run: pass run=Run.create(...) too")
    for mirror in mirrors:
        if isinstance(mirror, str):
            check_mirror_available(mirror)
    attached = [make_mirror(m) if isinstance(m, str) else m for m in mirrors]
    for mirror in attached:
        run.add_mirror(mirror)
    return [m for m in attached if m in run.mirrors]
