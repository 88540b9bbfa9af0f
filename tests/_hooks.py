"""Test helper: capture named layers' outputs in one forward pass."""

from __future__ import annotations

import torch
from torch import nn


def capture_outputs(model: nn.Module, names: list[str], x: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{"logits": model(x), name: output of module name, ...}``; each layer must fire once."""
    out: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    handles = [
        model.get_submodule(n).register_forward_hook(lambda _m, _i, o, n=n: out[n].append(o))
        for n in names
    ]
    try:
        with torch.no_grad():
            logits = model(x)
    finally:
        for h in handles:
            h.remove()
    assert all(len(v) == 1 for v in out.values()), "each feature layer must fire once"
    return {"logits": logits, **{n: v[0] for n, v in out.items()}}
