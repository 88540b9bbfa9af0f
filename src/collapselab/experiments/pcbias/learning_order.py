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

from collapselab._threads import serial_threads
from collapselab.experiments.claims import Claim, NotEvaluable, RunResults
from collapselab.experiments.pcbias._common import (
    member_base,
    members,
    read_dataset,
    run_ensembles,
    stacked,
    verdict,
    whitened,
)
from collapselab.experiments.pcbias.linear_sgd import (
    linear_sgd_member,
    select_rate,
    sgd_checkpoints,
)
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.metrics.pcbias import (
    accessibility,
    checkpoint_weights,
    convergence_epoch,
    loc_correlation,
)
from collapselab.models import DeepLinear, DeepReLU
from collapselab.store import Run

__all__ = ["CONDITIONS", "LOC_CLAIMS", "SETUPS", "loc_dry_run", "run_loc"]

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

MUCH_LESS = 0.5
"""Largest ratio of the non-linear nets' LOC drop to the linear nets' counted as "much
less" (Fig. 7b)."""

HALVED = 0.5
"""Largest ratio of the whitened to the natural LOC on the fastest 20% counted as halved
(Fig. 7b: "the drop is much larger and very significant (half)")."""


def _spec(config: dict[str, Any], condition: str, shuffle: bool = False) -> dict[str, Any]:
    spec = dict(config["datasets"]["main"])
    if shuffle:
        spec["shuffle"] = 1.0
    return spec if condition == "natural" else whitened(spec, float(config["zca_eps"]))


def _hidden(config: dict[str, Any], setup: str) -> list[int]:
    return [] if setup == "loc" else [int(w) for w in config["hidden_labels"]]


def _setup(base: dict[str, Any], setup: str, condition: str, **extra: Any) -> dict[str, Any]:
    return {**base, "hidden": _hidden(base, setup),
            "activation": "relu" if setup == "nonlinear" else "none",
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
    """The rate search, then two one-layer linear and two non-linear ensembles per condition
    for LOC (Figs. 7a, 7b) and a real- and a shuffled-label two-layer ensemble per condition
    for Fig. 10."""
    base = member_base(context)
    chosen = _search_rates(base, run, context)
    run.save_array("rates", **chosen)
    seed = 4 * context.seed
    ensembles = {}
    for condition in CONDITIONS:
        for setup in LOC_SETUPS:
            for k in range(2):
                ensembles[f"{setup}_{condition}_{k}"] = _setup(
                    base, setup, condition, lr=float(chosen[f"{setup}_{condition}_chosen"]),
                    seed=seed + k, record_correct=True)  # fmt: skip
        for kind in ("real", "shuffled"):
            ensembles[f"labels_{condition}_{kind}"] = _setup(
                base, "labels", condition, lr=float(chosen[f"labels_{condition}_chosen"]),
                seed=seed + 2, shuffle=kind == "shuffled")  # fmt: skip
    with serial_threads():
        found = run_ensembles(linear_sgd_member, ensembles, run, context)
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
    config: dict[str, Any], data_dir: str | Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """What ``pcbias-loc`` would train, without training (the paper preset's check on local
    files): the data read, standardised and whitened, one network of each setup built."""
    base = {**config, "seed": seed, "data_seed": seed,
            "data_dir": None if data_dir is None else str(data_dir)}  # fmt: skip
    inputs = read_dataset(_spec(base, "whitened"), base["data_dir"], seed)
    q, k = inputs.x.shape[1], inputs.n_classes
    built = {setup: [q, *_hidden(base, setup), k] for setup in SETUPS}
    nets = [(DeepReLU if setup == "nonlinear" else DeepLinear)(
                w, init=str(config["init"]), dropout=float(config["dropout"]))
            for setup, w in built.items()]  # fmt: skip
    marks, per_epoch = sgd_checkpoints(base, len(inputs.y))
    return {"dataset": config["datasets"]["main"]["name"], "n_train": int(inputs.x.shape[0]),
            "n_test": int(inputs.x_test.shape[0]), "widths": built["loc"],
            "widths_labels": built["labels"], "widths_nonlinear": built["nonlinear"],
            "parameters": [sum(p.numel() for p in net.parameters()) for net in nets],
            "members": int(config["members"]), "epochs": int(config["epochs"]),
            "steps": int(marks[-1]), "steps_per_epoch": per_epoch,
            "rates": [float(r) for r in config["rates"]]}  # fmt: skip


# ---------------------------------------------------------------------------------------
# claims


def _loc(results: RunResults, condition: str, fastest: bool = False, prefix: str = "") -> float:
    key = f"{prefix}pearson_{condition}" + ("_fastest" if fastest else "")
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


def _nonlinear_drops_less(results: RunResults):
    linear = _loc(results, "natural") - _loc(results, "whitened")
    nat, white = (_loc(results, c, prefix="nonlinear_") for c in CONDITIONS)
    if linear <= 0:
        raise NotEvaluable(f"the linear nets' LOC does not drop ({linear:.3g}): nothing to be "
                           "less than")  # fmt: skip
    ratio = (nat - white) / linear
    detail = (
        f"Pearson LOC drop natural − whitened: non-linear nets {nat:.3g} − {white:.3g} = "
        f"{nat - white:.3g}, linear nets {linear:.3g}; ratio {ratio:.3g} (<= {MUCH_LESS:g})"
    )
    values = {"nonlinear_natural": nat, "nonlinear_whitened": white,
              "nonlinear_drop": nat - white, "linear_drop": linear, "ratio": ratio}  # fmt: skip
    return verdict(ratio <= MUCH_LESS, values, MUCH_LESS, detail)


def _nonlinear_fastest_halved(results: RunResults):
    nat_all, white_all = (_loc(results, c, prefix="nonlinear_") for c in CONDITIONS)
    nat, white = (_loc(results, c, True, prefix="nonlinear_") for c in CONDITIONS)
    drop, drop_all = nat - white, nat_all - white_all
    halved = nat > 0 and white <= HALVED * nat
    detail = (
        f"non-linear nets, fastest {FASTEST:.0%}: Pearson LOC natural {nat:.3g}, whitened "
        f"{white:.3g}, drop {drop:.3g} (all examples: drop {drop_all:.3g}); drop larger than on "
        f"all examples and whitened <= {HALVED:g} x natural?"
    )
    values = {"natural_fastest": nat, "whitened_fastest": white, "drop_fastest": drop,
              "drop_all": drop_all}  # fmt: skip
    return verdict(drop > drop_all and halved, values, HALVED, detail)


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
        "nonlinear-whitening-drops-loc-less",
        "Fig. 7b: for non-linear networks the elimination of the PC-bias by whitening affects "
        "the LOC much less than for linear ones.",
        "002 §4.3, Fig. 7b",
        f"Pearson LOC drop (natural − whitened, all examples) of the ReLU nets <= {MUCH_LESS:g} "
        "x that of the one-layer linear nets",
        _nonlinear_drops_less,
    ),
    Claim(
        "nonlinear-whitening-halves-loc-fastest",
        "Fig. 7b: at the beginning of learning the drop is much larger for non-linear "
        "networks too, and very significant (half).",
        "002 §4.3, Fig. 7b",
        f"ReLU nets, fastest 20% (ranked by the first ensemble): drop > drop on all examples, "
        f"and whitened LOC <= {HALVED:g} x natural",
        _nonlinear_fastest_halved,
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
