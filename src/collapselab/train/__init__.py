"""A plain, explicit training loop (docs/training.md; layer ``train``).

Public API:

- :class:`TrainConfig`: hyper-parameters and conventions (loss reduction, weight decay,
  schedule, batching, checkpoints).
- :func:`train`: SGD (or Adam) training with callbacks, metric rows in a
  :class:`collapselab.store.Run`, checkpoints and bit-for-bit resume; returns a
  :class:`TrainResult`.
- :func:`train_ensemble`: E members of one architecture trained as one batched model, each
  as :func:`train` would train it alone (to rounding), with its own run;
  :class:`ArchitectureError` when the members cannot be batched together.
- :func:`linear_gd_step`: one exact full-batch GD step of E deep linear networks at once
  from the data's second moments (paper 002's principal frame), batched products.
- :func:`evaluate`: loss and accuracy over a dataset; :func:`resolve_device`: a device
  name as a ``torch.device``, with a clear error for an unknown or absent one.
- :class:`Callback`, :class:`LambdaCallback`, :class:`TrainState`: the hook interface.
- :func:`training_loss`, :func:`per_sample_loss`: the losses with their reductions.
- :func:`mse_lambda`, :func:`mse_weight_decay`, :func:`mse_gradient_scale`,
  :func:`l2_lambda`, :func:`l2_weight_decay`: weight decay versus the papers' lambda;
  :func:`stationarity`: how far a model is from a critical point of its training objective.
- :func:`seed_everything`: seed Python, NumPy and torch (do it before building a model).
"""

from collapselab.train._rng import seed_everything
from collapselab.train.batched import ArchitectureError
from collapselab.train.callbacks import Callback, LambdaCallback, TrainState
from collapselab.train.config import TrainConfig
from collapselab.train.deep_linear import linear_gd_step
from collapselab.train.ensemble import train_ensemble
from collapselab.train.evaluate import evaluate, resolve_device
from collapselab.train.loop import NON_FINITE_LOSS, TrainResult, train
from collapselab.train.losses import per_sample_loss, training_loss
from collapselab.train.regularization import (
    l2_lambda,
    l2_weight_decay,
    mse_gradient_scale,
    mse_lambda,
    mse_weight_decay,
    stationarity,
)

__all__ = [
    "NON_FINITE_LOSS",
    "ArchitectureError",
    "Callback",
    "LambdaCallback",
    "TrainConfig",
    "TrainResult",
    "TrainState",
    "evaluate",
    "l2_lambda",
    "l2_weight_decay",
    "linear_gd_step",
    "mse_gradient_scale",
    "mse_lambda",
    "mse_weight_decay",
    "per_sample_loss",
    "resolve_device",
    "seed_everything",
    "stationarity",
    "train",
    "train_ensemble",
    "training_loss",
]
