r"""How many sine terms a learned decision boundary on the frequency dataset uses (paper 002
App. C.2, Fig. 13: "the decision function incorporates low frequencies at the beginning of
the learning, adding the higher frequencies only later on").

The frequency dataset's label is ``1[x_2 <= λ(x_1)]`` with ``λ = Σ_{i=1}^{m} sin(2π κ_i x_1 +
φ_i)`` (:func:`~collapselab.data.frequency_dataset`). A network's decision regions on a grid
over the data's box are compared with every partial-sum classifier
``1[x_2 <= λ_j(x_1)]``, ``λ_j = Σ_{i<=j}``, ``j = 1..m``: the **boundary's number of terms**
is the ``j`` that agrees with the network on most grid points. A boundary that adds higher
frequencies over training moves to larger ``j``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from collapselab.data.frequency import PAPER_KAPPA, PAPER_PHI
from collapselab.experiments.claims import Claim, NotEvaluable, RunResults
from collapselab.experiments.pcbias._common import verdict

__all__ = ["BOUNDARY_TERMS_CLAIM", "boundary_agreement", "boundary_terms"]

MORE_TERMS = 1
"""Fewest added terms between the first and the last snapshot that count as "adding higher
frequencies"."""


def boundary_agreement(
    regions: np.ndarray,
    x1: np.ndarray,
    x2: np.ndarray,
    kappa: Sequence[float] = PAPER_KAPPA,
    phi: Sequence[float] = PAPER_PHI,
) -> np.ndarray:
    r"""Agreement of predicted class-1 regions ``(..., G1, G2)`` (entry ``[i, k]`` at
    ``(x1[i], x2[k])``) with each partial-sum classifier ``1[x_2 <= λ_j(x_1)]``: the
    fraction of grid points where they agree, ``(..., m)`` for ``j = 1..m``."""
    k = np.asarray(kappa, dtype=np.float64)
    p = np.asarray(phi, dtype=np.float64)
    partial = np.cumsum(np.sin(2 * np.pi * np.asarray(x1)[:, None] * k + p), axis=1)  # (G1, m)
    rules = np.asarray(x2)[None, None, :] <= partial.T[:, :, None]  # (m, G1, G2)
    predicted = np.asarray(regions).astype(bool)[..., None, :, :]
    return (predicted == rules).mean(axis=(-2, -1))


def boundary_terms(agreement: np.ndarray) -> np.ndarray:
    """The best-agreeing number of terms ``j`` (1-based) per snapshot."""
    return np.asarray(agreement).argmax(-1) + 1


def _adds_terms(results: RunResults):
    regions = results.array("frequency", "boundary")  # (S, G, G), one network
    box = results.array("frequency", "box")  # raw [[x1 min, max], [x2 min, max]]
    epochs = results.array("frequency", "boundary_epochs")
    if len(epochs) < 2:
        raise NotEvaluable("needs at least two snapshot epochs")
    size = regions.shape[-1]
    # the grid spans the standardised data's box; standardising is affine per feature, so
    # in raw coordinates it spans the raw box evenly
    x1, x2 = np.linspace(*box[0], size), np.linspace(*box[1], size)
    agreement = boundary_agreement(regions, x1, x2)
    terms = boundary_terms(agreement)
    best = agreement.max(-1)
    values = {"first_terms": float(terms[0]), "last_terms": float(terms[-1]),
              "first_agreement": float(best[0]), "last_agreement": float(best[-1])}  # fmt: skip
    per_epoch = zip(epochs, terms, best, strict=True)
    detail = (
        "one network's decision regions: the number of terms j of the best-agreeing partial "
        "sum λ_j per snapshot epoch (its agreement) "
        + ", ".join(f"{int(e)}: {t} ({a:.3f})" for e, t, a in per_epoch)
        + f"; last >= first + {MORE_TERMS}?"
    )
    ok = bool(terms[-1] >= terms[0] + MORE_TERMS)
    return verdict(ok, values, float(MORE_TERMS), detail)


BOUNDARY_TERMS_CLAIM = Claim(
    "boundary-adds-frequencies",
    "Fig. 13 / App. C.2: the decision function incorporates low frequencies at the beginning "
    "of learning, adding the higher frequencies only later on.",
    "002 App. C.2, Fig. 13",
    f"number of terms j of the partial sum λ_j that agrees best with the network's decision "
    f"regions on the data's box: at the last snapshot >= at the first + {MORE_TERMS}",
    _adds_terms,
)
"""Fig. 13's claim, for ``pcbias-frequency`` (its ``frequency.npz``: ``boundary``,
``box``, ``boundary_epochs``)."""
