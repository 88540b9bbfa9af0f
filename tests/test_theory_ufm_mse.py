"""MSE unconstrained-features model: gradient, descent, decomposition along the trajectory.

References: autograd through an independent torch objective, central finite differences,
an explicit per-sample loop for the loss, and the extended-coordinate normal equations for
``W~_LS`` and ``L_LS⊥`` (note 003 Prop. 1, Theorem 1).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.theory.ufm_mse import UFMMSE, ufm_mse_descent, ufm_mse_minimise, verify_ufm_mse


def random_point(problem, seed):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(problem.n_classes, problem.dim)),
        rng.normal(size=problem.n_classes),
        rng.normal(size=(problem.n_samples, problem.dim)) + 0.3,
    )


def torch_objective(W, b, H, y, C, lam, lam_h):
    Y = torch.nn.functional.one_hot(y, C).to(H.dtype)
    data = 0.5 * ((H @ W.T + b - Y) ** 2).sum(dim=1).mean()
    return data + 0.5 * lam * (W.square().sum() + b.square().sum()) + 0.5 * lam_h * H.square().sum()


def loop_loss(W, b, H, y, C, lam):
    total = 0.0
    for i in range(len(y)):
        r = W @ H[i] + b - np.eye(C)[y[i]]
        total += r @ r
    return 0.5 * total / len(y) + 0.5 * lam * (np.sum(W**2) + np.sum(b**2))


def test_loss_and_objective_match_loop():
    pb = UFMMSE(3, 4, 5, lam=0.03, lam_h=0.02)
    W, b, H = random_point(pb, 0)
    ref = loop_loss(W, b, H, pb.labels, 3, 0.03)
    assert pb.loss(W, b, H) == pytest.approx(ref, rel=1e-14)
    assert pb.objective(W, b, H) == pytest.approx(ref + 0.01 * np.sum(H**2), rel=1e-14)
    np.testing.assert_array_equal(pb.labels, np.repeat(np.arange(3), 4))


@pytest.mark.parametrize("lam,lam_h", [(0.0, 0.0), (5e-4, 1e-3), (0.2, 0.05)])
def test_gradient_matches_autograd(lam, lam_h):
    pb = UFMMSE(4, 3, 6, lam=lam, lam_h=lam_h)
    W, b, H = random_point(pb, 1)
    tw, tb, th = (torch.tensor(a, requires_grad=True) for a in (W, b, H))
    f = torch_objective(tw, tb, th, torch.from_numpy(pb.labels), 4, lam, lam_h)
    refs = torch.autograd.grad(f, (tw, tb, th))
    assert pb.objective(W, b, H) == pytest.approx(float(f.detach()), rel=1e-14)
    for got, ref in zip(pb.gradient(W, b, H), refs, strict=True):
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-12, atol=1e-15)


def test_gradient_matches_finite_differences():
    pb = UFMMSE(3, 3, 4, lam=0.01, lam_h=0.005)
    point = list(random_point(pb, 2))
    grads = pb.gradient(*point)
    eps = 1e-6
    for block, idx in [(0, (1, 2)), (1, (0,)), (2, (5, 3)), (2, (0, 0))]:
        up = [p.copy() for p in point]
        down = [p.copy() for p in point]
        up[block][idx] += eps
        down[block][idx] -= eps
        fd = (pb.objective(*up) - pb.objective(*down)) / (2 * eps)
        assert fd == pytest.approx(grads[block][idx], abs=1e-9)


def test_descent_is_monotone_for_a_small_step():
    pb = UFMMSE(4, 5, 6, lam=5e-4, lam_h=1e-4)
    traj = ufm_mse_descent(pb, lr=0.1, n_steps=300, record_every=1, metrics=False, seed=3)
    assert traj.steps.tolist() == list(range(301))
    assert (np.diff(traj.metrics["objective"]) < 0).all()


def test_descent_step_is_plain_gradient_descent():
    pb = UFMMSE(3, 4, 5, lam=0.01, lam_h=0.001)
    init = random_point(pb, 4)
    traj = ufm_mse_descent(pb, lr=0.2, n_steps=3, init=init, metrics=False)
    w, b, h = (a.copy() for a in init)
    for _ in range(3):
        gw, gb, gh = pb.gradient(w, b, h)
        w, b, h = w - 0.2 * gw, b - 0.2 * gb, h - 0.2 * gh
    for got, ref in ((traj.W, w), (traj.b, b), (traj.H, h)):
        np.testing.assert_array_equal(got, ref)


def brute_ls_perp(W, b, H, y, C, lam):
    """``L_LS⊥`` from the extended normal equations (Prop. 1, Theorem 1)."""
    n = len(y)
    ext = np.hstack([H, np.ones((n, 1))])
    S = ext.T @ ext / n + lam * np.eye(ext.shape[1])
    Wls = np.linalg.solve(S, ext.T @ np.eye(C)[y] / n).T
    d = np.hstack([W, b[:, None]]) - Wls
    return 0.5 * np.trace(d @ S @ d.T)


def test_decomposition_closes_at_every_record():
    pb = UFMMSE(4, 5, 8, lam=5e-4, lam_h=1e-4)
    traj = ufm_mse_descent(
        pb, lr=1.0, n_steps=600, record_steps=[1, 3, 10, 30, 100, 300, 600], seed=5
    )
    m = traj.metrics
    np.testing.assert_array_equal(traj.steps, [0, 1, 3, 10, 30, 100, 300, 600])
    parts = m["mse_nc1_term"] + m["mse_nc23_term"] + m["mse_ls_perp"]
    assert np.abs(m["loss"] - parts).max() < 1e-10
    assert m["decomposition_residual"].max() < 1e-10
    np.testing.assert_allclose(m["mse_loss"], m["loss"], rtol=1e-12)  # statistics vs raw
    np.testing.assert_allclose(m["mse_ls_loss"], m["mse_nc1_term"] + m["mse_nc23_term"], rtol=1e-12)
    perp = brute_ls_perp(traj.W, traj.b, traj.H, pb.labels, 4, pb.lam)
    assert m["mse_ls_perp"][-1] == pytest.approx(perp, rel=1e-8, abs=1e-16)
    for key in ("nc1", "nc2_etf_distance", "nc3_self_duality", "nc4_ncc_mismatch"):
        assert key in m and np.isfinite(m[key]).all()
    # nc1_snr needs a nonsingular Sigma_W; the feature decay drives H onto the class-mean span,
    # so by step 600 Sigma_W is singular and the record is NaN (aligned, not dropped).
    assert np.isfinite(m["nc1_snr"][:-1]).all() and np.isnan(m["nc1_snr"][-1])


def test_fig2_behaviour_and_converged_solution():
    rep = verify_ufm_mse()  # C=4, N=5, P=8, lam=5e-4, lam_h=1e-4, lr=1, 4000 steps
    assert rep.decomposition_error < 1e-12
    assert rep.objective_monotone
    # the pair reaches the central path early: L_LS⊥/L_LS <= 1e-3 by step 100 (measured 100)
    assert 0 < rep.ls_perp_step <= 150
    assert rep.ls_perp_ratio_final < 1e-4  # measured 7.8e-6
    # L_NC2/3 falls below L_NC1 first (measured at step 50), then NC1 shrinks
    assert 0 < rep.nc23_below_nc1_step <= 100
    assert rep.final["mse_nc23_term"] < 1e-2 * rep.final["mse_nc1_term"]
    assert rep.nc1_ratio < 0.05  # measured 0.018
    # the converged minimiser: stationary, on the central path, exact NC1-NC3
    conv = rep.converged
    assert conv["grad_norm"] < 1e-8
    # ∇_W~ F = (W~ - W~_LS)(S~ + lam I): distance <= |grad| / lam = 1e-9 / 5e-4
    assert conv["ls_perp"] < 1e-14 and conv["ls_distance"] < 1e-5
    assert conv["nc1_trace_ratio"] < 1e-12
    assert conv["nc2_etf_distance"] < 1e-6 and conv["nc3_self_duality"] < 1e-12
    assert rep.final["objective"] > conv["objective"]  # GD is still on its way down


def test_minimise_from_given_start_is_stationary():
    pb = UFMMSE(3, 4, 4, lam=1e-3, lam_h=1e-3)
    sol = ufm_mse_minimise(pb, init=random_point(pb, 6))
    assert sol.success and sol.grad_norm < 1e-8
    grads = pb.gradient(sol.W, sol.b, sol.H)
    assert max(np.abs(g).max() for g in grads) <= 1e-9  # the default gtol


def test_input_errors():
    with pytest.raises(ValueError, match="n_classes"):
        UFMMSE(1, 4, 4)
    with pytest.raises(ValueError, match="lam_h"):
        UFMMSE(3, 4, 4, lam_h=-1.0)
    pb = UFMMSE(3, 4, 4)
    W, b, H = random_point(pb, 7)
    with pytest.raises(ValueError, match="H must have shape"):
        pb.loss(W, b, H[:-1])
    with pytest.raises(TypeError, match="W must be"):
        pb.loss(W.tolist(), b, H)
    bad = H.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or Inf"):
        pb.gradient(W, b, bad)
    with pytest.raises(ValueError, match="lr"):
        ufm_mse_descent(pb, lr=0.0, n_steps=3)
    with pytest.raises(ValueError, match="record_steps"):
        ufm_mse_descent(pb, lr=0.1, n_steps=3, record_steps=[5])
    with pytest.raises(FloatingPointError, match="lower lr"):
        ufm_mse_descent(pb, lr=1e3, n_steps=200, record_every=100, metrics=False)


def test_series_stay_aligned_when_a_key_is_missing_at_some_records() -> None:
    """P > C(N-1): Sigma_W is singular at init (no nc1_snr) but every series has length T."""
    problem = UFMMSE(n_classes=3, n_per_class=2, dim=8, lam=5e-4)
    trajectory = ufm_mse_descent(problem, lr=0.5, n_steps=20, record_every=5, seed=0)
    for key, series in trajectory.metrics.items():
        assert series.shape == trajectory.steps.shape, key
    assert np.isfinite(trajectory.metrics["loss"]).all()
