"""MSE decomposition, least-squares classifier, SNR and lambda conversion (note 003 §2.4-2.5).

References are independent: raw-sample sums in numpy float64, the extended-coordinate
normal equations, scipy's optimiser and matrix powers, and autograd through PyTorch's own
MSELoss and SGD weight decay.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import torch

from collapselab.metrics import (
    central_path_losses,
    least_squares_classifier,
    mse_decomposition,
    mse_loss,
    nc1_snr,
    paper_lambda,
    snr_matrix,
    snr_singular_values,
)
from collapselab.metrics.nc import nc_metrics
from collapselab.stats import class_stats_from_features


def problem(seed, C=3, D=5, per_class=(10, 10, 10), spread=1.0):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.full(k, c) for c, k in enumerate(per_class)])
    H = rng.normal(scale=spread, size=(C, D))[y] + rng.normal(size=(len(y), D)) + 0.7
    return H, y, rng.normal(size=(C, D)), rng.normal(size=C)


def brute_mse(H, y, C, lam, W=None, b=None, weighting="balanced"):
    """Paper's forms from raw samples: extended coordinates, explicit weighted sums."""
    N, D = H.shape
    n = np.bincount(y, minlength=C).astype(float)
    pi = np.full(C, 1 / C) if weighting == "balanced" else n / N
    w = pi[y] / n[y]  # per-sample weights, summing to one
    Ht = np.vstack([H.T, np.ones(N)])
    Y = np.eye(C)[:, y]
    S = (Ht * w) @ Ht.T
    R = (Y * w) @ Ht.T
    A = S + lam * np.eye(D + 1)
    Wls = np.linalg.solve(A, R.T).T

    def loss(Wt):
        return 0.5 * sum(w[i] * np.sum((Wt @ Ht[:, i] - Y[:, i]) ** 2) for i in range(N)) + (
            0.5 * lam * np.sum(Wt**2)
        )

    mu = np.stack([H[y == c].mean(axis=0) for c in range(C)])
    Mt = np.vstack([mu.T, np.ones(C)])
    Swt = np.zeros((D + 1, D + 1))
    for i in range(N):
        d = Ht[:, i] - Mt[:, y[i]]
        Swt += w[i] * np.outer(d, d)
    out = {
        "W_ls": Wls,
        "loss_fn": loss,
        "grad_fn": lambda Wt: (Wt @ Ht - Y) * w @ Ht.T + lam * Wt,
        "mse_ls_loss": loss(Wls),
        "mse_nc1_term": 0.5 * np.trace(Wls @ (Swt + lam * np.eye(D + 1)) @ Wls.T),
        "mse_nc23_term": 0.5 * np.sum(pi * np.sum((Wls @ Mt - np.eye(C)) ** 2, axis=0)),
        "Sw": Swt[:D, :D],
        "mu": mu,
        "pi": pi,
    }
    if W is not None:
        Wt = np.hstack([W, np.asarray(b).reshape(C, 1)])
        delta = Wt - Wls
        out["mse_loss"] = loss(Wt)
        out["mse_ls_perp"] = 0.5 * np.trace(delta @ A @ delta.T)
    return out


def close(a, b, rel=1e-10):
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-14)


@pytest.mark.parametrize("lam", [0.0, 1e-3, 0.5])
@pytest.mark.parametrize(
    ("per_class", "weighting"),
    [((10, 10, 10), "balanced"), ((6, 9, 15), "balanced"), ((6, 9, 15), "sample")],
)
def test_decomposition_matches_paper_forms_and_identity(lam, per_class, weighting):
    H, y, W, b = problem(0, per_class=per_class)
    st = class_stats_from_features(H, y, 3, weighting=weighting, mode="dense")
    ref = brute_mse(H, y, 3, lam, W, b, weighting)
    dec = mse_decomposition(st, lam, W, b)
    got_w = torch.cat([dec.W_ls, dec.b_ls.unsqueeze(1)], dim=1).numpy()
    np.testing.assert_allclose(got_w, ref["W_ls"], rtol=1e-10, atol=1e-12)
    for key, value in dec.as_dict().items():
        if key in ref:
            assert close(value, ref[key]), (key, value, ref[key])
    # Theorem 1 + 2: the raw-sample loss splits exactly into the three terms.
    assert close(ref["mse_loss"], dec.nc1_term + dec.nc23_term + dec.ls_perp, 1e-10)
    assert close(dec.ls_loss, dec.nc1_term + dec.nc23_term, 1e-12)
    assert close(mse_loss(st, lam, W, b), ref["mse_loss"])
    # On the central path the distance vanishes.
    on_path = mse_decomposition(st, lam, dec.W_ls, dec.b_ls)
    assert on_path.ls_perp < 1e-14 * dec.ls_loss and on_path.ls_distance == 0


def test_least_squares_classifier_is_a_numerical_minimiser():
    H, y, _, _ = problem(1)
    lam = 2e-2
    st = class_stats_from_features(H, y, 3, mode="dense")
    w, b = least_squares_classifier(st, lam)
    wt = torch.cat([w, b.unsqueeze(1)], dim=1).numpy()
    ref = brute_mse(H, y, 3, lam)
    assert np.abs(ref["grad_fn"](wt)).max() < 1e-13  # first-order optimality
    shape = wt.shape
    res = scipy.optimize.minimize(
        lambda x: ref["loss_fn"](x.reshape(shape)),
        np.zeros(wt.size),
        jac=lambda x: ref["grad_fn"](x.reshape(shape)).ravel(),
        method="BFGS",
        options={"gtol": 1e-12, "maxiter": 2000},
    )
    np.testing.assert_allclose(res.x.reshape(shape), wt, atol=1e-7)
    assert ref["loss_fn"](wt) <= res.fun + 1e-15


def test_unextended_forms_at_lambda_zero():
    """Eq. 16-18 and Eq. 6: W_LS = M̄^T Sigma_T^{-1}/C, b_LS = 1/C - W_LS mu_G."""
    H, y, _, _ = problem(2, C=4, D=6, per_class=(9, 9, 9, 9))
    C = 4
    st = class_stats_from_features(H, y, C, mode="dense")
    ref = brute_mse(H, y, C, 0.0)
    mu_g = ref["mu"].mean(axis=0)
    mbar = (ref["mu"] - mu_g).T
    sigma_t = np.cov(H.T, bias=True)
    w16 = mbar.T @ np.linalg.inv(sigma_t) / C
    w, b = least_squares_classifier(st, 0.0)
    np.testing.assert_allclose(w.numpy(), w16, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.numpy(), 1 / C - w16 @ mu_g, rtol=1e-10, atol=1e-12)
    dec = mse_decomposition(st, 0.0)
    phi = np.eye(C) - 1 / C
    assert close(dec.nc23_term, np.sum((w16 @ mbar - phi) ** 2) / (2 * C))
    assert close(dec.nc1_term, 0.5 * np.trace(w16 @ ref["Sw"] @ w16.T))


def test_lemma1_spectral_losses():
    H, y, _, _ = problem(3, C=4, D=6, per_class=(9, 9, 9, 9))
    st = class_stats_from_features(H, y, 4, mode="dense")
    omega = snr_singular_values(st)
    spectral = central_path_losses(omega, 4)
    dec = mse_decomposition(st, 0.0)
    assert close(spectral["ls_loss"], dec.ls_loss)
    assert close(spectral["nc1_term"], dec.nc1_term)
    assert close(spectral["nc23_term"], dec.nc23_term)


def test_snr_matches_brute_force_and_whitened_nc1():
    H, y, _, _ = problem(4, C=4, D=6, per_class=(9, 9, 9, 9))
    st = class_stats_from_features(H, y, 4, mode="dense")
    ref = brute_mse(H, y, 4, 0.0)
    inv_sqrt = scipy.linalg.fractional_matrix_power(ref["Sw"], -0.5).real
    mbar = (ref["mu"] - ref["mu"].mean(axis=0)).T
    np.testing.assert_allclose(snr_matrix(st).numpy(), inv_sqrt @ mbar, rtol=1e-9, atol=1e-12)
    omega = np.linalg.svd(inv_sqrt @ mbar, compute_uv=False)[:3]
    np.testing.assert_allclose(snr_singular_values(st).numpy(), omega, rtol=1e-10)
    # In whitened coordinates Tr(Sigma_W Sigma_B^+)/C = sum omega^-2 (note 003 §2.5).
    white = class_stats_from_features(H @ inv_sqrt, y, 4, mode="dense")
    assert close(nc_metrics(white)["nc1"], nc1_snr(st), 1e-9)
    assert close(nc1_snr(st), np.sum(omega**-2.0), 1e-10)
    # The paper's proof writes Tr(Sigma_W Sigma_B^+) = sum omega^-2 (no /C): off by C = 4.
    published = nc_metrics(white, nc1_divide_by_c=False)["nc1"]
    assert close(published / nc1_snr(st), 4.0, 1e-9)


@pytest.mark.parametrize("weighting", ["balanced", "sample"])
def test_snr_invariance_and_central_path_prediction_invariance(weighting):
    """Eq. 7: predictions of the LS classifier and nc1_snr survive any invertible map."""
    H, y, _, _ = problem(5, C=3, D=4, per_class=(8, 11, 14))
    A = np.random.default_rng(6).normal(size=(4, 4)) + 2 * np.eye(4)
    st = class_stats_from_features(H, y, 3, mode="dense", weighting=weighting)
    mapped = class_stats_from_features(H @ A.T, y, 3, mode="dense", weighting=weighting)
    assert close(nc1_snr(st), nc1_snr(mapped), 1e-9)
    assert abs(nc_metrics(st)["nc1"] - nc_metrics(mapped)["nc1"]) > 1e-3  # nc1 is not
    white = class_stats_from_features(
        H @ scipy.linalg.fractional_matrix_power(st.within_cov.numpy(), -0.5).real.T,
        y,
        3,
        mode="dense",
        weighting=weighting,
    )
    assert close(nc_metrics(white)["nc1"], nc1_snr(st), 1e-9)
    w, b = least_squares_classifier(st, 0.0)
    w2, b2 = least_squares_classifier(mapped, 0.0)
    before = H @ w.numpy().T + b.numpy()
    after = (H @ A.T) @ w2.numpy().T + b2.numpy()
    np.testing.assert_allclose(after, before, rtol=1e-9, atol=1e-11)


def test_rank_deficient_second_moment_uses_minimum_norm_solution():
    H, y, _, _ = problem(7, C=3, D=12, per_class=(3, 3, 3))  # D + 1 > N: S~ singular
    st = class_stats_from_features(H, y, 3, mode="dense")
    dec = mse_decomposition(st, 0.0, np.ones((3, 12)), np.zeros(3))
    n = len(y)
    Ht = np.vstack([H.T, np.ones(n)])
    Y = np.eye(3)[:, y]
    wt = torch.cat([dec.W_ls, dec.b_ls.unsqueeze(1)], dim=1).numpy()
    np.testing.assert_allclose(wt, Y @ np.linalg.pinv(Ht), atol=1e-9)
    assert dec.ls_loss < 1e-18  # interpolation: zero loss
    assert close(dec.loss, dec.ls_loss + dec.ls_perp, 1e-10)


@pytest.mark.parametrize(
    ("reduction", "expected"),
    [("mean", 10 * 5e-4 / 2), ("sum_classes", 5e-4 / 2), ("paper", 5e-4), ("sum", 5e-4 / 16)],
)
def test_paper_lambda_values(reduction, expected):
    assert paper_lambda(5e-4, 10, reduction, batch_size=8) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("reduction", ["mean", "sum", "sum_classes", "paper"])
def test_paper_lambda_matches_sgd_weight_decay(reduction):
    """One SGD step with weight decay moves (W, b) along -grad of the paper's loss."""
    torch.manual_seed(0)
    C, D, B, wd = 4, 3, 6, 0.3
    h = torch.randn(B, D, dtype=torch.float64)
    y = torch.nn.functional.one_hot(torch.arange(B) % C, C).double()
    layer = torch.nn.Linear(D, C).double()
    start = [p.detach().clone() for p in layer.parameters()]
    out = layer(h)
    if reduction == "mean":
        crit = torch.nn.functional.mse_loss(out, y)
    elif reduction == "sum":
        crit = torch.nn.functional.mse_loss(out, y, reduction="sum")
    elif reduction == "sum_classes":
        crit = ((out - y) ** 2).sum(dim=1).mean()
    else:
        crit = 0.5 * ((out - y) ** 2).sum(dim=1).mean()
    opt = torch.optim.SGD(layer.parameters(), lr=1.0, weight_decay=wd)
    opt.zero_grad()
    crit.backward()
    opt.step()
    step = torch.cat(
        [(p0 - p.detach()).flatten() for p0, p in zip(start, layer.parameters(), strict=True)]
    )
    lam = paper_lambda(wd, C, reduction, batch_size=B)
    w0, b0 = (p.clone().requires_grad_() for p in start)
    paper = 0.5 * ((h @ w0.T + b0 - y) ** 2).sum(dim=1).mean() + 0.5 * lam * (
        (w0**2).sum() + (b0**2).sum()
    )
    grad = torch.cat([g.flatten() for g in torch.autograd.grad(paper, (w0, b0))])
    ratio = step / grad
    assert torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-12)
    assert float(ratio[0]) > 0


def test_mse_family_rejects_bad_input():
    H, y, W, b = problem(8)
    dense = class_stats_from_features(H, y, 3, mode="dense")
    with pytest.raises(ValueError, match="lam must be a finite number >= 0"):
        mse_decomposition(dense, -1.0)
    with pytest.raises(ValueError, match="W must have shape"):
        mse_decomposition(dense, 0.1, W[:2], b)
    with pytest.raises(ValueError, match="b must have shape"):
        mse_loss(dense, 0.1, W, b[:2])
    projected = class_stats_from_features(H, y, 3, mode="projected")
    with pytest.raises(ValueError, match="mode='dense'"):
        mse_decomposition(projected, 0.1)
    with pytest.raises(ValueError, match="mode='dense'"):
        nc1_snr(projected)
    few = class_stats_from_features(*problem(9, D=12, per_class=(3, 3, 3))[:2], 3, mode="dense")
    with pytest.raises(ValueError, match="Sigma_W is singular"):
        snr_matrix(few)
    with pytest.raises(ValueError, match="reduction"):
        paper_lambda(1e-4, 10, "median")
    with pytest.raises(ValueError, match="batch_size"):
        paper_lambda(1e-4, 10, "sum")
