"""Train/eval mode control (:func:`eval_mode`, kept with the models), and which modules couple
the samples of a batch."""

from __future__ import annotations

from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from collapselab.models.modes import eval_mode

__all__ = ["batch_coupling_modules", "eval_mode"]


def batch_coupling_modules(model: nn.Module) -> list[str]:
    """Names of submodules whose output for one sample depends on the other samples.

    These are batch-normalisation layers that normalise with the statistics of the current
    batch: in training mode, or in any mode when built with ``track_running_stats=False``
    (no running estimates to use). Per-sample quantities derived from a batched forward
    pass (per-sample feature gradients in particular) are exact only when this list is
    empty, which :func:`eval_mode` ensures for ordinary BatchNorm.
    """
    out = []
    for name, module in model.named_modules():
        if isinstance(module, _BatchNorm) and (module.training or module.running_mean is None):
            out.append(name)
    return out
