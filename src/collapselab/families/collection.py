r"""The measurement engine: collect what the requested keys need, then compute them.

Accumulate, then measure. A :class:`Request` resolves families and keys through the catalogue
(:func:`collapselab.families.catalogue.plan`) and derives, per layer, what they need
(:class:`~collapselab.families.family.Needs`): the level of the shared class statistics, the
decisions, the per-sample signals. A :class:`Collection` holds one split's data pass: a
:class:`~collapselab.stats.ClassStats` per layer that needs one (dense, projected or
means-only, never more than the keys ask for) and each family's own accumulators. Its
caller feeds it (:meth:`Collection.add` in pass 1, :meth:`Collection.add_second` in pass
2), reduces its accumulators under ``torch.distributed`` if needed, and asks for the
values (:meth:`Collection.results`).

:func:`collapselab.measure` drives it over the row blocks of one feature matrix;
:class:`collapselab.track.Monitor` over the layers of a model, batch by batch, from
forward hooks. Both therefore compute every key the same way.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from collapselab._threads import caller_threads, run_streams, stream_count
from collapselab.checks import MODES, WEIGHTINGS, check_choice, check_int
from collapselab.families.catalogue import FamilySpec, family_objects, owner, plan
from collapselab.families.family import (
    MODEL_LAYER,
    Family,
    Key,
    LayerView,
    Layout,
    Needs,
    SplitView,
    Values,
    accumulators_of,
    union,
)
from collapselab.stats import DENSE_MAX_DIM, Accumulator, ClassStats
from collapselab.stats.class_stats import (
    DEFAULT_CHUNK_ENTRIES,
    default_chunk_size,
    largest_magnitude,
    power_of_two_scale,
)
from collapselab.stats.scratch import as_float64, scratch

Classifier = tuple[torch.Tensor, torch.Tensor | None]


@dataclass(frozen=True)
class StatsOptions:
    """How the shared class statistics are accumulated.

    Attributes:
        weighting: class weights (:data:`collapselab.checks.WEIGHTINGS`).
        mode: ``"auto"``, ``"dense"`` or ``"projected"`` within-class scatter; ``"auto"``
            keeps it dense only where a requested key needs it and ``D <= dense_max_dim``.
        dense_max_dim: the threshold of ``mode="auto"``.
        chunk_size: rows per block of a batch (the float64 copy is made block by block);
            ``None``: about ``chunk_bytes`` of float64 per block
            (:func:`collapselab.stats.class_stats.default_chunk_size`).
        chunk_bytes: the default block size in bytes; ``0``: whole batches.
    """

    weighting: str = "auto"
    mode: str = "auto"
    dense_max_dim: int = DENSE_MAX_DIM
    chunk_size: int | None = None
    chunk_bytes: int = 8 * DEFAULT_CHUNK_ENTRIES

    def __post_init__(self) -> None:
        check_choice("weighting", self.weighting, WEIGHTINGS)
        check_choice("mode", self.mode, MODES)
        check_int("dense_max_dim", self.dense_max_dim, minimum=1)
        if self.chunk_size is not None:
            check_int("chunk_size", self.chunk_size, minimum=1)
        check_int("chunk_bytes", self.chunk_bytes, minimum=0)

    def rows(self, dim: int, n: int) -> int:
        """Rows per block for a batch of ``n`` rows of dimension ``dim``."""
        if self.chunk_size is None and self.chunk_bytes == 0:
            return max(n, 1)
        return default_chunk_size(dim, self.chunk_size, self.chunk_bytes or 1)


def _applies(key: Key, layer: str, layout: Layout) -> bool:
    """Whether a per-layer key takes a value at ``layer``."""
    if key.where == "penultimate":
        return layer == layout.penultimate
    if key.where == "gated":
        return layer in layout.gated
    return key.where == "layer"


def _reads(key: Key, layer: str, layout: Layout) -> bool:
    """Whether computing ``key`` reads what is collected at ``layer``: a per-layer key that
    applies there, or a key across layers (a layer path, a model-level value)."""
    return key.where in ("path", "model") or _applies(key, layer, layout)


class Request:
    """Families and keys resolved through the catalogue, and what they need.

    Args:
        families: family objects or names (see :func:`collapselab.families.catalogue.plan`).
        keys: further keys.

    Attributes:
        plan: the family objects that compute something and their keys, in request order.
        given: the family objects as requested (names built with default options), in
            order; :meth:`subset` selects among them.
    """

    def __init__(
        self,
        families: Iterable[FamilySpec] | FamilySpec | None = None,
        keys: Iterable[str] | None = None,
    ) -> None:
        given = family_objects(families)
        extra = list(keys) if keys is not None else []
        self._start(plan(given, extra or None), given, bool(extra))
        if not self.plan:
            raise ValueError("nothing to measure: give at least one family or key")

    def _start(
        self, planned: dict[Family, frozenset[str]], given: list[Family], extra: bool
    ) -> None:
        self.plan = planned
        self.given = given
        self._extra = extra  # keys requested beyond the given families'
        # Per (layer, penultimate, gated): what _reads depends on. A Monitor builds a
        # Collection per measurement; the answers never change for a request.
        self._layer_needs: dict[tuple, Needs] = {}
        self._scale_dependent: dict[tuple, list[str]] = {}
        self._subsets: dict[tuple[int, ...], Request] = {}

    def subset(self, families: Iterable[Family]) -> Request:
        """The request of some of the given families alone (a Monitor's event where only
        they are due): the keys they request, each computed by the object of this request
        that owns it (with its options), in this request's order; what they need, and
        nothing more. All of them (without further keys): this request itself. None: an
        empty request (a measurement of the model's accuracy only)."""
        chosen = {id(f) for f in families}
        due = [f for f in self.given if id(f) in chosen]
        if len(due) == len(self.given) and not self._extra:
            return self
        at = tuple(id(f) for f in due)
        if at not in self._subsets:
            owners = {fam.name: fam for fam in self.plan}
            wanted: dict[Family, set[str]] = {}
            for fam in due:
                for key in fam.requested:
                    wanted.setdefault(owners[owner(key)], set()).add(key)
            sub = Request.__new__(Request)
            sub._start({f: frozenset(wanted[f]) for f in self.plan if f in wanted}, due, False)
            self._subsets[at] = sub
        return self._subsets[at]

    @property
    def families(self) -> list[Family]:
        """The family objects that compute something, in request order."""
        return list(self.plan)

    def keys(self, family: Family, split: str) -> frozenset[str]:
        """The keys ``family`` computes on ``split`` (train-only keys left out of ``test``)."""
        return frozenset(k for k in self.plan[family] if split in family.key(k).splits)

    def _needs(self, include: Any) -> Needs:
        return union(
            fam.key(k).needs for fam, keys in self.plan.items() for k in keys if include(fam.key(k))
        )

    def layer_needs(self, layer: str, layout: Layout) -> Needs:
        """What ``layer`` needs: its own keys', plus the path and model-level keys'."""
        at = (layer, layout.penultimate, tuple(layout.gated))
        if at not in self._layer_needs:
            self._layer_needs[at] = self._needs(lambda key: _reads(key, layer, layout))
        return self._layer_needs[at]

    def scale_dependent(self, layer: str, layout: Layout) -> list[str]:
        """The requested keys that read ``layer``'s class statistics and are not scale
        invariant (while there are none, those statistics may be kept for rescaled features)."""
        at = (layer, layout.penultimate, tuple(layout.gated))
        if at not in self._scale_dependent:
            self._scale_dependent[at] = [
                k
                for fam, keys in self.plan.items()
                for k in sorted(keys)
                if not fam.key(k).scale_invariant
                and fam.key(k).needs.scatter != "none"
                and _reads(fam.key(k), layer, layout)
            ]
        return list(self._scale_dependent[at])

    @property
    def needs(self) -> Needs:
        """The union of every requested key's needs."""
        return self._needs(lambda key: True)

    def stats_mode(self, needs: Needs, options: StatsOptions) -> str:
        """The :class:`~collapselab.stats.ClassStats` mode for a layer with ``needs``."""
        if options.mode != "auto":
            return options.mode
        return "projected" if needs.scatter in ("means", "projected") else "auto"

    def setup(self, layout: Layout, options: StatsOptions) -> None:
        """Check the request against the measured layers once their dimensions are known,
        and let every family record its layout-dependent choices."""
        for layer in layout.layers:
            needs = self.layer_needs(layer, layout)
            if needs.scatter != "dense":
                continue
            mode = self.stats_mode(needs, options)
            d = layout.dims[layer]
            if mode == "projected" or (mode == "auto" and d > options.dense_max_dim):
                keys = sorted(
                    k
                    for fam, ks in self.plan.items()
                    for k in ks
                    if fam.key(k).needs.scatter == "dense" and _applies(fam.key(k), layer, layout)
                )
                raise ValueError(
                    f"{', '.join(keys)} need the dense D x D within-class covariance of layer "
                    f"{layer!r}, but D = {d} with mode={options.mode!r} and dense_max_dim="
                    f"{options.dense_max_dim} keeps it projected; pass mode='dense' (or a "
                    "larger dense_max_dim) to allow it"
                )
        for fam, keys in self.plan.items():
            fam.setup(layout, keys)

    def kept_layers(self) -> list[str]:
        """Layers whose whole batches some family reads across layers, in order."""
        out: list[str] = []
        for fam in self.plan:
            out += [n for n in fam.kept_layers() if n not in out]
        return out


class Collection:
    """Everything one split's data pass accumulates for a :class:`Request`.

    Args:
        request: what to compute.
        split: ``"train"`` or ``"test"``.
        layout: the measured layers (their ``dims`` may still be empty: the class
            statistics and family accumulators size themselves on the first batch).
        options: how to accumulate the class statistics.
        reference: the train split's collection, for a test split: its class means are the
            references of the nearest-class-mean decisions, and its feature scales are used.
    """

    def __init__(
        self,
        request: Request,
        split: str,
        layout: Layout,
        options: StatsOptions,
        reference: Collection | None = None,
    ) -> None:
        self.request, self.split, self.layout, self.options = request, split, layout, options
        self.reference = reference
        self.needs = {layer: request.layer_needs(layer, layout) for layer in layout.layers}
        # Per layer, the power of two the class statistics' features are multiplied by
        # (see _rescale); a test split takes its train split's.
        self.scales: dict[str, float] = dict(reference.scales) if reference else {}
        self._scalable = {
            layer: not request.scale_dependent(layer, layout) for layer in layout.layers
        }
        self.stats: dict[str, ClassStats] = {
            layer: ClassStats(
                layout.n_classes,
                weighting=options.weighting,
                mode=request.stats_mode(needs, options),
                dense_max_dim=options.dense_max_dim,
                warn_imbalanced=False,  # the caller warns once for every split
                ncc=needs.ncc,
                # Pass 2 sees the same features: the sums of pass 1 are checked for NaN/Inf
                # once, and no pass-1 norms are kept for variances read before pass 2.
                norms=False,
                check_finite=False,
            )
            for layer, needs in self.needs.items()
            if needs.scatter != "none"
        }
        self.family_accs: dict[Family, dict[str, Any]] = {
            fam: fam.accumulators(split, layout, request.keys(fam, split))
            for fam in request.families
        }
        self._readers: dict[str, list[Family]] = {}
        for fam in request.families:
            for k in request.keys(fam, split):
                for signal in fam.key(k).needs.signals:
                    readers = self._readers.setdefault(signal, [])
                    if fam not in readers:
                        readers.append(fam)

    # ------------------------------------------------------------------ pass 1
    def reads(self, signal: str) -> bool:
        """Whether some requested key reads ``signal`` (features are read for the statistics
        too)."""
        return signal in self._readers or (signal == "features" and bool(self.stats))

    def add(self, layer: str, signal: str, values: torch.Tensor, y: torch.Tensor) -> None:
        """Pass 1: one layer's ``signal`` for a batch (``(n, D)`` values, ``(n,)`` labels).

        The rows go in blocks (:meth:`StatsOptions.rows`), each converted to float64 once
        for every consumer: the layer's class statistics (features) and the families that
        read the signal. Without such families the class statistics take the rows as they
        are and convert them in cache-sized blocks themselves.
        """
        stats = self.stats.get(layer) if signal == "features" else None
        readers = self._readers.get(signal, ())
        if stats is None and not readers:
            return
        if not readers:
            self._add_to_stats(layer, values, y)
            return
        n = values.shape[0]
        step = self.options.rows(values.shape[1], n)
        with caller_threads():  # the families' updates are not split into streams
            for start in range(0, n, step):
                block = as_float64("block", values[start : start + step])
                labels = y[start : start + step]
                for fam in readers:
                    fam.update(self.family_accs[fam], layer, signal, block, labels)
                if stats is not None:
                    stats.update_means(self._rescale(layer, block), labels)

    def add_signal(self, signal: str, values: Mapping[str, torch.Tensor], y: torch.Tensor) -> None:
        """Pass 1: one ``signal`` of several layers for a batch (``values[layer]`` ``(n,
        D_layer)``), when the data pass has them together (one with per-sample gradients).

        Each layer's class statistics (features) as :meth:`add` feeds them; the families
        that read the signal get every layer's block of rows at once
        (:meth:`~collapselab.families.family.Family.update_signal`), in blocks of
        :meth:`StatsOptions.rows` for the layers' dimensions together.
        """
        if signal == "features":
            for layer, h in values.items():
                if layer in self.stats:
                    self._add_to_stats(layer, h, y)
        readers = self._readers.get(signal, ())
        if not readers or not values:
            return
        n = next(iter(values.values())).shape[0]
        step = self.options.rows(sum(v.shape[1] for v in values.values()), n)
        with caller_threads():
            for start in range(0, n, step):
                blocks = {layer: v[start : start + step] for layer, v in values.items()}
                labels = y[start : start + step]
                for fam in readers:
                    fam.update_signal(self.family_accs[fam], signal, blocks, labels)

    def _add_to_stats(self, layer: str, h: torch.Tensor, y: torch.Tensor) -> None:
        """Pass 1 of one layer's class statistics, in blocks of :meth:`StatsOptions.rows`
        in the features' own dtype (the statistics convert them to float64 in cache-sized
        blocks), in row streams (:meth:`_in_streams`)."""
        step = self.options.rows(h.shape[1], h.shape[0])
        if layer not in self.scales:  # fixed by the first block, before streams read it
            self._rescale(layer, h[:step])

        def update(stats: ClassStats, block: torch.Tensor, labels: torch.Tensor) -> None:
            stats.update_means(self._rescale(layer, block), labels)

        self._in_streams(self.stats[layer], h, y, step, update)

    def _in_streams(
        self,
        stats: ClassStats,
        h: torch.Tensor,
        y: torch.Tensor,
        step: int,
        update: Callable[[ClassStats, torch.Tensor, torch.Tensor], None],
    ) -> None:
        """``update(stats, block, labels)`` for the blocks of ``step`` rows of ``h``, split
        into contiguous row streams, one per torch thread (:func:`run_streams`), each
        accumulating into a :meth:`~collapselab.stats.ClassStats.shard` that is merged
        into ``stats`` at the end (the first stream into ``stats`` itself).

        The class statistics' element-wise work runs on cache-sized blocks; under torch's
        intra-op threads each of its many small operations splits and waits, so one stream
        per thread is faster (benchmarks/README.md, issue 32). Sums are added in another
        order than on one stream: values move by a few units of the last place.
        """
        starts = range(0, h.shape[0], step)
        count = min(stream_count(h.numel(), h.device), len(starts))
        if count == 1:
            for start in starts:
                update(stats, h[start : start + step], y[start : start + step])
            return
        shards = [stats] + [stats.shard() for _ in range(count - 1)]
        bounds = [len(starts) * i // count for i in range(count + 1)]

        def stream(i: int) -> None:
            for start in starts[bounds[i] : bounds[i + 1]]:
                update(shards[i], h[start : start + step], y[start : start + step])

        run_streams([functools.partial(stream, i) for i in range(count)])
        for shard in shards[1:]:
            stats.merge(shard)

    def _rescale(self, layer: str, block: torch.Tensor) -> torch.Tensor:
        """``block`` times the layer's scale (a power of two: exact), chosen from the first
        block of pass 1 when its largest entry lies outside ``[2^-400, 2^400]``.

        Only for layers whose every statistics-based key is scale invariant: the class
        statistics of features of magnitude 1e-200 or 1e200 would underflow or overflow
        (their squares), while those keys have the same value at every scale. Features of
        ordinary magnitude are not touched (scale 1), so their values stay bit-identical.
        """
        if layer not in self.scales:
            peak = largest_magnitude(block)
            scale = power_of_two_scale(peak)
            if scale != 1.0 and not self._scalable[layer]:
                keys = ", ".join(self.request.scale_dependent(layer, self.layout))
                raise ValueError(
                    f"features of layer {layer!r} have entries of magnitude {peak:.3g}: their "
                    "squares over- or underflow float64, and some requested keys depend on the "
                    f"features' scale ({keys}), so the statistics cannot be rescaled; rescale "
                    "the features, or request the scale-invariant keys alone (rescaled "
                    "automatically)"
                )
            self.scales[layer] = scale
        scale = self.scales[layer]
        if scale == 1.0:
            return block
        block = as_float64("block", block)  # the product in float64: exact
        return torch.mul(block, scale, out=scratch("rescaled", tuple(block.shape), block))

    def add_layers(self, features: Mapping[str, torch.Tensor], y: torch.Tensor) -> None:
        """Pass 1, once per batch: the kept layers' features, for cross-layer families."""
        for fam in self.request.families:
            if fam.kept_layers():
                fam.update_layers(self.family_accs[fam], features, y)

    def accumulators(self) -> list[Accumulator]:
        """Every accumulator of pass 1 (for :func:`collapselab.stats.all_reduce`)."""
        out: list[Accumulator] = list(self.stats.values())
        for accs in self.family_accs.values():
            out += list(accumulators_of(accs))
        return out

    # ------------------------------------------------------------------ pass 2
    def finalize(self, classifier: Classifier | None = None) -> None:
        """Freeze the class means; the decisions of pass 2 use the reference collection's
        means (the train split's, for a test split) and the classifier on the penultimate
        layer (its bias rescaled with the features: the decisions do not change)."""
        reference = self.reference
        for layer, stats in self.stats.items():
            kwargs: dict[str, Any] = {}
            needs = self.needs[layer]
            if layer == self.layout.penultimate and classifier is not None and needs.classifier:
                W, b = classifier
                scale = self.scales.get(layer, 1.0)
                kwargs["W"], kwargs["b"] = W, (b if b is None or scale == 1.0 else b * scale)
            if reference is not None and needs.ncc and layer in reference.stats:
                kwargs["ncc_means"] = reference.stats[layer].means
            stats.finalize_means(**kwargs)

    @property
    def second_pass(self) -> list[str]:
        """Layers whose statistics need pass 2 (a within-class scatter or decisions)."""
        return [layer for layer in self.stats if self.needs[layer].scatter not in ("none", "means")]

    def add_second(self, layer: str, h: torch.Tensor, y: torch.Tensor) -> None:
        """Pass 2: a batch of one layer's features (the same data as pass 1, not checked
        again for NaN/Inf)."""
        step = self.options.rows(h.shape[1], h.shape[0])
        scale = self.scales.get(layer, 1.0)

        def update(stats: ClassStats, block: torch.Tensor, labels: torch.Tensor) -> None:
            # In the features' own dtype: pass 2 forms h - mu_y in float64 directly, without
            # a float64 copy of the block (unless the layer's statistics are rescaled).
            if scale != 1.0:
                block = self._rescale(layer, block)
            stats.update_scatter(block, labels)

        self._in_streams(self.stats[layer], h, y, step, update)

    def second_accumulators(self) -> list[Accumulator]:
        """The accumulators of pass 2 (for :func:`collapselab.stats.all_reduce`)."""
        return [self.stats[layer] for layer in self.second_pass]

    # ------------------------------------------------------------------ results
    def results(
        self,
        classifier: Classifier | None = None,
        *,
        on_error: str = "raise",
        failures: list[str] | None = None,
    ) -> dict[str, Values]:
        """``{layer: {key: value}}`` of every requested key; model-level values under
        :data:`~collapselab.families.family.MODEL_LAYER`.

        Args:
            classifier: ``(W, b)`` read by the penultimate layer.
            on_error: ``"raise"``, or ``"warn"``: a family whose values are undefined for
                a layer in this state of the network (zero between-class scatter in a dead
                layer, say) is skipped there with a warning, and the others go on.
            failures: receives one line per skipped family and layer under ``"warn"``.
        """
        check_choice("on_error", on_error, ("raise", "warn"))
        layout = self.layout
        views = {
            layer: LayerView(
                layer,
                self.split,
                self.stats.get(layer),
                classifier if layer == layout.penultimate else None,
            )
            for layer in layout.layers
        }
        out: dict[str, Values] = {layer: {} for layer in layout.layers}
        for fam in self.request.families:
            keys = self.request.keys(fam, self.split)
            accs = self.family_accs[fam]
            here = {
                layer: frozenset(k for k in keys if _applies(fam.key(k), layer, layout))
                for layer in layout.layers
            }
            here = {layer: ks for layer, ks in here.items() if ks}
            together: dict[str, Values] = {}
            if here:
                where = f"{self.split} split, family {fam.name!r} (layers together)"
                together = _guarded(
                    fam.compute_layers, (here, views, accs), where, on_error, failures
                )
            for layer, ks in here.items():
                if layer in together:
                    out[layer].update(together[layer])
                    continue
                where = f"{self.split} split, layer {layer!r}, family {fam.name!r}"
                args = (ks, views[layer], accs)
                values = _guarded(fam.compute_layer, args, where, on_error, failures)
                out[layer].update(values)
            across = frozenset(k for k in keys if fam.key(k).where in ("path", "model"))
            if across:
                view = SplitView(self.split, views, layout)
                where = f"{self.split} split, family {fam.name!r} (across layers)"
                per_layer = _guarded(
                    fam.compute_split, (across, view, accs), where, on_error, failures
                )
                for layer, values in per_layer.items():
                    out.setdefault(layer, {}).update(values)
        if MODEL_LAYER in out and not out[MODEL_LAYER] and MODEL_LAYER not in layout.layers:
            del out[MODEL_LAYER]
        return out


def _guarded(
    fn: Any, args: tuple[Any, ...], where: str, on_error: str, failures: list[str] | None
) -> Any:
    """``fn(*args)``; under ``on_error="warn"`` a ``ValueError`` becomes a warning and ``{}``."""
    try:
        return fn(*args)
    except ValueError as err:
        if on_error == "raise":
            raise
        if failures is not None:
            failures.append(f"{where}: {err}")
        warnings.warn(f"collapselab: {where} skipped: {err}", UserWarning, stacklevel=4)
        return {}
