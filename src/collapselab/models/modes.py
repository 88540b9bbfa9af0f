"""Train/eval mode control of a model: :func:`eval_mode`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


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
