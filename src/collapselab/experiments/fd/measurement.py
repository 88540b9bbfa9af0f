r"""Per-iteration measurement of a training run (paper 000, §3 M1-M5, R4-R9).

During training, on a schedule of iterations, every hidden layer of the MLP is measured at
once on a fixed, class-stratified **probe set** (:func:`probe_indices`):

* by the :class:`~collapselab.track.Monitor` with the ``diversity`` family: M2 (feature
  cosines, cross-class / within-class / all pairs), M3 (per-sample feature-gradient cosines)
  and the gating similarity (M14) of every layer ``layers.{i}.act``;
* M4, the pseudo-neuron cosine of the weight change of every linear layer
  ``layers.{i}.linear``, from three sources (note A5, R8):

  - ``m4_batch``: the actual update ``W_t - W_{t-1}`` of the step just taken (momentum and
    weight decay included): the recorder keeps the weights before each scheduled step
    (the family's own ``pseudo_neuron_cosine_update`` would span the steps between two
    measurements);
  - ``m4_probe_mean``: the probe-set mean of the per-sample changes, from their rank-1
    factors (the family's ``pseudo_neuron_cosine_probe_mean``);
  - ``m4_per_sample``: the paper's formula taken literally on per-sample changes, which is
    degenerate (1 for post-ReLU inputs): recorded to show it (the family's
    ``pseudo_neuron_cosine_per_sample``);

* the training loss (cross-entropy) and accuracy on a fixed class-stratified subset of the
  training set (M1; the paper uses the whole set, which costs a forward pass over it at
  every measurement), or, without a loss subset (``loss_set=None``), on the probe set from
  the logits of the Monitor's own forward pass, at no cost. The loss subset's forward pass
  is the largest single cost of a measurement of a wide network (1,000 samples: about 30%
  of the 10 training steps between two measurements at width 512). The probe is a
  class-stratified sample of the training set too, and the curve's purposes (the plateau
  and its end at a drop of a few percent of the initial loss, note A14) need its shape over
  training, not the training-set mean to the last digit: the sample is fixed, so its
  difference from that mean changes smoothly over training instead of adding noise between
  points; it is larger for a smaller sample. The presets take the probe's loss.

When to measure (:func:`boundary_schedule`, a :class:`collapselab.track.Schedule` of
iterations). The phase boundary is not known in advance: it is the peak of a smoothed curve,
found from the points after it, and the window of dense measurements starts before it. So
it is not a schedule decided during one pass but a replay protocol, and a run is measured
in two passes of the same deterministic training (same seed, same batches; the measurement
does not change the trajectory, see :func:`measure_training`), each on a plain schedule:

1. every ``every`` iterations up to the budget; phase detection on that curve (the smoothed
   peak of M2 at the configured layer, and the end of the loss plateau);
2. a **replay** of training from the start up to the end of the window
   ``[boundary - half_window, boundary + half_window]`` around the detected M2 peak, measured
   every ``dense_every`` iterations inside it (the steps pass 1 measured are not repeated).

Training is far cheaper than measuring, so the replay costs little: up to the window's end,
only the steps. A run that never leaves phase 1 (the loss never drops, a "stuck" run) has no
boundary: it gets no dense window and the detection says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from collapselab.checks import check_int
from collapselab.data import DataSplits, LabeledData
from collapselab.families.builtin import Diversity
from collapselab.metrics.diversity import pseudo_neuron_similarities
from collapselab.models import MLP
from collapselab.probe import eval_mode
from collapselab.track import Monitor, Schedule, dense_window
from collapselab.train import TrainConfig, train

__all__ = [
    "DIVERSITY_KEYS",
    "M4_SOURCES",
    "DiversityRecorder",
    "Trajectory",
    "boundary_schedule",
    "class_stratified",
    "measure_training",
    "probe_indices",
]

DIVERSITY_KEYS = (
    "feature_cosine_cross_class",
    "feature_cosine_within_class",
    "feature_cosine_all",
    "gradient_cosine_within_class",
    "gating_cosine_cross_class",
)
"""The ``diversity`` family's keys recorded per hidden layer (M2, M3, M14)."""

M4_SOURCES = ("m4_batch", "m4_probe_mean", "m4_per_sample")
"""The three weight-change sources of M4 (module docstring)."""

_FAMILY_M4 = {
    "m4_probe_mean": "pseudo_neuron_cosine_probe_mean",
    "m4_per_sample": "pseudo_neuron_cosine_per_sample",
}


def class_stratified(
    labels: torch.Tensor, per_class: int, seed: int, what: str = "the probe set"
) -> torch.Tensor:
    """Indices of ``per_class`` samples of every class, drawn without replacement with a
    generator seeded by ``seed``, sorted. ValueError naming the class and ``what`` needs
    them when one has fewer."""
    per_class = check_int("per_class", per_class, minimum=1)
    gen = torch.Generator().manual_seed(int(seed))
    chosen = []
    n_classes = int(labels.max()) + 1 if labels.numel() else 0
    for c in range(n_classes):
        members = torch.nonzero(labels == c).flatten()
        if members.numel() < per_class:
            raise ValueError(
                f"class {c} has {members.numel()} training samples; {what} needs "
                f"{per_class} of every class"
            )
        chosen.append(members[torch.randperm(members.numel(), generator=gen)[:per_class]])
    return torch.sort(torch.cat(chosen)).values


def probe_indices(data: LabeledData, per_class: int, seed: int) -> torch.Tensor:
    """The fixed class-stratified probe set of a training split (R3): ``per_class`` samples
    of each of its ``n_classes`` classes (every class must be present)."""
    counts = torch.bincount(data.y, minlength=data.n_classes)
    missing = [c for c in range(data.n_classes) if int(counts[c]) == 0]
    if missing:
        raise ValueError(
            f"the training set has no sample of classes {missing}; the probe set needs every class"
        )
    return class_stratified(data.y, per_class, seed)


def boundary_schedule(
    every: int,
    dense_every: int = 1,
    window: tuple[int, int] | None = None,
    *,
    replay: bool = False,
) -> Schedule:
    """Every ``every`` iterations (step 0 included) and, inside the dense window
    ``[lo, hi]``, every ``dense_every`` iterations counted from ``lo``; with ``replay``, only
    the window's steps the coarse schedule leaves out (a replay that adds the dense steps).
    """
    dense = [] if window is None else dense_window(*window, dense_every)
    if not replay:
        return Schedule.build(None, every_iterations=every, iterations=dense, initial=True)
    coarse = Schedule.build(None, every_iterations=every, initial=True)
    extra = [t for t in dense if not coarse.at_step(t)]
    return Schedule.build(None, iterations=extra, initial=False)


class DiversityRecorder:
    """A training callback that measures the model on the schedule (module docstring).

    Records into :attr:`rows`: one dict per measured step with ``step``, ``loss``,
    ``accuracy`` and ``<key>/<layer>`` for every diversity key of every hidden layer and
    every M4 source of every hidden linear layer. ``loss`` and ``accuracy`` are those of
    ``loss_set``, or of the probe set when it is ``None`` (from the Monitor's forward pass).
    The steps measured are those of ``schedule`` (:meth:`~collapselab.track.Schedule.at_step`);
    ``stop`` is the last step to train to (``None``: the training budget).
    """

    def __init__(
        self,
        model: MLP,
        probe: LabeledData,
        loss_set: LabeledData | None,
        schedule: Schedule,
        lr: float,
        stop: int | None = None,
    ) -> None:
        self.model, self.probe, self.loss_set = model, probe, loss_set
        self.schedule, self.lr, self.stop = schedule, float(lr), stop
        self.linears = [f"layers.{i}.linear" for i in range(len(model.layers))]
        self.monitor = Monitor(
            model,
            # The probe as one batch: the values of a loader with one batch, without
            # collating it sample by sample at every measurement.
            [(probe.x, probe.y)],
            families=[
                Diversity(
                    (*DIVERSITY_KEYS, *_FAMILY_M4.values()), gradients=True, weight_changes=True
                )
            ],
            layers=model.feature_layers,
            schedule=None,
            initial=False,
        )
        self.rows: list[dict[str, float]] = []
        self._before: dict[str, torch.Tensor] | None = None

    # ------------------------------------------------------------------ callback hooks
    def on_train_start(self, state: Any) -> None:
        if self.schedule.at_step(0):
            self._measure(0, batch_update=None)
        self._keep_weights_if_next_due(0)

    def on_iteration_end(self, state: Any) -> None:
        t = state.iteration
        if self.schedule.at_step(t):
            self._measure(t, batch_update=self._update())
        self._keep_weights_if_next_due(t)
        if self.stop is not None and t >= self.stop:
            state.request_stop("replayed the phase-boundary window")

    # ------------------------------------------------------------------ internals
    def _weights(self) -> dict[str, torch.Tensor]:
        modules = dict(self.model.named_modules())
        return {name: modules[name].weight.detach().clone() for name in self.linears}

    def _keep_weights_if_next_due(self, step: int) -> None:
        self._before = self._weights() if self.schedule.at_step(step + 1) else None

    def _update(self) -> dict[str, torch.Tensor] | None:
        if self._before is None:
            return None
        after = self._weights()
        return {name: after[name] - self._before[name] for name in self.linears}

    def _measure(self, step: int, batch_update: dict[str, torch.Tensor] | None) -> None:
        row: dict[str, float] = {"step": float(step)}
        if self.loss_set is not None:
            row |= _loss_and_accuracy(self.model, self.loss_set)
            results = self.monitor.measure_now(step=step, log=False, epoch_end=False)["train"]
        else:
            logits: list[torch.Tensor] = []
            handle = self.model.register_forward_hook(
                lambda _module, _args, out: logits.append(out.detach())
            )
            try:
                results = self.monitor.measure_now(step=step, log=False, epoch_end=False)
            finally:
                handle.remove()
            # The sweep's forward pass over the probe (one batch) comes first.
            if not logits or logits[0].shape[0] != len(self.probe):
                raise RuntimeError("the Monitor's first forward pass was not over the probe set")
            row |= _loss_and_accuracy_of(logits[0], self.probe.y)
            results = results["train"]
        for layer in self.model.feature_layers:
            for key in DIVERSITY_KEYS:
                row[f"{key}/{layer}"] = float(results[layer].get(key, np.nan))
        # the layers of equal shape together (the values of pseudo_neuron_similarity)
        m4_batch = pseudo_neuron_similarities(batch_update) if batch_update else {}
        for name in self.linears:
            for column, key in _FAMILY_M4.items():
                row[f"{column}/{name}"] = float(results[name].get(key, np.nan))
            row[f"m4_batch/{name}"] = m4_batch.get(name, float("nan"))
        self.rows.append(row)


def _loss_and_accuracy(model: nn.Module, data: LabeledData) -> dict[str, float]:
    """Mean cross-entropy and accuracy of ``model`` on ``data`` (eval mode, no gradient)."""
    with eval_mode(model), torch.no_grad():
        return _loss_and_accuracy_of(model(data.x), data.y)


def _loss_and_accuracy_of(logits: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Mean cross-entropy (in float64) and accuracy of ``logits`` against ``labels``."""
    loss = float(nn.functional.cross_entropy(logits.double(), labels))
    accuracy = float((logits.argmax(dim=1) == labels).double().mean())
    return {"loss": loss, "accuracy": accuracy}


@dataclass
class Trajectory:
    """The measured curves of one run: ``steps`` and one array per recorded column.

    Attributes:
        steps: ``(T,)`` measured iterations, increasing.
        columns: ``name -> (T,)`` (``loss``, ``accuracy``, ``<key>/<layer>``).
        dense_window: ``(lo, hi)`` of the replayed window, or ``None``.
        stopped: why training stopped early (a non-finite loss), or ``None``.
    """

    steps: np.ndarray
    columns: dict[str, np.ndarray]
    dense_window: tuple[int, int] | None
    stopped: str | None

    def curve(self, key: str, layer: str | None = None) -> np.ndarray:
        """The column ``key`` (of ``layer``), as float64."""
        name = key if layer is None else f"{key}/{layer}"
        if name not in self.columns:
            raise KeyError(f"no recorded curve {name!r}; recorded: {sorted(self.columns)[:8]}...")
        return self.columns[name]


def _trajectory(
    rows: list[dict[str, float]], window: tuple[int, int] | None, stopped: str | None
) -> Trajectory:
    rows = sorted(rows, key=lambda r: r["step"])
    names = [k for k in rows[0] if k != "step"] if rows else []
    steps = np.array([r["step"] for r in rows], dtype=np.int64)
    columns = {k: np.array([r.get(k, np.nan) for r in rows], dtype=np.float64) for k in names}
    return Trajectory(steps, columns, window, stopped)


def measure_training(
    build_model: Any,
    data: DataSplits,
    train_config: TrainConfig,
    probe: LabeledData,
    loss_set: LabeledData | None,
    *,
    every: int,
    dense_every: int,
    half_window: int,
    locate: Any,
    stop: int | None = None,
    callbacks: Sequence[Any] = (),
) -> tuple[Trajectory, Any]:
    """Train a fresh model (``build_model()``) with the coarse schedule, locate the phase
    boundary (``locate(trajectory) -> step or None``), then replay training up to the
    window's end, measuring densely inside it (module docstring). ``stop``: the last step
    to train to (default: the epochs of ``train_config``). Returns the merged trajectory
    and the model of the full (first) pass.
    """
    model = build_model()
    schedule = boundary_schedule(every)
    coarse = DiversityRecorder(model, probe, loss_set, schedule, train_config.lr, stop)
    result = train(model, data, train_config, [coarse, *callbacks], None)
    stopped = result.error
    first = _trajectory(coarse.rows, None, stopped)
    boundary = locate(first) if coarse.rows else None
    if boundary is None or dense_every >= every or half_window <= 0:
        return first, model
    lo = max(int(boundary) - half_window, 0)
    hi = min(int(boundary) + half_window, int(first.steps[-1]))
    replay_schedule = boundary_schedule(every, dense_every, (lo, hi), replay=True)
    replay_model = build_model()
    dense = DiversityRecorder(replay_model, probe, loss_set, replay_schedule, train_config.lr, hi)
    train(replay_model, data, train_config, [dense], None)
    return _trajectory(coarse.rows + dense.rows, (lo, hi), stopped), model


def columns_by_layer(trajectory: Trajectory, key: str, layers: Sequence[str]) -> np.ndarray:
    """``(T, L)`` matrix of ``key`` over the given layers."""
    return np.stack([trajectory.curve(key, layer) for layer in layers], axis=1)


def as_arrays(trajectory: Trajectory, model_layers: Mapping[str, Sequence[str]]) -> dict:
    """The trajectory as plain arrays for a run's ``.npz``: ``steps``, ``loss``,
    ``accuracy`` and one ``(T, L)`` matrix per key over ``model_layers[key]``."""
    out: dict[str, Any] = {
        "steps": trajectory.steps,
        "loss": trajectory.curve("loss"),
        "accuracy": trajectory.curve("accuracy"),
        "dense_window": np.array(trajectory.dense_window or (-1, -1), dtype=np.int64),
    }
    for key, layers in model_layers.items():
        out[key] = columns_by_layer(trajectory, key, layers)
    return out
