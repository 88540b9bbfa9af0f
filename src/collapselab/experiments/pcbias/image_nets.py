r"""Paper 002's convolutional networks on the flat rows its pipelines give (App. D.2, §4.3).

Paper 002's non-linear experiments train st-VGGs (:class:`~collapselab.models.StVGG`: Figs 5a,
9, 11 on small mammals, App. D) and VGG-19s (:func:`~collapselab.models.vgg19`: Figs 5b and
7b on CIFAR-10). The experiments' data are flat rows (:func:`~collapselab.experiments.
pcbias._common.pcb_data` flattens the standardised ``(C, H, W)`` images channels first), so
that PCA projections, amplification, relabelling and whitening act on the whole image as in
the paper; :class:`FlatImageNet` reshapes each row back to its image before the network.

A network here is one of :data:`IMAGE_NETS`: ``"st_vgg"`` (ReLU, max-pooling; its
``linear`` twin has every activation the identity and 2 x 2 average pooling, the paper's
"linear st-VGG") or ``"vgg19"`` (configuration E with BatchNorm; no linear twin).
Evaluation passes go through :func:`chunked_logits` (a 50000-image batch of VGG-19
activations would not fit a GPU) and return CPU tensors.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from collapselab.models import StVGG, vgg19

__all__ = [
    "IMAGE_NETS",
    "SCORE_CHUNK",
    "FlatImageNet",
    "chunked_features",
    "chunked_logits",
    "image_network",
]

ImageNet = Literal["st_vgg", "vgg19"]
IMAGE_NETS: tuple[str, ...] = ("st_vgg", "vgg19")

SCORE_CHUNK = 1000
"""Images per evaluation pass of an image network."""


def _image_shape(q: int) -> tuple[int, int, int]:
    """``(C, H, W)`` of flat square images with ``q`` values, one or three channels."""
    for channels in (3, 1):
        side = round((q // channels) ** 0.5)
        if q % channels == 0 and side * side * channels == q:
            return channels, side, side
    raise ValueError(f"a convolutional network needs square images of 1 or 3 channels; the "
                     f"data has {q} inputs per example")  # fmt: skip


class FlatImageNet(nn.Module):
    """``net`` applied to flat rows: ``x (N, C·H·W) -> net(x.reshape(N, C, H, W))``."""

    def __init__(self, net: nn.Module, shape: tuple[int, int, int]) -> None:
        super().__init__()
        self.net, self.shape = net, shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.reshape(-1, *self.shape))

    def penultimate(self, x: torch.Tensor) -> torch.Tensor:
        """The features of ``net.penultimate`` (the input of the classifier) for rows ``x``."""
        found: list[torch.Tensor] = []
        layer = self.net.get_submodule(self.net.penultimate)
        handle = layer.register_forward_hook(lambda _m, _i, out: found.append(out.flatten(1)))
        try:
            self(x)
        finally:
            handle.remove()
        return found[0]


def image_network(name: str, q: int, k: int, *, linear: bool = False) -> FlatImageNet:
    """The untrained network ``name`` (:data:`IMAGE_NETS`) for ``q``-value flat images and
    ``k`` classes at the paper's width; ``linear``: st-VGG's linear twin."""
    shape = _image_shape(q)
    if name == "st_vgg":
        return FlatImageNet(StVGG(k, shape[0], linear=linear, input_size=shape[1:]), shape)
    if name == "vgg19":
        if linear:
            raise ValueError("VGG-19 has no linear twin here (paper 002 trains none)")
        return FlatImageNet(vgg19(shape[0], k), shape)
    raise ValueError(f"network must be one of {list(IMAGE_NETS)}, got {name!r}")


def _device(net: nn.Module) -> torch.device:
    return next(net.parameters()).device


def chunked_logits(net: nn.Module, x: torch.Tensor, chunk: int = SCORE_CHUNK) -> torch.Tensor:
    """``net(x)`` in chunks of ``chunk`` rows (each moved to ``net``'s device), without
    gradients, returned on the CPU."""
    device = _device(net)
    with torch.no_grad():
        return torch.cat([net(part.to(device)).cpu() for part in x.split(chunk)])


def chunked_features(net: FlatImageNet, x: torch.Tensor, chunk: int = SCORE_CHUNK) -> torch.Tensor:
    """:meth:`FlatImageNet.penultimate` of ``x`` in chunks, without gradients, on the CPU."""
    device = _device(net)
    with torch.no_grad():
        return torch.cat([net.penultimate(part.to(device)).cpu() for part in x.split(chunk)])
