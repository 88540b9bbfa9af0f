"""The 2-D Fourier low-pass of paper 002's Fig. 1 (collapselab.data.fourier) against an
explicit DFT by loops, its mask against a hand count, and its projector property."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.data import fourier_lowpass, lowpass_mask


def _signed(k: int, n: int) -> int:
    """The signed frequency of DFT bin ``k`` of ``n`` (numpy's fftfreq order)."""
    return k if k < (n + 1) // 2 else k - n


def _mask_by_hand(h: int, w: int, radius2: float) -> np.ndarray:
    mask = np.zeros((h, w), dtype=bool)
    for k in range(h):
        for m in range(w):
            mask[k, m] = _signed(k, h) ** 2 + _signed(m, w) ** 2 <= radius2
    return mask


def _lowpass_by_loops(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Explicit forward DFT, mask, explicit inverse DFT (complex result)."""
    h, w = x.shape
    spectrum = np.zeros((h, w), dtype=complex)
    for k in range(h):
        for m in range(w):
            for a in range(h):
                for b in range(w):
                    spectrum[k, m] += x[a, b] * np.exp(-2j * np.pi * (k * a / h + m * b / w))
    out = np.zeros((h, w), dtype=complex)
    for a in range(h):
        for b in range(w):
            for k in range(h):
                for m in range(w):
                    if mask[k, m]:
                        out[a, b] += spectrum[k, m] * np.exp(2j * np.pi * (k * a / h + m * b / w))
    return out / (h * w)


@pytest.mark.parametrize(
    ("h", "w", "n", "radius2", "count"),
    [(8, 8, 20, 5, 21), (8, 8, 13, 4, 13), (8, 8, 1, 0, 1), (6, 9, 10, 4, 13), (5, 7, 35, 13, 35)],
)
def test_the_mask_is_the_smallest_disc_holding_n_bins(h, w, n, radius2, count):
    """Bins counted by hand: 20 on 8 x 8 needs radius² 5 (1 + 4 + 4 + 4 + 8 = 21 bins); 13 is
    exactly radius² 4; on 6 x 9, 10 takes the whole ring of radius² 4 (9 bins inside radius²
    2, then 4 more); all 35 bins of 5 x 7 reach radius² 2² + 3² = 13."""
    mask = lowpass_mask(h, w, n)
    np.testing.assert_array_equal(mask, _mask_by_hand(h, w, radius2))
    assert mask.sum() == count


def test_the_lowpass_is_the_explicit_dft_with_the_disc_mask():
    """A random 6 x 8 image and a stack of two 8 x 8 images: the result equals the
    loop-DFT reference to 1e-12, whose imaginary part vanishes (a symmetric mask)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 8))
    reference = _lowpass_by_loops(x, _mask_by_hand(6, 8, 4))  # 10 bins: the ring of 4 (13)
    assert np.abs(reference.imag).max() < 1e-12
    np.testing.assert_allclose(fourier_lowpass(x, 10), reference.real, atol=1e-12)
    stack = rng.normal(size=(2, 1, 8, 8))
    got = fourier_lowpass(torch.from_numpy(stack), 20)
    for i in range(2):
        expected = _lowpass_by_loops(stack[i, 0], _mask_by_hand(8, 8, 5)).real
        np.testing.assert_allclose(got[i, 0], expected, atol=1e-12)


def test_the_lowpass_is_an_orthogonal_projection_onto_mask_sum_dimensions():
    """Applied to the 64 basis images of 8 x 8 the filter is a symmetric idempotent matrix
    of rank 21 for n = 20: it keeps exactly 21 real coefficients."""
    basis = np.eye(64).reshape(64, 8, 8)
    matrix = fourier_lowpass(basis, 20).reshape(64, 64)
    np.testing.assert_allclose(matrix, matrix.T, atol=1e-12)
    np.testing.assert_allclose(matrix @ matrix, matrix, atol=1e-12)
    assert np.linalg.matrix_rank(matrix, tol=1e-9) == 21
    assert np.trace(matrix) == pytest.approx(21.0, abs=1e-9)


def test_bad_arguments_are_refused_with_the_value_and_what_was_expected():
    with pytest.raises(ValueError, match=r"n_coefficients must be at most height \* width = 64"):
        lowpass_mask(8, 8, 65)
    with pytest.raises(ValueError, match="n_coefficients must be an integer >= 1"):
        lowpass_mask(8, 8, 0)
    with pytest.raises(ValueError, match=r"images must have at least 2 axes .* got shape \(5,\)"):
        fourier_lowpass(np.ones(5), 1)
