r"""Alignment of gradients and predicted eigenvectors with curvature (paper 004 §3.10, M11),
for matrix-free and dense operators alike.

Vectors are columns: ``vectors (P, m)``, as :meth:`CurvatureOperator.matmat` takes them
and eigenpairs return them. Arguments may be tensors or NumPy arrays (the dense theory's,
:mod:`collapselab.theory.dlufm_layerwise`); results are tensors or floats.

* :func:`top_fraction` (Gur-Ari, Roberts & Dyer 2018; note 004 M14): the share of the
  gradient in the span of orthonormal top eigenvectors :math:`u_1..u_k`,
  :math:`f_{\text{top}} = \lVert U^\top g\rVert^2 / \lVert g\rVert^2`.
* :func:`subspace_overlap` (M15): :math:`\mathrm{tr}(P_U P_V)/k = \lVert U^\top V\rVert_F^2/k`
  for orthonormal ``U`` (``k`` columns) and ``V`` (``k'`` columns): 1 when
  :math:`\mathrm{span}\,U \subseteq \mathrm{span}\,V`, 0 when orthogonal, ``k'/P``
  expected for random subspaces.
* :func:`gradient_coefficients` (M16, Fig. 7, Table 2): the cosines
  :math:`\langle g, v_j\rangle / (\lVert g\rVert\lVert v_j\rVert)`, or the raw coefficients
  :math:`\langle g, v_j/\lVert v_j\rVert\rangle`; on orthonormal eigenvectors the cosines
  are :math:`\langle g/\lVert g\rVert, u_j\rangle`.
* :func:`kron_pairs` and :func:`kronecker_vectors` (Theorem 4.1): flattened rank-one
  matrices :math:`u v^\top` in the space of a weight matrix ``W_l (d_out, d_in)``; for the
  class means, the ``K²`` predicted eigenvectors
  :math:`v_{kk'} = \bar h^{(l+1)}_k \otimes \bar h^{(l)}_{k'}` (``vec_row`` order:
  PyTorch's flattening of ``W_l``). ``h^{(l+1)}`` is the input of the next weight layer
  ``W_{l+1}`` (note 004 §2: :math:`h^{(l+1)} = \sigma(W_l h^{(l)})` in a ReLU network; the
  rows of :math:`W_{L:l+1}` are proportional to its class means, DNC3), which
  :func:`module_class_means` reads with ``next_module``; in a linear network it is the
  layer's output.
* :func:`eigenvector_alignment` (M11, Fig. 4, Table 1): :math:`a(v) = \langle Av, v\rangle /
  (\lVert Av\rVert\,\lVert v\rVert)`, 1 exactly when ``v`` is an eigenvector with a positive
  eigenvalue, NaN where it is undefined (:math:`Av = 0` or :math:`v = 0`).
"""

from __future__ import annotations

import torch
from torch import nn

from collapselab.checks import as_tensor, check_choice, check_ndim
from collapselab.curvature.objective import Objective
from collapselab.curvature.operators import CurvatureOperator

ORDERS = ("row", "column")
"""Flattenings of a weight matrix: ``vec_row`` (PyTorch's) or ``vec_col``."""


def _tensor(name: str, x: object, ndim: int, layout: str) -> torch.Tensor:
    """``x`` (a tensor or NumPy array, memory shared) with ``ndim`` dimensions."""
    t = as_tensor(name, x)
    check_ndim(name, t, ndim, layout)
    return t


def _gradient(gradient: object, vectors: torch.Tensor, what: str | None) -> torch.Tensor:
    """``gradient`` as a ``(P,)`` tensor in the vectors' dtype and device, ``P`` the
    vectors' rows; non-zero unless ``what`` (what a zero gradient leaves undefined) is
    ``None``."""
    g = _tensor("gradient", gradient, 1, "(P,)").to(vectors)
    if g.shape[0] != vectors.shape[0]:
        raise ValueError(
            f"gradient must have shape ({vectors.shape[0]},) to match the rows of vectors, "
            f"got {tuple(g.shape)}"
        )
    if what is not None and not bool(g.any()):
        raise ValueError(f"gradient is zero; {what} is undefined (it divides by ‖g‖)")
    return g


def top_fraction(gradient: object, vectors: object) -> float:
    """``f_top = ‖Uᵀg‖²/‖g‖²`` for orthonormal ``vectors U (P, k)`` and ``gradient g (P,)``,
    non-zero."""
    U = _tensor("vectors", vectors, 2, "(P, k)")
    g = _gradient(gradient, U, "f_top = ‖Uᵀg‖²/‖g‖²")
    return float(((U.T @ g) ** 2).sum() / (g * g).sum())


def gradient_coefficients(
    gradient: object, vectors: object, *, normalise: str = "cosine"
) -> torch.Tensor:
    """The coefficients of ``gradient g (P,)`` on every column ``v_j`` of ``vectors (P, m)``:
    ``"cosine"`` ``⟨g, v_j⟩/(‖g‖‖v_j‖)`` (``g`` non-zero), ``"raw"`` ``⟨g, v_j/‖v_j‖⟩``;
    0 on a zero column."""
    normalise = check_choice("normalise", normalise, ("cosine", "raw"))
    V = _tensor("vectors", vectors, 2, "(P, m)")
    what = "its cosine with the vectors" if normalise == "cosine" else None
    g = _gradient(gradient, V, what)
    norms = torch.linalg.vector_norm(V, dim=0)
    raw = (V.T @ g) / torch.where(norms > 0, norms, torch.ones_like(norms))
    return raw if normalise == "raw" else raw / torch.linalg.vector_norm(g)


def subspace_overlap(vectors_a: object, vectors_b: object) -> float:
    """``tr(P_U P_V)/k`` for orthonormal ``U = vectors_a (P, k)``, ``V = vectors_b (P, k')``
    (``k`` of ``U``)."""
    U = _tensor("vectors_a", vectors_a, 2, "(P, k)")
    V = _tensor("vectors_b", vectors_b, 2, "(P, k')")
    if U.shape[0] != V.shape[0]:
        raise ValueError(f"subspaces of different dimensions: {U.shape[0]} != {V.shape[0]}")
    return float((U.T @ V.to(U)).pow(2).sum() / U.shape[1])


def kron_pairs(outputs: object, inputs: object, *, order: str = "row") -> torch.Tensor:
    r"""``(m, d_out · d_in)``: row ``j`` is ``u_j ⊗ v_j`` (``vec_row(u_jv_jᵀ)``) or, with
    ``order="column"``, ``v_j ⊗ u_j`` (``vec_col(u_jv_jᵀ)``), for the paired rows ``u_j`` of
    ``outputs (m, d_out)`` and ``v_j`` of ``inputs (m, d_in)``: the flattened rank-one
    matrices :math:`u_j v_j^\top` in the space of a weight matrix (the shape of every
    eigenvector paper 004's theorems predict)."""
    order = check_choice("order", order, ORDERS)
    left = _tensor("outputs", outputs, 2, "(m, d_out)")
    right = _tensor("inputs", inputs, 2, "(m, d_in)")
    if left.shape[0] != right.shape[0]:
        raise ValueError(
            f"outputs and inputs must have one number of rows, got {left.shape[0]} and "
            f"{right.shape[0]}"
        )
    pairs = left[:, :, None] * right.to(left)[:, None, :]
    return (pairs if order == "row" else pairs.transpose(1, 2)).reshape(left.shape[0], -1)


def kronecker_vectors(output_means: object, input_means: object) -> torch.Tensor:
    """``v_{kk'} = out_k ⊗ in_{k'}`` as ``(K, K, d_out · d_in)`` from class means
    ``(K, d_out)`` and ``(K, d_in)`` (:func:`kron_pairs` over every pair, row order)."""
    out = _tensor("output_means", output_means, 2, "(K, d_out)")
    inp = _tensor("input_means", input_means, 2, "(K, d_in)")
    K = out.shape[0]
    if inp.shape[0] != K:
        raise ValueError(f"class means of {K} and {inp.shape[0]} classes")
    return kron_pairs(out.repeat_interleave(K, dim=0), inp.repeat(K, 1)).reshape(K, K, -1)


def eigenvector_alignment(op: CurvatureOperator, vectors: object) -> torch.Tensor:
    """``a(v)`` for every column ``v`` of ``vectors (P, m)`` (one block product); NaN where
    ``Av = 0`` or ``v = 0``."""
    V = _tensor("vectors", vectors, 2, "(P, m)")
    if V.shape[0] != op.dim:
        raise ValueError(
            f"vectors must have shape ({op.dim}, m) (columns of the operator's dimension "
            f"{op.dim}), got {tuple(V.shape)}"
        )
    V = V.to(device=op.device, dtype=op.dtype)
    AV = op.matmat(V)
    den = AV.norm(dim=0) * V.norm(dim=0)
    return torch.where(den > 0, (AV * V).sum(0) / den, torch.full_like(den, float("nan")))


def module_class_means(
    objective: Objective,
    module: nn.Module,
    n_classes: int,
    next_module: nn.Module | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Class means over the objective's data, at its parameters, of the (flattened) input
    ``h^{(l)}`` of ``module`` and of ``h^{(l+1)}``: the input of ``next_module`` (the next
    weight layer: after an activation, ``σ(W_l h^{(l)})``, note 004 §2) or, without one, the
    output of ``module``. Returns ``(K, d_in)``, ``(K, d_out)`` in float64."""
    sums: dict[str, torch.Tensor] = {}
    counts = torch.zeros(n_classes, dtype=torch.float64)
    labels: list[torch.Tensor | None] = [None]  # the batch of the forward pass below

    def add(name: str, t: torch.Tensor) -> None:
        y = labels[-1]
        if y is None:  # a forward pass of someone else's (the objective checking outputs)
            return
        flat = t.detach().reshape(t.shape[0], -1).to(torch.float64)
        onehot = (y[:, None] == torch.arange(n_classes, device=y.device)).to(flat)
        part = onehot.T @ flat
        sums[name] = sums[name] + part.cpu() if name in sums else part.cpu()

    def own(_: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        add("in", inputs[0])
        if next_module is None:
            add("out", output)

    def following(_: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        add("out", inputs[0])

    handles = [module.register_forward_hook(own)]
    if next_module is not None:
        handles.append(next_module.register_forward_hook(following))
    try:
        for x, y in objective.batches():
            labels.append(y)
            counts += torch.bincount(y.cpu(), minlength=n_classes).to(torch.float64)
            objective.forward(objective.theta, x)
            labels.append(None)
    finally:
        for handle in handles:
            handle.remove()
    if bool((counts == 0).any()):
        raise ValueError("every class needs a sample for its class means")
    return sums["in"] / counts[:, None], sums["out"] / counts[:, None]


__all__ = [
    "ORDERS",
    "eigenvector_alignment",
    "gradient_coefficients",
    "kron_pairs",
    "kronecker_vectors",
    "module_class_means",
    "subspace_overlap",
    "top_fraction",
]
