r"""Paper 004's theorems as predictions, and their verification on a solved instance.

Every theorem of the deep linear UFM (Thm 3.1 from Dang et al., Thms 4.1-4.4, E.1-E.3)
holds at a global optimum under condition (2) and ``d >= K``; note 004 §3.7-3.12 gives the
values, which follow from :func:`~collapselab.theory.dlufm.closed_form`. A prediction
function returns the predicted spectrum (rank and non-zero eigenvalues) or coefficients of
one layer; eigenvector predictions are built from a point's class means. The layer-wise
matrices themselves are in :mod:`~collapselab.theory.dlufm_layerwise`.

* Theorem 3.1 (:func:`predict_dnc`): DNC1 ``H_1 = H̄_1 ⊗ 1ᵀ``; DNC2 ``M_lᵀM_l ∝ I``; DNC3
  ``W_{L:l} ∝ M_lᵀ``.
* Theorem 4.1 (:func:`predict_hessian`): ``H_l`` has rank ``K²``, eigenvectors
  ``h̄^{(l+1)}_k ⊗ h̄^{(l)}_{k'}``, every non-zero eigenvalue ``λ_out(l)``.
* Theorem 4.2 (:func:`predict_papyan`): ``G_within = 0``; ``G_cross`` has rank ``K(K−1)``,
  ``G_class`` rank ``K``, every non-zero eigenvalue ``λ_out(l)``; their images are orthogonal.
* Theorem 4.3 (:func:`predict_gradient`): ``g_l = β_l Σ_k v_{kk}``, so ``K`` equal non-zero
  natural-basis coefficients.
* Theorem 4.4 (:func:`predict_weights`): ``W_lW_lᵀ`` has rank ``K``, eigenvalues
  ``(λ_{H_1}/λ_{W_l}) n‖h̄^{(1)}‖²``.
* Theorem E.1 (:func:`predict_gradient_covariance`): the gradient covariance has ``K − 1``
  equal eigenvalues ``κ²(1−t*)²‖a‖²‖h̄^{(l)}‖²/K``.
* Theorem E.2 (:func:`predict_extended_errors`): the extended errors' second moment has
  ``K − 1`` eigenvalues ``(1+t*²)‖a‖²`` and one ``(1−t*)²‖a‖²``.
* Theorem E.3 (:func:`predict_features`): ``H_lH_lᵀ`` has ``K`` equal eigenvalues
  ``n‖h̄^{(l)}‖²``.

**Published vs corrected** (DESIGN.md principle 6). Theorem E.1 as printed calls its matrix
"the second moment of gradients" and gives it ``K − 1`` non-zero eigenvalues, while its
proof (and the section's definition) centres the per-sample gradients. The ``K − 1`` count
holds for the centred covariance only: the uncentred second moment has ``K`` equal non-zero
eigenvalues (the ``K`` orthogonal vectors ``(t*−1) a_k ⊗ h̄_k`` are not centred).
:func:`predict_gradient_covariance` takes ``variant="published"`` (``K − 1`` for either
matrix) or ``"corrected"`` (``K − 1`` centred, ``K`` uncentred); :func:`verify_dlufm`
reports the published reading's error on the second moment as a separate entry.

:func:`verify_dlufm` holds every prediction against a point (by default an exact optimum
from random frames) and returns one :class:`TheoremCheck` per quantity with its error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from collapselab.checks import check_choice, check_float, check_int
from collapselab.theory.dlufm import (
    ClosedForm,
    DeepLinearUFM,
    DeepUFM,
    balancedness_residuals,
    exact_optimum,
    require_nontrivial,
)
from collapselab.theory.dlufm_layerwise import (
    CENTRINGS,
    descending_eigh,
    dnc_metrics,
    extended_error_moment,
    feature_gram,
    gradient_coefficients,
    gradient_covariance,
    layer_data,
    layer_gradient,
    layer_hessian,
    papyan_decomposition,
    predicted_eigenvectors,
    weight_spectra,
)

__all__ = [
    "VARIANTS",
    "DLUFMVerification",
    "GradientPrediction",
    "SpectrumPrediction",
    "TheoremCheck",
    "predict_dnc",
    "predict_extended_errors",
    "predict_features",
    "predict_gradient",
    "predict_gradient_covariance",
    "predict_hessian",
    "predict_papyan",
    "predict_weights",
    "verify_dlufm",
]

VARIANTS = ("published", "corrected")


@dataclass(frozen=True)
class SpectrumPrediction:
    """A predicted spectrum: the rank and the non-zero eigenvalues (descending)."""

    rank: int
    eigenvalues: np.ndarray

    @classmethod
    def equal(cls, rank: int, value: float) -> SpectrumPrediction:
        """``rank`` equal eigenvalues ``value``."""
        return cls(rank, np.full(rank, float(value)))


@dataclass(frozen=True)
class GradientPrediction:
    """Theorem 4.3 at layer ``l``.

    Attributes:
        coefficient: ``β_l = κ c_l (t* − 1)/K`` in ``g_l = β_l Σ_k v_{kk}``.
        cosines: ``(K²,)`` natural-basis cosines ``⟨g, v_{kk'}⟩/(‖g‖‖v_{kk'}‖)``, index
            ``kK + k'``: ``−1/√K`` on the diagonal (``β_l < 0``), 0 off it.
        n_nonzero: ``K``.
    """

    coefficient: float
    cosines: np.ndarray
    n_nonzero: int


def _form(model: DeepUFM) -> ClosedForm:
    if not isinstance(model, DeepLinearUFM):
        raise ValueError(
            f"the theorems are proved for the deep linear UFM (DeepLinearUFM), got "
            f"{type(model).__name__}; measure a ReLU model with dlufm_layerwise instead"
        )
    return require_nontrivial(model, "the theorems' predictions")


def _layer(model: DeepUFM, layer: int, *, outputs: bool = False) -> int:
    top = model.n_layers + (1 if outputs else 0)
    return check_int("layer", layer, minimum=1, maximum=top)


def predict_dnc(model: DeepLinearUFM) -> dict[str, np.ndarray]:
    r"""Theorem 3.1, per layer ``l = 1..L+1``: ``dnc1``, ``orthogonal_frame`` and
    ``etf_distance`` 0,
    ``mean_norm_sq`` ``‖h̄^{(l)}‖²``, ``dnc3`` 0 and ``dnc3_scale`` the ``c`` of
    ``W_{L:l} = c M_lᵀ`` (NaN at ``L+1``), the keys of
    :func:`~collapselab.theory.dlufm_layerwise.dnc_metrics`."""
    form = _form(model)
    size = model.n_layers + 1
    # W_{L:l} = c M_lᵀ: ‖a‖ = c‖h̄^{(l)}‖ with a the rows of W_{L:l} (norm² Π_{j>=l} σ_j²).
    rows = np.array([float(np.prod(form.sigma_w_sq[i:])) for i in range(model.n_layers)])
    scale = np.append(np.sqrt(rows / form.mean_norm_sq[:-1]), np.nan)
    return {
        "dnc1": np.zeros(size),
        "orthogonal_frame": np.zeros(size),
        "etf_distance": np.zeros(size),
        "mean_norm_sq": form.mean_norm_sq.copy(),
        "dnc3": np.append(np.zeros(model.n_layers), np.nan),
        "dnc3_scale": scale,
    }


def predict_hessian(model: DeepLinearUFM, layer: int) -> SpectrumPrediction:
    """Theorem 4.1: rank ``K²``, every non-zero eigenvalue ``λ_out(l)`` (without ``+λI``)."""
    form, ell = _form(model), _layer(model, layer)
    return SpectrumPrediction.equal(model.n_classes**2, form.hessian_outlier[ell - 1])


def predict_papyan(model: DeepLinearUFM, layer: int) -> dict[str, SpectrumPrediction]:
    """Theorem 4.2 (either centring): ``within`` rank 0, ``cross`` rank ``K(K−1)``,
    ``class`` rank ``K``, every non-zero eigenvalue ``λ_out(l)``."""
    form, ell, k = _form(model), _layer(model, layer), model.n_classes
    value = form.hessian_outlier[ell - 1]
    return {
        "class": SpectrumPrediction.equal(k, value),
        "cross": SpectrumPrediction.equal(k * (k - 1), value),
        "within": SpectrumPrediction.equal(0, value),
    }


def predict_gradient(model: DeepLinearUFM, layer: int) -> GradientPrediction:
    """Theorem 4.3: ``g_l = β_l Σ_k v_{kk}`` (:class:`GradientPrediction`)."""
    form, ell, k = _form(model), _layer(model, layer), model.n_classes
    beta = float(form.gradient_coefficient[ell - 1])
    cosines = (np.sign(beta) / math.sqrt(k)) * np.eye(k).ravel()
    return GradientPrediction(beta, cosines, k)


def predict_weights(model: DeepLinearUFM, layer: int) -> SpectrumPrediction:
    r"""Theorem 4.4: ``W_lW_lᵀ`` has rank ``K``, eigenvalues
    ``(λ_{H_1}/λ_{W_l}) n‖h̄^{(1)}‖² = σ_{W_l}²``."""
    form, ell = _form(model), _layer(model, layer)
    value = model.lambda_h / model.lambda_w[ell - 1] * model.n_per_class * form.mean_norm_sq[0]
    return SpectrumPrediction.equal(model.n_classes, value)


def predict_gradient_covariance(
    model: DeepLinearUFM, layer: int, *, centred: bool = True, variant: str = "corrected"
) -> SpectrumPrediction:
    r"""Theorem E.1: the per-sample gradients at the optimum are ``κ(t*−1) a_k ⊗ h̄^{(l)}_k``,
    ``K`` orthogonal vectors of squared norm ``ν = κ²(1−t*)²‖a‖²‖h̄^{(l)}‖²``, so the centred
    covariance has ``K − 1`` eigenvalues ``ν/K`` and the uncentred second moment ``K``.

    ``variant="published"``: the theorem's count ``K − 1`` whichever matrix (it names the
    second moment); ``"corrected"``: ``K − 1`` centred, ``K`` uncentred (module docstring).
    """
    variant = check_choice("variant", variant, VARIANTS)
    form, ell, k = _form(model), _layer(model, layer), model.n_classes
    nu = (
        (model.kappa * (1 - form.t_star)) ** 2
        * form.row_norm_sq[ell - 1]
        * form.mean_norm_sq[ell - 1]
    )
    rank = k - 1 if (centred or variant == "published") else k
    return SpectrumPrediction.equal(rank, nu / k)


def predict_extended_errors(model: DeepLinearUFM, layer: int) -> SpectrumPrediction:
    r"""Theorem E.2: rank ``K``; ``K − 1`` eigenvalues ``(1 + t*²)‖a‖²`` and one smaller
    ``(1 − t*)²‖a‖²`` (``a`` the rows of ``W_{L:l+1}``; the paper's ``α`` is ``t*``)."""
    form, ell, k = _form(model), _layer(model, layer), model.n_classes
    rows = form.row_norm_sq[ell - 1]
    t = form.t_star
    values = np.append(np.full(k - 1, (1 + t * t) * rows), (1 - t) ** 2 * rows)
    return SpectrumPrediction(k, values)


def predict_features(model: DeepLinearUFM, layer: int) -> SpectrumPrediction:
    """Theorem E.3: ``H_lH_lᵀ = n M_lM_lᵀ`` has ``K`` eigenvalues ``n‖h̄^{(l)}‖²``,
    ``l = 1..L+1`` (``L+1``: the outputs, ``n t*²``)."""
    form, ell = _form(model), _layer(model, layer, outputs=True)
    return SpectrumPrediction.equal(model.n_classes, model.n_per_class * form.mean_norm_sq[ell - 1])


# ---------------------------------------------------------------------------------------
# verification


@dataclass(frozen=True)
class TheoremCheck:
    """One predicted quantity held against a point.

    Attributes:
        theorem: ``"3.1"``, ``"4.1"``, ..., ``"E.3"``, or ``"optimum"``.
        quantity: what is compared (``"eigenvalues"``, ``"rank"``, ...).
        layer: the layer (0 for model-level quantities).
        predicted, measured: the numbers compared (the worst entry for arrays).
        error: relative error ``|measured − predicted|/|predicted|`` (entries predicted 0
            inside a non-zero array: relative to the array's largest prediction), or the
            absolute value where the whole prediction is 0 (``relative`` says which); for
            ranks and counts the absolute difference.
        relative: whether ``error`` is relative.
        variant: ``"published"`` for the paper's reading where it is wrong (not part of
            :meth:`DLUFMVerification.passed`), else ``""``.
    """

    theorem: str
    quantity: str
    layer: int
    predicted: float
    measured: float
    error: float
    relative: bool = True
    variant: str = ""


def _relative(measured: np.ndarray, predicted: np.ndarray) -> tuple[float, float, float]:
    """Worst relative error of two arrays, and that entry's predicted and measured values:
    ``|m_i − p_i| / |p_i|``, or ``/ max_j |p_j|`` at entries where ``p_i = 0``."""
    measured, predicted = measured.ravel(), predicted.ravel()
    scale = np.where(predicted != 0, np.abs(predicted), np.abs(predicted).max())
    errors = np.abs(measured - predicted) / scale
    worst = int(np.argmax(errors))
    return float(predicted[worst]), float(measured[worst]), float(errors[worst])


@dataclass
class DLUFMVerification:
    """The result of :func:`verify_dlufm`: every :class:`TheoremCheck`.

    ``passed(tol)`` is true when every check but the published-variant ones is within
    ``tol`` (ranks exactly); :meth:`worst` gives the largest error per theorem.
    """

    checks: list[TheoremCheck] = field(default_factory=list)

    def add(
        self,
        theorem: str,
        quantity: str,
        layer: int,
        measured: object,
        predicted: object,
        *,
        variant: str = "",
    ) -> None:
        """Compare arrays of equal shape: relative errors, or absolute where predicted is 0."""
        m = np.atleast_1d(np.asarray(measured, dtype=np.float64))
        p = np.atleast_1d(np.asarray(predicted, dtype=np.float64))
        if np.all(p == 0):
            worst = int(np.argmax(np.abs(m)))
            check = TheoremCheck(
                theorem,
                quantity,
                layer,
                0.0,
                float(m[worst]),
                float(abs(m[worst])),
                relative=False,
                variant=variant,
            )
        else:
            pred, meas, err = _relative(m, p)
            check = TheoremCheck(theorem, quantity, layer, pred, meas, err, variant=variant)
        self.checks.append(check)

    def add_count(
        self,
        theorem: str,
        quantity: str,
        layer: int,
        measured: int,
        predicted: int,
        *,
        variant: str = "",
    ) -> None:
        """Compare integers (ranks, counts): the error is ``|measured − predicted|``."""
        self.checks.append(
            TheoremCheck(
                theorem,
                quantity,
                layer,
                float(predicted),
                float(measured),
                float(abs(measured - predicted)),
                relative=False,
                variant=variant,
            )
        )

    def passed(self, tol: float = 1e-8) -> bool:
        """Every corrected/unqualified check within ``tol`` (counts exactly)."""
        tol = check_float("tol", tol, minimum=0.0)
        return all(c.error <= tol for c in self.checks if c.variant != "published")

    def worst(self) -> dict[str, float]:
        """The largest error per theorem (published-variant checks under ``"<thm> published"``)."""
        out: dict[str, float] = {}
        for c in self.checks:
            key = c.theorem if c.variant != "published" else f"{c.theorem} published"
            out[key] = max(out.get(key, 0.0), c.error)
        return out

    def failures(self, tol: float = 1e-8) -> list[TheoremCheck]:
        """The checks beyond ``tol`` (published variants included)."""
        return [c for c in self.checks if c.error > tol]


def _rank(matrix_or_values: np.ndarray, rtol: float) -> int:
    values = np.asarray(matrix_or_values)
    if values.ndim == 2:
        values = np.linalg.eigvalsh(0.5 * (values + values.T))
    top = float(np.abs(values).max()) if values.size else 0.0
    return int(np.sum(np.abs(values) > rtol * top)) if top > 0 else 0


def _eigvec_residual(matrix: np.ndarray, vectors: np.ndarray, value: float) -> float:
    r"""``max_v ‖Mv − λv‖ / (λ‖v‖)`` over the rows ``v``."""
    res = vectors @ matrix.T - value * vectors
    return float(np.max(np.linalg.norm(res, axis=1) / (value * np.linalg.norm(vectors, axis=1))))


def verify_dlufm(
    model: DeepLinearUFM,
    point: object | None = None,
    *,
    layers: Sequence[int] | None = None,
    seed: int = 0,
    rank_rtol: float = 1e-8,
    order: str = "row",
) -> DLUFMVerification:
    r"""Hold every theorem's prediction against ``point`` (default: :func:`exact_optimum`
    with ``seed``) at ``layers`` (default all): the optimum (objective, outputs ``t* Y``,
    gradient norm), Thm 3.1 (DNC1-3 per layer), 4.1 (rank, eigenvalues, eigenvectors
    ``v_{kk'}``), 4.2 (both centrings: ranks of the parts and of the knockouts, eigenvalues,
    eigenvectors, ``G_within``, the images' overlap, ``G = G_class + G_cross + G_within``),
    4.3 (``g_l = β_l Σ v_{kk}``, natural-basis cosines, ``g_l = −λ_{W_l} w_l``), 4.4 (rank,
    eigenvalues, balancedness), E.1 (covariance; second moment corrected and published),
    E.2 and E.3. Ranks count eigenvalues above ``rank_rtol`` times the largest.
    """
    form = _form(model)
    p = exact_optimum(model, seed) if point is None else model.check_point(point)
    k = model.n_classes
    layer_list = (
        list(range(1, model.n_layers + 1))
        if layers is None
        else [_layer(model, ell) for ell in layers]
    )
    out = DLUFMVerification()
    value, grad = model.value_and_gradient(p)
    out.add("optimum", "objective", 0, value, form.objective)
    out.add("optimum", "outputs t*Y", 0, model.features(p)[-1], form.t_star * model.targets)
    out.add("optimum", "gradient norm", 0, grad.norm(), 0.0)

    dnc, pred = dnc_metrics(model, p), predict_dnc(model)
    for key in ("dnc1", "orthogonal_frame", "etf_distance", "mean_norm_sq"):
        out.add("3.1", key, 0, dnc[key], pred[key])
    out.add("3.1", "dnc3", 0, dnc["dnc3"][:-1], pred["dnc3"][:-1])
    out.add("3.1", "dnc3_scale", 0, dnc["dnc3_scale"][:-1], pred["dnc3_scale"][:-1])

    spectra = weight_spectra(p)
    out.add("4.4", "balancedness", 0, balancedness_residuals(model, p), 0.0)
    for ell in layer_list:
        _verify_layer(out, model, p, ell, order, rank_rtol)
        weights = predict_weights(model, ell)
        out.add_count("4.4", "rank", ell, _rank(spectra[ell - 1], rank_rtol), weights.rank)
        out.add("4.4", "eigenvalues", ell, spectra[ell - 1][:k], weights.eigenvalues)
    for ell in range(1, model.n_layers + 2):
        feats = predict_features(model, ell)
        values = descending_eigh(feature_gram(model, p, ell))[0]
        out.add_count("E.3", "rank", ell, _rank(values, rank_rtol), feats.rank)
        out.add("E.3", "eigenvalues", ell, values[:k], feats.eigenvalues)
    return out


def _verify_layer(
    out: DLUFMVerification, model: DeepLinearUFM, p: object, ell: int, order: str, rtol: float
) -> None:
    k = model.n_classes
    hess = layer_hessian(model, p, ell, method="data", order=order)
    values = descending_eigh(hess)[0]
    pred = predict_hessian(model, ell)
    vectors = predicted_eigenvectors(model, p, ell, order=order)
    out.add_count("4.1", "rank", ell, _rank(values, rtol), pred.rank)
    out.add("4.1", "eigenvalues", ell, values[: k * k], pred.eigenvalues)
    out.add(
        "4.1", "eigenvectors v_kk'", ell, _eigvec_residual(hess, vectors, pred.eigenvalues[0]), 0.0
    )
    kron = layer_hessian(model, p, ell, method="kronecker", order=order)
    out.add("4.1", "Kronecker = data formula", ell, np.abs(kron - hess).max() / values[0], 0.0)

    parts = predict_papyan(model, ell)
    means, means_next = layer_data(model, p, ell).class_means()
    centred_next = means_next - means_next.mean(axis=1, keepdims=True)
    global_next = means_next.mean(axis=1)
    for centring in CENTRINGS:
        dec = papyan_decomposition(model, p, ell, centring=centring, order=order)
        tag = f"({centring} centring)"
        ranks = dec.ranks(rtol)
        for name, prediction in parts.items():
            out.add_count("4.2", f"rank {name} {tag}", ell, ranks[name], prediction.rank)
        out.add_count("4.2", f"rank G - G_class {tag}", ell, ranks["without_class"], k * (k - 1))
        out.add_count("4.2", f"rank G - G_cross {tag}", ell, ranks["without_cross"], k)
        out.add_count("4.2", f"rank G - G_within {tag}", ell, ranks["without_within"], k * k)
        for name in ("class", "cross"):
            got = descending_eigh(dec.parts()[name])[0][: parts[name].rank]
            out.add("4.2", f"eigenvalues {name} {tag}", ell, got, parts[name].eigenvalues)
        out.add(
            "4.2",
            f"||G_within|| / ||G|| {tag}",
            ell,
            np.linalg.norm(dec.G_within) / np.linalg.norm(dec.G),
            0.0,
        )
        out.add("4.2", f"image overlap {tag}", ell, dec.image_overlap(), 0.0)
        total = dec.G_class + dec.G_cross + dec.G_within
        out.add(
            "4.2",
            f"sum of parts = G {tag}",
            ell,
            np.abs(total - dec.G).max() / np.abs(dec.G).max(),
            0.0,
        )
        out.add("4.2", f"G = Hessian {tag}", ell, np.abs(dec.G - hess).max() / values[0], 0.0)
        if centring == "logit":
            pairs_cross = [(centred_next[:, c], means[:, kk]) for c in range(k) for kk in range(k)]
            pairs_class = [(global_next, means[:, kk]) for kk in range(k)]
        else:
            centred = means - means.mean(axis=1, keepdims=True)
            global_mean = means.mean(axis=1)
            pairs_cross = [(means_next[:, c], centred[:, kk]) for c in range(k) for kk in range(k)]
            pairs_class = [(means_next[:, c], global_mean) for c in range(k)]
        lam = parts["class"].eigenvalues[0]
        for name, pairs in (("cross", pairs_cross), ("class", pairs_class)):
            vecs = np.asarray(
                [np.kron(a, b) if order == "row" else np.kron(b, a) for a, b in pairs]
            )
            out.add(
                "4.2",
                f"eigenvectors {name} {tag}",
                ell,
                _eigvec_residual(dec.parts()[name], vecs, lam),
                0.0,
            )

    grad_pred = predict_gradient(model, ell)
    g = layer_gradient(model, p, ell, order=order)
    diag = vectors[:: k + 1]
    out.add(
        "4.3",
        "g_l = beta_l sum_k v_kk",
        ell,
        np.linalg.norm(g - grad_pred.coefficient * diag.sum(axis=0)) / np.linalg.norm(g),
        0.0,
    )
    out.add(
        "4.3",
        "natural-basis cosines",
        ell,
        np.abs(gradient_coefficients(g, vectors) - grad_pred.cosines).max(),
        0.0,
    )
    w = p.W[ell - 1] if order == "row" else p.W[ell - 1].T
    # as a norm ratio: entrywise relative errors blow up on the near-zero entries that any
    # point short of the exact optimum has off the class-mean frames
    target = -model.lambda_w[ell - 1] * w.ravel()
    out.add(
        "4.3",
        "||g_l + lambda_W w_l|| / ||lambda_W w_l||",
        ell,
        np.linalg.norm(g - target) / np.linalg.norm(target),
        0.0,
    )

    for centred in (True, False):
        matrix = gradient_covariance(model, p, ell, centred=centred, order=order)
        values = descending_eigh(matrix)[0]
        name = "covariance" if centred else "second moment"
        variants = ("corrected",) if centred else VARIANTS
        for variant in variants:
            predicted = predict_gradient_covariance(model, ell, centred=centred, variant=variant)
            out.add_count(
                "E.1",
                f"rank {name}",
                ell,
                _rank(values, rtol),
                predicted.rank,
                variant="published" if variant == "published" else "",
            )
            if variant == "corrected":
                out.add(
                    "E.1",
                    f"eigenvalues {name}",
                    ell,
                    values[: predicted.rank],
                    predicted.eigenvalues,
                )

    errors = predict_extended_errors(model, ell)
    values = descending_eigh(extended_error_moment(model, p, ell))[0]
    out.add_count("E.2", "rank", ell, _rank(values, rtol), errors.rank)
    out.add("E.2", "eigenvalues", ell, values[:k], errors.eigenvalues)
