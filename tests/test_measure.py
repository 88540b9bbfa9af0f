"""collapselab.measure: keys, values against brute force, test splits, bad input, warnings."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import collapselab
from collapselab.families import measure
from tests.test_metrics_mse import brute_mse
from tests.test_metrics_nc import brute_nc

NC_KEYS = {
    "nc1",
    "nc1_trace_ratio",
    "nc1_cdnv",
    "nc1_snr",
    "nc1_dense",
    "nc2_equinorm_means",
    "nc2_equiangle_means",
    "nc2_maxangle_means",
    "nc2_etf_distance",
    "nc2_orthogonal_frame",
    "ncc_accuracy",
}
CLASSIFIER_KEYS = {
    "nc2_equinorm_classifiers",
    "nc2_equiangle_classifiers",
    "nc2_maxangle_classifiers",
    "nc3_self_duality",
    "nc3_self_duality_classwise",
    "nc4_ncc_mismatch",
    "accuracy",
}
MSE_KEYS = {"mse_ls_loss", "mse_nc1_term", "mse_nc23_term"}
MSE_W_KEYS = {"mse_loss", "mse_ls_perp", "mse_ls_perp_ratio", "mse_ls_distance"}


def split(seed, C=3, D=5, per_class=(12, 12, 12)):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(C), per_class)
    centres = rng.normal(scale=2.0, size=(C, D))
    H = centres[y] + rng.normal(size=(len(y), D))
    yt = np.repeat(np.arange(C), 6)
    Ht = centres[yt] + 1.5 * rng.normal(size=(len(yt), D))
    return H, y, Ht, yt, rng.normal(size=(C, D)), rng.normal(size=C)


def test_keys_follow_the_inputs():
    H, y, Ht, yt, W, b = split(0)
    assert set(measure(H, y)) == NC_KEYS
    assert set(measure(H, y, W)) == NC_KEYS | CLASSIFIER_KEYS
    assert set(measure(H, y, lam=0.1)) == NC_KEYS | MSE_KEYS
    full = measure(H, y, W, b, lam=0.1, test_features=Ht, test_labels=yt)
    test_keys = {f"test_{k}" for k in (NC_KEYS | CLASSIFIER_KEYS) - {"nc1_dense"}}
    test_keys -= {f"test_nc2_{s}_classifiers" for s in ("equinorm", "equiangle", "maxangle")}
    assert set(full) == NC_KEYS | CLASSIFIER_KEYS | MSE_KEYS | MSE_W_KEYS | test_keys
    assert all(isinstance(v, float) for v in full.values())
    assert collapselab.measure is measure


def test_values_match_brute_force_with_test_split():
    H, y, Ht, yt, W, b = split(1)
    Ht = Ht + 1.5  # a shift: NCC with the train means now differs from NCC with test means
    got = measure(
        torch.from_numpy(H), torch.from_numpy(y), W, b, 0.05, test_features=Ht, test_labels=yt
    )
    want = brute_nc(H, y, 3, W, b)
    want |= {k: v for k, v in brute_mse(H, y, 3, 0.05, W, b).items() if k.startswith("mse_")}
    for key, value in want.items():
        if not key.startswith("_"):
            assert math.isclose(got[key], value, rel_tol=1e-10, abs_tol=1e-14), key
    test = brute_nc(Ht, yt, 3, W, b)
    for key in ("nc1", "nc1_trace_ratio", "nc2_etf_distance", "accuracy", "nc3_self_duality"):
        assert math.isclose(got[f"test_{key}"], test[key], rel_tol=1e-10), key
    # NCC on test features uses the TRAIN means.
    train_means = want["_mu"]
    ncc = np.array([np.argmin([np.linalg.norm(h - m) for m in train_means]) for h in Ht])
    pred = np.argmax(Ht @ W.T + b, axis=1)
    assert got["test_ncc_accuracy"] == pytest.approx(np.mean(ncc == yt), abs=1e-15)
    assert got["test_nc4_ncc_mismatch"] == pytest.approx(np.mean(ncc != pred), abs=1e-15)
    assert got["test_ncc_accuracy"] != pytest.approx(test["ncc_accuracy"], abs=1e-3)


def test_options_are_passed_through():
    H, y, _, _, W, _ = split(2)
    base = measure(H, y, W)
    assert math.isclose(measure(H, y, nc1_divide_by_c=False)["nc1"], 3 * base["nc1"], rel_tol=1e-14)
    ordered = measure(H, y, W, ddof=0, pairs="ordered")
    want = brute_nc(H, y, 3, W, ddof=0, pairs="ordered")
    for key in ("nc2_equiangle_means", "nc2_equinorm_classifiers", "nc2_equiangle_classifiers"):
        assert math.isclose(ordered[key], want[key], rel_tol=1e-10), key
    proj = measure(H, y, W, mode="projected")
    assert proj["nc1_dense"] == 0.0 and "nc1_snr" not in proj
    assert math.isclose(proj["nc1"], base["nc1"], rel_tol=1e-10)
    assert measure(H, y, dense_max_dim=4)["nc1_dense"] == 0.0


def test_nc1_snr_absent_when_sigma_w_is_singular():
    H, y, *_ = split(3, D=20, per_class=(4, 4, 4))  # N - C = 9 < D
    got = measure(H, y)
    assert "nc1_snr" not in got and got["nc1_dense"] == 1.0


def _measure_recording(*args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = measure(*args, **kwargs)
    return got, caught


def test_default_weighting_on_equal_counts_is_balanced_exactly():
    H, y, Ht, yt, W, b = split(5)
    options = {"test_features": Ht, "test_labels": yt}
    auto, caught = _measure_recording(H, y, W, b, lam=0.1, **options)
    assert not caught
    assert auto == measure(H, y, W, b, lam=0.1, weighting="balanced", **options)
    assert auto == measure(H, y, W, b, lam=0.1, weighting="sample", **options)


def test_default_weighting_on_unequal_counts_is_sample_and_warns_once():
    H, y, Ht, yt, W, b = split(4, per_class=(5, 12, 20))
    options = {"test_features": Ht[:-1], "test_labels": yt[:-1]}  # test counts 6, 6, 5
    got, caught = _measure_recording(H, y, W, b, lam=0.1, **options)
    assert len(caught) == 1 and caught[0].filename == __file__
    message = str(caught[0].message)
    assert "train counts [5, 12, 20]" in message and "test counts [6, 6, 5]" in message
    assert "sample-weighted" in message and "weighting='balanced'" in message
    want = brute_nc(H, y, 3, W, b, weighting="sample")
    mse = brute_mse(H, y, 3, 0.1, W, b, weighting="sample")
    want |= {k: v for k, v in mse.items() if k.startswith("mse_")}
    for key, value in want.items():
        if not key.startswith("_"):
            assert math.isclose(got[key], value, rel_tol=1e-10, abs_tol=1e-14), key
    test = brute_nc(Ht[:-1], yt[:-1], 3, W, b, weighting="sample")
    for key in ("nc1", "nc1_trace_ratio", "nc2_etf_distance", "accuracy", "nc3_self_duality"):
        assert math.isclose(got[f"test_{key}"], test[key], rel_tol=1e-10), key
    sample, caught = _measure_recording(H, y, W, b, lam=0.1, weighting="sample", **options)
    assert sample == got and len(caught) == 1
    assert "'sample'-weighted variants as requested" in str(caught[0].message)


def test_explicit_balanced_weighting_on_unequal_counts_keeps_1_over_c_and_warns():
    H, y, Ht, yt, W, b = split(4, per_class=(5, 12, 20))
    got, caught = _measure_recording(
        H, y, W, b, lam=0.1, weighting="balanced", test_features=Ht[:-1], test_labels=yt[:-1]
    )
    assert len(caught) == 1 and "'balanced'-weighted" in str(caught[0].message)
    assert "train counts [5, 12, 20]" in str(caught[0].message)
    want = brute_nc(H, y, 3, W, b)
    want |= {k: v for k, v in brute_mse(H, y, 3, 0.1, W, b).items() if k.startswith("mse_")}
    for key, value in want.items():
        if not key.startswith("_"):
            assert math.isclose(got[key], value, rel_tol=1e-10, abs_tol=1e-14), key
    auto, _ = _measure_recording(H, y, W, b, lam=0.1, test_features=Ht[:-1], test_labels=yt[:-1])
    assert abs(got["nc1"] - auto["nc1"]) > 1e-3 * got["nc1"]


def _bad_inputs():
    H, y, Ht, yt, W, b = split(6)
    nan = H.copy()
    nan[3, 1] = np.nan
    inf = H.copy()
    inf[0, 0] = np.inf
    lonely = y.copy()
    lonely[lonely == 2] = 1
    lonely[0] = 2
    return [
        ("features", (H[0], y), {}, "features must be 2-D"),
        ("labels shape", (H, y[:-1]), {}, "one label per row"),
        ("labels 2-D", (H, y.reshape(-1, 1)), {}, "labels must be 1-D"),
        ("labels range", (H, y), {"n_classes": 2}, r"labels must lie in \[0, 2\)"),
        ("negative label", (H, np.where(y == 0, -1, y)), {"n_classes": 3}, "must lie in"),
        ("float labels", (H, y.astype(np.float64)), {}, "labels must be integers"),
        ("one class", (H, np.zeros_like(y)), {}, "fewer than two classes"),
        ("one sample", (H, lonely), {}, "class 2: 1"),
        ("nan", (nan, y), {}, r"features contains NaN or Inf \(1 of"),
        ("inf", (inf, y), {}, r"features contains NaN or Inf \(1 of"),
        ("zero between", (np.ones_like(H), y), {}, "zero between-class scatter"),
        ("W rows", (H, y, W[:2]), {}, "W must have shape .*2 rows for 3 classes"),
        ("W cols", (H, y, W[:, :4]), {}, "W must have shape"),
        ("W nan", (H, y, np.full_like(W, np.nan)), {}, "W contains"),
        ("b shape", (H, y, W, b[:2]), {}, "b must have shape"),
        ("b without W", (H, y, None, b), {}, "b was given without W"),
        ("lam", (H, y), {"lam": -0.1}, "lam must be a finite number >= 0"),
        ("lam projected", (H, y), {"lam": 0.1, "mode": "projected"}, "mode='dense'"),
        ("test dim", (H, y), {"test_features": Ht[:, :4], "test_labels": yt}, "test_features"),
        ("test alone", (H, y), {"test_features": Ht}, "together"),
        ("test labels", (H, y), {"test_features": Ht, "test_labels": yt + 1}, "test_labels"),
        ("test counts", (H, y), {"test_features": Ht[:7], "test_labels": yt[:7]}, "test_"),
        ("weighting", (H, y), {"weighting": "uniform"}, "weighting must be one of"),
        ("mode", (H, y), {"mode": "sparse"}, "mode must be one of"),
        ("pairs", (H, y), {"pairs": "all"}, "pairs must be one of"),
        ("ddof", (H, y), {"ddof": -1}, "ddof must be"),
    ]


@pytest.mark.parametrize(("case", "args", "kwargs", "match"), _bad_inputs())
def test_bad_input_raises_a_clear_value_error(case, args, kwargs, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=match):
            measure(*args, **kwargs)


def test_non_array_input_is_a_type_error():
    with pytest.raises(TypeError, match=r"features must be a torch\.Tensor or numpy\.ndarray"):
        measure([[1.0, 2.0]], np.array([0]))


def test_features_and_classifier_that_require_grad_are_measured_as_values():
    """A layer's output taken without ``torch.no_grad`` (and the classifier's own weight)
    require grad; measure gives the values of the detached tensors, bit for bit."""
    torch.manual_seed(0)
    layer, head = torch.nn.Linear(6, 5).double(), torch.nn.Linear(5, 3).double()
    x = torch.randn(30, 6, dtype=torch.float64)
    y = torch.arange(30) % 3
    features = layer(x)
    assert features.requires_grad and head.weight.requires_grad
    got = collapselab.measure(features, y, W=head.weight, b=head.bias)
    want = collapselab.measure(features.detach(), y, W=head.weight.detach(), b=head.bias.detach())
    assert got == want and "nc3_self_duality" in got
