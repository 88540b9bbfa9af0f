r"""``pcbias-loc``: learning-order constancy of linear nets, natural vs whitened data, and
real vs shuffled labels (paper 002 Fig. 7a, Fig. 10; note 002 §5 items 6-7, §7 items 9, 16).

The networks are the paper's linear FC nets trained as the paper trains them (§3.1, App. D;
:mod:`~collapselab.experiments.pcbias.linear_sgd`): Glorot uniform, 0.5 dropout before the
output layer, minibatch SGD without momentum or weight decay on cross-entropy, the learning
rate coarsely grid-searched per setup to minimise a validation error.

* Fig. 7a (§4.3: "4 ensembles of N=10 1-layered linear networks on the cats and dogs
  dataset, 2 with and 2 without ZCA-whitening"): per condition (natural, ZCA-whitened) two
  independent ensembles of one-layer nets give two accessibility vectors over the training
  examples (:func:`~collapselab.metrics.pcbias.accessibility`); their correlation is the
  LOC score, on all examples and on the fastest 20%
  (:func:`~collapselab.metrics.pcbias.loc_correlation`; Pearson and Spearman).
* Fig. 7b (§4.3: "2 collections of N=10 VGG-19 networks on CIFAR-10"): the same, with
  non-linear networks. Here the two-layer nets of Fig. 10 with a ReLU after the hidden
  layer (:class:`~collapselab.models.DeepReLU`: the same width, init, dropout, optimiser
  and rate search), so that the non-linearity is the only change from a linear net; its
  keys in ``loc.npz`` carry the prefix ``nonlinear_``. The claims compare its drop with the
  one-layer linear nets' (the paper compares its Fig. 7a nets with VGG-19).
* Fig. 10 (App. D: "10 2-layers fully connected linear networks trained over the cats and
  dogs dataset"): per condition one ensemble of two-layer nets (``hidden_labels``, 1024 at
  ``standard``) on the real labels and one, from the same initial weights and batch order,
  on fully shuffled training labels; the claims time the rise of their mean training
  accuracy (the crossing interpolated between the checkpoints around it).

The learning rate (§3.1: "coarsely grid-searched to minimize a validation error"; App. D:
"in every experimental setup"): per setup, i.e. architecture (one layer, Fig. 7a; two
layers, Fig. 10) and data (natural, whitened), one network per rate of the grid ``rates``
(factors of 10) is trained on the real labels for the same ``epochs`` as the ensembles; the
rate whose network has the smallest error on the test split after the last epoch is used
(:func:`~collapselab.experiments.pcbias.linear_sgd.select_rate`: ties to the smaller rate; a
diverged network counts as error 1). The test split serves as the validation set: no claim
of this experiment reads a test accuracy. The shuffled-label ensemble takes its condition's
rate (with shuffled labels every rate's validation error is chance; Fig. 10 compares the
same networks on the same images). This replaces the earlier time matching (rates as
fractions of the stability limit of exact GD), which note 002 §7 item 9 left to the
implementer and the paper settles by its grid search.

Accessibility is the mean correctness over the **learning phase**: the checkpoints after
step 0 where the ensemble's mean training accuracy is below 95% of the lowest of the four
LOC ensembles' final accuracies (of the same setup: linear and non-linear nets each have
their own learning phase); the checkpoints are log-spaced SGD steps, each weighted by
the steps it stands for, held until the next (:func:`~collapselab.metrics.pcbias.
checkpoint_weights`): the paper's mean over epochs, at a finer resolution than an epoch.

Stored: ``arrays/loc.npz`` (per condition ``accessibility_<cond>`` ``(2, n)``,
``window_<cond>`` the learning-phase mask, ``steps_<cond>``, ``weights_<cond>`` the
steps each checkpoint stands for, ``accuracy_<cond>`` ``(2, S)``
ensemble means, ``pearson_<cond>``, ``spearman_<cond>`` and ``..._fastest`` on the 20%
ranked by the first ensemble; ``pearson_<cond>_fastest_mean_rank`` ranked by both ensembles'
mean, the reading that biases the correlation down; ``steps_per_epoch``;
``test_accessibility_<cond>`` ``(2, n_test)``, the same mean on the test split, which no
claim reads); ``arrays/labels.npz`` (per ``<cond>_<labels>``: ``steps``, ``accuracy``,
``loss`` (cross-entropy) and ``test_accuracy`` ``(N, S)``; with ``eval_transforms``,
``eval`` ``(N, S, len)`` the test accuracies on the transformed copies);
``arrays/rates.npz`` (per ``<setup>_<cond>``, setup ``loc``, ``labels`` or ``nonlinear``:
``rates``, ``errors``, ``chosen``); rows of split ``loc`` (``layer`` the condition,
``nonlinear_<cond>`` for Fig. 7b's nets). Every ``loc.npz`` key above but
``steps_per_epoch`` also exists with the prefix ``nonlinear_`` for Fig. 7b's ensembles
(runs from before Fig. 7b lack them; its claims are then not evaluable).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.data import DataSpec
from collapselab.experiments.gpu_hours import Training, forward_flops
from collapselab.experiments.pcbias._common import (
    data_variant,
    read_inputs,
    run_ensemble,
    run_ensembles,
    run_fields,
    stacked,
)
from collapselab.experiments.pcbias.image_nets import image_network
from collapselab.experiments.pcbias.linear_sgd import (
    LinearSGDMember,
    select_rate,
    sgd_checkpoints,
)
from collapselab.experiments.pcbias.presets import LocPreset
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pcbias import accessibility, checkpoint_weights, loc_correlation
from collapselab.models import DeepLinear, DeepReLU
from collapselab.store import Run

__all__ = ["CONDITIONS", "FASTEST", "LOC_SETUPS", "SETUPS", "loc_dry_run", "run_loc"]

CONDITIONS = ("natural", "whitened")

SETUPS = ("loc", "labels", "nonlinear")
"""Fig. 7a's one-layer nets, Fig. 10's two-layer nets and Fig. 7b's non-linear nets (the
two-layer nets with a ReLU): each has its own rate search."""

LOC_SETUPS = {"loc": "", "nonlinear": "nonlinear_"}
"""The setups whose ensembles give LOC scores, and the prefix of their keys in ``loc.npz``
(Fig. 7a's keys keep no prefix, as before Fig. 7b was added)."""

PHASE = 0.95
"""The learning phase ends at this fraction of the lower final mean training accuracy."""

FASTEST = 0.2
"""The fastest fraction of examples (Fig. 7's "20% fastest learned")."""


def _hidden(preset: LocPreset, setup: str) -> tuple[int, ...]:
    return () if setup == "loc" else preset.hidden_labels


def _data(preset: LocPreset, setup: str) -> DataSpec:
    """The data of ``setup``'s networks: Fig. 7b's own (``nonlinear_data``) or ``data``."""
    if setup == "nonlinear" and preset.nonlinear_data is not None:
        return preset.nonlinear_data
    return preset.data


def _member(
    preset: LocPreset,
    context: RunContext,
    setup: str,
    condition: str,
    *,
    shuffle: bool = False,
    **fields: Any,
) -> LinearSGDMember:
    """Member 0 of an ensemble of ``setup`` on ``condition``'s data (``shuffle``: on
    shuffled training labels); ``fields``: its rate, what it records and its ``seed`` (in
    place of the run's; the data keep the run's seed)."""
    whiten = preset.zca_eps if condition == "whitened" else None
    data = data_variant(_data(preset, setup), shuffle=1.0 if shuffle else 0.0, whiten=whiten)
    if setup == "nonlinear" and preset.nonlinear_net != "fc":  # Fig. 7b's own VGG-19s
        fields = {"network": preset.nonlinear_net, "device": context.device, **fields}
    return LinearSGDMember(
        data=data, hidden=_hidden(preset, setup),
        activation="relu" if setup == "nonlinear" else "none", init=preset.init,
        dropout=preset.dropout, batch_size=preset.batch_size, epochs=preset.epochs,
        checkpoints=preset.checkpoints, eval_transforms=preset.eval_transforms,
        **{**run_fields(context), **fields},
    )  # fmt: skip


def _search_rates(preset: LocPreset, run: Run, context: RunContext) -> dict[str, Any]:
    """The grid search: one network per (setup, condition, rate), trained on the real
    labels, its test error after the last epoch; the chosen rate per setup and condition."""
    probes, keys = [], []
    for setup in SETUPS:
        for condition in CONDITIONS:
            for rate in preset.rates:  # one seed for the whole grid: the rates see the same init
                probe = _member(preset, context, setup, condition, lr=rate,
                                seed=4 * context.seed + 3, allow_divergence=True)  # fmt: skip
                probes.append(probe)
                keys.append(f"{setup}_{condition}")
    with serial_threads():
        found = run_ensemble(probes, run, context, "rates", batched=preset.batched)
    out: dict[str, Any] = {}
    for key in dict.fromkeys(keys):
        errors = [r["test_error"] for r, k in zip(found, keys, strict=True) if k == key]
        out[f"{key}_rates"] = np.asarray(preset.rates)
        out[f"{key}_errors"] = np.asarray(errors)
        out[f"{key}_chosen"] = np.float64(select_rate(preset.rates, errors))
    return out


def run_loc(run: Run, context: RunContext) -> None:
    """The rate search, then two one-layer linear and two non-linear ensembles per condition
    for LOC (Figs. 7a, 7b) and a real- and a shuffled-label two-layer ensemble per condition
    for Fig. 10."""
    preset: LocPreset = context.config
    chosen = _search_rates(preset, run, context)
    run.save_array("rates", **chosen)
    seed = 4 * context.seed
    first = {}
    for condition in CONDITIONS:
        for setup in LOC_SETUPS:
            rate = float(chosen[f"{setup}_{condition}_chosen"])
            for k in range(2):
                first[f"{setup}_{condition}_{k}"] = _member(
                    preset, context, setup, condition, lr=rate, seed=seed + k, record_correct=True
                )
        for kind in ("real", "shuffled"):
            first[f"labels_{condition}_{kind}"] = _member(
                preset, context, "labels", condition, shuffle=kind == "shuffled",
                lr=float(chosen[f"labels_{condition}_chosen"]), seed=seed + 2)  # fmt: skip
    ensembles = {label: member.ensemble(preset.members) for label, member in first.items()}
    with serial_threads():
        found = run_ensembles(ensembles, run, context, batched=preset.batched)
    labels = {f"{condition}_{kind}": _curves(found[f"labels_{condition}_{kind}"])
              for condition in CONDITIONS for kind in ("real", "shuffled")}  # fmt: skip
    loc = {}
    for setup in LOC_SETUPS:
        loc |= _learning_order(found, run, setup)
    run.save_array("loc", **loc)
    run.save_array("labels", **{f"{k}_{key}": v for k, d in labels.items() for key, v in d.items()})
    run.flush()


def _curves(results: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """One ensemble's learning curves, ``(N, S)`` each, and its checkpoints; with
    ``eval_transforms``, ``eval`` ``(N, S, len)``, the test accuracies on the transformed
    copies."""
    curves = {"steps": results[0]["steps"],
              "accuracy": np.stack([r["train_accuracy"] for r in results]),
              "loss": np.stack([r["train_loss"] for r in results]),
              "test_accuracy": np.stack([r["test_accuracy"] for r in results])}  # fmt: skip
    evaluated = stacked(results, "eval_accuracy")
    return curves if evaluated is None else {**curves, "eval": evaluated}


def _learning_order(
    found: dict[str, list[dict[str, Any]]], run: Run, setup: str = "loc"
) -> dict[str, Any]:
    """Accessibility over the learning phase and the LOC correlations of each condition for
    the ensembles of ``setup`` (keys prefixed by :data:`LOC_SETUPS`)."""
    prefix = LOC_SETUPS[setup]
    correct, test_correct, curves = {}, {}, {}
    for condition in CONDITIONS:
        for k in range(2):
            results = found[f"{setup}_{condition}_{k}"]
            correct[condition, k] = np.stack([r["correct"] for r in results])  # (N, S, n)
            test_correct[condition, k] = stacked(results, "test_correct")  # (N, S, n_test)
            curves[condition, k] = np.stack([r["train_accuracy"] for r in results]).mean(0)
    level = PHASE * min(float(curve[-1]) for curve in curves.values())
    first = found[f"{setup}_{CONDITIONS[0]}_0"][0]
    arrays: dict[str, Any] = {f"{prefix}level": np.float64(level),
                              "steps_per_epoch": np.int64(first["steps_per_epoch"])}  # fmt: skip
    for condition in CONDITIONS:
        window = np.all([curves[condition, k] < level for k in range(2)], axis=0)
        window[0] = False  # step 0: the untrained networks
        if window.sum() < 2:
            raise ValueError(f"{setup}, {condition}: fewer than 2 checkpoints in the learning "
                             "phase; give more checkpoints")  # fmt: skip
        steps = found[f"{setup}_{condition}_0"][0]["steps"]
        weights = checkpoint_weights(steps, steps[-1] + 1)  # the last: the final step only
        access = np.stack([accessibility(correct[condition, k][:, window], weights[window])
                           for k in range(2)])  # fmt: skip
        if all(test_correct[condition, k] is not None for k in range(2)):
            arrays[f"{prefix}test_accessibility_{condition}"] = np.stack(
                [accessibility(test_correct[condition, k][:, window], weights[window])
                 for k in range(2)])  # fmt: skip
        every = loc_correlation(access[0], access[1])
        fastest = loc_correlation(access[0], access[1], FASTEST)  # ranked by ensemble 0
        # The other reading of Fig. 7's subset, kept for comparison: ranking by the mean of
        # the two ensembles biases the subset's correlation down (metrics.pcbias).
        by_mean = loc_correlation(access[0], access[1], FASTEST, rank_by="mean")
        arrays |= {
            f"{prefix}{key}": value
            for key, value in {
                f"accessibility_{condition}": access,
                f"window_{condition}": window,
                f"steps_{condition}": steps,
                f"weights_{condition}": weights,
                f"accuracy_{condition}": np.stack([curves[condition, k] for k in range(2)]),
                f"pearson_{condition}": np.float64(every.pearson),
                f"spearman_{condition}": np.float64(every.spearman),
                f"pearson_{condition}_fastest": np.float64(fastest.pearson),
                f"spearman_{condition}_fastest": np.float64(fastest.spearman),
                f"pearson_{condition}_fastest_mean_rank": np.float64(by_mean.pearson),
            }.items()
        }
        run.log_dict(0, {"loc_pearson": every.pearson, "loc_spearman": every.spearman,
                         "loc_pearson_fastest": fastest.pearson,
                         "loc_spearman_fastest": fastest.spearman},
                     split="loc", layer=f"{prefix}{condition}")  # fmt: skip
    return arrays


def loc_dry_run(
    config: LocPreset, data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """What ``pcbias-loc`` would train, without training (the paper preset's check on local
    files): the data read, standardised and whitened, one network of each setup built."""
    folder = None if data_dir is None else str(data_dir)
    inputs = read_inputs(data_variant(config.data, whiten=config.zca_eps), folder, seed)
    q, k = inputs.x.shape[1], inputs.n_classes
    built = {setup: [q, *_hidden(config, setup), k] for setup in SETUPS}
    nets = [(DeepReLU if setup == "nonlinear" else DeepLinear)(
                w, init=config.init, dropout=config.dropout)
            for setup, w in built.items()]  # fmt: skip
    marks, per_epoch = sgd_checkpoints(config.epochs, config.batch_size, config.checkpoints,
                                       len(inputs.y))  # fmt: skip
    n_test = int(inputs.x_test.shape[0])
    evaluated = len(inputs.y) + n_test * (1 + len(config.eval_transforms))
    count = {
        "loc": 4 * config.members,
        "labels": 4 * config.members,
        "nonlinear": 4 * config.members,
    }  # two ensembles (or real, shuffled) per condition
    probes = len(config.rates) * len(CONDITIONS)  # the rate grid: one network per rate
    example = torch.from_numpy(inputs.x[:1]).float()
    work = [Training(f"{setup} {'x'.join(map(str, widths))}", forward_flops(net, example),
                     len(inputs.y), config.epochs, count[setup] + probes, evaluated,
                     config.checkpoints)
            for (setup, widths), net in zip(built.items(), nets, strict=True)]  # fmt: skip
    out = {"dataset": config.data.name, "n_train": int(inputs.x.shape[0]),
           "n_test": int(inputs.x_test.shape[0]), "widths": built["loc"],
           "widths_labels": built["labels"], "widths_nonlinear": built["nonlinear"],
           "parameters": [sum(p.numel() for p in net.parameters()) for net in nets],
           "members": config.members, "epochs": config.epochs,
           "steps": int(marks[-1]), "steps_per_epoch": per_epoch,
           "rates": list(config.rates)}  # fmt: skip
    if config.nonlinear_net != "fc":  # Fig. 7b's own networks on their own data
        spec = data_variant(_data(config, "nonlinear"), whiten=config.zca_eps)
        images = read_inputs(spec, folder, seed)
        net = image_network(config.nonlinear_net, images.x.shape[1], images.n_classes).eval()
        with torch.no_grad():
            net(torch.from_numpy(images.x[: config.batch_size]).float())
        steps = sgd_checkpoints(config.epochs, config.batch_size, config.checkpoints,
                                len(images.y))[0][-1]  # fmt: skip
        out |= {"nonlinear_net": config.nonlinear_net, "nonlinear_dataset": spec.name,
                "nonlinear_n_train": int(images.x.shape[0]),
                "widths_nonlinear": config.nonlinear_net,
                "nonlinear_steps": int(steps)}  # fmt: skip
        out["parameters"][-1] = sum(p.numel() for p in net.parameters())
        flops = forward_flops(net, torch.from_numpy(images.x[:1]).float())
        networks = count["nonlinear"] + probes
        scored = len(images.y) + len(images.y_test)
        work[-1] = Training(f"{config.nonlinear_net}, {spec.name}", flops, len(images.y),
                            config.epochs, networks, scored, config.checkpoints)  # fmt: skip
    out["gpu_work"] = [t.to_dict() for t in work]
    return out
