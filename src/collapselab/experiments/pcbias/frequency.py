r"""``pcbias-frequency``: the spectral bias on the frequency dataset (paper 002 §5, Fig. 8,
Fig. 13, Fig. 16; note 002 §5 item 10).

An ensemble of ReLU MLPs (the paper: 100 st-VGGs; 2-D inputs call for an MLP) is trained by
minibatch SGD (:class:`~collapselab.experiments.pcbias.projections.MLPMember`) on the frequency
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

Fig. 13's claim reads how many sine terms the learned decision boundary uses (App. C.2: "the
decision function incorporates low frequencies at the beginning of the learning, adding the
higher frequencies only later on"): the network's decision regions on the grid are compared
with every partial-sum classifier ``1[x_2 <= λ_j(x_1)]``, ``λ_j = Σ_{i<=j} sin(2π κ_i x_1 +
φ_i)``, ``j = 1..m`` (:func:`boundary_agreement`); the boundary's number of terms is the
``j`` that agrees with the network on most grid points (:func:`boundary_terms`). A boundary
that adds higher frequencies over training moves to larger ``j``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch

from collapselab._threads import serial_threads
from collapselab.data import (
    PAPER_KAPPA,
    PAPER_PHI,
    frequency_function,
    frequency_partial_sums,
    load_data,
)
from collapselab.data.transforms import Standardize
from collapselab.experiments.pcbias._common import run_ensembles, stacked
from collapselab.experiments.pcbias.presets import FrequencyPreset
from collapselab.experiments.pcbias.projections import NEIGHBOURS, MLPMember
from collapselab.experiments.registry import RunContext
from collapselab.metrics.pcbias import (
    accessibility,
    binned_correlation,
    critical_frequency,
    discriminability,
)
from collapselab.store import Run

__all__ = ["boundary_agreement", "boundary_terms", "run_frequency"]


def run_frequency(run: Run, context: RunContext) -> None:
    """Train the ensemble; store accessibility, critical frequency, discriminability and the
    decision regions."""
    preset: FrequencyPreset = context.config
    # generated data: no folder (the members' records do not depend on the machine)
    member = MLPMember.of(preset, kind="nonlinear", discriminability=False,
                          boundary_epochs=preset.boundary_epochs,
                          boundary_grid=preset.boundary_grid, seed=context.seed,
                          data_seed=context.seed)  # fmt: skip
    ensemble = {"frequency": member.ensemble(preset.members)}
    with serial_threads():
        results = run_ensembles(ensemble, run, context, batched=preset.batched)["frequency"]
    raw = load_data(dataclasses.replace(preset.data, steps=()), seed=context.seed).train
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
    size = preset.boundary_grid
    run.save_array(
        "frequency",
        accessibility=access,
        critical=critical,
        discriminability=disc,
        scores=by_access.scores,
        access_means=by_access.means,
        disc_means=by_disc.means,
        boundary=results[0]["boundary"].reshape(-1, size, size),
        boundary_epochs=np.asarray(preset.boundary_epochs),
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


# ------------------------------------------------------------ the decision boundary's terms


def boundary_agreement(
    regions: np.ndarray,
    x1: np.ndarray,
    x2: np.ndarray,
    kappa: Sequence[float] = PAPER_KAPPA,
    phi: Sequence[float] = PAPER_PHI,
) -> np.ndarray:
    r"""Agreement of predicted class-1 regions ``(..., G1, G2)`` (entry ``[i, k]`` at
    ``(x1[i], x2[k])``) with each partial-sum classifier ``1[x_2 <= λ_j(x_1)]``: the
    fraction of grid points where they agree, ``(..., m)`` for ``j = 1..m``."""
    k = np.asarray(kappa, dtype=np.float64)
    p = np.asarray(phi, dtype=np.float64)
    partial = np.cumsum(np.sin(2 * np.pi * np.asarray(x1)[:, None] * k + p), axis=1)  # (G1, m)
    rules = np.asarray(x2)[None, None, :] <= partial.T[:, :, None]  # (m, G1, G2)
    predicted = np.asarray(regions).astype(bool)[..., None, :, :]
    return (predicted == rules).mean(axis=(-2, -1))


def boundary_terms(agreement: np.ndarray) -> np.ndarray:
    """The best-agreeing number of terms ``j`` (1-based) per snapshot."""
    return np.asarray(agreement).argmax(-1) + 1
