"""The shared argument checks of ``collapselab.checks``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from collapselab.checks import (
    ArgumentTypeError,
    as_real_array,
    as_real_tensor,
    as_tensor,
    check_bool,
    check_choice,
    check_finite,
    check_float,
    check_int,
    check_labels,
    check_ndim,
    check_probability,
    check_real,
    check_seed,
    check_shape,
)


def test_argument_type_error_is_both_type_and_value_error():
    with pytest.raises(TypeError):
        check_int("n", 1.5)
    with pytest.raises(ValueError):
        check_int("n", 1.5)
    assert issubclass(ArgumentTypeError, TypeError)
    assert issubclass(ArgumentTypeError, ValueError)


def test_check_int_accepts_python_and_numpy_integers():
    assert check_int("n", 3) == 3
    out = check_int("n", np.int64(7), minimum=0)
    assert out == 7
    assert type(out) is int
    assert check_int("n", np.uint8(2), minimum=2, maximum=2) == 2
    assert check_int("n", -4) == -4


@pytest.mark.parametrize("bad", [True, 2.0, "3", None, np.float64(1.0), torch.tensor(1)])
def test_check_int_rejects_non_integers(bad):
    with pytest.raises(ArgumentTypeError, match=r"^depth must be an integer >= 1, got "):
        check_int("depth", bad, minimum=1)


def test_check_int_bounds_name_the_argument_and_range():
    with pytest.raises(ValueError, match=r"^depth must be an integer >= 1, got 0$"):
        check_int("depth", 0, minimum=1)
    with pytest.raises(ValueError, match=r"^k must be an integer in \[1, 4\], got 5$"):
        check_int("k", 5, minimum=1, maximum=4)
    with pytest.raises(ValueError, match=r"^k must be an integer <= 4, got 5$"):
        check_int("k", 5, maximum=4)
    assert check_int("k", 4, minimum=1, maximum=4) == 4


def test_check_float_types_and_conversion():
    for value in (2, 2.0, np.float32(2.0), np.int64(2)):
        out = check_float("lr", value)
        assert out == 2.0
        assert type(out) is float
    for bad in (True, "1.0", None, torch.tensor(1.0), [1.0]):
        with pytest.raises(ArgumentTypeError, match=r"^lr must be a finite number"):
            check_float("lr", bad)


def test_check_float_bounds():
    assert check_float("lam", 0.0, minimum=0.0) == 0.0
    with pytest.raises(ValueError, match=r"^lam must be a finite number >= 0, got -0\.1$"):
        check_float("lam", -0.1, minimum=0.0)
    with pytest.raises(ValueError, match=r"^lr must be a finite number > 0, got 0\.0$"):
        check_float("lr", 0.0, minimum=0.0, strict=True)
    assert check_float("lr", 1e-300, minimum=0.0, strict=True) == 1e-300
    with pytest.raises(ValueError, match=r"^f must be a finite number in \[0, 1\], got 1\.5$"):
        check_float("f", 1.5, minimum=0.0, maximum=1.0)
    with pytest.raises(ValueError, match=r"^f must be a finite number in \(0, 1\], got 0$"):
        check_float("f", 0, minimum=0.0, maximum=1.0, strict=True)
    assert check_float("f", 1.0, minimum=0.0, maximum=1.0, strict=True) == 1.0
    with pytest.raises(ValueError, match=r"^g must be a finite number >= 0\.5, got 0\.25$"):
        check_float("g", 0.25, minimum=0.5)


def test_check_float_finiteness():
    for bad in (math.inf, -math.inf, math.nan):
        with pytest.raises(ValueError, match="x must be a finite number"):
            check_float("x", bad)
    assert check_float("x", math.inf, finite=False) == math.inf
    with pytest.raises(ValueError, match=r"^x must be a number >= 0, got nan$"):
        check_float("x", math.nan, minimum=0.0, finite=False)
    with pytest.raises(ValueError, match=r"^x must be a number >= 0, got -inf$"):
        check_float("x", -math.inf, minimum=0.0, finite=False)


def test_check_probability():
    assert check_probability("p", 1) == 1.0
    assert check_probability("p", 0.0, allow_one=False) == 0.0
    with pytest.raises(ValueError, match=r"^p must be a probability in \[0, 1\), got 1\.0$"):
        check_probability("p", 1.0, allow_one=False)
    with pytest.raises(ValueError, match=r"^p must be a probability in \[0, 1\], got -0\.5$"):
        check_probability("p", -0.5)
    with pytest.raises(ArgumentTypeError, match="p must be a finite number"):
        check_probability("p", "0.5")


def test_check_bool_choice_and_seed():
    assert check_bool("bias", False) is False
    for bad in (0, 1, "True", np.bool_(True)):
        with pytest.raises(ArgumentTypeError, match=r"^bias must be a bool, got "):
            check_bool("bias", bad)
    out = check_choice("mode", np.str_("dense"), ("auto", "dense"))
    assert out == "dense"
    assert type(out) is str
    for bad in ("Dense", 1, None, ["dense"], np.array(["dense"])):
        with pytest.raises(ValueError, match=r"^mode must be one of \('auto', 'dense'\), got "):
            check_choice("mode", bad, ["auto", "dense"])
    assert check_seed("seed", np.int32(0)) == 0
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got -1$"):
        check_seed("seed", -1)


def test_as_tensor_shares_memory_and_moves():
    a = np.arange(6.0).reshape(2, 3)
    t = as_tensor("x", a)
    t[0, 0] = 100.0
    assert a[0, 0] == 100.0
    w = torch.ones(3, requires_grad=True)
    assert as_tensor("w", w) is w
    assert not as_tensor("w", w, detach=True).requires_grad
    assert as_tensor("w", w, device="cpu").device.type == "cpu"
    with pytest.raises(ArgumentTypeError, match=r"^x must be a torch\.Tensor or numpy\.ndarray"):
        as_tensor("x", [1.0, 2.0])


def test_shape_ndim_real_and_finite_checks():
    x = torch.zeros(2, 3)
    check_ndim("x", x, 2)
    with pytest.raises(ValueError, match=r"^x must be 1-D \(N,\), got shape \(2, 3\)$"):
        check_ndim("x", x, 1, "(N,)")
    check_shape("x", np.zeros((2, 3)), (None, 3))
    with pytest.raises(ValueError, match=r"^x must have shape \(\*, 4\), got \(2, 3\)$"):
        check_shape("x", x, (None, 4))
    with pytest.raises(ValueError, match=r"^b must have shape \(3,\), got \(2, 3\)$"):
        check_shape("b", x, (3,))
    for bad in (torch.zeros(2, dtype=torch.complex64), torch.zeros(2, dtype=torch.bool)):
        with pytest.raises(ArgumentTypeError, match="x must hold real numbers, got dtype"):
            check_real("x", bad)
    check_real("x", torch.zeros(2, dtype=torch.bool), allow_bool=True)
    check_real("x", np.zeros(2, dtype=np.uint8))
    with pytest.raises(ArgumentTypeError, match="dtype object"):
        check_real("x", np.array([1, "a"], dtype=object))
    check_finite("x", torch.tensor([1, 2]))  # integers are always finite
    y = torch.zeros(3, 4)
    y[1, 2], y[2, 0] = math.nan, -math.inf
    with pytest.raises(ValueError, match=r"^y contains NaN or Inf \(2 of 12 entries\); expected"):
        check_finite("y", y)
    with pytest.raises(ValueError, match=r"\(1 of 2 entries\)"):
        check_finite("z", np.array([1.0, np.inf]))


def test_as_real_tensor():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = as_real_tensor("h", a, ndim=2)
    assert t.dtype == torch.float32
    assert np.shares_memory(t.numpy(), a)  # no copy when the dtype is kept
    t64 = as_real_tensor("h", a, ndim=2, dtype=torch.float64)
    torch.testing.assert_close(t64, torch.from_numpy(a.astype(np.float64)), rtol=0, atol=0)
    g = as_real_tensor("g", torch.tensor([True, False]), allow_bool=True, dtype=torch.float64)
    torch.testing.assert_close(g, torch.tensor([1.0, 0.0], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^h must be 2-D \(N, D\), got shape \(3,\)$"):
        as_real_tensor("h", torch.zeros(3), ndim=2, layout="(N, D)")
    with pytest.raises(ArgumentTypeError, match="h must hold real numbers"):
        as_real_tensor("h", torch.zeros(2, 2, dtype=torch.complex128))
    with pytest.raises(ValueError, match=r"h contains NaN or Inf \(1 of 2 entries\)"):
        as_real_tensor("h", np.array([0.0, np.nan]))


def test_as_real_array():
    a = np.arange(6).reshape(2, 3)
    out = as_real_array("X", a, shape=(2, None))
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, a)
    f = np.ones((2, 2))
    assert not np.shares_memory(as_real_array("X", f), f)  # always a copy
    t = torch.ones(2, 2, requires_grad=True)
    np.testing.assert_array_equal(as_real_array("X", t, ndim=2), np.ones((2, 2)))
    np.testing.assert_array_equal(as_real_array("t", [0.0, 1], numbers=True), [0.0, 1.0])
    assert as_real_array("t", 2, numbers=True).shape == ()
    np.testing.assert_array_equal(
        as_real_array("g", np.array([True, False]), allow_bool=True), [1.0, 0.0]
    )
    with pytest.raises(ArgumentTypeError, match=r"^X must be a torch\.Tensor or numpy\.ndarray"):
        as_real_array("X", [1.0])
    with pytest.raises(ArgumentTypeError, match="t must be a number or a sequence of numbers"):
        as_real_array("t", ["a"], numbers=True)
    with pytest.raises(ArgumentTypeError, match=", a number or a sequence of numbers, got bool"):
        as_real_array("t", True, numbers=True)
    with pytest.raises(ArgumentTypeError, match="X must hold real numbers, got dtype bool"):
        as_real_array("X", np.array([True]))
    with pytest.raises(ValueError, match=r"^X must have shape \(2, 2\), got \(2, 3\)$"):
        as_real_array("X", a, shape=(2, 2))
    with pytest.raises(ValueError, match="X contains NaN or Inf"):
        as_real_array("X", np.array([[np.inf]]))


def test_check_labels():
    y = check_labels("labels", np.array([0, 2, 1], dtype=np.int32), 3, 3)
    assert y.dtype == torch.int64
    assert y.tolist() == [0, 2, 1]
    assert check_labels("labels", torch.tensor([5, 0]), 2, None).tolist() == [5, 0]
    assert check_labels("labels", torch.zeros(0, dtype=torch.long), 0, 4).numel() == 0
    with pytest.raises(ValueError, match=r"^labels must lie in \[0, 3\) for n_classes=3, got "):
        check_labels("labels", torch.tensor([0, 3]), 2, 3)
    with pytest.raises(ValueError, match=r"got range \[-1, 1\]$"):
        check_labels("labels", torch.tensor([-1, 1]), 2, 3)
    with pytest.raises(ValueError, match=r"^labels must be class indices >= 0, got minimum -2$"):
        check_labels("labels", torch.tensor([-2, 1]), 2, None)
    with pytest.raises(ArgumentTypeError, match=r"^y must be integers \(an integer dtype\)"):
        check_labels("y", torch.tensor([0.0, 1.0]), 2, 2)
    with pytest.raises(ArgumentTypeError, match=r"got dtype torch\.bool"):
        check_labels("y", torch.tensor([True]), 1, 2)
    with pytest.raises(ValueError, match=r"^labels must be 1-D \(n_samples,\), got shape \(2, 1\)"):
        check_labels("labels", torch.zeros(2, 1, dtype=torch.long), 2, 2)
    with pytest.raises(
        ValueError,
        match=r"^labels has 2 entries but features has 3 rows; expected one label per row$",
    ):
        check_labels("labels", torch.tensor([0, 1]), 3, 2)
    with pytest.raises(ValueError, match=r"labels has 2 entries but X has 3 columns; .* column"):
        check_labels("labels", torch.tensor([0, 1]), 3, 2, source="X", unit="column")
    with pytest.raises(ValueError, match=r"^n_classes must be an integer >= 1, got 0$"):
        check_labels("labels", torch.tensor([0]), 1, 0)
    with pytest.raises(ArgumentTypeError, match=r"^labels must be a torch\.Tensor"):
        check_labels("labels", [0, 1], 2, 2)


def test_check_finite_counts_in_blocks_and_passes_an_overflowing_sum(monkeypatch):
    import collapselab.checks as checks

    monkeypatch.setattr(checks, "_COUNT_BLOCK", 8)  # several blocks for the count below
    x = torch.zeros(9, 5, dtype=torch.float64)
    x[0, 0], x[4, 3], x[8, 4] = math.nan, math.inf, -math.inf  # inf - inf: the sum is NaN
    with pytest.raises(ValueError, match=r"^x contains NaN or Inf \(3 of 45 entries\)"):
        check_finite("x", x)
    with pytest.raises(ValueError, match=r"\(1 of 1 entries\)"):
        check_finite("s", torch.tensor(math.nan))
    # Finite entries whose float32 sum overflows to inf: no bad entry, so it passes.
    big = torch.full((4, 3), 3e38, dtype=torch.float32)
    assert not torch.isfinite(big.sum())
    check_finite("big", big)
    check_finite("t", torch.ones(7, 3)[:, ::2])  # non-contiguous
