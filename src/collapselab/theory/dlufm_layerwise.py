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
* **Papyan's decomposition** (Eq. 3, App. B; :func:`layer_papyan_decomposition`) of
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
  current class means, row ``k K + k'``.
* **Extended back-propagated errors** (App. E.2): ``e_{i,c'} = A_iᵀ(f_i − e_{c'})``, the
  error at the pre-activation ``W_l h_i`` as if the label were ``c'``, and their second
  moment ``(1/N) Σ_i Σ_{c'} e_{i,c'}e_{i,c'}ᵀ``.
* **Gram tables** (App. G.2): Table 3's ``W_{L:l}W_{L:l}ᵀ`` and Table 4's
  ``(1/N) Σ_i B_iB_iᵀ`` with ``B_i = ∂f_i/∂h^{(l)}_i = A_i W_l`` (the paper's indices are
  ambiguous, note §8.13: both tables use the product from the output down to ``W_l``
  here, so they coincide for the linear model).

**Layers and layout** (docs/theory.md, Conventions). Layer ``l`` counts from 1: its
weights are ``W_l`` (``d_{l+1} x d_l``), its input ``h^{(l)}`` (``l = L + 1`` names the
outputs, where a function takes it) and its product ``W_{L:l} = W_L W_{L−1} ⋯ W_l``
(:func:`weight_product`; ``W_{L:L+1} = I_K``); the functions take ``layer = l`` and
per-layer arrays and lists hold layer ``l`` at index ``l − 1``. Sample-indexed arrays are
rows: :class:`LayerData`'s inputs ``(N, d_l)``, residuals ``(N, K)``, per-sample gradients
``(N, P)``; class means are ``(K, d_l)`` rows ``h̄^{(l)}_k``
(:func:`feature_class_means`). The formulas above are the paper's, in columns
(``H_l = [h_i]``, ``d_l x N``); the code evaluates them on those column matrices.

All matrices are dense float64 numpy: the layers are small (``P = d_{l+1} d_l``, a few
hundred) and every eigendecomposition is exact. What is measured *on* them is the
curvature vocabulary of :mod:`collapselab.curvature`, the one the matrix-free networks
use: a matrix becomes a :class:`~collapselab.curvature.DenseOperator` (its exact
eigenpairs, ``DenseOperator(H).eigenpairs()``), Papyan's decomposition a
:class:`~collapselab.curvature.PapyanDecomposition` (knock-outs, ranks, image overlap), and
the outlier count (:func:`~collapselab.curvature.count_outliers`), the alignment ``a(v)``
of the predicted eigenvectors (Fig. 4, Table 1), the natural-basis and true-eigenvector
gradient coefficients (Fig. 7, Table 2), Gur-Ari's ``f_top`` and the top-subspace overlap
are that package's functions. :func:`layer_hessian_operator` is the layer's Hessian as a
matrix-free :class:`~collapselab.curvature.CurvatureOperator` (wide layers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from collapselab.checks import check_choice, check_int
from collapselab.curvature.alignment import ORDERS, kron_pairs
from collapselab.curvature.eigen import top_eigenpairs
from collapselab.curvature.operators import CurvatureOperator, DenseOperator
from collapselab.curvature.papyan import (
    CENTRINGS,
    ClassPairMeans,
    PapyanDecomposition,
    decompose,
)
from collapselab.metrics import self_duality, self_duality_classwise
from collapselab.metrics.matrix import matrix_metrics
from collapselab.theory.dlufm import DeepUFM, UFMParameters

__all__ = [
    "DNC_KEYS",
    "HESSIAN_METHODS",
    "LayerData",
    "PreactivationSigns",
    "dnc_metrics",
    "extended_error_moment",
    "feature_class_means",
    "feature_gram",
    "gauss_newton_split",
    "gradient_covariance",
    "gram_tables",
    "layer_data",
    "layer_gradient",
    "layer_hessian",
    "layer_hessian_operator",
    "layer_hessian_top",
    "layer_papyan_decomposition",
    "preactivation_signs",
    "predicted_eigenvectors",
    "rounding_bound",
    "weight_product",
    "weight_spectra",
]

HESSIAN_METHODS = ("kronecker", "data", "autodiff")


# ---------------------------------------------------------------------------------------
# what every layer-wise quantity reads


@dataclass(frozen=True, eq=False)
class LayerData:
    """The quantities of one layer at one point (:func:`layer_data`).

    Attributes:
        model, point, layer: the model, the point, ``l`` (1-based).
        h: ``(N, d_l)`` inputs ``h^{(l)}`` of ``W_l``, one row per sample (``H_lᵀ``).
        h_next: ``(N, d_{l+1})`` features ``h^{(l+1)}`` (the outputs at ``l = L``).
        back: ``(N, K, d_{l+1})`` ``A_i = ∂f_i/∂(W_l h_i)`` per sample.
        residual: ``(N, K)`` rows ``f_i − y_i``.
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
        return self.h.shape[1] * self.h_next.shape[1]

    def jacobian(self, order: str = "row") -> np.ndarray:
        """``(N, K, P)``: ``J_i = A_i ⊗ h_iᵀ`` (row-major) or ``h_iᵀ ⊗ A_i`` (column-major)."""
        order = check_choice("order", order, ORDERS)
        h = self.h.T  # the paper's H_l, (d_l, N)
        if order == "row":
            jac = np.einsum("ica,bi->icab", self.back, h)
        else:
            jac = np.einsum("ica,bi->icba", self.back, h)
        return jac.reshape(self.back.shape[0], self.back.shape[1], self.dim)

    def class_means(self) -> tuple[np.ndarray, np.ndarray]:
        """``(M_lᵀ, M_{l+1}ᵀ)``: ``(K, d_l)`` and ``(K, d_{l+1})``, row ``k`` the class mean
        ``h̄_k`` of the layer's inputs and of its outputs."""
        return feature_class_means(self.model, self.h), feature_class_means(self.model, self.h_next)


def feature_class_means(model: DeepUFM, features: np.ndarray) -> np.ndarray:
    """``M_lᵀ`` ``(K, d)``: row ``k`` is the class mean ``h̄_k`` of ``(N, d)`` features whose
    rows are the model's class-major samples (``n`` per class)."""
    return _column_means(model, features.T).T


def _column_means(model: DeepUFM, h: np.ndarray) -> np.ndarray:
    """The paper's ``M = [h̄_1, …, h̄_K]`` ``(d, K)`` of ``(d, N)`` column features."""
    return h.reshape(h.shape[0], model.n_classes, model.n_per_class).mean(axis=2)


def _layer(model: DeepUFM, layer: int) -> int:
    return check_int("layer", layer, minimum=1, maximum=model.n_layers)


def layer_data(model: DeepUFM, point: object, layer: int) -> LayerData:
    """The inputs, outputs, per-sample back-propagation matrices ``A_i`` and residuals of
    layer ``l = 1..L`` (:class:`LayerData`; ``A_i`` is ``W_{L:l+1}`` with the masks between,
    ``I_K`` at ``l = L``)."""
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
    residual = feats[-1] - model.targets.T  # f − Y, (K, N)
    return LayerData(model, p, ell, feats[ell - 1].T, feats[ell].T, back, residual.T)


def _product(weights: Sequence[np.ndarray], start: int, k: int) -> np.ndarray:
    """``W_{L:start} = W_L ⋯ W_start`` (1-based; ``I_K`` when ``start = L + 1``), multiplied
    from the empty product ``I_K`` down: ``((I_K W_L) W_{L−1}) ⋯ W_start``."""
    out = np.eye(k)
    for w in reversed(weights[start - 1 :]):
        out = out @ w
    return out


def weight_product(model: DeepUFM, point: object, start: int) -> np.ndarray:
    r"""``W_{L:l} = W_L W_{L−1} ⋯ W_l`` (``K x d_l``, note 004 §2) for ``l = start`` in
    ``1..L+1`` (``I_K`` at ``L+1``): the product of layer ``l`` (everything from the
    output down to and including ``W_l``). Theorem 3.1 predicts ``W_{L:l}W_{L:l}ᵀ ∝ I_K``
    and ``W_{L:l} ∝ M_lᵀ`` at the optimum; the theorems of layer ``l`` read the rows
    ``a_c`` of the *next* product, ``weight_product(model, point, l + 1)``."""
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
    gram_right = data.h.T @ data.h / model.n_samples  # (1/N) H_l H_lᵀ
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


class _LayerHessian(CurvatureOperator):
    """The layer-wise Hessian of one :class:`LayerData`, matrix-free
    (:func:`layer_hessian_operator`)."""

    def __init__(self, data: LayerData, order: str, shift: float) -> None:
        self.h = torch.from_numpy(np.ascontiguousarray(data.h.T))  # the paper's H_l, (d_l, N)
        self.back = torch.from_numpy(np.ascontiguousarray(data.back))  # (N, K, d_{l+1})
        self.rows, self.cols = data.h_next.shape[1], data.h.shape[1]
        self.order, self.shift = order, shift
        self.factor = data.model.kappa / data.model.n_samples
        self.dim = data.dim
        self.dtype = torch.float64
        self.device = torch.device("cpu")

    def matmat(self, V: torch.Tensor | np.ndarray) -> torch.Tensor | np.ndarray:
        """``H V`` (or ``H v``); a numpy ``V`` (the theory's arrays) gives a numpy result."""
        if isinstance(V, np.ndarray):
            return super().matmat(torch.from_numpy(np.asarray(V, dtype=np.float64))).numpy()
        return super().matmat(V)

    def _matmat(self, V: torch.Tensor) -> torch.Tensor:
        m = V.shape[1]
        if self.order == "row":
            mats = V.T.reshape(m, self.rows, self.cols)
        else:
            mats = V.T.reshape(m, self.cols, self.rows).transpose(1, 2)
        signal = torch.einsum("mab,bi->mia", mats, self.h)  # V h_i, (m, N, d_{l+1})
        inner = torch.einsum("icb,mib->mic", self.back, signal)  # A_i V h_i
        pulled = torch.einsum("ica,mic->mia", self.back, inner)  # A_iᵀA_i V h_i
        out = self.factor * torch.einsum("mia,bi->mab", pulled, self.h)  # Σ_i (·) h_iᵀ
        if self.order == "column":
            out = out.transpose(1, 2)
        return out.reshape(m, -1).T + self.shift * V


def layer_hessian_operator(
    model: DeepUFM, point: object, layer: int, *, order: str = "row", regularised: bool = False
) -> CurvatureOperator:
    r"""The layer-wise Hessian of :func:`layer_hessian` as a matrix-free float64
    :class:`~collapselab.curvature.CurvatureOperator` (Hessian-vector products, never the
    ``P x P`` matrix), from the per-sample form of App. F: with ``V`` the
    ``(d_{l+1}, d_l)`` matrix of ``v``,

    .. math::
        H_l v = \frac{κ}{N} \sum_i \mathrm{vec}\big(A_i^T A_i V h_i h_i^T\big)
              \;(+ λ_{W_l} v),

    ``O(N K d_{l+1} + N d_{l+1} d_l)`` per product; ``order`` as in :func:`layer_hessian`.
    Its products take torch tensors, or numpy arrays (returned as numpy arrays).
    """
    order = check_choice("order", order, ORDERS)
    data = layer_data(model, point, layer)
    shift = model.lambda_w[data.layer - 1] if regularised else 0.0
    return _LayerHessian(data, order, shift)


def layer_hessian_top(
    model: DeepUFM,
    point: object,
    layer: int,
    k: int,
    *,
    order: str = "row",
    regularised: bool = False,
    tol: float = 1e-12,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenpairs of the layer-wise Hessian by Lanczos
    (:func:`~collapselab.curvature.top_eigenpairs` on :func:`layer_hessian_operator`), for
    widths where the dense ``P x P`` matrix of :func:`layer_hessian` is too large:
    eigenvalues descending, eigenvectors as columns.

    Args:
        k: ``1 <= k < P``.
        tol: the relative residual tolerance, ``‖Hu − θu‖ <= tol · |θ|``.
        seed: seed of the starting block.
    """
    operator = layer_hessian_operator(model, point, layer, order=order, regularised=regularised)
    k = check_int("k", k, minimum=1, maximum=operator.dim - 1)
    pairs = top_eigenpairs(operator, k, tol=tol, seed=seed)
    return pairs.values.numpy(), pairs.vectors.numpy()


# ---------------------------------------------------------------------------------------
# Papyan's decomposition


def layer_papyan_decomposition(
    model: DeepUFM, point: object, layer: int, *, centring: str = "logit", order: str = "row"
) -> PapyanDecomposition:
    r"""Papyan's decomposition (Eq. 3, App. B) of the layer's Gauss-Newton matrix, as the
    curvature package's :class:`~collapselab.curvature.PapyanDecomposition` (module
    docstring): ``G`` and ``G_within`` are dense (:class:`~collapselab.curvature.DenseOperator`,
    ``G_within`` from its definition, so that it is exactly 0 where every feature equals
    its class mean), ``G_class`` and ``G_cross`` the factors of
    :func:`~collapselab.curvature.decompose` from the class-pair means ``δ_{c,k}`` with the
    masses ``W_{c,k} = κ n/N = κ/K`` (the MSE's output Hessian is ``κ I_K``).
    """
    centring = check_choice("centring", centring, CENTRINGS)
    data = layer_data(model, point, layer)
    k, n, kappa = model.n_classes, model.n_per_class, model.kappa
    delta = data.jacobian(order).reshape(k, n, k, data.dim)  # [class k, sample i, logit c, :]
    means = delta.mean(axis=1)  # δ_{c,k} stored [k, c, :]
    dev = (delta - means[:, None]).reshape(-1, data.dim)
    flat = delta.reshape(-1, data.dim)
    pairs = ClassPairMeans(
        means=torch.from_numpy(means.transpose(1, 0, 2).copy()),  # (C, K, P)
        masses=torch.full((k, k), kappa / k, dtype=torch.float64),
        counts=torch.full((k,), n, dtype=torch.long),
    )
    return decompose(
        DenseOperator(kappa / model.n_samples * (flat.T @ flat)),
        pairs,
        centring=centring,
        within=DenseOperator(kappa / model.n_samples * (dev.T @ dev)),
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
    per = model.kappa * np.einsum("icp,ci->ip", data.jacobian(order), data.residual.T)
    return per if per_sample else per.mean(axis=0)


def predicted_eigenvectors(
    model: DeepUFM, point: object, layer: int, *, order: str = "row"
) -> np.ndarray:
    r"""``(K², P)``: row ``k K + k'`` is ``v_{kk'} = h̄^{(l+1)}_k ⊗ h̄^{(l)}_{k'}`` (row-major;
    ``h̄^{(l)}_{k'} ⊗ h̄^{(l+1)}_k`` column-major) from the current class means of layer
    ``l``'s inputs and outputs (Theorem 4.1; unnormalised)."""
    means, means_next = layer_data(model, point, layer).class_means()
    k = model.n_classes
    pairs = kron_pairs(np.repeat(means_next, k, axis=0), np.tile(means, (k, 1)), order=order)
    return pairs.numpy()


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
    outputs = data.residual.T + model.targets.T  # (K, N)
    k = model.n_classes
    diffs = outputs.T[:, None, :] - np.eye(k)[None]  # [i, c', :] = f_i − e_{c'}
    errors = np.einsum("ica,ijc->ija", data.back, diffs).reshape(-1, data.h_next.shape[1])
    return errors.T @ errors / model.n_samples


def feature_gram(model: DeepUFM, point: object, layer: int) -> np.ndarray:
    """``H_lH_lᵀ = Σ_i h_ih_iᵀ`` ``(d_l, d_l)`` for ``l = 1..L+1`` (App. E.3; ``L+1``: the
    outputs)."""
    ell = check_int("layer", layer, minimum=1, maximum=model.n_layers + 1)
    h = model.features(point)[ell - 1]  # (N, d_l)
    return h.T @ h


def gram_tables(model: DeepUFM, point: object, layer: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Tables 3 and 4 at layer ``l = 1..L``: ``W_{L:l}W_{L:l}ᵀ`` and ``(1/N) Σ_i B_iB_iᵀ``
    with ``B_i = ∂f_i/∂h^{(l)}_i = A_i W_l`` (``K x K`` each; equal for the linear model)."""
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
    for i, h in enumerate(model._forward(p)[0]):  # columns H_l, l = i + 1
        means = _column_means(model, h)
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
