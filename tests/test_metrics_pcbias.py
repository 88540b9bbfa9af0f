"""Paper 002's PC-bias metrics (collapselab.metrics.pcbias) against independent float64
references: explicit loops over the definitions, scipy.stats for correlations and p-values,
an explicit O(n^2) k-NN, and exact hand-made fixtures. Fixed seeds; tolerances stated."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from collapselab.checks import ArgumentTypeError
from collapselab.data.frequency import PAPER_KAPPA, PAPER_PHI, frequency_dataset
from collapselab.metrics import pcbias as pcm
from collapselab.theory import pcbias as theory

TOL = 1e-12


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------------------
# R22: per-PC distance, ensemble std, binning


def test_pc_distance_matches_loops_column_and_row():
    rng = _rng(1)
    w = rng.normal(size=(3, 4, 2, 5))  # (E, N, K, q)
    opt = rng.normal(size=(2, 5))
    col = pcm.pc_distance(w, opt)
    row = pcm.pc_distance(w, opt, row=1)
    for e in range(3):
        for j in range(5):
            ref_col = np.mean(
                [
                    math.sqrt(sum((w[e, i, k, j] - opt[k, j]) ** 2 for k in range(2)))
                    for i in range(4)
                ]
            )
            ref_row = np.mean([abs(w[e, i, 1, j] - opt[1, j]) for i in range(4)])
            assert col[e, j] == pytest.approx(ref_col, abs=TOL)
            assert row[e, j] == pytest.approx(ref_row, abs=TOL)


def test_pc_ensemble_std_matches_loops():
    rng = _rng(2)
    w = rng.normal(size=(2, 5, 3, 4))
    col = pcm.pc_ensemble_std(w)
    row = pcm.pc_ensemble_std(w, row=2)
    for e in range(2):
        for j in range(4):
            per_k = []
            for k in range(3):
                vals = [w[e, i, k, j] for i in range(5)]
                m = sum(vals) / 5
                per_k.append(sum((v - m) ** 2 for v in vals) / 4)
            assert col[e, j] == pytest.approx(math.sqrt(sum(per_k)), abs=TOL)
            assert row[e, j] == pytest.approx(math.sqrt(per_k[2]), abs=TOL)


def test_distance_and_std_follow_the_closed_form_decay():
    # Under Eq. 10 (corrected) every column's deviation decays exactly by |lambda_j|^s.
    rng = _rng(3)
    x = rng.normal(size=(60, 6)) * np.geomspace(3, 0.3, 6)
    y = np.eye(2)[rng.integers(0, 2, 60)]
    frame = theory.principal_frame(x, y)
    w0 = rng.normal(size=(4, 2, 6))
    mu, c, steps = 0.3 / frame.eigenvalues[0], 1.0, np.array([0, 3, 10])
    traj = theory.closed_form_columns(frame, w0, mu, c, steps)  # (S, N, K, q)
    decay = theory.pc_decay(frame.eigenvalues, mu, c, steps)  # (S, q)
    opt = frame.optimum()
    dist = pcm.pc_distance(traj, opt)
    std = pcm.pc_ensemble_std(traj)
    np.testing.assert_allclose(dist, decay * dist[:1], rtol=1e-9)
    np.testing.assert_allclose(std, decay * std[:1], rtol=1e-9)
    pred = theory.predicted_ensemble_std(frame, w0, mu, c, steps)  # (S, K, q), entrywise
    np.testing.assert_allclose(pcm.pc_ensemble_std(traj, row=0), pred[:, 0], rtol=1e-9)


def test_pc_std_needs_an_ensemble_and_shapes_are_checked():
    with pytest.raises(ValueError, match="ensemble of N >= 2"):
        pcm.pc_ensemble_std(np.zeros((3, 1, 2, 4)))
    with pytest.raises(ValueError, match=r"compact_pc.*\(E, N, K, q\)"):
        pcm.pc_distance(np.zeros((3, 2, 4)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="optimum has 5"):
        pcm.pc_distance(np.zeros((1, 1, 2, 4)), np.zeros((2, 5)))
    with pytest.raises(ValueError, match="row"):
        pcm.pc_distance(np.zeros((1, 1, 2, 4)), np.zeros((2, 4)), row=2)


def test_bin_pc_index_loops_and_edges():
    rng = _rng(4)
    v = rng.normal(size=(3, 10))
    binned, edges = pcm.bin_pc_index(v, 3)
    assert edges.tolist() == [0, 3, 7, 10]
    for b in range(3):
        for e in range(3):
            ref = sum(v[e, j] for j in range(edges[b], edges[b + 1])) / (edges[b + 1] - edges[b])
            assert binned[e, b] == pytest.approx(ref, abs=TOL)
    geo, _ = pcm.bin_pc_index(v, [0, 1, 2, 4, 10])
    np.testing.assert_allclose(geo[:, 3], v[:, 4:].mean(1), atol=TOL)
    with pytest.raises(ValueError, match="from 0 to q = 10"):
        pcm.bin_pc_index(v, [0, 5, 9])
    with pytest.raises(ValueError, match="bins"):
        pcm.bin_pc_index(v, 11)


# ---------------------------------------------------------------------------------------
# R23: gradient-scale statistics


def test_scale_statistics_exact_fixture():
    m = np.array([[2.0, 0.5, -1.0], [0.5, 1.0, 0.0], [-1.0, 0.0, 3.0]])
    s = pcm.scale_matrix_statistics(m, 1.5)
    dev = np.array([0.5, 0.5, 1.5])
    off = np.array([0.5, -1.0, 0.5, 0.0, -1.0, 0.0])
    assert s["diagonal_mean"] == pytest.approx(dev.mean())
    assert s["diagonal_std"] == pytest.approx(dev.std())
    assert s["offdiagonal_mean"] == pytest.approx(off.mean())
    assert s["offdiagonal_std"] == pytest.approx(off.std())
    assert s["offdiagonal_abs_mean"] == pytest.approx(np.abs(off).mean())
    t = pcm.scale_matrix_statistics(m, "trace")
    assert t["reference"] == pytest.approx(2.0)
    assert t["diagonal_mean"] == pytest.approx((0 + 1 + 1) / 3)
    raw = pcm.scale_matrix_statistics(m)
    assert raw["diagonal_mean"] == pytest.approx(2.0) and math.isnan(raw["reference"])


def test_gradient_scale_statistics_per_layer_loops():
    rng = _rng(5)
    widths = [6, 20, 20, 3]
    ws = [rng.normal(size=(widths[i + 1], widths[i])) / math.sqrt(widths[i]) for i in range(3)]
    a, b = theory.gradient_scale_matrices(ws)
    alpha, beta = theory.expected_scales(widths, "def3")
    sa = pcm.gradient_scale_statistics(a, alpha)
    sb = pcm.gradient_scale_statistics(b, beta)
    for layer in range(3):
        for mats, scales, st in ((a, alpha, sa), (b, beta, sb)):
            m = mats[layer]
            dim = m.shape[0]
            dev = [abs(m[i, i] - scales[layer]) for i in range(dim)]
            off = [m[i, j] for i in range(dim) for j in range(dim) if i != j]
            assert st.diagonal_mean[layer] == pytest.approx(np.mean(dev), abs=TOL)
            assert st.diagonal_std[layer] == pytest.approx(np.std(dev), abs=TOL)
            assert st.offdiagonal_mean[layer] == pytest.approx(np.mean(off), abs=TOL)
            assert st.offdiagonal_std[layer] == pytest.approx(np.std(off), abs=TOL)
    # A_L = I_K and B_1 = I_q exactly: no deviation from a unit reference, no off-diagonal
    assert sb.diagonal_mean[0] == pytest.approx(abs(1 - beta[0]))
    assert sa.offdiagonal_abs_mean[-1] == 0.0
    with pytest.raises(ValueError, match="reference has 2 scales but matrices has 3"):
        pcm.gradient_scale_statistics(a, [1.0, 1.0])
    with pytest.raises(ValueError, match=r"matrices\[1\].*square"):
        pcm.gradient_scale_statistics([np.eye(2), np.zeros((2, 3))])


# ---------------------------------------------------------------------------------------
# R24-R25: accessibility and LOC


def test_accessibility_hand_fixture_and_loops():
    correct = np.array(
        [[[1, 0, 1], [1, 1, 0]], [[0, 0, 1], [1, 1, 1]]], dtype=bool
    )  # (N=2, E=2, n=3)
    np.testing.assert_allclose(pcm.accessibility(correct), [0.75, 0.5, 0.75])
    rng = _rng(6)
    c = rng.integers(0, 2, (3, 4, 7))
    acc = pcm.accessibility(c)
    for x in range(7):
        ref = sum(c[i, e, x] for i in range(3) for e in range(4)) / 12
        assert acc[x] == pytest.approx(ref, abs=TOL)
    assert ((acc >= 0) & (acc <= 1)).all()
    with pytest.raises(ValueError, match="0/1"):
        pcm.accessibility(np.full((1, 1, 2), 0.5))
    with pytest.raises(ValueError, match=r"correct.*\(N, E, n\)"):
        pcm.accessibility(np.zeros((2, 3)))


def test_correlation_matches_scipy_and_handles_constants():
    rng = _rng(7)
    a, b = rng.normal(size=40), rng.normal(size=40)
    b = b + 0.5 * a
    c = pcm.correlation(a, b)
    p, s = stats.pearsonr(a, b), stats.spearmanr(a, b)
    assert (c.pearson, c.pearson_p) == pytest.approx((p.statistic, p.pvalue), abs=1e-12)
    assert (c.spearman, c.spearman_p) == pytest.approx((s.statistic, s.pvalue), abs=1e-12)
    assert c.n == 40
    const = pcm.correlation(np.ones(5), np.arange(5.0))
    assert math.isnan(const.pearson) and math.isnan(const.spearman_p)
    with pytest.raises(ValueError, match="b has 4 entries but a has 5"):
        pcm.correlation(np.zeros(5), np.zeros(4))


def test_fastest_subset_tie_rules():
    acc = np.array([1.0, 0.2, 1.0, 0.9, 1.0, 0.1, 0.5, 0.5, 0.3, 0.0])
    # k = ceil(0.2 * 10) = 2: three examples tie at 1.0, the two lowest indices are kept
    assert pcm.fastest_subset(acc, fraction=0.2).tolist() == [0, 2]
    assert pcm.fastest_subset(acc, fraction=0.2, ties="include").tolist() == [0, 2, 4]
    # two ensembles rank by the mean
    other = np.array([0.0, 0.2, 1.0, 0.9, 0.0, 0.1, 0.5, 0.5, 0.3, 1.0])
    assert pcm.fastest_subset(acc, other, 0.2).tolist() == [2, 3]
    # brute force: the k best by (score desc, index asc)
    rng = _rng(8)
    s = rng.integers(0, 5, 50) / 4.0
    k = math.ceil(0.3 * 50)
    ref = sorted(sorted(range(50), key=lambda i: (-s[i], i))[:k])
    assert pcm.fastest_subset(s, fraction=0.3).tolist() == ref
    best = min(range(50), key=lambda i: (-s[i], i))
    assert pcm.fastest_subset(s, fraction=1e-6).tolist() == [best]  # at least one
    with pytest.raises(ValueError, match="fraction"):
        pcm.fastest_subset(s, fraction=0.0)
    with pytest.raises(ValueError, match="accessibility_b has 3 entries"):
        pcm.fastest_subset(s, np.zeros(3))


def test_loc_correlation_on_subset_matches_scipy():
    rng = _rng(9)
    a = rng.random(60)
    b = np.clip(a + 0.2 * rng.normal(size=60), 0, 1)
    keep = sorted(sorted(range(60), key=lambda i: (-(a[i] + b[i]) / 2, i))[:12])
    got = pcm.loc_correlation(a, b, fraction=0.2, rank_by="mean")
    assert got.n == 12
    assert got.pearson == pytest.approx(stats.pearsonr(a[keep], b[keep]).statistic, abs=1e-12)
    assert got.spearman_p == pytest.approx(stats.spearmanr(a[keep], b[keep]).pvalue, abs=1e-12)
    full = pcm.loc_correlation(a, b)
    assert full.pearson == pytest.approx(stats.pearsonr(a, b).statistic, abs=1e-12)
    by_a = sorted(sorted(range(60), key=lambda i: (-a[i], i))[:12])  # the default rank
    first = pcm.loc_correlation(a, b, fraction=0.2)
    assert first.pearson == pytest.approx(stats.pearsonr(a[by_a], b[by_a]).statistic, abs=1e-12)
    with pytest.raises(ValueError, match="rank_by"):
        pcm.loc_correlation(a, b, fraction=0.2, rank_by="b")


def test_loc_fastest_subset_ranked_by_the_mean_is_biased_down():
    # Two independent ensembles (true LOC 0): ranking the fastest 20% by their mean selects
    # on a + b, which makes a and b negatively correlated inside the subset (Berkson); ranking
    # by the first ensemble alone does not. n = 20,000, subset 4,000: the standard error of a
    # correlation there is about 1/sqrt(4000) = 0.016.
    rng = _rng(10)
    a, b = rng.random(20_000), rng.random(20_000)
    assert pcm.loc_correlation(a, b, fraction=0.2, rank_by="mean").pearson < -0.3
    assert abs(pcm.loc_correlation(a, b, fraction=0.2).pearson) < 0.05


# ---------------------------------------------------------------------------------------
# R26-R27: critical principal component and critical frequency


def _reference_cpc(x, y, k, grid, rule, center):
    """Explicit loops: PCs by SVD, LS classifier by the normal equations' pseudo-inverse,
    each example projected and classified for every P in the grid."""
    n, q = x.shape
    mean = x.mean(0) if center else np.zeros(q)
    xc = x - mean
    u = np.linalg.svd(xc, full_matrices=False)[2].T  # right singular vectors, descending
    onehot = np.eye(k)[y]
    target = onehot - onehot.mean(0) if center else onehot
    w = target.T @ xc @ np.linalg.pinv(xc.T @ xc)
    b = onehot.mean(0) - w @ mean if center else np.zeros(k)
    out = []
    for i in range(n):
        ok = []
        for p in grid:
            up = u[:, :p]
            proj = mean + up @ (up.T @ (x[i] - mean))
            ok.append(int(np.argmax(w @ proj + b)) == y[i])
        if rule == "first":
            hits = [p for p, o in zip(grid, ok, strict=True) if o]
            out.append(hits[0] if hits else q + 1)
        else:
            val = q + 1
            for pos in range(len(grid) - 1, -1, -1):
                if not ok[pos]:
                    break
                val = grid[pos]
            out.append(val)
    return np.array(out)


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("rule", ["all_above", "first"])
def test_critical_pc_matches_explicit_projection(rule, center):
    rng = _rng(10)
    q, k, n = 8, 3, 60
    scales = np.geomspace(4.0, 0.2, q)
    y = rng.integers(0, k, n)
    x = rng.normal(size=(n, q)) * scales + rng.normal(size=(k, q))[y] * scales
    got = pcm.critical_principal_component(x, y, k, rule=rule, center=center, block=50)
    ref = _reference_cpc(x, y, k, list(range(1, q + 1)), rule, center)
    np.testing.assert_array_equal(got, ref)
    grid = [2, 5, 8]
    got_g = pcm.critical_principal_component(x, y, k, grid=grid, rule=rule, center=center)
    np.testing.assert_array_equal(got_g, _reference_cpc(x, y, k, grid, rule, center))
    assert set(got_g.tolist()) <= {2, 5, 8, q + 1}


def test_critical_pc_exact_fixture_and_monotone_rule():
    # q = 2, X^T X = diag(400, 4): the PCs are the axes. With the classifier
    # W = [[0.05, -1], [0, 1]] the scores at P = 1 are (0.05 x_1, 0) and at P = 2
    # (0.05 x_1 - x_2, x_2); no ties anywhere, so every value below is exact.
    x = np.array([[10.0, 1.0], [-10.0, 1.0], [10.0, -1.0], [-10.0, -1.0]])
    y = np.array([1, 1, 0, 0])
    right = (np.array([[0.05, -1.0], [0.0, 1.0]]), None)
    # per example, correct at (P=1, P=2): (no, yes) (yes, yes) (yes, yes) (no, yes)
    for rule in ("all_above", "first"):
        got = pcm.critical_principal_component(x, y, 2, classifier=right, rule=rule)
        assert got.tolist() == [2, 1, 1, 2]
    # the opposite classifier is wrong on the full data: the sentinel q + 1 = 3, except
    # that the "first" rule counts a correct P = 1 (examples 0 and 3)
    wrong = (-right[0], np.zeros(2))
    assert pcm.critical_principal_component(x, y, 2, classifier=wrong).tolist() == [3] * 4
    first = pcm.critical_principal_component(x, y, 2, classifier=wrong, rule="first")
    assert first.tolist() == [1, 3, 3, 1]
    # "all_above" is never below "first"
    rng = _rng(11)
    xr, yr = rng.normal(size=(40, 6)), rng.integers(0, 2, 40)
    first = pcm.critical_principal_component(xr, yr, rule="first")
    above = pcm.critical_principal_component(xr, yr)
    assert (above >= first).all()


def test_critical_pc_bad_input():
    x, y = np.zeros((5, 3)), np.zeros(5, dtype=int)
    with pytest.raises(ValueError, match=r"P = 4 principal components .* dimension q = 3"):
        pcm.critical_principal_component(x, y, grid=[1, 4])
    with pytest.raises(ValueError, match="y has 4 entries but x has 5"):
        pcm.critical_principal_component(x, y[:4])
    with pytest.raises(ValueError, match="rule"):
        pcm.critical_principal_component(x + np.eye(5, 3), y, rule="last")


def _reference_critical_frequency(x, y, kappa, phi, rule):
    out = []
    m = len(kappa)
    for (x1, x2), label in zip(x, y, strict=True):
        ok = []
        for j in range(1, m + 1):
            lam = sum(math.sin(2 * math.pi * kappa[i] * x1 + phi[i]) for i in range(j))
            ok.append(int(x2 <= lam) == label)
        if rule == "first":
            out.append(next((j + 1 for j, o in enumerate(ok) if o), m + 1))
        else:
            val = m + 1
            for j in range(m - 1, -1, -1):
                if not ok[j]:
                    break
                val = j + 1
            out.append(val)
    return np.array(out)


@pytest.mark.parametrize("rule", ["all_above", "first"])
def test_critical_frequency_matches_loops(rule):
    data = frequency_dataset(300, 0, seed=3).train
    x, y = data.x.double().numpy(), data.y.numpy()
    got = pcm.critical_frequency(x, y, rule=rule)
    np.testing.assert_array_equal(
        got, _reference_critical_frequency(x, y, PAPER_KAPPA, PAPER_PHI, rule)
    )
    assert got.max() <= 10  # the full sum classifies the dataset's own labels exactly
    # the first term is sin(0) = 0: a point is critical at j = 1 iff 1[x2 <= 0] == y and stays
    below = (x[:, 1] <= 0).astype(int) == y
    assert ((got == 1) <= below).all()


def test_critical_frequency_fixture_and_bad_input():
    kappa, phi = [0.0, 1.0], [math.pi / 2, 0.0]  # lambda_1 = 1, lambda_2 = 1 + sin(2 pi z)
    x = np.array([[0.25, 1.5], [0.25, 0.5], [0.75, 0.5], [0.75, -0.5]])
    y = np.array([1, 1, 0, 1])
    # z=0.25: lambda_2 = 2; z=0.75: lambda_2 = 0. Point 3 (0.75, 0.5): lambda_1 says 1, full 0.
    assert pcm.critical_frequency(x, y, kappa, phi).tolist() == [2, 1, 2, 1]
    assert pcm.critical_frequency(x, 1 - y, kappa, phi).tolist() == [3, 3, 3, 3]
    with pytest.raises(ValueError, match="y has 3 entries but x has 4"):
        pcm.critical_frequency(x, y[:3], kappa, phi)
    with pytest.raises(ValueError, match=r"x must have shape \(\*, 2\)"):
        pcm.critical_frequency(np.zeros((4, 3)), y)


# ---------------------------------------------------------------------------------------
# R28: discriminability


def _reference_knn(f, y, k, ref=None, ref_y=None):
    out = []
    self_excluded = ref is None
    ref = f if ref is None else ref
    ref_y = y if ref_y is None else ref_y
    for i in range(len(f)):
        dists = []
        for j in range(len(ref)):
            if self_excluded and i == j:
                continue
            dists.append((float(np.sum((f[i] - ref[j]) ** 2)), j))
        dists.sort()
        out.append(sum(ref_y[j] == y[i] for _, j in dists[:k]) / k)
    return np.array(out)


def test_discriminability_matches_explicit_knn():
    rng = _rng(12)
    f = rng.normal(size=(40, 5))
    y = rng.integers(0, 3, 40)
    np.testing.assert_allclose(pcm.discriminability(f, y, k=4, block=37), _reference_knn(f, y, 4))
    ref, ref_y = rng.normal(size=(25, 5)), rng.integers(0, 3, 25)
    np.testing.assert_allclose(
        pcm.discriminability(f, y, k=3, reference=(ref, ref_y)),
        _reference_knn(f, y, 3, ref, ref_y),
    )
    # an ensemble of embeddings: the mean over networks
    emb = rng.normal(size=(3, 40, 2))
    np.testing.assert_allclose(
        pcm.discriminability(emb, y, k=2),
        np.mean([_reference_knn(e, y, 2) for e in emb], axis=0),
    )


def test_discriminability_many_ties_on_an_integer_grid():
    # small integer coordinates: squared distances are exact and ties are everywhere, so the
    # tie rule (lower index first) decides many neighbours
    rng = _rng(14)
    f = rng.integers(0, 3, (60, 2)).astype(float)
    y = rng.integers(0, 2, 60)
    for k in (1, 3, 7):
        np.testing.assert_array_equal(
            pcm.discriminability(f, y, k=k, block=200), _reference_knn(f, y, k)
        )


def test_discriminability_exact_fixture_with_ties():
    # points on a line at 0, 1, 2, 3; 1's neighbours at distance 1 are 0 and 2 (a tie), k=1
    # takes the lower index 0
    f = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([0, 1, 1, 1])
    assert pcm.discriminability(f, y, k=1).tolist() == [0.0, 0.0, 1.0, 1.0]
    assert pcm.discriminability(f, y, k=2).tolist() == [0.0, 0.5, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"k = 4 neighbours .* only 3"):
        pcm.discriminability(f, y, k=4)
    with pytest.raises(ValueError, match="labels has 3 entries but features has 4"):
        pcm.discriminability(f, y[:3])


# ---------------------------------------------------------------------------------------
# R29: binned correlation


def test_binned_correlation_loops():
    rng = _rng(13)
    score = rng.integers(1, 9, 200)
    value = -0.05 * score + 0.1 * rng.normal(size=200)
    got = pcm.binned_correlation(score, value, width=3)
    levels = sorted(set(score.tolist()))
    assert got.scores.tolist() == levels
    means, sems = [], []
    for s in levels:
        v = [value[i] for i in range(200) if score[i] == s]
        m = sum(v) / len(v)
        means.append(m)
        sems.append(math.sqrt(sum((t - m) ** 2 for t in v) / (len(v) - 1)) / math.sqrt(len(v)))
    np.testing.assert_allclose(got.means, means, atol=TOL)
    np.testing.assert_allclose(got.sems, sems, atol=TOL)
    smooth = [np.mean(means[max(0, i - 1) : i + 2]) for i in range(len(means))]
    np.testing.assert_allclose(got.smoothed, smooth, atol=TOL)
    ref = stats.pearsonr(levels, smooth)
    assert got.correlation.pearson == pytest.approx(ref.statistic, abs=1e-12)
    assert got.correlation.pearson_p == pytest.approx(ref.pvalue, abs=1e-12)
    assert got.correlation.pearson < -0.9


def test_moving_average_even_width():
    # width 4: window [i - 1, i + 2], truncated
    v = np.arange(6.0)
    ref = [np.mean(v[max(0, i - 1) : i + 3]) for i in range(6)]
    np.testing.assert_allclose(pcm.moving_average(v, 4), ref)
    np.testing.assert_allclose(pcm.moving_average(v, 1), v)


# ---------------------------------------------------------------------------------------
def test_accessibility_weights_repeat_checkpoints():
    """Weighted accessibility equals the plain mean over the epochs with checkpoint ``e``
    repeated ``w_e`` times (the paper's mean over every epoch on a sparse grid)."""
    rng = _rng(16)
    c = rng.integers(0, 2, (3, 5, 11)).astype(bool)
    w = np.array([1, 1, 2, 5, 13])
    dense = np.repeat(c, w, axis=1)  # (3, 22, 11): every epoch spelled out
    ref = np.array([dense[:, :, x].sum() / dense[:, :, x].size for x in range(11)])
    np.testing.assert_allclose(pcm.accessibility(c, w), ref, atol=TOL)
    np.testing.assert_allclose(pcm.accessibility(c, np.ones(5)), pcm.accessibility(c), atol=TOL)
    with pytest.raises(ValueError, match="weights"):
        pcm.accessibility(c, [1, 1, -1, 1, 1])
    with pytest.raises(ValueError, match="weights"):
        pcm.accessibility(c, np.zeros(5))
    with pytest.raises(ValueError, match="weights"):
        pcm.accessibility(c, np.ones(4))


def test_checkpoint_weights_hold_until_the_next():
    np.testing.assert_array_equal(pcm.checkpoint_weights([1, 2, 5, 9], 12), [1, 3, 4, 3])
    steps = np.array([1, 3, 4, 8])
    # brute force: the checkpoint in force at every step 1..11 (the latest one not after it)
    held = [steps[steps <= s].max() for s in range(1, 12)]
    np.testing.assert_array_equal(pcm.checkpoint_weights(steps, 12), [held.count(k) for k in steps])
    with pytest.raises(ValueError, match="increasing"):
        pcm.checkpoint_weights([1, 1, 2], 5)
    with pytest.raises(ValueError, match="end"):
        pcm.checkpoint_weights([1, 2, 5], 5)


# R30: early stopping and convergence speed


def test_early_stopping_benefit_and_convergence_epoch():
    assert pcm.early_stopping_benefit([0.5, 0.8, 0.8, 0.6]) == (pytest.approx(0.2), 1)
    assert pcm.early_stopping_benefit(np.array([0.1, 0.2, 0.3])) == (0.0, 2)
    curves = np.array([[0.1, 0.5, 0.9, 0.95], [0.1, 0.2, 0.3, 0.4]])
    got = pcm.convergence_epoch(curves, 0.9)
    assert got[0] == 2.0 and math.isnan(got[1])
    loss = np.array([3.0, 1.0, 0.5, 0.1])
    assert pcm.convergence_epoch(loss, 0.5, "below", epochs=[0, 10, 20, 40]) == 20.0
    with pytest.raises(ValueError, match="epochs"):
        pcm.convergence_epoch(loss, 0.5, "below", epochs=[0, 1])
    with pytest.raises(ValueError, match="direction"):
        pcm.convergence_epoch(loss, 0.5, "down")
    with pytest.raises(ArgumentTypeError, match="accuracy"):
        pcm.early_stopping_benefit("high")


def test_convergence_epoch_interpolates_between_checkpoints():
    """The interpolated crossing against the exact one of a piecewise-linear curve, found by
    brute force on a fine grid of np.interp (independent of the formula)."""
    rng = _rng(17)
    steps = np.array([0.0, 1, 2, 4, 8, 16, 32, 64])
    curves = np.sort(rng.uniform(0, 1, (6, steps.size)), axis=1)
    fine = np.linspace(0, 64, 640001)
    for curve in curves:
        for t in (0.3, 0.55, float(curve[3])):
            dense = np.interp(fine, steps, curve)
            ref = fine[np.argmax(dense >= t)] if (dense >= t).any() else np.nan
            got = pcm.convergence_epoch(curve, t, epochs=steps, interpolate=True)
            if np.isnan(ref):
                assert np.isnan(got)
            else:
                assert got == pytest.approx(ref, abs=2e-4)
    # two curves crossing between the same checkpoints: the grid ties them, interpolation not
    pair = np.array([[0.0, 0.5, 0.7], [0.0, 0.5, 0.9]])
    assert list(pcm.convergence_epoch(pair, 0.6, epochs=[0, 100, 200])) == [200.0, 200.0]
    np.testing.assert_allclose(
        pcm.convergence_epoch(pair, 0.6, epochs=[0, 100, 200], interpolate=True), [150.0, 125.0]
    )
    # a loss falling through the level, and a curve already there at the first entry
    assert pcm.convergence_epoch([3.0, 1.0, 0.2], 0.6, "below", [0, 10, 20], True) == 15.0
    assert pcm.convergence_epoch([0.9, 0.95], 0.5, epochs=[5, 9], interpolate=True) == 5.0
