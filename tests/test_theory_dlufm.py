"""Paper 004's deep linear / ReLU UFM: objective, gradients, closed form, solvers, errors.

References are independent of the module: a torch forward written here (autograd),
central finite differences, a dense grid for the scalar problem φ, paper 001's UFM for
L = 1, and the numbers of note 004 §5.2 (configurations A and B)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

from collapselab.theory.dlufm import (
    DeepLinearUFM,
    DeepReLUUFM,
    UFMParameters,
    closed_form,
    exact_optimum,
    gradient_descent,
    is_global_optimum,
    local_minimum_threshold,
    log_checkpoints,
    minimise,
    phi,
    regularisation_threshold,
    sgd_batches,
    solve_t_star,
)
from collapselab.theory.ufm import ufm_model

CONFIG_A = {
    "n_classes": 3,
    "n_per_class": 10,
    "widths": 10,
    "n_layers": 4,
    "lambda_w": 5e-3,
    "lambda_h": 5e-3,
}
CONFIG_B = {
    "n_classes": 4,
    "n_per_class": 5,
    "widths": 8,
    "lambda_w": [2e-3, 5e-3, 1e-2],
    "lambda_h": 3e-3,
}

# Random configurations: K != 3, unequal widths and λ, several L, other loss scales.
RANDOM_CONFIGS = [
    {
        "n_classes": 2,
        "n_per_class": 3,
        "widths": [3, 5],
        "lambda_w": [1e-2, 3e-2],
        "lambda_h": 2e-2,
    },
    {"n_classes": 5, "n_per_class": 2, "widths": [6], "lambda_w": 1e-2, "lambda_h": 4e-3},
    {
        "n_classes": 3,
        "n_per_class": 4,
        "widths": [4, 6, 3, 5, 4],
        "lambda_w": [1e-3, 2e-3, 3e-3, 4e-3, 5e-3],
        "lambda_h": 1e-3,
        "loss_scale": "1/N",
    },
    {
        "n_classes": 4,
        "n_per_class": 3,
        "widths": [5, 7, 4],
        "lambda_w": [4e-3, 1e-3, 2e-3],
        "lambda_h": 6e-3,
        "loss_scale": "1/(2n)",
    },
]


def _torch_objective(model, H, Ws, bs=(), cols=None):
    """F written directly in torch (the reference for the analytic gradient); with ``cols``
    the minibatch estimate: the data term of those samples scaled by ``N/b``, the
    penalties on the whole ``H``."""
    y = torch.tensor(model.targets.T)  # the paper's Y, (K, N)
    scale = model.loss_scale
    h = torch.relu(H) if getattr(model, "relu_on_features", False) else H
    if cols is not None:
        h, y = h[:, torch.as_tensor(cols)], y[:, torch.as_tensor(cols)]
        scale = scale * model.n_samples / len(cols)
    for i, w in enumerate(Ws):
        h = w @ h + (bs[i][:, None] if bs else 0.0)
        if i < len(Ws) - 1 and model.activation == "relu":
            h = torch.relu(h)
    value = scale * ((h - y) ** 2).sum() + 0.5 * model.lambda_h * (H**2).sum()
    for lam, w in zip(model.lambda_w, Ws, strict=True):
        value = value + 0.5 * lam * (w**2).sum()
    for b in bs:
        value = value + 0.5 * model.lambda_b * (b**2).sum()
    return value


def _autograd(model, point, cols=None):
    H = torch.tensor(point.H, requires_grad=True)
    Ws = [torch.tensor(w, requires_grad=True) for w in point.W]
    bs = [torch.tensor(b, requires_grad=True) for b in point.b]
    value = _torch_objective(model, H, Ws, bs, cols)
    value.backward()
    grads = UFMParameters(
        H.grad.numpy(), tuple(w.grad.numpy() for w in Ws), tuple(b.grad.numpy() for b in bs)
    )
    return value.item(), grads


def _point(model, seed):
    """A random point; a model with biases gets random (non-zero) biases too."""
    point = model.random_point(seed=seed)
    rng = np.random.default_rng([seed, 7])
    biases = tuple(rng.normal(scale=0.3, size=d) for d in model.dims[1:]) if model.bias else ()
    return UFMParameters(point.H, point.W, biases)


MODELS = [
    DeepLinearUFM(**CONFIG_A),
    DeepLinearUFM(**CONFIG_B),
    *(DeepLinearUFM(**c) for c in RANDOM_CONFIGS),
    DeepReLUUFM(3, 4, [5, 6, 4], [1e-3, 2e-3, 3e-3], 2e-3),
    DeepReLUUFM(4, 3, 6, 2e-3, 1e-3, n_layers=4, relu_on_features=True),
    DeepLinearUFM(3, 4, [5, 6], [1e-3, 2e-3], 2e-3, bias=True, lambda_b=1e-2),
    DeepReLUUFM(3, 4, [5, 6, 4], 1e-3, 2e-3, bias=True),
]


@pytest.mark.parametrize("model", MODELS, ids=repr)
def test_objective_and_gradient_equal_autograd(model):
    point = _point(model, seed=1)
    value, ref = _autograd(model, point)
    assert model.objective(point) == pytest.approx(value, rel=1e-13)
    grad = model.gradient(point)
    assert np.allclose(grad.flat(), ref.flat(), rtol=1e-11, atol=1e-13)
    module = model.as_module(point)
    assert module.objective().item() == pytest.approx(value, rel=1e-13)
    outputs = module(torch.eye(model.n_samples)).detach().numpy()
    assert np.allclose(outputs.T, model.features(point)[-1].T, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("model", MODELS, ids=repr)
def test_gradient_equals_central_finite_differences(model):
    point = _point(model, seed=2)
    theta = point.flat()
    grad = model.gradient(point).flat()
    rng = np.random.default_rng(0)
    back = model.from_flat(theta)
    assert np.array_equal(back.flat(), theta) and len(back.b) == len(point.b)

    def f(v):
        return model.objective(model.from_flat(v))

    eps = 1e-6
    for _ in range(5):
        u = rng.standard_normal(theta.size)
        fd = (f(theta + eps * u) - f(theta - eps * u)) / (2 * eps)
        assert fd == pytest.approx(float(grad @ u), rel=1e-6, abs=1e-9)


def test_relu_masks_are_the_positive_pre_activations():
    model = DeepReLUUFM(3, 4, [5, 6, 4], 1e-3, 2e-3)
    point = model.random_point(seed=3)
    masks = model.masks(point)
    h = point.H
    for i, mask in enumerate(masks):
        z = point.W[i] @ h
        assert np.array_equal(mask.T, (z > 0).astype(float))
        h = np.maximum(z, 0.0)
    assert len(masks) == model.n_layers - 1
    linear = DeepLinearUFM(3, 4, [5, 6, 4], 1e-3, 2e-3)
    assert all(np.all(m == 1) for m in linear.masks(point))


def test_one_layer_is_the_classic_ufm_of_paper_001():
    """L = 1 is the UFM: paper 001's independent MUFM code, Eq. 2 form with MSE."""
    model = DeepLinearUFM(4, 5, 6, 3e-3, 2e-3, n_layers=1)
    point = model.random_point(seed=4)
    other = ufm_model(model.labels, 6, lambda_w=3e-3, lambda_h=2e-3, form="eq2")
    assert model.objective(point) == pytest.approx(other.objective(point.W[0], point.H), rel=1e-13)
    g_w, g_layers, _ = other.gradient(point.W[0], point.H)
    grad = model.gradient(point)
    assert np.allclose(grad.W[0], g_w, rtol=1e-12) and np.allclose(grad.H, g_layers[0], rtol=1e-12)
    form = closed_form(model)
    assert form.beta == pytest.approx(2 * 4 * math.sqrt(5 * 3e-3 * 2e-3))  # 2K√(nλ_Hλ_W)
    assert form.t_star == pytest.approx(1 - form.beta / 2, rel=1e-15)


# ---------------------------------------------------------------------------------------
# the exact solution


def test_closed_form_reproduces_the_numbers_of_note_configuration_a():
    form = closed_form(DeepLinearUFM(**CONFIG_A))
    assert form.beta == pytest.approx(0.118867, rel=1e-5)
    assert form.threshold == pytest.approx(1.0518, rel=1e-4)
    assert form.t_star == pytest.approx(0.975876, rel=1e-6)
    assert form.objective == pytest.approx(0.0591468, rel=1e-6)
    assert np.allclose(form.sigma_w_sq, 1.569487, rtol=1e-6)
    assert form.mean_norm_sq[0] == pytest.approx(0.156949, rel=1e-5)
    assert np.allclose(form.hessian_outlier, 0.2022600, rtol=1e-6)
    assert form.gradient_coefficient[2] == pytest.approx(-0.0129330, rel=1e-4)
    assert form.condition == pytest.approx(7.6e-9, rel=0.02)
    assert form.condition_bound == pytest.approx(4.1e-4, rel=0.02)


def test_closed_form_reproduces_configuration_b_with_unequal_lambda():
    model = DeepLinearUFM(**CONFIG_B)
    form = closed_form(model)
    assert form.t_star == pytest.approx(0.974787, rel=1e-6)
    assert np.allclose(form.sigma_w_sq, [3.072187, 1.228875, 0.614437], rtol=1e-6)
    assert np.allclose(form.hessian_outlier, [0.077324, 0.193309, 0.386618], rtol=1e-5)
    # λ_out(l) ∝ λ_W(l) and λ_out σ_W² = κ t*²/K at every layer (note §3.8)
    assert np.allclose(
        form.hessian_outlier / np.asarray(model.lambda_w),
        form.hessian_outlier[0] / model.lambda_w[0],
        rtol=1e-13,
    )
    assert np.allclose(form.hessian_outlier * form.sigma_w_sq, form.t_star**2 / 4, rtol=1e-13)


@pytest.mark.parametrize("n_layers", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("fraction", [0.05, 0.5, 0.9, 0.99])
def test_t_star_is_the_minimiser_of_phi_on_a_dense_grid(n_layers, fraction):
    beta = fraction * regularisation_threshold(n_layers)
    t = solve_t_star(beta, n_layers)
    grid = np.linspace(0.0, 1.2, 240_001)
    best = grid[np.argmin(phi(grid, beta, n_layers))]
    refined = minimize_scalar(
        lambda x: float(phi(x, beta, n_layers)),
        bounds=(max(best - 1e-4, 0), best + 1e-4),
        method="bounded",
        options={"xatol": 1e-13},
    ).x
    assert t == pytest.approx(refined, abs=1e-7)
    assert float(phi(t, beta, n_layers)) < 1.0


@pytest.mark.parametrize("n_layers", [1, 2, 3, 5])
def test_threshold_is_where_zero_and_the_local_minimum_tie(n_layers):
    beta_c = regularisation_threshold(n_layers)
    below, above = (
        solve_t_star(beta_c * (1 - 1e-6), n_layers),
        solve_t_star(beta_c * (1 + 1e-6), n_layers),
    )
    assert below > 0 and above == 0.0
    if n_layers > 1:  # at β_c the interior minimum sits at t = (L−1)/L with φ = 1
        t = (n_layers - 1) / n_layers
        assert float(phi(t, beta_c, n_layers)) == pytest.approx(1.0, rel=1e-13)
        p = 2 / (n_layers + 1)
        assert 2 * (t - 1) + beta_c * p * t ** (p - 1) == pytest.approx(0.0, abs=1e-13)


@pytest.mark.parametrize("n_layers", [2, 3, 4, 6])
def test_a_local_minimum_survives_beyond_the_threshold_up_to_beta_m(n_layers):
    beta_c, beta_m = regularisation_threshold(n_layers), local_minimum_threshold(n_layers)
    assert beta_m > beta_c
    p = 2 / (n_layers + 1)
    grid = np.linspace(1e-9, 1.0, 400_001)

    def has_interior_minimum(beta: float) -> bool:  # φ' changes sign from - to + on (0, 1]
        dphi = 2 * (grid - 1) + beta * p * grid ** (p - 1)
        return bool(np.any((dphi[:-1] < 0) & (dphi[1:] >= 0)))

    assert has_interior_minimum(beta_c * 1.001) and has_interior_minimum(beta_m * 0.999)
    assert not has_interior_minimum(beta_m * 1.001)
    assert local_minimum_threshold(1) == regularisation_threshold(1) == 2.0


@pytest.mark.parametrize("config", [CONFIG_A, CONFIG_B, *RANDOM_CONFIGS])
def test_condition_two_in_both_forms_agree_and_the_optimum_is_exact(config):
    model = DeepLinearUFM(**config)
    form = closed_form(model)
    assert (
        (form.beta < form.threshold) == (form.condition < form.condition_bound) == form.nontrivial
    )
    point = exact_optimum(model, seed=5)
    assert model.objective(point) == pytest.approx(form.objective, rel=1e-13)
    assert model.gradient(point).norm() < 1e-12
    check = is_global_optimum(model, point)
    assert check.is_optimum and check.objective_gap < 1e-13
    # a random point and the origin (a critical point, not the optimum) are rejected
    assert not is_global_optimum(model, model.random_point(0)).is_optimum
    zero = point.scaled(0.0)
    assert not is_global_optimum(model, zero).is_optimum
    assert model.gradient(zero).norm() == 0.0


def test_loss_scale_one_over_n_is_the_default_with_half_the_penalties():
    """s = 1/N with λ equals 2 × (s = 1/(2N) with λ/2): same minimiser, twice the value."""
    a = DeepLinearUFM(3, 4, [5, 4], [2e-3, 4e-3], 3e-3, loss_scale="1/N")
    b = DeepLinearUFM(3, 4, [5, 4], [1e-3, 2e-3], 1.5e-3)
    fa, fb = closed_form(a), closed_form(b)
    assert fa.t_star == pytest.approx(fb.t_star, rel=1e-14)
    assert fa.objective == pytest.approx(2 * fb.objective, rel=1e-14)
    point = exact_optimum(b, seed=1)
    assert a.objective(point) == pytest.approx(fa.objective, rel=1e-13)
    assert (
        a.kappa == 2.0
        and DeepLinearUFM(3, 4, 5, 1e-3, 1e-3, n_layers=1, loss_scale="1/(2n)").kappa == 3.0
    )


def test_gradient_descent_reaches_the_closed_form_to_1e_8_in_the_objective():
    model = DeepLinearUFM(**CONFIG_A)
    traj = gradient_descent(model, 0.5, 6000, w_scale=0.5, h_scale=0.5, checkpoints=12, seed=0)
    form = closed_form(model)
    assert abs(traj.objective[-1] - form.objective) / form.objective < 1e-8
    assert traj.steps[0] == 0 and traj.steps[-1] == 6000 and len(traj.points) == len(traj.steps)
    assert np.all(np.diff(traj.objective) <= 1e-15)  # monotone at this step size
    assert traj.objective[0] == pytest.approx(model.objective(traj.points[0]))
    assert is_global_optimum(model, traj.final, tol=1e-6).is_optimum


def test_gradient_descent_stops_at_tol_and_momentum_converges_too():
    model = DeepLinearUFM(**CONFIG_B)
    traj = gradient_descent(model, 0.3, 50_000, w_scale=0.5, h_scale=0.5, tol=1e-9)
    assert traj.steps[-1] < 50_000 and traj.grad_norm[-1] <= 1e-9 and "tol" in traj.stopped
    heavy = gradient_descent(model, 0.1, 20_000, w_scale=0.5, h_scale=0.5, momentum=0.9, tol=1e-9)
    form = closed_form(model)
    for t in (traj, heavy):
        assert abs(t.objective[-1] - form.objective) / form.objective < 1e-12


@pytest.mark.parametrize("batch_size", [None, 7])
def test_gradient_descent_calls_back_at_exactly_the_checkpoints_with_the_stored_points(
    batch_size,
):
    """callback(step, point) once per recorded step, in order, at the log-spaced
    checkpoints (and at the step where tol stops the run), with points equal to the
    stored ones; modifying the point handed over leaves the record unchanged."""
    model = DeepLinearUFM(**CONFIG_B)
    calls = []

    def callback(step, point):
        calls.append((step, point.flat().copy()))
        point.W[0][...] = np.nan  # a copy: the stored point must not change

    options = {"w_scale": 0.5, "h_scale": 0.5, "batch_size": batch_size}
    traj = gradient_descent(model, 0.3, 500, checkpoints=7, callback=callback, **options)
    expected = log_checkpoints(500, 7)
    assert [s for s, _ in calls] == traj.steps.tolist() == expected.tolist()
    for (_, flat), stored in zip(calls, traj.points, strict=True):
        np.testing.assert_array_equal(flat, stored.flat())
    calls.clear()
    if batch_size is not None:
        return  # SGD checks tol at the checkpoints only
    options["checkpoints"] = [10, 100]
    traj = gradient_descent(model, 0.3, 50_000, tol=1e-4, callback=callback, **options)
    assert [s for s, _ in calls] == traj.steps.tolist() == [0, 10, 100, traj.steps[-1]]
    assert 100 < traj.steps[-1] < 50_000 and "tol" in traj.stopped
    np.testing.assert_array_equal(calls[-1][1], traj.final.flat())


@pytest.mark.parametrize("model", MODELS, ids=repr)
def test_minibatch_gradient_equals_autograd_of_the_minibatch_objective(model):
    point = _point(model, seed=3)
    cols = np.sort(np.random.default_rng(0).choice(model.n_samples, 3, replace=False))
    value, grad = model.minibatch_gradient(point, cols)
    ref_value, ref_grad = _autograd(model, point, cols)
    assert value == pytest.approx(ref_value, rel=1e-13)
    assert np.allclose(grad.flat(), ref_grad.flat(), rtol=1e-11, atol=1e-13)


def test_minibatch_gradient_is_unbiased_over_every_batch_of_its_size():
    """The mean over all C(6, 2) = 15 batches is (F, ∇F) exactly (float64 rounding)."""
    model = DeepLinearUFM(**RANDOM_CONFIGS[0])  # N = 6
    point = model.random_point(seed=4)
    pairs = [np.array(c) for c in itertools.combinations(range(model.n_samples), 2)]
    values, grads = zip(*(model.minibatch_gradient(point, c) for c in pairs), strict=True)
    assert np.mean(values) == pytest.approx(model.objective(point), rel=1e-13)
    mean = np.mean([g.flat() for g in grads], axis=0)
    assert np.allclose(mean, model.gradient(point).flat(), rtol=1e-12, atol=1e-14)


def test_sgd_batches_cover_every_sample_once_per_epoch_and_full_batches_are_gd():
    model = DeepLinearUFM(**CONFIG_B)  # N = 20
    batches = sgd_batches(model.n_samples, 6, seed=0)
    for _ in range(3):  # 3 epochs of 6 + 6 + 6 + 2
        epoch = [next(batches) for _ in range(4)]
        assert [len(b) for b in epoch] == [6, 6, 6, 2]
        assert sorted(np.concatenate(epoch).tolist()) == list(range(20))
    full = gradient_descent(model, 0.3, 200, w_scale=0.5, h_scale=0.5, checkpoints=4)
    same = gradient_descent(model, 0.3, 200, w_scale=0.5, h_scale=0.5, checkpoints=4, batch_size=20)
    assert same.method == full.method == "literal"
    np.testing.assert_array_equal(same.final.flat(), full.final.flat())


def test_sgd_settles_near_the_closed_form_optimum():
    """Constant-rate SGD stays within a noise floor of order lr of F*: measured relative
    gaps 2.9e-5 (lr 0.2), 1.3e-5 (0.1), 8e-7 (0.05) on configuration A, b = 10; the test
    asks < 1e-3 at lr 0.2 and a recorded objective that is the full F."""
    model = DeepLinearUFM(**CONFIG_A)
    traj = gradient_descent(
        model, 0.2, 20_000, w_scale=0.5, h_scale=0.5, checkpoints=5, batch_size=10, seed=0
    )
    assert traj.method == "sgd"
    optimum = closed_form(model).objective
    assert 0 <= (traj.objective[-1] - optimum) / optimum < 1e-3
    assert traj.objective[-1] == pytest.approx(model.objective(traj.final), rel=1e-14)
    assert traj.objective[0] > 10 * optimum


@pytest.mark.parametrize(
    "columns, message",
    [([], "non-empty"), ([0, 0], "distinct"), ([30], r"\[0, 30\)"), ([0.5], "integer")],
)
def test_bad_minibatch_is_a_clear_error(columns, message):
    model = DeepLinearUFM(**CONFIG_A)
    with pytest.raises(ValueError, match=message):
        model.minibatch_gradient(model.random_point(), np.asarray(columns))
    with pytest.raises(ValueError, match="batch_size"):
        gradient_descent(model, 0.1, 10, batch_size=31)


def test_lbfgs_reaches_the_closed_form_and_the_relu_model_a_critical_point():
    model = DeepLinearUFM(**RANDOM_CONFIGS[3])
    sol = minimise(model, seed=1, w_scale=0.5, h_scale=0.5)
    form = closed_form(model)
    assert abs(sol.objective[-1] - form.objective) / form.objective < 1e-10
    relu = DeepReLUUFM(3, 4, 8, 5e-3, 5e-3, n_layers=3)
    sol = minimise(relu, seed=0)
    assert sol.grad_norm[-1] < 1e-8 and sol.objective[-1] < sol.objective[0]


def test_beyond_the_threshold_the_optimum_is_zero_and_gradient_descent_collapses():
    model = DeepLinearUFM(3, 10, 6, 0.2, 0.2, n_layers=3)
    form = closed_form(model)
    assert not form.nontrivial and form.t_star == 0.0
    assert form.objective == pytest.approx(0.5)  # F(0) = s‖Y‖² = κ/2
    with pytest.raises(ValueError, match=r"condition \(2\).*β = .* >= β_c = .*bound"):
        exact_optimum(model)
    zero = exact_optimum(model, allow_trivial=True)
    assert zero.norm() == 0.0 and model.objective(zero) == pytest.approx(0.5)
    traj = gradient_descent(model, 0.5, 3000, w_scale=0.5, h_scale=0.5, checkpoints=3)
    assert traj.final.norm() < 1e-6
    assert traj.objective[-1] == pytest.approx(0.5, abs=1e-10)


def test_log_checkpoints():
    steps = log_checkpoints(10_000, 9)
    assert steps[0] == 0 and steps[-1] == 10_000 and np.all(np.diff(steps) > 0)
    assert np.allclose(np.diff(np.log(steps[1:])), np.log(10_000) / 8, rtol=0.05)
    assert log_checkpoints(0, 5).tolist() == [0]


# ---------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"widths": [4, 2, 4]}, r"width d_2 = 2 is below K = 3"),
        ({"lambda_w": 0.0}, r"lambda_w must be a finite number > 0, got 0.0"),
        ({"lambda_w": [1e-3, -1e-3, 1e-3]}, r"lambda_w\[1\] must be a finite number > 0"),
        ({"lambda_h": -1.0}, r"lambda_h must be a finite number > 0"),
        ({"lambda_w": [1e-3, 1e-3]}, r"lambda_w has 2 entries but the model has L = 3"),
        ({"widths": 4}, r"pass n_layers"),
        ({"widths": [4, 4, 4], "n_layers": 2}, r"widths has 3 entries but n_layers=2"),
        ({"loss_scale": "mean"}, r"loss_scale must be one of"),
        ({"loss_scale": 0.0}, r"loss_scale must be a finite number > 0"),
    ],
)
def test_bad_configuration_is_a_clear_error(kwargs, message):
    args = {
        "n_classes": 3,
        "n_per_class": 2,
        "widths": [4, 4, 4],
        "lambda_w": 1e-3,
        "lambda_h": 1e-3,
    } | kwargs
    with pytest.raises(ValueError, match=message):
        DeepLinearUFM(**args)


def test_mismatched_parameters_are_a_clear_error():
    model = DeepLinearUFM(3, 2, [4, 5], 1e-3, 1e-3)
    p = model.random_point()
    with pytest.raises(ValueError, match=r"H must have shape \(4, 6\)"):
        model.objective((p.H[:, :5], p.W))
    with pytest.raises(ValueError, match=r"W has 1 matrices but the model has L = 2"):
        model.objective((p.H, p.W[:1]))
    with pytest.raises(ValueError, match=r"W_2 must have shape \(3, 5\)"):
        model.objective((p.H, (p.W[0], p.W[1].T)))
    with pytest.raises(TypeError, match="point must be UFMParameters or a pair"):
        model.objective(p.H)
    relu = DeepReLUUFM(3, 2, [4, 5], 1e-3, 1e-3)
    with pytest.raises(ValueError, match=r"linear model .* only"):
        closed_form(relu)


BIAS_MODELS = [m for m in MODELS if m.bias]


@pytest.mark.parametrize("model", BIAS_MODELS, ids=repr)
def test_with_biases_the_layer_hessians_agree_three_ways(model):
    from collapselab.theory.dlufm_layerwise import layer_hessian

    point = _point(model, seed=5)
    methods = ("kronecker", "data", "autodiff") if model.activation == "identity" else ("data",)
    for layer in range(1, model.n_layers + 1):
        reference = layer_hessian(model, point, layer, method="autodiff")
        for method in methods:
            hessian = layer_hessian(model, point, layer, method=method)
            assert np.abs(hessian - reference).max() < 1e-10, (layer, method)


def test_unregularised_last_bias_makes_the_mean_output_the_mean_target():
    """∂F/∂b_L = 2s Σ_i (f_i − y_i) = 0 at a critical point: every class's output
    averages 1/K over the samples (λ_b = 0)."""
    model = DeepLinearUFM(3, 4, [5, 6], [1e-3, 2e-3], 2e-3, bias=True)
    solution = minimise(model, seed=0)
    assert solution.grad_norm[-1] < 1e-8
    outputs = model.features(solution.final)[-1].T  # (K, N)
    assert np.allclose(outputs.mean(axis=1), 1 / 3, atol=1e-8)


def test_bias_options_and_points_are_checked():
    with pytest.raises(ValueError, match=r"lambda_b=0\.1 needs bias=True"):
        DeepLinearUFM(3, 2, 4, 1e-3, 1e-3, n_layers=2, lambda_b=0.1)
    with pytest.raises(TypeError, match="bias must be a bool"):
        DeepLinearUFM(3, 2, 4, 1e-3, 1e-3, n_layers=2, bias="yes")
    plain = DeepLinearUFM(3, 2, 4, 1e-3, 1e-3, n_layers=2)
    biased = DeepLinearUFM(3, 2, 4, 1e-3, 1e-3, n_layers=2, bias=True)
    point = biased.random_point()
    assert [b.shape for b in point.b] == [(4,), (3,)] and all(not b.any() for b in point.b)
    with pytest.raises(ValueError, match="the model has none"):
        plain.objective(point)
    with pytest.raises(ValueError, match="b has 0 vectors but the model"):
        biased.objective((point.H, point.W))
    with pytest.raises(ValueError, match=r"b_2 must have shape \(3,\)"):
        biased.objective((point.H, point.W, (point.b[0], np.zeros(4))))
    for solve in (closed_form, exact_optimum):
        with pytest.raises(ValueError, match="bias-free model"):
            solve(biased)
    with pytest.raises(ValueError, match=r"theta must have shape \(\d+,\)"):
        biased.from_flat(np.zeros(3))
