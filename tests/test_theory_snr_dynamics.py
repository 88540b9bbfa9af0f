"""SNR singular-value dynamics, published vs corrected (note 003 §3.8-3.9, Prop. 2, Cor. 1).

The closed forms (bracketed root finding) are checked against ``solve_ivp`` integration of
their ODEs, against the note's table, by substitution into the implicit equation and by
implicit differentiation; the simulators of ``central_path`` (the paper's discrete
procedure and the tolerance-integrated flow) are checked to follow ``"corrected"`` and to
miss ``"published"``.
"""

from __future__ import annotations

import numpy as np
import pytest

from collapselab.metrics import nc1_pinv
from collapselab.stats import class_stats_from_features
from collapselab.theory.central_path import snr_instance
from collapselab.theory.snr_dynamics import (
    VARIANTS,
    closed_form_constants,
    closed_form_lhs,
    omega_asymptotic,
    omega_closed_form,
    omega_ode,
    predicted_nc1_trace,
    snr_rate,
    verify_snr_dynamics,
)

NOTE_TIMES = [100.0, 1e3, 1e4, 1e5]
NOTE_TABLE = {  # note 003 §3.9, C = 4, N = 10, omega(0) = 1
    "published": [1.4026, 3.4691, 7.4075, 13.8485],
    "corrected": [1.5611, 6.0498, 21.8251, 70.4767],
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_note_table(variant):
    got = omega_closed_form(1.0, NOTE_TIMES, 4, 10, variant)
    assert got.shape == (4,)
    np.testing.assert_allclose(got, NOTE_TABLE[variant], rtol=0, atol=1e-4)


def test_constants_as_printed():
    pub = closed_form_constants(4, 10, "published")
    assert (pub.c1, pub.c2, pub.c3) == (160.0, 40.0, 2.5)  # C^2 N, C N, N/4 (Prop. 2)
    cor = closed_form_constants(4, 10, "corrected")
    assert (cor.c1, cor.c2, cor.c3) == (160.0, 20.0, 0.0)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("C,N", [(4, 10), (3, 7), (10, 20)])
def test_closed_form_matches_ode(variant, C, N):
    omega0 = np.array([2.3, 0.9, 0.05])
    t = np.array([0.0, 0.5, 37.0, 1e3, 2.5e4])
    closed = omega_closed_form(omega0, t, C, N, variant)
    ode = omega_ode(omega0, t, C, N, variant)
    assert closed.shape == ode.shape == (5, 3)
    np.testing.assert_allclose(closed[0], omega0, rtol=0)
    np.testing.assert_allclose(closed, ode, rtol=1e-8)
    np.testing.assert_array_equal(omega_ode(omega0, [0.0], C, N, variant), [omega0])


@pytest.mark.parametrize("variant", VARIANTS)
def test_closed_form_solves_its_equation_and_has_the_rate(variant):
    C, N = 5, 8
    omega0 = np.array([0.3, 1.0, 4.0])
    t = np.array([1e-3, 2.0, 300.0, 1e6])
    w = omega_closed_form(omega0, t, C, N, variant)
    a = closed_form_lhs(omega0, C, N, variant)
    lhs = closed_form_lhs(w, C, N, variant)
    # LHS(omega(t)) - a = t up to the rounding of the LHS itself (a ~ 1e3 for omega0 = 4)
    err = np.abs(lhs - a - t[:, None])
    assert (err <= 1e-14 * (np.abs(lhs) + np.abs(a)) + 1e-12 * t[:, None]).all()
    # implicit differentiation: d omega/dt by central differences in t equals the rate
    h = 1e-3 * t[:, None]
    fd = (
        omega_closed_form(omega0, t + h[:, 0], C, N, variant)
        - omega_closed_form(omega0, t - h[:, 0], C, N, variant)
    ) / (2 * h)
    np.testing.assert_allclose(fd, snr_rate(w, C, N, variant), rtol=1e-5)


def test_rates_differ_by_the_factor_of_the_note():
    C, N = 4, 10
    w = np.geomspace(0.01, 100.0, 9)
    ratio = snr_rate(w, C, N, "corrected") / snr_rate(w, C, N, "published")
    np.testing.assert_allclose(ratio, (C + w**2) / C, rtol=1e-14)
    # published rate as printed in Eq. 27: (1/N) omega / (C + omega^2)^2
    np.testing.assert_allclose(snr_rate(w, C, N, "published"), w / N / (C + w**2) ** 2, rtol=1e-15)


@pytest.mark.parametrize("variant", VARIANTS)
def test_asymptotics(variant):
    C, N = 4, 10
    t = np.array([1e4, 1e6, 1e8, 1e10])
    ratio = omega_closed_form(1.0, t, C, N, variant) / omega_asymptotic(t, C, N, variant)
    assert (np.diff(np.abs(ratio - 1)) < 0).all()  # -> 1 monotonically
    assert abs(ratio[-1] - 1) < 1e-3
    if variant == "published":  # Cor. 1: (4t/N)^{1/4}
        np.testing.assert_allclose(omega_asymptotic(t, C, N, variant), (4 * t / N) ** 0.25)
    else:
        np.testing.assert_allclose(omega_asymptotic(t, C, N, variant), (2 * t / (C * N)) ** 0.5)


def test_note_end_to_end_closed_form_numbers():
    omega0 = [1.026, 0.329, 0.162]
    cor = omega_closed_form(omega0, 4000.0, 4, 10, "corrected")
    pub = omega_closed_form(omega0, 4000.0, 4, 10, "published")
    np.testing.assert_allclose(cor, [13.43, 13.06, 12.85], atol=0.01)
    np.testing.assert_allclose(pub, [5.63, 5.53, 5.47], atol=0.01)


def test_predicted_nc1_trace_variants_against_statistics():
    omega = np.array([3.0, 1.2, 0.5])
    x, y = snr_instance(4, 6, 5, omega, seed=1)
    measured = nc1_pinv(class_stats_from_features(x, y, 4, mode="dense"), divide_by_c=False)
    inv2 = float((omega**-2).sum())
    assert predicted_nc1_trace(omega, 4, "corrected") == pytest.approx(measured, rel=1e-12)
    assert measured == pytest.approx(4 * inv2, rel=1e-12)
    # the proof's last equality drops the factor C
    assert predicted_nc1_trace(omega, 4, "published") == pytest.approx(measured / 4, rel=1e-12)


def test_input_errors():
    with pytest.raises(ValueError, match="variant"):
        snr_rate(1.0, 4, 10, "paper")
    with pytest.raises(ValueError, match="t must be >= 0"):
        omega_closed_form(1.0, [-1.0], 4, 10)
    with pytest.raises(ValueError, match="omega0 must be positive"):
        omega_ode([1.0, 0.0], [1.0], 4, 10)
    with pytest.raises(ValueError, match="n_classes"):
        omega_closed_form(1.0, 1.0, 1, 10)
    with pytest.raises(ValueError, match="finite"):
        omega_closed_form(float("nan"), 1.0, 4, 10)
    with pytest.raises(ValueError, match="method"):
        verify_snr_dynamics(method="euler")


# ---------------------------------------------------------------------------------------
# against the simulators


def test_verify_literal_follows_corrected_on_the_note_instance():
    # the note's end-to-end example: C=4, N=10, P=4 from omega(0) = (1.026, 0.329, 0.162)
    rep = verify_snr_dynamics(
        4, 10, 4, omega0=[1.026, 0.329, 0.162], t_end=4000.0, lr=0.5, n_records=11
    )
    np.testing.assert_allclose(rep.omega_simulated[0], [1.026, 0.329, 0.162], rtol=1e-12)
    np.testing.assert_allclose(rep.omega_simulated[-1], [13.43, 13.06, 12.85], atol=0.01)
    assert rep.follows == "corrected"
    assert rep.max_rel_error["corrected"] < 2.5e-3  # measured 1.6e-3 (Euler, lr = 0.5)
    assert rep.final_rel_error["corrected"] < 5e-4  # measured 1.6e-4
    assert rep.final_rel_error["published"] > 1.3  # measured 1.39: 13.4 vs 5.6
    assert rep.gap_factor > 300
    assert rep.drift < 1e-11  # Lemma 6: frozen singular vectors
    assert rep.nc1_trace_rel_error["corrected"] < 1e-12
    assert rep.nc1_trace_rel_error["published"] == pytest.approx(0.75, abs=1e-12)  # 1 - 1/C
    assert rep.lemma1_rel_error < 1e-12
    assert rep.eq10_residual == pytest.approx(rep.eq10_predicted, rel=2e-3)
    assert rep.eq11_residual == pytest.approx(rep.eq11_predicted, rel=2e-3)
    assert rep.summary()["follows"] == "corrected"


def test_verify_flow_follows_corrected_to_integration_accuracy():
    rep = verify_snr_dynamics(
        4, 10, 4, omega0=[1.026, 0.329, 0.162], t_end=4000.0, method="flow", n_records=5
    )
    assert rep.follows == "corrected"
    assert rep.max_rel_error["corrected"] < 1e-8  # measured 3e-11
    assert rep.max_rel_error["published"] > 1.3
    assert rep.eq10_residual == pytest.approx(rep.eq10_predicted, rel=1e-8)
    assert rep.eq11_residual == pytest.approx(rep.eq11_predicted, rel=1e-8)
    # omega_max/omega_min -> 1 and the eq. 10 residual shrinks along the trajectory
    spread = rep.omega_simulated.max(axis=1) / rep.omega_simulated.min(axis=1)
    assert (np.diff(spread) < 0).all()


def test_verify_random_instance_wider_features_projected():
    rep = verify_snr_dynamics(3, 6, 5, seed=3, t_end=200.0, lr=0.25, method="projected")
    assert rep.follows == "corrected"
    assert rep.max_rel_error["corrected"] < 2e-3
    assert rep.max_rel_error["published"] > 10 * rep.max_rel_error["corrected"]
    assert rep.drift < 1e-12
