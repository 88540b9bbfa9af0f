r"""Alignment of gradients and predicted eigenvectors with curvature (paper 004 §3.10, M11).

* :func:`top_fraction` (Gur-Ari, Roberts & Dyer 2018; note 004 M14): the share of the
  gradient in the span of the top eigenvectors :math:`u_1..u_k`,
  :math:`f_{\text{top}} = \lVert P_{\text{top}}\, g\rVert^2 / \lVert g\rVert^2`.
* :func:`subspace_overlap` (M15): :math:`\mathrm{tr}(P_U P_V)/k = \lVert U^\top V\rVert_F^2/k`
  for orthonormal ``U``, ``V`` with ``k`` columns (1: the same subspace; ``k'/P`` expected
  for random subspaces).
* :func:`gradient_coefficients` (M16): :math:`\langle g/\lVert g\rVert, u_j\rangle`.
* :func:`kronecker_vectors` (Theorem 4.1): for a linear layer ``W_l (d_out, d_in)``, the
  ``K²`` predicted eigenvectors :math:`v_{kk'} = \bar h^{(l+1)}_k \otimes \bar h^{(l)}_{k'}`
  from the class means of ``h^{(l+1)}`` and of the layer's input ``h^{(l)}`` (``vec_row``
  order: PyTorch's flattening of ``W_l``). ``h^{(l+1)}`` is the input of the next weight
  layer ``W_{l+1}`` (note 004 §2: :math:`h^{(l+1)} = \sigma(W_l h^{(l)})` in a ReLU
  network; the rows of :math:`W_{L:l+1}` are proportional to its class means, DNC3), which
  :func:`module_class_means` reads with ``next_module``; in a linear network it is the
  layer's output;
* :func:`eigenvector_alignment` (M11): :math:`a(v) = \langle Av, v\rangle /
  (\lVert Av\rVert\,\lVert v\rVert)`, 1 exactly when ``v`` is an eigenvector with a positive
  eigenvalue.
"""

from __future__ import annotations

import torch
from torch import nn

from collapselab.curvature.objective import Objective
from collapselab.curvature.operators import CurvatureOperator


def _norm_sq(g: torch.Tensor) -> torch.Tensor:
    value = (g * g).sum()
    if float(value) == 0.0:
        raise ValueError("the gradient is zero: its alignment is undefined")
    return value


def top_fraction(gradient: torch.Tensor, vectors: torch.Tensor) -> float:
    """``f_top = ‖Uᵀg‖²/‖g‖²`` for orthonormal ``vectors U (P, k)``."""
    g = gradient.reshape(-1).to(vectors)
    return float(((vectors.T @ g) ** 2).sum() / _norm_sq(g))


def gradient_coefficients(gradient: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """``⟨g/‖g‖, u_j⟩`` for every column ``u_j`` of ``vectors (P, k)``."""
    g = gradient.reshape(-1).to(vectors)
    return (vectors.T @ g) / _norm_sq(g).sqrt()


def subspace_overlap(first: torch.Tensor, second: torch.Tensor) -> float:
    """``tr(P_U P_V)/k`` for orthonormal ``U (P, k)``, ``V (P, k')`` (``k`` of ``U``)."""
    if first.shape[0] != second.shape[0]:
        raise ValueError(
            f"subspaces of different dimensions: {first.shape[0]} != {second.shape[0]}"
        )
    return float((first.T @ second.to(first)).pow(2).sum() / first.shape[1])


def kronecker_vectors(output_means: torch.Tensor, input_means: torch.Tensor) -> torch.Tensor:
    """``v_{kk'} = out_k ⊗ in_{k'}`` as ``(K, K, d_out · d_in)`` from class means
    ``(K, d_out)`` and ``(K, d_in)``."""
    K = output_means.shape[0]
    if input_means.shape[0] != K:
        raise ValueError(f"class means of {K} and {input_means.shape[0]} classes")
    outer = output_means[:, None, :, None] * input_means[None, :, None, :]
    return outer.reshape(K, K, -1)


def eigenvector_alignment(op: CurvatureOperator, vectors: torch.Tensor) -> torch.Tensor:
    """``a(v)`` for every column ``v`` of ``vectors (P, m)`` (one block product)."""
    V = vectors.to(device=op.device, dtype=op.dtype)
    AV = op.matmat(V)
    return (AV * V).sum(0) / (AV.norm(dim=0) * V.norm(dim=0)).clamp_min(1e-300)


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
    labels: list[torch.Tensor] = []

    def add(name: str, t: torch.Tensor) -> None:
        y = labels[-1]
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
    finally:
        for handle in handles:
            handle.remove()
    if bool((counts == 0).any()):
        raise ValueError("every class needs a sample for its class means")
    return sums["in"] / counts[:, None], sums["out"] / counts[:, None]


__all__ = [
    "eigenvector_alignment",
    "gradient_coefficients",
    "kronecker_vectors",
    "module_class_means",
    "subspace_overlap",
    "top_fraction",
]
