"""Generated Gaussian data: class mixtures (papers 000, 001) and prescribed spectra (paper 002).

Every generator is seeded: the same ``seed`` gives bit-identical tensors. Independent random
streams (``SeedSequence(seed, spawn_key=(i,))``) are used for the population parameters
(stream 0), the training samples (stream 1) and the test samples (stream 2), so changing
the number of test samples never changes the training set, and both splits share one
population.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from collapselab.checks import check_choice, check_float, check_int, check_seed
from collapselab.data._rng import numpy_rng
from collapselab.data.dataset import DataSplits, LabeledData

_SPECTRA = ("power", "exponential", "flat")
_BASES = ("random", "axis")


def _labeled(x: np.ndarray, y: np.ndarray, n_classes: int, name: str, meta: dict) -> LabeledData:
    return LabeledData(
        torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)),
        torch.from_numpy(np.ascontiguousarray(y, dtype=np.int64)),
        n_classes,
        name,
        meta,
    )


def _cluster_sizes(n: int, clusters: int) -> list[int]:
    """``n`` samples split as evenly as possible; the first ``n % clusters`` get one more."""
    return [n // clusters + (1 if j < n % clusters else 0) for j in range(clusters)]


def gaussian_mixture_means(
    n_classes: int,
    dim: int,
    clusters_per_class: int = 1,
    mean_scale: float = 1.0,
    seed: int = 0,
) -> torch.Tensor:
    """The cluster means used by :func:`gaussian_mixture` for the same arguments.

    Each mean is ``mean_scale * g / ||g||`` with ``g ~ N(0, I_dim)``, i.e. uniform on the
    sphere of radius ``mean_scale`` (paper 001 §IV-B: ``mu_k`` uniform on the unit sphere).

    Returns:
        float64 tensor of shape ``(n_classes, clusters_per_class, dim)``.
    """
    n_classes = check_int("n_classes", n_classes, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    clusters_per_class = check_int("clusters_per_class", clusters_per_class, minimum=1)
    mean_scale = check_float("mean_scale", mean_scale, minimum=0.0)
    seed = check_seed("seed", seed)
    g = numpy_rng(seed, 0).standard_normal((n_classes, clusters_per_class, dim))
    g /= np.linalg.norm(g, axis=-1, keepdims=True)
    return torch.from_numpy(mean_scale * g)


def _sample_mixture(
    means: np.ndarray, n_per_class: int, noise_std: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    n_classes, clusters, dim = means.shape
    sizes = _cluster_sizes(n_per_class, clusters)
    centre = np.concatenate(
        [np.repeat(means[k], sizes, axis=0) for k in range(n_classes)], axis=0
    )  # class-major, then cluster, matching the label order below
    y = np.repeat(np.arange(n_classes), n_per_class)
    x = centre + noise_std * rng.standard_normal((n_classes * n_per_class, dim))
    return x, y


def gaussian_mixture(
    n_classes: int,
    dim: int,
    n_train_per_class: int,
    n_test_per_class: int = 0,
    clusters_per_class: int = 1,
    mean_scale: float = 1.0,
    noise_std: float = 1.0,
    seed: int = 0,
) -> DataSplits:
    r"""A balanced Gaussian mixture with one or several clusters per class.

    ``x = mu_{k,j} + noise_std * z``, ``z ~ N(0, I_dim)``, where ``mu_{k,j}`` is cluster ``j``
    of class ``k`` (see :func:`gaussian_mixture_means`). With ``clusters_per_class = 1`` and
    the defaults this is the data model of paper 001 §IV-B (``x_{k,i} ~ N(mu_k, I_d)``, ``mu_k``
    uniform on the unit sphere); with several clusters per class it is the clustered-class
    data of paper 000 (requirement R3).

    Each class gets exactly ``n_*_per_class`` samples, split as evenly as possible among its
    clusters (the first ``n % clusters_per_class`` clusters get one extra). Samples are
    ordered by class, then by cluster within a class (``meta["cluster_sizes"]`` gives the
    sizes, so cluster ids can be rebuilt); shuffle in the loader.

    Args:
        n_classes: number of classes ``K >= 1``.
        dim: input dimension ``d >= 1``.
        n_train_per_class: training samples per class, at least ``clusters_per_class``.
        n_test_per_class: test samples per class; ``0`` gives ``test=None``.
        clusters_per_class: Gaussian clusters per class.
        mean_scale: radius of the sphere the means lie on (the signal-to-noise knob).
        noise_std: standard deviation of the isotropic noise.
        seed: non-negative int; same seed, same tensors.

    Returns:
        :class:`DataSplits` with float32 ``x`` of shape ``(N, dim)`` and int64 ``y``.
    """
    n_classes = check_int("n_classes", n_classes, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    clusters_per_class = check_int("clusters_per_class", clusters_per_class, minimum=1)
    seed = check_seed("seed", seed)
    n_train_per_class = check_int("n_train_per_class", n_train_per_class, minimum=1)
    n_test_per_class = check_int("n_test_per_class", n_test_per_class, minimum=0)
    noise_std = check_float("noise_std", noise_std, minimum=0.0)
    means = gaussian_mixture_means(n_classes, dim, clusters_per_class, mean_scale, seed).numpy()
    if n_train_per_class < clusters_per_class:
        raise ValueError(
            f"n_train_per_class ({n_train_per_class}) must be >= clusters_per_class "
            f"({clusters_per_class}) so that every cluster has a training sample"
        )
    meta = {
        "generator": "gaussian_mixture",
        "n_classes": n_classes,
        "dim": dim,
        "clusters_per_class": clusters_per_class,
        "mean_scale": float(mean_scale),
        "noise_std": noise_std,
        "seed": seed,
    }
    name = f"gaussian_mixture(K={n_classes}, d={dim}, clusters={clusters_per_class})"

    def split(n: int, stream: int) -> LabeledData:
        x, y = _sample_mixture(means, n, noise_std, numpy_rng(seed, stream))
        return _labeled(
            x, y, n_classes, name, {**meta, "cluster_sizes": _cluster_sizes(n, means.shape[1])}
        )

    test = split(n_test_per_class, 2) if n_test_per_class > 0 else None
    return DataSplits(split(n_train_per_class, 1), test)


@dataclass(frozen=True)
class SpectrumModel:
    """Population parameters of :func:`spectrum_gaussian`.

    Attributes:
        basis: orthogonal ``(dim, dim)`` float64 matrix ``U``; column ``j`` is the ``j``-th
            principal direction of the within-class covariance.
        noise_eigenvalues: ``s``, non-increasing, shape ``(dim,)``; within-class covariance
            ``U diag(s) U^T``.
        signal_pcs: the ``K - 1`` principal-direction indices that carry the class means.
        means: class means, shape ``(K, dim)``; they sum to zero.
        total_eigenvalues: eigenvalues of the population covariance of the balanced mixture,
            ``s_j (1 + a^2)`` for ``j`` in ``signal_pcs`` and ``s_j`` otherwise (same basis ``U``).
    """

    basis: torch.Tensor
    noise_eigenvalues: torch.Tensor
    signal_pcs: tuple[int, ...]
    means: torch.Tensor
    total_eigenvalues: torch.Tensor


def _spectrum(spectrum: str | Sequence[float], decay: float, dim: int) -> np.ndarray:
    if isinstance(spectrum, str):
        check_choice("spectrum", spectrum, _SPECTRA)
        j = np.arange(1, dim + 1, dtype=np.float64)
        if spectrum == "power":
            return j**-decay
        if spectrum == "exponential":
            return np.exp(-decay * (j - 1.0))
        return np.ones(dim)
    s = np.asarray(spectrum, dtype=np.float64)
    if s.shape != (dim,):
        raise ValueError(f"spectrum must have length dim={dim}, got shape {s.shape}")
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError("spectrum must contain finite, strictly positive eigenvalues")
    if np.any(np.diff(s) > 0):
        raise ValueError("spectrum must be non-increasing (largest eigenvalue first)")
    return s


def _simplex_coordinates(n_classes: int) -> np.ndarray:
    """``(K, K-1)`` centred simplex vertices with ``(1/K) sum_k c_k c_k^T = I``.

    Rows of the Helmert matrix ``H`` span the complement of ``1``, so ``c_k = sqrt(K) H e_k``.
    """
    h = np.zeros((n_classes - 1, n_classes))
    for j in range(1, n_classes):
        h[j - 1, :j] = 1.0
        h[j - 1, j] = -float(j)
        h[j - 1] /= np.sqrt(j * (j + 1.0))
    return np.sqrt(n_classes) * h.T


def _signal_pcs(signal: str | Sequence[int], n_signal: int, dim: int) -> tuple[int, ...]:
    if isinstance(signal, str):
        check_choice("signal", signal, ("top", "bottom"))
        return tuple(range(n_signal)) if signal == "top" else tuple(range(dim - n_signal, dim))
    pcs = tuple(check_int("signal index", j, minimum=0) for j in signal)
    if len(pcs) != n_signal or len(set(pcs)) != n_signal or max(pcs) >= dim:
        raise ValueError(
            f"signal must be 'top', 'bottom' or {n_signal} distinct PC indices in [0, {dim}), "
            f"got {signal!r}"
        )
    return pcs


def spectrum_gaussian_model(
    n_classes: int = 2,
    dim: int = 32,
    spectrum: str | Sequence[float] = "power",
    decay: float = 1.0,
    basis: str = "random",
    signal: str | Sequence[int] = "top",
    signal_strength: float = 1.0,
    seed: int = 0,
) -> SpectrumModel:
    """The population model sampled by :func:`spectrum_gaussian` (same arguments, same model)."""
    n_classes = check_int("n_classes", n_classes, minimum=2)
    dim = check_int("dim", dim, minimum=n_classes - 1)
    decay = check_float("decay", decay, minimum=0.0)
    basis = check_choice("basis", basis, _BASES)
    a = check_float("signal_strength", signal_strength, minimum=0.0)
    seed = check_seed("seed", seed)
    s = _spectrum(spectrum, decay, dim)
    pcs = _signal_pcs(signal, n_classes - 1, dim)
    if basis == "axis":
        u = np.eye(dim)
    else:
        # Haar-distributed orthogonal matrix: QR of a Gaussian with R's diagonal made positive.
        q, r = np.linalg.qr(numpy_rng(seed, 0).standard_normal((dim, dim)))
        u = q * np.sign(np.diag(r))
    idx = list(pcs)
    coords = _simplex_coordinates(n_classes) * (a * np.sqrt(s[idx]))  # (K, K-1)
    means = coords @ u[:, idx].T
    total = s.copy()
    total[idx] *= 1.0 + a**2
    return SpectrumModel(
        torch.from_numpy(u),
        torch.from_numpy(s),
        pcs,
        torch.from_numpy(means),
        torch.from_numpy(total),
    )


def spectrum_gaussian(
    n_classes: int = 2,
    dim: int = 32,
    n_train_per_class: int = 500,
    n_test_per_class: int = 0,
    spectrum: str | Sequence[float] = "power",
    decay: float = 1.0,
    basis: str = "random",
    signal: str | Sequence[int] = "top",
    signal_strength: float = 1.0,
    seed: int = 0,
) -> DataSplits:
    r"""Balanced Gaussian classes with a prescribed covariance spectrum (paper 002 R6a).

    Construction (population level; :func:`spectrum_gaussian_model` returns it):

    * within-class covariance ``Sigma = U diag(s) U^T``, with ``s_j = j^{-decay}``
      (``"power"``), ``exp(-decay (j-1))`` (``"exponential"``), ``1`` (``"flat"``) or a given
      non-increasing sequence, ``j = 1..dim``; ``U`` is Haar-random (``basis="random"``) or
      the identity (``"axis"``);
    * the class signal lives on ``K - 1`` principal directions ``S`` (the top ones, the
      bottom ones, or given indices): ``mu_k = a sum_{i} sqrt(s_{S_i}) c_{k,i} u_{S_i}``
      where ``c_k`` are centred simplex vertices with ``(1/K) sum_k c_k c_k^T = I`` and
      ``a = signal_strength``;
    * ``x = mu_y + U diag(sqrt(s)) z``, ``z ~ N(0, I)``.

    The means are measured in units of the noise standard deviation along each signal
    direction, so the Mahalanobis distances between classes (hence the Bayes error) are the
    same whether the signal is on the top or the bottom PCs: only its position in the
    spectrum changes. The balanced population covariance keeps the basis ``U`` with
    eigenvalues ``s_j (1 + a^2)`` on ``S`` and ``s_j`` elsewhere, and the global mean is zero,
    so centred and uncentred PCs coincide. With ``signal="bottom"`` the signal directions stay
    at the bottom of the total spectrum as long as ``s_j (1 + a^2)`` is below the other
    eigenvalues.

    Returns:
        :class:`DataSplits` with float32 ``x`` of shape ``(N, dim)``, int64 ``y``, ordered by
        class; ``meta`` lists the eigenvalues and ``signal_pcs``.
    """
    n_classes = check_int("n_classes", n_classes, minimum=2)
    dim = check_int("dim", dim, minimum=1)
    seed = check_seed("seed", seed)
    n_train_per_class = check_int("n_train_per_class", n_train_per_class, minimum=1)
    n_test_per_class = check_int("n_test_per_class", n_test_per_class, minimum=0)
    model = spectrum_gaussian_model(
        n_classes, dim, spectrum, decay, basis, signal, signal_strength, seed
    )
    u = model.basis.numpy()
    sqrt_s = np.sqrt(model.noise_eigenvalues.numpy())
    means = model.means.numpy()
    meta = {
        "generator": "spectrum_gaussian",
        "n_classes": n_classes,
        "dim": dim,
        "spectrum": spectrum if isinstance(spectrum, str) else "custom",
        "decay": float(decay),
        "basis": basis,
        "signal_pcs": list(model.signal_pcs),
        "signal_strength": float(signal_strength),
        "noise_eigenvalues": model.noise_eigenvalues.tolist(),
        "total_eigenvalues": model.total_eigenvalues.tolist(),
        "seed": seed,
    }
    name = f"spectrum_gaussian(K={n_classes}, d={dim}, signal={meta['signal_pcs']})"

    def split(n: int, stream: int) -> LabeledData:
        y = np.repeat(np.arange(n_classes), n)
        z = numpy_rng(seed, stream).standard_normal((n_classes * n, dim))
        return _labeled(means[y] + (z * sqrt_s) @ u.T, y, n_classes, name, dict(meta))

    test = split(n_test_per_class, 2) if n_test_per_class > 0 else None
    return DataSplits(split(n_train_per_class, 1), test)
