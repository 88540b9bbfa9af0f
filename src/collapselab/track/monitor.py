r"""The Monitor: scheduled, exact, per-layer measurement of a network during training.

A :class:`Monitor` measures metric families (:mod:`collapselab.families.builtin`, or any
registered :class:`~collapselab.families.family.Family`) on every requested layer of a model,
on a schedule. It owns the schedule, the probes, the loop over the families and the writing;
the families say what they need and compute their keys. A measurement is one *data pass*
per split (:mod:`collapselab.track.data_pass`): a forward pass per batch with hooks on every layer
(pass 1), and, for the layers whose keys need a within-class scatter or decisions, pass 2
over the features kept in memory (within ``cache_bytes``) or a second forward pass. Only
what the requested keys need is collected.

Each family may carry a schedule of its own (``Family(schedule=...)``, a
:class:`~collapselab.track.Schedule`; ``None``: the Monitor's). The Monitor measures at every
event where its own schedule or some family's is due, and there only the families due, in
one data pass that collects what they need (Cockpit-style). Under ``torch.distributed`` it
enforces each family's distributed mode (:attr:`~collapselab.families.Family.distributed`:
reduced, replicated, rank 0, or refused; :mod:`collapselab.families.processes`).

The values are those of :func:`collapselab.measure` on the concatenated features of the
whole split, whatever the batch size. Test features are measured against the *train* class
means where the catalogue says so (``ncc_accuracy`` and ``nc4_ncc_mismatch`` of the test
split). Every value is written to the run store in long format: one row per
``(step, epoch, split, layer, metric, value)``; model-level rows have ``layer = ""``.
Arrays a family hands over (:meth:`~collapselab.families.Family.take_arrays`: the curvature
family's spectra) go to ``arrays/<family>_step<step>.npz`` with ``step`` and ``epoch``
(``-1`` when none), and to :attr:`Monitor.last_arrays`.

Model level, always: ``accuracy`` of ``argmax(model(x))`` per split; once,
``zero_error_epoch`` (see :meth:`Monitor.after_epoch`), of which the Monitor is the one owner
(the training and Lightning adapters delegate to it).

One writer per row key: a run holds one value per ``(step, split, layer, metric)``
(:mod:`collapselab.store.row_keys`). In a run trained by :func:`collapselab.train.train` the
training loop writes the model-level ``accuracy`` (and ``loss``) of the splits it evaluates,
sample-weighted over the whole split, at every evaluated epoch; a monitor driven by the loop
on that run (:class:`~collapselab.track.callbacks.MonitorCallback`) leaves those rows to it
(:meth:`Monitor.leave_accuracy_rows`). Its own accuracy, class-weighted as its layer
statistics and measured on the data it was given, stays in its results, and decides its
zero-error epoch.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

import torch
from torch import nn

from collapselab.checks import check_int, imbalance_message, resolve_weighting
from collapselab.data.dataset import LabeledData
from collapselab.families.arrays import array_name
from collapselab.families.catalogue import FamilySpec
from collapselab.families.collection import Collection, Request, StatsOptions
from collapselab.families.family import MODEL_LAYER, Family, Layout, ModelAccess, Values
from collapselab.families.processes import Processes
from collapselab.metrics.nc import weighted_accuracy
from collapselab.probe import eval_mode, resolve_layers
from collapselab.probe.gradients import check_independent_rows, check_not_inplace, gated_layers
from collapselab.probe.inputs import first_param
from collapselab.stats import DENSE_MAX_DIM, ConfusionCounts
from collapselab.store import Run
from collapselab.store.mirrors import attach_mirrors, check_mirror_available
from collapselab.store.zero_error import ACCURACY, ZERO_ERROR_METRIC, first_zero_error
from collapselab.track import _dist
from collapselab.track.data_pass import DataPass, PassSettings
from collapselab.track.schedule import Schedule
from collapselab.train.losses import per_sample_loss

Results = dict[str, dict[str, dict[str, float]]]
"""``results[split][layer][metric] -> value``; model-level values under ``layer = ""``."""

LossArg = str | Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
_GRADIENT_SIGNALS = frozenset({"feature_gradients", "preactivation_gradients"})
_GATE_SIGNALS = frozenset({"gates", "preactivation_gradients"})


def _loss_function(loss: LossArg) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Per-sample loss ``(logits, labels) -> (B,)`` for gradients and model procedures."""
    if callable(loss):
        return loss
    if loss not in ("ce", "mse"):
        raise ValueError(f"loss must be 'ce', 'mse' or a callable, got {loss!r}")

    def fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return per_sample_loss(logits, labels, loss=loss)

    return fn


def _as_loader(data: Any, name: str, batch_size: int) -> Any:
    if data is None:
        return None
    if isinstance(data, LabeledData):
        return data.loader(batch_size=batch_size, shuffle=False)
    if isinstance(data, Iterable) and iter(data) is not data:
        return data
    raise TypeError(
        f"{name} must be a DataLoader, a re-iterable collection of (inputs, labels) batches or "
        f"a LabeledData, got {type(data).__name__} (a one-shot iterator cannot feed two passes)"
    )


def _family_copies(families: Iterable[FamilySpec] | FamilySpec | None) -> list[FamilySpec]:
    """The monitor's own copies of the family objects (they record layout choices)."""
    if families is None:
        return ["nc", "pfc"]
    if isinstance(families, str | Family):
        families = [families]
    return [f.copy() if isinstance(f, Family) else f for f in families]


class Monitor:
    r"""Measure metric families of every layer of a model on a schedule.

    Args:
        model: the network. By default the layers of the collapselab convention are used
            (``model.feature_layers`` plus ``model.penultimate``; the classifier
            ``model.classifier`` gives ``W``, ``b``).
        train: the training data to measure on: a ``DataLoader`` (or any re-iterable of
            ``(inputs, labels)`` batches) or a :class:`~collapselab.data.LabeledData`. It is
            iterated once per measurement when the features fit in ``cache_bytes``, else
            twice, and must then give the same samples both times: do not shuffle with
            ``drop_last`` and do not augment randomly.
        test: optional held-out data (``split = "test"``).
        families: the metric families: objects with their options
            (``[NC(ddof=0), MSE(lam=2.5e-3), PFC(path_layers="auto"), Diversity(gradients=True)]``,
            a family written outside the package as well) or registered names
            (``["nc", "pfc"]``, the default); each object's ``keys=`` restricts what it
            computes, and only the statistics those keys need are collected; its
            ``schedule=`` says when it is measured (default: ``schedule`` below). See
            docs/catalogue.md for the keys.
        layers: layers to measure (names, glob patterns, regexes or module types; see
            :func:`collapselab.probe.resolve_layers`). Default: the convention above.
        schedule: the Monitor's own schedule, for the families without one: ``"log"``
            (paper 003's log-spaced epochs scaled to ``epochs``), ``"all"``,
            a list of epochs, a :class:`~collapselab.track.Schedule`, or ``None`` (no
            epoch-end measurement).
        epochs: the training budget of ``schedule="log"``; the training adapters supply it
            when it is not given here (:meth:`set_total_epochs`).
        every_iterations: also measure every this many optimiser steps (see
            :meth:`after_iteration`).
        initial: measure the initial model as epoch 0 (:meth:`before_training`).
        run: a :class:`~collapselab.store.Run` receiving the rows (optional; the training
            adapter uses the training run when this is ``None``).
        n_classes: number of classes ``C``; default ``model.classifier.out_features``.
        penultimate: name of the layer whose output the classifier reads (default
            ``model.penultimate``); its rows get the classifier keys. To measure without
            ``W``, leave it out of ``layers``.
        classifier: the final ``nn.Linear`` (default ``model.classifier``), read afresh at
            every measurement.
        loss: per-sample loss of the families that take gradients or Hessian-vector
            products: ``"ce"``, ``"mse"`` (the training loop's ``nn.MSELoss`` per sample) or
            a callable ``(logits, labels) -> (B,)``.
        device: where to run the model and accumulate; default the model's device.
        batch_size: batch size when a ``LabeledData`` is given.
        weighting, mode, dense_max_dim: as for :func:`collapselab.measure`:
            ``weighting="auto"`` uses the papers' class-balanced definitions for balanced
            classes and the sample-weighted ones otherwise (one warning per monitor);
            ``mode="auto"`` keeps a dense within-class covariance only where a requested
            key needs it and ``D <= dense_max_dim``.
        distributed: ``"auto"``: under an initialised ``torch.distributed`` group, sum the
            statistics of all processes before computing metrics (each process iterating
            its own shard of the data, e.g. with a ``DistributedSampler`` that does not pad),
            and enforce every family's distributed mode (a ``"refuse"`` family raises
            ``RuntimeError``, a ``"replicated"`` one needs the same weights in every process,
            every process gets rank 0's values of the model procedures); only rank 0 writes
            to ``run``. ``False``: never reduce (each process's own values).
        chunk_bytes: on CPU, the statistics of each batch are accumulated in row blocks
            of about this many bytes of float64 features (4 MiB: cache-sized blocks;
            ``0``: whole batches). It changes only the summation order.
        cache_bytes: pass 1 keeps the features of the layers that need pass 2 while they
            total at most this many bytes (in the layers' dtype, on their device; default
            1 GiB), which saves the second forward pass; beyond it pass 2 runs the model
            again. The values are the same either way. Layer outputs are kept without a
            copy; one that is modified in place after its layer ran (e.g. by
            ``nn.ReLU(inplace=True)``) is detected, that data pass runs the model again,
            and later ones keep copies. ``0``: always run the model twice.
        mirrors: trackers that also receive every row the monitor's run writes
            (:class:`collapselab.store.Mirror` objects, or ``"tensorboard"``, ``"mlflow"``,
            ``"wandb"``); attached to the run at the monitor's first write, detached (and
            closed) by :meth:`close`, which the training adapters call when training ends.

    Example (plain loop)::

        monitor = Monitor(model, data.train, data.test, epochs=100, run=run)
        monitor.before_training()
        for epoch in range(1, 101):
            ...                                  # train one epoch
            monitor.after_epoch(epoch, step=steps_so_far)
    """

    def __init__(
        self,
        model: nn.Module,
        train: Any,
        test: Any = None,
        *,
        families: Iterable[FamilySpec] | FamilySpec | None = None,
        layers: Any = None,
        schedule: Iterable[int] | Schedule | str | None = "log",
        epochs: int | None = None,
        every_iterations: int | None = None,
        initial: bool = True,
        run: Run | None = None,
        n_classes: int | None = None,
        penultimate: str | None = None,
        classifier: nn.Linear | None = None,
        loss: LossArg = "ce",
        device: torch.device | str | None = None,
        batch_size: int = 512,
        weighting: str = "auto",
        mode: str = "auto",
        dense_max_dim: int = DENSE_MAX_DIM,
        distributed: bool | str = "auto",
        chunk_bytes: int = 4 << 20,
        cache_bytes: int = 1 << 30,
        mirrors: Sequence[Any] | str = (),
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.train_loader = _as_loader(train, "train", batch_size)
        if self.train_loader is None:
            raise ValueError("train is required: the training data to measure on")
        self.test_loader = _as_loader(test, "test", batch_size)
        self._init_schedule(schedule, epochs, every_iterations, initial)
        if run is not None and not isinstance(run, Run):
            raise TypeError(
                f"run must be a collapselab.store.Run or None, got {type(run).__name__} "
                f"{run!r}: open it first, Run.open_or_create(root, experiment, run_id=...)"
            )
        self.run = run
        self.penultimate = penultimate if penultimate is not None else _attr(model, "penultimate")
        self.classifier = classifier if classifier is not None else _attr(model, "classifier")
        if self.classifier is not None and not isinstance(self.classifier, nn.Linear):
            raise TypeError(
                f"classifier must be an nn.Linear, got {type(self.classifier).__name__}"
            )
        self.layers = resolve_layers(model, self._default_layers(layers))
        self.n_classes = self._n_classes(n_classes)
        self.request = Request(_family_copies(families))
        _check_family_schedules(self.request.given)
        needs = self.request.needs
        self.loss_fn = _loss_function(loss)
        self._loss_name = loss if isinstance(loss, str) else None
        self._linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
        self._factors: list[Any] | None = None
        self.gated = gated_layers(model, self.layers) if needs.signals & _GATE_SIGNALS else []
        check_not_inplace(model, self.gated)
        self.options = StatsOptions(weighting, mode, dense_max_dim, chunk_bytes=chunk_bytes)
        self.weighting = self.options.weighting
        self.device = torch.device(device) if device is not None else None
        if distributed not in ("auto", False):
            raise ValueError(f"distributed must be 'auto' or False, got {distributed!r}")
        self.distributed = distributed
        self._check_modes(self.request)  # a refusal under torch.distributed, as early as known
        self.cache_bytes = check_int("cache_bytes", cache_bytes, minimum=0)
        self._mirror_specs = _mirror_specs(mirrors)
        self._mirrors: list[Any] = []  # attached to the run at the first write
        self._cache_copies = False  # set once a kept output was seen modified in place
        self._warned_imbalance = False
        self._zero_error_epoch: int | None = None
        self._accuracy_elsewhere: frozenset[str] = frozenset()  # leave_accuracy_rows
        self.layout: Layout | None = None
        self._kept: list[str] = []
        self.last_results: Results | None = None
        self.last_arrays: dict[str, dict[str, Any]] = {}
        self.n_measurements = 0

    # ------------------------------------------------------------------ schedule
    def _init_schedule(
        self,
        schedule: Iterable[int] | Schedule | str | None,
        epochs: int | None,
        every_iterations: int | None,
        initial: bool,
    ) -> None:
        self._every_iterations = every_iterations
        self._initial = bool(initial)
        if isinstance(schedule, Schedule):
            self._schedule: Schedule | None = schedule
            self._every_iterations = schedule.every_iterations
            self._initial = schedule.initial
            return
        # Validates every argument now; 'log' without a budget waits for set_total_epochs.
        pending = isinstance(schedule, str) and schedule == "log" and epochs is None
        built = Schedule.build(
            None if pending else schedule,
            total_epochs=epochs,
            every_iterations=every_iterations,
            initial=initial,
        )
        self._schedule = None if pending else built

    @property
    def schedule(self) -> Schedule:
        """The measurement schedule (``schedule="log"`` needs the epoch budget first)."""
        if self._schedule is None:
            raise ValueError(
                "schedule='log' scales paper 003's epoch list to the epoch budget: pass "
                "epochs=<total training epochs> to Monitor (or call set_total_epochs), or "
                "give an explicit list of epochs"
            )
        return self._schedule

    def set_total_epochs(self, total_epochs: int) -> None:
        """Give the epoch budget of a ``schedule="log"`` monitor created without ``epochs``
        (the training adapters call this with the loop's budget). No effect otherwise."""
        if self._schedule is None:
            self._schedule = Schedule.build(
                "log",
                total_epochs=total_epochs,
                every_iterations=self._every_iterations,
                initial=self._initial,
            )

    # ------------------------------------------------------------------ set-up
    def _default_layers(self, layers: Any) -> Any:
        if layers is not None:
            return layers
        if _attr(self.model, "feature_layers") is None:
            raise ValueError(
                f"{type(self.model).__name__} has no feature_layers; pass layers= (names, "
                "patterns or module types of the layers to measure)"
            )
        out = list(self.model.feature_layers)
        if self.penultimate is not None and self.penultimate not in out:
            out.append(self.penultimate)
        return out

    def _n_classes(self, n_classes: int | None) -> int:
        if n_classes is not None:
            return check_int("n_classes", n_classes, minimum=2)
        if self.classifier is not None:
            return check_int("classifier.out_features", self.classifier.out_features, minimum=2)
        raise ValueError("n_classes is required when the model has no classifier attribute")

    @property
    def families(self) -> list[Family]:
        """The family objects this monitor computes (its own copies)."""
        return self.request.families

    @property
    def dims(self) -> dict[str, int] | None:
        """Flattened dimension of every measured layer (known after the first measurement)."""
        return None if self.layout is None else dict(self.layout.dims)

    @property
    def path_layers(self) -> list[str]:
        """The layers the cross-layer families read together (the PFC family's path)."""
        return list(self._kept)

    def _penultimate_with_classifier(self) -> str | None:
        pen = self.penultimate
        return pen if pen in self.layers and self.classifier is not None else None

    def _provisional_layout(self) -> Layout:
        return Layout(
            tuple(self.layers),
            {} if self.layout is None else self.layout.dims,
            self._penultimate_with_classifier(),
            tuple(self.gated),
            self.n_classes,
        )

    def _on_first_batch(self, feats: dict[str, torch.Tensor], request: Request) -> list[str]:
        """Learn the dimensions, check them against the classifier, set every family up;
        returns the layers ``request`` (the families measured now) reads together."""
        dims = {n: int(feats[n].shape[1]) for n in self.layers}
        pen = self._penultimate_with_classifier()
        if pen is not None:
            w = self.classifier.weight
            if tuple(w.shape) != (self.n_classes, dims[pen]):
                raise ValueError(
                    f"classifier weight has shape {tuple(w.shape)} but the penultimate layer "
                    f"{pen!r} has dimension {dims[pen]} and there are {self.n_classes} "
                    "classes; expected (n_classes, dim): check penultimate= and classifier="
                )
        layout = Layout(tuple(self.layers), dims, pen, tuple(self.gated), self.n_classes)
        self.request.setup(layout, self.options)
        self.layout = layout
        self._kept = self.request.kept_layers()
        return request.kept_layers()

    def _resolve_device(self) -> torch.device:
        if self.device is not None:
            return self.device
        first = first_param(self.model)
        return first.device if first is not None else torch.device("cpu")

    def _distributed(self) -> bool:
        return self.distributed == "auto" and _dist.distributed_active()

    def _check_modes(self, request: Request) -> None:
        """Under ``torch.distributed``: raise for a family whose distributed mode is
        ``"refuse"`` (declared, or the default of a family with a model procedure)."""
        if not self._distributed():
            return
        for fam, keys in request.plan.items():
            if fam.distributed_mode(keys) != "refuse":
                continue
            why = (
                "declared by the family"
                if fam.distributed is not None
                else "the default for a family that runs a procedure on the model and "
                "declares no mode"
            )
            raise RuntimeError(
                f"the {fam.name!r} family cannot run under torch.distributed: its distributed "
                f"mode is 'refuse' ({why}), so its values would not be those of one process on "
                "the whole data. Measure it in one process, or pass Monitor(distributed=False) "
                "for each process's own values, or give the family class a distributed mode "
                "('reduced', 'replicated' or 'rank0'; docs/monitoring.md)"
            )

    @staticmethod
    def _takes_gradients(request: Request) -> bool:
        return bool(request.needs.signals & _GRADIENT_SIGNALS)

    def _factor_layers(self, request: Request) -> list[str]:
        """The linear layers whose per-sample factors the gradient pass captures for a model
        procedure that reads them (one backward pass instead of two)."""
        needs = request.needs
        return self._linears if self._takes_gradients(request) and needs.linear_factors else []

    def _classifier(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        if self.classifier is None:
            return None
        bias = self.classifier.bias
        return self.classifier.weight.detach(), None if bias is None else bias.detach()

    # ------------------------------------------------------------------ measuring
    def _data_pass(
        self,
        split: str,
        loader: Any,
        reference: Collection | None,
        device: torch.device,
        request: Request,
    ) -> tuple[Collection, ConfusionCounts]:
        options = self.options
        if device.type != "cpu":
            options = StatsOptions(
                options.weighting, options.mode, options.dense_max_dim, chunk_bytes=0
            )
        collection = Collection(request, split, self._provisional_layout(), options, reference)
        settings = PassSettings(
            model=self.model,
            layers=self.layers,
            gated=self.gated,
            n_classes=self.n_classes,
            device=device,
            gradients=self._takes_gradients(request),
            loss=self.loss_fn,
            cache_bytes=self.cache_bytes,
            copy_outputs=self._cache_copies,
            distributed=self._distributed(),
            linear_layers=self._factor_layers(request) if split == "train" else [],
        )
        first = partial(self._on_first_batch, request=request) if self.layout is None else None
        kept = request.kept_layers() if self.layout is not None else []
        data_pass = DataPass(settings, collection, first, kept)
        data_pass.run(loader, self._classifier())
        if split == "train":
            self._factors = data_pass.factors
        self._cache_copies = self._cache_copies or data_pass.overwritten
        collection.layout = self.layout  # with the dimensions learnt on the first batch
        return collection, data_pass.confusion

    def measure_now(
        self,
        epoch: int | None = None,
        step: int | None = None,
        *,
        log: bool = True,
        epoch_end: bool = True,
    ) -> Results:
        """Measure now, whatever the Monitor's schedule; returns
        ``results[split][layer][metric]``.

        Measures every family that follows the Monitor's schedule and every family whose
        own schedule is due at this event: at the end of ``epoch`` with ``epoch_end``
        (:meth:`~collapselab.track.Schedule.at_epoch`), else at ``step``
        (:meth:`~collapselab.track.Schedule.at_step`); a measurement with neither measures
        every family. Runs the data pass of every split (train, then test against the train
        means) in eval mode (every submodule's train/eval flag is restored afterwards),
        collecting what those families need, and computes their keys for every layer; a
        family undefined for a layer in its present state (zero between-class scatter in a
        dead layer, say) is skipped there with a warning. The model's ``accuracy`` is
        measured every time. With ``log`` and a run, writes one row per value at
        ``(step, epoch)``, but the model-level accuracy of the splits left to another writer
        (:meth:`leave_accuracy_rows`); ``step`` defaults to ``epoch`` (0 when both are
        ``None``). With ``epoch_end`` (a measurement at the end of ``epoch``, not within
        it), updates :attr:`zero_error_epoch` when the model classifies every training
        sample correctly for the first time.
        """
        due = self._due(lambda: True, lambda s: _scheduled(s, epoch, step, epoch_end))
        return self._measure(due, epoch, step, log=log, epoch_end=epoch_end)

    def _due(self, own: Callable[[], bool], scheduled: Callable[[Schedule], bool]) -> list[Family]:
        """The given families due at an event: by their own schedule (``scheduled``), or,
        without one, by the Monitor's (``own()``, asked once and only if needed)."""
        answer: list[bool] = []
        out = []
        for fam in self.request.given:
            if fam.schedule is not None:
                if scheduled(fam.schedule):
                    out.append(fam)
                continue
            if not answer:
                answer.append(own())
            if answer[0]:
                out.append(fam)
        return out

    def _measure(
        self,
        due: list[Family],
        epoch: int | None,
        step: int | None,
        *,
        log: bool,
        epoch_end: bool,
    ) -> Results:
        """One measurement of the families ``due`` (:meth:`measure_now`)."""
        request = self.request.subset(due)
        self._check_modes(request)
        t0 = time.perf_counter()
        device = self._resolve_device()
        loaders = {"train": self.train_loader}
        if self.test_loader is not None:
            loaders["test"] = self.test_loader
        passes: dict[str, tuple[Collection, ConfusionCounts]] = {}
        with eval_mode(self.model):
            if self._takes_gradients(request):
                check_independent_rows(self.model, allow_batch_coupling=False)
            try:
                for split, loader in loaders.items():
                    reference = passes["train"][0] if split != "train" else None
                    passes[split] = self._data_pass(split, loader, reference, device, request)
                model_values = self._model_procedures(request, loaders, device, epoch, step)
            finally:
                self._factors = None  # the data pass's factors serve this measurement only
        counts = {split: conf.counts.sum(dim=1) for split, (_, conf) in passes.items()}
        self._warn_imbalanced(counts)
        classifier = self._classifier()
        results: Results = {}
        for split, (collection, confusion) in passes.items():
            per_layer = collection.results(classifier, on_error="warn")
            for layer, values in model_values.get(split, {}).items():
                per_layer.setdefault(layer, {}).update(values)
            model_level: Values = {ACCURACY: self._accuracy(confusion)}
            model_level |= per_layer.pop(MODEL_LAYER, {})
            results[split] = {**per_layer, MODEL_LAYER: model_level}
        self.n_measurements += 1
        self.last_results = results
        self.last_arrays = {f.name: a for f in request.families if (a := f.take_arrays())}
        if log:
            self._log(results, epoch, step, time.perf_counter() - t0)
        if epoch_end and epoch is not None:
            self._record_zero_error(epoch, step, results["train"][MODEL_LAYER][ACCURACY])
        return results

    def _model_procedures(
        self,
        request: Request,
        loaders: dict[str, Any],
        device: torch.device,
        epoch: int | None,
        step: int | None,
    ) -> Results:
        """The families that run a procedure on the model itself (``Needs(model=True)``).

        Under ``torch.distributed`` every process runs each procedure (a wrapped model's
        forward may run collectives) and ends with rank 0's values (or its error): for a
        ``"reduced"`` or ``"replicated"`` family they are every process's values, a
        ``"rank0"`` family computes them there only. A ``"replicated"`` family is run only
        once the weights are checked to be the same in every process."""
        out: Results = {}
        procedures = [
            (fam, keys)
            for fam in request.families
            if (keys := frozenset(k for k in request.plan[fam] if fam.key(k).needs.model))
        ]
        if not procedures:
            return out
        processes = Processes.current() if self._distributed() else Processes()
        modules = dict(self.model.named_modules())
        access = ModelAccess(
            model=self.model,
            loss=self.loss_fn,
            data=loaders,
            modules={n: modules[n] for n in self.layers},
            layout=self.layout,
            device=device,
            loss_name=self._loss_name,
            epoch=epoch,
            step=step,
            factors=self._factors,
            processes=processes,
        )
        weights_checked = False
        for fam, keys in procedures:
            if processes.active and fam.distributed_mode(request.plan[fam]) == "replicated":
                if not weights_checked:
                    self._check_same_weights(fam, processes)
                    weights_checked = True
            error = None
            try:
                values = fam.compute_model(keys, access)
            except ValueError as err:
                values, error = {}, str(err)
            if processes.active:
                values, error = processes.broadcast((values, error))
            if error is not None:
                warnings.warn(
                    f"collapselab: family {fam.name!r} (model) skipped: {error}",
                    UserWarning,
                    stacklevel=5,
                )
                continue
            for split, per_layer in values.items():
                for layer, vals in per_layer.items():
                    out.setdefault(split, {}).setdefault(layer, {}).update(vals)
        return out

    def _check_same_weights(self, fam: Family, processes: Processes) -> None:
        """A ``"replicated"`` family computes from the weights in every process: they must
        be the same everywhere (their sums and sums of squares, bit for bit)."""
        params = [p.detach().to(torch.float64) for p in self.model.parameters()]
        if not params:
            return
        device = params[0].device
        fingerprint = torch.stack(
            [torch.stack([p.sum(), p.square().sum()]).to(device) for p in params]
        )
        if not processes.same_everywhere(fingerprint):
            raise RuntimeError(
                f"the {fam.name!r} family is 'replicated' under torch.distributed (every "
                "process computes it from the weights), but the model's weights differ between "
                "the processes: measure a model whose parameters are kept in sync (as DDP "
                "keeps them), or pass Monitor(distributed=False) for each process's own values"
            )

    def _accuracy(self, confusion: ConfusionCounts) -> float:
        """Accuracy of ``argmax(model(x))``, class-weighted as the layer statistics are."""
        counts = confusion.counts.sum(dim=1)
        resolved = resolve_weighting(self.weighting, counts)
        weights = torch.ones_like(counts) if resolved == "balanced" else counts
        return weighted_accuracy(confusion.counts, weights.to(torch.float64))

    def _warn_imbalanced(self, counts: dict[str, torch.Tensor]) -> None:
        """One warning per monitor (not per layer and measurement) for imbalanced classes."""
        if self._warned_imbalance:
            return
        message = imbalance_message(counts, self.weighting)
        if message is not None:
            self._warned_imbalance = True
            warnings.warn(f"collapselab.track: {message}", UserWarning, stacklevel=4)

    # ------------------------------------------------------------------ schedule hooks
    def before_training(self, step: int = 0) -> Results | None:
        """Measure the initial model as epoch 0, if the schedule asks for it."""
        return self.after_epoch(0, step=step)

    def after_epoch(self, epoch: int, step: int | None = None) -> Results | None:
        """Measure at the end of ``epoch`` (counted from 1) if it is scheduled.

        Returns the results, or ``None`` when the epoch is not scheduled. The first
        measured epoch at which ``argmax(model(x))`` equals the label for every training
        sample (train ``accuracy`` exactly 1, :func:`collapselab.store.first_zero_error`; in
        eval mode; the terminal phase of training starts there) is stored in
        :attr:`zero_error_epoch`, logged as the metric ``zero_error_epoch`` (split
        ``train``, layer ``""``) and written to the run manifest.
        """
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be a non-negative integer, got {epoch!r}")
        due = self._due(
            lambda: self._initial if epoch == 0 else self.schedule.at_epoch(epoch),
            lambda s: s.at_epoch(epoch),
        )
        if not due:
            return None
        return self._measure(due, epoch, step, log=True, epoch_end=True)

    def after_iteration(self, step: int, epoch: int | None = None) -> Results | None:
        """Measure after optimiser step ``step`` when ``every_iterations`` divides it.

        ``epoch`` labels the rows (the epoch in progress). A measurement within an epoch
        never sets :attr:`zero_error_epoch`.
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be a non-negative integer, got {step!r}")
        due = self._due(lambda: self._own_at_iteration(step), lambda s: s.at_iteration(step))
        if not due:
            return None
        return self._measure(due, epoch, step, log=True, epoch_end=False)

    def _own_at_iteration(self, step: int) -> bool:
        """The Monitor's own schedule after step ``step`` (before a ``"log"`` schedule has
        its epoch budget, only ``every_iterations`` counts)."""
        if self._schedule is not None:
            return self._schedule.at_iteration(step)
        every = self._every_iterations
        return every is not None and step > 0 and step % every == 0

    def callback(self) -> Any:
        """This monitor as a callback of :func:`collapselab.train.train`."""
        from collapselab.track.callbacks import MonitorCallback

        return MonitorCallback(self)

    # ------------------------------------------------------------------ zero-error epoch
    @property
    def zero_error_epoch(self) -> int | None:
        """The first measured epoch at which every training sample is classified correctly.

        The rule is the store's one definition (:mod:`collapselab.store.zero_error`) applied
        to this monitor's epoch-end measurements, so its resolution is the schedule's; in a
        run where the monitor writes the train ``accuracy`` rows it equals
        :func:`collapselab.store.zero_error_epoch` of the run's table (measurements within
        an epoch aside: their rows count for their epoch there). The Monitor is the
        one owner of the ``zero_error_epoch`` row. After a resume it is read back from the run's own
        ``zero_error_epoch`` row (:meth:`restore`); adapters store and restore it through
        :meth:`state_dict` / :meth:`load_state_dict`.
        """
        return self._zero_error_epoch

    def restore(self) -> None:
        """Read back the zero-error epoch this monitor logged to its run (after a resume)."""
        if self._zero_error_epoch is not None or self.run is None:
            return
        rows = self.run.metrics()
        hit = rows[
            (rows["metric"] == ZERO_ERROR_METRIC)
            & (rows["split"] == "train")
            & (rows["layer"] == MODEL_LAYER)
        ]
        if not hit.empty:
            self._zero_error_epoch = int(hit["value"].min())

    def state_dict(self) -> dict[str, int]:
        """``{"zero_error_epoch": int or -1}`` (plain values, for a checkpoint)."""
        zero = self._zero_error_epoch
        return {"zero_error_epoch": -1 if zero is None else int(zero)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        zero = int(state.get("zero_error_epoch", -1))
        self._zero_error_epoch = None if zero < 0 else zero

    def _record_zero_error(self, epoch: int, step: int | None, accuracy: float) -> None:
        """The store's rule (:func:`~collapselab.store.first_zero_error`) on this epoch-end
        measurement's train accuracy: exactly 1 when every sample is classified correctly."""
        if self._zero_error_epoch is not None:
            return
        self._zero_error_epoch = first_zero_error(None, epoch, accuracy)
        if self._zero_error_epoch is None or not self._writes():
            return
        step = _default_step(epoch, step)
        self.run.log(step, ZERO_ERROR_METRIC, float(epoch), epoch, "train", MODEL_LAYER)
        self.run.record_zero_error_epoch(epoch)

    def leave_accuracy_rows(self, splits: Iterable[str]) -> None:
        """Write no model-level ``accuracy`` row for ``splits`` from now on: another writer of
        this monitor's run records that key (the training loop, for the splits it evaluates).

        A run holds one value per ``(step, split, layer, metric)``; the loop's accuracy (the
        fraction of the whole split, at every evaluated epoch) and this monitor's
        (class-weighted as its layer statistics, on its own data, at its measurements) are
        two measurements of one key, so one of them writes it. The monitor's value stays in
        :attr:`last_results` and still decides :attr:`zero_error_epoch`.
        """
        self._accuracy_elsewhere = frozenset(splits)

    def close(self) -> None:
        """Flush the run and detach (closing) the mirrors this monitor attached to it."""
        for mirror in self._mirrors:
            self.run.remove_mirror(mirror)
        self._mirrors = []

    # ------------------------------------------------------------------ output
    def _writes(self) -> bool:
        return self.run is not None and (not self._distributed() or _dist.rank() == 0)

    def _written_elsewhere(self, split: str, layer: str, metric: str) -> bool:
        """Whether another writer of the run owns this row key (:meth:`leave_accuracy_rows`)."""
        return metric == ACCURACY and layer == MODEL_LAYER and split in self._accuracy_elsewhere

    def _log(self, results: Results, epoch: int | None, step: int | None, seconds: float) -> None:
        if not self._writes():
            return
        if self._mirror_specs and not self._mirrors:
            self._mirrors = attach_mirrors(self.run, self._mirror_specs)
            self._mirror_specs = []
        step = _default_step(epoch, step)
        rows = [
            {"step": step, "epoch": epoch, "split": split, "layer": layer, "metric": k, "value": v}
            for split, per_layer in results.items()
            for layer, values in per_layer.items()
            for k, v in values.items()
            if not self._written_elsewhere(split, layer, k)
        ]
        self.run.log_many(rows)
        for name, arrays in self.last_arrays.items():
            epoch_value = -1 if epoch is None else epoch
            self.run.save_array(array_name(name, step), step=step, epoch=epoch_value, **arrays)
        self.run.add_duration("monitor_seconds", seconds)


def _check_family_schedules(families: Iterable[Family]) -> None:
    for fam in families:
        if fam.schedule is not None and not isinstance(fam.schedule, Schedule):
            raise TypeError(
                f"the {fam.name!r} family's schedule must be a collapselab.track.Schedule or "
                f"None (the Monitor's), got {type(fam.schedule).__name__}"
            )


def _scheduled(schedule: Schedule, epoch: int | None, step: int | None, epoch_end: bool) -> bool:
    """Whether ``schedule`` is due at a measurement asked for now: at the end of ``epoch``,
    or at ``step`` within an epoch; a measurement with neither is due for every family."""
    if epoch_end and epoch is not None:
        return schedule.at_epoch(epoch)
    if not epoch_end and step is not None:
        return schedule.at_step(step)
    return True


def _mirror_specs(mirrors: Sequence[Any] | str) -> list[Any]:
    """The mirrors as given, names checked now (before anything is measured)."""
    specs = [mirrors] if isinstance(mirrors, str) else list(mirrors)
    for spec in specs:
        if isinstance(spec, str):
            check_mirror_available(spec)
    return specs


def _default_step(epoch: int | None, step: int | None) -> int:
    if step is not None:
        return step
    return 0 if epoch is None else epoch


def _attr(model: nn.Module, name: str) -> Any:
    try:
        return getattr(model, name)
    except AttributeError:
        return None
