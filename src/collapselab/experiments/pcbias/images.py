r"""Paper 002 Fig. 1 (R32): images projected onto their top ``P`` principal components look
like low-pass filtered images.

A few test images of the experiment's own inputs (standardised as the networks see them)
are shown three ways: as they are, reconstructed from the top ``P`` PCs of the training
inputs (:class:`~collapselab.data.pca.PCAProjection`: ``m + U_P U_Pᵀ (x − m)``, centred
PCs, ``P = 20`` unless the configuration's ``image_pcs`` says otherwise), and low-pass
filtered by a 2-D DFT (:func:`~collapselab.data.fourier.fourier_lowpass`, per channel).
The low-pass keeps at least as many real coefficients per image as the projection keeps
PCs: ``ceil(P / C)`` frequency bins per channel (``C`` channels), rounded up to whole
rings of equal frequency (``P = 20`` on grey images keeps 21).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from collapselab.checks import check_int
from collapselab.data.fourier import fourier_lowpass, lowpass_mask
from collapselab.data.pca import PCAProjection

__all__ = ["IMAGE_PCS", "N_IMAGES", "image_shape", "pca_vs_lowpass"]

IMAGE_PCS = 20
"""The paper's ``P`` (Fig. 1: "the largest 20 PCs")."""

N_IMAGES = 4
"""Images shown: the first test image of each of the first classes."""


def image_shape(n_features: int) -> tuple[int, int, int] | None:
    """``(C, H, W)`` of flattened square images: one channel when ``n_features`` is a
    square, three (channels first) when a third of it is; ``None`` for anything else."""
    n = check_int("n_features", n_features, minimum=1)
    for channels in (1, 3):
        side = math.isqrt(n // channels)
        if n % channels == 0 and side * side * channels == n:
            return channels, side, side
    return None


def _picks(y: np.ndarray, n: int) -> np.ndarray:
    """Index of the first example of each of the ``n`` smallest labels present."""
    return np.array([int(np.flatnonzero(y == label)[0]) for label in np.unique(y)[:n]])


def pca_vs_lowpass(
    x_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, n_pcs: int = IMAGE_PCS
) -> dict[str, np.ndarray] | None:
    """Fig. 1's arrays for flattened images (``None`` when the rows are not images, see
    :func:`image_shape`): ``original``, ``projected``, ``lowpass`` ``(k, C, H, W)``,
    ``indices`` and ``labels`` ``(k,)`` of the test images shown, ``pcs`` the number of PCs
    used (``n_pcs`` clipped to the training rank), ``lowpass_bins`` per channel,
    ``lowpass_coefficients`` (``C`` times that) and ``mask`` ``(H, W)``."""
    shape = image_shape(x_train.shape[1])
    if shape is None:
        return None
    n_pcs = check_int("n_pcs", n_pcs, minimum=1, maximum=x_train.shape[1])
    channels, height, width = shape
    indices = _picks(np.asarray(y_test), N_IMAGES)
    picked = torch.from_numpy(np.asarray(x_test, dtype=np.float64)[indices])
    projection = PCAProjection(n_pcs).fit(torch.from_numpy(np.asarray(x_train, np.float64)))
    bins = math.ceil(projection.n_components_used / channels)
    mask = lowpass_mask(height, width, bins)
    original = picked.numpy().reshape(-1, *shape)
    return {
        "original": original,
        "projected": projection.apply(picked).numpy().reshape(-1, *shape),
        "lowpass": fourier_lowpass(original, bins),
        "indices": indices,
        "labels": np.asarray(y_test)[indices],
        "pcs": np.int64(projection.n_components_used),
        "lowpass_bins": np.int64(mask.sum()),
        "lowpass_coefficients": np.int64(channels * mask.sum()),
        "mask": mask,
    }
