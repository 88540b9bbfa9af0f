"""Generated datasets: Gaussian mixtures, prescribed spectra, the frequency dataset."""

import math

import numpy as np
import pytest
import torch

from collapselab.data import (
    PAPER_KAPPA,
    PAPER_PHI,
    frequency_dataset,
    frequency_function,
    frequency_partial_sums,
    gaussian_mixture,
    gaussian_mixture_means,
    spectrum_gaussian,
    spectrum_gaussian_model,
)

# ------------------------------------------------------------------ gaussian_mixture


def test_gaussian_mixture_shapes_dtypes_balance():
    s = gaussian_mixture(4, 7, n_train_per_class=11, n_test_per_class=5, seed=3)
    assert s.train.x.shape == (44, 7) and s.test.x.shape == (20, 7)
    assert s.train.x.dtype == torch.float32 and s.train.y.dtype == torch.int64
    assert s.train.class_counts().tolist() == [11] * 4
    assert s.test.class_counts().tolist() == [5] * 4
    assert s.n_classes == 4
    assert gaussian_mixture(2, 3, 5).test is None


def test_gaussian_mixture_deterministic_and_seed_dependent():
    a = gaussian_mixture(3, 5, 20, 10, clusters_per_class=2, seed=7)
    b = gaussian_mixture(3, 5, 20, 10, clusters_per_class=2, seed=7)
    c = gaussian_mixture(3, 5, 20, 10, clusters_per_class=2, seed=8)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.x, b.test.x)
    assert torch.equal(a.train.y, b.train.y)
    assert not torch.allclose(a.train.x, c.train.x)
    # The training split does not depend on the number of test samples (separate streams).
    d = gaussian_mixture(3, 5, 20, 0, clusters_per_class=2, seed=7)
    assert torch.equal(a.train.x, d.train.x)


def test_gaussian_mixture_means_on_sphere():
    means = gaussian_mixture_means(5, 9, clusters_per_class=3, mean_scale=2.5, seed=1)
    assert means.shape == (5, 3, 9) and means.dtype == torch.float64
    torch.testing.assert_close(
        means.norm(dim=-1), torch.full((5, 3), 2.5, dtype=torch.float64), rtol=0, atol=1e-12
    )


def test_gaussian_mixture_noise_free_samples_sit_on_their_cluster_means():
    k, c, n = 3, 4, 10  # 10 samples over 4 clusters: sizes 3, 3, 2, 2
    s = gaussian_mixture(k, 6, n, clusters_per_class=c, noise_std=0.0, seed=2)
    means = gaussian_mixture_means(k, 6, c, seed=2).numpy()
    sizes = s.train.meta["cluster_sizes"]
    assert sizes == [3, 3, 2, 2]
    row = 0
    for cls in range(k):
        for cluster in range(c):
            for _ in range(sizes[cluster]):
                assert int(s.train.y[row]) == cls
                np.testing.assert_allclose(s.train.x[row].numpy(), means[cls, cluster], atol=1e-6)
                row += 1
    assert row == k * n


def test_gaussian_mixture_sample_statistics():
    s = gaussian_mixture(2, 4, 20000, mean_scale=3.0, noise_std=0.5, seed=4)
    means = gaussian_mixture_means(2, 4, mean_scale=3.0, seed=4).numpy()[:, 0]
    x, y = s.train.x.double().numpy(), s.train.y.numpy()
    for k in range(2):
        xk = x[y == k]
        # Standard error of each coordinate is 0.5 / sqrt(20000) = 0.0035.
        np.testing.assert_allclose(xk.mean(0), means[k], atol=0.02)
        np.testing.assert_allclose(np.cov(xk.T, bias=True), 0.25 * np.eye(4), atol=0.02)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"n_classes": 0}, ValueError),
        ({"dim": 0}, ValueError),
        ({"n_train_per_class": 2, "clusters_per_class": 3}, ValueError),
        ({"n_train_per_class": 2.0}, TypeError),
        ({"seed": -1}, ValueError),
        ({"noise_std": float("nan")}, ValueError),
        ({"mean_scale": -1.0}, ValueError),
        ({"n_test_per_class": -1}, ValueError),
    ],
)
def test_gaussian_mixture_bad_inputs(kwargs, error):
    args = {"n_classes": 2, "dim": 3, "n_train_per_class": 4, **kwargs}
    with pytest.raises(error):
        gaussian_mixture(**args)


# ----------------------------------------------------------------- spectrum_gaussian


@pytest.mark.parametrize("signal", ["top", "bottom", (2, 5)])
def test_spectrum_model_structure(signal):
    k, d, a = 3, 8, 1.7
    m = spectrum_gaussian_model(
        k, d, spectrum="power", decay=1.5, signal=signal, signal_strength=a, seed=5
    )
    u, s, mu = m.basis.numpy(), m.noise_eigenvalues.numpy(), m.means.numpy()
    np.testing.assert_allclose(u.T @ u, np.eye(d), atol=1e-12)
    np.testing.assert_allclose(s, np.arange(1, d + 1) ** -1.5, rtol=1e-15)
    expected_pcs = {"top": (0, 1), "bottom": (6, 7)}.get(signal, signal)
    assert m.signal_pcs == tuple(expected_pcs)
    coords = mu @ u  # class means in PC coordinates
    off = [j for j in range(d) if j not in expected_pcs]
    np.testing.assert_allclose(coords[:, off], 0.0, atol=1e-12)
    np.testing.assert_allclose(mu.sum(0), 0.0, atol=1e-12)
    # Between-class covariance is a^2 U_S diag(s_S) U_S^T (explicit sum over classes).
    between = sum(np.outer(mu[c], mu[c]) for c in range(k)) / k
    idx = list(expected_pcs)
    expected = a**2 * u[:, idx] @ np.diag(s[idx]) @ u[:, idx].T
    np.testing.assert_allclose(between, expected, atol=1e-12)
    total = u @ np.diag(s) @ u.T + between
    np.testing.assert_allclose(
        np.sort(np.linalg.eigvalsh(total)), np.sort(m.total_eigenvalues.numpy()), atol=1e-12
    )


def test_spectrum_model_spectra_and_axis_basis():
    m = spectrum_gaussian_model(2, 5, spectrum="exponential", decay=0.5, basis="axis")
    np.testing.assert_allclose(m.noise_eigenvalues.numpy(), np.exp(-0.5 * np.arange(5)))
    assert torch.equal(m.basis, torch.eye(5, dtype=torch.float64))
    flat = spectrum_gaussian_model(2, 4, spectrum="flat")
    assert torch.equal(flat.noise_eigenvalues, torch.ones(4, dtype=torch.float64))
    custom = spectrum_gaussian_model(2, 3, spectrum=[4.0, 2.0, 1.0])
    assert custom.noise_eigenvalues.tolist() == [4.0, 2.0, 1.0]


@pytest.mark.parametrize(("signal", "pc"), [("top", 0), ("bottom", 5)])
def test_spectrum_gaussian_samples_follow_the_model(signal, pc):
    n = 20000
    s = spectrum_gaussian(2, 6, n, 10, basis="axis", signal=signal, signal_strength=2.0, seed=1)
    x, y = s.train.x.double().numpy(), s.train.y.numpy()
    assert s.train.class_counts().tolist() == [n, n] and s.test.x.shape == (20, 6)
    within = sum(np.cov(x[y == k].T, bias=True) for k in range(2)) / 2
    eig = np.arange(1, 7) ** -1.0
    # Relative standard error of a variance estimate from 40000 samples is about 0.7%.
    np.testing.assert_allclose(np.diag(within), eig, rtol=0.05)
    diff = x[y == 1].mean(0) - x[y == 0].mean(0)
    assert abs(diff[pc]) / np.linalg.norm(diff) > 0.98
    # Mean offset is 2 a sqrt(s_pc) along the signal axis (the simplex coordinates are +-1).
    assert abs(diff[pc]) == pytest.approx(2 * 2.0 * math.sqrt(eig[pc]), rel=0.05)
    assert s.train.meta["signal_pcs"] == [pc]


def test_spectrum_gaussian_same_bayes_difficulty_top_and_bottom():
    top = spectrum_gaussian_model(2, 10, signal="top", signal_strength=1.3, seed=2)
    bottom = spectrum_gaussian_model(2, 10, signal="bottom", signal_strength=1.3, seed=2)
    for m in (top, bottom):
        cov = m.basis @ torch.diag(m.noise_eigenvalues) @ m.basis.T
        d = m.means[1] - m.means[0]
        mahalanobis = float(d @ torch.linalg.solve(cov, d))
        assert mahalanobis == pytest.approx(4 * 1.3**2, rel=1e-10)


def test_spectrum_gaussian_deterministic_and_seeded():
    a = spectrum_gaussian(3, 5, 30, 5, seed=11)
    b = spectrum_gaussian(3, 5, 30, 5, seed=11)
    c = spectrum_gaussian(3, 5, 30, 5, seed=12)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.x, b.test.x)
    assert not torch.allclose(a.train.x, c.train.x)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_classes": 1},
        {"dim": 1, "n_classes": 3},
        {"spectrum": "cosine"},
        {"spectrum": [1.0, 2.0, 3.0], "dim": 3},
        {"spectrum": [1.0, 0.0, 0.0], "dim": 3},
        {"spectrum": [1.0, 0.5], "dim": 3},
        {"basis": "sobol"},
        {"signal": "middle"},
        {"signal": (0, 0), "n_classes": 3},
        {"signal": (40,)},
        {"signal_strength": -1.0},
    ],
)
def test_spectrum_gaussian_bad_inputs(kwargs):
    with pytest.raises(ValueError):
        spectrum_gaussian(**{"n_train_per_class": 3, **kwargs})


# ----------------------------------------------------------------------- frequency


def test_frequency_function_against_explicit_sum():
    z = np.random.default_rng(0).uniform(-1, 1, 50)
    expected = np.array(
        [
            sum(
                math.sin(2 * math.pi * k * zi + p)
                for k, p in zip(PAPER_KAPPA, PAPER_PHI, strict=True)
            )
            for zi in z
        ]
    )
    np.testing.assert_allclose(frequency_function(z), expected, rtol=0, atol=1e-12)
    torch_values = frequency_function(torch.from_numpy(z))
    assert isinstance(torch_values, torch.Tensor) and torch_values.dtype == torch.float64
    np.testing.assert_allclose(torch_values.numpy(), expected, rtol=0, atol=1e-12)
    assert frequency_function(0.25, kappa=[1.0], phi=[0.0]) == pytest.approx(1.0, abs=1e-15)


def test_frequency_partial_sums_against_explicit_loops():
    """lambda_j(z) = sum_{i <= j} sin(2 pi kappa_i z + phi_i) by loops, for every j; the
    last equals the full sum."""
    z = np.random.default_rng(1).uniform(-1, 1, (4, 5))
    got = frequency_partial_sums(z)
    assert got.shape == (4, 5, len(PAPER_KAPPA))
    for idx in np.ndindex(z.shape):
        running = 0.0
        for j, (k, p) in enumerate(zip(PAPER_KAPPA, PAPER_PHI, strict=True)):
            running += math.sin(2 * math.pi * k * z[idx] + p)
            assert got[(*idx, j)] == pytest.approx(running, abs=1e-12)
    np.testing.assert_allclose(got[..., -1], frequency_function(z), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="phi must have the same length as kappa"):
        frequency_partial_sums(z, kappa=[1.0, 2.0], phi=[0.0])


def test_frequency_dataset_labels_follow_the_boundary_exactly():
    s = frequency_dataset(n_train=3000, n_test=500, seed=1)
    for split, n in ((s.train, 3000), (s.test, 500)):
        assert split.x.shape == (n, 2) and split.x.dtype == torch.float32
        x = split.x.double()
        expected = (x[:, 1] <= frequency_function(x[:, 0])).long()
        assert torch.equal(split.y, expected)
        assert set(split.y.tolist()) == {0, 1}
        assert float(x[:, 0].min()) >= -1 and float(x[:, 0].max()) <= 1
        assert float(x[:, 1].abs().max()) <= 2 * math.pi
    assert s.train.meta["phi"] == list(PAPER_PHI)


def test_frequency_dataset_defaults_and_determinism():
    a = frequency_dataset(seed=4)
    assert len(a.train) == 10000 and len(a.test) == 1000
    b = frequency_dataset(seed=4)
    c = frequency_dataset(seed=5)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.y, b.test.y)
    assert not torch.equal(a.train.x, c.train.x)
    assert frequency_dataset(20, 0).test is None


def test_frequency_dataset_custom_terms():
    s = frequency_dataset(500, 0, kappa=[0.0, 1.0], phi=[0.0, 0.5])
    x = s.train.x.double()
    boundary = torch.sin(2 * math.pi * x[:, 0] + 0.5)
    assert torch.equal(s.train.y, (x[:, 1] <= boundary).long())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kappa": [1.0, 2.0], "phi": [0.0]},
        {"kappa": [], "phi": []},
        {"kappa": [float("inf")], "phi": [0.0]},
        {"n_train": 0},
        {"seed": -3},
    ],
)
def test_frequency_dataset_bad_inputs(kwargs):
    with pytest.raises(ValueError):
        frequency_dataset(**kwargs)
