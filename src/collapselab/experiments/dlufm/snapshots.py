"""What paper 004's figures show of one layer at one point: a snapshot of every layer-wise
spectrum, alignment and coefficient (:mod:`collapselab.theory.dlufm_layerwise`).

:func:`layer_snapshot` computes, at layer ``l``:

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
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from collapselab.theory.dlufm import DeepUFM, UFMParameters
from collapselab.theory.dlufm_layerwise import (
    CENTRINGS,
    descending_eigh,
    dnc_metrics,
    eigenvector_alignment,
    extended_error_moment,
    feature_gram,
    gradient_coefficients,
    gradient_covariance,
    gram_tables,
    layer_gradient,
    layer_hessian,
    papyan_decomposition,
    predicted_eigenvectors,
    weight_spectra,
)

__all__ = ["layer_snapshot", "stack"]


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
    hess = layer_hessian(model, point, layer, method="data")
    values, vectors = descending_eigh(hess)
    predicted = predicted_eigenvectors(model, point, layer)
    g = layer_gradient(model, point, layer)
    top = vectors[:, : k * k]
    gnorm = float(np.linalg.norm(g))
    value, grad = model.value_and_gradient(point)
    out: dict[str, np.ndarray] = {
        "objective": np.float64(value),
        "grad_norm": np.float64(grad.norm()),
        "hessian": values,
        "alignment": eigenvector_alignment(hess, predicted),
        "cosines": gradient_coefficients(g, predicted),
        "raw": gradient_coefficients(g, predicted, normalise="raw"),
        "true_coefficients": top.T @ g / gnorm if gnorm > 0 else np.zeros(k * k),
        "f_top": np.float64(np.sum((top.T @ g) ** 2) / gnorm**2 if gnorm > 0 else np.nan),
        "top_vectors": top,
        "weights": _padded(weight_spectra(point)),
    }
    for centring in centrings:
        dec = papyan_decomposition(model, point, layer, centring=centring)
        for part, spectrum in dec.knockout_spectra().items():
            out[f"knockout_{centring}_{part}"] = spectrum
        out[f"image_overlap_{centring}"] = np.float64(dec.image_overlap())
        out[f"within_norm_{centring}"] = np.float64(
            np.linalg.norm(dec.G_within) / max(np.linalg.norm(dec.G), np.finfo(float).tiny)
        )
    dnc = dnc_metrics(model, point)
    for key in ("dnc1", "orthogonal_frame", "etf_distance", "dnc3"):
        out[key] = dnc[key]
    if appendix:
        out["grad_covariance"] = descending_eigh(gradient_covariance(model, point, layer))[0]
        out["grad_moment"] = descending_eigh(
            gradient_covariance(model, point, layer, centred=False)
        )[0]
        out["extended_errors"] = descending_eigh(extended_error_moment(model, point, layer))[0]
        layers = range(1, model.n_layers + 2)
        out["features"] = _padded(
            [descending_eigh(feature_gram(model, point, j))[0] for j in layers]
        )
        tables = [gram_tables(model, point, j) for j in range(1, model.n_layers + 1)]
        out["table3"] = np.stack([t[0] for t in tables])
        out["table4"] = np.stack([t[1] for t in tables])
    return out


def stack(snapshots: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``{key: (T, ...) array}`` from ``T`` snapshots with the same keys."""
    return {key: np.stack([np.asarray(s[key]) for s in snapshots]) for key in snapshots[0]}
