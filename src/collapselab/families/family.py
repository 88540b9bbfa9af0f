r"""Metric families as objects: what a family computes, what it needs, and how it plugs in.

A **family** (NC, MSE, PFC, feature diversity, ...) is a :class:`Family` object. It declares

* its **keys**, the stable catalogue names it defines (:class:`Key`: name, formula, source,
  where it applies, which splits), and
* for any subset of them, what computing them **needs** from a pass over the data
  (:class:`Needs`): the shared class statistics (:class:`~collapselab.stats.ClassStats`,
  one pass for the class means, two for the within-class scatter and the decisions) at the
  level the keys require, per-sample signals its own accumulators read (features, ReLU
  gates, per-sample feature or pre-activation gradients), or a procedure on the model
  itself (Hessian-vector products).

The engine (:mod:`collapselab.families.collection`, used by :func:`collapselab.measure` and
by :class:`collapselab.track.Monitor` alike) takes the union of the needs of every requested
key, collects exactly that in one data pass, and hands each family its statistics to compute
its values. The registry of families (:mod:`collapselab.families.catalogue`) is the metric
catalogue. A family written outside the package plugs in the same way: subclass
:class:`Family`, declare ``name`` and ``keys``, implement :meth:`Family.compute_layer`
(and, if it keeps accumulators of its own, :meth:`Family.accumulators` and
:meth:`Family.update`), and register it with
:func:`collapselab.families.catalogue.register_family` (docs/catalogue.md has a complete
example).

A family also declares **when** it is measured and **how it runs under**
``torch.distributed``: its ``schedule`` (a :class:`collapselab.track.Schedule`, or ``None``
for the Monitor's own; the Monitor measures at each event exactly the families due then,
in one pass over the data collecting only what they need) and its distributed mode
(:attr:`Family.distributed`, one of
:data:`~collapselab.families.processes.DISTRIBUTED_MODES`, which the Monitor enforces).

Layers: the engine measures named layers (``""`` for the one feature matrix of
:func:`~collapselab.measure`); model-level values (one per split) use the layer name ``""``
in the Monitor's results (:data:`MODEL_LAYER`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from collapselab.checks import check_choice
from collapselab.families.processes import Processes
from collapselab.stats import Accumulator, ClassStats
from collapselab.stats.scratch import as_float64

MODEL_LAYER = ""
"""The ``layer`` value of model-level rows (the outputs' accuracy, layer-path summaries)."""

SIGNALS = ("features", "gates", "feature_gradients", "preactivation_gradients")
"""Per-sample signals of a layer that a family's accumulators can read in pass 1:
the layer's flattened output, the ReLU gates ``z > 0`` of a ReLU-type layer's input ``z``,
the per-sample gradients of the loss with respect to the output, and, for a ReLU-type layer,
with respect to its input (the pre-activation)."""

SCATTER_LEVELS = ("none", "means", "projected", "auto", "dense")
"""How much of :class:`~collapselab.stats.ClassStats` a key needs, in increasing cost:
nothing; the class counts and means (pass 1 only); the within-class scatter on the span of
the centred means with the decisions of pass 2 (exact for NC1 and every trace); the dense
``D x D`` within-class covariance where the dimension allows it (``D <= dense_max_dim``;
the key is left out otherwise); the dense covariance, required."""

WHERE = ("layer", "penultimate", "gated", "path", "model", "weights")
"""Where a key takes values: every measured layer; the layer the classifier reads; ReLU-type
layers; the ordered layers of a layer path; once per split (layer ``""``); the weight layers
a model procedure measures (its rows name the parameter's module, e.g. ``"classifier"``)."""


@dataclass(frozen=True)
class Needs:
    """What computing a set of keys needs from a pass over the data.

    Attributes:
        scatter: one of :data:`SCATTER_LEVELS`: the level of the shared class statistics.
        ncc: nearest-class-mean decisions in pass 2 (needs ``scatter`` of ``"projected"``
            or more).
        classifier: the classifier's decisions ``argmax(W h + b)`` in pass 2 of the layer it
            reads (likewise).
        signals: per-sample signals (:data:`SIGNALS`) the family's own accumulators read.
        model: a procedure on the model itself after the data pass (Hessian-vector products,
            weights): the Monitor hands such a family the model, the loss and the data.
        linear_factors: that procedure reads the per-sample rank-1 factors ``(a_x, g_x)``
            of every ``nn.Linear``'s weight gradient on the train split
            (:func:`collapselab.probe.linear_factors`); a data pass that takes per-sample
            gradients anyway captures them in its own backward pass and hands them over
            (:attr:`ModelAccess.factors`), which saves the procedure a forward and backward
            pass. Implies ``model``.
    """

    scatter: str = "none"
    ncc: bool = False
    classifier: bool = False
    signals: frozenset[str] = frozenset()
    model: bool = False
    linear_factors: bool = False

    def __post_init__(self) -> None:
        check_choice("scatter", self.scatter, SCATTER_LEVELS)
        unknown = set(self.signals) - set(SIGNALS)
        if unknown:
            raise ValueError(f"signals must be among {SIGNALS}, got {sorted(unknown)}")
        if (self.ncc or self.classifier) and _level(self.scatter) < _level("projected"):
            raise ValueError("decisions are counted in pass 2: they need scatter='projected'")
        object.__setattr__(self, "signals", frozenset(self.signals))
        if self.linear_factors:
            object.__setattr__(self, "model", True)

    def __or__(self, other: Needs) -> Needs:
        """The needs of both: the higher scatter level, every decision, signal and procedure."""
        return Needs(
            scatter=max(self.scatter, other.scatter, key=_level),
            ncc=self.ncc or other.ncc,
            classifier=self.classifier or other.classifier,
            signals=self.signals | other.signals,
            model=self.model or other.model,
            linear_factors=self.linear_factors or other.linear_factors,
        )

    def describe(self) -> str:
        """A short reading, e.g. ``"projected scatter, NCC decisions (2 passes)"``."""
        parts = {
            "means": ["class means"],
            "projected": ["projected scatter"],
            "auto": ["dense scatter where D <= dense_max_dim"],
            "dense": ["dense scatter"],
        }.get(self.scatter, [])
        if self.ncc:
            parts.append("NCC decisions")
        if self.classifier:
            parts.append("classifier decisions")
        parts += sorted(s.replace("_", " ") for s in self.signals)
        if self.model:
            parts.append("the model itself")
        if self.linear_factors:
            parts.append("per-sample weight-gradient factors")
        passes = self.passes
        suffix = f" ({passes} pass{'es' if passes > 1 else ''})" if passes else ""
        return (", ".join(parts) or "nothing") + suffix

    @property
    def passes(self) -> int:
        """Passes over the data: 2 with a within-class scatter, 1 for means or signals only."""
        if _level(self.scatter) >= _level("projected"):
            return 2
        return 1 if self.scatter == "means" or self.signals else 0


def _level(scatter: str) -> int:
    return SCATTER_LEVELS.index(scatter)


def union(needs: Iterable[Needs]) -> Needs:
    """The union of several needs (:meth:`Needs.__or__`)."""
    out = Needs()
    for n in needs:
        out = out | n
    return out


@dataclass(frozen=True)
class Key:
    """One catalogue entry: a stable metric name and what it means.

    Attributes:
        name: the stable snake_case key.
        definition: the formula, in one line.
        source: the paper and equation (or reference) it implements.
        needs: what computing it needs (:class:`Needs`).
        where: one of :data:`WHERE`.
        splits: the splits it is reported for (keys that describe the classifier or the
            statistics rather than the data, e.g. ``nc1_dense``, are train-only).
        scale_invariant: the value does not change when the features are multiplied by a
            positive number. The engine may then compute it from class statistics of
            features rescaled by a power of two (exactly), which keeps squares and sums
            within float64's range for features of any finite magnitude; a family's other
            keys see the statistics in the features' own scale.
    """

    name: str
    definition: str
    source: str
    needs: Needs = field(default_factory=Needs)
    where: str = "layer"
    splits: tuple[str, ...] = ("train", "test")
    scale_invariant: bool = False

    def __post_init__(self) -> None:
        check_choice("where", self.where, WHERE)


@dataclass(frozen=True)
class Layout:
    """The measured layers of a model (or the one matrix of :func:`~collapselab.measure`).

    Attributes:
        layers: names in forward order.
        dims: flattened feature dimension of each layer.
        penultimate: the layer the classifier reads, if it is measured.
        gated: ReLU-type layers (whose input gives the gates).
        n_classes: number of classes ``C``.
    """

    layers: tuple[str, ...]
    dims: Mapping[str, int]
    penultimate: str | None
    gated: tuple[str, ...] = ()
    n_classes: int = 2


@dataclass(frozen=True)
class LayerView:
    """What one layer of one split offers to :meth:`Family.compute_layer`.

    Attributes:
        name: the layer (``""`` for :func:`~collapselab.measure`'s one matrix).
        split: ``"train"`` or ``"test"``.
        stats: its class statistics (both passes, or pass 1 only for the ``"means"`` level),
            or ``None`` when no requested key needs them.
        classifier: ``(W (C, D), b (C,) or None)`` when this layer is the one the classifier
            reads, else ``None``.
    """

    name: str
    split: str
    stats: ClassStats | None
    classifier: tuple[torch.Tensor, torch.Tensor | None] | None


@dataclass(frozen=True)
class SplitView:
    """One split for :meth:`Family.compute_split`: every layer, in order, and the layout."""

    name: str
    layers: Mapping[str, LayerView]
    layout: Layout


Values = dict[str, float]


@dataclass(frozen=True)
class ModelAccess:
    """What a family with ``Needs(model=True)`` gets after the data pass: the model itself.

    Attributes:
        model: the network, in eval mode while the family runs.
        loss: per-sample loss ``(logits, labels) -> (B,)``.
        data: the data loaders by split (``"train"``, and ``"test"`` when given).
        modules: the measured layers by name.
        layout: the measured layers' :class:`Layout`.
        device: where the model runs.
        loss_name: the Monitor's loss when given by name (``"ce"``, ``"mse"``), else ``None``.
        epoch: the epoch of the measurement (``None`` when not given).
        step: the step of the measurement (``None`` when not given).
        factors: when a requested key declares ``Needs(linear_factors=True)`` and the data pass
            took per-sample gradients: the train split's factors, one
            :class:`collapselab.probe.LinearFactors` per batch in the loader's order, with
            ``inputs`` and ``pre_grads`` of every ``nn.Linear`` of the model (``outputs``
            empty); the same values :func:`~collapselab.probe.linear_factors` gives on each
            batch. ``None`` otherwise, or when they exceed the Monitor's ``cache_bytes``:
            the family then runs its own pass.
        processes: the processes measuring together
            (:class:`~collapselab.families.processes.Processes`; one by default). Under
            ``torch.distributed``, ``data`` is this process's shard, and a procedure
            combines the processes' parts as its distributed mode says (sums with
            :meth:`~collapselab.families.processes.Processes.sum`, samples in the
            :func:`~collapselab.families.processes.global_order`).
    """

    model: torch.nn.Module
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    data: Mapping[str, Any]
    modules: Mapping[str, torch.nn.Module]
    layout: Layout
    device: torch.device
    loss_name: str | None = None
    epoch: int | None = None
    step: int | None = None
    factors: Sequence[Any] | None = None
    processes: Processes = field(default_factory=Processes)


class Family:
    """A metric family: its catalogue keys, their needs, and their computation.

    Subclasses set the class attributes :attr:`name` and :attr:`keys`, take their options
    (conventions such as ``ddof``) in ``__init__`` and implement :meth:`compute_layer`
    and/or :meth:`compute_split`. A family that keeps accumulators of its own (streaming
    sums of a per-sample signal) returns them from :meth:`accumulators` and feeds them in
    :meth:`update` (one layer's signal), :meth:`update_signal` (one signal of several
    layers at once, when the data pass has them together) or :meth:`update_layers` (the kept
    layers of one batch at once). Every accumulator is reduced over processes by the
    engine. :meth:`compute_layers` may compute several layers' values together.

    Args:
        keys: the keys to compute (a subset of this family's keys, or keys of another
            family that this family requests, such as PFC's per-layer NC keys); default
            :meth:`default_keys`. An empty list computes only what other families or an
            explicit ``keys=`` request ask of this one, with this object's options.
        schedule: when a Monitor measures this family: a
            :class:`collapselab.track.Schedule` (its epochs, iterations and initial
            model), or ``None`` (the default) for the Monitor's own schedule. The Monitor
            measures at every event where its own schedule or some family's is due, and
            there only the families due (docs/monitoring.md, "Schedules").

    Class attribute :attr:`distributed`: the family's distributed mode (one of
    :data:`~collapselab.families.processes.DISTRIBUTED_MODES`, see
    :mod:`collapselab.families.processes`), or ``None`` for the default
    (:meth:`distributed_mode`).

    A family object belongs to one engine (a Monitor copies the families it is given):
    :meth:`setup` may record layout-dependent choices on it.
    """

    name: ClassVar[str] = ""
    keys: ClassVar[tuple[Key, ...]] = ()
    distributed: ClassVar[str | None] = None

    def __init__(self, keys: Sequence[str] | None = None, *, schedule: Any = None) -> None:
        self.requested = self._requested(keys)
        # A collapselab.track.Schedule (the Monitor checks it): the track layer owns the
        # vocabulary of schedules, the family only carries its own.
        self.schedule = schedule

    # ------------------------------------------------------------------ declaration
    def default_keys(self) -> tuple[str, ...]:
        """The keys computed when the family is asked for as a whole (default: all own)."""
        return tuple(k.name for k in self.keys)

    def own_keys(self) -> tuple[str, ...]:
        """The names of the keys this family defines."""
        return tuple(k.name for k in self.keys)

    def key(self, name: str) -> Key:
        """The :class:`Key` of one of this family's keys."""
        for k in self.keys:
            if k.name == name:
                return k
        raise KeyError(name)

    def distributed_mode(self, keys: Iterable[str] | None = None) -> str:
        """The distributed mode when computing ``keys`` (default: the requested ones): the
        declared :attr:`distributed`, else ``"reduced"`` when none of them runs a procedure
        on the model (their values come from accumulators, which the engine reduces) and
        ``"refuse"`` when one does (the engine cannot know how its parts combine)."""
        if self.distributed is not None:
            return self.distributed
        keys = self.requested if keys is None else keys
        own = set(self.own_keys())
        return "refuse" if any(self.key(k).needs.model for k in keys if k in own) else "reduced"

    def _requested(self, keys: Sequence[str] | None) -> tuple[str, ...]:
        if keys is None:
            return self.default_keys()
        if isinstance(keys, str):
            keys = [keys]
        return tuple(keys)

    # ------------------------------------------------------------------ set-up
    def setup(self, layout: Layout, keys: frozenset[str]) -> None:
        """Check the layout and record layout-dependent choices (once, when the layer
        dimensions are known). Raise ``ValueError`` for a request the layout cannot serve."""

    def kept_layers(self) -> Sequence[str]:
        """Layers whose whole batch of features :meth:`update_layers` reads (default none)."""
        return ()

    # ------------------------------------------------------------------ accumulation
    def accumulators(self, split: str, layout: Layout, keys: frozenset[str]) -> dict[str, Any]:
        """Fresh private accumulators for one data pass of ``split`` (default: none).

        Values are :class:`~collapselab.stats.Accumulator` objects (or dicts of them, by
        layer); the engine reduces every one under ``torch.distributed``, in the order of
        the dicts, which must therefore be the same in every process (build them in a
        fixed order, never by iterating a set).
        """
        return {}

    def update(
        self, accs: dict[str, Any], layer: str, signal: str, values: torch.Tensor, y: torch.Tensor
    ) -> None:
        """Pass 1: one layer's ``signal`` for a block of rows (``values (n, D)``, labels ``y``)."""

    def update_signal(
        self, accs: dict[str, Any], signal: str, values: Mapping[str, torch.Tensor], y: torch.Tensor
    ) -> None:
        """Pass 1: one ``signal`` of several layers for the same block of rows
        (``values[layer]`` ``(n, D_layer)`` in the data pass's dtype, e.g. float32 or bool;
        labels ``y``), when the data pass has every layer's signals at once (a pass with
        per-sample gradients). Default: :meth:`update` of each layer in turn, on a float64
        copy. A family whose per-layer work is a few small kernels overrides it to do the
        layers of equal shape together."""
        for layer, block in values.items():
            self.update(accs, layer, signal, as_float64("block", block), y)

    def update_layers(
        self, accs: dict[str, Any], features: Mapping[str, torch.Tensor], y: torch.Tensor
    ) -> None:
        """Pass 1, once per batch: the features of :meth:`kept_layers` for the same rows."""

    # ------------------------------------------------------------------ results
    def compute_layer(self, keys: frozenset[str], layer: LayerView, accs: dict[str, Any]) -> Values:
        """The values of ``keys`` (those that apply) for one layer of one split."""
        return {}

    def compute_layers(
        self,
        keys: Mapping[str, frozenset[str]],
        layers: Mapping[str, LayerView],
        accs: dict[str, Any],
    ) -> dict[str, Values]:
        """The values of several layers of one split at once, ``{layer: {key: value}}``
        for ``keys[layer]``; the engine computes every layer left out with
        :meth:`compute_layer` (default: none, every layer by :meth:`compute_layer`). A
        family that computes layers of equal shape in a few kernels together overrides it;
        a layer whose values may be undefined is best left to :meth:`compute_layer`, whose
        errors the engine reports per layer."""
        return {}

    def compute_split(
        self, keys: frozenset[str], split: SplitView, accs: dict[str, Any]
    ) -> dict[str, Values]:
        """Values that need several layers at once: ``{layer: {key: value}}``, model-level
        values under :data:`MODEL_LAYER` (default: none)."""
        return {}

    def compute_model(
        self, keys: frozenset[str], access: ModelAccess
    ) -> dict[str, dict[str, Values]]:
        """For ``Needs(model=True)``: run a procedure on the model (Hessian-vector products,
        weight spectra) and return ``{split: {layer: {key: value}}}`` (default: none)."""
        return {}

    def take_arrays(self) -> dict[str, Any]:
        """Arrays (spectra) of the last :meth:`compute_model`, handed over once: the Monitor
        writes them with the measurement to ``arrays/<family name>_step<step>.npz`` of its
        run (names are the ``.npz`` keys; default: none)."""
        return {}

    def copy(self) -> Family:
        """An independent copy (a Monitor keeps its own, see the class docstring)."""
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(keys={list(self.requested)})"


def accumulators_of(accs: Mapping[str, Any]) -> Iterable[Accumulator]:
    """Every :class:`~collapselab.stats.Accumulator` in ``accs`` (values or dicts of them)."""
    for value in accs.values():
        if isinstance(value, Accumulator):
            yield value
        elif isinstance(value, Mapping):
            yield from accumulators_of(value)
