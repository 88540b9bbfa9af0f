"""Central path, renormalisation, tangent projection and the App. D.1 simulator (note 003 §3).

References are independent of the module: the dense class-centering matrix built entry by
entry, explicit per-sample loops, ``numpy.linalg.lstsq`` for the least-squares classifier,
``scipy.linalg.sqrtm`` for the inverse square root, autograd through a differentiable
closed form, and central finite differences.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from collapselab.metrics import central_path_losses, nc1_pinv, snr_singular_values
from collapselab.stats import class_stats_from_features
from collapselab.theory.central_path import (
    RenormalisedGD,
    central_path_predictions,
    class_centering_matrix,
    invariance_gap,
    ls_gradient,
    ls_loss,
    manifold_residual,
    paper_labels,
    renormalise,
    renormalised_flow,
    snr_instance,
    tangent_projection,
    verify_central_path,
)


def gaussian(seed, C=3, N=6, P=4, shift=0.4):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(C), N)
    h = rng.normal(scale=1.5, size=(C, P))[y] + rng.normal(size=(C * N, P)) + shift
    return torch.from_numpy(h), torch.from_numpy(y)


def brute_within(h, y, C):
    """``Sigma_W`` by an explicit loop over samples (normalised by the total count)."""
    h, y = np.asarray(h), np.asarray(y)
    mu = np.stack([h[y == c].mean(axis=0) for c in range(C)])
    out = np.zeros((h.shape[1], h.shape[1]))
    for i in range(len(y)):
        d = h[i] - mu[y[i]]
        out += np.outer(d, d)
    return out / len(y), mu


def brute_ls(h, y, C):
    """Least-squares ``[W, b]`` at lam = 0 with ``numpy.linalg.lstsq`` on ``[h, 1]``."""
    h, y = np.asarray(h), np.asarray(y)
    ext = np.hstack([h, np.ones((len(y), 1))])
    sol = np.linalg.lstsq(ext, np.eye(C)[y], rcond=None)[0].T
    return sol[:, :-1], sol[:, -1]


# ---------------------------------------------------------------------------------------
# class-centering matrix (Eq. 21)


def test_class_centering_matrix_entries_and_facts():
    C, N = 3, 4
    cm = class_centering_matrix(C, N).numpy()
    y = paper_labels(C, N).numpy()
    np.testing.assert_array_equal(y, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2])
    ref = np.zeros((C * N, C * N))
    for i in range(C * N):
        for j in range(C * N):
            ref[i, j] = ((i == j) - (y[i] == y[j]) / N) / (C * N)
    np.testing.assert_allclose(cm, ref, rtol=0, atol=1e-16)
    Y = np.eye(C)[y].T  # the paper's C x CN target matrix
    assert np.abs(cm @ Y.T).max() < 1e-16
    assert np.abs(cm @ np.ones(C * N)).max() < 1e-16
    np.testing.assert_allclose(cm @ cm, cm / (C * N), rtol=0, atol=1e-17)
    np.testing.assert_array_equal(cm, cm.T)


def test_class_centering_matrix_gives_within_covariance():
    h, y = gaussian(0, C=3, N=5, P=4)
    cm = class_centering_matrix(3, 5)
    ref, _ = brute_within(h, y, 3)
    np.testing.assert_allclose((h.T @ cm @ h).numpy(), ref, rtol=0, atol=1e-14)


def test_centering_matrix_rejects_bad_sizes():
    with pytest.raises(ValueError, match="n_classes"):
        class_centering_matrix(1, 4)
    with pytest.raises(ValueError, match="n_per_class"):
        class_centering_matrix(3, 0)


# ---------------------------------------------------------------------------------------
# renormalisation and invariance (§3.1, Eq. 7)


def test_renormalise_whitens_and_centres():
    h, y = gaussian(1, C=4, N=6, P=5)
    x = renormalise(h, y).numpy()
    sw, mu = brute_within(x, y, 4)
    np.testing.assert_allclose(sw, np.eye(5), rtol=0, atol=1e-13)
    assert np.abs(mu.mean(axis=0)).max() < 1e-14
    # class means are the SNR matrix Sigma_W^{-1/2} M̄ (Eq. 8), via scipy's sqrtm
    sw_h, mu_h = brute_within(h, y, 4)
    snr = np.linalg.inv(scipy.linalg.sqrtm(sw_h).real) @ (mu_h - mu_h.mean(axis=0)).T
    np.testing.assert_allclose(mu.T, snr, rtol=0, atol=1e-12)
    assert manifold_residual(x, y) < 1e-13


def test_renormalise_singular_within_covariance_raises():
    h, y = gaussian(2, C=3, N=2, P=5)  # C(N-1) = 3 < P
    with pytest.raises(ValueError, match="singular"):
        renormalise(h, y)


def test_least_squares_predictions_match_lstsq():
    h, y = gaussian(3, C=3, N=7, P=4)
    w, b = brute_ls(h, y, 3)
    ref = h.numpy() @ w.T + b
    np.testing.assert_allclose(central_path_predictions(h, y).numpy(), ref, atol=1e-12)


def test_invariance_under_invertible_maps():
    h, y = gaussian(4, C=4, N=6, P=5)
    rng = np.random.default_rng(4)
    for _ in range(3):
        a = rng.normal(size=(5, 5))  # generic: invertible, not symmetric
        assert abs(np.linalg.det(a)) > 1e-3
        assert invariance_gap(h, y, a) < 1e-12
    # and the renormalisation map itself (a symmetric PD A, plus a shift)
    x = renormalise(h, y)
    gap = (central_path_predictions(x, y) - central_path_predictions(h, y)).abs().max()
    assert float(gap) < 1e-12
    assert abs(ls_loss(x, y) - ls_loss(h, y)) < 1e-14
    # the ridge penalty breaks the invariance
    assert invariance_gap(h, y, 3.0 * np.eye(5), lam=0.1) > 1e-2


def test_invariance_gap_rejects_bad_transform():
    h, y = gaussian(5)
    with pytest.raises(ValueError, match="transform"):
        invariance_gap(h, y, np.eye(3))


# ---------------------------------------------------------------------------------------
# the loss on the central path and its gradient


def torch_ls_loss(h, y, C, lam):
    """``L_LS`` as a differentiable function of ``h``: explicit extended normal equations."""
    n = h.shape[0]
    ext = torch.cat([h, torch.ones(n, 1, dtype=h.dtype)], dim=1)
    Y = torch.eye(C, dtype=h.dtype)[y]
    S = ext.T @ ext / n + lam * torch.eye(ext.shape[1], dtype=h.dtype)
    Wt = torch.linalg.solve(S, ext.T @ Y / n).T
    r = ext @ Wt.T - Y
    return 0.5 * (r * r).sum() / n + 0.5 * lam * (Wt * Wt).sum()


@pytest.mark.parametrize("lam", [0.0, 0.05])
def test_ls_gradient_matches_autograd(lam):
    h, y = gaussian(6, C=3, N=6, P=4)
    hh = h.clone().requires_grad_(True)
    loss = torch_ls_loss(hh, y, 3, lam)
    (ref,) = torch.autograd.grad(loss, hh)
    assert abs(float(loss.detach()) - ls_loss(h, y, lam)) < 1e-14
    got = ls_gradient(h, y, lam)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=0, atol=1e-14)


def test_ls_gradient_matches_finite_differences_and_keeps_mean():
    h, y = gaussian(7, C=3, N=5, P=3)
    g = ls_gradient(h, y).numpy()
    eps = 1e-6
    for i, j in [(0, 0), (4, 2), (11, 1), (14, 0)]:
        up, down = h.clone(), h.clone()
        up[i, j] += eps
        down[i, j] -= eps
        fd = (ls_loss(up, y) - ls_loss(down, y)) / (2 * eps)
        assert abs(fd - g[i, j]) < 1e-9
    assert np.abs(g.sum(axis=0)).max() < 1e-15  # global mean preserved at lam = 0


# ---------------------------------------------------------------------------------------
# tangent projection (Props. 3-4)


def dense_projection(x, z, C, N):
    cm = class_centering_matrix(C, N)
    s = x.T @ cm @ z + z.T @ cm @ x
    return z - 0.5 * x @ s, cm


def test_tangent_projection_matches_dense_and_is_tangent():
    C, N, P = 3, 5, 4
    h, y = gaussian(8, C=C, N=N, P=P)
    x = renormalise(h, y)
    g = torch.Generator().manual_seed(8)
    z = torch.randn(C * N, P, generator=g, dtype=torch.float64)
    ref, cm = dense_projection(x, z, C, N)
    got = tangent_projection(x, z, y)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=0, atol=1e-14)
    tang = x.T @ cm @ got
    assert float((tang + tang.T).abs().max()) < 1e-14  # X C Π^T + Π C X^T = 0 (paper layout)
    again = tangent_projection(x, got, y)
    assert float((again - got).abs().max()) < 1e-14  # idempotent
    # an already tangent direction is left alone; a fibre direction (X S) is removed
    s = torch.randn(P, P, generator=g, dtype=torch.float64)
    fibre = tangent_projection(x, x @ (s + s.T), y)
    assert float(fibre.abs().max()) < 1e-13


def test_tangent_projection_is_not_self_adjoint():
    C, N, P = 3, 5, 4
    h, y = gaussian(9, C=C, N=N, P=P)
    x = renormalise(h, y)
    g = torch.Generator().manual_seed(9)
    a, b = (torch.randn(C * N, P, generator=g, dtype=torch.float64) for _ in range(2))
    left = float((tangent_projection(x, a, y) * b).sum())
    right = float((a * tangent_projection(x, b, y)).sum())
    # Lemma 4 moves Π across <., .>_F, which needs left == right (note 003 §3.9)
    assert abs(left - right) > 0.05 * (abs(left) + abs(right))


def test_tangent_projection_row_order_and_errors():
    C, N, P = 3, 4, 3
    h, y = gaussian(10, C=C, N=N, P=P)
    x = renormalise(h, y)
    z = torch.from_numpy(np.random.default_rng(10).normal(size=(C * N, P)))
    perm = torch.from_numpy(np.random.default_rng(11).permutation(C * N))
    got = tangent_projection(x[perm], z[perm], y[perm])
    np.testing.assert_allclose(got.numpy(), tangent_projection(x, z, y)[perm].numpy(), atol=1e-15)
    with pytest.raises(ValueError, match="direction"):
        tangent_projection(x, z[:5], y)
    with pytest.raises(ValueError, match="balanced"):
        tangent_projection(x[:-1], z[:-1], y[:-1])


# ---------------------------------------------------------------------------------------
# instances with prescribed SNR spectrum


def test_snr_instance_has_prescribed_spectrum():
    omega = [0.4, 2.5, 1.1]
    x, y = snr_instance(4, 5, 6, omega, seed=3)
    assert x.shape == (20, 6)
    np.testing.assert_array_equal(y.numpy(), np.repeat(np.arange(4), 5))
    sw, mu = brute_within(x, y, 4)
    np.testing.assert_allclose(sw, np.eye(6), atol=1e-13)
    assert np.abs(mu.mean(axis=0)).max() < 1e-14
    sv = np.linalg.svd(mu.T, compute_uv=False)[:3]  # SNR = M̄ when Sigma_W = I
    np.testing.assert_allclose(sv, sorted(omega, reverse=True), rtol=1e-13)
    with pytest.raises(ValueError, match="n_classes - 1"):
        snr_instance(4, 5, 6, [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        snr_instance(4, 5, 6, [1.0, 0.0, 2.0])
    with pytest.raises(ValueError, match="C\\(N-1\\)"):
        snr_instance(4, 2, 6, [1.0, 1.0, 2.0])


# ---------------------------------------------------------------------------------------
# the App. D.1 simulator


def brute_renormalised_steps(h, y, C, lr, n_steps, projected=False):
    """App. D.1 with lstsq classifiers, explicit gradients and scipy's sqrtm."""
    h, y = np.asarray(h, dtype=float), np.asarray(y)
    n = len(y)
    Y = np.eye(C)[y]

    def renorm(a):
        sw, mu = brute_within(a, y, C)
        return (a - mu.mean(axis=0)) @ np.linalg.inv(scipy.linalg.sqrtm(sw).real)

    x = renorm(h)
    for _ in range(n_steps):
        w, b = brute_ls(x, y, C)
        g = (x @ w.T + b - Y) @ w / n
        if projected:
            g = dense_projection(torch.from_numpy(x), torch.from_numpy(g), C, n // C)[0].numpy()
        x = renorm(x - lr * g)
    return x


@pytest.mark.parametrize("method", ["literal", "projected"])
def test_renormalised_gd_matches_brute_force_steps(method):
    h, y = gaussian(12, C=3, N=5, P=3)
    gd = RenormalisedGD(h, y, lr=0.7, method=method)
    gd.step(4)
    ref = brute_renormalised_steps(h, y, 3, 0.7, 4, projected=method == "projected")
    np.testing.assert_allclose(gd.features.numpy(), ref, rtol=0, atol=1e-12)
    assert gd.step_count == 4 and gd.time == pytest.approx(2.8)


def test_renormalised_gd_records_theory_quantities():
    C, N, P = 4, 6, 5
    h, y = gaussian(13, C=C, N=N, P=P)
    traj = RenormalisedGD(h, y, lr=1.0).run(60, record_every=20)
    np.testing.assert_array_equal(traj.steps, [0, 20, 40, 60])
    np.testing.assert_allclose(traj.times, [0.0, 20.0, 40.0, 60.0])
    assert traj.omega.shape == (4, C - 1)
    assert (np.diff(traj.omega, axis=0) > 0).all()  # every omega_j increases
    assert traj.left_drift.max() < 1e-12 and traj.right_drift.max() < 1e-12  # Lemma 6
    m = traj.metrics
    assert m["manifold_residual"].max() < 1e-12 and m["global_mean_norm"].max() < 1e-13
    assert m["mse_ls_perp"].max() == 0.0  # the classifier is W_LS by construction
    inv2 = (traj.omega**-2).sum(axis=1)
    np.testing.assert_allclose(m["nc1_snr"], inv2, rtol=1e-12)
    np.testing.assert_allclose(m["nc1"], inv2, rtol=1e-10)  # whitened: Tr(.)/C = sum omega^-2
    np.testing.assert_allclose(m["nc1_trace"], C * inv2, rtol=1e-10)
    lemma1 = [central_path_losses(row, C) for row in traj.omega]
    np.testing.assert_allclose(m["mse_ls_loss"], [d["ls_loss"] for d in lemma1], rtol=1e-12)
    np.testing.assert_allclose(m["mse_nc1_term"], [d["nc1_term"] for d in lemma1], rtol=1e-10)
    assert (np.diff(m["mse_ls_loss"]) < 0).all()
    # the first record is the renormalised start: omega of the raw features (invariance)
    st = class_stats_from_features(h, y, C, mode="dense")
    np.testing.assert_allclose(traj.omega[0], snr_singular_values(st).numpy(), rtol=1e-12)
    x_stats = class_stats_from_features(traj.features, y, C, mode="dense")
    assert nc1_pinv(x_stats, divide_by_c=False) == pytest.approx(m["nc1_trace"][-1], rel=1e-12)


def test_renormalised_gd_is_row_order_equivariant():
    h, y = gaussian(14, C=3, N=5, P=4)
    perm = torch.from_numpy(np.random.default_rng(14).permutation(15))
    a = RenormalisedGD(h, y, lr=0.5).run(10, 10, metrics=False)
    b = RenormalisedGD(h[perm], y[perm], lr=0.5).run(10, 10, metrics=False)
    np.testing.assert_allclose(b.omega, a.omega, rtol=1e-13)
    np.testing.assert_allclose(b.features.numpy(), a.features[perm].numpy(), atol=1e-13)


def test_discrete_solvers_converge_to_the_flow_at_first_order():
    x, y = snr_instance(3, 6, 3, [1.5, 0.6], seed=2)
    flow = renormalised_flow(x, y, [0.0, 100.0], metrics=False)
    assert flow.left_drift.max() < 1e-12
    errors = {}
    for method in ("literal", "projected"):
        for lr in (2.0, 1.0):
            run = RenormalisedGD(x, y, lr, method=method).run(round(100 / lr), 1000, metrics=False)
            errors[method, lr] = np.abs(run.omega[-1] / flow.omega[-1] - 1).max()
        ratio = errors[method, 2.0] / errors[method, 1.0]
        assert 1.7 < ratio < 2.3, (method, ratio)  # Euler: error ∝ lr
        assert errors[method, 1.0] < 3e-3  # measured 2.2e-3 (literal), 1.8e-3 (projected)


def test_renormalised_flow_stays_on_manifold():
    x, y = snr_instance(3, 5, 4, [2.0, 0.7], seed=5)
    traj = renormalised_flow(x, y, np.linspace(0, 50, 3))
    # drift of the integrated state from X C X^T = I before the record's renormalisation
    assert traj.metrics["manifold_residual"].max() < 1e-8
    assert traj.steps is None and traj.method == "flow"
    assert (np.diff(traj.omega, axis=0) > 0).all()


def test_simulator_input_errors():
    h, y = gaussian(15, C=3, N=4, P=3)
    with pytest.raises(ValueError, match="balanced"):
        RenormalisedGD(h[:-1], y[:-1], lr=0.1)
    with pytest.raises(ValueError, match="lr"):
        RenormalisedGD(h, y, lr=0.0)
    with pytest.raises(ValueError, match="method"):
        RenormalisedGD(h, y, lr=0.1, method="riemannian")
    with pytest.raises(ValueError, match="labels"):
        RenormalisedGD(h, y[:-1], lr=0.1)
    with pytest.raises(ValueError, match="times"):
        renormalised_flow(h, y, [1.0, 0.5])
    with pytest.raises(ValueError, match="NaN"):
        bad = h.clone()
        bad[0, 0] = float("nan")
        RenormalisedGD(bad, y, lr=0.1)


def test_verify_central_path_identities():
    check = verify_central_path(n_classes=4, n_per_class=6, dim=5, seed=1)
    for name in (
        "centering",
        "within_cov",
        "invariance",
        "renormalised_identity",
        "tangency",
        "idempotence",
        "lemma1",
        "whitened_nc1",
        "gradient_column_sum",
    ):
        assert getattr(check, name) < 1e-12, name
    assert check.self_adjoint_gap > 0.05
