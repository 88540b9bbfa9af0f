r"""Paper 000's theorems on the common direction, per sample (Theorem 1, Lemma 3, Theorem 2).

Notation (note 000, §2): linear layer l has ``W^(l) ∈ R^{h x d}``, input ``F = F^(l-1)``,
pre-activation gradient ``g = g^(l) = D^(l) Ḟ^(l)`` and per-sample change
``ΔW|_x = -η g_x F_xᵀ``. For a direction ``C ∈ R^h`` (Lemmas 1-2):
``ΔV_x = ΔW|_xᵀ C / (CᵀC) = -η F_x (Cᵀ g_x) / (CᵀC)``, ``V = Wᵀ C / (CᵀC)``,
``ε = Wᵀ - V Cᵀ``. Everything is computed from the rank-1 factors in float64; no d x h
matrix per sample is formed.

* :func:`theorem1_decomposition` (Theorem 1, M9, Table 1, R13): layer l's per-sample change
  through layer l+1's common direction, in closed form:
  ``ΔW_primary = -η (Cᵀg') D V' Fᵀ`` and ``ΔW_noise^(k) = -η σ_k (𝒱_kᵀ g') D 𝒰_k Fᵀ``
  (``‖C‖ = 1``, ``g' = g^(l+1)``, SVD ``ε^(l+1) = 𝒰 Σ 𝒱ᵀ``), whose sum is ``ΔW^(l)|_x``
  exactly. The published "𝒰_kᵀ C = 0" is dimensionally wrong when h ≠ h' (note A12): what
  holds, and is checked, is ``𝒱_kᵀ C = 0``.
* :func:`common_direction_of_window`: C^(l) of a window of captures (Eq. 5), per-sample or
  probe-mean changes, all samples or some classes.
* :func:`direction_strengths_of_window`: Fig. 4's top-k directions and strengths s_i of a
  window's average changes.
* :func:`theorem1_table`: S_primary and S_k per class, mean ± std over samples and
  iterations (Table 1; the "±" is unspecified in the paper, note A11).
* :func:`delta_v_feature_cosine` (M10, Fig. 5, R14): ``cos(α_c ΔV, F)`` with α_c the class's
  majority sign, for a per-sample ΔV (±1 by construction, note A6) or a whole update's ΔV.
* :func:`o_statistic` (M11, Fig. 6, R15): ``cos(ΔV, F) · cos(V, ΔF)`` for every ΔF mode
  (``neg_grad``, ``single_sample_step``, ``batch_step``; its sign depends on the mode, A7).
* :func:`lemma3_terms` (M12, S-Fig. 27, R16): Lemma 3's primary and noise terms.
* :func:`theorem2_consistency` (R17): Theorem 2's hypothesis (the within-class sign of
  ``Cᵀ D Ḟ``) and its first conclusion, per class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from collapselab.checks import (
    ArrayLike,
    as_matrix,
    as_vector,
    check_choice,
    check_float,
    check_int,
)
from collapselab.metrics.diversity import (
    CommonDirections,
    DirectionStrengths,
    check_probe_classes,
    common_directions,
    direction_strengths,
    sign_consistency,
)
from collapselab.probe.mlp_state import MLPState
from collapselab.stats import CommonDirectionAccumulator

DELTA_F_MODES = ("neg_grad", "single_sample_step", "batch_step")
"""The readings of ``ΔF^(l-1)`` "made by the training sample x" (note A7)."""


def _unit(name: str, c: ArrayLike, length: int, device: torch.device) -> torch.Tensor:
    cv = as_vector(name, c, device)
    if cv.shape[0] != length:
        raise ValueError(f"{name} has length {cv.shape[0]}; expected {length} (the layer's h)")
    norm = torch.linalg.vector_norm(cv)
    if float(norm) == 0.0:
        raise ValueError(f"{name} must be non-zero")
    return cv / norm


def _rows(name: str, x: ArrayLike, n: int | None, device: torch.device | None) -> torch.Tensor:
    m = as_matrix(name, x, device)
    if n is not None and m.shape[0] != n:
        raise ValueError(f"{name} has {m.shape[0]} rows; expected {n} (one per sample)")
    return m


def _layer_signals(
    inputs: ArrayLike, pre_grads: ArrayLike, weight: ArrayLike
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``F (N, d)``, ``g (N, h)`` and ``W (h, d)`` of one layer, shapes checked together."""
    f = _rows("inputs", inputs, None, None)
    g = _rows("pre_grads", pre_grads, f.shape[0], f.device)
    w = as_matrix("weight", weight, f.device)
    if w.shape != (g.shape[1], f.shape[1]):
        raise ValueError(
            f"weight has shape {tuple(w.shape)}; expected ({g.shape[1]}, {f.shape[1]}) = (h, d)"
        )
    return f, g, w


def _cos_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine; 0 where either row is zero (no direction, note A25)."""
    den = torch.linalg.vector_norm(a, dim=-1) * torch.linalg.vector_norm(b, dim=-1)
    num = (a * b).sum(dim=-1)
    return torch.where(den > 0, num / torch.where(den > 0, den, 1.0), 0.0)


# --------------------------------------------------------------------------- Theorem 1
@dataclass(frozen=True)
class Theorem1Parts:
    """Theorem 1's decomposition of layer l's per-sample changes (one iteration).

    ``ΔW^(l)|_x = Γ_x F_xᵀ + κ_x F_xᵀ`` with ``κ_x = Σ_k n_{x,k}`` (each ``n_{x,k} F_xᵀ`` a
    noise term). Factors, never the d x h matrices.

    Attributes:
        gamma: ``(N, h)`` Γ_x, the primary factor (``ΔW_primary|_x = Γ_x F_xᵀ``).
        kappa: ``(N, h)`` κ_x, the sum of the noise factors.
        inputs: ``(N, d)`` F_x = F^(l-1).
        primary_norm: ``(N,)`` ``‖ΔW_primary|_x‖_F = ‖Γ_x‖ ‖F_x‖``.
        noise_norms: ``(N, r)`` ``‖ΔW_noise^(k)|_x‖_F``, k in order of descending σ_k.
        singular_values: ``(r,)`` σ_k of ``ε^(l+1)``, ``r = min(h, h')``.
        noise_directions: ``(h, r)`` 𝒰_k (left singular vectors of ε^(l+1), in R^h).
        noise_coefficients: ``(N, r)`` ``-η σ_k (𝒱_kᵀ g'_x)`` (noise factor k is this times
            ``D_x ⊙ 𝒰_k``).
        slopes: ``(N, h)`` D^(l).
        right_orthogonality: ``max_k |𝒱_kᵀ C|`` over the non-zero σ_k (0 up to rounding:
            the corrected statement of note A12).
        published_orthogonality: ``max_k |𝒰_kᵀ C|`` over the non-zero σ_k, the statement
            as printed ("𝒰_kᵀ C^(l+1) = 0"); defined only when h = h' (None otherwise: the
            product does not exist), and in general not 0.
    """

    gamma: torch.Tensor
    kappa: torch.Tensor
    inputs: torch.Tensor
    primary_norm: np.ndarray
    noise_norms: np.ndarray
    singular_values: np.ndarray
    noise_directions: torch.Tensor
    noise_coefficients: torch.Tensor
    slopes: torch.Tensor
    right_orthogonality: float
    published_orthogonality: float | None

    def gamma_cosine(self, c: ArrayLike) -> np.ndarray:
        """``cos(C^(l), Γ_x)`` per sample (R19; the paper guesses ``C^(l) ≈ ±Γ``, §4.4).

        Args:
            c: ``(h,)`` layer l's own common direction C^(l).
        """
        cu = _unit("c", c, self.gamma.shape[1], self.gamma.device)
        return _cos_rows(self.gamma, cu[None, :].expand_as(self.gamma)).cpu().numpy()

    def change(self, i: int) -> torch.Tensor:
        """Sample i's whole change ``(Γ_i + κ_i) F_iᵀ``, ``(h, d)`` (for checks only)."""
        return torch.outer(self.gamma[i] + self.kappa[i], self.inputs[i])

    def primary_term(self, i: int) -> torch.Tensor:
        """``ΔW_primary|_x`` of sample i, ``(h, d)`` (for checks only)."""
        return torch.outer(self.gamma[i], self.inputs[i])

    def noise_term(self, i: int, k: int) -> torch.Tensor:
        """``ΔW_noise^(l,k)|_x`` of sample i (k counted from 1), ``(h, d)`` (checks only)."""
        r = self.singular_values.shape[0]
        k = check_int("k", k, minimum=1, maximum=r)
        factor = (
            self.noise_coefficients[i, k - 1] * self.slopes[i] * self.noise_directions[:, k - 1]
        )
        return torch.outer(factor, self.inputs[i])


def theorem1_decomposition(
    inputs: ArrayLike,
    slopes: ArrayLike,
    weight_next: ArrayLike,
    pre_grads_next: ArrayLike,
    c_next: ArrayLike,
    lr: float,
) -> Theorem1Parts:
    """Theorem 1 for layer l through layer l+1's common direction (paper 000, §4.3, R13).

    .. math::
        \\Delta W^{(l)}|_x = -\\eta\\,(C^\\top g')\\,D V' F^\\top
            + \\sum_k -\\eta\\,\\sigma_k (\\mathcal V_k^\\top g')\\, D\\,\\mathcal U_k F^\\top

    with ``‖C‖ = 1`` (C = ``c_next`` normalised; the paper's form with ``CᵀC`` and
    ``ΔV'ᵀF^(l) / ‖F^(l)‖²`` is the same quantity and needs ``F^(l) ≠ 0``), ``V' = W'ᵀC``,
    ``ε' = W'ᵀ - V'Cᵀ = 𝒰 Σ 𝒱ᵀ``, ``g' = g^(l+1)``. The parts sum to
    ``-η D (W'ᵀ g') Fᵀ = -η g^(l) Fᵀ``, the per-sample SGD change (no momentum, no decay).

    Args:
        inputs: ``(N, d)`` F^(l-1).
        slopes: ``(N, h)`` D^(l).
        weight_next: ``(h', h)`` W^(l+1).
        pre_grads_next: ``(N, h')`` g^(l+1).
        c_next: ``(h',)`` C^(l+1), any non-zero scale.
        lr: η.
    """
    lr = check_float("lr", lr)
    f = _rows("inputs", inputs, None, None)
    n, dev = f.shape[0], f.device
    d_mat = _rows("slopes", slopes, n, dev)
    w = as_matrix("weight_next", weight_next, dev)
    g = _rows("pre_grads_next", pre_grads_next, n, dev)
    if w.shape[1] != d_mat.shape[1] or w.shape[0] != g.shape[1]:
        raise ValueError(
            f"weight_next has shape {tuple(w.shape)}; expected ({g.shape[1]}, {d_mat.shape[1]}) "
            "= (width of layer l+1, width of layer l)"
        )
    c = _unit("c_next", c_next, w.shape[0], dev)
    v = w.T @ c  # (h,)
    eps = w.T - torch.outer(v, c)  # (h, h')
    u, s, vh = torch.linalg.svd(eps, full_matrices=False)  # u (h, r), vh (r, h')
    a = g @ c  # (N,)
    gamma = -lr * a[:, None] * d_mat * v[None, :]
    coef = -lr * (g @ vh.T) * s[None, :]  # (N, r)
    kappa = d_mat * (coef @ u.T)  # Σ_k coef_k D ⊙ 𝒰_k
    f_norm = torch.linalg.vector_norm(f, dim=1)
    primary_norm = torch.linalg.vector_norm(gamma, dim=1) * f_norm
    du = torch.sqrt((d_mat * d_mat) @ (u * u))  # (N, r): ‖D_x ⊙ 𝒰_k‖
    noise_norms = coef.abs() * du * f_norm[:, None]
    tol = max(float(s.max()) if s.numel() else 0.0, 1e-300) * 1e-10
    keep = s > tol
    ortho = float((vh[keep] @ c).abs().max()) if bool(keep.any()) else 0.0
    published = None
    if u.shape[0] == c.shape[0]:
        published = float((u[:, keep].T @ c).abs().max()) if bool(keep.any()) else 0.0
    return Theorem1Parts(
        gamma=gamma,
        kappa=kappa,
        inputs=f,
        primary_norm=primary_norm.cpu().numpy(),
        noise_norms=noise_norms.cpu().numpy(),
        singular_values=s.cpu().numpy(),
        noise_directions=u,
        noise_coefficients=coef,
        slopes=d_mat,
        right_orthogonality=ortho,
        published_orthogonality=published,
    )


def theorem1_from_state(state: MLPState, layer: int, c_next: ArrayLike, lr: float) -> Theorem1Parts:
    """:func:`theorem1_decomposition` for hidden layer ``layer`` (1..L-1) of a capture."""
    layer = state.check_layer(layer, needs_next=True)
    return theorem1_decomposition(
        state.inputs[layer - 1],
        state.slopes_of(layer),
        state.weights[layer],
        state.pre_grads[layer],
        c_next,
        lr,
    )


@dataclass(frozen=True)
class Theorem1Table:
    """Table 1: S_primary and S_k per class over samples and iterations.

    The norms are those of the per-sample changes ``-η ∂ℓ_x/∂W`` of each sample's own loss;
    under a batch-mean loss every value would be divided by the batch size (note A4), so
    compare ratios, not the paper's absolute ×10⁻³ units.

    Attributes:
        primary_mean, primary_std: ``(C,)`` mean and spread (see :func:`theorem1_table`)
            of ``‖ΔW_primary|_x‖_F``.
        noise_mean, noise_std: ``(C, K)`` the same for k = 1..K.
        counts: ``(C,)`` samples x iterations pooled per class.
    """

    primary_mean: np.ndarray
    primary_std: np.ndarray
    noise_mean: np.ndarray
    noise_std: np.ndarray
    counts: np.ndarray

    @property
    def ratio(self) -> np.ndarray:
        """``(C,)`` S_primary / max_k S_k (the paper: about an order of magnitude)."""
        return self.primary_mean / self.noise_mean.max(axis=1)


SPREADS = ("pooled", "samples", "iterations")
"""Readings of Table 1's "±" (note A11): the std over the pooled (sample, iteration) values,
the mean over iterations of the std over samples, or the std over iterations of the class
means (the std over runs is the experiments' business)."""


def theorem1_table(
    parts: Sequence[Theorem1Parts],
    labels: Sequence[ArrayLike],
    n_classes: int,
    n_noise: int = 3,
    spread: str = "pooled",
) -> Theorem1Table:
    """S_primary and S_1..S_K per class over a window (paper 000, Table 1, M9, R13).

    ``S = E_{t ∈ window} E_{x ∈ X_c} ‖·‖_F`` (the mean over iterations of the class means),
    with the "±" read as ``spread`` (:data:`SPREADS`, all std with ddof 0). Every class must
    occur at every iteration.

    Args:
        parts: one :class:`Theorem1Parts` per iteration of the window.
        labels: the matching ``(N_t,)`` labels.
        n_classes: C.
        n_noise: K (the paper reports k = 1, 2, 3).
        spread: ``"pooled"``, ``"samples"`` or ``"iterations"``.
    """
    spread = check_choice("spread", spread, SPREADS)
    if len(parts) == 0 or len(parts) != len(labels):
        raise ValueError(
            f"parts and labels must be non-empty and of equal length, got {len(parts)} "
            f"and {len(labels)}"
        )
    r = min(p.noise_norms.shape[1] for p in parts)
    n_noise = check_int("n_noise", n_noise, minimum=1, maximum=r)
    means = np.zeros((len(parts), n_classes, 1 + n_noise))
    stds = np.zeros_like(means)
    pooled: list[list[np.ndarray]] = [[] for _ in range(n_classes)]
    counts = np.zeros(n_classes, dtype=np.int64)
    for t, (p, y) in enumerate(zip(parts, labels, strict=True)):
        n = p.primary_norm.shape[0]
        y_t = check_probe_classes(y, n_classes, n, what=f"probe set of iteration {t}").numpy()
        values = np.concatenate([p.primary_norm[:, None], p.noise_norms[:, :n_noise]], axis=1)
        for c in range(n_classes):
            v = values[y_t == c]
            means[t, c], stds[t, c] = v.mean(axis=0), v.std(axis=0)
            pooled[c].append(v)
            counts[c] += v.shape[0]
    mean = means.mean(axis=0)
    if spread == "pooled":
        std = np.stack([np.concatenate(v).std(axis=0) for v in pooled])
    elif spread == "samples":
        std = stds.mean(axis=0)
    else:
        std = means.std(axis=0)
    return Theorem1Table(mean[:, 0], std[:, 0], mean[:, 1:], std[:, 1:], counts)


# --------------------------------------------------------------------------- windows
def common_direction_of_window(
    states: Sequence[MLPState],
    layer: int,
    lr: float,
    *,
    classes: Sequence[int] | None = None,
    source: str = "per_sample",
    k: int = 1,
    sign_reference: ArrayLike | None = None,
) -> CommonDirections:
    """C^(l) (and C_2..C_k) of a window of captures by Eq. 5 (R10, notes A8-A9).

    ``source="per_sample"``: the Gram ``sum_t sum_x η² ‖F_x‖² g_x g_xᵀ`` of every captured
    sample's own change (Eq. 5 as written), streamed by
    :class:`~collapselab.stats.CommonDirectionAccumulator`; ``"probe_mean"``: the Gram of
    the probe-mean changes ``ΔW̄_t = -η/N sum_x g_x F_xᵀ``, one per iteration (Fig. 4's
    ΔW̄). ``classes`` restricts the samples (A9: one class's own direction); default all.

    Args:
        states: the captures of the window's iterations (:func:`select_window` picks them).
        layer: l in 1..L.
        lr: η (scales G, not C).
        classes: class indices whose samples count.
        source: ``"per_sample"`` or ``"probe_mean"``.
        k: number of directions.
        sign_reference: see :func:`~collapselab.metrics.diversity.common_directions`.
    """
    source = check_choice("source", source, ("per_sample", "probe_mean"))
    acc = CommonDirectionAccumulator()
    for neg_lr_g, f in _window_factors(states, layer, lr, classes):
        if source == "per_sample":
            acc.update(neg_lr_g, f)
        else:
            acc.update_weight_change(neg_lr_g.T @ f / f.shape[0])
    return common_directions(acc, k, sign_reference)


def _window_factors(
    states: Sequence[MLPState], layer: int, lr: float, classes: Sequence[int] | None
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(-η g, F)`` of layer ``layer`` for each capture, restricted to ``classes``."""
    if len(states) == 0:
        raise ValueError("states must hold at least one capture (the window is empty)")
    out = []
    for t, state in enumerate(states):
        layer = state.check_layer(layer)
        neg_lr_g, f = state.weight_change(layer, lr)
        if classes is not None:
            keep = torch.isin(state.labels, torch.as_tensor(list(classes), dtype=torch.int64))
            if not bool(keep.any()):
                raise ValueError(
                    f"capture {t} has no sample of classes {list(classes)}; expected at least one"
                )
            neg_lr_g, f = neg_lr_g[keep], f[keep]
        out.append((neg_lr_g, f))
    return out


def direction_strengths_of_window(
    states: Sequence[MLPState],
    layer: int,
    lr: float,
    *,
    classes: Sequence[int] | None = None,
    k: int = 5,
    reduction: str = "signed_mean",
) -> DirectionStrengths:
    """Fig. 4 on a window of captures: the top-k deflation directions of the average
    changes ``ΔW̄_t = -η/N_t sum_{x} g_x F_xᵀ`` (over ``classes``' samples, default all) and
    their strengths s_i (:func:`~collapselab.metrics.diversity.direction_strengths`; M8, R11).
    """
    changes = [g.T @ f / f.shape[0] for g, f in _window_factors(states, layer, lr, classes)]
    return direction_strengths(changes, k, reduction)


# --------------------------------------------------------------------------- M10
@dataclass(frozen=True)
class AlignedCosine:
    """``cos(α_c ΔV, F_x)`` per sample and its per-class summary (M10, Fig. 5).

    Attributes:
        values: ``(N,)`` ``α_{y_x} cos(ΔV_x, F_x)`` (0 for a zero vector).
        alpha: ``(C,)`` α_c ∈ {-1, +1}: the majority sign of ``cos(ΔV, F)`` in class c
            (+1 on a tie).
        mean, std: ``(C,)`` over the class's samples (ddof 0).
        raw: ``(N,)`` ``cos(ΔV_x, F_x)`` before the sign.
    """

    values: np.ndarray
    alpha: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    raw: np.ndarray


def delta_v_feature_cosine(
    inputs: ArrayLike,
    labels: ArrayLike,
    c: ArrayLike,
    n_classes: int,
    *,
    pre_grads: ArrayLike | None = None,
    delta_w: ArrayLike | None = None,
) -> AlignedCosine:
    """``cos(α_c ΔV^(l), F^(l-1))`` per sample with α_c the majority sign (M10, R14).

    Give exactly one source of ΔV (note A6):

    * ``pre_grads`` ``(N, h)``: each sample's own ``ΔV_x = -η F_x (Cᵀg_x)/(CᵀC)``;
      then ``cos(ΔV_x, F_x) = -sign(Cᵀ g_x)`` exactly, so the value only restates
      Theorem 2's hypothesis (the paper's curve with a std band cannot be this one);
    * ``delta_w`` ``(h, d)``: one ΔV for all samples from a whole change (the actual
      mini-batch update, or the probe-set mean), ``ΔV = ΔWᵀC/(CᵀC)``.

    Args:
        inputs: ``(N, d)`` F^(l-1).
        labels: ``(N,)``; every class must occur.
        c: ``(h,)`` C^(l).
        n_classes: C.
    """
    if (pre_grads is None) == (delta_w is None):
        raise ValueError("give exactly one of pre_grads (per-sample ΔV) or delta_w (one ΔV)")
    f = _rows("inputs", inputs, None, None)
    n, dev = f.shape[0], f.device
    y = check_probe_classes(labels, n_classes, n).to(dev)
    if pre_grads is not None:
        g = _rows("pre_grads", pre_grads, n, dev)
        cu = _unit("c", c, g.shape[1], dev)
        dv = -f * (g @ cu)[:, None]  # η > 0 does not change a cosine
    else:
        w = as_matrix("delta_w", delta_w, dev)
        if w.shape[1] != f.shape[1]:
            raise ValueError(f"delta_w has {w.shape[1]} columns; expected d = {f.shape[1]}")
        cu = _unit("c", c, w.shape[0], dev)
        dv = (w.T @ cu)[None, :].expand_as(f)
    raw = _cos_rows(dv, f).cpu().numpy()
    y_np = y.cpu().numpy()
    alpha = np.ones(n_classes, dtype=np.int64)
    mean, std = np.zeros(n_classes), np.zeros(n_classes)
    values = np.empty_like(raw)
    for k in range(n_classes):
        sel = y_np == k
        if (raw[sel] < 0).sum() > (raw[sel] > 0).sum():
            alpha[k] = -1
        values[sel] = alpha[k] * raw[sel]
        mean[k], std[k] = values[sel].mean(), values[sel].std()
    return AlignedCosine(values, alpha, mean, std, raw)


# --------------------------------------------------------------------------- M11, M12
def neg_grad_feature_change(weight: ArrayLike, pre_grads: ArrayLike) -> torch.Tensor:
    """``ΔF^(l-1) := -Ḟ^(l-1) = -W^(l)ᵀ g^(l)`` per sample (the paper's reading), ``(N, d)``."""
    w = as_matrix("weight", weight)
    g = _rows("pre_grads", pre_grads, None, w.device)
    if g.shape[1] != w.shape[0]:
        raise ValueError(f"pre_grads has {g.shape[1]} columns; expected h = {w.shape[0]}")
    return -(g @ w)


def o_statistic(
    inputs: ArrayLike,
    pre_grads: ArrayLike,
    weight: ArrayLike,
    c: ArrayLike,
    feature_changes: Mapping[str, ArrayLike] | None = None,
) -> dict[str, np.ndarray]:
    """``o^(l) = cos(ΔV_x, F_x) · cos(V, ΔF_x)`` per sample, for every ΔF mode (M11, R15).

    ``ΔV_x`` is sample x's own (Lemma 3), ``V = W^(l)ᵀC/(CᵀC)``. The modes (note A7):

    * ``"neg_grad"``: ``ΔF = -Ḟ^(l-1)``, always computed (:func:`neg_grad_feature_change`);
    * ``"single_sample_step"``: ΔF after an SGD step on x alone
      (:func:`collapselab.probe.single_sample_feature_changes`);
    * ``"batch_step"``: ΔF across the actual mini-batch step (``F_{t+1} - F_t`` of the probe
      samples: the inputs of two captures).

    Pass the last two in ``feature_changes`` (``(N, d)`` each) to get them. The sign of
    o^(l) depends on the mode (a pilot run: positive for the first two, negative for the
    batch step): every mode is returned, none is preferred.

    Returns:
        ``{mode: (N,) values}``.
    """
    f, g, w = _layer_signals(inputs, pre_grads, weight)
    dev = f.device
    cu = _unit("c", c, w.shape[0], dev)
    cos_dv_f = _cos_rows(-f * (g @ cu)[:, None], f)
    v = (w.T @ cu)[None, :]
    changes: dict[str, torch.Tensor] = {"neg_grad": neg_grad_feature_change(w, g)}
    for mode, delta in (feature_changes or {}).items():
        if mode not in DELTA_F_MODES or mode == "neg_grad":
            raise ValueError(
                f"feature_changes has mode {mode!r}; expected 'single_sample_step' or "
                "'batch_step' (neg_grad is computed)"
            )
        changes[mode] = _rows(f"feature_changes[{mode!r}]", delta, f.shape[0], dev)
        if changes[mode].shape[1] != f.shape[1]:
            raise ValueError(
                f"feature_changes[{mode!r}] has {changes[mode].shape[1]} columns; "
                f"expected d = {f.shape[1]}"
            )
    return {
        mode: (cos_dv_f * _cos_rows(v.expand_as(df), df)).cpu().numpy()
        for mode, df in changes.items()
    }


@dataclass(frozen=True)
class Lemma3Terms:
    """Lemma 3's two terms per sample (M12, S-Fig. 27).

    Attributes:
        primary: ``(N,)`` ``ΔV_xᵀF_x · VᵀV · CᵀC · ΔV_xᵀF_x``.
        noise: ``(N,)`` ``ΔV_xᵀF_x · Vᵀ ε Δε_xᵀ F_x``.
    """

    primary: np.ndarray
    noise: np.ndarray

    @property
    def dominance(self) -> np.ndarray:
        """``|primary| / |noise|`` per sample (the condition "≫" has no threshold, A13)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.abs(self.primary) / np.abs(self.noise)


def lemma3_terms(
    inputs: ArrayLike, pre_grads: ArrayLike, weight: ArrayLike, c: ArrayLike, lr: float
) -> Lemma3Terms:
    """Lemma 3's primary and noise terms per sample (paper 000, §4.6, M12, R16).

    With ``ΔV_x = -η F_x (Cᵀg_x)/(CᵀC)``, ``Δε_xᵀF_x = -η ‖F_x‖² (g_x - C Cᵀg_x/(CᵀC))``,
    ``V = WᵀC/(CᵀC)``, ``ε = Wᵀ - VCᵀ``. Their sum equals
    ``ΔV_xᵀF_x · (-η ‖F_x‖²) · VᵀḞ^(l-1)_x``, so with ``ΔF = -Ḟ`` the sign of
    o^(l) (``neg_grad``) is the sign of ``primary + noise`` (tested). Uses C as given
    (the terms scale with ``CᵀC``; Lemma 3's condition compares them at the same C).
    """
    lr = check_float("lr", lr)
    f, g, w = _layer_signals(inputs, pre_grads, weight)
    dev = f.device
    cv = as_vector("c", c, dev)
    if cv.shape[0] != w.shape[0]:
        raise ValueError(f"c has length {cv.shape[0]}; expected h = {w.shape[0]}")
    cc = cv @ cv
    if float(cc) == 0.0:
        raise ValueError("c must be non-zero")
    v = w.T @ cv / cc
    eps = w.T - torch.outer(v, cv)
    f_sq = (f * f).sum(dim=1)
    a = g @ cv / cc  # (N,)
    dv_f = -lr * f_sq * a  # ΔV_xᵀ F_x
    g_perp = g - a[:, None] * cv[None, :]
    deps_f = -lr * f_sq[:, None] * g_perp  # (N, h): Δε_xᵀ F_x
    primary = dv_f * (v @ v) * cc * dv_f
    noise = dv_f * (deps_f @ (eps.T @ v))
    return Lemma3Terms(primary.cpu().numpy(), noise.cpu().numpy())


# --------------------------------------------------------------------------- Theorem 2
@dataclass(frozen=True)
class Theorem2Check:
    """Theorem 2 per class: its hypothesis and its first conclusion (R17).

    Attributes:
        hypothesis: ``(C,)`` share of same-class ordered pairs x ≠ x' with
            ``[CᵀD Ḟ|_x][CᵀD Ḟ|_x'] > 0``.
        sign_fraction: ``(C,)`` share of samples with the class's majority sign of
            ``Cᵀ D Ḟ`` (:func:`~collapselab.metrics.diversity.sign_consistency`).
        conclusion: ``(C,)`` share of samples with ``cos(α_c ΔV_x, F_x) >= 0``.
    """

    hypothesis: np.ndarray
    sign_fraction: np.ndarray
    conclusion: np.ndarray


def theorem2_consistency(
    inputs: ArrayLike, pre_grads: ArrayLike, labels: ArrayLike, c: ArrayLike, n_classes: int
) -> Theorem2Check:
    """Theorem 2's within-class sign consistency (paper 000, §4.7, R17).

    Eq. 26: ``sign(cos(ΔV|_x, F|_x) cos(ΔV|_x', F|_x')) = sign([CᵀDḞ|_x][CᵀDḞ|_x'])``
    for per-sample ΔV; the conclusion holds for every sample of a class exactly when its
    hypothesis holds for every pair of the class.
    """
    g = as_matrix("pre_grads", pre_grads)
    y = check_probe_classes(labels, n_classes, g.shape[0])
    signs = sign_consistency(g, y, c, n_classes)
    coef = np.sign((g @ _unit("c", c, g.shape[1], g.device)).cpu().numpy())
    y_np = y.numpy()
    hyp = np.zeros(n_classes)
    for k in range(n_classes):
        s = coef[y_np == k]
        m = s.shape[0]
        pos, neg = (s > 0).sum(), (s < 0).sum()
        hyp[k] = (pos * (pos - 1) + neg * (neg - 1)) / (m * (m - 1)) if m > 1 else np.nan
    m10 = delta_v_feature_cosine(inputs, y, c, n_classes, pre_grads=g)
    concl = np.array([(m10.values[y_np == k] >= 0).mean() for k in range(n_classes)])
    return Theorem2Check(hyp, signs.fraction, concl)


__all__ = [
    "DELTA_F_MODES",
    "SPREADS",
    "AlignedCosine",
    "Lemma3Terms",
    "Theorem1Parts",
    "Theorem1Table",
    "Theorem2Check",
    "common_direction_of_window",
    "delta_v_feature_cosine",
    "direction_strengths_of_window",
    "lemma3_terms",
    "neg_grad_feature_change",
    "o_statistic",
    "theorem1_decomposition",
    "theorem1_from_state",
    "theorem1_table",
    "theorem2_consistency",
]
