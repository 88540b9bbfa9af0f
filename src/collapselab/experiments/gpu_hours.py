r"""The GPU hours a preset would take, estimated from its networks' measured FLOPs.

``collapselab reproduce <paper> --preset paper --dry-run`` prints, per experiment, an
estimate of its training time on one GPU. An experiment's dry run reports the network
trainings it would do (:class:`Training`: the forward FLOPs of one sample, measured on the
built network by :func:`forward_flops`, the samples per epoch, the epochs, the number of
networks, and the samples scored at each evaluation); the estimate is

.. math::

    \text{hours} = \frac{\sum_t N_t \,F_t\,(3\, n_t\, E_t + m_t\, V_t)}{R \cdot 3600},

with ``F_t`` the forward FLOPs per sample (two per multiply-add of every convolution and
linear layer; activations, pooling, normalisation and the optimiser step are not counted),
``3 F`` a training step's forward and backward pass per sample (the usual backward = 2 x
forward rule), ``n_t`` training samples per epoch, ``E_t`` epochs, ``N_t`` networks, ``m_t``
samples per evaluation and ``V_t`` evaluations, and ``R`` = :data:`THROUGHPUT` the sustained
rate assumed. ``R`` is an assumption, not a measurement (no GPU has run these presets): a
fifth of the ~67 TFLOP/s float32 peak of a current data-centre GPU (NVIDIA H100/H200),
since small networks at batch 100 keep it far from its peak; the estimate is therefore an
order of magnitude, and data loading, the curvature family's Lanczos iterations and the
CPU-side analyses come on top.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["THROUGHPUT", "Training", "forward_flops", "gpu_hours", "hours_line"]

THROUGHPUT = 13e12
"""Assumed sustained FLOP/s of one GPU on these networks (module docstring)."""


@dataclass(frozen=True)
class Training:
    """One kind of network training of an experiment (module docstring's ``t``).

    Attributes:
        what: a label ("st-VGG, small mammals").
        flops: forward FLOPs of one sample (:func:`forward_flops`).
        samples: training samples per epoch; epochs: epochs (full-batch steps count as
            epochs of the whole set).
        networks: networks trained so.
        evaluated: samples scored at each evaluation; evaluations: evaluations per network.
    """

    what: str
    flops: int
    samples: int
    epochs: int
    networks: int
    evaluated: int = 0
    evaluations: int = 0

    def total_flops(self) -> float:
        """``N F (3 n E + m V)``."""
        per_network = 3 * self.samples * self.epochs + self.evaluated * self.evaluations
        return float(self.networks) * float(self.flops) * float(per_network)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def forward_flops(model: nn.Module, example: torch.Tensor) -> int:
    """Forward FLOPs of ``model`` on one sample: ``2 x`` the multiply-adds of every
    :class:`~torch.nn.Conv2d` (``out elements x in_channels/groups x kernel``) and
    :class:`~torch.nn.Linear` (``in x out`` per output row), counted by hooks on a pass of
    ``example[:1]`` (in evaluation mode, without gradients; the mode is restored)."""
    macs = [0]

    def conv(module: nn.Conv2d, _inputs: Any, output: torch.Tensor) -> None:
        kernel = module.kernel_size[0] * module.kernel_size[1]
        macs[0] += output[0].numel() * (module.in_channels // module.groups) * kernel

    def linear(module: nn.Linear, _inputs: Any, output: torch.Tensor) -> None:
        macs[0] += output[0].numel() * module.in_features

    hooks = [
        m.register_forward_hook(conv if isinstance(m, nn.Conv2d) else linear)
        for m in model.modules()
        if isinstance(m, (nn.Conv2d, nn.Linear))
    ]
    training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(example[:1])
    finally:
        model.train(training)
        for hook in hooks:
            hook.remove()
    return 2 * macs[0]


def gpu_hours(trainings: Iterable[Training | Mapping[str, Any]]) -> float:
    """The module docstring's estimate for ``trainings`` (or their :meth:`Training.to_dict`)."""
    items = [t if isinstance(t, Training) else Training(**t) for t in trainings]
    return sum(t.total_flops() for t in items) / THROUGHPUT / 3600.0


def hours_line(built: Mapping[str, Any] | None) -> str:
    """The dry run's line: ``"estimated GPU hours: 12.3 (...)"`` from a dry-run summary's
    ``gpu_work`` (a list of :class:`Training` dicts), or why there is no estimate."""
    if built is None:
        return "estimated GPU hours: none estimated (trains no network from files)"
    work = built.get("gpu_work")
    if not work:
        return "estimated GPU hours: not estimated (its dry run reports no network training)"
    hours = gpu_hours(work)
    networks = sum(int(t["networks"]) for t in work)
    return (
        f"estimated GPU hours: {hours:.3g} ({networks} networks; measured forward FLOPs x "
        f"3 x samples x epochs, plus evaluations, at an assumed {THROUGHPUT / 1e12:g} TFLOP/s)"
    )
