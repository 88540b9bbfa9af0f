r"""Learning curves on manipulated data (paper 002 §6): ``pcbias-amplification`` (Fig. 9,
PC amplification and the benefit of early stopping) and ``pcbias-separable`` (Fig. 11,
P-separable relabelling).

Both train ensembles of the MLP of ``pcbias-projections`` (and, for Fig. 9, its linear twin)
by minibatch SGD on cross-entropy (:func:`~collapselab.experiments.pcbias.projections.
sgd_member`) and keep the train and test accuracy after every epoch.

* Fig. 9: the top or the bottom 1.5% of the PCs (at least one) amplified by 10, then every
  channel renormalised (:class:`~collapselab.data.pca.PCAmplification`, fitted on the
  training inputs and applied to both splits), against the unmodified data; the early-stopping
  benefit :func:`~collapselab.metrics.pcbias.early_stopping_benefit` (peak minus final mean
  test accuracy) per condition.
* Fig. 11: labels replaced by those of a least-squares separator on the top ``P`` PCs
  (:class:`~collapselab.data.pca.SeparableRelabel`), starting from the true or from shuffled
  labels, for several ``P``; the first epoch at which the mean train accuracy reaches a
  level (:func:`~collapselab.metrics.pcbias.convergence_epoch`).

Stored: ``arrays/amplification.npz`` (``<kind>_<condition>_train``/``_test`` ``(N, E+1)``,
``benefit_<kind>_<condition>``) and ``arrays/separable.npz`` (``<labels>_P<p>_train``
``(N, E+1)``, ``pcs``, ``epoch_<labels>_P<p>``, ``changed_<labels>_P<p>`` the fraction of
training labels the relabelling changed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collapselab._threads import serial_threads
from collapselab.experiments.claims import Claim, NotEvaluable, RunResults
from collapselab.experiments.pcbias._common import member_base, read_dataset, run_ensembles, verdict
from collapselab.experiments.pcbias.projections import sgd_member
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pcbias import convergence_epoch, early_stopping_benefit
from collapselab.store import Run

__all__ = [
    "AMPLIFICATION_CLAIMS",
    "CONDITIONS",
    "SEPARABLE_CLAIMS",
    "run_amplification",
    "run_separable",
]

CONDITIONS = ("none", "top", "bottom")
KINDS = ("nonlinear", "linear")
LABELS = ("real", "shuffled")

LEVEL = 0.9
"""Train accuracy whose first crossing times the learning of a P-separable dataset."""


def _base(context: RunContext) -> dict[str, Any]:
    return member_base(context, discriminability=False, pcs=[])


def run_amplification(run: Run, context: RunContext) -> None:
    """Natural, top- and bottom-amplified data, ReLU MLPs and linear twins."""
    base = _base(context)
    spec = base["datasets"]["main"]
    amplify = {"fraction": float(base["fraction"]), "factor": float(base["factor"])}
    ensembles = {}
    for condition in CONDITIONS:
        gain = {"amplify": {**amplify, "which": condition}} if condition != "none" else {}
        data = {**spec, **gain}
        for kind in KINDS:
            ensembles[f"{kind}_{condition}"] = {**base, "kind": kind, "datasets": {"main": data}}
    with serial_threads():
        found = run_ensembles(sgd_member, ensembles, run, context)
    arrays: dict[str, Any] = {"epochs": np.arange(int(base["epochs"]) + 1)}
    for label, results in found.items():
        test = np.stack([r["test_accuracy"] for r in results])
        arrays[f"{label}_train"] = np.stack([r["train_accuracy"] for r in results])
        arrays[f"{label}_test"] = test
        benefit, best = early_stopping_benefit(test.mean(0))
        arrays[f"benefit_{label}"] = np.float64(benefit)
        arrays[f"best_{label}"] = np.int64(best)
        run.log_dict(0, {"early_stopping_benefit": benefit, "best_epoch": float(best)},
                     split="amplification", layer=label)  # fmt: skip
    run.save_array("amplification", **arrays)
    run.flush()


def run_separable(run: Run, context: RunContext) -> None:
    """P-separable relabellings of the true and of shuffled labels, for every P."""
    base = _base(context)
    spec = base["datasets"]["main"]
    ensembles = {}
    for labels in LABELS:
        for p in base["separable_pcs"]:
            data = {**spec, "separable": int(p), **({"shuffle": 1.0} if labels == "shuffled"
                                                   else {})}  # fmt: skip
            ensembles[f"{labels}_P{int(p)}"] = {**base, "kind": "nonlinear",
                                                "datasets": {"main": data}}  # fmt: skip
    with serial_threads():
        found = run_ensembles(sgd_member, ensembles, run, context)
        truth = read_dataset(spec, base["data_dir"], context.seed).y
    arrays: dict[str, Any] = {"epochs": np.arange(int(base["epochs"]) + 1),
                              "pcs": np.asarray(base["separable_pcs"])}  # fmt: skip
    for label, results in found.items():
        train = np.stack([r["train_accuracy"] for r in results])
        arrays[f"{label}_train"] = train
        arrays[f"epoch_{label}"] = np.float64(convergence_epoch(train.mean(0), LEVEL, "above"))
        relabelled = read_dataset(ensembles[label]["datasets"]["main"], base["data_dir"],
                                  context.seed).y  # fmt: skip
        arrays[f"changed_{label}"] = np.float64(np.mean(relabelled != truth))
    run.save_array("separable", **arrays)
    run.flush()


# ---------------------------------------------------------------------------------------
# claims


def _benefits(results: RunResults, kind: str) -> dict[str, float]:
    return {c: float(results.array("amplification", f"benefit_{kind}_{c}")) for c in CONDITIONS}


def _bottom_over_top(kind: str):
    def evaluate(results: RunResults):
        b = _benefits(results, kind)
        detail = (
            f"{kind}: early-stopping benefit (peak − final mean test accuracy): natural "
            f"{b['none']:.3g}, top 1.5% amplified {b['top']:.3g}, bottom 1.5% amplified "
            f"{b['bottom']:.3g} (bottom > top and bottom >= natural?)"
        )
        ok = b["bottom"] > b["top"] and b["bottom"] >= b["none"]
        return verdict(ok, b, None, detail)

    return evaluate


def _epochs(results: RunResults, labels: str) -> tuple[np.ndarray, np.ndarray]:
    """Per P the first epoch at the level (``inf``: never); not evaluable when no P got
    there (the run is too short to time anything)."""
    pcs = results.array("separable", "pcs")
    epochs = np.array([float(results.array("separable", f"epoch_{labels}_P{int(p)}"))
                       for p in pcs])  # fmt: skip
    if np.all(np.isnan(epochs)):
        raise NotEvaluable(f"{labels} labels: the mean train accuracy never reached {LEVEL:g}")
    return pcs, np.where(np.isnan(epochs), np.inf, epochs)


def _smaller_faster(labels: str):
    def evaluate(results: RunResults):
        pcs, epochs = _epochs(results, labels)
        ok = bool(np.all(np.diff(epochs) >= 0) and epochs[0] < epochs[-1])
        detail = (
            f"{labels} labels: first epoch with mean train accuracy >= {LEVEL:g}: "
            + ", ".join(f"P={int(p)}: {e:g}" for p, e in zip(pcs, epochs, strict=True))
            + " (non-decreasing in P, smallest P strictly first?)"
        )
        values = {f"epoch_P{int(p)}": e for p, e in zip(pcs, epochs, strict=True)}
        return verdict(ok, values, LEVEL, detail)

    return evaluate


def _alike(results: RunResults):
    pcs, real = _epochs(results, "real")
    _, shuffled = _epochs(results, "shuffled")
    same = [a == b or abs(a - b) <= max(2.0, 0.5 * a) for a, b in zip(real, shuffled, strict=True)]
    detail = (
        f"epochs to train accuracy {LEVEL:g}, real vs shuffled start: "
        + ", ".join(f"P={int(p)}: {a:g} vs {b:g}" for p, a, b in zip(pcs, real, shuffled,
                                                                       strict=True))
        + " (within max(2, 50%) each?)"
    )  # fmt: skip
    return verdict(all(same), {"alike": float(sum(same))}, 0.5, detail)


AMPLIFICATION_CLAIMS: list[Claim] = [
    Claim(
        "early-stopping-bottom-amplified-nonlinear",
        "Fig. 9: the benefit of early stopping is larger when the bottom 1.5% of the PCs are "
        "amplified and smaller when the top 1.5% are (non-linear networks).",
        "002 §6.1, Fig. 9",
        "early-stopping benefit: bottom-amplified > top-amplified and >= natural (ReLU MLPs)",
        _bottom_over_top("nonlinear"),
    ),
    Claim(
        "early-stopping-bottom-amplified-linear",
        "Fig. 9: the same for linear networks.",
        "002 §6.1, Fig. 9",
        "early-stopping benefit: bottom-amplified > top-amplified and >= natural (linear twins)",
        _bottom_over_top("linear"),
    ),
]
"""The claims of ``pcbias-amplification``."""

SEPARABLE_CLAIMS: list[Claim] = [
    Claim(
        "separable-smaller-p-faster",
        "Fig. 11: data separable in fewer PCs is learned faster.",
        "002 §6.2, Fig. 11",
        f"first epoch with mean train accuracy >= {LEVEL:g} non-decreasing in P, smallest P "
        "strictly first (relabelled true labels)",
        _smaller_faster("real"),
    ),
    Claim(
        "separable-smaller-p-faster-shuffled",
        "Fig. 11: the same when the relabelling starts from shuffled labels.",
        "002 §6.2, Fig. 11",
        "as separable-smaller-p-faster, relabelling from shuffled labels",
        _smaller_faster("shuffled"),
    ),
    Claim(
        "separable-real-shuffled-alike",
        "Fig. 11: real and shuffled starting labels behave alike (the speed depends on P).",
        "002 §6.2, Fig. 11",
        "per P, epochs to the level differ by at most max(2, 50% of the real-label epoch)",
        _alike,
    ),
]
"""The claims of ``pcbias-separable``."""
