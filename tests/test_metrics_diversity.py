"""Feature-diversity cosines (paper 000, M2-M4, gating) against O(N^2) brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from collapselab.metrics.diversity import (
    feature_cosine_similarity,
    gating_similarity,
    gradient_cosine_similarity,
    mean_cosine_similarity,
    mean_gating_similarity,
    pseudo_neuron_similarity,
    pseudo_neuron_similarity_per_sample,
    weight_change_from_factors,
)
from collapselab.stats import CosineSimilarityAccumulator, GatingSimilarityAccumulator

TOL = 1e-12


def _cos(a: np.ndarray, b: np.ndarray, rule: str) -> float | None:
    """Cosine of two vectors; None when the pair is excluded."""
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return None if rule == "exclude" else 0.0
    return float(a @ b / (na * nb))


def _brute(x: np.ndarray, y: np.ndarray, n_classes: int, rule: str, sim=None) -> dict:
    """Explicit loops over all ordered pairs i != j."""
    sim = sim or (lambda a, b: _cos(a, b, rule))
    within = [[] for _ in range(n_classes)]
    cross, everything = [], []
    for i in range(len(x)):
        for j in range(len(x)):
            if i == j:
                continue
            s = sim(x[i], x[j])
            if s is None:
                continue
            everything.append(s)
            (within[y[i]] if y[i] == y[j] else cross).append(s)
    per_class = np.array([np.mean(w) if w else np.nan for w in within])
    pooled = [s for w in within for s in w]
    return {
        "cross": np.mean(cross) if cross else np.nan,
        "all": np.mean(everything) if everything else np.nan,
        "per_class": per_class,
        "within": np.nanmean(per_class) if np.isfinite(per_class).any() else np.nan,
        "pooled": np.mean(pooled) if pooled else np.nan,
    }


def _data(seed: int = 0, n: int = 60, d: int = 7, c: int = 4, n_zero: int = 6):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) + 0.5  # a common offset so cosines are not all ~0
    y = rng.integers(0, c, size=n)
    x[rng.choice(n, size=n_zero, replace=False)] = 0.0
    return x, y


def _assert_matches(res, ref) -> None:
    assert res.cross_class == pytest.approx(ref["cross"], abs=TOL)
    assert res.all_pairs == pytest.approx(ref["all"], abs=TOL)
    assert res.within_class == pytest.approx(ref["within"], abs=TOL)
    assert res.within_class_pooled == pytest.approx(ref["pooled"], abs=TOL)
    np.testing.assert_allclose(res.per_class, ref["per_class"], atol=TOL, equal_nan=True)


@pytest.mark.parametrize("rule", ["exclude", "zero_cosine"])
def test_feature_cosine_matches_brute_force(rule):
    x, y = _data(seed=1)
    res = feature_cosine_similarity(x, y, n_classes=4, zero_vectors=rule)
    _assert_matches(res, _brute(x, y, 4, rule))
    n_zero = int((np.linalg.norm(x, axis=1) == 0).sum())
    assert res.n_zero == n_zero == 6
    assert res.n_excluded == (n_zero if rule == "exclude" else 0)
    nonzero = np.linalg.norm(x, axis=1) > 0
    expected_counts = np.bincount(y[nonzero] if rule == "exclude" else y, minlength=4)
    np.testing.assert_array_equal(res.counts, expected_counts)


def test_zero_rules_differ_and_exclusion_equals_dropping_rows():
    x, y = _data(seed=2)
    keep = np.linalg.norm(x, axis=1) > 0
    excl = feature_cosine_similarity(x, y, 4, "exclude")
    dropped = feature_cosine_similarity(x[keep], y[keep], 4, "exclude")
    assert excl.cross_class == pytest.approx(dropped.cross_class, abs=TOL)
    assert dropped.n_zero == 0
    zero = feature_cosine_similarity(x, y, 4, "zero_cosine")
    # zero vectors add pairs with cosine 0: the sums agree, the pair counts differ
    n_all, n_kept = len(x), int(keep.sum())
    assert zero.all_pairs * n_all * (n_all - 1) == pytest.approx(
        excl.all_pairs * n_kept * (n_kept - 1), abs=1e-9
    )


def test_zero_atol_treats_tiny_vectors_as_zero():
    x, y = _data(seed=3, n_zero=0)
    x[5] = 1e-9
    res = feature_cosine_similarity(x, y, 4, zero_atol=1e-6)
    x2 = x.copy()
    x2[5] = 0.0
    _assert_matches(res, _brute(x2, y, 4, "exclude"))
    assert res.n_zero == 1


def test_identical_features_within_class_give_one():
    rng = np.random.default_rng(4)
    protos = np.eye(5)[:3] * np.array([[2.0], [1.0], [0.5]])  # orthogonal class directions
    y = np.repeat(np.arange(3), 7)
    scale = rng.uniform(0.5, 3.0, size=(len(y), 1))  # positive rescaling keeps cos = 1
    res = feature_cosine_similarity(protos[y] * scale, y)
    np.testing.assert_allclose(res.per_class, 1.0, atol=TOL)
    assert res.within_class == pytest.approx(1.0, abs=TOL)
    assert res.cross_class == pytest.approx(0.0, abs=TOL)
    # 3 classes of 7: 3*7*6 within pairs of cos 1 out of 21*20
    assert res.all_pairs == pytest.approx(3 * 7 * 6 / (21 * 20), abs=TOL)


def test_degenerate_pair_sets_are_nan():
    x = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    y = np.array([0, 0, 1])
    res = feature_cosine_similarity(x, y)
    assert math.isnan(res.per_class[1])  # a class with one sample has no pairs
    assert res.within_class == pytest.approx(res.per_class[0], abs=TOL)
    one_class = feature_cosine_similarity(x, np.zeros(3, dtype=np.int64))
    assert math.isnan(one_class.cross_class)
    all_zero = np.zeros((4, 3))
    lab = np.array([0, 0, 1, 1])
    assert math.isnan(feature_cosine_similarity(all_zero, lab).all_pairs)
    assert feature_cosine_similarity(all_zero, lab, zero_vectors="zero_cosine").all_pairs == 0.0


def test_streaming_and_merge_match_one_shot():
    x, y = _data(seed=5)
    ref = feature_cosine_similarity(x, y, 4)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    a, b = CosineSimilarityAccumulator(4), CosineSimilarityAccumulator(4)
    for k, idx in enumerate(np.array_split(order, [5, 6, 23, 40])):
        (a if k % 2 else b).update(torch.tensor(x[idx], dtype=torch.float64), torch.tensor(y[idx]))
    res = mean_cosine_similarity(a.merge(b))
    _assert_matches(res, _brute(x, y, 4, "exclude"))
    assert res.cross_class == pytest.approx(ref.cross_class, abs=1e-14)
    assert res.n_zero == ref.n_zero
    # merging into an empty accumulator copies
    c = CosineSimilarityAccumulator(4).merge(a)
    assert mean_cosine_similarity(c).all_pairs == pytest.approx(ref.all_pairs, abs=1e-14)


def test_float32_torch_input_accumulates_in_float64():
    x, y = _data(seed=6)
    x32 = x.astype(np.float32)
    res = feature_cosine_similarity(torch.from_numpy(x32), torch.from_numpy(y))
    _assert_matches(res, _brute(x32.astype(np.float64), y, 4, "exclude"))


def test_gradient_cosine_per_class_and_average():
    x, y = _data(seed=7, n_zero=3)
    res = gradient_cosine_similarity(x, y, 4)
    ref = _brute(x, y, 4, "exclude")
    np.testing.assert_allclose(res.per_class, ref["per_class"], atol=TOL)
    assert res.within_class == pytest.approx(np.mean(ref["per_class"]), abs=TOL)


def _agree(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a == b))


@pytest.mark.parametrize("measure", ["cosine", "agreement"])
def test_gating_similarity_matches_brute_force(measure):
    rng = np.random.default_rng(8)
    gates = (rng.random((50, 9)) < 0.35).astype(np.float64)
    gates[[3, 17]] = 0.0  # samples with every unit off
    y = rng.integers(0, 3, size=50)
    res = gating_similarity(gates.astype(bool), y, 3, measure=measure)
    sim = None if measure == "cosine" else _agree
    _assert_matches(res, _brute(gates, y, 3, "exclude", sim))
    if measure == "cosine":
        assert res.n_zero == int((gates.sum(axis=1) == 0).sum()) >= 2


def test_gating_streaming_matches_one_shot():
    rng = np.random.default_rng(9)
    gates = rng.random((40, 6)) < 0.5
    y = rng.integers(0, 3, size=40)
    a, b = GatingSimilarityAccumulator(3), GatingSimilarityAccumulator(3)
    a.update(gates[:13], y[:13])
    b.update(gates[13:], y[13:])
    a.merge(b)
    for measure in ("cosine", "agreement"):
        one = gating_similarity(gates, y, 3, measure=measure)
        got = mean_gating_similarity(a, measure).cross_class
        assert got == pytest.approx(one.cross_class, abs=1e-14)


def test_gating_agreement_fixture():
    gates = np.array([[1, 0, 1, 0], [1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 1, 1]], dtype=np.float64)
    y = np.array([0, 0, 1, 1])
    res = gating_similarity(gates, y, measure="agreement")
    assert res.per_class[0] == 1.0  # identical patterns
    assert res.per_class[1] == pytest.approx(0.5)  # two units of four agree
    # cross pairs: (s0,s2) 0, (s0,s3) 0.5, (s1,s2) 0, (s1,s3) 0.5
    assert res.cross_class == pytest.approx(0.25)


def _columns_brute(dw: np.ndarray, rule: str) -> float:
    cols = dw.T
    vals = [
        s
        for i in range(len(cols))
        for j in range(len(cols))
        if i != j and (s := _cos(cols[i], cols[j], rule)) is not None
    ]
    return float(np.mean(vals)) if vals else float("nan")


@pytest.mark.parametrize("rule", ["exclude", "zero_cosine"])
def test_pseudo_neuron_similarity_matches_brute_force(rule):
    rng = np.random.default_rng(10)
    dw = rng.normal(size=(8, 30)) + 0.3
    dw[:, [2, 11]] = 0.0  # dead input units
    assert pseudo_neuron_similarity(dw, rule) == pytest.approx(_columns_brute(dw, rule), abs=TOL)


def test_weight_change_from_factors_is_the_sum_of_outer_products():
    rng = np.random.default_rng(11)
    g, f = rng.normal(size=(12, 5)), rng.normal(size=(12, 7))
    explicit = sum(-0.1 * np.outer(g[i], f[i]) for i in range(12))
    got = weight_change_from_factors(g, f, lr=0.1, reduction="sum").numpy()
    np.testing.assert_allclose(got, explicit, atol=1e-14)
    mean = weight_change_from_factors(g, f, lr=0.1).numpy()
    np.testing.assert_allclose(mean, explicit / 12, atol=1e-14)
    # the aggregated change is not rank one, so its M4 is informative (not +-1)
    m4 = pseudo_neuron_similarity(mean)
    assert m4 == pytest.approx(_columns_brute(mean, "exclude"), abs=TOL)
    assert abs(m4) < 0.9


@pytest.mark.parametrize("rule", ["exclude", "zero_cosine"])
def test_pseudo_neuron_per_sample_matches_explicit_rank_one_changes(rule):
    rng = np.random.default_rng(12)
    n, h, d = 9, 4, 6
    g, f = rng.normal(size=(n, h)), rng.normal(size=(n, d))
    f[rng.random((n, d)) < 0.3] = 0.0  # dead inputs: zero columns
    g[4] = 0.0  # a sample with zero gradient: every column is zero
    vals = []
    for i in range(n):
        v = _columns_brute(-0.1 * np.outer(g[i], f[i]), rule)
        if not math.isnan(v):
            vals.append(v)
    got = pseudo_neuron_similarity_per_sample(g, f, rule)
    assert got == pytest.approx(np.mean(vals), abs=TOL)


def test_pseudo_neuron_per_sample_is_degenerate_for_relu_inputs():
    rng = np.random.default_rng(13)
    f = np.maximum(rng.normal(size=(10, 8)), 0.0)  # post-ReLU layer inputs
    g = rng.normal(size=(10, 5))
    assert pseudo_neuron_similarity_per_sample(g, f) == pytest.approx(1.0, abs=TOL)


def test_bad_inputs_raise_clear_errors():
    x, y = _data(seed=14)
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="features contains NaN"):
        feature_cosine_similarity(bad, y)
    with pytest.raises(ValueError, match="one label per row"):
        feature_cosine_similarity(x, y[:-1])
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 2\)"):
        feature_cosine_similarity(x, y, n_classes=2)
    with pytest.raises(TypeError, match="integer dtype"):
        feature_cosine_similarity(x, y.astype(np.float64))
    with pytest.raises(ValueError, match="features must be 2-D"):
        feature_cosine_similarity(x[0], y[:1])
    with pytest.raises(TypeError, match=r"torch\.Tensor or numpy\.ndarray"):
        feature_cosine_similarity(x.tolist(), y)
    with pytest.raises(ValueError, match="zero_vectors must be one of"):
        feature_cosine_similarity(x, y, zero_vectors="ignore")
    with pytest.raises(ValueError, match="zero_atol"):
        CosineSimilarityAccumulator(3, zero_atol=-1.0)
    acc = CosineSimilarityAccumulator(4).update(x, y)
    with pytest.raises(ValueError, match="dimension 3 but earlier batches had 7"):
        acc.update(x[:, :3], y)
    with pytest.raises(ValueError, match="different n_classes"):
        acc.merge(CosineSimilarityAccumulator(5))
    with pytest.raises(ValueError, match="empty"):
        mean_cosine_similarity(CosineSimilarityAccumulator(2))
    with pytest.raises(ValueError, match="only 0 and 1"):
        gating_similarity(x, y)
    with pytest.raises(ValueError, match="measure must be"):
        gating_similarity(x > 0, y, measure="hamming")
    with pytest.raises(ValueError, match="inputs has 3 rows but pre_grads has 4"):
        pseudo_neuron_similarity_per_sample(np.ones((4, 2)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="reduction must be"):
        weight_change_from_factors(np.ones((4, 2)), np.ones((4, 3)), reduction="max")


def test_linear_in_n_no_pairwise_matrix():
    # 200k samples: an N x N Gram would need 320 GB; the sum identity needs O(N*D)
    rng = np.random.default_rng(15)
    y = rng.integers(0, 3, size=200_000)
    x = np.eye(3)[y] + 0.01 * rng.normal(size=(200_000, 3))
    res = feature_cosine_similarity(torch.from_numpy(x), torch.from_numpy(y))
    assert res.within_class == pytest.approx(1.0, abs=1e-3)
    assert res.cross_class == pytest.approx(0.0, abs=1e-3)


def test_inputs_requiring_grad_are_detached():
    x, y = _data(seed=16)
    t = torch.tensor(x, requires_grad=True)
    res = feature_cosine_similarity(t, torch.tensor(y))
    assert res.cross_class == pytest.approx(_brute(x, y, 4, "exclude")["cross"], abs=TOL)
