"""Train/eval mode control, and which modules couple the samples of a batch."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Put ``model`` in eval mode; on exit restore every submodule's own ``training`` flag.

    ``model.train()``/``model.eval()`` set the flag of every submodule at once, so restoring
    only ``model.training`` would lose a mixed state (e.g. a frozen BatchNorm kept in eval
    mode inside a training model). This records each submodule's flag and puts it back,
    also when the body raises.

    Example::

        with eval_mode(model), torch.no_grad():
            logits = model(x)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, flag in flags:
            module.training = flag


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
