r"""Layer-wise matrices of a deep UFM (paper 004 §4, Apps. A-G; note 004 §3.8-3.14, §4).

Everything is taken with respect to one layer's weights ``W_l`` (``l = 1..L``), flattened
row-major by default, ``w_l = vec_row(W_l)`` (the paper's "standard way", note §2), or
column-major (``order="column"``), which swaps every Kronecker product's factors. With
``h_i = h^{(l)}_{ki}`` the layer's input for sample ``i = (k, i)`` and
``A_i = ∂f_i/∂(W_l h_i) = W_L D_{L−1,i} W_{L−1} ⋯ W_{l+1} D_{l,i}`` (``K x d_{l+1}``;
``W_{L:l+1}`` for every sample of the linear model; ``I_K`` at ``l = L``), the Jacobian of
the outputs is ``J_i = A_i ⊗ h_iᵀ`` and, for the per-sample loss ``(κ/2)‖f − y‖²``
(:attr:`~collapselab.theory.dlufm.DeepUFM.kappa`, 1 by default):

* **Hessian** of the data term (the paper's ``H_l``; the regularisation adds ``λ_{W_l} I``):
  ``(κ/N) Σ_i J_iᵀJ_i = (κ/N) Σ_i (A_iᵀA_i) ⊗ h_ih_iᵀ`` (App. F, ``method="data"``), which
  for the linear model is the Kronecker product ``κ (W_{L:l+1}ᵀW_{L:l+1}) ⊗ (1/N)H_lH_lᵀ``
  (App. A, ``method="kronecker"``); ``method="autodiff"`` differentiates the model as an
  ``nn.Module`` twice. The Hessian of a piece-wise linear model with MSE equals its
  Gauss-Newton part ``G`` (the ReLU second derivative vanishes almost everywhere).
* **Papyan's decomposition** (Eq. 3, App. B; :func:`papyan_decomposition`) of
  ``G = (κ/N) Σ_{k,i,c} δ_{c,k,i} δ_{c,k,i}ᵀ`` with ``δ_{c,k,i} = (row c of A_i) ⊗ h_i``, under
  two centrings: over the logit index ``c`` (the paper's, ``centring="logit"``): with
  ``δ_{c,k} = mean_i δ_{c,k,i}`` and ``δ_k = mean_c δ_{c,k}``,
  ``G_within = (κ/N) Σ (δ_{c,k,i} − δ_{c,k})(·)ᵀ``, ``G_cross = (κ/K) Σ_{c,k} (δ_{c,k} − δ_k)(·)ᵀ``,
  ``G_class = κ Σ_k δ_kδ_kᵀ`` (a second moment: the paper keeps the global-mean term); or
  over the feature class ``k`` (``centring="class"``): ``δ'_c = mean_k δ_{c,k}``,
  ``G'_cross = (κ/K) Σ (δ_{c,k} − δ'_c)(·)ᵀ``, ``G'_class = κ Σ_c δ'_cδ'_cᵀ``. Both sum to ``G``.
* **Gradient** of the data term (the paper's ``g_l``, App. C):
  ``g_l = (κ/N) Σ_i J_iᵀ r_i = (κ/N) Σ_i (A_iᵀ r_i) ⊗ h_i``, ``r_i = f_i − y_i``; the full
  gradient is ``g_l + λ_{W_l} w_l``. Per-sample gradients ``κ (A_iᵀr_i) ⊗ h_i`` give the
  gradient covariance and second moment (App. E.1).
* **Predicted eigenvectors** (Theorem 4.1): ``v_{kk'} = h̄^{(l+1)}_k ⊗ h̄^{(l)}_{k'}`` from the
  current class means, row ``k K + k'``; their alignment ``a(v) = ⟨Hv, v⟩/(‖Hv‖‖v‖)``
  (Fig. 4, Table 1), the natural-basis gradient coefficients (Fig. 7), Gur-Ari's ``f_top``,
  the top-subspace overlap and the coefficients on the true eigenvectors (Table 2).
* **Extended back-propagated errors** (App. E.2): ``e_{i,c'} = A_iᵀ(f_i − e_{c'})``, the
  error at the pre-activation ``W_l h_i`` as if the label were ``c'``, and their second
  moment ``(1/N) Σ_i Σ_{c'} e_{i,c'}e_{i,c'}ᵀ``.
* **Gram tables** (App. G.2): Table 3's ``W_{L:l}W_{L:l}ᵀ`` and Table 4's
  ``(1/N) Σ_i B_iB_iᵀ`` with ``B_i = ∂f_i/∂h^{(l)}_i = A_i W_l`` (the paper's indices are
  ambiguous, note §8.13: both tables use the product from the output down to ``W_l``
  here, so they coincide for the linear model).

All matrices are dense float64 numpy: the layers are small (``P = d_{l+1} d_l``, a few
hundred) and every eigendecomposition is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from collapselab.checks import as_real_array, check_choice, check_float, check_int
from collapselab.metrics import self_duality, self_duality_classwise
from collapselab.metrics.matrix import matrix_metrics
from collapselab.theory.dlufm import DeepUFM, UFMParameters

if TYPE_CHECKING:  # scipy is imported where it is used (library start-up time)
    from scipy.sparse.linalg import LinearOperator

__all__ = [
    "CENTRINGS",
    "DNC_KEYS",
    "HESSIAN_METHODS",
    "ORDERS",
    "LayerData",
    "PapyanDecomposition",
    "PreactivationSigns",
    "count_outliers",
    "descending_eigh",
    "dnc_metrics",
    "eigenvector_alignment",
    "extended_error_moment",
    "feature_class_means",
    "feature_gram",
    "gauss_newton_split",
    "gradient_coefficients",
    "gradient_covariance",
    "gram_tables",
    "kron_pairs",
    "layer_data",
    "layer_gradient",
    "layer_hessian",
    "layer_hessian_operator",
    "layer_hessian_top",
    "papyan_decomposition",
    "preactivation_signs",
    "predicted_eigenvectors",
    "rounding_bound",
    "subspace_overlap",
    "top_fraction",
    "true_eigenvector_coefficients",
    "weight_product",
    "weight_spectra",
]

ORDERS = ("row", "column")
HESSIAN_METHODS = ("kronecker", "data", "autodiff")
CENTRINGS = ("logit", "class")


# ---------------------------------------------------------------------------------------
# what every layer-wise quantity reads


@dataclass(frozen=True, eq=False)
class LayerData:
    """The quantities of one layer at one point (:func:`layer_data`).

    Attributes:
        model, point, layer: the model, the point, ``l`` (1-based).
        h: ``(d_l, N)`` inputs ``h^{(l)}`` of ``W_l``.
        h_next: ``(d_{l+1}, N)`` features ``h^{(l+1)}`` (the outputs at ``l = L``).
        back: ``(N, K, d_{l+1})`` ``A_i = ∂f_i/∂(W_l h_i)`` per sample.
        residual: ``(K, N)`` ``f − Y``.
    """

    model: DeepUFM
    point: UFMParameters
    layer: int
    h: np.ndarray
    h_next: np.ndarray
    back: np.ndarray
    residual: np.ndarray

    @property
    def dim(self) -> int:
        """``P = d_{l+1} d_l``."""
        return self.h.shape[0] * self.h_next.shape[0]

    def jacobian(self, order: str = "row") -> np.ndarray:
        """``(N, K, P)``: ``J_i = A_i ⊗ h_iᵀ`` (row-major) or ``h_iᵀ ⊗ A_i`` (column-major)."""
        order = check_choice("order", order, ORDERS)
        if order == "row":
            jac = np.einsum("ica,bi->icab", self.back, self.h)
        else:
            jac = np.einsum("ica,bi->icba", self.back, self.h)
        return jac.reshape(self.back.shape[0], self.back.shape[1], self.dim)

    def class_means(self) -> tuple[np.ndarray, np.ndarray]:
        """``(M_l, M_{l+1})``: ``(d_l, K)`` and ``(d_{l+1}, K)`` class means."""
        return feature_class_means(self.model, self.h), feature_class_means(self.model, self.h_next)


def feature_class_means(model: DeepUFM, features: np.ndarray) -> np.ndarray:
    """``M = [h̄_1, …, h̄_K]`` ``(d, K)``: the class means of ``(d, N)`` features whose
    columns are the model's class-major samples (``n`` per class)."""
    return features.reshape(features.shape[0], model.n_classes, model.n_per_class).mean(axis=2)


def _layer(model: DeepUFM, layer: int) -> int:
    return check_int("layer", layer, minimum=1, maximum=model.n_layers)


def layer_data(model: DeepUFM, point: object, layer: int) -> LayerData:
    """The inputs, outputs, per-sample back-propagation matrices ``A_i`` and residuals of
    layer ``l`` (:class:`LayerData`)."""
    p = model.check_point(point)
    ell = _layer(model, layer)
    feats, pre = model._forward(p)
    n, k = model.n_samples, model.n_classes
    back = np.broadcast_to(np.eye(k), (n, k, k)).copy()
    for j in range(model.n_layers, ell, -1):  # multiply by W_j, then by the mask after W_{j-1}
        back = back @ p.W[j - 1]
        mask = model._act_mask(pre[j - 2])
        if mask is not None:
            back = back * mask.T[:, None, :]
    return LayerData(model, p, ell, feats[ell - 1], feats[ell], back, feats[-1] - model.targets)


def _product(weights: Sequence[np.ndarray], start: int, k: int) -> np.ndarray:
    """``W_{L:start} = W_L ⋯ W_start`` (1-based; ``I_K`` when ``start = L + 1``)."""
    out = np.eye(k)
    for w in reversed(weights[start - 1 :]):
        out = out @ w
    return out


def weight_product(model: DeepUFM, point: object, start: int) -> np.ndarray:
    r"""``W_{L:l} = W_L W_{L−1} ⋯ W_l`` (``K x d_l``, note 004 §2) for ``l = start`` in
    ``1..L+1`` (``I_K`` at ``L+1``). Its rows are the ``a_c`` of the theorems when
    ``start = l + 1``; Theorem 3.1 predicts ``W_{L:l}W_{L:l}ᵀ ∝ I_K`` at the optimum."""
    p = model.check_point(point)
    start = check_int("start", start, minimum=1, maximum=model.n_layers + 1)
    return _product(p.W, start, model.n_classes)


# ---------------------------------------------------------------------------------------
# the Hessian, three ways


def _kronecker_hessian(data: LayerData, order: str) -> np.ndarray:
    model = data.model
    if model.activation != "identity":
        raise ValueError(
            "the Kronecker formula (App. A) holds for the linear model only; use "
            "method='data' (App. F) or 'autodiff' for a DeepReLUUFM"
        )
    left = _product(data.point.W, data.layer + 1, model.n_classes)
    gram_left = left.T @ left
    gram_right = data.h @ data.h.T / model.n_samples
    if order == "row":
        return model.kappa * np.kron(gram_left, gram_right)
    return model.kappa * np.kron(gram_right, gram_left)


def _data_hessian(data: LayerData, order: str) -> np.ndarray:
    jac = data.jacobian(order).reshape(-1, data.dim)
    return data.model.kappa / data.model.n_samples * (jac.T @ jac)


def _autodiff_hessian(data: LayerData, order: str) -> np.ndarray:
    from torch.func import functional_call

    module = data.model.as_module(data.point)
    name = f"layers.{data.layer}.weight"
    weight = dict(module.named_parameters())[name].detach()
    eye = torch.eye(data.model.n_samples, dtype=torch.float64)
    shape = weight.shape

    def loss(flat: torch.Tensor) -> torch.Tensor:
        w = flat.reshape(shape) if order == "row" else flat.reshape(shape[1], shape[0]).T
        return module.loss(functional_call(module, {name: w}, (eye,)))

    start = weight.reshape(-1) if order == "row" else weight.T.reshape(-1)
    hess = torch.autograd.functional.hessian(loss, start.clone(), vectorize=True)
    return hess.numpy().astype(np.float64)


def layer_hessian(
    model: DeepUFM,
    point: object,
    layer: int,
    *,
    method: str = "data",
    order: str = "row",
    regularised: bool = False,
) -> np.ndarray:
    r"""The layer-wise Hessian ``∇²_{w_l}`` of the data term, ``(P, P)``.

    Args:
        method: ``"kronecker"`` (App. A, linear model only), ``"data"`` (App. F, the
            per-sample form, any model) or ``"autodiff"`` (torch, on
            :meth:`~collapselab.theory.dlufm.DeepUFM.as_module`).
        order: ``"row"`` (``vec_row(W_l)``, the paper's) or ``"column"``.
        regularised: add ``λ_{W_l} I`` (the Hessian of ``F`` itself); the paper omits it.
    """
    method = check_choice("method", method, HESSIAN_METHODS)
    order = check_choice("order", order, ORDERS)
    data = layer_data(model, point, layer)
    if method == "kronecker":
        hess = _kronecker_hessian(data, order)
    elif method == "data":
        hess = _data_hessian(data, order)
    else:
        hess = _autodiff_hessian(data, order)
    if regularised:
        hess = hess + model.lambda_w[data.layer - 1] * np.eye(data.dim)
    return hess


def gauss_newton_split(
    model: DeepUFM, point: object, layer: int, *, order: str = "row"
) -> tuple[np.ndarray, np.ndarray]:
    r"""The Gauss-Newton split ``H_l = G_l + H̃_l`` of the layer-wise Hessian of the data
    term (paper 004 §2.2 and §4.2, note 004 §3.9), returned as ``(G, H̃)``, each ``(P, P)``:

    .. math::
        G_l = \frac{κ}{N} \sum_i J_i^T J_i, \qquad
        H̃_l = H_l − G_l = \frac{κ}{N} \sum_i \sum_c r_{ic} \nabla^2_{w_l} f_{ic},

    ``G_l`` from the data formula (``∂²ℓ/∂f² = κ I_K`` for the MSE; Papyan's decomposition
    sums to it) and ``H_l`` by autodiff (:func:`layer_hessian` with ``method="autodiff"``,
    without ``+λI``). ``H̃_l = 0`` up to rounding for the linear model (``f`` is linear in
    ``W_l``) and for the ReLU model away from its kinks (piece-wise linear), so there the
    Hessian *is* its Gauss-Newton part. ``order`` as in :func:`layer_hessian`.
    """
    order = check_choice("order", order, ORDERS)
    data = layer_data(model, point, layer)
    gauss_newton = _data_hessian(data, order)
    return gauss_newton, _autodiff_hessian(data, order) - gauss_newton


def layer_hessian_operator(
    model: DeepUFM, point: object, layer: int, *, order: str = "row", regularised: bool = False
) -> LinearOperator:
    r"""The layer-wise Hessian of :func:`layer_hessian` as a matrix-free scipy
    ``LinearOperator`` (Hessian-vector products, never the ``P x P`` matrix), from the
    per-sample form of App. F: with ``V`` the ``(d_{l+1}, d_l)`` matrix of ``v``,

    .. math::
        H_l v = \frac{κ}{N} \sum_i \mathrm{vec}\big(A_i^T A_i V h_i h_i^T\big)
              \;(+ λ_{W_l} v),

    ``O(N K d_{l+1} + N d_{l+1} d_l)`` per product; ``order`` as in :func:`layer_hessian`.
    """
    order = check_choice("order", order, ORDERS)
    data = layer_data(model, point, layer)
    rows, cols = data.h_next.shape[0], data.h.shape[0]
    shift = model.lambda_w[data.layer - 1] if regularised else 0.0
    factor = model.kappa / model.n_samples

    def matvec(v: np.ndarray) -> np.ndarray:
        flat = np.asarray(v, dtype=np.float64).ravel()
        mat = flat.reshape(rows, cols) if order == "row" else flat.reshape(cols, rows).T
        signal = np.einsum("ab,bi->ia", mat, data.h)  # V h_i, (N, d_{l+1})
        pulled = np.einsum("ica,ic->ia", data.back, np.einsum("icb,ib->ic", data.back, signal))
        out = factor * (pulled.T @ data.h.T)  # Σ_i A_iᵀA_i V h_i h_iᵀ
        out = out.ravel() if order == "row" else out.T.ravel()
        return out + shift * flat

    from scipy.sparse.linalg import LinearOperator

    return LinearOperator((data.dim, data.dim), matvec=matvec, dtype=np.float64)


def layer_hessian_top(
    model: DeepUFM,
    point: object,
    layer: int,
    k: int,
    *,
    order: str = "row",
    regularised: bool = False,
    tol: float = 0.0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenpairs of the layer-wise Hessian by Lanczos (scipy ``eigsh``
    on :func:`layer_hessian_operator`), for widths where the dense ``P x P`` matrix of
    :func:`layer_hessian` is too large: eigenvalues descending, eigenvectors as columns.

    Args:
        k: ``1 <= k < P``.
        tol: ``eigsh``'s relative accuracy (0: machine precision).
        seed: seed of the starting vector.
    """
    operator = layer_hessian_operator(model, point, layer, order=order, regularised=regularised)
    dim = operator.shape[0]
    k = check_int("k", k, minimum=1, maximum=dim - 1)
    start = np.random.default_rng(seed).standard_normal(dim)
    from scipy.sparse.linalg import eigsh

    values, vectors = eigsh(operator, k=k, which="LA", tol=tol, v0=start)
    order_desc = np.argsort(values)[::-1]
    return values[order_desc], vectors[:, order_desc]


def descending_eigh(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and eigenvectors (columns, same order) of a symmetric matrix."""
    values, vectors = np.linalg.eigh(0.5 * (matrix + matrix.T))
    return values[::-1].copy(), vectors[:, ::-1].copy()


def count_outliers(
    eigenvalues: object, *, rule: str = "gap", rtol: float = 1e-6, floor: float = 1e-12
) -> int:
    r"""How many of the largest eigenvalues are outliers.

    ``rule="threshold"``: those above ``rtol · λ_max``. ``rule="gap"``: those above the
    largest ratio ``λ_j/λ_{j+1}`` between consecutive sorted eigenvalues, each clamped
    below at ``floor · λ_max`` (so an exactly zero bulk sits at the floor); all of them
    when every eigenvalue is equal. 0 for a spectrum without a positive eigenvalue.
    """
    values = np.sort(np.asarray(eigenvalues, dtype=np.float64).ravel())[::-1]
    rule = check_choice("rule", rule, ("gap", "threshold"))
    top = float(values[0]) if values.size else 0.0
    if top <= 0:
        return 0
    if rule == "threshold":
        return int(np.sum(values > check_float("rtol", rtol, minimum=0.0) * top))
    clamped = np.log(
        np.maximum(values, check_float("floor", floor, minimum=0.0, strict=True) * top)
    )
    if values.size < 2:
        return int(values.size)
    ratios = clamped[:-1] - clamped[1:]
    return int(values.size) if ratios.max() <= 0 else int(np.argmax(ratios) + 1)


# ---------------------------------------------------------------------------------------
# Papyan's decomposition


@dataclass(frozen=True, eq=False)
class PapyanDecomposition:
    """``G = G_class + G_cross + G_within`` (Eq. 3) of one layer; see the module docstring.

    Attributes:
        G, G_class, G_cross, G_within: ``(P, P)``. centring: ``"logit"`` or ``"class"``.
    """

    G: np.ndarray
    G_class: np.ndarray
    G_cross: np.ndarray
    G_within: np.ndarray
    centring: str

    def parts(self) -> dict[str, np.ndarray]:
        """``{"class": G_class, "cross": G_cross, "within": G_within}``."""
        return {"class": self.G_class, "cross": self.G_cross, "within": self.G_within}

    def knockout_spectra(self) -> dict[str, np.ndarray]:
        """Descending eigenvalues of ``G`` (``"none"``) and of ``G`` minus each part."""
        out = {"none": descending_eigh(self.G)[0]}
        for name, part in self.parts().items():
            out[name] = descending_eigh(self.G - part)[0]
        return out

    def ranks(self, rtol: float = 1e-8) -> dict[str, int]:
        """Numerical ranks (eigenvalues above ``rtol · λ_max(G)``) of ``G``, its parts and
        the knockouts ``G − part`` (keys ``"without_class"``, ...)."""
        scale = max(float(np.abs(descending_eigh(self.G)[0]).max()), np.finfo(float).tiny)

        def rank(m: np.ndarray) -> int:
            return int(np.sum(np.abs(np.linalg.eigvalsh(0.5 * (m + m.T))) > rtol * scale))

        out = {"G": rank(self.G)}
        for name, part in self.parts().items():
            out[name] = rank(part)
            out[f"without_{name}"] = rank(self.G - part)
        return out

    def image_overlap(self) -> float:
        """``‖G_class G_cross‖_F / (‖G_class‖_F ‖G_cross‖_F)``: 0 when the images of the two
        parts are orthogonal (Theorem 4.2), at most 1."""
        denom = np.linalg.norm(self.G_class) * np.linalg.norm(self.G_cross)
        return float(np.linalg.norm(self.G_class @ self.G_cross) / denom) if denom > 0 else 0.0


def papyan_decomposition(
    model: DeepUFM, point: object, layer: int, *, centring: str = "logit", order: str = "row"
) -> PapyanDecomposition:
    """Papyan's decomposition of the layer's Gauss-Newton matrix (module docstring)."""
    centring = check_choice("centring", centring, CENTRINGS)
    data = layer_data(model, point, layer)
    k, n, kappa = model.n_classes, model.n_per_class, model.kappa
    delta = data.jacobian(order).reshape(k, n, k, data.dim)  # [class k, sample i, logit c, :]
    means = delta.mean(axis=1)  # δ_{c,k} stored [k, c, :]
    dev = (delta - means[:, None]).reshape(-1, data.dim)
    within = kappa / model.n_samples * (dev.T @ dev)
    if centring == "logit":
        centre = means.mean(axis=1)  # δ_k, [k, :]
        spread = (means - centre[:, None]).reshape(-1, data.dim)
    else:
        centre = means.mean(axis=0)  # δ'_c, [c, :]
        spread = (means - centre[None]).reshape(-1, data.dim)
    cross = kappa / k * (spread.T @ spread)
    klass = kappa * (centre.T @ centre)
    flat = delta.reshape(-1, data.dim)
    return PapyanDecomposition(
        G=kappa / model.n_samples * (flat.T @ flat),
        G_class=klass,
        G_cross=cross,
        G_within=within,
        centring=centring,
    )


# ---------------------------------------------------------------------------------------
# gradients and eigenvectors


def layer_gradient(
    model: DeepUFM,
    point: object,
    layer: int,
    *,
    order: str = "row",
    per_sample: bool = False,
) -> np.ndarray:
    r"""``g_l = (κ/N) Σ_i (A_iᵀ r_i) ⊗ h_i``, the data term's gradient in ``w_l`` (``(P,)``);
    with ``per_sample`` the ``(N, P)`` per-sample gradients ``κ (A_iᵀr_i) ⊗ h_i`` of
    ``ℓ_i = (κ/2)‖f_i − y_i‖²`` (their mean is ``g_l``)."""
    data = layer_data(model, point, layer)
    per = model.kappa * np.einsum("icp,ci->ip", data.jacobian(order), data.residual)
    return per if per_sample else per.mean(axis=0)


def kron_pairs(outputs: np.ndarray, inputs: np.ndarray, *, order: str = "row") -> np.ndarray:
    r"""``(m, d_{l+1} d_l)``: row ``j`` is ``u_j ⊗ v_j`` (row-major, ``vec_row(u_jv_jᵀ)``) or
    ``v_j ⊗ u_j`` (column-major) for the paired rows ``u_j`` of ``outputs`` ``(m, d_{l+1})``
    and ``v_j`` of ``inputs`` ``(m, d_l)``: the flattened rank-one matrices ``u_jv_jᵀ`` in
    the space of ``W_l`` (the shape of every eigenvector the theorems predict)."""
    order = check_choice("order", order, ORDERS)
    left = as_real_array("outputs", outputs, ndim=2, layout="(m, d_{l+1})")
    right = as_real_array("inputs", inputs, ndim=2, layout="(m, d_l)")
    if left.shape[0] != right.shape[0]:
        raise ValueError(
            f"outputs and inputs must have one number of rows, got {left.shape[0]} and "
            f"{right.shape[0]}"
        )
    pairs = np.einsum("ja,jb->jab", left, right)
    return (pairs if order == "row" else pairs.transpose(0, 2, 1)).reshape(left.shape[0], -1)


def predicted_eigenvectors(
    model: DeepUFM, point: object, layer: int, *, order: str = "row"
) -> np.ndarray:
    r"""``(K², P)``: row ``k K + k'`` is ``v_{kk'} = h̄^{(l+1)}_k ⊗ h̄^{(l)}_{k'}`` (row-major;
    ``h̄^{(l)}_{k'} ⊗ h̄^{(l+1)}_k`` column-major) from the current class means (Theorem 4.1;
    unnormalised)."""
    means, means_next = layer_data(model, point, layer).class_means()
    k = model.n_classes
    return kron_pairs(np.repeat(means_next.T, k, axis=0), np.tile(means.T, (k, 1)), order=order)


def _square(name: str, matrix: object) -> np.ndarray:
    """``matrix`` as a float64 ``(P, P)`` array, or a ValueError naming its shape."""
    out = as_real_array(name, matrix, ndim=2, layout="(P, P)")
    if out.shape[0] != out.shape[1]:
        raise ValueError(f"{name} must be a square (P, P) matrix, got shape {out.shape}")
    return out


def _rows_of(name: str, vectors: object, dim: int, against: str) -> np.ndarray:
    """``vectors`` as float64 ``(m, dim)`` rows, ``dim`` fixed by ``against``."""
    out = as_real_array(name, vectors, ndim=2, layout="(m, P)")
    if out.shape[1] != dim:
        raise ValueError(
            f"{name} must have shape (m, {dim}) (rows of the {against}'s length {dim}), "
            f"got {out.shape}"
        )
    return out


def _gradient_of(gradient: object, dim: int, against: str, what: str) -> np.ndarray:
    """``gradient`` as a float64 non-zero ``(dim,)`` vector; ``what`` is undefined at 0."""
    out = as_real_array("gradient", gradient, ndim=1, layout="(P,)")
    if out.shape[0] != dim:
        raise ValueError(
            f"gradient must have shape ({dim},) to match the {against}, got {out.shape}"
        )
    if not np.any(out):
        raise ValueError(f"gradient is zero; {what} is undefined (it divides by ‖g‖)")
    return out


def eigenvector_alignment(hessian: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    r"""``a(v) = ⟨Hv, v⟩ / (‖Hv‖ ‖v‖)`` for each row ``v`` (Fig. 4, Table 1): 1 iff ``v`` is an
    eigenvector with a positive eigenvalue; NaN where ``Hv = 0`` or ``v = 0``.

    Args:
        hessian: ``(P, P)``. vectors: ``(m, P)``.
    """
    hessian = _square("hessian", hessian)
    vectors = _rows_of("vectors", vectors, hessian.shape[0], "hessian")
    hv = vectors @ hessian.T
    num = np.einsum("ij,ij->i", hv, vectors)
    den = np.linalg.norm(hv, axis=1) * np.linalg.norm(vectors, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def gradient_coefficients(
    gradient: np.ndarray, vectors: np.ndarray, *, normalise: str = "cosine"
) -> np.ndarray:
    r"""Coefficients of ``g`` on each row ``v`` (Fig. 7): ``"cosine"``
    ``⟨g, v⟩/(‖g‖‖v‖)`` (``±1/√K`` on the diagonal at the optimum), ``"raw"`` ``⟨g, v/‖v‖⟩``
    (``β_l ‖v_{kk}‖`` there); 0 on a zero row ``v``.

    Args:
        gradient: ``(P,)``, non-zero for ``"cosine"`` (the cosine of 0 is undefined).
        vectors: ``(m, P)``.
    """
    normalise = check_choice("normalise", normalise, ("cosine", "raw"))
    vectors = as_real_array("vectors", vectors, ndim=2, layout="(m, P)")
    if normalise == "raw":
        gradient = as_real_array("gradient", gradient, shape=(vectors.shape[1],))
    else:
        gradient = _gradient_of(
            gradient, vectors.shape[1], "rows of vectors", "its cosine with the vectors"
        )
    norms = np.linalg.norm(vectors, axis=1)
    raw = (vectors @ gradient) / np.where(norms > 0, norms, 1.0)
    return raw if normalise == "raw" else raw / float(np.linalg.norm(gradient))


def _top_vectors(hessian: object, k: int) -> np.ndarray:
    """``(P, k)``: the top-``k`` eigenvectors of a checked square ``hessian``."""
    matrix = _square("hessian", hessian)
    k = check_int("k", k, minimum=1, maximum=matrix.shape[0])
    return descending_eigh(matrix)[1][:, :k]


def top_fraction(hessian: np.ndarray, gradient: np.ndarray, k: int) -> float:
    r"""Gur-Ari's ``f_top = ‖P_top g‖² / ‖g‖²``, ``P_top`` the projector on the top-``k``
    eigenvectors of the Hessian (§2.3; note 004 §3.10).

    Args:
        hessian: ``(P, P)`` symmetric. gradient: ``(P,)``, non-zero. k: ``1..P``.
    """
    top = _top_vectors(hessian, k)
    g = _gradient_of(gradient, top.shape[0], "hessian", "f_top = ‖P_top g‖²/‖g‖²")
    return float(np.sum((top.T @ g) ** 2) / (g @ g))


def subspace_overlap(vectors_a: np.ndarray, vectors_b: np.ndarray) -> float:
    r"""``Tr(P_a P_b)/k = ‖A_aᵀA_b‖²_F/k`` for two ``(P, k)`` orthonormal bases (columns):
    1 when the spans coincide, 0 when they are orthogonal (Gur-Ari's top-subspace overlap
    between checkpoints; note 004 §3.10)."""
    a = as_real_array("vectors_a", vectors_a, ndim=2, layout="(P, k)")
    b = as_real_array("vectors_b", vectors_b, ndim=2, layout="(P, k)")
    if a.shape != b.shape:
        raise ValueError(
            f"vectors_b must have the shape of vectors_a {a.shape} (P, k), got {b.shape}"
        )
    return float(np.sum((a.T @ b) ** 2) / a.shape[1])


def true_eigenvector_coefficients(hessian: np.ndarray, gradient: np.ndarray, k: int) -> np.ndarray:
    r"""``⟨g/‖g‖, u_j⟩`` for the top-``k`` eigenvectors ``u_j`` of the Hessian (Table 2; the
    signs of eigenvectors are arbitrary, so compare magnitudes).

    Args:
        hessian: ``(P, P)`` symmetric. gradient: ``(P,)``, non-zero. k: ``1..P``.
    """
    top = _top_vectors(hessian, k)
    g = _gradient_of(gradient, top.shape[0], "hessian", "its coefficient ⟨g/‖g‖, u_j⟩")
    return top.T @ g / float(np.linalg.norm(g))


# ---------------------------------------------------------------------------------------
# where the ReLU acts


def rounding_bound(n_terms: int) -> float:
    r"""``γ_n = n u/(1 − n u)``, ``u = 2^{-53}`` (float64's unit round-off): a float64 inner
    product of ``n`` terms differs from the exact one by at most ``γ_n Σ_a |x_a||y_a|``
    (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1), whatever the
    summation order."""
    n = check_int("n_terms", n_terms, minimum=1)
    u = 2.0**-53
    if n * u >= 1:
        raise ValueError(f"n_terms must be below 2^53, got {n}")
    return n * u / (1 - n * u)


@dataclass(frozen=True, eq=False)
class PreactivationSigns:
    r"""Where the ReLUs of a deep UFM act at one point (:func:`preactivation_signs`).

    For each rectified layer ``j`` (``W_j``'s pre-activations ``z = W_j h^{(j)} (+ b_j)``,
    ``j = 1..L−1``; with ``relu_on_features`` the free features ``H_1`` first, as
    ``j = 0``), an entry counts as **non-positive** when ``z ≤ τ`` with
    ``τ = γ_{m} (|W_j||h^{(j)}| + |b_j|)`` entrywise, ``m = d_j (+1)`` the terms summed
    (:func:`rounding_bound`): the sign of a ``z`` within ``τ`` of zero is not certified by
    float64 arithmetic, so only ``z > τ`` counts as strictly positive (``τ = 0`` for
    ``H_1``, which is stored, not computed).

    Attributes:
        layers: ``j`` of each entry below.
        nonpositive_fraction: the fraction of the ``d_{j+1} N`` entries that are
            non-positive (0: the ReLU after ``W_j`` truncates nothing).
        min_margin: the smallest ``z/(|W_j||h^{(j)}| + |b_j|)`` over the entries (the
            relative margin; ``z/|h|`` for ``H_1``; 0 for an entry whose scale is 0, whose
            ``z`` is then exactly 0): ``> γ_m`` exactly when the fraction is 0.
        dead_units: units ``z ≤ τ`` on every sample. mixed_units: units non-positive on
            some samples and strictly positive on others (the masks differ across samples).
    """

    layers: np.ndarray
    nonpositive_fraction: np.ndarray
    min_margin: np.ndarray
    dead_units: np.ndarray
    mixed_units: np.ndarray

    @property
    def locally_linear(self) -> bool:
        """Every rectified entry strictly positive: no ReLU truncates, so in a
        neighbourhood of the point the model *is* the deep linear UFM (same objective,
        gradient and Hessian)."""
        return bool(np.all(self.nonpositive_fraction == 0))


def preactivation_signs(model: DeepUFM, point: object) -> PreactivationSigns:
    r"""The signs of every rectified pre-activation of ``model`` at ``point``
    (:class:`PreactivationSigns`). For a :class:`~collapselab.theory.dlufm.DeepLinearUFM`
    the same entries (``W_j h^{(j)}``, ``j < L``) are read, though nothing rectifies them.

    Why it matters: where every entry is strictly positive, every mask ``D_j`` is the
    identity on a neighbourhood (finitely many strict inequalities, each continuous in
    the parameters), so the ReLU model's objective equals the linear model's there, and so
    do their gradients and Hessians (App. F's ``A_i`` becomes ``W_{L:l+1}`` for every
    sample and ``H_l`` the Kronecker product of App. A)."""
    p = model.check_point(point)
    feats, pre = model._forward(p)
    layers, fractions, margins, dead, mixed = [], [], [], [], []
    entries: list[tuple[int, np.ndarray, np.ndarray, float]] = []
    if getattr(model, "relu_on_features", False):
        entries.append((0, p.H, np.abs(p.H), 0.0))
    for j in range(1, model.n_layers):
        w, h = p.W[j - 1], feats[j - 1]
        scale = np.abs(w) @ np.abs(h)
        terms = w.shape[1]
        if p.b:
            scale = scale + np.abs(p.b[j - 1])[:, None]
            terms += 1
        entries.append((j, pre[j - 1], scale, rounding_bound(terms)))
    for j, z, scale, gamma in entries:
        nonpositive = z <= gamma * scale
        layers.append(j)
        fractions.append(float(np.mean(nonpositive)))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(scale > 0, z / np.where(scale > 0, scale, 1.0), 0.0)
        margins.append(float(np.min(ratio)))
        per_unit = nonpositive.sum(axis=1)
        dead.append(int(np.sum(per_unit == z.shape[1])))
        mixed.append(int(np.sum((per_unit > 0) & (per_unit < z.shape[1]))))
    return PreactivationSigns(
        np.asarray(layers, dtype=np.int64),
        np.asarray(fractions),
        np.asarray(margins),
        np.asarray(dead, dtype=np.int64),
        np.asarray(mixed, dtype=np.int64),
    )


# ---------------------------------------------------------------------------------------
# weights, Appendix E, Gram tables, DNC


def weight_spectra(point: UFMParameters) -> list[np.ndarray]:
    """Descending eigenvalues of ``W_lW_lᵀ`` for ``l = 1..L`` (Theorem 4.4, Figs 8, 11)."""
    return [np.linalg.eigvalsh(w @ w.T)[::-1].copy() for w in point.W]


def gradient_covariance(
    model: DeepUFM, point: object, layer: int, *, centred: bool = True, order: str = "row"
) -> np.ndarray:
    r"""``(1/N) Σ_i (∇ℓ_i − ḡ)(∇ℓ_i − ḡ)ᵀ`` (``centred``, Jastrzębski's covariance) or the
    second moment ``(1/N) Σ_i ∇ℓ_i∇ℓ_iᵀ`` of the per-sample data gradients in ``w_l``
    (App. E.1)."""
    per = layer_gradient(model, point, layer, order=order, per_sample=True)
    if centred:
        per = per - per.mean(axis=0)
    return per.T @ per / per.shape[0]


def extended_error_moment(model: DeepUFM, point: object, layer: int) -> np.ndarray:
    r"""``(1/N) Σ_i Σ_{c'} e_{i,c'} e_{i,c'}ᵀ``, ``e_{i,c'} = A_iᵀ(f_i − e_{c'})`` (App. E.2),
    ``(d_{l+1}, d_{l+1})``."""
    data = layer_data(model, point, layer)
    outputs = data.residual + model.targets  # (K, N)
    k = model.n_classes
    diffs = outputs.T[:, None, :] - np.eye(k)[None]  # [i, c', :] = f_i − e_{c'}
    errors = np.einsum("ica,ijc->ija", data.back, diffs).reshape(-1, data.h_next.shape[0])
    return errors.T @ errors / model.n_samples


def feature_gram(model: DeepUFM, point: object, layer: int) -> np.ndarray:
    """``H_lH_lᵀ`` for ``l = 1..L+1`` (App. E.3; ``L+1``: the outputs)."""
    ell = check_int("layer", layer, minimum=1, maximum=model.n_layers + 1)
    h = model.features(point)[ell - 1]
    return h @ h.T


def gram_tables(model: DeepUFM, point: object, layer: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Tables 3 and 4 at layer ``l``: ``W_{L:l}W_{L:l}ᵀ`` and ``(1/N) Σ_i B_iB_iᵀ`` with
    ``B_i = ∂f_i/∂h^{(l)}_i = A_i W_l`` (``K x K`` each; equal for the linear model)."""
    data = layer_data(model, point, layer)
    prod = _product(data.point.W, data.layer, model.n_classes)
    b = data.back @ data.point.W[data.layer - 1]
    return prod @ prod.T, np.einsum("ica,ida->cd", b, b) / model.n_samples


_MEASURED = {
    "dnc1": "nc1",
    "orthogonal_frame": "nc2_orthogonal_frame",
    "etf_distance": "nc2_etf_distance",
    "equinorm": "nc2_equinorm_means",
    "equiangle": "nc2_equiangle_means",
    "maxangle": "nc2_maxangle_means",
}
"""dnc_metrics' keys computed by the catalogue's formulas
(:func:`~collapselab.metrics.matrix.matrix_metrics`, as :func:`collapselab.measure` gives them)."""

DNC_KEYS = (
    *_MEASURED,
    "mean_norm_sq",
    "dnc3",
    "dnc3_scale",
    "self_duality",
    "self_duality_classwise",
)


def dnc_metrics(model: DeepUFM, point: object) -> dict[str, np.ndarray]:
    r"""Deep-neural-collapse metrics of every layer ``l = 1..L+1`` (``(L+1,)`` arrays; the
    last entry is the outputs), with the class means ``h̄_k = h̄^{(l)}_k``, their centred
    ``h̃_k = h̄_k − h̄_G`` and ``M_l = [h̄_k]`` (note 004 §3.7, §4 M1-M9):

    * ``dnc1``: ``Tr(Σ_W Σ_B†)/K`` (the catalogue's ``nc1``, paper §5.1's DNC1);
    * ``orthogonal_frame``: ``‖MᵀM/‖MᵀM‖_F − I/√K‖_F`` of the uncentred class means (the
      catalogue's ``nc2_orthogonal_frame``, DNC2);
    * ``etf_distance``: the globally centred class means' distance to a simplex ETF (the
      catalogue's ``nc2_etf_distance``; an orthogonal frame centres to an ETF);
    * NC2 of the centred means, as the catalogue defines it (note 003 §2.3):
      ``equinorm`` ``Std_k ‖h̃_k‖ / Avg_k ‖h̃_k‖`` (``nc2_equinorm_means``), ``equiangle``
      ``Std_{k<k'} cos(h̃_k, h̃_{k'})`` (``nc2_equiangle_means``) and ``maxangle``
      ``Avg_{k≠k'} |cos(h̃_k, h̃_{k'}) + 1/(K−1)|`` (``nc2_maxangle_means``); standard
      deviations unbiased (``ddof = 1``);
    * ``mean_norm_sq``: the mean over classes of ``‖h̄^{(l)}_k‖²``;
    * ``dnc3``: ``‖W_{L:l}/‖W_{L:l}‖_F − M_lᵀ/‖M_l‖_F‖_F`` (DNC3, NaN at ``L+1``);
    * ``dnc3_scale``: the least-squares ``c`` of ``W_{L:l} ≈ c M_lᵀ`` (NaN at ``L+1``);
    * NC3 of ``W_{L:l}`` against the *centred* means (NaN at ``L+1``), the catalogue's
      :func:`~collapselab.metrics.self_duality` ``‖W/‖W‖_F − M̃ᵀ/‖M̃‖_F‖²_F``
      (``self_duality``) and :func:`~collapselab.metrics.self_duality_classwise`
      ``Avg_k ‖w_k/‖w_k‖ − h̃_k/‖h̃_k‖‖²`` (``self_duality_classwise``).

    At a global optimum (Theorem 3.1) the means form an orthogonal frame, so the centred
    means form a simplex ETF: every NC1/NC2 value and ``dnc3`` is 0, while the NC3 values
    are ``2 − 2√((K−1)/K)`` (``W_{L:l} ∝ M_lᵀ`` is aligned with the *uncentred* means:
    ``cos(h̄_k, h̃_k) = √((K−1)/K)``).

    NaN where a metric is undefined (class means all equal, zero features or weights).
    """
    p = model.check_point(point)
    out = {key: np.full(model.n_layers + 1, np.nan) for key in DNC_KEYS}
    for i, h in enumerate(model._forward(p)[0]):
        means = feature_class_means(model, h)
        out["mean_norm_sq"][i] = float(np.mean(np.sum(means**2, axis=0)))
        for key, value in _measured(model, h).items():
            out[key][i] = value
        if i < model.n_layers:
            prod = _product(p.W, i + 1, model.n_classes)
            for key, value in _duality(prod, means).items():
                out[key][i] = value
    return out


def _measured(model: DeepUFM, h: np.ndarray) -> dict[str, float]:
    """The catalogue's NC1/NC2 values of the ``(d, N)`` features ``h`` (empty where undefined)."""
    try:
        values = matrix_metrics(
            h.T, model.labels, n_classes=model.n_classes, keys=list(_MEASURED.values())
        )
    except (ValueError, OverflowError):
        return {}  # degenerate class means (the zero optimum, or ~1e-300 on the way)
    return {key: values[name] for key, name in _MEASURED.items()}


def _duality(prod: np.ndarray, means: np.ndarray) -> dict[str, float]:
    """DNC3 of ``W_{L:l}`` against the uncentred ``(d, K)`` means and NC3 against the centred
    ones (the catalogue's :func:`~collapselab.metrics.self_duality`); empty where undefined."""
    out: dict[str, float] = {}
    pn, mn = np.linalg.norm(prod), np.linalg.norm(means)
    if pn > 0 and mn > 0:
        out["dnc3"] = float(np.linalg.norm(prod / pn - means.T / mn))
        out["dnc3_scale"] = float(np.sum(prod * means.T) / mn**2)
    centred = (means - means.mean(axis=1, keepdims=True)).T
    try:
        out["self_duality"] = self_duality(prod, centred)
        out["self_duality_classwise"] = self_duality_classwise(prod, centred)
    except ValueError:
        pass  # zero weights or zero centred means
    return out
