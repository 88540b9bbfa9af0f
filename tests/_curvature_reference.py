r"""An independent float64 reference for the curvature claims of one linear layer.

Nothing here calls :mod:`collapselab.curvature`: the per-sample quantities come from plain
autograd (one backward pass per logit, one output Hessian per sample) and every spectrum
from a dense ``eigh`` of a Gram matrix. For a weight ``W (d_out, d_in)`` of an ``nn.Linear``
with input ``x_n`` and output ``z_n = W x_n + b``, followed by piece-wise linear operations
(ReLU, max-pooling, linear layers), the layer's Hessian of ``L = ρ Σ_n ℓ(f_n, y_n)`` is its
Gauss–Newton matrix (``∂²f/∂z² = 0`` almost everywhere), in ``vec_row(W)`` order (note 004
§3.8, §3.13):

.. math::
    H = G = \rho \sum_n (J_n^\top S_n J_n) \otimes x_n x_n^\top,
    \qquad J_n = \partial f_n/\partial z_n \in \mathbb{R}^{C\times d_{out}},
    \quad S_n = \nabla_f^2 \ell_n .

Writing :math:`S_n = \sum_c w_{c,n} u_{c,n} u_{c,n}^\top` (MSE: ``w = 2s``, ``u = e_c``;
CE: ``w = p_c``, ``u = e_c − p``; checked against autograd's ``S_n``), ``G = B Bᵀ`` with the
``N·C`` columns :math:`b_{c,n} = \sqrt{\rho w_{c,n}}\,(J_n^\top u_{c,n}) \otimes x_n`
(Papyan's extended gradients, scaled). Every operator of the audit is ``B M Bᵀ`` for an
``NC × NC`` matrix ``M`` (``I`` for ``G``; the class and cross parts from the class-pair
means, which are combinations of the columns), so its non-zero spectrum is that of
:math:`\Lambda^{1/2} V^\top M V \Lambda^{1/2}` with :math:`B^\top B = V\Lambda V^\top`
(restricted to the range of ``B``): no ``P × P`` matrix is formed, and the Gram matrix is
:math:`(B^\top B)_{(c,n),(c',m)} = \rho\sqrt{w w'}\,\langle J_n^\top u, J_m^\top u'\rangle
\langle x_n, x_m\rangle`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class LayerSamples:
    """Per-sample quantities of one linear layer over ``N`` samples (float64).

    Attributes:
        x: layer inputs ``(N, d_in)``.
        z: layer outputs (pre-activation) ``(N, d_out)``.
        jac: ``J_n = ∂f_n/∂z_n`` as ``(N, C, d_out)``.
        f: outputs ``(N, C)``; ``y`` labels ``(N,)``.
        grad_f: ``∇_f ℓ_n`` ``(N, C)``; ``hess_f``: ``∇²_f ℓ_n`` ``(N, C, C)``.
        next_input: the input of the next weight layer, when asked for (``(N, d_next)``).
    """

    x: torch.Tensor
    z: torch.Tensor
    jac: torch.Tensor
    f: torch.Tensor
    y: torch.Tensor
    grad_f: torch.Tensor
    hess_f: torch.Tensor
    next_input: torch.Tensor | None = None


def per_sample_loss(loss: str, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``ℓ(f, y)`` of one sample with torch's own losses: ``"mse"`` is ``nn.MSELoss()``
    (the mean over the ``C`` outputs), ``"mse_half"`` ``½‖f − e_y‖²``, ``"ce"``."""
    target = F.one_hot(y, f.shape[-1]).to(f)
    if loss == "mse":
        return F.mse_loss(f, target)
    if loss == "mse_half":
        return 0.5 * ((f - target) ** 2).sum()
    if loss == "ce":
        return F.cross_entropy(f[None], y[None])
    raise ValueError(loss)


def layer_samples(
    model: nn.Module,
    layer: nn.Linear,
    x: torch.Tensor,
    y: torch.Tensor,
    loss: str,
    next_layer: nn.Module | None = None,
) -> LayerSamples:
    """Inputs, outputs and Jacobians of ``layer`` by autograd: one backward pass per logit
    (samples are independent: no batch statistics), one output Hessian per sample."""
    seen: dict[str, torch.Tensor] = {}

    def grab(_: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        seen["x"], seen["z"] = inputs[0], output

    def grab_next(_: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        seen["next"] = inputs[0]

    handles = [layer.register_forward_hook(grab)]
    if next_layer is not None:
        handles.append(next_layer.register_forward_hook(grab_next))
    try:
        f = model(x)
    finally:
        for h in handles:
            h.remove()
    z = seen["z"]
    rows = [torch.autograd.grad(f[:, c].sum(), z, retain_graph=True)[0] for c in range(f.shape[1])]
    jac = torch.stack(rows, dim=1).detach()
    f = f.detach()
    grads, hessians = [], []
    for n in range(len(y)):
        fn = f[n].clone().requires_grad_(True)
        grads.append(torch.autograd.grad(per_sample_loss(loss, fn, y[n]), fn)[0])
        hessians.append(
            torch.autograd.functional.hessian(lambda t, n=n: per_sample_loss(loss, t, y[n]), f[n])
        )
    nxt = seen.get("next")
    return LayerSamples(
        x=seen["x"].detach().reshape(len(y), -1),
        z=z.detach().reshape(len(y), -1),
        jac=jac,
        f=f,
        y=y,
        grad_f=torch.stack(grads),
        hess_f=torch.stack(hessians),
        next_input=None if nxt is None else nxt.detach().reshape(len(y), -1),
    )


def papyan_factors(loss: str, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(w (N, C), u (N, C, C))`` with ``∇²_f ℓ_n = Σ_c w[n, c] u[n, c] u[n, c]ᵀ``."""
    N, C = f.shape
    eye = torch.eye(C, dtype=f.dtype).expand(N, C, C)
    if loss == "ce":
        p = torch.softmax(f, dim=-1)
        return p, eye - p[:, None, :]
    scale = {"mse": 2.0 / C, "mse_half": 1.0}[loss]
    return torch.full((N, C), scale, dtype=f.dtype), eye.clone()


@dataclass
class GramSystem:
    """``B`` of the module docstring, kept as its two Kronecker halves.

    ``left[(n, c)] = sqrt(ρ w_{c,n}) J_nᵀ u_{c,n}`` (``d_out``), ``right[(n, c)] = x_n``
    (``d_in``); column ``(n, c)`` of ``B`` is ``left ⊗ right`` (row-major ``vec`` of
    ``left rightᵀ``). ``values``/``vectors``: eigenpairs of ``BᵀB`` above the rank tolerance.
    """

    left: torch.Tensor
    right: torch.Tensor
    weights: torch.Tensor
    labels: torch.Tensor
    values: torch.Tensor
    vectors: torch.Tensor
    rho: float

    def apply_t(self, v: torch.Tensor) -> torch.Tensor:
        """``Bᵀ v`` for ``v`` a ``(d_out, d_in)`` matrix: ``leftᵀ V right`` per column."""
        return ((self.left @ v) * self.right).sum(1)

    def apply(self, coef: torch.Tensor) -> torch.Tensor:
        """``B c`` as a ``(d_out, d_in)`` matrix."""
        return self.left.T @ (coef[:, None] * self.right)

    def project(self, M: torch.Tensor) -> torch.Tensor:
        """``Λ^{1/2} Vᵀ M V Λ^{1/2}``: ``B M Bᵀ`` in the orthonormal basis ``B V Λ^{-1/2}``."""
        s = self.values.sqrt()
        return s[:, None] * (self.vectors.T @ M @ self.vectors) * s[None, :]


def gram_system(samples: LayerSamples, loss: str, rank_rtol: float = 1e-13) -> GramSystem:
    """The Gram matrix ``BᵀB`` and its eigenpairs; checks the factors against autograd."""
    N, C = samples.f.shape
    w, u = papyan_factors(loss, samples.f)
    rebuilt = torch.einsum("nc,nci,ncj->nij", w, u, u)
    err = float((rebuilt - samples.hess_f).abs().max())
    assert err < 1e-10 * max(1.0, float(samples.hess_f.abs().max())), err
    rho = 1.0 / N
    back = torch.einsum("nco,nkc->nko", samples.jac, u)  # J_nᵀ u_{k,n}: (N, C, d_out)
    left = (back * (rho * w).sqrt()[:, :, None]).reshape(N * C, -1)
    right = samples.x.repeat_interleave(C, dim=0)
    gram = (left @ left.T) * (right @ right.T)
    values, vectors = torch.linalg.eigh(gram)
    keep = values > rank_rtol * float(values.max()) * gram.shape[0]
    return GramSystem(
        left,
        right,
        w.reshape(-1),
        samples.y.repeat_interleave(C),
        values[keep].flip(0),
        vectors[:, keep].flip(1),
        rho,
    )


def top_values(op: torch.Tensor, m: int) -> np.ndarray:
    """The ``m`` largest eigenvalues of a symmetric matrix (zeros beyond its size: the
    rest of the ``P``-dimensional space is the null space of ``B``)."""
    vals = torch.linalg.eigvalsh(op).flip(0).numpy()
    if vals.size < m:
        vals = np.concatenate([vals, np.zeros(m - vals.size)])
    return vals[:m]


def count_by_gap(values: np.ndarray, floor: float = 1e-12) -> int:
    """Largest log-gap among the first half of the decreasing values (each floored at
    ``floor · λ_1``): the count the claims use, written out again."""
    v = np.sort(np.asarray(values, dtype=np.float64))[::-1]
    v = np.maximum(v, floor * v[0])
    best, where = -1.0, 0
    for j in range(v.size // 2):
        gap = np.log(v[j]) - np.log(v[j + 1])
        if gap > best:
            best, where = gap, j + 1
    return where if best > 0 else 0


def outliers_by_loops(values, floor: float = 1e-12) -> int:
    """:func:`collapselab.curvature.count_outliers`'s rule from its docstring, one gap at a
    time, in Python floats: sort descending, floor at ``ε λ_1``, and
    among the gaps ``j = 1..⌊m/2⌋`` whose values differ by more than ``ε λ_1`` take the
    first largest ``log λ̃_j − log λ̃_{j+1}``; 0 without one, or for ``λ_1 <= 0``, ``m < 2``."""
    vals = sorted((float(v) for v in values), reverse=True)
    if len(vals) < 2 or vals[0] <= 0:
        return 0
    eps = floor * vals[0]
    v = [max(x, eps) for x in vals]
    best, count = 0.0, 0
    for j in range(1, len(v) // 2 + 1):
        if v[j - 1] - v[j] > eps:
            gap = math.log(v[j - 1]) - math.log(v[j])
            if gap > best:
                best, count = gap, j
    return count


def pair_coefficients(system: GramSystem, C: int, K: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Coefficients ``α_{c,k}`` (``(C, K, NC)``) with ``δ_{c,k} = B α_{c,k}`` (the weighted
    class-pair means) and the masses ``W_{c,k} = ρ Σ_{n∈k} w_{c,n}`` ``(C, K)``."""
    NC = system.left.shape[0]
    logit = torch.arange(NC) % C
    alpha = torch.zeros(C, K, NC, dtype=torch.float64)
    mass = torch.zeros(C, K, dtype=torch.float64)
    for c in range(C):
        for k in range(K):
            cols = (logit == c) & (system.labels == k)
            total = float(system.weights[cols].sum())
            alpha[c, k, cols] = (system.weights[cols] / system.rho).sqrt() / total
            mass[c, k] = system.rho * total
    return alpha, mass


def papyan_parts(
    system: GramSystem, C: int, K: int, centring: str
) -> dict[str, list[tuple[float, torch.Tensor]]]:
    """``{"class": [(W, β)], "cross": [(W, β)]}``: each part is ``Σ W (Bβ)(Bβ)ᵀ`` (note
    004 §3.9 and docs/curvature.md, both centrings), with explicit loops."""
    alpha, mass = pair_coefficients(system, C, K)
    parts: dict[str, list[tuple[float, torch.Tensor]]] = {"class": [], "cross": []}
    if centring == "logit":
        for k in range(K):
            Wk = float(mass[:, k].sum())
            centre = sum(mass[c, k] * alpha[c, k] for c in range(C)) / Wk
            parts["class"].append((Wk, centre))
            for c in range(C):
                parts["cross"].append((float(mass[c, k]), alpha[c, k] - centre))
    else:
        for c in range(C):
            Wc = float(mass[c, :].sum())
            centre = sum(mass[c, k] * alpha[c, k] for k in range(K)) / Wc
            parts["class"].append((Wc, centre))
            for k in range(K):
                parts["cross"].append((float(mass[c, k]), alpha[c, k] - centre))
    return parts


def part_matrix(part: list[tuple[float, torch.Tensor]]) -> torch.Tensor:
    """``M = Σ W β βᵀ`` of one part."""
    return sum(W * torch.outer(b, b) for W, b in part)


def image_basis(system: GramSystem, part: list[tuple[float, torch.Tensor]], rtol: float):
    """An orthonormal basis (in the ``B V Λ^{-1/2}`` coordinates) of the image of a part:
    the left singular vectors of ``[√W Λ^{1/2} Vᵀ β]`` above ``rtol`` times the largest."""
    coords = torch.stack(
        [W**0.5 * system.values.sqrt() * (system.vectors.T @ b) for W, b in part], dim=1
    )
    U, s, _ = torch.linalg.svd(coords, full_matrices=False)
    return U[:, s > rtol * float(s.max())], s


def weight_outliers(weight: torch.Tensor) -> tuple[int, np.ndarray]:
    """Outliers of ``eig(W Wᵀ)`` (squared singular values of ``W`` by numpy's SVD)."""
    s = np.linalg.svd(
        weight.detach().double().reshape(weight.shape[0], -1).numpy(), compute_uv=False
    )
    return count_by_gap(s**2), s**2
