r"""Papyan's class / cross-class / within-class decomposition of the Gauss–Newton matrix.

Write the loss's output Hessian as a weighted sum of outer products
(:meth:`~collapselab.curvature.losses.OutputLoss.factors`),
:math:`\nabla_f^2\ell_n = \sum_c w_{c,n}\,u_{c,n}u_{c,n}^\top`, and define the **extended
gradients** :math:`\delta_{c,n} = J_n^\top u_{c,n}` (MSE: the gradient of logit ``c``;
cross-entropy: of :math:`f_c - p^\top f`). Then

.. math::
    G = \rho\sum_{k=1}^{K}\sum_{n \in k}\sum_{c=1}^{C} w_{c,n}\,\delta_{c,n}\delta_{c,n}^\top,

a weighted second moment of vectors indexed by the logit ``c`` and the true class ``k``.
With the masses :math:`W_{c,k} = \rho\sum_{n\in k} w_{c,n}` and the weighted class-pair
means :math:`\delta_{c,k} = \sum_{n\in k} w_{c,n}\delta_{c,n} / \sum_{n\in k} w_{c,n}`,

.. math::
    G_{\text{within}} = \rho\sum_{c,k}\sum_{n\in k} w_{c,n}
        (\delta_{c,n} - \delta_{c,k})(\delta_{c,n} - \delta_{c,k})^\top ,

and the between part :math:`\sum_{c,k} W_{c,k}\delta_{c,k}\delta_{c,k}^\top` splits in two
ways (paper 004, note §3.9; both are exact):

* ``centring="logit"`` (note 004's first convention): centre over the logit index within
  each class, :math:`\delta_k = \sum_c W_{c,k}\delta_{c,k}/W_k`, :math:`W_k = \sum_c W_{c,k}`,

  .. math::
      G_{\text{class}} = \sum_k W_k\,\delta_k\delta_k^\top ,\qquad
      G_{\text{cross}} = \sum_{c,k} W_{c,k}(\delta_{c,k} - \delta_k)(\delta_{c,k} - \delta_k)^\top ;

* ``centring="class"``: centre over the class index for each logit,
  :math:`\delta'_c = \sum_k W_{c,k}\delta_{c,k}/W'_c`, :math:`W'_c = \sum_k W_{c,k}`,
  :math:`G'_{\text{class}} = \sum_c W'_c\,\delta'_c\delta'^\top_c`,
  :math:`G'_{\text{cross}} = \sum_{c,k} W_{c,k}(\delta_{c,k} - \delta'_c)(\cdot)^\top`.

For MSE (``w = 2s`` constant, balanced classes, ``s = ½``) these are note 004's
:math:`G_{\text{class}} = \sum_k \delta_k\delta_k^\top`,
:math:`G_{\text{cross}} = \frac1K\sum_{c,k}(\delta_{c,k} - \delta_k)(\cdot)^\top`. For
cross-entropy :math:`\sum_c w_{c,n}\delta_{c,n} = 0` for every sample, so the ``"logit"``
class part vanishes identically and the ``"class"`` part has rank at most ``K − 1``.

:math:`G_{\text{class}}` and :math:`G_{\text{cross}}` are kept as explicit factors
(:class:`~collapselab.curvature.operators.LowRankOperator`: ``K`` and ``K·C`` vectors, never
a ``P × P`` matrix), their spectra exact from small Gram matrices;
:math:`G_{\text{within}} = G - G_{\text{class}} - G_{\text{cross}}` is an operator. The
class-pair means cost one pass over the data, each batch split by class with the ``C``
vector-Jacobian products of a class vectorised (``C`` backward vectors per sample, the cost
of ``C`` gradient passes); the spectra of ``G``, ``G_within`` and the knock-outs cost the
Lanczos products.

:func:`decompose` builds the decomposition from any ``G`` and class-pair means: the
matrix-free one of an objective (:func:`papyan_decomposition`) or the dense one of paper
004's deep UFM (:func:`collapselab.theory.dlufm_layerwise.layer_papyan_decomposition`, with
:class:`~collapselab.curvature.operators.DenseOperator` parts). For small ``P``,
:meth:`PapyanDecomposition.knockout_spectra` and :meth:`~PapyanDecomposition.ranks` read
the exact spectra of the dense matrices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.func import vjp, vmap

from collapselab.checks import check_choice, check_float
from collapselab.curvature.eigen import dense_spectrum
from collapselab.curvature.objective import Objective, check_finite_loss
from collapselab.curvature.operators import (
    DEFAULT_BLOCK,
    CurvatureOperator,
    GGNOperator,
    LowRankOperator,
)
from collapselab.curvature.outliers import count_outliers

CENTRINGS = ("logit", "class")


@dataclass
class ClassPairMeans:
    """The weighted class-pair means of the extended gradients.

    Attributes:
        means: ``δ_{c,k}`` as ``(C, K, P)`` (logit ``c``, true class ``k``).
        masses: ``W_{c,k}`` as ``(C, K)``.
        counts: samples per class ``(K,)``.
    """

    means: torch.Tensor
    masses: torch.Tensor
    counts: torch.Tensor


def class_pair_means(
    objective: Objective, n_classes: int | None = None, *, block: int = DEFAULT_BLOCK
) -> ClassPairMeans:
    """``δ_{c,k}`` and ``W_{c,k}`` in one pass over the objective's data (module docstring).

    Raises:
        ValueError: ``batchnorm="batch"`` (splitting a batch by class would change its
            statistics), a class without samples, labels outside ``[0, K)``.
    """
    if objective.batchnorm == "batch":
        raise ValueError(
            "Papyan's decomposition splits each batch by class, which changes batch "
            "statistics: use batchnorm='eval' (or None with the model in eval mode)"
        )
    sums: torch.Tensor | None = None
    mass: torch.Tensor | None = None
    counts: torch.Tensor | None = None
    n_total = 0
    for x, y in objective.batches():
        if sums is None:
            out_dim = int(objective.forward(objective.theta, x[:1]).shape[-1])
            K = n_classes if n_classes is not None else out_dim
            sums = torch.zeros(out_dim, K, objective.dim, dtype=objective.dtype, device=x.device)
            mass = torch.zeros(out_dim, K, dtype=objective.dtype, device=x.device)
            counts = torch.zeros(K, dtype=torch.long, device=x.device)
        K = counts.shape[0]
        if int(y.min()) < 0 or int(y.max()) >= K:
            raise ValueError(f"labels must lie in [0, {K}), got {int(y.min())}..{int(y.max())}")
        n_total += int(y.shape[0])
        for k in torch.unique(y).tolist():
            rows = y == k
            part, weight = _class_block(objective, x[rows], block)
            sums[:, k] += part
            mass[:, k] += weight
            counts[k] += int(rows.sum())
    assert sums is not None and mass is not None and counts is not None
    if bool((counts == 0).any()):
        missing = torch.nonzero(counts == 0).flatten().tolist()
        raise ValueError(f"classes {missing} have no sample in the data: no class-pair means")
    rho = 1.0 / n_total if objective.reduction == "mean" else 1.0
    means = sums / mass.clamp_min(torch.finfo(mass.dtype).tiny)[:, :, None]
    return ClassPairMeans(means, rho * mass, counts.cpu())


def _class_block(
    objective: Objective, x: torch.Tensor, block: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``Σ_n w_{c,n} δ_{c,n}`` for every logit ``c`` (``(C, P)``) and ``Σ_n w_{c,n}``
    (``(C,)``) over the rows ``x`` of one class."""

    def f(theta: torch.Tensor) -> torch.Tensor:
        return objective.forward(theta, x)

    out, pullback = vjp(f, objective.theta)
    check_finite_loss(out.sum())
    w, u = objective.loss.factors(out)  # (n, C), (C, n, C)
    cotangents = w.T[:, :, None] * u
    part = vmap(lambda ct: pullback(ct)[0], chunk_size=block)(cotangents)
    return part, w.sum(0)


PARTS = ("class", "cross", "within")


@dataclass
class PapyanDecomposition:
    r"""``G = G_class + G_cross + G_within`` of one objective or matrix (module docstring).

    Attributes:
        ggn: the operator ``G``.
        class_part: ``G_class`` as factors (``K`` or ``C`` vectors).
        cross_part: ``G_cross`` as factors (``C·K`` vectors).
        within_part: ``G_within``, an operator (``G − G_class − G_cross`` unless given).
        pairs: the class-pair means it was built from.
        centring: ``"logit"`` or ``"class"``.
    """

    ggn: CurvatureOperator
    class_part: LowRankOperator
    cross_part: LowRankOperator
    within_part: CurvatureOperator
    pairs: ClassPairMeans
    centring: str

    def parts(self) -> dict[str, CurvatureOperator]:
        """``{"class": G_class, "cross": G_cross, "within": G_within}``."""
        return {"class": self.class_part, "cross": self.cross_part, "within": self.within_part}

    def knockout(self, part: str) -> CurvatureOperator:
        """``G`` without one part: ``"class"``, ``"cross"`` or ``"within"`` (the latter is
        ``G_class + G_cross``, exact factors)."""
        check_choice("part", part, PARTS)
        if part == "within":
            factors = torch.cat([self.class_part.factors, self.cross_part.factors], dim=1)
            weights = torch.cat([self.class_part.weights, self.cross_part.weights])
            return LowRankOperator(factors, weights)
        return self.ggn - (self.class_part if part == "class" else self.cross_part)

    def knockout_spectra(self) -> dict[str, torch.Tensor]:
        """Every eigenvalue (descending) of ``G`` (``"none"``) and of each knock-out (keys
        of :data:`PARTS`), from their dense matrices (``P`` products each: small ``P``)."""
        out = {"none": dense_spectrum(self.ggn)}
        for part in PARTS:
            out[part] = dense_spectrum(self.knockout(part))
        return out

    def ranks(self, rtol: float = 1e-8) -> dict[str, int]:
        """Numerical ranks of ``G``, its parts and the knock-outs (``"without_<part>"``):
        the eigenvalues of magnitude above ``rtol · max|λ(G)|``
        (:func:`~collapselab.curvature.outliers.count_outliers`, ``"threshold"``), from
        the dense matrices (small ``P``)."""
        rtol = check_float("rtol", rtol, minimum=0.0)
        spectrum = dense_spectrum(self.ggn)
        scale = max(float(spectrum.abs().max()), float(np.finfo(np.float64).tiny))

        def rank(values: torch.Tensor) -> int:
            return count_outliers(
                values.abs().cpu().numpy(), "threshold", threshold=rtol * scale, relative=False
            )

        out = {"G": rank(spectrum)}
        for name, part in self.parts().items():
            out[name] = rank(dense_spectrum(part))
            out[f"without_{name}"] = rank(dense_spectrum(self.knockout(name)))
        return out

    def image_overlap(self) -> float:
        """:func:`image_overlap` of the class and cross parts (0: orthogonal images)."""
        return image_overlap(self.class_part, self.cross_part)


def decompose(
    ggn: CurvatureOperator,
    pairs: ClassPairMeans,
    *,
    centring: str = "logit",
    within: CurvatureOperator | None = None,
) -> PapyanDecomposition:
    """Papyan's decomposition of ``ggn`` from its class-pair means (module docstring):
    the class and cross parts as factors; ``within`` when given (computed from its
    definition, as the dense deep UFM does), else ``G − G_class − G_cross``."""
    check_choice("centring", centring, CENTRINGS)
    means, masses = pairs.means, pairs.masses  # (C, K, P), (C, K)
    axis = 0 if centring == "logit" else 1  # the index averaged out
    total = masses.sum(dim=axis)  # W_k (K,) or W'_c (C,)
    centre = (masses[:, :, None] * means).sum(dim=axis) / total[:, None]
    class_part = LowRankOperator(centre.T.contiguous(), total)
    centred = means - (centre[None, :, :] if axis == 0 else centre[:, None, :])
    cross_part = LowRankOperator(
        centred.reshape(-1, means.shape[2]).T.contiguous(), masses.reshape(-1)
    )
    if within is None:
        within = ggn - class_part - cross_part
    return PapyanDecomposition(ggn, class_part, cross_part, within, pairs, centring)


def papyan_decomposition(
    objective: Objective,
    *,
    centring: str = "logit",
    n_classes: int | None = None,
    pairs: ClassPairMeans | None = None,
    block: int = DEFAULT_BLOCK,
) -> PapyanDecomposition:
    """The decomposition of the GGN of ``objective`` (module docstring); ``pairs`` reuses
    class-pair means already computed (the other centring, say)."""
    check_choice("centring", centring, CENTRINGS)
    if pairs is None:
        pairs = class_pair_means(objective, n_classes, block=block)
    return decompose(GGNOperator(objective, block), pairs, centring=centring)


def image_overlap(first: LowRankOperator, second: LowRankOperator) -> float:
    """The largest cosine of the principal angles between the images of two low-rank
    operators (0: orthogonal images; 1: they share a direction)."""
    _, U = first.eigenpairs()
    _, V = second.eigenpairs()
    if U.shape[1] == 0 or V.shape[1] == 0:
        return 0.0
    return float(torch.linalg.matrix_norm(U.T @ V, ord=2))


__all__ = [
    "CENTRINGS",
    "PARTS",
    "ClassPairMeans",
    "PapyanDecomposition",
    "class_pair_means",
    "decompose",
    "image_overlap",
    "papyan_decomposition",
]
