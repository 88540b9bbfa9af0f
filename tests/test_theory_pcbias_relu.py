"""Paper 002 §2.5 two-layer ReLU dynamics against autograd GD of the TwoLayerReLU model,
on exactly symmetric data with the paired init. float64, fixed seeds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.models import TwoLayerReLU
from collapselab.theory import pcbias as pb
from collapselab.theory import pcbias_relu as pr

D, M, HALF = 10, 64, 100


def _symmetric_data(seed: int = 0, mirrored: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Classes N(+v, S) and N(-v, S), a symmetric distribution; ``mirrored``: every (x, y)
    also appears as (-x, -y), so the sample itself is symmetric. Otherwise 2 * HALF i.i.d.
    draws."""
    rng = np.random.default_rng(seed)
    scales = np.geomspace(2.0, 0.2, D)
    v = rng.normal(size=D) * scales
    n = HALF if mirrored else 2 * HALF
    y = rng.choice([-1.0, 1.0], n)
    x = rng.normal(size=(n, D)) * scales + y[:, None] * v
    return (np.vstack([x, -x]), np.concatenate([y, -y])) if mirrored else (x, y)


def _paired_model(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    torch.manual_seed(seed)
    model = TwoLayerReLU(D, M, paired=True).double()
    return model.hidden.weight.detach().numpy().copy(), model.a.detach().numpy().copy()


def test_gd_step_equals_autograd() -> None:
    x, y = _symmetric_data()
    torch.manual_seed(1)
    model = TwoLayerReLU(D, M, paired=False).double()
    w, a = model.hidden.weight.detach().numpy().copy(), model.a.detach().numpy().copy()
    loss = 0.5 * ((model(torch.tensor(x))[:, 0] - torch.tensor(y)) ** 2).sum()
    (grad,) = torch.autograd.grad(loss, [model.hidden.weight])
    np.testing.assert_allclose(
        pr.relu_gd_step(w, a, x, y, 1e-3), w - 1e-3 * grad.numpy(), rtol=1e-12, atol=1e-14
    )


def test_corrected_approximation_is_exact_at_step_zero_published_is_not() -> None:
    x, y = _symmetric_data()
    w, a = _paired_model()
    # The paired model is linear at init: f(x) = 1/2 a^T W x.
    np.testing.assert_allclose(
        np.maximum(x @ w.T, 0) @ a, 0.5 * x @ w.T @ a, rtol=1e-10, atol=1e-12
    )
    mu = 1e-3
    exact = pr.relu_gd_step(w, a, x, y, mu) - w
    corrected = pr.relu_approximate_step(w, a, x, y, mu) - w
    published = pr.relu_approximate_step(w, a, x, y, mu, "published") - w
    np.testing.assert_allclose(corrected, exact, rtol=1e-10, atol=1e-12 * np.abs(exact).max())
    rel = np.linalg.norm(published - exact) / np.linalg.norm(exact)
    assert rel > 0.2  # measured below


@pytest.mark.parametrize("mirrored", [True, False])
def test_small_s_trajectories(mirrored: bool) -> None:
    x, y = _symmetric_data(mirrored=mirrored)
    w0, a = _paired_model()
    frame = pb.principal_frame(x, y[:, None])
    mu = 0.05 / (0.25 * float(a @ a) * frame.eigenvalues[0])
    steps = 20
    exact = pr.relu_gd_trajectory(w0, a, x, y, mu, steps)
    errors = {}
    for variant in pr.VARIANTS:
        approx = pr.relu_approximate_trajectory(w0, a, x, y, mu, steps, variant)
        motion = np.linalg.norm(exact[1:] - w0, axis=(1, 2))
        errors[variant] = np.linalg.norm(approx[1:] - exact[1:], axis=(1, 2)) / motion
    if mirrored:
        # A symmetric sample keeps the pairing under GD (f stays odd, the half-space second
        # moment stays exactly Σ_XX / 2): the corrected dynamics are exact at every step.
        assert errors["corrected"].max() < 1e-10
    else:
        # i.i.d. draws: the half-space moment is Σ_XX / 2 only on average (measured 0.20-0.27
        # of the motion over 20 steps, n = 200, d = 10).
        assert errors["corrected"].max() < 0.35
    # The printed constants are off by 0.50-1.08 of the motion (both samples).
    assert (errors["published"] > 1.5 * errors["corrected"]).all()
    assert errors["published"][:10].min() > 0.6


def test_pc_rate_along_a() -> None:
    # Two paired inits sharing a, mirrored data: a^T M̃ does not depend on W (paired
    # half-spaces are complementary), so in PC coordinates the difference of a^T w̃_j between
    # the runs is multiplied by 1 - μ ‖a‖² d_j / 4 at every exact GD step.
    x, y = _symmetric_data()
    w1, a = _paired_model(0)
    w2, _ = _paired_model(5)
    frame = pb.principal_frame(x, y[:, None])
    mu = 0.05 / (0.25 * float(a @ a) * frame.eigenvalues[0])
    steps = 15
    runs = [pr.relu_gd_trajectory(w, a, x, y, mu, steps) for w in (w1, w2)]
    along = [a @ frame.rotate(r) for r in runs]  # (S, d)
    diff = along[0] - along[1]
    ratio = pr.relu_pc_ratio(frame.eigenvalues, a, mu)
    predicted = ratio[None, :] ** np.arange(steps + 1)[:, None] * diff[0]
    np.testing.assert_allclose(diff, predicted, rtol=1e-8, atol=1e-10 * np.abs(diff[0]).max())
    published = pr.relu_pc_ratio(frame.eigenvalues, a, mu, "published")
    np.testing.assert_allclose(1 - published, 2 * (1 - ratio), rtol=1e-10)
    assert ratio[0] == pytest.approx(0.95, rel=1e-12) and published[0] == pytest.approx(0.9)


def test_bad_input() -> None:
    x, y = _symmetric_data()
    w, a = _paired_model()
    with pytest.raises(ValueError, match=r"y must hold labels \+1 and -1"):
        pr.relu_gd_step(w, a, x, (y > 0).astype(float), 1e-3)
    with pytest.raises(ValueError, match="a has 63 entries but w has 64 rows"):
        pr.relu_approximate_step(w, a[:-1], x, y, 1e-3)
    with pytest.raises(ValueError, match="y has 199 labels but x has 200 rows"):
        pr.relu_gd_step(w, a, x, y[:-1], 1e-3)
    with pytest.raises(ValueError, match="variant"):
        pr.relu_approximate_step(w, a, x, y, 1e-3, "paper")
