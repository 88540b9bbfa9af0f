"""DeepFool minimal perturbations and the robustness measure (paper 003 Figs. 9, 11).

Reference: for an affine classifier the minimal L2 perturbation is the distance to the
nearest pairwise decision hyperplane, ``min_{k != k0} |f_k - f_k0| / ||w_k - w_k0||``,
computed here with explicit loops in float64 numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from collapselab.probe.robustness import deepfool, deepfool_robustness


def _linear(d: int, c: int, seed: int) -> nn.Linear:
    torch.manual_seed(seed)
    model = nn.Linear(d, c).double()
    with torch.no_grad():
        model.bias.normal_()
    return model


def _hyperplane_distance(model: nn.Linear, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: distance to the nearest decision hyperplane and the class across it."""
    w = model.weight.detach().numpy()
    b = model.bias.detach().numpy()
    dist = np.empty(x.shape[0])
    target = np.empty(x.shape[0], dtype=np.int64)
    for i in range(x.shape[0]):
        f = w @ x[i] + b
        k0 = int(np.argmax(f))
        best, best_k = np.inf, -1
        for k in range(w.shape[0]):
            if k == k0:
                continue
            d = abs(f[k] - f[k0]) / np.linalg.norm(w[k] - w[k0])
            if d < best:
                best, best_k = d, k
        dist[i], target[i] = best, best_k
    return dist, target


@pytest.mark.parametrize(("d", "c", "seed"), [(5, 3, 0), (12, 10, 1), (2, 2, 2)])
def test_linear_classifier_matches_the_hyperplane_distance(d, c, seed):
    model = _linear(d, c, seed)
    x = torch.randn(40, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    res = deepfool(model, x, overshoot=0.02, max_iter=50)
    dist, target = _hyperplane_distance(model, x.numpy())
    assert bool(res.success.all())
    # One step reaches the boundary exactly; the overshoot carries it across.
    assert res.iterations.tolist() == [1] * 40
    np.testing.assert_allclose(res.norms.numpy() / 1.02, dist, rtol=1e-10)
    assert res.perturbed.tolist() == target.tolist()
    # The perturbation is along w_target - w_k0 (the hyperplane normal).
    w = model.weight.detach().numpy()
    for i in range(40):
        normal = w[target[i]] - w[res.original[i]]
        r = res.perturbations[i].numpy()
        cos = r @ normal / (np.linalg.norm(r) * np.linalg.norm(normal))
        assert cos == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(
        res.ratios.numpy(), res.norms.numpy() / np.linalg.norm(x.numpy(), axis=1), rtol=1e-14
    )


def test_without_overshoot_the_point_lands_on_the_boundary():
    model = _linear(6, 4, 3)
    x = torch.randn(10, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    res = deepfool(model, x, overshoot=0.0, max_iter=3)
    dist, target = _hyperplane_distance(model, x.numpy())
    # On the boundary the two logits tie up to rounding, so whether the label counts as
    # flipped depends on the last bit (a reason for the overshoot). Where it does, the
    # point is on the hyperplane and the norm is the distance itself.
    done = res.success.numpy()
    assert done.sum() >= 5
    with torch.no_grad():
        f = model(x + res.perturbations).numpy()[done]
    rows = np.arange(f.shape[0])
    np.testing.assert_allclose(
        f[rows, res.original.numpy()[done]], f[rows, target[done]], atol=1e-12
    )
    np.testing.assert_allclose(res.norms.numpy()[done], dist[done], rtol=1e-10)
    assert bool(torch.isnan(res.norms[~res.success]).all())


def test_nonlinear_network_flips_every_label_and_batching_does_not_matter():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 5)
    ).double()
    model.train()
    x = torch.randn(30, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    a = deepfool(model, x, batch_size=30)
    b = deepfool(model, x, batch_size=7)
    assert model.training and model[1].training  # modes restored
    assert bool(a.success.all())
    assert bool((a.perturbed != a.original).all())
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(x + a.perturbations).argmax(1), a.perturbed)
    torch.testing.assert_close(a.perturbations, b.perturbations, rtol=1e-12, atol=1e-14)
    assert torch.equal(a.iterations, b.iterations)
    assert bool((a.norms > 0).all()) and bool((a.iterations >= 1).all())


def test_robustness_averages_correct_samples_only():
    model = _linear(4, 3, 7)
    x = torch.randn(50, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        pred = model(x).argmax(1)
    y = pred.clone()
    y[:10] = (pred[:10] + 1) % 3  # ten misclassified samples
    rob = deepfool_robustness(model, x, y)
    dist, _ = _hyperplane_distance(model, x.numpy())
    ratio = 1.02 * dist / np.linalg.norm(x.numpy(), axis=1)
    assert rob.n_samples == 50 and rob.n_correct == 40 and rob.n_used == 40 and rob.n_failed == 0
    assert rob.mean_ratio == pytest.approx(ratio[10:].mean(), rel=1e-10)
    assert rob.median_ratio == pytest.approx(np.median(ratio[10:]), rel=1e-10)
    assert rob.mean_norm == pytest.approx(1.02 * dist[10:].mean(), rel=1e-10)
    assert rob.mean_iterations == 1.0
    values = rob.as_dict()
    assert values["deepfool_ratio"] == rob.mean_ratio and values["deepfool_n_used"] == 40.0


def test_failures_are_counted_not_averaged():
    # A constant classifier has zero gradients: no boundary is reachable.
    model = nn.Linear(3, 4).double()
    with torch.no_grad():
        model.weight.zero_()
        model.bias.copy_(torch.tensor([1.0, 0.0, 0.0, 0.0]))
    x = torch.randn(6, 3, dtype=torch.float64)
    rob = deepfool_robustness(model, x, torch.zeros(6, dtype=torch.int64))
    assert rob.n_correct == 6 and rob.n_used == 0 and rob.n_failed == 6
    assert np.isnan(rob.mean_ratio)
    assert bool(torch.isnan(rob.deepfool.norms).all())
    assert float(rob.deepfool.perturbations.abs().max()) == 0.0
    # The iteration cap: zero steps allowed means nothing flips.
    capped = deepfool(_linear(5, 3, 0), torch.randn(4, 5, dtype=torch.float64), max_iter=0)
    assert not bool(capped.success.any())
    assert capped.iterations.tolist() == [0, 0, 0, 0]


def test_bad_input_raises():
    model = _linear(3, 2, 0)
    x = torch.randn(4, 3, dtype=torch.float64)
    with pytest.raises(TypeError, match="model"):
        deepfool(object(), x)
    with pytest.raises(TypeError, match="x must"):
        deepfool(model, x.numpy())
    with pytest.raises(ValueError, match="NaN"):
        deepfool(model, torch.full((2, 3), float("nan"), dtype=torch.float64))
    with pytest.raises(ValueError, match="overshoot"):
        deepfool(model, x, overshoot=-0.1)
    with pytest.raises(ValueError, match="max_iter"):
        deepfool(model, x, max_iter=1.5)
    with pytest.raises(ValueError, match="batch_size"):
        deepfool(model, x, batch_size=0)
    with pytest.raises(ValueError, match="at least 2 classes"):
        deepfool(nn.Linear(3, 1).double(), x)
    with pytest.raises(ValueError, match="y must"):
        deepfool_robustness(model, x, torch.zeros(3, dtype=torch.int64))
    with pytest.raises(TypeError, match="integer labels"):
        deepfool_robustness(model, x, torch.zeros(4))
