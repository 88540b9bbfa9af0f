r"""Exact full-batch gradient descent of E deep linear networks at once (paper 002).

For a bias-free deep linear network ``W = W_L ⋯ W_1`` and the summed squared loss of
paper 002's Eq. 5, ``L = ½‖W X − Y‖_F²`` (examples as columns), the gradient depends on
the data only through ``Σ_XX = X Xᵀ`` and ``Σ_YX = Y Xᵀ`` (Lemma 1):

.. math::

    \nabla_{W_l} L = (W_L \cdots W_{l+1})^\top\, (W \Sigma_{XX} - \Sigma_{YX})\,
                     (W_{l-1} \cdots W_1)^\top .

In the principal frame of the data ``Σ_XX = D`` is diagonal, so a step costs nothing in
the number of examples. :func:`linear_gd_step` takes that step for E members stacked along
a leading dimension, every product a batched one (``bmm`` over members), each member with
its own step size ``μ_e``. Products are formed with a ``K``-row factor only (``K`` outputs),
never between two weight matrices: ``W_L ⋯ W_{l+1}`` from the top (``K x m_l``) and
``(W Σ_XX − Σ_YX)(W_{l−1} ⋯ W_1)ᵀ`` from the bottom (``K x m_{l−1}``), so a step is
``O(E K Σ_l m_l m_{l−1})``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from collapselab.checks import check_float


def _check(weights: Sequence[torch.Tensor], sxx: torch.Tensor, syx: torch.Tensor) -> None:
    if not weights:
        raise ValueError("weights must hold at least one stacked layer (E, m_1, m_0)")
    size = weights[0].shape[0]
    for i, w in enumerate(weights):
        if not isinstance(w, torch.Tensor) or w.ndim != 3 or w.shape[0] != size:
            raise ValueError(f"weights[{i}] must be a stacked layer (E={size}, m_out, m_in)")
        if i and w.shape[2] != weights[i - 1].shape[1]:
            raise ValueError(
                f"weights[{i}] takes {w.shape[2]} inputs but weights[{i - 1}] gives "
                f"{weights[i - 1].shape[1]}"
            )
    q, k = weights[0].shape[2], weights[-1].shape[1]
    if sxx.shape not in ((q,), (q, q)):
        raise ValueError(
            f"sxx must be (q,) (diagonal) or (q, q) with q={q}, got {tuple(sxx.shape)}"
        )
    if tuple(syx.shape) != (k, q):
        raise ValueError(f"syx must be (K, q) = ({k}, {q}), got {tuple(syx.shape)}")


def _step_sizes(mu: float | Sequence[float] | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``μ`` as ``(E, 1, 1)`` (a number: the same for every member)."""
    size = like.shape[0]
    if isinstance(mu, torch.Tensor):
        values = mu.to(dtype=like.dtype, device=like.device).reshape(-1)
    elif isinstance(mu, Sequence):
        values = torch.tensor([float(m) for m in mu], dtype=like.dtype, device=like.device)
    else:
        values = torch.full((size,), check_float("mu", mu, minimum=0.0), dtype=like.dtype)
    if values.numel() != size:
        raise ValueError(f"mu must be a number or hold one step size per member ({size})")
    return values.to(like.device).view(size, 1, 1)


def linear_gd_step(
    weights: Sequence[torch.Tensor],
    sxx: torch.Tensor,
    syx: torch.Tensor,
    mu: float | Sequence[float] | torch.Tensor,
) -> list[torch.Tensor]:
    r"""One exact full-batch GD step ``W_l ← W_l − μ_e ∇_{W_l} L`` of E deep linear networks
    (module docstring, paper 002 Eq. 5 and Lemma 1).

    Args:
        weights: ``[W_1, ..., W_L]`` stacked over members: ``W_l`` is ``(E, m_l, m_{l−1})``.
        sxx: ``Σ_XX = X Xᵀ``, ``(q, q)``, or its diagonal ``(q,)`` in the principal frame.
        syx: ``Σ_YX = Y Xᵀ``, ``(K, q)``.
        mu: the step size, one for all members or one per member.

    Returns:
        The stepped weights (new tensors).
    """
    _check(weights, sxx, syx)
    step = _step_sizes(mu, weights[0])
    size, k = weights[0].shape[0], weights[-1].shape[1]
    eye = torch.eye(k, dtype=weights[0].dtype, device=weights[0].device)
    above = [eye.expand(size, k, k)]  # the products W_L ... W_{l+1}, built from the top
    for w in weights[:0:-1]:
        above.append(torch.bmm(above[-1], w))
    above.reverse()  # above[l]: the product of the layers above weights[l], (E, K, m_l)
    compact = torch.bmm(above[0], weights[0])  # W, (E, K, q)
    err = (compact * sxx if sxx.ndim == 1 else torch.matmul(compact, sxx)) - syx
    left = err  # Er (product of the layers below weights[l])ᵀ, built from the bottom
    out = []
    for a, w in zip(above, weights, strict=True):
        out.append(w - step * torch.bmm(a.transpose(1, 2), left))
        left = torch.bmm(left, w.transpose(1, 2))
    return out
