"""Fig. 13's claim of ``pcbias-frequency`` (:mod:`collapselab.experiments.pcbias.frequency`):
the boundary's number of sine terms against brute force, and the stored claim against the
stored decision regions."""

from __future__ import annotations

import numpy as np
import pytest

from collapselab._threads import serial_threads
from collapselab.data.frequency import PAPER_KAPPA, PAPER_PHI, frequency_function
from collapselab.experiments import run_experiment
from collapselab.experiments.pcbias.frequency import boundary_agreement, boundary_terms
from collapselab.store import Run
from tests._experiments import stored_claims


def _brute_agreement(regions, x1, x2):
    """Agreement with each partial sum by explicit loops over terms and grid points."""
    out = []
    for j in range(1, len(PAPER_KAPPA) + 1):
        hits = 0
        for i, a in enumerate(x1):
            lam = sum(np.sin(2 * np.pi * PAPER_KAPPA[t] * a + PAPER_PHI[t]) for t in range(j))
            for k, b in enumerate(x2):
                hits += bool(regions[i, k]) == bool(b <= lam)
        out.append(hits / (len(x1) * len(x2)))
    return np.array(out)


def test_boundary_agreement_matches_brute_force_and_finds_the_true_boundary():
    rng = np.random.default_rng(0)
    x1, x2 = np.linspace(-1, 1, 9), np.linspace(-2 * np.pi, 2 * np.pi, 7)
    regions = rng.random((9, 7)) < 0.5
    np.testing.assert_allclose(boundary_agreement(regions, x1, x2),
                               _brute_agreement(regions, x1, x2), atol=1e-15)  # fmt: skip
    # the true rule agrees exactly with all ten terms, and a stack of snapshots keeps its axes
    x1, x2 = np.linspace(-1, 1, 101), np.linspace(-2 * np.pi, 2 * np.pi, 83)
    truth = x2[None, :] <= frequency_function(x1)[:, None]
    line = np.broadcast_to(x2[None, :] <= 0.0, truth.shape)
    agreement = boundary_agreement(np.stack([line, truth]), x1, x2)
    assert agreement.shape == (2, 10)
    assert agreement[1, -1] == 1.0 and agreement[0, 0] == 1.0
    np.testing.assert_array_equal(boundary_terms(agreement), [1, 10])


def test_frequency_run_stores_the_boundary_claim(tmp_path):
    """On the tiny run, the claim's numbers are the brute-force agreement of the stored
    regions on the raw grid spanning the stored box."""
    with serial_threads():
        run_experiment("pcbias-frequency", preset="tiny", root=tmp_path, executor="serial")
    run = Run.open(tmp_path / "pcbias-frequency-tiny-seed0")
    d = run.load_array("frequency")
    size = d["boundary"].shape[-1]
    x1, x2 = np.linspace(*d["box"][0], size), np.linspace(*d["box"][1], size)
    agreement = np.array([_brute_agreement(r, x1, x2) for r in d["boundary"]])
    entry = stored_claims(run)["boundary-adds-frequencies"]
    assert entry["values"]["first_terms"] == int(agreement[0].argmax()) + 1
    assert entry["values"]["last_terms"] == int(agreement[-1].argmax()) + 1
    assert entry["values"]["last_agreement"] == pytest.approx(agreement[-1].max(), abs=1e-12)
    gained = entry["values"]["last_terms"] - entry["values"]["first_terms"]
    assert entry["verdict"] == ("holds" if gained >= 1 else "does not hold")
