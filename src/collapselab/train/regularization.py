r"""Converting PyTorch's weight decay to the papers' regularisation constants.

PyTorch's SGD adds ``wd * w`` to each parameter's gradient, which is gradient descent on
``loss + (wd/2) ||w||^2``.

**Paper 003 (Eq. 2)** writes the MSE objective of a classifier ``(W, b)`` on features ``h``

.. math::  L = \tfrac12 \operatorname{Ave}_i \|W h_i + b - y_i\|^2
             + \tfrac{\lambda}{2}(\|W\|_F^2 + \|b\|^2).

A PyTorch MSE loss is ``kappa * Ave_i ||r_i||^2`` with ``kappa = 1/C`` for
``nn.MSELoss()`` (mean over classes too) and ``kappa = 1`` for ``"sum_classes"``. Its
SGD gradient is

.. math::  2\kappa \operatorname{Ave}_i r_i h_i^\top + wd\, W
         = 2\kappa \big[\operatorname{Ave}_i r_i h_i^\top + \tfrac{wd}{2\kappa} W\big],

so training follows paper 003's objective with ``lambda = wd / (2 kappa)`` (``C wd / 2``
for ``"mean"``, ``wd / 2`` for ``"sum_classes"``; note 003 §4.4) and a learning rate
multiplied by ``2 kappa`` (:func:`mse_gradient_scale`).

**Paper 000 (R2)** writes ``L = L_CE + lambda ||W||^2`` (gradient term ``2 lambda W``), so
``lambda = wd / 2`` with the batch-mean cross-entropy.
"""

from __future__ import annotations

from collapselab.checks import check_choice, check_float, check_int
from collapselab.metrics.mse import paper_lambda
from collapselab.train.config import MSE_REDUCTIONS


def _kappa(n_classes: int, reduction: str) -> float:
    n_classes = check_int("n_classes", n_classes, minimum=1)
    reduction = check_choice("reduction", reduction, MSE_REDUCTIONS)
    return 1.0 / n_classes if reduction == "mean" else 1.0


def mse_lambda(weight_decay: float, n_classes: int, reduction: str = "mean") -> float:
    """Paper 003's lambda (Eq. 2) equivalent to PyTorch SGD ``weight_decay`` with the MSE loss.

    ``lambda = weight_decay / (2 kappa)``: ``C * weight_decay / 2`` for ``reduction="mean"``
    (``nn.MSELoss()``), ``weight_decay / 2`` for ``"sum_classes"``: the training loop's two
    reductions of :func:`collapselab.metrics.mse.paper_lambda`, which holds the formula.
    """
    reduction = check_choice("reduction", reduction, MSE_REDUCTIONS)
    return paper_lambda(weight_decay, check_int("n_classes", n_classes, minimum=1), reduction)


def mse_weight_decay(lam: float, n_classes: int, reduction: str = "mean") -> float:
    """The PyTorch weight decay giving paper 003's ``lam`` (inverse of :func:`mse_lambda`)."""
    return 2.0 * _kappa(n_classes, reduction) * check_float("lam", lam, minimum=0.0)


def mse_gradient_scale(n_classes: int, reduction: str = "mean") -> float:
    """Factor ``2 kappa`` with grad(PyTorch MSE + weight decay) = factor * grad(paper 003 L).

    SGD with learning rate ``lr`` is thus SGD on paper 003's objective with rate
    ``lr * 2 kappa`` (``2 lr / C`` for ``"mean"``, ``2 lr`` for ``"sum_classes"``).
    """
    return 2.0 * _kappa(n_classes, reduction)


def l2_lambda(weight_decay: float) -> float:
    """Paper 000's lambda in ``L = L_CE + lambda ||W||^2``: ``weight_decay / 2``."""
    return check_float("weight_decay", weight_decay, minimum=0.0) / 2.0


def l2_weight_decay(lam: float) -> float:
    """The PyTorch weight decay for paper 000's ``lambda``: ``2 lambda``."""
    return 2.0 * check_float("lam", lam, minimum=0.0)
