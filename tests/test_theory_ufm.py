"""UFM / MUFM / multilayer MUFM of paper 001 (Eqs. 12, 13, 20, 21; Theorems 3 and 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from collapselab.data.synthetic import gaussian_mixture
from collapselab.theory.ufm import (
    alignment,
    column_pfc,
    gradient_flow,
    mufm_model,
    solve_converged,
    solve_literal,
    solve_mufm,
    theorem3_lift,
    theorem3_reduce,
    ufm_model,
    verify_mufm,
    verify_theorem3,
    w_star,
)


def _data(k: int, d: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The paper's data (§IV-B): x ~ N(μ_k, I_d), μ_k uniform on the unit sphere; (d, N)."""
    split = gaussian_mixture(k, d, n, seed=seed).train
    return split.x.double().numpy().T.copy(), split.y.numpy()


def _random_point(problem, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(problem.n_classes, problem.dim))
    layers = rng.normal(size=(problem.n_layers, problem.dim, problem.n_samples))
    b = rng.normal(size=problem.n_classes) if problem.bias else None
    return W, layers, b


def _torch_objective(problem, W, layers, b):
    """An independent autograd reference of Eq. 12 (Eq. 13 for one layer)."""
    x = torch.tensor(problem.X)
    y = torch.tensor(problem.labels)
    k, n = problem.n_classes, problem.n_samples
    z = W @ layers[-1] + (b[:, None] if b is not None else 0.0)
    if problem.loss == "mse":
        data = ((z - torch.nn.functional.one_hot(y, k).T.double()) ** 2).sum() / (2 * n)
    else:
        data = torch.nn.functional.cross_entropy(z.T, y, reduction="mean")
    if problem.form == "eq13":
        cw, cb, ch = problem.lambda_w / k, problem.lambda_b / k, problem.lam / n
    else:
        cw, cb, ch = problem.lambda_w, problem.lambda_b, problem.lam
    path = torch.cat([x[None], layers])
    value = data + 0.5 * cw * (W**2).sum() + 0.5 * ch * ((path[1:] - path[:-1]) ** 2).sum()
    if b is not None:
        value = value + 0.5 * cb * (b**2).sum()
    return value


CASES = [
    {"loss": "mse"},
    {"loss": "ce"},
    {"loss": "mse", "bias": True, "lambda_b": 0.3},
    {"loss": "ce", "bias": True},
    {"loss": "mse", "n_layers": 3},
    {"loss": "ce", "n_layers": 2, "bias": True, "lambda_b": 0.1},
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_objective_and_gradient_match_autograd_and_finite_differences(case):
    X, y = _data(3, 4, 5, seed=1)
    problem = mufm_model(X, y, lambda_w=0.05, lam=0.2, **case)
    W, layers, b = _random_point(problem, seed=2)
    tw = torch.tensor(W, requires_grad=True)
    tl = torch.tensor(layers, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True) if b is not None else None
    ref = _torch_objective(problem, tw, tl, tb)
    ref.backward()
    assert problem.objective(W, layers, b) == pytest.approx(ref.item(), rel=1e-13)
    g_w, g_l, g_b = problem.gradient(W, layers, b)
    np.testing.assert_allclose(g_w, tw.grad.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(g_l, tl.grad.numpy(), rtol=0, atol=1e-12)
    if b is not None:
        np.testing.assert_allclose(g_b, tb.grad.numpy(), rtol=0, atol=1e-12)
    # directional finite differences along random directions
    rng = np.random.default_rng(3)
    for _ in range(3):
        dw, dl = rng.normal(size=W.shape), rng.normal(size=layers.shape)
        db = rng.normal(size=b.shape) if b is not None else None
        h = 1e-6

        def at(s, dw=dw, dl=dl, db=db):
            return problem.objective(W + s * dw, layers + s * dl, None if b is None else b + s * db)

        fd = (at(h) - at(-h)) / (2 * h)
        exact = np.sum(g_w * dw) + np.sum(g_l * dl) + (np.sum(g_b * db) if b is not None else 0)
        assert fd == pytest.approx(exact, rel=1e-6, abs=1e-10)


def test_objective_matches_an_explicit_loop_and_the_eq2_form():
    X, y = _data(3, 3, 2, seed=4)
    W, _, _ = _random_point(mufm_model(X, y), seed=5)
    H = np.random.default_rng(6).normal(size=X.shape)
    k, n = 3, X.shape[1]
    for loss in ("mse", "ce"):
        total = 0.0
        for i in range(n):
            z = [sum(W[c, j] * H[j, i] for j in range(3)) for c in range(k)]
            if loss == "mse":
                total += sum((z[c] - (c == y[i])) ** 2 for c in range(k)) / 2
            else:
                total += math.log(sum(math.exp(v) for v in z)) - z[y[i]]
        w2 = sum(W[c, j] ** 2 for c in range(k) for j in range(3))
        dist2 = sum((H[j, i] - X[j, i]) ** 2 for j in range(3) for i in range(n))
        eq13 = total / n + 0.007 / (2 * k) * w2 + 0.02 / (2 * n) * dist2
        assert mufm_model(X, y, 0.007, 0.02, loss=loss).objective(W, H) == pytest.approx(
            eq13, rel=1e-13
        )
        h2 = sum(H[j, i] ** 2 for j in range(3) for i in range(n))
        eq2 = total / n + 0.007 / 2 * w2 + 0.02 / 2 * h2
        got = ufm_model(y, 3, 0.007, 0.02, loss=loss, form="eq2").objective(W, H)
        assert got == pytest.approx(eq2, rel=1e-13)
        # the natural reading of "UFM": Eq. 13 with X = 0
        nat = total / n + 0.007 / (2 * k) * w2 + 0.02 / (2 * n) * h2
        assert ufm_model(y, 3, 0.007, 0.02, loss=loss).objective(W, H) == pytest.approx(
            nat, rel=1e-13
        )


@pytest.mark.parametrize("bias", [False, True])
def test_closed_form_classifier_is_the_minimiser(bias):
    X, y = _data(4, 6, 5, seed=7)
    problem = mufm_model(X, y, lambda_w=0.01, lam=0.1, bias=bias, lambda_b=0.02 if bias else 0.0)
    H = np.random.default_rng(8).normal(size=X.shape)
    W, b = problem.classifier_star(H)
    g_w, _, g_b = problem.gradient(W, H, b)
    assert np.linalg.norm(g_w) < 1e-14
    if bias:
        assert np.linalg.norm(g_b) < 1e-14
    else:
        # Theorem 4's printed formula, with n = N / K
        n = X.shape[1] // 4
        Y = np.kron(np.eye(4), np.ones((1, n)))  # I_K ⊗ 1_n^T for class-sorted samples
        printed = Y @ H.T @ np.linalg.inv(H @ H.T + n * 0.01 * np.eye(6))
        np.testing.assert_allclose(W, printed, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(w_star(H, y, 0.01), printed, rtol=1e-12, atol=1e-14)
        # ridge regression as a stacked least-squares problem, solved by pinv
        stacked = np.vstack([H.T, math.sqrt(X.shape[1] * 0.01 / 4) * np.eye(6)])
        rhs = np.vstack([Y.T, np.zeros((6, 4))])
        np.testing.assert_allclose(W, (np.linalg.pinv(stacked) @ rhs).T, rtol=1e-10, atol=1e-12)


def test_reduced_loss_matches_the_trace_identity_and_its_gradient():
    # note §3.5: L(H) = (λ_W/2K) Tr(Y G^{-1} Y^T), ∇L = -(λ_W/K) H G^{-1} Y^T Y G^{-1}, with
    # G = H^T H + n λ_W I (N x N): an independent, dense form of Eq. 20
    X, y = _data(3, 5, 6, seed=9)
    problem = mufm_model(X, y, lambda_w=0.02, lam=0.3)
    H = torch.tensor(np.random.default_rng(10).normal(size=X.shape), requires_grad=True)
    Y = torch.nn.functional.one_hot(torch.tensor(y), 3).T.double()
    n = X.shape[1] // 3
    G = H.T @ H + n * 0.02 * torch.eye(X.shape[1], dtype=torch.float64)
    ref = 0.02 / 6 * torch.trace(Y @ torch.linalg.solve(G, Y.T))
    ref.backward()
    value, grad = problem.reduced_loss(H.detach().numpy())
    assert value == pytest.approx(ref.item(), rel=1e-12)
    np.testing.assert_allclose(grad, H.grad.numpy(), rtol=0, atol=1e-13)
    Gi = torch.linalg.inv(G).detach()
    dense = -(0.02 / 3) * H.detach() @ Gi @ Y.T @ Y @ Gi
    np.testing.assert_allclose(grad, dense.numpy(), rtol=0, atol=1e-13)
    # the reduced objective adds the transport term; check it by finite differences
    layers = H.detach().numpy()[None]
    f, g = problem.reduced_objective(layers)
    assert f == pytest.approx(value + 0.3 / (2 * X.shape[1]) * np.sum((layers[0] - X) ** 2))
    d = np.random.default_rng(11).normal(size=layers.shape)
    fd = (
        problem.reduced_objective(layers + 1e-6 * d)[0]
        - problem.reduced_objective(layers - 1e-6 * d)[0]
    ) / 2e-6
    assert fd == pytest.approx(np.sum(g * d), rel=1e-6)


def test_literal_gradient_descent_converges_to_the_closed_form_classifier():
    X, y = _data(3, 6, 4, seed=0)
    problem = mufm_model(X, y, lambda_w=0.005, lam=1.0)
    short = solve_literal(problem, steps=2000)
    long = solve_literal(problem, steps=20_000)
    assert long.method == "literal" and long.iterations == 20_000
    assert long.grad_norm < 1e-2 * short.grad_norm
    W_star, _ = problem.classifier_star(long.H)
    assert np.linalg.norm(long.W - W_star) / np.linalg.norm(W_star) < 1e-3
    conv = solve_converged(problem, tol=1e-10)
    assert conv.converged and conv.grad_norm <= 1e-10
    assert np.linalg.norm(long.H - conv.H) / np.linalg.norm(conv.H) < 1e-3
    assert conv.objective <= long.objective
    check = verify_mufm(problem, long)
    assert 0 < check.classifier < 1e-3
    assert verify_mufm(problem, conv).classifier == 0.0


def test_converged_beats_literal_at_the_papers_lambda():
    # note §5.2: the paper's literal GD is far from converged at λ = 0.001
    X, y = _data(3, 10, 20, seed=0)
    problem = mufm_model(X, y)  # λ_W = 0.005, λ = 0.001
    literal = solve_mufm(problem, "literal", steps=3000)
    conv = solve_mufm(problem, "converged", tol=1e-10)
    assert conv.converged and conv.iterations > 0
    assert conv.objective < 0.5 * literal.objective
    assert literal.grad_norm > 1e4 * conv.grad_norm
    v = verify_mufm(problem, conv)
    assert v.first_order < 1e-5  # Appendix C: Kn ∇L(H) + λ(H - X) = 0
    assert v.pfc_data == column_pfc(X, y)


@pytest.mark.parametrize(
    "options",
    [{}, {"loss": "ce"}, {"bias": True}],
    ids=["mse", "ce", "mse-bias"],
)
def test_ufm_reaches_exact_collapse(options):
    _, y = _data(5, 20, 30, seed=0)
    problem = ufm_model(y, 20, lambda_w=0.005, lambda_h=0.001, **options)
    sol = solve_converged(problem, tol=1e-9)
    assert sol.converged
    m = column_pfc(sol.H, y)
    assert m["nc1_trace_ratio"] < 1e-10
    assert m["nc2_etf_distance"] < 1e-6
    assert m["ncc_accuracy"] == 1.0


def test_mufm_is_more_collapsed_than_the_data_and_moves_to_it_as_lambda_grows():
    X, y = _data(5, 20, 30, seed=0)
    data = column_pfc(X, y)
    sol = solve_converged(mufm_model(X, y, lambda_w=0.005, lam=0.001), tol=1e-10)
    m = column_pfc(sol.H, y)
    assert m["nc1_trace_ratio"] < data["nc1_trace_ratio"]
    assert m["nc2_etf_distance"] < data["nc2_etf_distance"]
    assert m["ncc_accuracy"] > data["ncc_accuracy"]
    # not exact collapse (Fig. 4a): PFC1 stays of order 1
    assert m["nc1_trace_ratio"] > 0.1
    # Fig. 5: as λ/λ_W grows the solution approaches X and collapses less
    lams = [0.0005, 0.002, 0.005, 0.02]
    previous, align, pfc1 = None, [], []
    for lam in lams:
        previous = solve_converged(mufm_model(X, y, 0.005, lam), tol=1e-10, init=previous or "data")
        assert previous.converged
        align.append(alignment(previous.H, X))
        pfc1.append(column_pfc(previous.H, y)["nc1_trace_ratio"])
    assert np.all(np.diff(align) < 0)
    assert np.all(np.diff(pfc1) > 0)
    assert pfc1[-1] < data["nc1_trace_ratio"]


def test_theorem3_reduction_identity_published_vs_corrected():
    X, y = _data(3, 5, 4, seed=2)
    L, lam = 3, 0.4
    problem = mufm_model(X, y, lambda_w=0.01, lam=lam, n_layers=L)
    H = np.random.default_rng(12).normal(size=X.shape)
    lifted = theorem3_lift(H, X, L)
    np.testing.assert_allclose(lifted[-1], H, atol=1e-15)
    steps = np.diff(np.concatenate([X[None], lifted]), axis=0)
    np.testing.assert_allclose(steps, np.broadcast_to((H - X) / L, steps.shape), atol=1e-14)
    f12 = problem.reduced_objective(lifted)[0]
    corrected = theorem3_reduce(problem, "corrected")
    published = theorem3_reduce(problem, "published")
    assert corrected.lam == pytest.approx(lam / L) and published.lam == lam
    assert corrected.n_layers == published.n_layers == 1
    assert f12 == pytest.approx(corrected.reduced_objective(H)[0], rel=1e-13)
    # the published reduction overstates the transport term by (λ/2N)(1 - 1/L)||H - X||^2
    gap = published.reduced_objective(H)[0] - f12
    expected = lam / (2 * X.shape[1]) * (1 - 1 / L) * np.sum((H - X) ** 2)
    assert gap == pytest.approx(expected, rel=1e-11)
    # the equally spaced lift minimises over the intermediate layers (Eq. 14-15)
    bumped = lifted.copy()
    bumped[1] += 0.01 * np.random.default_rng(13).normal(size=X.shape)
    assert problem.reduced_objective(bumped)[0] > f12


def test_theorem3_multilayer_optimum_is_equally_spaced_and_matches_the_corrected_reduction():
    X, y = _data(3, 6, 4, seed=0)
    problem = mufm_model(X, y, lambda_w=0.005, lam=0.5, n_layers=3)
    check = verify_theorem3(problem, tol=1e-10)
    assert max(check.grad_norms) <= 1e-9
    assert check.spacing_error < 1e-6
    assert check.corrected_feature_error < 1e-6
    assert check.corrected_objective_gap < 1e-12
    assert check.published_feature_error > 1e-2  # a different solution
    assert check.published_objective_gap > 0.5  # and a different optimal value
    sol = solve_converged(problem, tol=1e-10)
    v = verify_mufm(problem, sol)
    assert v.spacing < 1e-6 and v.corrected_identity < 1e-12


def test_theorem4_gradient_flow_lemma1_and_large_lambda_limit():
    X, y = _data(3, 10, 20, seed=0)
    base = mufm_model(X, y, lambda_w=0.005, lam=1.0)
    flow = gradient_flow(base, np.linspace(0.0, 2.0, 11))
    np.testing.assert_array_equal(flow.H[0], X)
    # Lemma 1: Tr Σ_W decreases, Tr Σ_B increases, PFC1 decreases along (21)
    assert np.all(np.diff(flow.trace_within) < 0)
    assert np.all(np.diff(flow.trace_between) > 0)
    assert np.all(np.diff(flow.pfc1) < 0)
    # the flow's velocity at t = 0 is -Kn ∇L(X), ∇L from autograd of the trace identity
    Hx = torch.tensor(X, requires_grad=True)
    Y = torch.nn.functional.one_hot(torch.tensor(y), 3).T.double()
    n = X.shape[1] // 3
    G = Hx.T @ Hx + n * 0.005 * torch.eye(X.shape[1], dtype=torch.float64)
    (0.005 / 6 * torch.trace(Y @ torch.linalg.solve(G, Y.T))).backward()
    velocity = -X.shape[1] * Hx.grad.numpy()
    h = 1e-4
    early = gradient_flow(base, [0.0, h]).H[1]
    np.testing.assert_allclose(
        (early - X) / h, velocity, rtol=0, atol=1e-3 * np.abs(velocity).max()
    )
    # Theorem 4: H_{1/λ} ≈ H(t = 1/λ), relative error O(1/λ); more collapsed than X
    errors = []
    for lam in (8.0, 16.0, 32.0):
        problem = mufm_model(X, y, lambda_w=0.005, lam=lam)
        sol = solve_converged(problem, tol=1e-11)
        at = gradient_flow(problem, [1.0 / lam]).H[-1]
        errors.append(np.linalg.norm(sol.H - at) / np.linalg.norm(sol.H - X))
        assert column_pfc(sol.H, y)["nc1_trace_ratio"] < column_pfc(X, y)["nc1_trace_ratio"]
    assert errors[0] < 0.03
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    np.testing.assert_allclose(ratios, 2.0, rtol=0.1)


def test_alignment_metric():
    rng = np.random.default_rng(14)
    X = rng.normal(size=(4, 9))
    assert alignment(3.0 * X, X) == pytest.approx(0.0, abs=1e-15)
    assert alignment(-X, X) == pytest.approx(2.0)
    H = rng.normal(size=(4, 9))
    ref = np.sqrt(np.sum((H / np.sqrt(np.sum(H**2)) - X / np.sqrt(np.sum(X**2))) ** 2))
    assert alignment(torch.tensor(H), X) == pytest.approx(ref, rel=1e-14)
    with pytest.raises(ValueError, match="zero matrix"):
        alignment(np.zeros((4, 9)), X)


def test_ufm_bad_inputs():
    X, y = _data(3, 4, 3, seed=0)
    with pytest.raises(ValueError, match="labels has 8 entries but X has 9 columns"):
        mufm_model(X, y[:-1])
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 2\)"):
        mufm_model(X, y, n_classes=2)
    with pytest.raises(ValueError, match="lambda_w must be a finite number > 0"):
        mufm_model(X, y, lambda_w=0.0)
    with pytest.raises(ValueError, match="lam must be"):
        mufm_model(X, y, lam=-1.0)
    with pytest.raises(ValueError, match="loss must be one of"):
        mufm_model(X, y, loss="hinge")
    with pytest.raises(ValueError, match="n_layers must be an integer >= 1"):
        mufm_model(X, y, n_layers=0)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        mufm_model(bad, y)
    with pytest.raises(TypeError, match="labels must be"):
        mufm_model(X, list(y))
    with pytest.raises(ValueError, match="form must be one of"):
        ufm_model(y, 4, form="eq3")
    problem = mufm_model(X, y)
    W, layers, _ = _random_point(problem)
    with pytest.raises(ValueError, match=r"W must have shape \(3, 4\)"):
        problem.objective(W.T, layers)
    with pytest.raises(ValueError, match=r"layers must have shape \(1, 4, 9\)"):
        problem.objective(W, layers[:, :, :-1])
    with pytest.raises(ValueError, match="no bias"):
        problem.objective(W, layers, np.zeros(3))
    with pytest.raises(ValueError, match="has a bias"):
        mufm_model(X, y, bias=True).objective(W, layers)
    ce = mufm_model(X, y, loss="ce")
    with pytest.raises(ValueError, match="loss='mse' only"):
        ce.classifier_star(X)
    with pytest.raises(ValueError, match="loss='mse' only"):
        gradient_flow(ce, [0.1])
    with pytest.raises(ValueError, match="n_layers >= 2"):
        verify_theorem3(problem)
    with pytest.raises(ValueError, match="stationary point of the UFM"):
        solve_converged(ufm_model(y, 4), init="data")
    with pytest.raises(ValueError, match="method must be"):
        solve_mufm(problem, "adam")
    with pytest.raises(ValueError, match="variant must be one of"):
        theorem3_reduce(problem, "fixed")
    with pytest.raises(ValueError, match="ts must be non-decreasing"):
        gradient_flow(problem, [0.2, 0.1])


def test_the_mufm_is_not_convex_and_multistart_keeps_the_best_minimum():
    X, y = _data(3, 6, 4, seed=0)
    problem = mufm_model(X, y, lambda_w=0.005, lam=0.05)
    worse = solve_converged(problem, init="random", seed=0)
    better = solve_converged(problem)  # starts at the data
    assert worse.converged and better.converged
    # two distinct stationary points with gradient ~1e-10: local minima of different value
    assert worse.objective > better.objective * 1.2
    best = solve_converged(problem, init="random", seed=0, n_starts=3)
    assert best.objective == pytest.approx(better.objective, rel=1e-10)


def test_converged_solver_reports_progress_without_changing_the_solution():
    X, y = _data(5, 20, 30, seed=0)
    problem = mufm_model(X, y, lambda_w=0.005, lam=0.001)
    calls: list[tuple[int, int]] = []
    quiet = solve_converged(problem, tol=1e-10, max_iter=4000, n_starts=2)
    loud = solve_converged(
        problem, tol=1e-10, max_iter=4000, n_starts=2, progress=lambda d, n: calls.append((d, n))
    )
    np.testing.assert_array_equal(loud.layers, quiet.layers)
    assert loud.objective == quiet.objective
    done = [d for d, _ in calls]
    assert {n for _, n in calls} == {8000}  # the budget of both starts
    assert done == sorted(done) and done[-1] == 8000
    # one call per L-BFGS iteration of the first start, which starts at 1
    first = [d for d in done if d <= 4000]
    assert first[0] == 1 and quiet.iterations <= 4000
