r"""A data pass: a model run over a split's data, its captured signals fed to a Collection.

A data pass measures every requested layer of a model at once (docs/monitoring.md), in at
most two passes over the batches:

1. **pass 1**: one forward pass per batch, in eval mode under ``torch.no_grad`` (or with
   autograd when a family reads per-sample gradients), with forward hooks capturing every
   layer; each layer's signals go to the :class:`~collapselab.families.collection.Collection`
   from inside its hook, while the output is fresh (an in-place operation later in the pass
   cannot change what was measured); the layers some family reads together (a layer path)
   are kept until the end of the batch;
2. the class means are frozen (after an all-reduce under ``torch.distributed``);
3. **pass 2**, only for the layers whose keys need it (a within-class scatter, decisions):
   the features kept by pass 1 when they fit in the cache budget, else a second forward
   pass per batch.

The outputs' confusion counts (labels against ``argmax`` of the logits) come with pass 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from collapselab.checks import check_labels, split_batch
from collapselab.families.collection import Collection
from collapselab.probe import FeatureCapture, LinearFactors, per_sample_gradients
from collapselab.probe._inplace import InPlaceGuard
from collapselab.probe.inputs import model_inputs
from collapselab.stats import ConfusionCounts, all_reduce
from collapselab.track import _dist
from collapselab.track._cache import FeatureCache

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class PassSettings:
    """What a data pass needs to know of its monitor.

    Attributes:
        model: the network (in eval mode during the data pass).
        layers: the measured layers, in forward order.
        gated: the ReLU-type layers among them whose input gives gates.
        n_classes: classes ``C``.
        device: where the model runs.
        gradients: pass 1 takes per-sample gradients (one backward pass per batch).
        loss: per-sample loss for the gradients.
        cache_bytes: the budget of features kept for pass 2.
        copy_outputs: keep copies of layer outputs (a later in-place operation overwrote a
            kept output in an earlier data pass).
        distributed: reduce over the ``torch.distributed`` group.
        linear_layers: ``nn.Linear`` layers whose per-sample weight-gradient factors the
            gradient pass also captures for a model procedure (:attr:`DataPass.factors`).
    """

    model: nn.Module
    layers: list[str]
    gated: list[str]
    n_classes: int
    device: torch.device
    gradients: bool
    loss: LossFn
    cache_bytes: int
    copy_outputs: bool
    distributed: bool
    linear_layers: list[str] = field(default_factory=list)


def _bytes(tensors: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


class DataPass:
    """Pass 1 and pass 2 of one split over a loader, into a Collection.

    Args:
        settings: the monitor's settings.
        collection: where the signals go.
        on_first_batch: called with the features of every layer after the first batch of
            the monitor's first data pass (it learns the dimensions and sets the families up);
            returns the layers to keep for cross-layer families from then on.
        kept: the layers kept until the end of each batch (known after the first data pass).

    After :meth:`run`, :attr:`factors` holds the factors of ``settings.linear_layers``, one
    :class:`~collapselab.probe.LinearFactors` per batch, when the gradient pass captured
    them and they fit in ``settings.cache_bytes``; else ``None``.
    """

    def __init__(
        self,
        settings: PassSettings,
        collection: Collection,
        on_first_batch: Callable[[dict[str, torch.Tensor]], list[str]] | None,
        kept: list[str],
    ) -> None:
        self.settings = settings
        self.collection = collection
        self.on_first_batch = on_first_batch
        self.kept = kept
        self.confusion = ConfusionCounts(settings.n_classes, settings.device)
        self.overwritten = False
        self.factors: list[LinearFactors] | None = None

    # ------------------------------------------------------------------ batches
    def _batch(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs on the model's device and dtype; labels checked as ``measure`` checks them."""
        x, y = split_batch(batch)
        s = self.settings
        x = model_inputs(s.model, x, s.device)
        y = check_labels("labels", y, x.shape[0], s.n_classes, source="inputs", unit="sample")
        return x, y.to(s.device)

    def _check_logits(self, logits: Any, n: int) -> None:
        c = self.settings.n_classes
        if not isinstance(logits, torch.Tensor) or tuple(logits.shape) != (n, c):
            shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits)
            raise ValueError(f"the model must return logits of shape ({n}, {c}), got {shape}")

    def _end_batch(
        self,
        kept: dict[str, torch.Tensor],
        logits: torch.Tensor,
        y: torch.Tensor,
        refetch: Callable[[list[str]], dict[str, torch.Tensor]] | None = None,
    ) -> None:
        """After a batch's forward pass: set up on the first batch (``kept`` then holds
        every layer), feed the kept layers to the cross-layer families (``refetch`` gives
        copies of those a later in-place operation overwrote), count the decisions."""
        if self.on_first_batch is not None:
            self.kept = self.on_first_batch(kept)
            self.on_first_batch = None
        if self.kept:
            if refetch is not None:
                kept = refetch(self.kept)
            self.collection.add_layers({n: kept[n] for n in self.kept}, y)
        self.confusion.update(y, logits.argmax(dim=1))

    # ------------------------------------------------------------------ pass 1
    def pass_one(self, loader: Any) -> FeatureCache:
        """Pass 1 over ``loader``; returns the features kept for pass 2 (maybe none)."""
        s, coll = self.settings, self.collection
        second = set(coll.second_pass)
        cache = FeatureCache(s.cache_bytes if second else 0, copy=s.copy_outputs)
        if s.gradients:
            self._gradient_pass(loader, cache, second)
            return cache
        state: dict[str, Any] = {}
        guard = InPlaceGuard()

        def features_sink(name: str, kind: str, h: torch.Tensor) -> None:
            if name in state["seen"]:
                raise RuntimeError(
                    f"layer {name!r} was called twice in one forward pass; its features are "
                    "ambiguous (measure a module that runs once per pass)"
                )
            state["seen"].add(name)
            coll.add(name, "features", h, state["y"])
            if self.on_first_batch is not None or name in self.kept:
                state["kept"][name] = h.clone() if s.copy_outputs else h
                if not s.copy_outputs:
                    guard.watch(name, h)
            if name in second:
                cache.add(name, h)

        def gates_sink(name: str, kind: str, z: torch.Tensor) -> None:
            coll.add(name, "gates", z > 0, state["y"])

        captures = [FeatureCapture(s.model, s.layers, "output", sink=features_sink)]
        gated = [n for n in s.gated if coll.reads("gates")]
        if gated:
            captures.append(FeatureCapture(s.model, gated, "input", sink=gates_sink))
        try:
            for batch in loader:
                x, y = self._batch(batch)
                state.update(y=y, seen=set(), kept={})
                guard.clear()
                cache.start_batch(y)
                with torch.no_grad():
                    logits = s.model(x)
                cache.end_batch()
                self._check_logits(logits, x.shape[0])
                missing = [n for n in s.layers if n not in state["seen"]]
                if missing:
                    raise ValueError(f"layers {missing} were not called by the forward pass")
                changed = set(guard.changed())

                def refetch(names: list[str], x=x, changed=changed) -> dict[str, torch.Tensor]:
                    # A kept output was overwritten in place after its layer ran: copies of
                    # this batch's outputs (one more forward pass), and copies from now on.
                    if not changed & set(names):
                        return state["kept"]
                    self.overwritten = True
                    return self._copies(x, names)

                self._end_batch(state["kept"], logits, y, refetch)
        finally:
            for cap in captures:
                cap.close()
        self.overwritten = self.overwritten or cache.overwritten
        return cache

    def _copies(self, x: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
        """The outputs of ``names`` for inputs ``x``, copied (one more forward pass)."""
        with FeatureCapture(self.settings.model, names, copy=True) as cap, torch.no_grad():
            self.settings.model(x)
            return dict(cap.features)

    def _gradient_pass(self, loader: Any, cache: FeatureCache, second: set[str]) -> None:
        """Pass 1 with per-sample gradients: one forward and one backward pass per batch."""
        s, coll = self.settings, self.collection
        preact = bool(s.gated) and (coll.reads("gates") or coll.reads("preactivation_gradients"))
        linear = s.linear_layers or None
        self.factors = [] if linear else None
        factor_bytes = 0
        for batch in loader:
            x, y = self._batch(batch)
            cache.start_batch(y)
            g = per_sample_gradients(
                s.model,
                x,
                y,
                s.layers,
                loss_fn=s.loss,
                preactivations=preact,
                mode="current",
                linear_layers=linear,
            )
            self._check_logits(g.logits, x.shape[0])
            if self.factors is not None:
                # Kept within the cache budget, like the features of pass 2: beyond it the
                # model procedure runs its own pass (same values).
                factor_bytes += _bytes(g.linear_inputs) + _bytes(g.linear_pre_grads)
                if factor_bytes <= s.cache_bytes:
                    self.factors.append(
                        LinearFactors(g.linear_inputs, g.linear_pre_grads, {}, g.logits)
                    )
                else:
                    self.factors, linear = None, None
            # Every layer's signals at once: a family may take the layers of equal shape
            # together (Family.update_signal).
            coll.add_signal("features", g.features, y)
            coll.add_signal("feature_gradients", g.gradients, y)
            if g.preact_gradients:
                coll.add_signal("preactivation_gradients", g.preact_gradients, y)
                coll.add_signal("gates", g.gates, y)
            for name in s.layers:
                if name in second:
                    cache.add(name, g.features[name])
            cache.end_batch()
            self._end_batch(g.features, g.logits, y)

    # ------------------------------------------------------------------ pass 2
    def pass_two(self, loader: Any, cache: FeatureCache) -> None:
        """Pass 2 of the layers that need it: from the cache, or a second forward pass."""
        coll = self.collection
        layers = coll.second_pass
        if not layers:
            return
        if cache.active:
            for feats, y in cache.batches:
                for name, h in feats.items():
                    coll.add_second(name, h, y)
            return
        labels: dict[str, torch.Tensor] = {}

        def sink(name: str, kind: str, h: torch.Tensor) -> None:
            coll.add_second(name, h, labels["y"])

        with FeatureCapture(self.settings.model, layers, "output", sink=sink), torch.no_grad():
            for batch in loader:
                x, labels["y"] = self._batch(batch)
                self.settings.model(x)

    # ------------------------------------------------------------------ the whole data pass
    def run(self, loader: Any, classifier: Any) -> None:
        """Both passes over ``loader`` (reductions included); the collection is then final."""
        s, coll = self.settings, self.collection
        cache = self.pass_one(loader)
        if self.on_first_batch is not None:
            raise ValueError("the data loader yielded no batch; nothing to measure")
        # Every process must take the same pass 2: a wrapped model's forward may run
        # collectives (DDP's buffer broadcast).
        if s.distributed and not _dist.all_agree(cache.active, s.device):
            cache.drop()
        # Likewise the model procedure's own pass, which runs where the factors were not kept.
        if s.distributed and s.linear_layers:
            if not _dist.all_agree(self.factors is not None, s.device):
                self.factors = None
        if s.distributed:
            all_reduce([*coll.accumulators(), self.confusion])
        coll.finalize(classifier)
        self.pass_two(loader, cache)
        if s.distributed and coll.second_pass:
            all_reduce(coll.second_accumulators())
