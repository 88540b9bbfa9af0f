"""Features of any finite magnitude, and inputs that are not data: scale-invariant metrics
keep their values from 2^-1000 to 2^1000 (and at 1e-200, 1e200), the rest fail clearly."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch import nn

import collapselab
from collapselab.data import gaussian_mixture
from collapselab.data.dataset import LabeledData
from collapselab.metrics import equinorm, etf_distance, orthogonal_frame_distance, self_duality
from collapselab.track import Monitor


@pytest.fixture(scope="module")
def problem():
    d = gaussian_mixture(n_classes=4, dim=8, n_train_per_class=30, n_test_per_class=10, seed=0)
    g = torch.Generator().manual_seed(0)
    W = torch.randn(4, 8, dtype=torch.float64, generator=g)
    b = torch.randn(4, dtype=torch.float64, generator=g)
    return d.train.x.double(), d.train.y, d.test.x.double(), d.test.y, W, b


@pytest.mark.parametrize("exponent", [-1000, -700, -500, -300, 300, 500, 700, 1000])
def test_every_nc_key_is_the_same_at_any_power_of_two_scale(problem, exponent):
    x, y, xt, yt, W, b = problem
    base = collapselab.measure(x, y, W, b, test_features=xt, test_labels=yt)
    s = math.ldexp(1.0, exponent)
    got = collapselab.measure(x * s, y, W, b * s, test_features=xt * s, test_labels=yt)
    assert got.keys() == base.keys()
    for key, value in base.items():
        # A power of two is exact: with the statistics rescaled back, bit for bit equal
        # but for the keys computed from rescaled geometry (1 ulp).
        assert math.isclose(got[key], value, rel_tol=1e-14, abs_tol=1e-15), (key, got[key], value)


@pytest.mark.parametrize("scale", [1e-200, 1e-120, 1e120, 1e200])
def test_decimal_scales_agree_to_rounding(problem, scale):
    x, y, *_ = problem
    base = collapselab.measure(x, y)
    got = collapselab.measure(x * scale, y)
    for key, value in base.items():
        assert math.isclose(got[key], value, rel_tol=1e-12), (key, got[key], value)


def test_subnormal_features_measure_as_their_exact_rescaling(problem):
    """Features below float64's smallest normal number are rescaled by 2^1023 (the largest
    power of two) rather than overflowing: the keys are those of the same features scaled
    up exactly."""
    x, y, *_ = problem
    tiny = x.double() * 2.0**-530 * 2.0**-530
    assert 0 < float(tiny.abs().max()) < 2.0**-1022
    exact = tiny * 2.0**530 * 2.0**530
    base = collapselab.measure(exact, y)
    got = collapselab.measure(tiny, y)
    for key, value in base.items():
        assert math.isclose(got[key], value, rel_tol=1e-12), (key, got[key], value)


def test_geometry_functions_are_scale_invariant_at_extreme_magnitudes():
    m = torch.randn(5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    w = torch.randn(5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for s in (1e-300, 1e-200, 1e200, 1e300):
        assert etf_distance(m * s) == pytest.approx(etf_distance(m), rel=1e-14)
        assert orthogonal_frame_distance(m * s) == pytest.approx(
            orthogonal_frame_distance(m), rel=1e-14
        )
        assert equinorm(m * s) == pytest.approx(equinorm(m), rel=1e-13)
        assert self_duality(w, m * s) == pytest.approx(self_duality(w, m), rel=1e-13)


def test_geometry_functions_take_subnormal_rows():
    """Rows below float64's smallest normal number (2^-1022; a deep UFM beyond its
    regularisation threshold descends to them) are rescaled by 2^1060 in two exact steps,
    not one that overflows: the values are those of the exactly rescaled rows."""
    m = torch.randn(5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    w = torch.randn(5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    tiny = m * 2.0**-530 * 2.0**-530  # subnormal: about 14 significant bits survive
    assert 0 < float(tiny.abs().max()) < 2.0**-1022
    exact = tiny * 2.0**530 * 2.0**530  # the same rows, scaled back without rounding
    assert etf_distance(tiny) == pytest.approx(etf_distance(exact), rel=1e-14)
    assert orthogonal_frame_distance(tiny) == pytest.approx(
        orthogonal_frame_distance(exact), rel=1e-14
    )
    assert equinorm(tiny) == pytest.approx(equinorm(exact), rel=1e-13)
    assert self_duality(w, tiny) == pytest.approx(self_duality(w, exact), rel=1e-13)
    smallest = torch.zeros(3, 2, dtype=torch.float64)
    smallest[0, 0], smallest[1, 1] = 2.0**-1074, -(2.0**-1074)  # the smallest subnormal
    assert equinorm(smallest) == pytest.approx(equinorm(smallest * 2.0**537 * 2.0**537))


def test_the_mse_family_names_the_overflow(problem):
    x, y, _, _, W, b = problem
    with pytest.raises(ValueError, match=r"magnitude .* depend on the features' scale \(mse_"):
        collapselab.measure(x * 1e200, y, W, b, lam=1e-3)
    with pytest.raises(ValueError, match=r"magnitude .* \(mse_loss"):
        collapselab.measure(x * 1e-200, y, W, b, keys=["mse_loss"], lam=1e-3)

    # The NC keys of the same call would be fine: only the MSE family is scale dependent.
    assert collapselab.measure(x * 1e200, y, W, b * 1e200)["nc1"] > 0


class _Scaled(nn.Module):
    """A network whose hidden features have magnitude ``scale``."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.hidden = nn.Linear(8, 6)
        self.scale = scale
        self.classifier = nn.Linear(6, 4)

    def forward(self, x):
        h = self.hidden(x) * self.scale
        return self.classifier(h / self.scale)


def test_the_monitor_measures_features_of_extreme_magnitude(problem):
    x, y, *_ = problem
    data = LabeledData(x, y, 4)
    results = {}
    for scale in (1.0, 1e-200, 1e200):
        torch.manual_seed(0)
        model = _Scaled(scale).double()
        monitor = Monitor(model, data, layers=["hidden"], families=["nc"], schedule=None)
        results[scale] = monitor.measure_now()["train"]["hidden"]
    for scale in (1e-200, 1e200):
        for key, value in results[1.0].items():
            assert math.isclose(results[scale][key], value, rel_tol=1e-12), (scale, key)


def test_inputs_that_are_not_data_get_clear_errors(problem):
    x, y, _, _, W, b = problem
    with pytest.raises(TypeError, match="features is a tensor on the 'meta' device"):
        collapselab.measure(torch.empty(10, 3, device="meta"), torch.arange(10) % 2)
    # A classifier that requires grad is read without autograd: no torch warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collapselab.measure(x, y, W.requires_grad_(), b.requires_grad_(), lam=1e-3)
    W.requires_grad_(False), b.requires_grad_(False)
    # Float labels: the same error from the Monitor as from measure.
    float_labels = [(x, y.double())]
    with pytest.raises(TypeError, match="labels must be integers"):
        collapselab.measure(x, y.double())
    model = _Scaled(1.0).double()
    with pytest.raises(TypeError, match="labels must be integers"):
        Monitor(
            model, float_labels, layers=["hidden"], families=["nc"], schedule=None
        ).measure_now()
