"""The frequency dataset of paper 002 (§5.4, Eq. 11): two classes split by a sum of sines."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from collapselab.checks import check_int, check_seed
from collapselab.data._rng import numpy_rng
from collapselab.data.dataset import DataSplits, LabeledData

#: Frequencies ``kappa`` of paper 002 §5.4 (``m = 10`` terms).
PAPER_KAPPA: tuple[float, ...] = tuple(float(k) for k in range(10))
#: Phases ``phi`` of paper 002 §5.4.
PAPER_PHI: tuple[float, ...] = (0.0, 3.46, 5.08, 0.45, 2.10, 1.4, 5.36, 0.85, 5.9, 5.16)


def _terms(kappa: Sequence[float], phi: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(kappa, dtype=np.float64)
    p = np.asarray(phi, dtype=np.float64)
    if k.ndim != 1 or k.size == 0:
        raise ValueError(f"kappa must be a non-empty 1-D sequence, got shape {k.shape}")
    if p.shape != k.shape:
        raise ValueError(f"phi must have the same length as kappa ({k.size}), got shape {p.shape}")
    if not (np.all(np.isfinite(k)) and np.all(np.isfinite(p))):
        raise ValueError("kappa and phi must be finite")
    return k, p


def frequency_function(
    z: torch.Tensor | np.ndarray | float,
    kappa: Sequence[float] = PAPER_KAPPA,
    phi: Sequence[float] = PAPER_PHI,
) -> torch.Tensor | np.ndarray:
    r"""``lambda(z) = sum_i sin(2 pi kappa_i z + phi_i)`` (paper 002, Eq. 11), in float64.

    Args:
        z: points, any shape; a tensor gives a float64 tensor, anything else a float64 array.
        kappa: frequencies ``kappa_i``.
        phi: phases ``phi_i`` (same length as ``kappa``).
    """
    k, p = _terms(kappa, phi)
    if isinstance(z, torch.Tensor):
        zt = z.to(torch.float64)
        kt, pt = torch.from_numpy(k), torch.from_numpy(p)
        return torch.sin(2.0 * math.pi * zt.unsqueeze(-1) * kt + pt).sum(-1)
    za = np.asarray(z, dtype=np.float64)
    return np.sin(2.0 * np.pi * za[..., None] * k + p).sum(-1)


def frequency_partial_sums(
    z: np.ndarray | float,
    kappa: Sequence[float] = PAPER_KAPPA,
    phi: Sequence[float] = PAPER_PHI,
) -> np.ndarray:
    r"""The partial sums ``lambda_j(z) = sum_{i <= j} sin(2 pi kappa_i z + phi_i)``,
    ``j = 1..m``, as a float64 array of shape ``z.shape + (m,)`` (the last is
    :func:`frequency_function` up to rounding): the classifiers with ``j`` terms of the
    critical frequency (paper 002 §5.2, Fig. 16)."""
    k, p = _terms(kappa, phi)
    za = np.asarray(z, dtype=np.float64)
    return np.cumsum(np.sin(2.0 * np.pi * za[..., None] * k + p), axis=-1)


def frequency_dataset(
    n_train: int = 10000,
    n_test: int = 1000,
    seed: int = 0,
    kappa: Sequence[float] = PAPER_KAPPA,
    phi: Sequence[float] = PAPER_PHI,
) -> DataSplits:
    r"""Two-class points in ``[-1, 1] x [-2 pi, 2 pi]`` separated by ``x_2 = lambda(x_1)``.

    ``x_1 ~ U[-1, 1]``, ``x_2 ~ U[-2 pi, 2 pi]`` independently, and
    ``y = 1[x_2 <= lambda(x_1)]`` with ``lambda`` from :func:`frequency_function`. The paper
    declares ``lambda`` on ``z in [-1, 1]`` and calls the rule "``lambda(z) <= 0``" without
    saying how a 2-D point maps to a label; this is the reading of note 002 §7 item 24 (the
    0/1 polarity is arbitrary). The first term has ``kappa_1 = 0, phi_1 = 0`` and vanishes.
    ``|lambda|`` can exceed ``2 pi``, so parts of the boundary leave the sampled box and the
    classes are not balanced.

    Labels are computed from the float32 inputs that are returned (evaluated in float64), so
    ``y == (x[:, 1] <= frequency_function(x[:, 0]))`` holds exactly.

    Returns:
        :class:`DataSplits` with float32 ``x`` of shape ``(N, 2)`` and int64 ``y`` in {0, 1};
        ``test=None`` when ``n_test = 0``.
    """
    n_train = check_int("n_train", n_train, minimum=1)
    n_test = check_int("n_test", n_test, minimum=0)
    seed = check_seed("seed", seed)
    k, p = _terms(kappa, phi)
    meta = {
        "generator": "frequency",
        "kappa": k.tolist(),
        "phi": p.tolist(),
        "rule": "y = 1[x2 <= lambda(x1)]",
        "seed": seed,
    }

    def split(n: int, stream: int) -> LabeledData:
        rng = numpy_rng(seed, stream)
        x1 = rng.uniform(-1.0, 1.0, n)
        x2 = rng.uniform(-2.0 * np.pi, 2.0 * np.pi, n)
        x = torch.from_numpy(np.stack([x1, x2], axis=1).astype(np.float32))
        y = (x[:, 1].double() <= frequency_function(x[:, 0], k, p)).long()
        return LabeledData(x, y, 2, "frequency", dict(meta))

    test = split(n_test, 2) if n_test > 0 else None
    return DataSplits(split(n_train, 1), test)
