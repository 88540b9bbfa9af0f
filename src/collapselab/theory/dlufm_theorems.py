r"""Paper 004's theorems as predictions, and their verification on a solved instance.

Every theorem of the deep linear UFM (Thm 3.1 from Dang et al., Thms 4.1-4.4, E.1-E.3)
holds at a global optimum under condition (2) and ``d >= K``; note 004 §3.7-3.12 gives the
values, which follow from :func:`~collapselab.theory.dlufm.closed_form`. A prediction
function returns the predicted spectrum of one layer (:class:`SpectrumPrediction`: rank
and non-zero eigenvalues) or its coefficients; given a ``point=``, a spectrum prediction
also carries the predicted eigenvectors (or a spanning set of a degenerate eigenspace),
built from that point's class means ``h̄^{(l)}_k`` and weight products ``W_{L:l+1}`` (rows
``a_k``) as the theorems state them. The layer-wise matrices themselves are in
:mod:`~collapselab.theory.dlufm_layerwise`.

**Indexing** (docs/theory.md, Conventions): ``layer = l`` counts from 1 and names the
layer whose weights are ``W_l``, whose input is ``h^{(l)}`` and whose product is
``W_{L:l} = W_L ⋯ W_l`` (``W_{L:L+1} = I_K``); per-layer arrays hold layer ``l`` at index
``l − 1``, over ``l = 1..L+1`` where the outputs count (:func:`predict_dnc`,
:func:`predict_features`). A theorem of layer ``l`` about ``H_l``, ``g_l`` or ``W_l`` reads
the rows ``a_c`` of the next product ``W_{L:l+1}`` and the means of ``h^{(l)}`` and
``h^{(l+1)}``, as the paper states it. Predicted eigenvectors are rows, class means
``(K, d_l)`` rows ``h̄^{(l)}_k``.

* Theorem 3.1 (:func:`predict_dnc`): DNC1 ``H_1 = H̄_1 ⊗ 1ᵀ``; DNC2 ``M_lᵀM_l ∝ I`` (so the
  centred means are a simplex ETF: NC2 0) and ``W_{L:l}W_{L:l}ᵀ ∝ I_K``; DNC3
  ``W_{L:l} ∝ M_lᵀ``.
* Theorem 4.1 (:func:`predict_hessian`): ``H_l`` has rank ``K²``, eigenvectors
  ``h̄^{(l+1)}_k ⊗ h̄^{(l)}_{k'}``, every non-zero eigenvalue ``λ_out(l)``.
* Theorem 4.2 (:func:`predict_papyan`): ``G_within = 0``; ``G_cross`` has rank ``K(K−1)``,
  eigenvectors ``(h̄^{(l+1)}_c − h̄^{(l+1)}_G) ⊗ h̄^{(l)}_k``; ``G_class`` rank ``K``,
  eigenvectors ``h̄^{(l+1)}_G ⊗ h̄^{(l)}_k`` (the logit centring; the class centring moves
  the centring to the right factor); every non-zero eigenvalue ``λ_out(l)``; their images
  are orthogonal.
* Theorem 4.3 (:func:`predict_gradient`): ``g_l = β_l Σ_k v_{kk}``, so ``K`` equal non-zero
  natural-basis coefficients.
* Theorem 4.4 (:func:`predict_weights`): ``W_lW_lᵀ`` has rank ``K``, eigenvalues
  ``(λ_{H_1}/λ_{W_l}) n‖h̄^{(1)}‖²``, eigenvectors ``h̄^{(l+1)}_k``.
* Theorem E.1 (:func:`predict_gradient_covariance`): the gradient covariance has ``K − 1``
  equal eigenvalues ``κ²(1−t*)²‖a‖²‖h̄^{(l)}‖²/K``, eigenspace spanned by the centred
  ``a_k ⊗ h̄^{(l)}_k``.
* Theorem E.2 (:func:`predict_extended_errors`): the extended errors' second moment has
  ``K − 1`` eigenvalues ``(1+t*²)‖a‖²`` (eigenvectors ``h̄^{(l+1)}_k − h̄^{(l+1)}_{k'}``)
  and one ``(1−t*)²‖a‖²`` (eigenvector ``Σ_k h̄^{(l+1)}_k``).
* Theorem E.3 (:func:`predict_features`): ``H_lH_lᵀ`` has ``K`` equal eigenvalues
  ``n‖h̄^{(l)}‖²``, eigenvectors ``h̄^{(l)}_k``.

**Published vs corrected** (docs/architecture.md, principle 6). Theorem E.1 as printed calls
its matrix "the second moment of gradients" and gives it ``K − 1`` non-zero eigenvalues, while its
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
from collapselab.curvature.alignment import ORDERS, gradient_coefficients, kron_pairs
from collapselab.curvature.eigen import dense_spectrum
from collapselab.curvature.outliers import count_outliers
from collapselab.curvature.papyan import CENTRINGS
from collapselab.theory.dlufm import (
    ClosedForm,
    DeepLinearUFM,
    DeepUFM,
    UFMParameters,
    balancedness_residuals,
    exact_optimum,
    require_nontrivial,
)
from collapselab.theory.dlufm_layerwise import (
    dnc_metrics,
    extended_error_moment,
    feature_class_means,
    feature_gram,
    gradient_covariance,
    layer_data,
    layer_gradient,
    layer_hessian,
    layer_papyan_decomposition,
    predicted_eigenvectors,
    weight_product,
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
    """A predicted spectrum: the rank, the non-zero eigenvalues (descending) and, when the
    prediction was given a point, the predicted eigenvectors.

    Attributes:
        rank: the number of non-zero eigenvalues.
        eigenvalues: ``(rank,)``, descending.
        eigenvectors: ``None`` (no point given), or ``(m, D)`` unnormalised rows in the
            matrix's coordinates (the layer's flattening ``order`` for the ``P x P``
            matrices), built from the point's class means and weight products. With
            ``m = rank`` row ``j`` is an eigenvector of ``eigenvalues[j]``; otherwise the
            non-zero eigenvalues are all equal and the rows span their eigenspace (a
            spanning set: ``m`` may exceed ``rank``, and any vector of a degenerate
            eigenspace is an eigenvector, so each row is checked as one).
    """

    rank: int
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray | None = None

    def __post_init__(self) -> None:
        vectors = self.eigenvectors
        if vectors is None:
            return
        if vectors.ndim != 2:
            raise ValueError(f"eigenvectors must be 2-D (m, D), got shape {vectors.shape}")
        if vectors.shape[0] != self.rank and np.ptp(self.eigenvalues) != 0:
            raise ValueError(
                f"eigenvectors has {vectors.shape[0]} rows for {self.rank} eigenvalues that "
                "are not all equal; expected one row per eigenvalue"
            )

    @classmethod
    def equal(
        cls, rank: int, value: float, eigenvectors: np.ndarray | None = None
    ) -> SpectrumPrediction:
        """``rank`` equal eigenvalues ``value`` (and their eigenvectors or spanning set)."""
        return cls(rank, np.full(rank, float(value)), eigenvectors)

    def vector_eigenvalues(self) -> np.ndarray:
        """``(m,)``: the predicted eigenvalue of each row of :attr:`eigenvectors`."""
        if self.eigenvectors is None:
            raise ValueError("this prediction has no eigenvectors; pass point= to predict them")
        m = self.eigenvectors.shape[0]
        return self.eigenvalues.copy() if m == self.rank else np.full(m, self.eigenvalues[0])

    def eigenvector_residual(self, matrix: np.ndarray) -> float:
        r"""``max_v ‖Mv − λ_v v‖ / (λ_max ‖v‖)`` over the rows ``v`` of :attr:`eigenvectors`,
        ``λ_v`` the row's predicted eigenvalue (:meth:`vector_eigenvalues`) and ``λ_max``
        the largest predicted ``|λ|`` (``= ‖M‖₂`` when the prediction holds): the backward
        error of the predicted pairs, 0 exactly when every row is an eigenvector of
        ``matrix`` with its predicted eigenvalue (rounding gives ``~1e-16``, also for
        Theorem E.2's small eigenvalue ``(1−t*)²‖a‖²``); 0 for no rows (rank 0)."""
        values = self.vector_eigenvalues()
        vectors = self.eigenvectors
        if vectors.shape[0] == 0:
            return 0.0
        res = vectors @ np.asarray(matrix).T - values[:, None] * vectors
        scale = np.abs(self.eigenvalues).max() * np.linalg.norm(vectors, axis=1)
        return float(np.max(np.linalg.norm(res, axis=1) / scale))


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


def _class_means(model: DeepUFM, point: object, layer: int) -> np.ndarray:
    """``(K, d_l)``: rows ``h̄^{(l)}_k`` of the point's features, ``l = 1..L+1``."""
    return feature_class_means(model, model.features(point)[layer - 1])


def predict_dnc(model: DeepLinearUFM) -> dict[str, np.ndarray]:
    r"""Theorem 3.1, per layer ``l = 1..L+1`` (index ``l − 1``; ``L+1`` the outputs), under
    the keys of :func:`~collapselab.theory.dlufm_layerwise.dnc_metrics`: ``dnc1``,
    ``orthogonal_frame``, ``etf_distance``, ``equinorm``, ``equiangle``, ``maxangle`` and
    ``dnc3`` 0 (DNC1-3: the means form an orthogonal frame, so the centred means a simplex
    ETF), ``mean_norm_sq`` ``‖h̄^{(l)}‖²``, ``dnc3_scale`` the ``c_l`` of
    ``W_{L:l} = c_l M_lᵀ`` (:attr:`~collapselab.theory.dlufm.ClosedForm.dnc3_scale`),
    ``self_duality`` and ``self_duality_classwise`` ``2 − 2√((K−1)/K)`` (``W_{L:l}``'s rows
    ``∝ h̄_k`` against the centred ``h̃_k``: ``cos = √((K−1)/K)``); and ``weight_gram`` the
    ``s_l`` of ``W_{L:l}W_{L:l}ᵀ = s_l I_K`` (``Π_{j≥l} σ_{W_j}²``,
    :attr:`~collapselab.theory.dlufm.ClosedForm.row_norm_sq`; ``l = L``: ``W_LW_Lᵀ``).
    The weight keys are NaN at ``L+1``, as :func:`dnc_metrics` measures them for
    ``l = 1..L`` only."""
    form = _form(model)
    size, k = model.n_layers + 1, model.n_classes
    duality = np.full(model.n_layers, 2 - 2 * math.sqrt((k - 1) / k))
    out = {key: np.zeros(size) for key in ("dnc1", "orthogonal_frame", "etf_distance")}
    out |= {key: np.zeros(size) for key in ("equinorm", "equiangle", "maxangle")}
    return out | {
        "mean_norm_sq": form.mean_norm_sq.copy(),
        "dnc3": np.append(np.zeros(model.n_layers), np.nan),
        "dnc3_scale": np.append(form.dnc3_scale[:-1], np.nan),
        "self_duality": np.append(duality, np.nan),
        "self_duality_classwise": np.append(duality, np.nan),
        "weight_gram": np.append(form.row_norm_sq[:-1], np.nan),
    }


def predict_hessian(
    model: DeepLinearUFM, layer: int, *, point: object | None = None, order: str = "row"
) -> SpectrumPrediction:
    r"""Theorem 4.1: rank ``K²``, every non-zero eigenvalue ``λ_out(l)`` (without ``+λI``);
    with ``point``, the eigenvectors ``v_{kk'} = h̄^{(l+1)}_k ⊗ h̄^{(l)}_{k'}`` (``K²`` rows,
    :func:`~collapselab.theory.dlufm_layerwise.predicted_eigenvectors`) in ``order``."""
    form, ell = _form(model), _layer(model, layer)
    order = check_choice("order", order, ORDERS)
    vectors = None if point is None else predicted_eigenvectors(model, point, ell, order=order)
    return SpectrumPrediction.equal(model.n_classes**2, form.hessian_outlier[ell - 1], vectors)


def predict_papyan(
    model: DeepLinearUFM,
    layer: int,
    *,
    point: object | None = None,
    centring: str = "logit",
    order: str = "row",
) -> dict[str, SpectrumPrediction]:
    r"""Theorem 4.2 (either centring): ``within`` rank 0, ``cross`` rank ``K(K−1)``,
    ``class`` rank ``K``, every non-zero eigenvalue ``λ_out(l)``.

    With ``point``, their eigenvectors from its class means ``h̄ = h̄^{(l)}``, ``h̄' =
    h̄^{(l+1)}`` (``G`` means global means; rows in ``order``): for ``centring="logit"``
    (the paper's) ``cross``: ``(h̄'_c − h̄'_G) ⊗ h̄_k`` and ``class``: ``h̄'_G ⊗ h̄_k``; for
    ``"class"`` ``cross``: ``h̄'_c ⊗ (h̄_k − h̄_G)`` and ``class``: ``h̄'_c ⊗ h̄_G``
    (``c, k ∈ [K]``: ``K²`` rows spanning the ``K(K−1)`` cross space, ``K`` class rows);
    ``within`` has none (``(0, P)``).
    """
    form, ell, k = _form(model), _layer(model, layer), model.n_classes
    centring = check_choice("centring", centring, CENTRINGS)
    order = check_choice("order", order, ORDERS)
    value = form.hessian_outlier[ell - 1]
    vectors = (
        dict.fromkeys(("class", "cross", "within"))
        if point is None
        else _papyan_vectors(model, point, ell, centring, order)
    )
    return {
        "class": SpectrumPrediction.equal(k, value, vectors["class"]),
        "cross": SpectrumPrediction.equal(k * (k - 1), value, vectors["cross"]),
        "within": SpectrumPrediction.equal(0, value, vectors["within"]),
    }


def _papyan_vectors(
    model: DeepUFM, point: object, ell: int, centring: str, order: str
) -> dict[str, np.ndarray]:
    """Theorem 4.2's eigenvectors (see :func:`predict_papyan`)."""
    means, means_next = layer_data(model, point, ell).class_means()  # (K, d_l), (K, d_{l+1})
    k = model.n_classes
    if centring == "logit":
        outer, inner = means_next - means_next.mean(axis=0), means
        klass = kron_pairs(np.tile(means_next.mean(axis=0), (k, 1)), means, order=order)
    else:
        outer, inner = means_next, means - means.mean(axis=0)
        klass = kron_pairs(means_next, np.tile(means.mean(axis=0), (k, 1)), order=order)
    cross = kron_pairs(np.repeat(outer, k, axis=0), np.tile(inner, (k, 1)), order=order)
    return {
        "class": klass.numpy(),
        "cross": cross.numpy(),
        "within": np.zeros((0, cross.shape[1])),
    }


def predict_gradient(model: DeepLinearUFM, layer: int) -> GradientPrediction:
    """Theorem 4.3: ``g_l = β_l Σ_k v_{kk}`` (:class:`GradientPrediction`)."""
    form, ell, k = _form(model), _layer(model, layer), model.n_classes
    beta = float(form.gradient_coefficient[ell - 1])
    cosines = (np.sign(beta) / math.sqrt(k)) * np.eye(k).ravel()
    return GradientPrediction(beta, cosines, k)


def predict_weights(
    model: DeepLinearUFM, layer: int, *, point: object | None = None
) -> SpectrumPrediction:
    r"""Theorem 4.4: ``W_lW_lᵀ`` has rank ``K``, eigenvalues
    ``(λ_{H_1}/λ_{W_l}) n‖h̄^{(1)}‖² = σ_{W_l}²``; with ``point``, the eigenvectors: the
    class means ``h̄^{(l+1)}_k`` of the layer's outputs (``K`` rows of length ``d_{l+1}``;
    ``W_l = σ_{W_l} U_{l+1}U_lᵀ`` at the optimum, with ``U_{l+1}`` their normalised frame)."""
    form, ell = _form(model), _layer(model, layer)
    value = model.lambda_h / model.lambda_w[ell - 1] * model.n_per_class * form.mean_norm_sq[0]
    vectors = None if point is None else _class_means(model, point, ell + 1)
    return SpectrumPrediction.equal(model.n_classes, value, vectors)


def predict_gradient_covariance(
    model: DeepLinearUFM,
    layer: int,
    *,
    centred: bool = True,
    variant: str = "corrected",
    point: object | None = None,
    order: str = "row",
) -> SpectrumPrediction:
    r"""Theorem E.1: the per-sample gradients at the optimum are ``κ(t*−1) a_k ⊗ h̄^{(l)}_k``,
    ``K`` orthogonal vectors of squared norm ``ν = κ²(1−t*)²‖a‖²‖h̄^{(l)}‖²``, so the centred
    covariance has ``K − 1`` eigenvalues ``ν/K`` and the uncentred second moment ``K``.

    ``variant="published"``: the theorem's count ``K − 1`` whichever matrix (it names the
    second moment); ``"corrected"``: ``K − 1`` centred, ``K`` uncentred (module docstring).
    With ``point`` (``a_k`` the rows of its ``W_{L:l+1}``, rows in ``order``), the
    eigenvectors: ``K − 1`` predicted: the centred ``a_k ⊗ h̄_k − (1/K) Σ_j a_j ⊗ h̄_j``
    (``K`` rows spanning ``K − 1`` dimensions, the theorem's set); ``K`` predicted: the
    ``a_k ⊗ h̄_k``.
    """
    variant = check_choice("variant", variant, VARIANTS)
    order = check_choice("order", order, ORDERS)
    form, ell, k = _form(model), _layer(model, layer), model.n_classes
    nu = (  # ‖a‖² of layer l: the rows of W_{L:l+1}, s_{l+1}
        (model.kappa * (1 - form.t_star)) ** 2 * form.row_norm_sq[ell] * form.mean_norm_sq[ell - 1]
    )
    rank = k - 1 if (centred or variant == "published") else k
    vectors = None
    if point is not None:
        rows = weight_product(model, point, ell + 1)  # a_k
        vectors = kron_pairs(rows, _class_means(model, point, ell), order=order).numpy()
        if rank == k - 1:
            vectors = vectors - vectors.mean(axis=0)
    return SpectrumPrediction.equal(rank, nu / k, vectors)


def predict_extended_errors(
    model: DeepLinearUFM, layer: int, *, point: object | None = None
) -> SpectrumPrediction:
    r"""Theorem E.2: rank ``K``; ``K − 1`` eigenvalues ``(1 + t*²)‖a‖²`` and one smaller
    ``(1 − t*)²‖a‖²`` (``a`` the rows of ``W_{L:l+1}``; the paper's ``α`` is ``t*``).

    With ``point``, one eigenvector per eigenvalue (``K`` rows of length ``d_{l+1}``): the
    differences ``h̄^{(l+1)}_k − h̄^{(l+1)}_K`` (``k < K``; ``∝ a_k − a_K``) for the
    ``K − 1`` large ones, then ``Σ_k h̄^{(l+1)}_k`` for the small one.
    """
    form, ell, k = _form(model), _layer(model, layer), model.n_classes
    rows = form.row_norm_sq[ell]  # ‖a‖²: the rows of W_{L:l+1}, s_{l+1}
    t = form.t_star
    values = np.append(np.full(k - 1, (1 + t * t) * rows), (1 - t) ** 2 * rows)
    vectors = None
    if point is not None:
        means = _class_means(model, point, ell + 1)
        vectors = np.vstack([means[:-1] - means[-1], means.sum(axis=0)])
    return SpectrumPrediction(k, values, vectors)


def predict_features(
    model: DeepLinearUFM, layer: int, *, point: object | None = None
) -> SpectrumPrediction:
    """Theorem E.3: ``H_lH_lᵀ = n M_lM_lᵀ`` has ``K`` eigenvalues ``n‖h̄^{(l)}‖²``,
    ``l = 1..L+1`` (``L+1``: the outputs, ``n t*²``); with ``point``, the eigenvectors: its
    class means ``h̄^{(l)}_k`` (``K`` rows of length ``d_l``)."""
    form, ell = _form(model), _layer(model, layer, outputs=True)
    vectors = None if point is None else _class_means(model, point, ell)
    return SpectrumPrediction.equal(
        model.n_classes, model.n_per_class * form.mean_norm_sq[ell - 1], vectors
    )


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


def _eigenvalues(matrix: np.ndarray) -> np.ndarray:
    return dense_spectrum(matrix).numpy()


def _rank(values: np.ndarray, rtol: float) -> int:
    """The numerical rank of a spectrum: values of magnitude above ``rtol`` times the
    largest (a threshold count, :func:`~collapselab.curvature.count_outliers`)."""
    if not values.size:
        return 0
    return count_outliers(np.abs(values), "threshold", threshold=rtol)


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
    gradient norm), Thm 3.1 (DNC1-3 and NC2/NC3 per layer, ``W_{L:l}W_{L:l}ᵀ = s_l I_K``
    for ``l = 1..L``, ``l = L`` being ``W_LW_Lᵀ``), 4.1 (rank, eigenvalues, eigenvectors
    ``v_{kk'}``), 4.2 (both centrings: ranks of the parts and of the knockouts, eigenvalues,
    eigenvectors, ``G_within``, the images' overlap, ``G = G_class + G_cross + G_within``),
    4.3 (``g_l = β_l Σ v_{kk}``, natural-basis cosines, ``g_l = −λ_{W_l} w_l``), 4.4 (rank,
    eigenvalues, eigenvectors, balancedness), E.1 (covariance; second moment corrected and
    published), E.2 and E.3 (rank, eigenvalues, eigenvectors). Ranks count eigenvalues
    above ``rank_rtol`` times the largest. An eigenvector check's error is
    :meth:`SpectrumPrediction.eigenvector_residual` of the predictions built from ``point``.
    """
    form = _form(model)
    p = exact_optimum(model, seed) if point is None else model.check_point(point)
    order = check_choice("order", order, ORDERS)
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
    _verify_dnc(out, model, p)
    out.add("4.4", "balancedness", 0, balancedness_residuals(model, p), 0.0)
    at = _Checked(out, model, p, order, rank_rtol)
    for ell in layer_list:
        for verify in _LAYER_THEOREMS:
            verify(at, ell)
    for ell in range(1, model.n_layers + 2):
        _verify_features(at, ell)
    return out


@dataclass(frozen=True)
class _Checked:
    """What every per-layer theorem check reads: the verification it adds to, the model,
    the point, the layout ``order`` and the rank tolerance ``rtol``."""

    out: DLUFMVerification
    model: DeepLinearUFM
    p: UFMParameters
    order: str
    rtol: float


def _verify_dnc(out: DLUFMVerification, model: DeepLinearUFM, p: UFMParameters) -> None:
    """Theorem 3.1: the collapse metrics of every layer and ``W_{L:l}W_{L:l}ᵀ = s_l I_K``."""
    dnc, pred = dnc_metrics(model, p), predict_dnc(model)
    every_layer = ("dnc1", "orthogonal_frame", "etf_distance", "mean_norm_sq")
    for key in (*every_layer, "equinorm", "equiangle", "maxangle"):
        out.add("3.1", key, 0, dnc[key], pred[key])
    for key in ("dnc3", "dnc3_scale", "self_duality", "self_duality_classwise"):
        out.add("3.1", key, 0, dnc[key][:-1], pred[key][:-1])
    eye = np.eye(model.n_classes)
    for ell in range(1, model.n_layers + 1):
        prod = weight_product(model, p, ell)
        predicted = pred["weight_gram"][ell - 1] * eye
        out.add("3.1", "W_{L:l}W_{L:l}^T = s_l I_K", ell, prod @ prod.T, predicted)


def _verify_hessian(at: _Checked, ell: int) -> None:
    """Theorem 4.1, and the Kronecker formula against the data formula."""
    out, model, p, order, rtol = at.out, at.model, at.p, at.order, at.rtol
    hess = layer_hessian(model, p, ell, method="data", order=order)
    pred = predict_hessian(model, ell, point=p, order=order)
    values = _check_spectrum(out, "4.1", ell, pred, hess, rtol, vectors="eigenvectors v_kk'")
    kron = layer_hessian(model, p, ell, method="kronecker", order=order)
    out.add("4.1", "Kronecker = data formula", ell, np.abs(kron - hess).max() / values[0], 0.0)


def _verify_papyan(at: _Checked, ell: int) -> None:
    """Theorem 4.2 under both centrings."""
    out, model, p, order, rtol = at.out, at.model, at.p, at.order, at.rtol
    k = model.n_classes
    hess = layer_hessian(model, p, ell, method="data", order=order)
    scale = _eigenvalues(hess)[0]
    for centring in CENTRINGS:
        parts = predict_papyan(model, ell, point=p, centring=centring, order=order)
        dec = layer_papyan_decomposition(model, p, ell, centring=centring, order=order)
        tag = f"({centring} centring)"
        ranks = dec.ranks(rtol)
        for name, prediction in parts.items():
            out.add_count("4.2", f"rank {name} {tag}", ell, ranks[name], prediction.rank)
        out.add_count("4.2", f"rank G - G_class {tag}", ell, ranks["without_class"], k * (k - 1))
        out.add_count("4.2", f"rank G - G_cross {tag}", ell, ranks["without_cross"], k)
        out.add_count("4.2", f"rank G - G_within {tag}", ell, ranks["without_within"], k * k)
        dense = {name: part.dense().numpy() for name, part in dec.parts().items()}
        for name in ("class", "cross"):
            got = _eigenvalues(dense[name])[: parts[name].rank]
            out.add("4.2", f"eigenvalues {name} {tag}", ell, got, parts[name].eigenvalues)
            residual = parts[name].eigenvector_residual(dense[name])
            out.add("4.2", f"eigenvectors {name} {tag}", ell, residual, 0.0)
        G = dec.ggn.dense().numpy()
        within = np.linalg.norm(dense["within"]) / np.linalg.norm(G)
        out.add("4.2", f"||G_within|| / ||G|| {tag}", ell, within, 0.0)
        out.add("4.2", f"image overlap {tag}", ell, dec.image_overlap(), 0.0)
        total = dense["class"] + dense["cross"] + dense["within"]
        summed = np.abs(total - G).max() / np.abs(G).max()
        out.add("4.2", f"sum of parts = G {tag}", ell, summed, 0.0)
        out.add("4.2", f"G = Hessian {tag}", ell, np.abs(G - hess).max() / scale, 0.0)


def _verify_gradient(at: _Checked, ell: int) -> None:
    """Theorem 4.3."""
    out, model, p, order = at.out, at.model, at.p, at.order
    k = model.n_classes
    pred = predict_gradient(model, ell)
    vectors = predicted_eigenvectors(model, p, ell, order=order)
    g = layer_gradient(model, p, ell, order=order)
    predicted = pred.coefficient * vectors[:: k + 1].sum(axis=0)
    out.add(
        "4.3",
        "g_l = beta_l sum_k v_kk",
        ell,
        np.linalg.norm(g - predicted) / np.linalg.norm(g),
        0.0,
    )
    cosines = gradient_coefficients(g, vectors.T).numpy()
    out.add("4.3", "natural-basis cosines", ell, np.abs(cosines - pred.cosines).max(), 0.0)
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


def _verify_weights(at: _Checked, ell: int) -> None:
    """Theorem 4.4 (the balancedness residuals are checked once, in :func:`verify_dlufm`)."""
    out, model, p, rtol = at.out, at.model, at.p, at.rtol
    pred = predict_weights(model, ell, point=p)
    gram = p.W[ell - 1] @ p.W[ell - 1].T
    _check_spectrum(out, "4.4", ell, pred, gram, rtol, values=weight_spectra(p)[ell - 1])


def _verify_covariance(at: _Checked, ell: int) -> None:
    """Theorem E.1: the covariance, and the second moment corrected and published."""
    out, model, p, order, rtol = at.out, at.model, at.p, at.order, at.rtol
    for centred in (True, False):
        matrix = gradient_covariance(model, p, ell, centred=centred, order=order)
        values = _eigenvalues(matrix)
        name = "covariance" if centred else "second moment"
        for variant in ("corrected",) if centred else VARIANTS:
            pred = predict_gradient_covariance(
                model, ell, centred=centred, variant=variant, point=p, order=order
            )
            tag = "published" if variant == "published" else ""
            out.add_count("E.1", f"rank {name}", ell, _rank(values, rtol), pred.rank, variant=tag)
            if variant == "corrected":
                out.add("E.1", f"eigenvalues {name}", ell, values[: pred.rank], pred.eigenvalues)
                residual = pred.eigenvector_residual(matrix)
                out.add("E.1", f"eigenvectors {name}", ell, residual, 0.0)


def _verify_extended_errors(at: _Checked, ell: int) -> None:
    """Theorem E.2."""
    out, model, p, rtol = at.out, at.model, at.p, at.rtol
    pred = predict_extended_errors(model, ell, point=p)
    _check_spectrum(out, "E.2", ell, pred, extended_error_moment(model, p, ell), rtol)


_LAYER_THEOREMS = (
    _verify_hessian,
    _verify_papyan,
    _verify_gradient,
    _verify_weights,
    _verify_covariance,
    _verify_extended_errors,
)
"""The checks of Theorems 4.1-4.4, E.1 and E.2 at one layer, in the order they are added."""


def _verify_features(at: _Checked, ell: int) -> None:
    """Theorem E.3 at ``l = 1..L+1``."""
    out, model, p, rtol = at.out, at.model, at.p, at.rtol
    pred = predict_features(model, ell, point=p)
    _check_spectrum(out, "E.3", ell, pred, feature_gram(model, p, ell), rtol)


def _check_spectrum(
    out: DLUFMVerification,
    theorem: str,
    ell: int,
    pred: SpectrumPrediction,
    matrix: np.ndarray,
    rtol: float,
    *,
    values: np.ndarray | None = None,
    vectors: str = "eigenvectors",
) -> np.ndarray:
    """The rank, the top eigenvalues and the eigenvectors of ``matrix`` against ``pred``
    (``values``: its descending spectrum when already known); returns that spectrum."""
    values = _eigenvalues(matrix) if values is None else values
    out.add_count(theorem, "rank", ell, _rank(values, rtol), pred.rank)
    out.add(theorem, "eigenvalues", ell, values[: pred.rank], pred.eigenvalues)
    out.add(theorem, vectors, ell, pred.eigenvector_residual(matrix), 0.0)
    return values
