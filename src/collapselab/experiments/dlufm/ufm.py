r"""What paper 004's deep-UFM experiments share: the model of a preset, the paper's
gradient descent, and a snapshot of every layer-wise quantity the figures show.

* :func:`build_model`, :func:`descend`: the deep (linear or ReLU) UFM of a
  :class:`~collapselab.experiments.dlufm.presets.UFMConfig` and its full-batch gradient
  descent (:func:`~collapselab.theory.dlufm.gradient_descent`).
* :func:`layer_snapshot`: one layer at one point (:mod:`collapselab.theory.dlufm_layerwise`'s
  matrices, measured with :mod:`collapselab.curvature`'s vocabulary on dense operators):

  * ``hessian``: the eigenvalues (descending) of the data-term Hessian (Figs 3, 9);
  * ``alignment``: ``a(v_{kk'})`` of the ``K²`` predicted eigenvectors (Fig. 4, Table 1);
  * ``cosines``, ``raw``: the natural-basis gradient coefficients (Fig. 7);
  * ``true_coefficients``: ``⟨g/‖g‖, u_j⟩`` on the top ``K²`` eigenvectors (Table 2);
  * ``f_top``: Gur-Ari's fraction of the gradient in the top-``K²`` space; ``top_vectors``;
  * ``knockout_<centring>_<part>``: eigenvalues of ``G`` (``none``) and ``G`` minus each of
    Papyan's parts (Figs 5, 6, 10), ``image_overlap_<centring>``, ``within_norm_<centring>``;
  * ``weights``: the eigenvalues of every ``W_lW_lᵀ`` (Figs 8, 11), padded with NaN;
  * ``grad_covariance``, ``grad_moment``, ``extended_errors``: App. E.1-E.2 (Figs 12, 13);
    ``features``: the eigenvalues of every ``H_lH_lᵀ`` (Fig. 14), padded with NaN;
  * ``dnc1``, ``orthogonal_frame``, ``etf_distance``, ``dnc3``: per layer (Thm 3.1; the DNC1
    the paper tracks);
  * ``table3``, ``table4``: the Gram tables at every layer (App. G.2), ``(L, K, K)``;
  * ``objective``, ``grad_norm``.

  :func:`stack` turns a list of snapshots into arrays with a leading checkpoint axis.
* :func:`relative_spread`, :func:`overlaps`: how equal a group of eigenvalues is, and
  Gur-Ari's top-subspace overlap over checkpoints.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from collapselab.curvature import (
    DenseOperator,
    dense_spectrum,
    eigenvector_alignment,
    gradient_coefficients,
    subspace_overlap,
    top_fraction,
)
from collapselab.curvature.papyan import CENTRINGS
from collapselab.experiments.dlufm.presets import UFMBase, UFMConfig
from collapselab.theory.dlufm import (
    DeepLinearUFM,
    DeepReLUUFM,
    DeepUFM,
    UFMParameters,
    gradient_descent,
)
from collapselab.theory.dlufm_layerwise import (
    dnc_metrics,
    extended_error_moment,
    feature_gram,
    gradient_covariance,
    gram_tables,
    layer_gradient,
    layer_hessian,
    layer_papyan_decomposition,
    predicted_eigenvectors,
    weight_spectra,
)

__all__ = ["build_model", "descend", "layer_snapshot", "overlaps", "relative_spread", "stack"]


def build_model(config: UFMConfig, *, relu: bool = False) -> DeepUFM:
    """The deep linear (or, with ``relu``, ReLU) UFM of ``config``."""
    cls = DeepReLUUFM if relu else DeepLinearUFM
    return cls(config.n_classes, config.n_per_class, config.width, config.lambda_w,
               config.lambda_h, n_layers=config.n_layers)  # fmt: skip


def descend(
    model: DeepUFM,
    config: UFMBase,
    *,
    steps: int,
    checkpoints: int,
    seed: int,
    tol: float = 0.0,
    progress: Callable[[int, int], None] | None = None,
) -> Any:
    """The paper's full-batch gradient descent of ``steps`` steps at ``config``'s ``lr``
    from its start (``w_scale``, ``h_scale``) drawn with ``seed``, recording
    ``checkpoints`` log-spaced points, stopping early at a gradient norm below ``tol``
    (:func:`~collapselab.theory.dlufm.gradient_descent`)."""
    return gradient_descent(
        model,
        config.lr,
        steps,
        seed=seed,
        w_scale=config.w_scale,
        h_scale=config.h_scale,
        checkpoints=checkpoints,
        tol=tol,
        progress=progress,
    )


def relative_spread(values: Sequence[float] | np.ndarray) -> float:
    """``(max − min)/max`` of positive values (0 when all are equal)."""
    values = np.asarray(values, dtype=np.float64)
    top = float(np.max(values))
    return float((top - np.min(values)) / top) if top > 0 else float("nan")


def overlaps(top_vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gur-Ari's top-subspace overlap ``Tr(P_t P_t')/k``
    (:func:`~collapselab.curvature.subspace_overlap`) of each checkpoint's top space
    (``(T, P, k)`` orthonormal columns) with the previous checkpoint's and with the last's."""
    last = top_vectors[-1]
    with_last = np.array([subspace_overlap(v, last) for v in top_vectors])
    with_prev = np.array(
        [np.nan] + [subspace_overlap(a, b) for a, b in itertools.pairwise(top_vectors)]
    )
    return with_prev, with_last


def _spectrum(matrix: np.ndarray) -> np.ndarray:
    return dense_spectrum(matrix).numpy()


def _padded(rows: Sequence[np.ndarray]) -> np.ndarray:
    width = max(r.size for r in rows)
    out = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        out[i, : r.size] = r
    return out


def layer_snapshot(
    model: DeepUFM,
    point: UFMParameters,
    layer: int,
    *,
    centrings: Sequence[str] = CENTRINGS,
    appendix: bool = True,
) -> dict[str, np.ndarray]:
    """Every quantity of the module docstring at ``layer`` (``appendix=False`` skips App. E
    and the Gram tables)."""
    k = model.n_classes
    hess = DenseOperator(layer_hessian(model, point, layer, method="data"))
    values, vectors = (t.numpy() for t in hess.eigenpairs())
    predicted = predicted_eigenvectors(model, point, layer).T  # v_kk' as columns
    g = layer_gradient(model, point, layer)
    top = vectors[:, : k * k]
    # a zero gradient (an exact critical point of the data term) has no cosines
    nonzero = bool(np.any(g))
    true = gradient_coefficients(g, top).numpy() if nonzero else np.zeros(k * k)
    value, grad = model.value_and_gradient(point)
    out: dict[str, np.ndarray] = {
        "objective": np.float64(value),
        "grad_norm": np.float64(grad.norm()),
        "hessian": values,
        "alignment": eigenvector_alignment(hess, predicted).numpy(),
        "cosines": gradient_coefficients(g, predicted).numpy(),
        "raw": gradient_coefficients(g, predicted, normalise="raw").numpy(),
        "true_coefficients": true,
        "f_top": np.float64(top_fraction(g, top) if nonzero else np.nan),
        "top_vectors": top,
        "weights": _padded(weight_spectra(point)),
    }
    for centring in centrings:
        dec = layer_papyan_decomposition(model, point, layer, centring=centring)
        for part, spectrum in dec.knockout_spectra().items():
            out[f"knockout_{centring}_{part}"] = spectrum.numpy()
        out[f"image_overlap_{centring}"] = np.float64(dec.image_overlap())
        within, G = dec.within_part.dense().numpy(), dec.ggn.dense().numpy()
        out[f"within_norm_{centring}"] = np.float64(
            np.linalg.norm(within) / max(np.linalg.norm(G), np.finfo(float).tiny)
        )
    dnc = dnc_metrics(model, point)
    for key in ("dnc1", "orthogonal_frame", "etf_distance", "dnc3"):
        out[key] = dnc[key]
    if appendix:
        out["grad_covariance"] = _spectrum(gradient_covariance(model, point, layer))
        out["grad_moment"] = _spectrum(gradient_covariance(model, point, layer, centred=False))
        out["extended_errors"] = _spectrum(extended_error_moment(model, point, layer))
        layers = range(1, model.n_layers + 2)
        out["features"] = _padded([_spectrum(feature_gram(model, point, j)) for j in layers])
        tables = [gram_tables(model, point, j) for j in range(1, model.n_layers + 1)]
        out["table3"] = np.stack([t[0] for t in tables])
        out["table4"] = np.stack([t[1] for t in tables])
    return out


def stack(snapshots: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``{key: (T, ...) array}`` from ``T`` snapshots with the same keys."""
    return {key: np.stack([np.asarray(s[key]) for s in snapshots]) for key in snapshots[0]}
