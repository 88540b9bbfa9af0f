r"""``pcbias-loc``: learning-order constancy of linear nets, natural vs whitened data, and
real vs shuffled labels (paper 002 Fig. 7a, Fig. 10; note 002 §5 items 6-7, §7 items 9, 16).

The networks are the paper's linear FC nets trained as the paper trains them (§3.1, App. D;
:mod:`~collapselab.experiments.pcb.linear_sgd`): Glorot uniform, 0.5 dropout before the
output layer, minibatch SGD without momentum or weight decay on cross-entropy, the learning
rate coarsely grid-searched per setup to minimise a validation error.

* Fig. 7a (§4.3: "4 ensembles of N=10 1-layered linear networks on the cats and dogs
  dataset, 2 with and 2 without ZCA-whitening"): per condition (natural, ZCA-whitened) two
  independent ensembles of one-layer nets give two accessibility vectors over the training
  examples (:func:`~collapselab.metrics.pc_bias.accessibility`); their correlation is the
  LOC score, on all examples and on the fastest 20%
  (:func:`~collapselab.metrics.pc_bias.loc_correlation`; Pearson and Spearman).
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
(:func:`~collapselab.experiments.pcb.linear_sgd.select_rate`: ties to the smaller rate; a
diverged network counts as error 1). The test split serves as the validation set: no claim
of this experiment reads a test accuracy. The shuffled-label ensemble takes its condition's
rate (with shuffled labels every rate's validation error is chance; Fig. 10 compares the
same networks on the same images). This replaces the earlier time matching (rates as
fractions of the stability limit of exact GD), which note 002 §7 item 9 left to the
implementer and the paper settles by its grid search.

Accessibility is the mean correctness over the **learning phase**: the checkpoints after
step 0 where the ensemble's mean training accuracy is below 95% of the lowest of the four
LOC ensembles' final accuracies; the checkpoints are log-spaced SGD steps, each weighted by
the steps it stands for, held until the next (:func:`~collapselab.metrics.pc_bias.
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
``eval`` ``(N, S, len)`` the test accuracies on the transformed copies); ``arrays/rates.npz`` (per
``<setup>_<cond>``, setup ``loc`` or ``labels``: ``rates``, ``errors``, ``chosen``); rows of
split ``loc`` (``layer`` the condition).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.experiments.claims import Claim, NotEvaluable, RunResults
from collapselab.experiments.pcb._common import (
    member_base,
    members,
    read_dataset,
    run_ensembles,
    stacked,
    verdict,
    whitened,
)
from collapselab.experiments.pcb.linear_sgd import (
    linear_sgd_member,
    select_rate,
    sgd_checkpoints,
)
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.metrics.pc_bias import (
    accessibility,
    checkpoint_weights,
    convergence_epoch,
    loc_correlation,
)
from collapselab.models import DeepLinear
from collapselab.store import Run

__all__ = ["CONDITIONS", "LOC_CLAIMS", "SETUPS", "loc_dry_run", "run_loc"]

CONDITIONS = ("natural", "whitened")

SETUPS = ("loc", "labels")
"""Fig. 7a's one-layer nets and Fig. 10's two-layer nets: each has its own rate search."""

PHASE = 0.95
"""The learning phase ends at this fraction of the lower final mean training accuracy."""

FASTEST = 0.2
"""The fastest fraction of examples (Fig. 7's "20% fastest learned")."""

HIGH = 0.7
"""Smallest LOC (Pearson) on natural data counted as high."""

DROP = 0.2
"""Smallest drop of the LOC (Pearson) from natural to whitened data counted as a drop."""

CONVERGED = 0.9
"""Fraction of its final gain in training accuracy (over step 0) whose first crossing times
convergence (the accuracy, not the loss: the claims compare how fast the examples are
classified, and the loss of shuffled labels is dominated by its noise floor)."""

SLOWER = 2.0
"""Smallest ratio of shuffled to real labels' convergence steps counted as slower."""

SAME = 1.5
"""Largest such ratio counted as no gap."""


def _spec(config: dict[str, Any], condition: str, shuffle: bool = False) -> dict[str, Any]:
    spec = dict(config["datasets"]["main"])
    if shuffle:
        spec["shuffle"] = 1.0
    return spec if condition == "natural" else whitened(spec, float(config["zca_eps"]))


def _hidden(config: dict[str, Any], setup: str) -> list[int]:
    return [] if setup == "loc" else [int(w) for w in config["hidden_labels"]]


def _setup(base: dict[str, Any], setup: str, condition: str, **extra: Any) -> dict[str, Any]:
    return {**base, "hidden": _hidden(base, setup),
            "datasets": {"main": _spec(base, condition, extra.pop("shuffle", False))},
            **extra}  # fmt: skip


def _search_rates(base: dict[str, Any], run: Run, context: RunContext) -> dict[str, Any]:
    """The grid search: one network per (setup, condition, rate), trained on the real
    labels, its test error after the last epoch; the chosen rate per setup and condition."""
    rates = [float(r) for r in base["rates"]]
    configs, keys = [], []
    for setup in SETUPS:
        for condition in CONDITIONS:
            for rate in rates:  # one seed for the whole grid: the rates see the same init
                probe = _setup(base, setup, condition, lr=rate, seed=4 * base["seed"] + 3,
                               allow_divergence=True)  # fmt: skip
                configs += members(probe, 1)
                keys.append(f"{setup}_{condition}")
    with serial_threads():
        found = run_members(linear_sgd_member, configs, run, context, label="rates")
    out: dict[str, Any] = {}
    for key in dict.fromkeys(keys):
        errors = [r["test_error"] for r, k in zip(found, keys, strict=True) if k == key]
        out[f"{key}_rates"] = np.asarray(rates)
        out[f"{key}_errors"] = np.asarray(errors)
        out[f"{key}_chosen"] = np.float64(select_rate(rates, errors))
    return out


def run_loc(run: Run, context: RunContext) -> None:
    """The rate search, then two one-layer ensembles per condition for LOC and a real- and a
    shuffled-label two-layer ensemble per condition for Fig. 10."""
    base = member_base(context)
    chosen = _search_rates(base, run, context)
    run.save_array("rates", **chosen)
    seed = 4 * context.seed
    ensembles = {}
    for condition in CONDITIONS:
        for k in range(2):
            ensembles[f"loc_{condition}_{k}"] = _setup(
                base, "loc", condition, lr=float(chosen[f"loc_{condition}_chosen"]),
                seed=seed + k, record_correct=True)  # fmt: skip
        for kind in ("real", "shuffled"):
            ensembles[f"labels_{condition}_{kind}"] = _setup(
                base, "labels", condition, lr=float(chosen[f"labels_{condition}_chosen"]),
                seed=seed + 2, shuffle=kind == "shuffled")  # fmt: skip
    with serial_threads():
        found = run_ensembles(linear_sgd_member, ensembles, run, context)
    labels = {f"{condition}_{kind}": _curves(found[f"labels_{condition}_{kind}"])
              for condition in CONDITIONS for kind in ("real", "shuffled")}  # fmt: skip
    run.save_array("loc", **_learning_order(found, run))
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


def _learning_order(found: dict[str, list[dict[str, Any]]], run: Run) -> dict[str, Any]:
    """Accessibility over the learning phase and the LOC correlations of each condition."""
    correct, test_correct, curves = {}, {}, {}
    for condition in CONDITIONS:
        for k in range(2):
            results = found[f"loc_{condition}_{k}"]
            correct[condition, k] = np.stack([r["correct"] for r in results])  # (N, S, n)
            test_correct[condition, k] = stacked(results, "test_correct")  # (N, S, n_test)
            curves[condition, k] = np.stack([r["train_accuracy"] for r in results]).mean(0)
    level = PHASE * min(float(curve[-1]) for curve in curves.values())
    first = found[f"loc_{CONDITIONS[0]}_0"][0]
    arrays: dict[str, Any] = {"level": np.float64(level),
                              "steps_per_epoch": np.int64(first["steps_per_epoch"])}  # fmt: skip
    for condition in CONDITIONS:
        window = np.all([curves[condition, k] < level for k in range(2)], axis=0)
        window[0] = False  # step 0: the untrained networks
        if window.sum() < 2:
            raise ValueError(f"{condition}: fewer than 2 checkpoints in the learning phase; "
                             "give more checkpoints")  # fmt: skip
        steps = found[f"loc_{condition}_0"][0]["steps"]
        weights = checkpoint_weights(steps, steps[-1] + 1)  # the last: the final step only
        access = np.stack([accessibility(correct[condition, k][:, window], weights[window])
                           for k in range(2)])  # fmt: skip
        if all(test_correct[condition, k] is not None for k in range(2)):
            arrays[f"test_accessibility_{condition}"] = np.stack(
                [accessibility(test_correct[condition, k][:, window], weights[window])
                 for k in range(2)])  # fmt: skip
        every = loc_correlation(access[0], access[1])
        fastest = loc_correlation(access[0], access[1], FASTEST)  # ranked by ensemble 0
        # The other reading of Fig. 7's subset, kept for comparison: ranking by the mean of
        # the two ensembles biases the subset's correlation down (metrics.pc_bias).
        by_mean = loc_correlation(access[0], access[1], FASTEST, rank_by="mean")
        arrays |= {
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
        }
        run.log_dict(0, {"loc_pearson": every.pearson, "loc_spearman": every.spearman,
                         "loc_pearson_fastest": fastest.pearson,
                         "loc_spearman_fastest": fastest.spearman},
                     split="loc", layer=condition)  # fmt: skip
    return arrays


def loc_dry_run(
    config: dict[str, Any], data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """What ``pcbias-loc`` would train, without training (the paper preset's check on local
    files): the data read, standardised and whitened, one network of each setup built."""
    base = {**config, "seed": seed, "data_seed": seed,
            "data_dir": None if data_dir is None else str(data_dir)}  # fmt: skip
    inputs = read_dataset(_spec(base, "whitened"), base["data_dir"], seed)
    q, k = inputs.x.shape[1], inputs.n_classes
    built = {setup: [q, *_hidden(base, setup), k] for setup in SETUPS}
    nets = [DeepLinear(w, init=str(config["init"]), dropout=float(config["dropout"]))
            for w in built.values()]  # fmt: skip
    marks, per_epoch = sgd_checkpoints(base, len(inputs.y))
    return {"dataset": config["datasets"]["main"]["name"], "n_train": int(inputs.x.shape[0]),
            "n_test": int(inputs.x_test.shape[0]), "widths": built["loc"],
            "widths_labels": built["labels"],
            "parameters": [sum(p.numel() for p in net.parameters()) for net in nets],
            "members": int(config["members"]), "epochs": int(config["epochs"]),
            "steps": int(marks[-1]), "steps_per_epoch": per_epoch,
            "rates": [float(r) for r in config["rates"]]}  # fmt: skip


# ---------------------------------------------------------------------------------------
# claims


def _loc(results: RunResults, condition: str, fastest: bool = False) -> float:
    key = f"pearson_{condition}" + ("_fastest" if fastest else "")
    value = float(results.array("loc", key))
    if not np.isfinite(value):
        raise NotEvaluable(f"the LOC correlation {key} is undefined (constant accessibility)")
    return value


def _natural_high(results: RunResults):
    value = _loc(results, "natural")
    detail = f"Pearson LOC between two natural-data ensembles {value:.3g} (>= {HIGH:g})"
    return verdict(value >= HIGH, {"pearson": value}, HIGH, detail)


def _whitening_drops(results: RunResults):
    natural, white = _loc(results, "natural"), _loc(results, "whitened")
    detail = (
        f"Pearson LOC natural {natural:.3g}, whitened {white:.3g}: drop {natural - white:.3g} "
        f"(>= {DROP:g})"
    )
    values = {"natural": natural, "whitened": white, "drop": natural - white}
    return verdict(natural - white >= DROP, values, DROP, detail)


def _fastest_drops_more(results: RunResults):
    drop_all = _loc(results, "natural") - _loc(results, "whitened")
    nat, white = _loc(results, "natural", True), _loc(results, "whitened", True)
    drop = nat - white
    detail = (
        f"fastest {FASTEST:.0%}: Pearson LOC natural {nat:.3g}, whitened {white:.3g}, drop "
        f"{drop:.3g}; all examples: drop {drop_all:.3g} (fastest's drop larger?)"
    )
    values = {"natural_fastest": nat, "whitened_fastest": white, "drop_fastest": drop,
              "drop_all": drop_all}  # fmt: skip
    return verdict(drop > drop_all, values, None, detail)


def _converged(results: RunResults, key: str) -> float:
    steps = results.array("labels", f"{key}_steps")
    accuracy = results.array("labels", f"{key}_accuracy").mean(0)
    target = accuracy[0] + CONVERGED * (accuracy[-1] - accuracy[0])
    step = float(convergence_epoch(accuracy, target, "above", epochs=steps, interpolate=True))
    return step if np.isfinite(step) else float("inf")


def _label_ratio(condition: str, slower: bool):
    def evaluate(results: RunResults):
        real = _converged(results, f"{condition}_real")
        shuffled = _converged(results, f"{condition}_shuffled")
        ratio = shuffled / real if real > 0 else float("inf")
        bound = SLOWER if slower else SAME
        ok = ratio >= SLOWER if slower else ratio <= SAME
        detail = (
            f"{condition} data: step where the mean train accuracy has first made {CONVERGED:g} "
            f"of its final gain (interpolated between checkpoints): real "
            f"labels {real:.4g}, shuffled {shuffled:.4g}; ratio {ratio:.3g} "
            f"({'>=' if slower else '<='} {bound:g})"
        )
        return verdict(ok, {"real_step": real, "shuffled_step": shuffled, "ratio": ratio},
                       bound, detail)  # fmt: skip

    return evaluate


LOC_CLAIMS: list[Claim] = [
    Claim(
        "loc-natural-high",
        "Linear networks trained on natural data learn the examples in a constant order "
        "(LOC), which the PC-bias explains.",
        "002 §4.1, Fig. 7a",
        f"Pearson correlation of two independent ensembles' accessibility (learning phase) "
        f">= {HIGH:g}",
        _natural_high,
    ),
    Claim(
        "whitening-drops-loc",
        "Fig. 7a: after ZCA whitening LOC 'plummets' for linear networks.",
        "002 §4.1, Fig. 7a",
        f"Pearson LOC natural − whitened >= {DROP:g}",
        _whitening_drops,
    ),
    Claim(
        "whitening-drops-loc-fastest",
        "Fig. 7a: the drop is larger on the 20% fastest-learned examples.",
        "002 §4.1, Fig. 7",
        "drop of the Pearson LOC on the fastest 20% (ranked by the first ensemble's "
        "accessibility) > drop on all examples",
        _fastest_drops_more,
    ),
    Claim(
        "shuffled-labels-slower",
        "Fig. 10: linear networks converge more slowly with shuffled labels.",
        "002 §6.2, Fig. 10",
        f"steps to {CONVERGED:g} of the final train-accuracy gain, shuffled / real >= "
        f"{SLOWER:g} (natural data)",
        _label_ratio("natural", slower=True),
    ),
    Claim(
        "whitening-removes-label-gap",
        "Fig. 10: after whitening the gap between real and shuffled labels disappears.",
        "002 §6.2, Fig. 10",
        f"steps to {CONVERGED:g} of the final train-accuracy gain, shuffled / real <= "
        f"{SAME:g} (whitened data)",
        _label_ratio("whitened", slower=False),
    ),
]
"""The claims of ``pcbias-loc``."""
