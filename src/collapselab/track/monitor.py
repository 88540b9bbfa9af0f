r"""The Monitor: scheduled, exact, per-layer measurement of a network during training.

A :class:`Monitor` measures the metric families of every requested layer of a model on a
schedule (DESIGN.md, principles 2-4). A measurement is one *sweep* per split:

1. **pass 1**: one forward pass per batch, in eval mode under ``torch.no_grad`` (or with
   autograd for gradient cosines), with forward hooks capturing every requested layer at
   once; each layer's class counts and sums (and the streaming diversity and layer-path
   accumulators) are updated from the batch, which is then dropped;
2. the class means are frozen (after an all-reduce under ``torch.distributed``);
3. **pass 2**: each layer's within-class scatter (dense ``D x D`` or projected on the span
   of the centred means), nearest-class-mean and classifier decisions
   (:class:`~collapselab.stats.ClassStats`) are accumulated from the same features again:
   the ones pass 1 kept when all of them fit in ``cache_bytes`` (1 GiB by default), else
   from a second forward pass per batch.

Beyond that cache, features are never stored beyond one batch, so the memory is that of the
statistics (``C x D`` per layer, plus ``D x D`` for dense layers). The values are those of
:func:`collapselab.measure` on the concatenated features of the whole split, whatever the
batch size. Test features are measured against the *train* class means where the
catalogue says so (``ncc_accuracy`` and ``nc4_ncc_mismatch`` of the test split).

Every value is written to the run store in long format: one row per
``(step, epoch, split, layer, metric, value)``; model-level rows have ``layer = ""``.

Metric keys, per split (``"train"``, ``"test"``) and layer:

* ``"nc"``: the catalogue keys of :func:`collapselab.measure` (``nc1``, ``nc1_trace_ratio``,
  ``nc1_cdnv``, ``nc1_snr`` when defined, ``nc2_*``, ``ncc_accuracy``, ``nc1_dense``; on
  the penultimate layer also the classifier keys ``nc2_*_classifiers``, ``nc3_*``,
  ``nc4_ncc_mismatch``, ``accuracy``); the test split omits ``nc1_dense`` and
  ``nc2_*_classifiers``, which describe the statistics or ``W`` rather than the split.
* ``"mse"`` (train, penultimate layer): ``mse_ls_loss``, ``mse_nc1_term``,
  ``mse_nc23_term``, ``mse_loss``, ``mse_ls_perp``, ``mse_ls_perp_ratio``,
  ``mse_ls_distance``.
* ``"pfc"``: ``nc1_trace_ratio``, ``nc2_etf_distance``, ``ncc_accuracy`` (PFC1-3) per
  layer; on the path layers ``pfc_position`` (relative position, note 001 §2.6) and
  ``mean_displacement`` (from the previous path layer); model level ``ot_regulariser``,
  ``straightness`` (mean path length over chord) and, train only, ``effective_depth``
  (index into the path layers of the first layer, after the first, whose sample-counted
  NCC error is at most ``effective_depth_eps``; NaN when none is).
* ``"diversity"``: ``feature_cosine_{cross_class,within_class,within_class_pooled,all}``
  and ``feature_zero_vectors``; for ReLU-type layers ``gating_cosine_*`` and
  ``gating_agreement_*`` of the gates ``z > 0`` of their input ``z``; with ``gradients``
  ``gradient_cosine_*`` (and ``preact_gradient_cosine_*`` for ReLU-type layers).
* model level, always: ``accuracy`` of ``argmax(model(x))``; once,
  ``zero_error_epoch`` (see :meth:`Monitor.after_epoch`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from collapselab.checks import (
    MODES,
    WEIGHTINGS,
    check_bool,
    check_choice,
    check_float,
    check_int,
    imbalance_message,
)
from collapselab.data.dataset import LabeledData
from collapselab.metrics.diversity import CosineSimilarityAccumulator, GatingSimilarityAccumulator
from collapselab.metrics.layerwise import LayerPathAccumulator
from collapselab.probe import (
    FeatureCapture,
    eval_mode,
    per_sample_gradients,
    resolve_layers,
)
from collapselab.probe.gradients import check_independent_rows, check_not_inplace, gated_layers
from collapselab.stats import DENSE_MAX_DIM, ClassStats
from collapselab.track import _dist
from collapselab.track._cache import FeatureCache
from collapselab.track._families import (
    FAMILIES,
    MODEL_LAYER,
    FamilyOptions,
    LayerAccumulators,
    SplitAccumulators,
    all_correct,
    split_metrics,
)
from collapselab.track.schedule import Schedule

if TYPE_CHECKING:
    from collapselab.store import Run

Results = dict[str, dict[str, dict[str, float]]]
"""``results[split][layer][metric] -> value``; model-level values under ``layer = ""``."""

LossArg = str | Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _loss_function(loss: LossArg) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Per-sample loss ``(logits, labels) -> (B,)`` for the gradient cosines."""
    if callable(loss):
        return loss
    if loss not in ("ce", "mse"):
        raise ValueError(f"loss must be 'ce', 'mse' or a callable, got {loss!r}")
    from collapselab.train.losses import per_sample_loss

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


def _unpack(batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(batch, Sequence) and len(batch) >= 2:
        x, y = batch[0], batch[1]
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            return x, y
    raise TypeError(
        "each batch must be an (inputs, labels) pair of tensors, as a TensorDataset loader "
        f"yields; got {type(batch).__name__}"
    )


def _first_param(model: nn.Module) -> torch.Tensor | None:
    for t in list(model.parameters()) + list(model.buffers()):
        if t.is_floating_point():
            return t
    return None


class Monitor:
    r"""Measure collapse, progressive collapse and diversity of every layer on a schedule.

    Args:
        model: the network. By default the layers of the collapselab convention are used
            (``model.feature_layers`` plus ``model.penultimate``; the classifier
            ``model.classifier`` gives ``W``, ``b``).
        train_loader: the training data to measure on: a ``DataLoader`` (or any
            re-iterable of ``(inputs, labels)`` batches) or a
            :class:`~collapselab.data.LabeledData`. It is iterated once per measurement
            when the features fit in ``cache_bytes``, else twice, and must then give the
            same samples both times: do not shuffle with ``drop_last`` and do not augment
            randomly.
        test_loader: optional held-out data (``split = "test"``).
        layers: layers to measure (names, glob patterns, regexes or module types; see
            :func:`collapselab.probe.resolve_layers`). Default: the convention above.
        metrics: families among ``"nc"`` (the metric catalogue: NC1-NC4, NCC and, on the
            penultimate layer, the classifier keys), ``"mse"`` (the MSE decomposition of
            note 003 on the penultimate layer; needs ``lam``), ``"pfc"`` (per-layer PFC1-3,
            plus relative positions, mean displacements, OT regulariser, straightness and
            effective depth across ``path_layers``) and ``"diversity"`` (feature cosines
            over cross-class, within-class and all pairs; ReLU gating similarity for
            ReLU-type layers; gradient cosines with ``gradients=True``). Default
            ``("nc", "pfc")``, plus ``"mse"`` when ``lam`` is given.
        schedule: ``"log"`` (paper 003's log-spaced epochs scaled to ``epochs``), ``"all"``,
            a list of epochs, or ``None`` (no epoch-end measurement).
        epochs: the training budget of ``schedule="log"``; the training adapters supply it
            when it is not given here (:meth:`set_total_epochs`).
        every_iterations: also measure every this many optimiser steps (see
            :meth:`after_iteration`).
        initial: measure the initial model as epoch 0 (:meth:`before_training`).
        run: a :class:`~collapselab.store.Run` receiving the rows (optional; the training
            adapter uses the training run when this is ``None``).
        n_classes: number of classes ``C``; default ``model.classifier.out_features``.
        lam: the paper's ``lam`` of the MSE decomposition (see
            :func:`collapselab.metrics.paper_lambda`).
        device: where to run the model and accumulate; default the model's device.
        penultimate: name of the layer whose output the classifier reads (default
            ``model.penultimate``); its rows get the classifier keys of ``"nc"`` and the
            ``"mse"`` family. To measure without ``W``, leave it out of ``layers``.
        classifier: the final ``nn.Linear`` (default ``model.classifier``), read afresh at
            every measurement.
        gradients: diversity family: also the cosines of the per-sample feature gradients
            ``dl_i/dF_i`` (and, for ReLU-type layers, of the pre-activation gradients), from
            one backward pass of the summed per-sample loss per batch in pass 1
            (:func:`collapselab.probe.per_sample_gradients`).
        loss: per-sample loss for ``gradients``: ``"ce"``, ``"mse"`` (the training loop's
            ``nn.MSELoss`` per sample) or a callable ``(logits, labels) -> (B,)``.
        batch_size: batch size when a ``LabeledData`` is given.
        weighting, mode, dense_max_dim: as for :class:`~collapselab.stats.ClassStats`:
            ``weighting="auto"`` uses the papers' class-balanced definitions for balanced
            classes and the sample-weighted ones otherwise (one warning per monitor);
            ``mode="auto"`` keeps the dense within-class covariance for
            ``D <= dense_max_dim``, else projects it.
        nc1_divide_by_c, ddof, pairs: as for :func:`collapselab.measure`.
        path_layers: the ordered layers of the ``"pfc"`` path. ``"auto"``: all measured
            layers if they share one flattened dimension, else the last run of consecutive
            measured layers with a common dimension (at least two; for
            :class:`~collapselab.models.ConvResNet` the last stage, which note 001
            measures). Relative positions need one dimension: a list with differing
            dimensions raises ``ValueError``. ``None``: no path metrics.
        effective_depth_eps: the NCC training error tolerated by the effective depth.
        zero_vectors: zero-vector rule of the cosine metrics (see
            :mod:`collapselab.metrics.diversity`).
        distributed: ``"auto"``: under an initialised ``torch.distributed`` group, sum the
            statistics of all processes before computing metrics (each process iterating
            its own shard of the data, e.g. with a ``DistributedSampler`` that does not pad);
            only rank 0 writes to ``run``. ``False``: never reduce.
        chunk_bytes: on CPU, the statistics of each batch are accumulated in row blocks
            of about this many bytes of float64 features (4 MiB: cache-sized blocks;
            ``0``: whole batches). It changes only the summation order.
        cache_bytes: pass 1 keeps the features of every measured layer for pass 2 while
            they total at most this many bytes (in the layers' dtype, on their device;
            default 1 GiB), which saves the second forward pass; beyond it pass 2 runs the
            model again. The values are the same either way. Layer outputs are kept without
            a copy; one that is modified in place after its layer ran (e.g. by
            ``nn.ReLU(inplace=True)``) is detected, that sweep runs the model again, and
            later sweeps keep copies. ``0``: always run the model twice.

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
        train_loader: Any,
        test_loader: Any = None,
        *,
        layers: Any = None,
        metrics: Sequence[str] | None = None,
        schedule: Iterable[int] | str | None = "log",
        epochs: int | None = None,
        every_iterations: int | None = None,
        initial: bool = True,
        run: Run | None = None,
        n_classes: int | None = None,
        lam: float | None = None,
        device: torch.device | str | None = None,
        penultimate: str | None = None,
        classifier: nn.Linear | None = None,
        gradients: bool = False,
        loss: LossArg = "ce",
        batch_size: int = 512,
        weighting: str = "auto",
        mode: str = "auto",
        dense_max_dim: int = DENSE_MAX_DIM,
        nc1_divide_by_c: bool = True,
        ddof: int = 1,
        pairs: str = "unordered",
        path_layers: Sequence[str] | str | None = "auto",
        effective_depth_eps: float = 0.01,
        zero_vectors: str = "exclude",
        distributed: bool | str = "auto",
        chunk_bytes: int = 4 << 20,
        cache_bytes: int = 1 << 30,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.train_loader = _as_loader(train_loader, "train_loader", batch_size)
        if self.train_loader is None:
            raise ValueError("train_loader is required")
        self.test_loader = _as_loader(test_loader, "test_loader", batch_size)
        self._every_iterations = every_iterations
        self._initial = bool(initial)
        self._schedule: Schedule | None = None
        # Validates every argument now; 'log' without a budget waits for set_total_epochs.
        pending = isinstance(schedule, str) and schedule == "log" and epochs is None
        built = Schedule.build(
            None if pending else schedule,
            total_epochs=epochs,
            every_iterations=every_iterations,
            initial=initial,
        )
        self._schedule = None if pending else built
        self.run = run
        self.penultimate = penultimate if penultimate is not None else _attr(model, "penultimate")
        self.classifier = classifier if classifier is not None else _attr(model, "classifier")
        if self.classifier is not None and not isinstance(self.classifier, nn.Linear):
            raise TypeError(
                f"classifier must be an nn.Linear, got {type(self.classifier).__name__}"
            )
        if layers is None:
            if _attr(model, "feature_layers") is None:
                raise ValueError(
                    f"{type(model).__name__} has no feature_layers; pass layers= (names, "
                    "patterns or module types of the layers to measure)"
                )
            layers = list(model.feature_layers)
            if self.penultimate is not None and self.penultimate not in layers:
                layers.append(self.penultimate)
        self.layers = resolve_layers(model, layers)
        self.n_classes = self._n_classes(n_classes)
        self.lam = None if lam is None else check_float("lam", lam, minimum=0.0)
        self.families = self._families(metrics, self.lam)
        self.options = FamilyOptions(
            families=self.families,
            nc1_divide_by_c=check_bool("nc1_divide_by_c", nc1_divide_by_c),
            ddof=check_int("ddof", ddof, minimum=0),
            pairs=check_choice("pairs", pairs, ("unordered", "ordered")),
            lam=self.lam,
            zero_vectors=check_choice("zero_vectors", zero_vectors, ("exclude", "zero_cosine")),
            effective_depth_eps=check_float(
                "effective_depth_eps", effective_depth_eps, minimum=0.0
            ),
        )
        self.weighting = check_choice("weighting", weighting, WEIGHTINGS)
        self.mode = check_choice("mode", mode, MODES)
        self.dense_max_dim = check_int("dense_max_dim", dense_max_dim, minimum=1)
        self.gradients = check_bool("gradients", gradients)
        if self.gradients and "diversity" not in self.families:
            raise ValueError("gradients=True computes gradient cosines of the 'diversity' family")
        self.loss_fn = _loss_function(loss)
        self.gated = gated_layers(model, self.layers) if "diversity" in self.families else []
        check_not_inplace(model, self.gated)
        self.device = torch.device(device) if device is not None else None
        self.path_spec = path_layers
        self.distributed = distributed
        if distributed not in ("auto", False):
            raise ValueError(f"distributed must be 'auto' or False, got {distributed!r}")
        self.chunk_bytes = check_int("chunk_bytes", chunk_bytes, minimum=0)
        self.cache_bytes = check_int("cache_bytes", cache_bytes, minimum=0)
        self._cache_copies = False  # set once a kept output was seen modified in place
        self._warned_imbalance = False
        self.zero_error_epoch: int | None = None
        self.dims: dict[str, int] | None = None
        self.path_layers: list[str] = []
        self.last_results: Results | None = None
        self.n_measurements = 0

    # ------------------------------------------------------------------ schedule
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
    def _n_classes(self, n_classes: int | None) -> int:
        if n_classes is not None:
            return check_int("n_classes", n_classes, minimum=2)
        if self.classifier is not None:
            return check_int("classifier.out_features", self.classifier.out_features, minimum=2)
        raise ValueError("n_classes is required when the model has no classifier attribute")

    @staticmethod
    def _families(metrics: Sequence[str] | None, lam: float | None) -> frozenset[str]:
        if metrics is None:
            chosen = {"nc", "pfc"} | ({"mse"} if lam is not None else set())
        else:
            if isinstance(metrics, str):
                metrics = [metrics]
            chosen = set(metrics)
            unknown = chosen - set(FAMILIES)
            if unknown or not chosen:
                raise ValueError(
                    f"metrics must be a non-empty subset of {FAMILIES}, got {list(metrics)}"
                )
        if "mse" in chosen and lam is None:
            raise ValueError("the 'mse' family needs lam (the paper's lambda; see paper_lambda)")
        return frozenset(chosen)

    def _resolve_device(self) -> torch.device:
        if self.device is not None:
            return self.device
        first = _first_param(self.model)
        return first.device if first is not None else torch.device("cpu")

    def _batch(self, batch: Any, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = _unpack(batch)
        first = _first_param(self.model)
        dtype = first.dtype if first is not None and x.is_floating_point() else None
        x = x.to(device=device, dtype=dtype) if dtype is not None else x.to(device)
        return x, y.to(device=device, dtype=torch.int64)

    def _on_first_batch(self, feats: dict[str, torch.Tensor]) -> None:
        """Check dimensions against the classifier and choose the path layers, once."""
        if self.dims is not None:
            return
        dims = {n: int(feats[n].shape[1]) for n in self.layers}
        pen = self.penultimate if self.penultimate in dims else None
        if pen is not None and self.classifier is not None:
            w = self.classifier.weight
            if tuple(w.shape) != (self.n_classes, dims[pen]):
                raise ValueError(
                    f"classifier weight has shape {tuple(w.shape)} but the penultimate layer "
                    f"{pen!r} has dimension {dims[pen]} and there are {self.n_classes} "
                    "classes; expected (n_classes, dim): check penultimate= and classifier="
                )
        if "mse" in self.families:
            if pen is None or self.classifier is None:
                raise ValueError(
                    "the 'mse' family needs the penultimate layer among the measured layers "
                    "and the classifier"
                )
            if self.mode == "projected" or (self.mode == "auto" and dims[pen] > self.dense_max_dim):
                raise ValueError(
                    f"the 'mse' family needs the dense within-class covariance of layer {pen!r} "
                    f"(D = {dims[pen]}); raise dense_max_dim or pass mode='dense'"
                )
        self.path_layers = self._choose_path(dims)
        self.dims = dims

    def _choose_path(self, dims: dict[str, int]) -> list[str]:
        spec = self.path_spec
        if "pfc" not in self.families or spec is None:
            return []
        if spec == "auto":
            runs: list[list[str]] = []
            for name in self.layers:
                if runs and dims[runs[-1][-1]] == dims[name]:
                    runs[-1].append(name)
                else:
                    runs.append([name])
            long_runs = [r for r in runs if len(r) >= 2]
            if not long_runs:
                warnings.warn(
                    "collapselab.track: no two consecutive measured layers share a dimension; "
                    "the layer-path metrics (positions, effective depth) are skipped",
                    UserWarning,
                    stacklevel=6,
                )
                return []
            return long_runs[-1]
        if isinstance(spec, str):
            spec = [spec]
        names = list(spec)
        missing = [n for n in names if n not in dims]
        if missing:
            raise ValueError(f"path_layers {missing} are not among the measured layers")
        if len(names) < 2:
            raise ValueError("path_layers needs at least two layers")
        if len({dims[n] for n in names}) > 1:
            raise ValueError(
                "path_layers must share one feature dimension (relative positions sum "
                f"||h^(l+1) - h^l||); got { {n: dims[n] for n in names} }"
            )
        return names

    # ------------------------------------------------------------------ accumulation
    def _new_split(self, device: torch.device) -> SplitAccumulators:
        c = self.n_classes
        diversity = "diversity" in self.families
        layers = {}
        for name in self.layers:
            stats = ClassStats(
                c,
                weighting=self.weighting,
                mode=self.mode,
                dense_max_dim=self.dense_max_dim,
                warn_imbalanced=False,  # one warning per monitor, see _warn_imbalanced
            )
            acc = LayerAccumulators(stats)
            if diversity:
                acc.cosine = CosineSimilarityAccumulator(c)
                if name in self.gated:
                    acc.gating = GatingSimilarityAccumulator(c)
                if self.gradients:
                    acc.gradient = CosineSimilarityAccumulator(c)
                    if name in self.gated:
                        acc.preact_gradient = CosineSimilarityAccumulator(c)
            layers[name] = acc
        return SplitAccumulators(
            layers=layers, confusion=torch.zeros(c, c, dtype=torch.int64, device=device)
        )

    def _pass_one(
        self, loader: Any, split: SplitAccumulators, device: torch.device
    ) -> FeatureCache:
        cache = FeatureCache(self.cache_bytes, copy=self._cache_copies)
        if self.gradients:
            for batch in loader:
                x, y = self._batch(batch, device)
                cache.start_batch(y)
                g = per_sample_gradients(
                    self.model,
                    x,
                    y,
                    self.layers,
                    loss_fn=self.loss_fn,
                    preactivations=bool(self.gated),
                    mode="current",
                )
                self._check_logits(g.logits, x.shape[0])
                self._on_first_batch(g.features)
                for name, acc in split.layers.items():
                    self._add_means(acc, g.features[name], y)
                    cache.add(name, g.features[name])
                    acc.gradient.update(g.gradients[name], y)
                    if acc.preact_gradient is not None:
                        acc.preact_gradient.update(g.preact_gradients[name], y)
                cache.end_batch()
                self._add_batch(split, g.features, g.gates, g.logits, y)
            return cache
        # Streaming: each layer's statistics are updated from inside its forward hook, while
        # its output is still in cache; only the features the layer-path metrics need
        # (all of them on the very first batch, to learn the dimensions) are kept.
        batch_state: dict[str, Any] = {}

        def features_sink(name: str, kind: str, h: torch.Tensor) -> None:
            if name in batch_state["seen"]:
                raise RuntimeError(
                    f"layer {name!r} was called twice in one forward pass; its features are "
                    "ambiguous (measure a module that runs once per pass)"
                )
            batch_state["seen"].add(name)
            if self.dims is None or name in self.path_layers:
                batch_state["kept"][name] = h
            self._add_means(split.layers[name], h, batch_state["y"])
            cache.add(name, h)

        def gates_sink(name: str, kind: str, z: torch.Tensor) -> None:
            batch_state["gates"][name] = z > 0

        caps = [FeatureCapture(self.model, self.layers, "output", sink=features_sink)]
        if self.gated:
            caps.append(FeatureCapture(self.model, self.gated, "input", sink=gates_sink))
        try:
            for batch in loader:
                x, y = self._batch(batch, device)
                batch_state.update(y=y, seen=set(), kept={}, gates={})
                cache.start_batch(y)
                with torch.no_grad():
                    logits = self.model(x)
                cache.end_batch()
                self._check_logits(logits, x.shape[0])
                missing = [n for n in self.layers if n not in batch_state["seen"]]
                if missing:
                    raise ValueError(f"layers {missing} were not called by the forward pass")
                self._on_first_batch(batch_state["kept"])
                self._add_batch(split, batch_state["kept"], batch_state["gates"], logits, y)
        finally:
            for cap in caps:
                cap.close()
        return cache

    def _check_logits(self, logits: Any, n: int) -> None:
        if not isinstance(logits, torch.Tensor) or tuple(logits.shape) != (n, self.n_classes):
            shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits)
            raise ValueError(
                f"the model must return logits of shape ({n}, {self.n_classes}), got {shape}"
            )

    def _add_means(self, acc: LayerAccumulators, h: torch.Tensor, y: torch.Tensor) -> None:
        """Pass-1 statistics of one layer's batch features ``h``."""
        for block, labels in self._chunks(h, y):
            acc.stats.update_means(block, labels)
            if acc.cosine is not None:
                acc.cosine.update(block, labels)

    def _add_batch(
        self,
        split: SplitAccumulators,
        feats: dict[str, torch.Tensor],
        gates: dict[str, torch.Tensor],
        logits: torch.Tensor,
        y: torch.Tensor,
    ) -> None:
        """Pass-1 statistics that need several layers or the outputs of one batch."""
        for name, acc in split.layers.items():
            if acc.gating is not None:
                acc.gating.update(gates[name], y)
        if self.path_layers:
            if split.path is None:
                split.path = LayerPathAccumulator()
            split.path.update([feats[n] for n in self.path_layers])
        c = self.n_classes
        pred = logits.argmax(dim=1)
        split.confusion += torch.bincount(y * c + pred, minlength=c * c).view(c, c)

    def _pass_two(
        self, loader: Any, split: SplitAccumulators, device: torch.device, cache: FeatureCache
    ) -> None:
        if cache.active:
            for feats, y in cache.batches:
                for name, h in feats.items():
                    self._add_scatter(split.layers[name], h, y)
            return
        labels: dict[str, torch.Tensor] = {}

        def sink(name: str, kind: str, h: torch.Tensor) -> None:
            self._add_scatter(split.layers[name], h, labels["y"])

        with FeatureCapture(self.model, self.layers, "output", sink=sink), torch.no_grad():
            for batch in loader:
                x, labels["y"] = self._batch(batch, device)
                self.model(x)

    def _add_scatter(self, acc: LayerAccumulators, h: torch.Tensor, y: torch.Tensor) -> None:
        """Pass-2 statistics of one layer's batch features ``h``."""
        for block, labels in self._chunks(h, y):
            acc.stats.update_scatter(block, labels)

    def _chunks(self, features: torch.Tensor, y: torch.Tensor):
        """``(rows in float64, labels)`` blocks of about ``chunk_bytes`` each.

        On CPU the statistics of a batch are accumulated block by block, so that the
        float64 copy and every temporary of the update stay in cache: for a (256, 16384)
        feature batch this makes the update several times faster than one call on the
        whole batch (see benchmarks/README.md). On other devices the batch is one block.
        Every accumulator is a plain sum over rows, so the blocks change nothing but the
        summation order.
        """
        n, d = features.shape
        if features.device.type == "cpu" and self.chunk_bytes:
            rows = max(1, self.chunk_bytes // (8 * d))
        else:
            rows = n
        for start in range(0, n, rows):
            stop = start + rows
            yield features[start:stop].to(torch.float64), y[start:stop]

    def _finalize(self, split: SplitAccumulators, train: SplitAccumulators | None) -> None:
        for name, acc in split.layers.items():
            kwargs: dict[str, Any] = {}
            if name == self.penultimate and self.classifier is not None:
                kwargs["W"] = self.classifier.weight.detach()
                if self.classifier.bias is not None:
                    kwargs["b"] = self.classifier.bias.detach()
            if train is not None:
                kwargs["ncc_means"] = train.layers[name].stats.means
            acc.stats.finalize_means(**kwargs)

    def _reduce(self, split: SplitAccumulators, first_pass: bool) -> None:
        if not self._distributed():
            return
        for acc in split.layers.values():
            acc.stats.all_reduce()
            if not first_pass:
                continue
            for cos in (acc.cosine, acc.gradient, acc.preact_gradient):
                if cos is not None:
                    _dist.all_reduce_cosine(cos)
            if acc.gating is not None:
                _dist.all_reduce_gating(acc.gating)
        if first_pass:
            _dist.all_reduce_tensor(split.confusion)
            if self.path_layers:
                _dist.all_reduce_path(split.path)

    def _distributed(self) -> bool:
        return self.distributed == "auto" and _dist.distributed_active()

    def _sweep(self, loader: Any, train: SplitAccumulators | None, device: torch.device):
        split = self._new_split(device)
        cache = self._pass_one(loader, split, device)
        if self.dims is None:
            raise ValueError("the data loader yielded no batch; nothing to measure")
        self._cache_copies = self._cache_copies or cache.overwritten
        # Every process must take the same pass 2: a wrapped model's forward may run
        # collectives (DDP's buffer broadcast).
        if self._distributed() and not _dist.all_agree(cache.active, device):
            cache.drop()
        self._reduce(split, first_pass=True)
        self._finalize(split, train)
        self._pass_two(loader, split, device, cache)
        self._reduce(split, first_pass=False)
        return split

    # ------------------------------------------------------------------ public API
    def measure_now(
        self,
        epoch: int | None = None,
        step: int | None = None,
        *,
        log: bool = True,
        epoch_end: bool = True,
    ) -> Results:
        """Measure now, whatever the schedule; returns ``results[split][layer][metric]``.

        Runs the sweep of every split (train, then test against the train means) in eval
        mode (every submodule's train/eval flag is restored afterwards) and computes every
        requested family for every layer. With ``log`` and a run, writes one row per value
        at ``(step, epoch)``; ``step`` defaults to ``epoch`` (0 when both are ``None``).
        With ``epoch_end`` (a measurement at the end of ``epoch``, not within it), updates
        :attr:`zero_error_epoch` when the model classifies every training sample correctly
        for the first time (see :meth:`after_epoch`).
        """
        t0 = time.perf_counter()
        device = self._resolve_device()
        with eval_mode(self.model):
            if self.gradients:
                check_independent_rows(self.model, allow_batch_coupling=False)
            train = self._sweep(self.train_loader, None, device)
            splits = {"train": train}
            if self.test_loader is not None:
                splits["test"] = self._sweep(self.test_loader, train, device)
        self._warn_imbalanced(splits)
        classifier = None
        if self.classifier is not None:
            bias = self.classifier.bias
            classifier = (
                self.classifier.weight.detach(),
                None if bias is None else bias.detach(),
            )
        results: Results = {}
        for name, acc in splits.items():
            results[name] = split_metrics(
                name,
                acc,
                self.options,
                penultimate=self.penultimate if self.penultimate in self.layers else None,
                classifier=classifier,
                path_layers=self.path_layers,
            )
        self.n_measurements += 1
        self.last_results = results
        if log:
            self._log(results, epoch, step, time.perf_counter() - t0)
        first_zero = self.zero_error_epoch is None and all_correct(train)
        if epoch_end and epoch is not None and first_zero:
            self._record_zero_error(epoch, step)
        return results

    def _warn_imbalanced(self, splits: dict[str, SplitAccumulators]) -> None:
        """One warning per monitor (not per layer and measurement) for imbalanced classes."""
        if self._warned_imbalance:
            return
        counts = {name: next(iter(s.layers.values())).stats.counts for name, s in splits.items()}
        message = imbalance_message(counts, self.weighting)
        if message is not None:
            self._warned_imbalance = True
            warnings.warn(f"collapselab.track: {message}", UserWarning, stacklevel=3)

    def before_training(self, step: int = 0) -> Results | None:
        """Measure the initial model as epoch 0, if the schedule asks for it."""
        return self.after_epoch(0, step=step)

    def after_epoch(self, epoch: int, step: int | None = None) -> Results | None:
        """Measure at the end of ``epoch`` (counted from 1) if it is scheduled.

        Returns the results, or ``None`` when the epoch is not scheduled. The first
        measured epoch at which ``argmax(model(x))`` equals the label for every training
        sample (in eval mode; the terminal phase of training starts there) is stored in
        :attr:`zero_error_epoch`, logged as the metric ``zero_error_epoch`` (split
        ``train``, layer ``""``) and written to the run manifest.
        """
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be a non-negative integer, got {epoch!r}")
        due = self._initial if epoch == 0 else self.schedule.at_epoch(epoch)
        if not due:
            return None
        return self.measure_now(epoch=epoch, step=step)

    def after_iteration(self, step: int, epoch: int | None = None) -> Results | None:
        """Measure after optimiser step ``step`` when ``every_iterations`` divides it.

        ``epoch`` labels the rows (the epoch in progress). A measurement within an epoch
        never sets :attr:`zero_error_epoch`.
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be a non-negative integer, got {step!r}")
        every = self._every_iterations
        if every is None or step == 0 or step % every:
            return None
        return self.measure_now(epoch=epoch, step=step, epoch_end=False)

    def callback(self) -> Any:
        """This monitor as a callback of :func:`collapselab.train.train`."""
        from collapselab.track.callbacks import MonitorCallback

        return MonitorCallback(self)

    # ------------------------------------------------------------------ output
    def _writes(self) -> bool:
        return self.run is not None and (not self._distributed() or _dist.rank() == 0)

    def _log(self, results: Results, epoch: int | None, step: int | None, seconds: float) -> None:
        if not self._writes():
            return
        step = _default_step(epoch, step)
        rows = [
            {"step": step, "epoch": epoch, "split": split, "layer": layer, "metric": k, "value": v}
            for split, per_layer in results.items()
            for layer, values in per_layer.items()
            for k, v in values.items()
        ]
        self.run.log_many(rows)
        self.run.add_duration("monitor_seconds", seconds)

    def _record_zero_error(self, epoch: int, step: int | None) -> None:
        self.zero_error_epoch = epoch
        if not self._writes():
            return
        step = _default_step(epoch, step)
        self.run.log(step, "zero_error_epoch", float(epoch), epoch, "train", MODEL_LAYER)
        self.run.record_zero_error_epoch(epoch)


def _default_step(epoch: int | None, step: int | None) -> int:
    if step is not None:
        return step
    return 0 if epoch is None else epoch


def _attr(model: nn.Module, name: str) -> Any:
    try:
        return getattr(model, name)
    except AttributeError:
        return None
