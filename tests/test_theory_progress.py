"""The theory solvers' optional progress callbacks: called with (done, total), ending at
(total, total), and without any effect on the result."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.data import gaussian_mixture
from collapselab.theory.central_path import RenormalisedGD, paper_labels
from collapselab.theory.geodesic import theorem1_monte_carlo, theorem2_study
from collapselab.theory.snr_dynamics import verify_snr_dynamics
from collapselab.theory.ufm import mufm_model, solve_literal
from collapselab.theory.ufm_mse import UFMMSE, ufm_mse_descent


def _calls():
    seen: list[tuple[int, int]] = []
    return seen, lambda done, total: seen.append((done, total))


def _check(seen: list[tuple[int, int]], total: int, most: int) -> None:
    assert seen and seen[-1] == (total, total)
    done = [d for d, _ in seen]
    assert done == sorted(done) and all(t == total for _, t in seen)
    assert len(seen) <= most  # throttled: not one call per step


def _mufm():
    data = gaussian_mixture(3, 4, 6, seed=0).train
    return mufm_model(data.x.double().numpy().T.copy(), data.y.numpy(), 0.005, 0.01)


def test_solve_literal_reports_its_steps_and_is_unchanged() -> None:
    seen, progress = _calls()
    with_progress = solve_literal(_mufm(), steps=1000, progress=progress)
    plain = solve_literal(_mufm(), steps=1000)
    _check(seen, 1000, most=101)
    np.testing.assert_array_equal(with_progress.H, plain.H)


def test_ufm_mse_descent_reports_its_steps_and_is_unchanged() -> None:
    problem = UFMMSE(3, 4, 5, lam=1e-3, lam_h=1e-3)
    seen, progress = _calls()
    a = ufm_mse_descent(problem, 0.1, 500, record_every=100, progress=progress)
    b = ufm_mse_descent(problem, 0.1, 500, record_every=100)
    _check(seen, 500, most=101)
    np.testing.assert_array_equal(a.metrics["loss"], b.metrics["loss"])


def test_renormalised_gd_and_snr_verification_report_their_steps() -> None:
    y = paper_labels(3, 5)
    h = torch.randn(15, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    seen, progress = _calls()
    RenormalisedGD(h, y, 0.1).run(40, 10, metrics=False, progress=progress)
    assert seen == [(10, 40), (20, 40), (30, 40), (40, 40)]
    seen, progress = _calls()
    a = verify_snr_dynamics(3, 5, 3, t_end=20.0, lr=0.5, n_records=5, progress=progress)
    b = verify_snr_dynamics(3, 5, 3, t_end=20.0, lr=0.5, n_records=5)
    _check(seen, 40, most=40)
    np.testing.assert_array_equal(a.omega_simulated, b.omega_simulated)


@pytest.mark.parametrize("study", ["theorem1", "theorem2"])
def test_monte_carlo_studies_report_their_trials(study: str) -> None:
    seen, progress = _calls()
    if study == "theorem1":
        a = theorem1_monte_carlo(12, n_grid=21, progress=progress)
        b = theorem1_monte_carlo(12, n_grid=21)
        _check(seen, 12, most=12)
        np.testing.assert_array_equal(a.s, b.s)
    else:
        a = theorem2_study((0.1, 1.0), 5, n_grid=21, progress=progress)
        b = theorem2_study((0.1, 1.0), 5, n_grid=21)
        _check(seen, 10, most=10)
        np.testing.assert_array_equal(a.transport_cost, b.transport_cost)
