"""``metrics.matrix_metrics`` is ``measure(..., mode="dense")`` bit for bit, without the engine.

The theory layer measures its solvers' points with it (it sits below
``collapselab.families``); these tests hold it to the engine's values exactly, key order
included, on every path the engine takes: classifier or not, ``lam`` or not, a subset of
keys, imbalanced classes, several row blocks, float32 input, features rescaled by a power of
two, a singular within-class covariance.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from collapselab import measure
from collapselab.families import MSE, NC
from collapselab.metrics.matrix import MSE_KEYS, matrix_metrics
from collapselab.metrics.nc import NC_KEYS

DNC_KEYS = [
    "nc1",
    "nc2_orthogonal_frame",
    "nc2_etf_distance",
    "nc2_equinorm_means",
    "nc2_equiangle_means",
    "nc2_maxangle_means",
]


def _problem(n_per_class: int, dim: int, c: int, seed: int, counts: list[int] | None = None):
    rng = np.random.default_rng(seed)
    counts = counts or [n_per_class] * c
    labels = np.concatenate([np.full(k, i) for i, k in enumerate(counts)])
    means = rng.normal(size=(c, dim)) * 2.0
    features = means[labels] + rng.normal(size=(len(labels), dim))
    W = rng.normal(size=(c, dim))
    b = rng.normal(size=c)
    return features, labels, W, b


def _same(a: dict[str, float], b: dict[str, float]) -> None:
    """Equal keys in equal order, equal floats (bit for bit; NaN equal to NaN)."""
    assert list(a) == list(b)
    for key in a:
        x, y = a[key], b[key]
        assert (math.isnan(x) and math.isnan(y)) or x == y, (key, x, y)


@pytest.mark.parametrize("classifier", [False, True])
@pytest.mark.parametrize("lam", [None, 0.0, 5e-3])
def test_equal_to_measure_dense(classifier: bool, lam: float | None) -> None:
    h, y, W, b = _problem(12, 6, 4, seed=1)
    w_b = (W, b) if classifier else (None, None)
    _same(matrix_metrics(h, y, *w_b, lam), measure(h, y, *w_b, lam, mode="dense"))


def test_equal_for_a_subset_of_keys_and_for_the_dlufm_keys() -> None:
    h, y, W, b = _problem(10, 5, 3, seed=2)
    _same(matrix_metrics(h, y, keys=DNC_KEYS), measure(h, y, keys=DNC_KEYS, mode="dense"))
    keys = ["accuracy", "nc3_self_duality", "mse_ls_perp", "ncc_accuracy", "nc1"]
    _same(
        matrix_metrics(h, y, W, b, 1e-3, keys=keys),
        measure(h, y, W, b, 1e-3, keys=keys, mode="dense"),
    )


def test_equal_over_several_row_blocks_and_in_float32() -> None:
    # D = 512: 1024 rows per block, so 2,500 rows make three blocks
    h, y, W, b = _problem(625, 512, 4, seed=3)
    _same(matrix_metrics(h, y, W, b, 0.0), measure(h, y, W, b, 0.0, mode="dense"))
    h32 = torch.as_tensor(h[:, :16], dtype=torch.float32)
    _same(matrix_metrics(h32, y, W[:, :16], b), measure(h32, y, W[:, :16], b, mode="dense"))


def test_equal_with_imbalanced_classes_and_one_warning_each() -> None:
    h, y, W, b = _problem(0, 4, 3, seed=4, counts=[5, 9, 7])
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        a = matrix_metrics(h, y, W, b, 1e-2)
    with warnings.catch_warnings(record=True) as engine:
        warnings.simplefilter("always")
        e = measure(h, y, W, b, 1e-2, mode="dense")
    _same(a, e)
    assert [str(w.message) for w in ours] == [str(w.message) for w in engine]
    assert len(ours) == 1


def test_equal_with_a_singular_within_class_covariance() -> None:
    h, y, W, b = _problem(3, 10, 3, seed=5)  # N - C = 6 < D = 10: no nc1_snr
    a = matrix_metrics(h, y, W, b, 0.1)
    assert "nc1_snr" not in a
    _same(a, measure(h, y, W, b, 0.1, mode="dense"))


@pytest.mark.parametrize("magnitude", [1e-300, 1e-200, 1e250])
def test_equal_for_features_rescaled_by_a_power_of_two(magnitude: float) -> None:
    h, y, W, b = _problem(8, 4, 3, seed=6)
    tiny = h * magnitude
    _same(matrix_metrics(tiny, y, W, b), measure(tiny, y, W, b, mode="dense"))
    _same(matrix_metrics(tiny, y, keys=DNC_KEYS), measure(tiny, y, keys=DNC_KEYS, mode="dense"))
    with pytest.raises(ValueError, match="magnitude"):
        measure(tiny, y, W, b, 0.0, mode="dense")
    with pytest.raises(ValueError, match="magnitude"):
        matrix_metrics(tiny, y, W, b, 0.0)


def test_errors_as_the_engine() -> None:
    h, y, W, b = _problem(4, 3, 3, seed=7)
    for bad in (
        lambda f: f(h, y, None, b),  # b without W
        lambda f: f(h, y, W[:2], b),  # W of the wrong shape
        lambda f: f(h[:, :1] * 0.0, y),  # zero between-class scatter
        lambda f: f(h[:9], y[:9]),  # a class with one sample
        lambda f: f(h, y, W, b, -1.0),  # lam < 0
    ):
        with pytest.raises(ValueError):
            bad(matrix_metrics)
        with pytest.raises(ValueError):
            bad(lambda *a: measure(*a, mode="dense"))
    with pytest.raises(ValueError, match="need lam"):
        matrix_metrics(h, y, keys=["mse_ls_loss"])


def test_key_tables_follow_the_families() -> None:
    assert tuple(k.name for k in NC.keys) == NC_KEYS
    assert tuple(k.name for k in MSE.keys) == MSE_KEYS
