r"""The diversity family: how alike the samples' features, gates and gradients are (paper 000).

Per layer, the mean pairwise cosine similarity of the features (M2), over cross-class,
within-class (class average and pooled) and all pairs, and the number of zero feature
vectors; for ReLU-type layers, the similarity of the gating patterns ``z > 0`` of their input
(cosine and agreement, M14); with ``gradients=True``, the cosines of the per-sample
gradients of the loss with respect to the features (M3) and, for ReLU-type layers, to the
pre-activations. Formulas in :mod:`collapselab.metrics.diversity`; the sums are kept by
:class:`~collapselab.stats.CosineSimilarityAccumulator` and
:class:`~collapselab.stats.GatingSimilarityAccumulator`, one pass over the data.

With ``weight_changes=True``, also the pseudo-neuron weight-change similarity M4 of every
linear layer (rows named by the ``nn.Linear`` module, ``where="weights"``), from the three
sources of weight change (note A5, R8):

* ``pseudo_neuron_cosine_per_sample``: the literal per-sample form, averaged over the
  measured samples, from the rank-1 factors ``(g_x, a_x)`` (degenerate: 1 for post-ReLU
  inputs; reported to show it);
* ``pseudo_neuron_cosine_probe_mean``: M4 of the mean change ``-η/N sum_x g_x a_xᵀ`` over
  the measured (probe) samples;
* ``pseudo_neuron_cosine_update``: M4 of ``W_now - W_prev``, the weights now minus the
  weights at this family's previous measurement, with ``weight_change_steps`` the number of
  optimiser steps between them: the actual mini-batch update when the Monitor measures at
  consecutive steps (t-1 and t), otherwise the sum of the updates since the last
  measurement. Absent at the first measurement (or without step numbers).

These keys need the weights and the per-sample factors, which the engine's per-sample
signals (features, gates and gradients of the measured layers) do not carry: they declare
``Needs(model=True)``, the design's way to reach the model, and the Monitor hands the
family the model and the data after its data pass (:meth:`Diversity.compute_model`). The
per-sample and probe-mean keys also declare ``linear_factors``: when the data pass takes
per-sample gradients anyway (``gradients=True``), it captures the factors ``(a_x, g_x)``
of every linear layer in the same backward pass and hands them over
(:attr:`~collapselab.families.family.ModelAccess.factors`); otherwise (or beyond the
Monitor's ``cache_bytes``) the family runs one more forward and backward pass over the
measured (train) split. The update key keeps a copy of every linear weight between
measurements.

Distributed mode ``"reduced"``: every value is a function of sums over samples (the
cosine and gating sums, which the engine adds over the processes under
``torch.distributed``; the per-sample M4 values' sum and count and the probe mean's
``sum_x g_x a_xᵀ`` and sample count, which :meth:`Diversity.compute_model` adds over the
processes itself) or of the weights, the same in every process.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from collapselab.checks import check_bool, check_choice, check_finite_stack, split_batch
from collapselab.families.family import (
    SIGNALS,
    Family,
    Key,
    LayerView,
    Layout,
    ModelAccess,
    Needs,
    Values,
)
from collapselab.metrics.diversity import (
    column_cosine_means,
    mean_cosine_similarity,
    mean_gating_similarity,
    pseudo_neuron_similarity,
    stacked_mean_cosine_similarity,
    stacked_per_sample_pseudo_neuron_values,
)
from collapselab.probe import linear_factors
from collapselab.probe.inputs import model_inputs
from collapselab.stats import CosineSimilarityAccumulator, GatingSimilarityAccumulator
from collapselab.stats.pairwise import stacked_sums, update_stacked
from collapselab.stats.scratch import as_float64, scratch, stacked_float64, stacks_by

_SETS = ("cross_class", "within_class", "within_class_pooled", "all")
_SET_TEXT = {
    "cross_class": "over pairs of samples of different classes",
    "within_class": "over same-class pairs, averaged over classes",
    "within_class_pooled": "over all same-class pairs",
    "all": "over all pairs",
}
# (key prefix, signal, where, what) of each group of four pair-set keys.
_GROUPS = (
    ("feature_cosine", "features", "layer", "cos(h_i, h_j) of the features"),
    ("gating_cosine", "gates", "gated", "cos(a_i, a_j) of the gates a = (z > 0)"),
    ("gating_agreement", "gates", "gated", "fraction of units in the same state"),
    ("gradient_cosine", "feature_gradients", "layer", "cos of the per-sample ∂ℓ_i/∂h_i"),
    (
        "preact_gradient_cosine",
        "preactivation_gradients",
        "gated",
        "cos of the per-sample ∂ℓ_i/∂z_i",
    ),
)
_GRADIENT_PREFIXES = ("gradient_cosine", "preact_gradient_cosine")
_MODEL = Needs(model=True)
_FACTORS = Needs(model=True, linear_factors=True)
_WEIGHT_CHANGE_KEYS = (
    Key(
        "pseudo_neuron_cosine_per_sample",
        "E_x mean_{i≠j} cos(Δw_i|_x, Δw_j|_x), ΔW|_x = -η g_x a_xᵀ (degenerate, note A5)",
        "000 M4, Fig. 2c, R8",
        _FACTORS,
        where="weights",
        splits=("train",),
    ),
    Key(
        "pseudo_neuron_cosine_probe_mean",
        "mean_{i≠j} cos(Δw_i, Δw_j) of ΔW = -η/N sum_x g_x a_xᵀ over the measured samples",
        "000 M4, Fig. 2c, R8",
        _FACTORS,
        where="weights",
        splits=("train",),
    ),
    Key(
        "pseudo_neuron_cosine_update",
        "mean_{i≠j} cos(Δw_i, Δw_j) of ΔW = W_now - W_prev (the actual update(s))",
        "000 M4, Fig. 2c, R8",
        _MODEL,
        where="weights",
        splits=("train",),
    ),
    Key(
        "weight_change_steps",
        "optimiser steps between W_prev and W_now of pseudo_neuron_cosine_update",
        "000 M4, R8",
        _MODEL,
        where="weights",
        splits=("train",),
    ),
)
_WEIGHT_CHANGE_NAMES = tuple(k.name for k in _WEIGHT_CHANGE_KEYS)
_FACTOR_NAMES = frozenset({"pseudo_neuron_cosine_per_sample", "pseudo_neuron_cosine_probe_mean"})
_UPDATE_NAMES = frozenset({"pseudo_neuron_cosine_update", "weight_change_steps"})


def _group_keys(prefix: str, signal: str, where: str, what: str) -> tuple[Key, ...]:
    needs = Needs(signals=frozenset({signal}))
    return tuple(
        Key(f"{prefix}_{s}", f"mean {what} {_SET_TEXT[s]}", "000 M2-M3, M14", needs, where=where)
        for s in _SETS
    )


class Diversity(Family):
    """Feature, gating and gradient diversity of every layer.

    Args:
        keys: keys to compute (default: the feature and gating keys, plus the gradient keys
            with ``gradients=True``).
        gradients: also the gradient cosines (the Monitor then takes per-sample gradients
            in pass 1, from one backward pass per batch of the summed per-sample loss).
        zero_vectors: ``"exclude"`` (zero vectors leave every pair) or ``"zero_cosine"``
            (they count with cosine 0); see :mod:`collapselab.metrics.diversity`.
        weight_changes: also the M4 keys of every linear layer (see the module docstring;
            the Monitor then runs this family's procedure on the model).
        schedule: when the Monitor measures this family (a
            :class:`collapselab.track.Schedule`; default: the Monitor's schedule).
    """

    name = "diversity"
    distributed = "reduced"
    keys = (
        *(k for group in _GROUPS for k in _group_keys(*group)),
        Key(
            "feature_zero_vectors",
            "number of samples whose feature vector is exactly zero",
            "000 note A25",
            Needs(signals=frozenset({"features"})),
        ),
        *_WEIGHT_CHANGE_KEYS,
    )

    def __init__(
        self,
        keys: Sequence[str] | None = None,
        *,
        gradients: bool = False,
        zero_vectors: str = "exclude",
        weight_changes: bool = False,
        schedule: Any = None,
    ) -> None:
        self.gradients = check_bool("gradients", gradients)
        self.weight_changes = check_bool("weight_changes", weight_changes)
        super().__init__(keys, schedule=schedule)
        self.zero_vectors = check_choice("zero_vectors", zero_vectors, ("exclude", "zero_cosine"))
        self._previous: dict[str, tuple[int | None, torch.Tensor]] = {}
        # probe-mean M4's sums per group of equal-shape layers, reused buffers
        self._means: dict[tuple[str, ...], torch.Tensor] = {}

    def default_keys(self) -> tuple[str, ...]:
        out = self.own_keys()
        if not self.gradients:
            out = tuple(k for k in out if not k.startswith(_GRADIENT_PREFIXES))
        if not self.weight_changes:
            out = tuple(k for k in out if k not in _WEIGHT_CHANGE_NAMES)
        return out

    def accumulators(self, split: str, layout: Layout, keys: frozenset[str]) -> dict[str, Any]:
        c = layout.n_classes
        wanted = {s for k in keys for s in self.key(k).needs.signals}
        # The gating agreement needs the pattern sums of a GatingSimilarityAccumulator; the
        # gating cosine alone is M2 of the 0/1 patterns (the same sums, fewer of them).
        agreement = any(k.startswith("gating_agreement") for k in keys)
        out: dict[str, Any] = {}
        # In the fixed order of SIGNALS: every process must list its accumulators alike
        # for the distributed reduction (set order varies between processes).
        for signal in (s for s in SIGNALS if s in wanted):
            layers = layout.layers if signal in ("features", "feature_gradients") else layout.gated
            gating = signal == "gates" and agreement
            make = GatingSimilarityAccumulator if gating else CosineSimilarityAccumulator
            out[signal] = {name: make(c) for name in layers}
        return out

    def update(
        self, accs: dict[str, Any], layer: str, signal: str, values: torch.Tensor, y: torch.Tensor
    ) -> None:
        acc = accs.get(signal, {}).get(layer)
        if acc is not None:
            acc.update(values, y)

    def update_signal(
        self, accs: dict[str, Any], signal: str, values: Mapping[str, torch.Tensor], y: torch.Tensor
    ) -> None:
        """The cosine sums of every layer of equal width in a few kernels together
        (:func:`~collapselab.stats.pairwise.update_stacked`: the same values as one layer at
        a time); the gating agreement's sums one layer at a time."""
        by_layer = accs.get(signal)
        if not by_layer:
            return
        widths = {n: int(v.shape[1]) for n, v in values.items()}
        for group in _equal_width_groups(by_layer, widths, int(y.shape[0])):
            if len(group) > 1:
                update_stacked([by_layer[n] for n in group], [values[n] for n in group], y)
            else:
                by_layer[group[0]].update(as_float64("block", values[group[0]]), y)

    def compute_layers(
        self,
        keys: Mapping[str, frozenset[str]],
        layers: Mapping[str, LayerView],
        accs: dict[str, Any],
    ) -> dict[str, Values]:
        """The cosine keys of the layers whose sums :meth:`update_signal` stacked, each
        signal's stack in a few kernels (the same values as :meth:`compute_layer`); the
        layers with any other requested key are left to :meth:`compute_layer`."""
        zero = self.zero_vectors
        results: dict[str, dict[str, Any]] = {}  # layer -> signal -> PairwiseSimilarity
        for signal, by_layer in accs.items():
            if signal not in _STACKABLE:
                continue
            stacks: dict[int, list[str]] = {}  # the members of each stack, in order
            for n, acc in by_layer.items():
                member = acc.stack if isinstance(acc, CosineSimilarityAccumulator) else None
                if member is not None:
                    stacks.setdefault(id(member[0]), []).append(n)
            for group in stacks.values():
                sums = stacked_sums([by_layer[n] for n in group])
                if sums is None:
                    continue
                values = stacked_mean_cosine_similarity(sums, "", zero)
                for n, value in zip(group, values, strict=True):
                    results.setdefault(n, {})[signal] = value
        out: dict[str, Values] = {}
        for name, wanted in keys.items():
            got = results.get(name, {})
            signals = {s for s, group in accs.items() if name in group}
            if not got or set(got) != signals:
                continue  # some signal of this layer was not stacked: compute_layer
            values: Values = {}
            for signal, result in got.items():
                values |= result.as_dict(_STACKABLE[signal])
                if signal == "features":
                    values["feature_zero_vectors"] = float(result.n_zero)
            out[name] = {k: v for k, v in values.items() if k in wanted}
        return out

    def compute_layer(self, keys: frozenset[str], layer: LayerView, accs: dict) -> Values:
        out: Values = {}
        name, zero = layer.name, self.zero_vectors

        def wants(prefix: str) -> bool:
            return any(k.startswith(prefix) for k in keys)

        features = accs.get("features", {}).get(name)
        if features is not None:
            result = mean_cosine_similarity(features, zero)
            out |= result.as_dict("feature_cosine")
            out["feature_zero_vectors"] = float(result.n_zero)
        gates = accs.get("gates", {}).get(name)
        if isinstance(gates, GatingSimilarityAccumulator):
            if wants("gating_cosine"):
                out |= mean_gating_similarity(gates, "cosine", zero).as_dict("gating_cosine")
            out |= mean_gating_similarity(gates, "agreement").as_dict("gating_agreement")
        elif gates is not None:  # the gating cosine alone (see accumulators)
            out |= mean_cosine_similarity(gates, zero).as_dict("gating_cosine")
        for signal, prefix in (
            ("feature_gradients", "gradient_cosine"),
            ("preactivation_gradients", "preact_gradient_cosine"),
        ):
            acc = accs.get(signal, {}).get(name)
            if acc is not None:
                out |= mean_cosine_similarity(acc, zero).as_dict(prefix)
        return {k: v for k, v in out.items() if k in keys}

    # ------------------------------------------------------------------ M4 (model procedure)
    def compute_model(
        self, keys: frozenset[str], access: ModelAccess
    ) -> dict[str, dict[str, Values]]:
        """M4 of every ``nn.Linear`` from its three weight-change sources (module docstring)."""
        names = [n for n, m in access.model.named_modules() if isinstance(m, nn.Linear)]
        if not names:
            raise ValueError("the model has no nn.Linear layer: M4 is defined for linear layers")
        out: dict[str, Values] = {n: {} for n in names}
        if keys & _FACTOR_NAMES:
            for n, values in self._factor_values(keys, access, names).items():
                out[n] |= values
        if keys & _UPDATE_NAMES:
            modules = dict(access.model.named_modules())
            for n in names:
                out[n] |= self._update_values(keys, n, modules[n].weight, access.step)
        return {"train": out}

    def _factor_values(
        self, keys: frozenset[str], access: ModelAccess, names: list[str]
    ) -> dict[str, Values]:
        """The per-sample and probe-mean M4 of every linear layer, from the factors; the
        layers of equal shape together, stacked (row-wise kernels: the same values as one
        layer at a time)."""
        per_sample = "pseudo_neuron_cosine_per_sample" in keys
        probe_mean = "pseudo_neuron_cosine_probe_mean" in keys
        sums = {n: [0.0, 0] for n in names}  # per-sample M4: sum of defined values, count
        started: set[tuple[str, ...]] = set()  # groups whose sum_x g_x a_xᵀ has a first batch
        groups: list[tuple[str, ...]] = []
        n_rows = 0
        for cap in _factor_batches(access, names):
            n_rows += cap.logits.shape[0]
            groups = groups or _equal_shape_linears(cap, names)
            for group in groups:
                g = stacked_float64("m4_g", [cap.pre_grads[n] for n in group])
                a = stacked_float64("m4_a", [cap.inputs[n] for n in group])
                check_finite_stack("pre_grads", g)
                check_finite_stack("inputs", a)
                if per_sample:
                    vals = stacked_per_sample_pseudo_neuron_values(g, a, self.zero_vectors)
                    ok = ~torch.isnan(vals)
                    counts = ok.sum(dim=1).tolist()
                    for n, v, defined, count in zip(group, vals, ok, counts, strict=True):
                        sums[n][0] += float(v[defined].sum())
                        sums[n][1] += count
                if probe_mean:
                    self._add_mean_product(group, g, a, first=group not in started)
                    started.add(group)
        if access.processes.active:
            n_rows = self._sum_over_processes(access, names, groups, sums, n_rows, probe_mean)
        out: dict[str, Values] = {n: {} for n in names}
        if not n_rows:
            return out
        for group in groups:
            if per_sample:
                for n in group:
                    total, count = sums[n]
                    out[n]["pseudo_neuron_cosine_per_sample"] = (
                        total / count if count else float("nan")
                    )
            if probe_mean:
                means = self._means[group].div_(n_rows)
                check_finite_stack("delta_w", means)
                values = column_cosine_means(means, self.zero_vectors)
                for n, value in zip(group, values, strict=True):
                    out[n]["pseudo_neuron_cosine_probe_mean"] = value
        return out

    def _sum_over_processes(
        self,
        access: ModelAccess,
        names: list[str],
        groups: list[tuple[str, ...]],
        sums: dict[str, list[float]],
        n_rows: int,
        probe_mean: bool,
    ) -> int:
        """The M4 sums of this process's shard made sums over the whole data, in place:
        per layer, the per-sample values' sum and count and the probe mean's
        ``sum_x g_x a_xᵀ`` (layer by layer: the processes may stack the layers otherwise);
        returns the total sample count."""
        totals = torch.tensor([sums[n] for n in names], dtype=torch.float64)
        rows = torch.tensor([float(n_rows)], dtype=torch.float64)
        products = []
        if probe_mean:
            where = {n: (group, i) for group in groups for i, n in enumerate(group)}
            products = [self._means[where[n][0]][where[n][1]] for n in names]
        access.processes.sum([totals, rows, *products])
        for n, (total, count) in zip(names, totals.tolist(), strict=True):
            sums[n] = [total, int(count)]
        return int(rows.item())

    def _add_mean_product(
        self, group: tuple[str, ...], g: torch.Tensor, a: torch.Tensor, first: bool
    ) -> None:
        """``sum_x g_x a_xᵀ`` of the layers ``group`` += ``gᵀ a`` (stacks ``(L, n, h)``,
        ``(L, n, d)``), in an ``(L, h, d)`` buffer kept for the next measurement (a fresh
        multi-MiB result per layer costs page faults). One product per layer: a batched
        product of small matrices may sum in another order."""
        shape = (g.shape[0], g.shape[2], a.shape[2])
        buffer = self._means.get(group)
        if buffer is None or tuple(buffer.shape) != shape or buffer.device != g.device:
            buffer = self._means[group] = torch.empty(shape, dtype=torch.float64, device=g.device)
        product = buffer if first else scratch("m4_product", shape, g)
        for g_i, a_i, out in zip(g, a, product, strict=True):
            torch.matmul(g_i.T, a_i, out=out)
        if not first:
            buffer.add_(product)

    def _update_values(
        self, keys: frozenset[str], name: str, weight: torch.Tensor, step: int | None
    ) -> Values:
        """M4 of the weights now minus the weights at the previous measurement."""
        values: Values = {}
        w_now = weight.detach().to(torch.float64).clone()
        prev = self._previous.get(name)
        if prev is not None and prev[0] is not None and step is not None:
            values["pseudo_neuron_cosine_update"] = pseudo_neuron_similarity(
                w_now - prev[1].to(w_now.device), self.zero_vectors
            )
            values["weight_change_steps"] = float(step - prev[0])
        self._previous[name] = (step, w_now)
        return {k: v for k, v in values.items() if k in keys}


_STACKABLE = {
    "features": "feature_cosine",
    "gates": "gating_cosine",
    "feature_gradients": "gradient_cosine",
    "preactivation_gradients": "preact_gradient_cosine",
}
"""The signals whose cosine sums may be stacked, and their keys' prefixes (the gates only
while their accumulators are CosineSimilarityAccumulators: no agreement requested)."""


def _equal_width_groups(
    by_layer: Mapping[str, Any], dims: Mapping[str, int], rows: int
) -> list[list[str]]:
    """The layers of ``by_layer`` with a known width, in order, grouped: the
    :class:`~collapselab.stats.CosineSimilarityAccumulator` layers by width, in stacks of
    at most :data:`~collapselab.stats.scratch.STACK_BYTES` of float64 blocks of ``rows``
    rows, every other accumulator (a gating agreement's) alone."""

    def key(name: str) -> Any:
        stackable = isinstance(by_layer[name], CosineSimilarityAccumulator)
        return dims[name] if stackable else ("alone", name)

    return stacks_by(
        [name for name in by_layer if name in dims],
        key,
        lambda k: 8 * rows * k if isinstance(k, int) else 0,  # an "alone" group has one
    )


def _equal_shape_linears(cap: Any, names: list[str]) -> list[tuple[str, ...]]:
    """The linear layers ``names`` grouped by the shapes of their factors ``(h, d)``, in
    order of first appearance, in stacks of at most
    :data:`~collapselab.stats.scratch.STACK_BYTES` (per layer, the larger of its factors
    and its product ``(h, d)``)."""
    rows = int(cap.logits.shape[0])
    stacks = stacks_by(
        names,
        key=lambda n: (int(cap.pre_grads[n].shape[1]), int(cap.inputs[n].shape[1])),
        item_bytes=lambda hd: 8 * max(rows * (hd[0] + hd[1]), hd[0] * hd[1]),
    )
    return [tuple(stack) for stack in stacks]


def _factor_batches(access: ModelAccess, names: list[str]) -> Iterator[Any]:
    """The train split's per-batch factors of ``names``: the data pass's when it kept them
    (:attr:`ModelAccess.factors`), else from one forward and backward pass per batch."""
    if access.factors is not None:
        yield from access.factors
        return
    for batch in access.data["train"]:
        x, y = split_batch(batch)  # the inputs as the data pass gives them to the model
        x, y = model_inputs(access.model, x, access.device), y.to(access.device)
        yield linear_factors(access.model, x, y, names, loss_fn=access.loss)
