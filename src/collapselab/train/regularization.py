r"""Converting PyTorch's weight decay to the papers' regularisation constants, and how far a
trained network is from a critical point of its regularised objective (:func:`stationarity`).

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

import math

import torch
from torch import nn

from collapselab.checks import check_choice, check_float, check_int
from collapselab.data.dataset import LabeledData
from collapselab.metrics.mse import paper_lambda
from collapselab.train.config import MSE_REDUCTIONS, TrainConfig
from collapselab.train.evaluate import _eval_batches
from collapselab.train.losses import training_loss


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


def stationarity(
    model: nn.Module, data: LabeledData, config: TrainConfig, batch_size: int = 1024
) -> dict[str, float]:
    r"""How far ``model`` is from a critical point of the objective ``config`` trains it on.

    .. math::  s = \frac{\|\nabla L(\theta) + wd\,\theta\|}{\|wd\,\theta\|},

    with ``L`` the training loss (:func:`~collapselab.train.training_loss` with ``config``'s
    loss, reduction and label scale) averaged over the whole of ``data``, and ``wd`` the
    weight decay PyTorch's SGD applies to every parameter: the gradient of
    ``L + (wd/2)‖θ‖²`` relative to its decay term. ``s = 0`` at a critical point (where
    paper 004's theorems are stated); ``s ≈ 1`` where the data gradient is small against
    the decay, i.e. weight decay has not yet acted. Returned per parameter name and over
    all of them (``"total"``), in the model's dtype and eval mode (restored afterwards).
    """
    wd = check_float("weight_decay", config.weight_decay, minimum=0.0)
    if wd == 0:
        raise ValueError("stationarity is relative to the weight decay; config.weight_decay is 0")
    n = int(data.y.shape[0])
    if n == 0:
        raise ValueError("cannot measure stationarity on an empty dataset")
    named = [(k, p) for k, p in model.named_parameters() if p.requires_grad]
    grads = [torch.zeros_like(p) for _, p in named]
    for xb, yb in _eval_batches(model, data.x, data.y, batch_size):
        value = training_loss(model(xb), yb, config.loss, config.mse_reduction, config.label_scale)
        parts = torch.autograd.grad(value * (yb.shape[0] / n), [p for _, p in named])
        grads = [g + part for g, part in zip(grads, parts, strict=True)]
    out: dict[str, float] = {}
    residual_sq = decay_sq = 0.0
    for (name, p), g in zip(named, grads, strict=True):
        residual, decay = float((g + wd * p.detach()).norm()), float((wd * p.detach()).norm())
        out[name] = residual / decay if decay > 0 else math.inf
        residual_sq, decay_sq = residual_sq + residual**2, decay_sq + decay**2
    out["total"] = math.sqrt(residual_sq / decay_sq) if decay_sq > 0 else math.inf
    return out
