r"""``pcbias-frequency``: the spectral bias on the frequency dataset (paper 002 §5, Fig. 8,
Fig. 13, Fig. 16; note 002 §5 item 10).

An ensemble of ReLU MLPs (the paper: 100 st-VGGs; 2-D inputs call for an MLP) is trained by
minibatch SGD (:func:`~collapselab.experiments.pcbias.projections.sgd_member`) on the frequency
dataset (:func:`~collapselab.data.frequency_dataset`: ``x_1 ~ U[−1, 1]``,
``x_2 ~ U[−2π, 2π]``, ``y = 1[x_2 <= λ(x_1)]``, the paper's κ and φ), inputs standardised per
feature. From :mod:`collapselab.metrics.pcbias`: every training point's accessibility (over
epochs), its critical frequency (the number of terms of ``λ`` needed, on the raw points) and
its k-NN discriminability (raw inputs, ``k = 10``); the binned correlations (mean per
critical frequency, width-1 smoothing: 10 values only) of accessibility and of
discriminability with the critical frequency. One network's decision regions on a grid over
the data's box after the configured epochs are Fig. 13; the points of critical frequency
0 and 1 over the data's domain are Fig. 16.

Stored: ``arrays/frequency.npz`` (``accessibility``, ``critical``, ``discriminability``
``(n,)``; ``scores``, ``access_means``, ``disc_means`` per critical frequency;
``boundary`` ``(len, G, G)``, ``boundary_epochs``, ``box`` the raw box corners, ``curve_x1``,
``curve_x2`` the true boundary ``x_2 = λ(x_1)`` in standardised coordinates,
``train_accuracy`` ``(N, E+1)``, ``test_accessibility`` ``(n_test,)``: accessibility on the
test split, which no claim reads; for Fig. 16: ``points`` ``(n, 2)`` and ``labels`` ``(n,)``
the raw training points, ``kappa`` the frequencies ``κ_j``, ``domain_x1`` ``(400,)`` and
``partial_sums`` ``(m, 400)`` the partial sums ``λ_j(x_1) = Σ_{i<=j} sin(2π κ_i x_1 + φ_i)``
on the raw domain). Fig. 16 draws the points whose critical frequency is ``κ_1 = 0`` and
``κ_2 = 1`` (``critical`` counts terms: 1 and 2); a run stored before these arrays existed
draws Figs. 8 and 13 only.
"""

from __future__ import annotations

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.data import (
    PAPER_KAPPA,
    frequency_function,
    frequency_partial_sums,
    load_dataset,
)
from collapselab.data.transforms import Standardize
from collapselab.experiments.claims import Claim, RunResults
from collapselab.experiments.pcbias._common import run_ensembles, stacked, verdict
from collapselab.experiments.pcbias.boundaries import BOUNDARY_TERMS_CLAIM
from collapselab.experiments.pcbias.projections import NEIGHBOURS, sgd_member
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pcbias import (
    accessibility,
    binned_correlation,
    correlation,
    critical_frequency,
    discriminability,
)
from collapselab.store import Run

__all__ = ["FREQUENCY_CLAIMS", "run_frequency"]

STRONG = -0.5
"""Largest (most negative allowed) binned Pearson correlation counted as the paper's
negative relation (the paper: −0.93 and −0.8)."""


def run_frequency(run: Run, context: RunContext) -> None:
    """Train the ensemble; store accessibility, critical frequency, discriminability and the
    decision regions."""
    c = context.config
    spec = c["datasets"]["main"]
    base = {**c, "seed": context.seed, "data_seed": context.seed, "data_dir": None,
            "kind": "nonlinear", "discriminability": False, "pcs": []}  # fmt: skip
    with serial_threads():
        results = run_ensembles(sgd_member, {"frequency": base}, run, context)["frequency"]
    options = {k: v for k, v in spec.items() if k != "name"}
    raw = load_dataset("frequency", seed=context.seed, **options).train
    x, y = raw.x.double().numpy(), raw.y.numpy()
    correct = np.stack([r["correct"] for r in results])
    access = accessibility(correct[:, 1:])
    test_correct = stacked(results, "test_correct")
    optional = {} if test_correct is None else {
        "test_accessibility": accessibility(test_correct[:, 1:])}  # fmt: skip
    critical = critical_frequency(x, y)
    disc = discriminability(x, y, NEIGHBOURS)
    by_access = binned_correlation(critical, access, width=1)
    by_disc = binned_correlation(critical, disc, width=1)
    standard = Standardize().fit(raw.x.double())
    z = np.linspace(-1.0, 1.0, 400)
    curve = standard.apply(torch.from_numpy(np.stack([z, frequency_function(z)], 1))).numpy()
    partial = frequency_partial_sums(z).T  # (m, 400)
    size = int(c["boundary_grid"])
    run.save_array(
        "frequency",
        accessibility=access,
        critical=critical,
        discriminability=disc,
        scores=by_access.scores,
        access_means=by_access.means,
        disc_means=by_disc.means,
        boundary=results[0]["boundary"].reshape(-1, size, size),
        boundary_epochs=np.asarray(c["boundary_epochs"]),
        box=np.array([[x[:, 0].min(), x[:, 0].max()], [x[:, 1].min(), x[:, 1].max()]]),
        standardised_box=standard.apply(torch.from_numpy(
            np.array([[x[:, 0].min(), x[:, 1].min()], [x[:, 0].max(), x[:, 1].max()]])
        )).numpy(),
        curve_x1=curve[:, 0],
        curve_x2=curve[:, 1],
        train_accuracy=np.stack([r["train_accuracy"] for r in results]),
        points=x,
        labels=y,
        kappa=np.asarray(PAPER_KAPPA),
        domain_x1=z,
        partial_sums=partial,
        **optional,
    )  # fmt: skip
    pearsons = {"access_vs_critical": by_access.correlation.pearson,
                "disc_vs_critical": by_disc.correlation.pearson}  # fmt: skip
    run.log_dict(0, pearsons, split="frequency")
    run.flush()


def _binned(key: str, what: str):
    def evaluate(results: RunResults):
        critical = results.array("frequency", "critical")
        values = results.array("frequency", key)
        binned = binned_correlation(critical, values, width=1)
        raw = correlation(critical, values)
        r = binned.correlation.pearson
        detail = (
            f"{what} vs critical frequency: Pearson of the {binned.scores.size} per-value means "
            f"{r:.3g} (p {binned.correlation.pearson_p:.2g}); per point Pearson {raw.pearson:.3g}, "
            f"Spearman {raw.spearman:.3g} (binned <= {STRONG:g})"
        )
        values_out = {"binned_pearson": r, "pearson": raw.pearson, "spearman": raw.spearman}
        return verdict(r <= STRONG, values_out, STRONG, detail)

    return evaluate


FREQUENCY_CLAIMS: list[Claim] = [
    Claim(
        "critical-frequency-vs-accessibility",
        "Fig. 8a: points with a lower critical frequency are learned earlier (r = −0.93).",
        "002 §5.2, Fig. 8a",
        f"Pearson of the critical frequency with the mean accessibility per value <= {STRONG:g}",
        _binned("accessibility", "accessibility"),
    ),
    Claim(
        "critical-frequency-vs-discriminability",
        "Fig. 8b: discriminability falls with the critical frequency (r = −0.8).",
        "002 §5.3, Fig. 8b",
        f"Pearson of the critical frequency with the mean discriminability per value <= {STRONG:g}",
        _binned("discriminability", "discriminability (k-NN, raw inputs)"),
    ),
    BOUNDARY_TERMS_CLAIM,
]
"""The claims of ``pcbias-frequency``."""
