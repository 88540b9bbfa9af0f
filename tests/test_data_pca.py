"""PCA projection, ZCA whitening, PC amplification and P-separable relabelling (paper 002 §4),
each checked against dense numpy references in float64."""

import numpy as np
import pytest
import scipy.optimize
import torch

from collapselab.data import (
    PCA,
    DataSplits,
    LabeledData,
    PCAmplification,
    PCAProjection,
    SeparableRelabel,
    ZCAWhitening,
    gaussian_mixture,
    separable_relabel,
)


def _correlated(n, d, seed=0, shape=None):
    """Rows with a strongly anisotropic, non-diagonal covariance and a non-zero mean."""
    rng = np.random.default_rng(seed)
    mix = rng.standard_normal((d, d)) * np.logspace(0, -1.5, d)
    x = rng.standard_normal((n, d)) @ mix.T + rng.standard_normal(d)
    x = torch.from_numpy(x)
    return x if shape is None else x.reshape(n, *shape)


def _numpy_pca(x: np.ndarray, center=True):
    """Dense reference: eigen-decomposition of the D x D covariance, largest first."""
    m = x.mean(0) if center else np.zeros(x.shape[1])
    xc = x - m
    evals, evecs = np.linalg.eigh(xc.T @ xc / len(x))
    return m, evals[::-1], evecs[:, ::-1]


# ------------------------------------------------------------------------------- PCA


@pytest.mark.parametrize(("n", "d"), [(60, 8), (10, 25)])  # covariance route, SVD route
@pytest.mark.parametrize("center", [True, False])
def test_pca_matches_dense_reference(n, d, center):
    x = _correlated(n, d, seed=n)
    pca = PCA(center=center).fit(x)
    m, evals, evecs = _numpy_pca(x.numpy(), center)
    r = pca.rank
    assert r == min(d, n - 1 if center else n)
    np.testing.assert_allclose(pca.mean.numpy(), m, atol=1e-12)
    np.testing.assert_allclose(pca.eigenvalues.numpy(), evals[:r], rtol=1e-9, atol=1e-12)
    v = pca.components.numpy()
    np.testing.assert_allclose(v.T @ v, np.eye(r), atol=1e-10)
    # Same directions up to sign (the eigenvalues are distinct).
    np.testing.assert_allclose(np.abs(v.T @ evecs[:, :r]), np.eye(r), atol=1e-7)
    # Sign convention: the largest-magnitude entry of each direction is positive.
    assert np.all(v[np.abs(v).argmax(0), np.arange(r)] > 0)
    coords = pca.transform(x)
    np.testing.assert_allclose(coords.numpy(), (x.numpy() - m) @ v, atol=1e-12)
    torch.testing.assert_close(pca.inverse_transform(coords), x, rtol=0, atol=1e-10)


def test_pca_bad_inputs():
    with pytest.raises(RuntimeError):
        PCA().transform(torch.zeros(2, 2))
    pca = PCA().fit(torch.randn(10, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="shape"):
        pca.transform(torch.zeros(2, 4))
    with pytest.raises(ValueError):
        PCA().fit(torch.tensor([[0.0, float("inf")]]))
    assert PCA().fit(torch.ones(5, 3)).rank == 0


# --------------------------------------------------------------------- PCAProjection


@pytest.mark.parametrize(("n", "d"), [(80, 6), (12, 30)])
def test_projection_full_rank_is_identity(n, d):
    x = _correlated(n, d, seed=1)
    proj = PCAProjection(d).fit(x)
    assert proj.n_components_used == min(d, n - 1)
    torch.testing.assert_close(proj.apply(x), x, rtol=0, atol=1e-10)
    if d <= n:  # full-rank data: identity on any input
        other = _correlated(7, d, seed=2)
        torch.testing.assert_close(proj.apply(other), other, rtol=0, atol=1e-10)


@pytest.mark.parametrize("p", [1, 3, 5])
def test_projection_equals_brute_force_projection(p):
    x = _correlated(50, 12, seed=3, shape=(3, 2, 2))  # images: flattened for the PCA
    test = _correlated(9, 12, seed=4, shape=(3, 2, 2))
    splits = DataSplits(
        LabeledData(x, torch.zeros(50, dtype=torch.int64), 1),
        LabeledData(test, torch.zeros(9, dtype=torch.int64), 1),
    )
    out = PCAProjection(p).fit_apply(splits)
    flat = x.reshape(50, -1).numpy()
    m = flat.mean(0)
    _, _, vt = np.linalg.svd(flat - m, full_matrices=False)  # independent route: SVD
    vp = vt[:p].T
    for got, src in ((out.train.x, flat), (out.test.x, test.reshape(9, -1).numpy())):
        expected = m + (src - m) @ vp @ vp.T
        assert got.shape == (len(src), 3, 2, 2)
        np.testing.assert_allclose(got.reshape(len(src), -1).numpy(), expected, atol=1e-10)
    # Projecting twice changes nothing.
    proj = PCAProjection(p).fit(x)
    torch.testing.assert_close(proj.apply(proj.apply(x)), proj.apply(x), rtol=0, atol=1e-10)


def test_projection_float32_and_errors():
    x = _correlated(40, 5, seed=5).float()
    out = PCAProjection(2).fit(x).apply(x)
    assert out.dtype == torch.float32
    with pytest.raises(ValueError, match="exceeds"):
        PCAProjection(6).fit(x)
    with pytest.raises(ValueError):
        PCAProjection(0)
    with pytest.raises(RuntimeError):
        PCAProjection(2).apply(x)
    with pytest.raises(ValueError):
        PCAProjection(2).fit(x).apply(torch.zeros(3, 4))


# ------------------------------------------------------------------------------- ZCA


def test_zca_whitened_train_has_identity_covariance():
    x = _correlated(200, 10, seed=6)
    w = ZCAWhitening(eps=0.0).fit_apply(x)
    xc = w.numpy() - w.numpy().mean(0)
    np.testing.assert_allclose(xc.T @ xc / 200, np.eye(10), rtol=0, atol=1e-6)


def test_zca_with_eps_matches_dense_formula():
    x = _correlated(150, 8, seed=7, shape=(2, 4))
    test = _correlated(11, 8, seed=8, shape=(2, 4))
    eps = 0.05
    zca = ZCAWhitening(eps=eps).fit(x)
    m, evals, evecs = _numpy_pca(x.reshape(150, -1).numpy())
    w = evecs @ np.diag((evals + eps) ** -0.5) @ evecs.T  # the paper's U (D/n + eps I)^(-1/2) U^T
    for src in (x, test):
        got = zca.apply(src)
        assert got.shape == src.shape
        np.testing.assert_allclose(
            got.reshape(len(src), -1).numpy(),
            (src.reshape(len(src), -1).numpy() - m) @ w,
            atol=1e-10,
        )
    white = zca.apply(x).reshape(150, -1).numpy()
    cov_evals = np.sort(np.linalg.eigvalsh(np.cov(white.T, bias=True)))[::-1]
    np.testing.assert_allclose(cov_evals, evals / (evals + eps), atol=1e-10)


def test_zca_rank_deficient_projects_out_the_null_space():
    x = _correlated(6, 10, seed=9)  # rank 5 after centring
    zca = ZCAWhitening(eps=0.0).fit(x)
    w = zca.apply(x).numpy()
    cov = np.cov(w.T, bias=True)
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(cov))[::-1], [1] * 5 + [0] * 5, atol=1e-8)
    with pytest.raises(ValueError):
        ZCAWhitening(eps=-1.0)


def _ls_predictions_on(x_train: np.ndarray, y: np.ndarray, x_all: np.ndarray) -> dict:
    """Predictions on ``x_all`` of the bias-free least-squares solution fitted on
    ``(x_train, y)``: the library's ``principal_frame(...).optimum()`` and a plain lstsq."""
    from collapselab.metrics.pc_frame import principal_frame

    frame = principal_frame(x_train, y)
    w_frame = frame.unrotate(frame.optimum())
    w_lstsq, *_ = np.linalg.lstsq(x_train, y, rcond=None)
    return {"frame": x_all @ w_frame.T, "lstsq": x_all @ w_lstsq}


@pytest.mark.parametrize("eps", [0.0, 1e-5])
def test_uncentred_whitening_leaves_least_squares_predictions_unchanged(eps):
    # R33: x -> A x with A invertible maps the LS solution W to W A^{-1}: same predictions.
    data = _correlated(250, 10, seed=21)  # non-zero mean (norm 2.56); rows 200+ held out
    x = data[:200]
    y = np.eye(3)[np.random.default_rng(0).integers(0, 3, 200)]
    zca = ZCAWhitening(eps=eps, center=False).fit(x)
    before = _ls_predictions_on(x.numpy(), y, data.numpy())
    after = _ls_predictions_on(zca.apply(x).numpy(), y, zca.apply(data).numpy())
    for route in ("frame", "lstsq"):  # measured worst 4.2e-14 (frame), 1e-14 (lstsq)
        np.testing.assert_allclose(after[route], before[route], rtol=0, atol=1e-10)
    np.testing.assert_allclose(before["frame"], before["lstsq"], rtol=0, atol=1e-10)


def test_centred_whitening_changes_bias_free_least_squares_predictions():
    # x -> A (x - m) is affine: a bias-free linear model cannot absorb the shift -A m.
    data = _correlated(250, 10, seed=21)
    x = data[:200]
    y = np.eye(3)[np.random.default_rng(0).integers(0, 3, 200)]
    zca = ZCAWhitening(eps=0.0, center=True).fit(x)
    before = _ls_predictions_on(x.numpy(), y, data.numpy())["frame"]
    after = _ls_predictions_on(zca.apply(x).numpy(), y, zca.apply(data).numpy())["frame"]
    gap = np.abs(after - before).max()
    assert gap == pytest.approx(0.4085, abs=1e-3)  # predictions reach 0.754 in magnitude
    assert np.mean(after.argmax(1) != before.argmax(1)) == pytest.approx(0.284)
    # With the mean removed first the same whitening is linear again: no change.
    centred = data - x.mean(0)
    again = _ls_predictions_on(centred[:200].numpy(), y, centred.numpy())["frame"]
    np.testing.assert_allclose(after, again, rtol=0, atol=1e-10)


# ---------------------------------------------------------------------- amplification


@pytest.mark.parametrize("which", ["top", "bottom"])
def test_amplification_scales_the_selected_eigenvalues(which):
    x = _correlated(300, 20, seed=10)
    amp = PCAmplification(fraction=0.1, factor=10.0, which=which, renormalize=False).fit(x)
    out = amp.apply(x).numpy()
    _, evals, evecs = _numpy_pca(x.numpy())
    _, new_evals, _ = _numpy_pca(out)
    k = 2  # round(0.1 * 20)
    selected = np.arange(k) if which == "top" else np.arange(20 - k, 20)
    expected = evals.copy()
    expected[selected] *= 100.0  # coordinates x10, variances x100
    np.testing.assert_allclose(
        np.sort(new_evals)[::-1], np.sort(expected)[::-1], rtol=1e-9, atol=1e-14 * expected.max()
    )
    # The principal directions are unchanged: the amplified covariance is diagonal in them.
    cov = np.cov(out.T, bias=True)
    np.testing.assert_allclose(evecs.T @ cov @ evecs, np.diag(expected), atol=1e-9 * expected.max())
    # Inputs outside the training set: x + (factor - 1) V_S V_S^T (x - m).
    test = _correlated(5, 20, seed=11)
    m = x.numpy().mean(0)
    vs = evecs[:, selected]
    ref = test.numpy() + 9.0 * (test.numpy() - m) @ vs @ vs.T
    np.testing.assert_allclose(amp.apply(test).numpy(), ref, atol=1e-9)


def test_amplification_renormalises_per_channel():
    x = _correlated(200, 48, seed=12, shape=(3, 4, 4))
    out = PCAmplification(fraction=0.015, factor=10.0).fit_apply(x)  # 1.5% of 48 -> 1 PC
    per_channel = out.transpose(0, 1).reshape(3, -1)
    torch.testing.assert_close(
        per_channel.mean(1), torch.zeros(3, dtype=torch.float64), rtol=0, atol=1e-10
    )
    torch.testing.assert_close(
        per_channel.std(1, unbiased=False), torch.ones(3, dtype=torch.float64), rtol=0, atol=1e-10
    )
    before = PCA().fit(x).eigenvalues
    after = PCA().fit(out).eigenvalues
    assert float(after[0] / after.sum()) > float(before[0] / before.sum()) + 0.3


def test_amplification_bad_inputs():
    for kwargs in (
        {"fraction": 0.0},
        {"fraction": 1.5},
        {"which": "middle"},
        {"factor": float("inf")},
    ):
        with pytest.raises(ValueError):
            PCAmplification(**kwargs)
    with pytest.raises(ValueError, match="variance"):
        PCAmplification().fit(torch.ones(4, 3))


# ------------------------------------------------------------------ P-separable labels


def _ls_predictions(z_train: np.ndarray, y: np.ndarray, k: int, z_eval: np.ndarray) -> np.ndarray:
    """Least squares with bias on +-1 one-vs-rest targets, dense numpy."""
    a = np.hstack([z_train, np.ones((len(z_train), 1))])
    targets = 2.0 * np.eye(k)[y] - 1.0
    w, *_ = np.linalg.lstsq(a, targets, rcond=None)
    return (np.hstack([z_eval, np.ones((len(z_eval), 1))]) @ w).argmax(1)


def _linearly_separable(z: np.ndarray, y: np.ndarray) -> bool:
    """Feasibility of s_i (w . z_i + b) >= 1 by linear programming (binary labels)."""
    s = 2.0 * y - 1.0
    a_ub = -s[:, None] * np.hstack([z, np.ones((len(z), 1))])
    res = scipy.optimize.linprog(
        np.zeros(z.shape[1] + 1),
        A_ub=a_ub,
        b_ub=-np.ones(len(z)),
        bounds=(None, None),
        method="highs",
    )
    return res.status == 0


@pytest.mark.parametrize(("k", "p"), [(2, 3), (3, 4)])
def test_separable_relabel_flips_exactly_the_ls_mistakes(k, p):
    data = gaussian_mixture(k, 10, 60, 20, clusters_per_class=2, mean_scale=1.0, seed=2)
    out = separable_relabel(data, n_components=p)
    x, y = data.train.x.double().numpy(), data.train.y.numpy()
    m = x.mean(0)
    _, _, vt = np.linalg.svd(x - m, full_matrices=False)
    z = (x - m) @ vt[:p].T
    z_test = (data.test.x.double().numpy() - m) @ vt[:p].T
    expected_train = _ls_predictions(z, y, k, z)
    expected_test = _ls_predictions(z, y, k, z_test)
    assert out.train.y.tolist() == expected_train.tolist()
    assert out.test.y.tolist() == expected_test.tolist()
    changed = float(np.mean(expected_train != y))
    assert 0.0 < changed < (k - 1) / k  # not separable in P dims; better than chance
    assert out.train.meta["separable_relabel"]["fraction_changed"] == pytest.approx(changed)
    assert torch.equal(out.train.x, data.train.x)
    if k == 2:
        assert not _linearly_separable(z, y)
        assert _linearly_separable(z, out.train.y.numpy())
        assert _linearly_separable(
            np.vstack([z, z_test]), np.concatenate([out.train.y, out.test.y])
        )


def test_separable_relabel_rounds_until_the_ls_refit_is_perfect():
    data = gaussian_mixture(2, 12, 100, 0, clusters_per_class=3, seed=5).train
    out = separable_relabel(data, n_components=5, rounds=50)
    info = out.meta["separable_relabel"]
    assert info["converged"] is True and info["rounds_used"] > 1
    x = data.x.double().numpy()
    _, _, vt = np.linalg.svd(x - x.mean(0), full_matrices=False)
    z = (x - x.mean(0)) @ vt[:5].T
    labels = out.y.numpy()
    # A fresh least-squares separator fit to the new labels gets 100% training accuracy.
    assert (_ls_predictions(z, labels, 2, z) == labels).all()


def test_separable_relabel_class_api_and_errors():
    data = gaussian_mixture(2, 6, 40, seed=1).train
    rel = SeparableRelabel(2).fit(data.x, data.y, 2)
    assert torch.equal(rel.predict(data.x), rel.train_labels)
    assert rel.weight.shape == (3, 2)
    with pytest.raises(RuntimeError):
        SeparableRelabel(2).predict(data.x)
    with pytest.raises(ValueError):
        SeparableRelabel(0)
    with pytest.raises(ValueError):
        SeparableRelabel(2, rounds=0)
    with pytest.raises(ValueError):
        SeparableRelabel(2).fit(data.x, data.y[:-1], 2)
    with pytest.raises(ValueError):
        SeparableRelabel(2).fit(data.x, data.y + 5, 2)
    with pytest.raises(TypeError):
        separable_relabel(data.x, 2)


def test_least_squares_separator_equals_numpy_lstsq():
    data = gaussian_mixture(3, 10, 60, clusters_per_class=2, mean_scale=1.0, seed=2).train
    rel = SeparableRelabel(4).fit(data.x, data.y, 3)
    z = rel.pca.transform(data.x, 4).numpy()
    a = np.hstack([z, np.ones((len(z), 1))])
    w, *_ = np.linalg.lstsq(a, 2.0 * np.eye(3)[data.y.numpy()] - 1.0, rcond=None)
    np.testing.assert_allclose(rel.weight.numpy(), w, rtol=1e-10, atol=1e-12)


def _sklearn_reference(separator: str, z: np.ndarray, y: np.ndarray):
    """The separator fitted independently with scikit-learn's own API."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    if separator == "logistic":
        return LogisticRegression(C=1.0, max_iter=10_000).fit(z, y)
    return LinearSVC(C=1.0, loss="hinge", dual=True, max_iter=100_000, random_state=0).fit(z, y)


def _argmax_loop(z: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """argmax_k (z_i . W[:-1, k] + W[-1, k]) by explicit loops over points and classes."""
    out = []
    for row in z:
        scores = [float(row @ weight[:-1, k] + weight[-1, k]) for k in range(weight.shape[1])]
        out.append(int(np.argmax(scores)))
    return np.array(out)


@pytest.mark.parametrize("separator", ["least_squares", "logistic", "linear_svm"])
@pytest.mark.parametrize(("k", "p"), [(2, 3), (3, 4)])
def test_every_separator_separates_the_relabelled_train_and_test(separator, k, p):
    data = gaussian_mixture(k, 10, 60, 20, clusters_per_class=2, mean_scale=1.0, seed=2)
    out = separable_relabel(data, n_components=p, separator=separator)
    rel = SeparableRelabel(p, separator=separator).fit(data.train.x, data.train.y, k)
    assert out.train.meta["separable_relabel"]["separator"] == separator
    assert torch.equal(out.train.y, rel.train_labels)
    z, z_test = (rel.pca.transform(s.x, p).numpy() for s in (data.train, data.test))
    weight = rel.weight.numpy()
    # Every relabelled point, train and test, is classified as its new label by the separator.
    assert (_argmax_loop(z, weight) == out.train.y.numpy()).all()
    assert (_argmax_loop(z_test, weight) == out.test.y.numpy()).all()
    changed = float((out.train.y != data.train.y).double().mean())
    assert 0.0 < changed < (k - 1) / k
    if separator != "least_squares":  # the stored separator is scikit-learn's own fit
        ref = _sklearn_reference(separator, z, data.train.y.numpy())
        assert (ref.predict(z) == out.train.y.numpy()).all()
        assert (ref.predict(z_test) == out.test.y.numpy()).all()
        coef = ref.coef_.T if k > 2 else ref.coef_.T * np.array([[0.0, 1.0]])
        np.testing.assert_allclose(weight[:-1], coef, rtol=1e-9, atol=1e-12)
    if k == 2:  # feasibility of a separating hyperplane by linear programming
        assert _linearly_separable(
            np.vstack([z, z_test]), np.concatenate([out.train.y, out.test.y])
        )


def test_separator_choice_errors_and_default_repr():
    data = gaussian_mixture(2, 6, 40, seed=1).train
    with pytest.raises(ValueError, match=r"separator must be one of .*'least_squares'.*got 'svm'"):
        SeparableRelabel(2, separator="svm")
    with pytest.raises(ValueError, match="separator"):
        separable_relabel(data, 2, separator="ridge")
    assert repr(SeparableRelabel(2)) == "SeparableRelabel(n_components=2, rounds=1)"
    rel = SeparableRelabel(2, rounds=20, separator="logistic").fit(data.x, data.y, 2)
    assert rel.converged is True
    assert torch.equal(rel.predict(data.x), rel.train_labels)


def test_pca_in_small_blocks_matches_one_block(monkeypatch):
    import collapselab.data.transforms as transforms_module

    x = _correlated(90, 7, seed=13, shape=(7, 1))
    whole = PCAProjection(3).fit(x)
    monkeypatch.setattr(transforms_module, "_BLOCK_ELEMENTS", 10)  # 1 row per block
    blocked = PCAProjection(3).fit(x)
    torch.testing.assert_close(
        blocked.pca.eigenvalues, whole.pca.eigenvalues, rtol=1e-12, atol=1e-13
    )
    torch.testing.assert_close(blocked.apply(x), whole.apply(x), rtol=0, atol=1e-12)
