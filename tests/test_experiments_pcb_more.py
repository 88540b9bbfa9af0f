"""Paper 002's experiments on non-linear networks and manipulated data (Figs. 4d, 8, 9, 11,
13): the tiny presets end to end (figures drawn, claims evaluated) and the stored numbers
against independent recomputation."""

from __future__ import annotations

import numpy as np
import pytest

from collapselab._threads import serial_threads
from collapselab.experiments import get_experiment, run_experiment
from collapselab.store import Run
from tests._experiments import check_completed_run, stored_claims


def _run(root, experiment_id: str) -> Run:
    with serial_threads():
        run_experiment(experiment_id, preset="tiny", root=root, executor="serial")
    return Run.open(root / f"{experiment_id}-tiny-seed0")


@pytest.fixture(scope="module")
def frequency_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("pcb-frequency"), "pcbias-frequency")


def test_frequency_runs_end_to_end_with_figures_and_claims(frequency_run):
    claims = check_completed_run(frequency_run, get_experiment("pcbias-frequency"))
    for entry in claims.values():
        assert entry["verdict"] in ("holds", "does not hold"), entry


def test_frequency_scores_match_brute_force(frequency_run):
    """Critical frequency (a loop over the partial sums), discriminability (a loop over
    the points of the standardised data) and each snapshot's best-matching number of terms
    (a loop over the grid) recomputed here from the stored points and boundaries."""
    d = frequency_run.load_array("frequency")
    x, y, kappa, phi = d["x"], d["y"], d["kappa"], d["phi"]
    m = len(kappa)
    for i in range(0, len(y), 7):
        sums = np.cumsum(
            [np.sin(2 * np.pi * k * x[i, 0] + p) for k, p in zip(kappa, phi, strict=True)]
        )
        right = [(x[i, 1] <= s) == (y[i] == 1) for s in sums]
        expected = next(j + 1 for j in range(m) if all(right[j:]))
        assert d["critical_frequency"][i] == expected
    z = (x - x.mean(0)) / x.std(0)
    k = int(frequency_run.config["k"])
    for i in range(0, len(y), 11):
        dist = np.linalg.norm(z - z[i], axis=1)
        dist[i] = np.inf
        nearest = np.argsort(dist, kind="stable")[:k]
        assert d["discriminability"][i] == pytest.approx(np.mean(y[nearest] == y[i]), abs=1e-12)
    x1, x2 = d["grid_x1"], d["grid_x2"]
    for member in range(d["boundary"].shape[0]):
        for s in range(d["boundary"].shape[1]):
            region = d["boundary"][member, s]
            agree = []
            for j in range(1, m + 1):
                lam = sum(np.sin(2 * np.pi * kappa[i] * x1 + phi[i]) for i in range(j))
                agree.append(np.mean(region == (x2[:, None] <= lam[None, :])))
            np.testing.assert_allclose(d["agreement"][member, s], agree, atol=1e-12)
            assert d["terms"][member, s] == int(np.argmax(agree)) + 1
    assert np.all((d["accessibility"] >= 0) & (d["accessibility"] <= 1))
    epochs = int(frequency_run.config["epochs"])
    assert d["train_accuracy"].shape == (int(frequency_run.config["members"]), epochs + 1)


def test_frequency_claims_are_the_stored_group_correlations(frequency_run):
    """The claim's binned Pearson r is np.corrcoef of the critical frequencies with the
    mean accessibility per critical frequency, computed here from the stored arrays."""
    d = frequency_run.load_array("frequency")
    claims = stored_claims(frequency_run)
    for name, value in (
        ("critical-frequency-vs-accessibility", "accessibility"),
        ("discriminability-vs-critical-frequency", "discriminability"),
    ):
        cf = d["critical_frequency"]
        groups = np.unique(cf)
        means = [d[value][cf == g].mean() for g in groups]
        r = np.corrcoef(groups, means)[0, 1]
        stored = claims[name]
        assert stored["values"]["binned_pearson"] == pytest.approx(r, abs=1e-12)
        assert stored["verdict"] == ("holds" if r <= -0.5 else "does not hold")
    terms = claims["boundary-adds-frequencies"]["values"]
    assert terms["first_terms"] == pytest.approx(d["terms"][:, 0].mean())
    assert terms["last_terms"] == pytest.approx(d["terms"][:, -1].mean())
