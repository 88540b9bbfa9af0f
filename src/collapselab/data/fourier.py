r"""A 2-D Fourier low-pass filter for images (paper 002 Fig. 1: projections onto the top
PCs look like low-pass filtered images).

An ``H x W`` image ``x`` has the 2-D DFT :math:`\hat x_{k l} = \sum_{m,n} x_{mn}
e^{-2\pi i (k m / H + l n / W)}`. Bin ``(k, l)`` has the signed integer frequencies
``(κ_1, κ_2)`` of :func:`numpy.fft.fftfreq` times the size (cycles per image; ``-H/2`` for
the Nyquist row of an even ``H``) and radius ``κ_1² + κ_2²``. :func:`lowpass_mask` keeps
the smallest centred disc of bins that holds at least ``n`` of them. The disc is symmetric
under ``κ → −κ``, so the filtered image is real, and it is the orthogonal projection onto a
subspace of exactly ``mask.sum()`` real dimensions: each kept conjugate pair of bins holds
two real coefficients, each self-conjugate bin (the mean, a Nyquist bin) one. Whole rings of
equal radius are kept, so the count may exceed ``n`` (``n = 20`` on any image of at least
5 x 5 pixels keeps 21: the mean, the rings of radius² 1, 2 and 4, and the 8 bins of radius²
5).
"""

from __future__ import annotations

import numpy as np

from collapselab.checks import as_real_array, check_int

__all__ = ["fourier_lowpass", "lowpass_mask"]


def lowpass_mask(height: int, width: int, n_coefficients: int) -> np.ndarray:
    """Boolean ``(height, width)`` mask in :func:`numpy.fft.fft2`'s bin order: the smallest
    centred disc of frequencies holding at least ``n_coefficients`` bins (module
    docstring)."""
    height = check_int("height", height, minimum=1)
    width = check_int("width", width, minimum=1)
    n = check_int("n_coefficients", n_coefficients, minimum=1)
    if n > height * width:
        raise ValueError(
            f"n_coefficients must be at most height * width = {height * width} (the image's "
            f"pixels), got {n}"
        )
    rows = np.fft.fftfreq(height) * height
    cols = np.fft.fftfreq(width) * width
    radius = rows[:, None] ** 2 + cols[None, :] ** 2
    cutoff = np.sort(radius, axis=None)[n - 1]  # the n-th smallest radius: its whole ring
    return radius <= cutoff


def fourier_lowpass(images: object, n_coefficients: int) -> np.ndarray:
    """Every ``H x W`` image of ``images`` ``(..., H, W)`` (a tensor or array) low-pass
    filtered: ``ifft2(fft2(x) * lowpass_mask(H, W, n_coefficients))``, float64, real (the
    imaginary part is rounding only and dropped)."""
    x = as_real_array("images", images, layout="(..., H, W)")
    if x.ndim < 2:
        raise ValueError(f"images must have at least 2 axes (..., H, W), got shape {x.shape}")
    mask = lowpass_mask(x.shape[-2], x.shape[-1], n_coefficients)
    return np.fft.ifft2(np.fft.fft2(x) * mask).real
