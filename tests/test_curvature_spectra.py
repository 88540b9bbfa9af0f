"""Lanczos, trace estimators, SLQ, outlier counts and weight spectra against dense answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.curvature import (
    GGNOperator,
    HessianOperator,
    LowRankOperator,
    Objective,
    count_outliers,
    covariance_spectrum,
    hutchinson,
    hutchpp,
    power_law_fit,
    slq,
    top_eigenpairs,
    weight_spectrum,
)
from collapselab.curvature.eigen import FLOAT32_BASIS_TOL, basis_dtype
from collapselab.curvature.operators import CurvatureOperator, all_finite
from tests._curvature import batches, blobs, tanh_net


class Dense(CurvatureOperator):
    """A dense symmetric matrix as an operator (counts its products)."""

    def __init__(self, A: torch.Tensor) -> None:
        self.A, self.dim, self.dtype, self.device = A, A.shape[0], A.dtype, A.device
        self.products = 0

    def _matmat(self, V: torch.Tensor) -> torch.Tensor:
        self.products += V.shape[1]
        return self.A @ V


def _matrix(P: int = 200, top=(10.0, 9.0, 8.5, 6.0, 5.0), seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    Q = torch.linalg.qr(torch.randn(P, P, generator=g, dtype=torch.float64))[0]
    bulk = torch.rand(P - len(top), generator=g, dtype=torch.float64) * 1.5 - 0.5
    return Q @ torch.diag(torch.cat([torch.tensor(top, dtype=torch.float64), bulk])) @ Q.T


@pytest.mark.parametrize("k", [1, 3, 5, 12])
def test_lanczos_top_k_equals_eigh(k):
    A = _matrix()
    op = Dense(A)
    pairs = top_eigenpairs(op, k, tol=1e-10)
    ref = np.sort(np.linalg.eigvalsh(A.numpy()))[::-1][:k]
    assert pairs.converged and np.abs(pairs.values.numpy() - ref).max() < 1e-9
    assert op.products == pairs.products
    if k <= 5:  # separated outliers: far fewer products than P = 200
        assert pairs.products <= 100
    V = pairs.vectors
    assert (V.T @ V - torch.eye(k, dtype=torch.float64)).abs().max() < 1e-10
    assert (A @ V - V * pairs.values).abs().max() < 1e-8


@pytest.mark.parametrize("tol", [1e-2, 1e-3, 1e-4])
def test_lanczos_loose_tolerance_on_float32_products_reports_true_residuals(tol):
    # A float32 operator with a small asymmetry (rounded products are not exactly
    # symmetric), at tolerances where the basis is float32: the residual norms it returns
    # must equal the exact ‖Ax − θx‖ (in float64) and meet the tolerance.
    A = _matrix(P=300, top=(10.0, 9.0, 8.5, 6.0, 5.0, 4.9, 4.0))
    g = torch.Generator().manual_seed(1)
    A32 = (A + 1e-6 * torch.randn(300, 300, generator=g, dtype=torch.float64)).float()
    pairs = top_eigenpairs(Dense(A32), 5, tol=tol)
    X, theta = pairs.vectors, pairs.values
    exact = (A32.double() @ X - X * theta).norm(dim=0)
    assert pairs.converged
    assert (pairs.residuals - exact).abs().max() < 1e-6 * float(theta.abs().max())
    assert exact.max() <= tol * float(theta.abs().max()) * (1 + 1e-6)
    ref = np.sort(np.linalg.eigvalsh(A.numpy()))[::-1][:5]
    assert np.abs(theta.numpy() - ref).max() < tol * 10.0


def test_the_basis_is_float32_only_for_a_float32_operator_at_a_loose_tolerance():
    assert FLOAT32_BASIS_TOL == 1e-4
    assert basis_dtype(torch.float32, 1e-4) == torch.float32
    assert basis_dtype(torch.float32, 0.5) == torch.float32
    assert basis_dtype(torch.float32, 9.9e-5) == torch.float64
    assert basis_dtype(torch.float64, 1e-2) == torch.float64
    assert basis_dtype(torch.bfloat16, 1e-2) == torch.float64


@pytest.mark.parametrize(
    ("tol", "block", "max_dim"), [(1e-3, 1, None), (1e-4, 1, None), (1e-3, 2, 16), (1e-4, 3, 14)]
)
def test_lanczos_with_a_float32_basis_matches_the_dense_spectrum(tol, block, max_dim):
    # Clustered values (10 and 9.99, 5 and 4.9), asymmetric float32 round-off, and (with
    # max_dim) thick restarts: the values are those of the dense symmetric part within the
    # residual bound, the residuals are exact and meet tol, the vectors are orthonormal to
    # float32 rounding.
    A = _matrix(P=300, top=(10.0, 9.99, 9.0, 8.5, 6.0, 5.0, 4.9, 4.0), seed=2)
    g = torch.Generator().manual_seed(4)
    A32 = (A + 1e-6 * torch.randn(300, 300, generator=g, dtype=torch.float64)).float()
    op = Dense(A32)
    pairs = top_eigenpairs(op, 6, tol=tol, block=block, max_dim=max_dim)
    X, theta = pairs.vectors, pairs.values
    assert X.dtype == torch.float64 and pairs.converged and op.products == pairs.products
    top = float(theta.abs().max())
    exact = (A32.double() @ X - X * theta).norm(dim=0)
    assert (pairs.residuals - exact).abs().max() < 1e-6 * top
    assert exact.max() <= tol * top + 1e-6 * top
    sym = ((A32.double() + A32.double().T) / 2).numpy()
    ref = np.sort(np.linalg.eigvalsh(sym))[::-1][:6]
    assert np.abs(theta.numpy() - ref).max() <= tol * top
    assert (X.T @ X - torch.eye(6, dtype=torch.float64)).abs().max() < 1e-5
    if max_dim is not None:  # the restarts happened
        assert pairs.products > max_dim


def test_lanczos_with_a_float32_basis_finds_a_multiple_eigenvalue():
    # paper 004's K² equal outliers, from a float32 operator at a loose tolerance
    g = torch.Generator().manual_seed(3)
    U = torch.linalg.qr(torch.randn(120, 9, generator=g, dtype=torch.float64))[0]
    bulk = torch.linalg.qr(torch.randn(120, 120, generator=g, dtype=torch.float64))[0]
    out = torch.eye(120, dtype=torch.float64) - U @ U.T  # a bulk below 0.01, orthogonal to U
    bulk = out @ (bulk * 0.01 * torch.rand(120, generator=g, dtype=torch.float64)) @ bulk.T @ out
    A = 0.2 * U @ U.T + bulk
    pairs = top_eigenpairs(Dense(A.float()), 10, tol=1e-3)
    ref = np.sort(np.linalg.eigvalsh(A.float().double().numpy()))[::-1][:10]
    assert pairs.converged
    assert np.abs(pairs.values.numpy() - ref).max() < 1e-3 * 0.21
    assert np.abs(pairs.values.numpy()[:9] - 0.2).max() < 1e-3


def test_with_block_one_every_product_is_a_single_vector():
    # the CPU default: single products are the cheapest per vector, the start's included
    calls: list[int] = []

    class Counting(Dense):
        def _matmat(self, V: torch.Tensor) -> torch.Tensor:
            calls.append(V.shape[1])
            return super()._matmat(V)

    pairs = top_eigenpairs(Counting(_matrix()), 5, tol=1e-8, block=1)
    assert set(calls) == {1} and len(calls) == pairs.products
    calls.clear()
    pairs = top_eigenpairs(Counting(_matrix()), 5, tol=1e-8, block=2)
    assert calls[0] == 5 and set(calls[1:]) <= {1, 2} and sum(calls) == pairs.products


def test_all_finite_and_a_non_finite_product_is_a_clear_error():
    big = torch.full((4,), 1e308, dtype=torch.float64)  # finite, but its sum overflows
    assert all_finite(big) and all_finite(torch.zeros(0)) and all_finite(torch.ones(3, 2))
    for bad in (float("nan"), float("inf"), -float("inf")):
        for dtype in (torch.float32, torch.float64):
            t = torch.ones(5, 3, dtype=dtype)
            t[2, 1] = bad
            assert not all_finite(t)
    A = _matrix(P=60)
    A[3, 5] = A[5, 3] = float("nan")
    for dtype in (torch.float32, torch.float64):
        with pytest.raises(ValueError, match="Dense: a product is NaN or Inf"):
            top_eigenpairs(Dense(A.to(dtype)), 2, tol=1e-3)


def test_lanczos_other_ends_degenerate_values_and_the_full_space():
    A = _matrix()
    vals = np.linalg.eigvalsh(A.numpy())
    low = top_eigenpairs(Dense(A), 3, which="SA", tol=1e-10, max_products=4000)
    assert np.abs(low.values.numpy() - vals[:3]).max() < 1e-6
    mag = top_eigenpairs(Dense(-A), 2, which="LM", tol=1e-10)
    assert np.abs(mag.values.numpy() + np.array([10.0, 9.0])).max() < 1e-9
    # nine equal eigenvalues (paper 004's K² outliers) and a zero bulk: all nine found
    g = torch.Generator().manual_seed(3)
    U = torch.linalg.qr(torch.randn(120, 9, generator=g, dtype=torch.float64))[0]
    nine = top_eigenpairs(Dense(0.2 * U @ U.T), 12, tol=1e-10)
    assert np.allclose(nine.values.numpy()[:9], 0.2, atol=1e-12)
    assert np.abs(nine.values.numpy()[9:]).max() < 1e-12
    small = torch.diag(torch.arange(6, dtype=torch.float64))
    full = top_eigenpairs(Dense(small), 6)  # max_dim reaches P: exact
    assert full.values.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="k = 7 exceeds the operator's dimension P = 6"):
        top_eigenpairs(Dense(small), 7)


def test_lanczos_on_a_network_hessian_matches_the_dense_one():
    x, y = blobs(n=30)
    obj = Objective(tanh_net(width=8), "ce", batches(x, y, 11))
    H = HessianOperator(obj)
    dense = np.linalg.eigvalsh(H.dense().numpy())[::-1]
    pairs = top_eigenpairs(H, 4, tol=1e-9, max_dim=24)
    assert np.abs(pairs.values.numpy() - dense[:4]).max() < 1e-8 * dense[0]


def test_trace_estimators():
    A = _matrix(P=60)
    exact = float(torch.trace(A))
    est = [hutchinson(Dense(A), 200, seed=s) for s in range(5)]
    for e in est:  # within 4 standard errors (fixed seeds)
        assert abs(e.value - exact) < 4 * e.std_error
    # Hutch++ is exact when the rank is at most products/3
    g = torch.Generator().manual_seed(0)
    F = torch.randn(60, 5, generator=g, dtype=torch.float64)
    low = F @ F.T
    pp = hutchpp(Dense(low), 15)
    assert abs(pp.value - float(torch.trace(low))) < 1e-10 * float(torch.trace(low))
    assert pp.products == 15
    # and beats Hutchinson at equal cost on a decaying spectrum
    decay = _matrix(P=80, top=(50.0, 30.0, 20.0, 10.0, 8.0, 5.0))
    tr = float(torch.trace(decay))
    err_pp = np.mean([abs(hutchpp(Dense(decay), 30, seed=s).value - tr) for s in range(10)])
    err_h = np.mean([abs(hutchinson(Dense(decay), 30, seed=s).value - tr) for s in range(10)])
    assert err_pp < err_h
    with pytest.raises(ValueError, match="multiple of 3"):
        hutchpp(Dense(A), 10)


def test_slq_integrates_to_one_and_matches_the_dense_spectrum():
    A = _matrix(P=40)
    vals = np.linalg.eigvalsh(A.numpy())
    full = slq(Dense(A), steps=40, probes=300, seed=1)
    assert np.allclose(full.weights.sum(axis=1), 1.0, atol=1e-12)
    # with m = P steps the quadrature is exact for each probe: v^T g(A) v / |v|^2
    g = torch.Generator().manual_seed(1)
    one = slq(Dense(A), steps=40, probes=1, seed=1)
    z = (torch.randint(0, 2, (40, 1), generator=g).double() * 2 - 1)[:, 0]
    lam, U = np.linalg.eigh(A.numpy())
    quad = float(np.sum(one.weights[0] * np.exp(-one.nodes[0])))
    direct = float(z.numpy() @ U @ np.diag(np.exp(-lam)) @ U.T @ z.numpy()) / 40
    assert abs(quad - direct) < 1e-10
    # averaged over probes: the dense histogram, within sampling error
    edges = np.linspace(vals.min() - 1, vals.max() + 1, 7)
    dense_hist = np.histogram(vals, bins=edges)[0] / 40
    assert abs(full.histogram(edges).sum() - 1.0) < 1e-12
    assert np.abs(full.histogram(edges) - dense_hist).max() < 0.03
    grid = np.linspace(vals.min() - 3, vals.max() + 3, 2001)
    smooth = full.smoothed(grid, 0.2)
    assert abs(np.trapezoid(smooth, grid) - 1.0) < 1e-6


def test_outlier_counts():
    assert count_outliers([9, 8, 7, 0.1, 0.05, 0.01]) == 3
    assert count_outliers([5, 1e-17, 0, -1e-16]) == 1
    # a tiny last value (the bottom of a truncated spectrum) is not a gap of the outliers
    assert count_outliers([9, 8, 7, 0.1, 0.08, 0.07, 0.06, 1e-9]) == 3
    assert count_outliers([1, 1, 1]) == 0
    assert count_outliers([9, 8, 7, 0.1], "threshold", threshold=0.5) == 3
    assert count_outliers([9, 8, 7, 0.1], "threshold", threshold=7.5, relative=False) == 2
    with pytest.raises(ValueError, match="at least one"):
        count_outliers([])


def test_weight_and_covariance_spectra_and_the_power_law_fit():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(5, 8, generator=g, dtype=torch.float64)
    assert np.allclose(weight_spectrum(W), np.linalg.eigvalsh((W @ W.T).numpy())[::-1])
    conv = torch.nn.Conv2d(3, 4, 3).double()
    assert weight_spectrum(conv).shape == (4,)
    h = torch.randn(50, 6, generator=g, dtype=torch.float64)
    cov = np.cov(h.numpy().T, bias=True)
    assert np.allclose(covariance_spectrum(h), np.linalg.eigvalsh(cov)[::-1][:6])
    # Pareto samples with density ~ x^-3: the fit recovers alpha = 3
    rng = np.random.default_rng(0)
    x = (1.0 - rng.random(4000)) ** (-1.0 / 2.0)
    fit = power_law_fit(x)
    assert abs(fit.alpha - 3.0) < 0.15 and fit.xmin < 1.5
    # the MLE at the chosen xmin, by the definition
    tail = x[x >= fit.xmin]
    assert fit.alpha == pytest.approx(1 + tail.size / np.log(tail / fit.xmin).sum(), rel=1e-12)
    with pytest.raises(ValueError, match="at least 5 positive"):
        power_law_fit([1.0, 2.0, 0.0])


def test_lanczos_on_ggn_and_a_low_rank_operator_agree():
    x, y = blobs(n=24)
    obj = Objective(tanh_net(), "mse", batches(x, y))
    G = GGNOperator(obj)
    dense = np.linalg.eigvalsh(G.dense().numpy())[::-1]
    assert (
        np.abs(top_eigenpairs(G, 3, tol=1e-10).values.numpy() - dense[:3]).max() < 1e-9 * dense[0]
    )
    F = torch.randn(obj.dim, 4, dtype=torch.float64)
    low = LowRankOperator(F)
    assert np.allclose(
        low.eigenpairs()[0].numpy(), top_eigenpairs(low, 4, tol=1e-12).values.numpy()
    )
