"""Build any collapselab model by name (used by configs, presets and the command line)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from torch import nn

from collapselab.models.deep_linear import DeepLinear
from collapselab.models.densenet import DenseNet, densenet40, densenet100, densenet201, densenet250
from collapselab.models.mlp import MLP
from collapselab.models.resnet_classic import resnet18, resnet34, resnet50
from collapselab.models.resnet_conv import (
    ConvResNet,
    pfc_cifar10,
    pfc_cifar100,
    pfc_fashion_mnist,
    pfc_stl10,
)
from collapselab.models.resnet_fc import FCResNet, pfc_mnist
from collapselab.models.st_vgg import StVGG
from collapselab.models.two_layer import TwoLayerReLU
from collapselab.models.vgg import vgg11, vgg13, vgg19


def _st_vgg_linear(n_classes: int, **kwargs: Any) -> StVGG:
    """The linear twin of st-VGG (identity activations, average pooling)."""
    if "linear" in kwargs:
        raise TypeError("st_vgg_linear does not take 'linear'; use 'st_vgg' with linear=...")
    return StVGG(n_classes, linear=True, **kwargs)


_REGISTRY: dict[str, Callable[..., nn.Module]] = {
    "mlp": MLP,
    "deep_linear": DeepLinear,
    "two_layer_relu": TwoLayerReLU,
    "fc_resnet": FCResNet,
    "conv_resnet": ConvResNet,
    "pfc_mnist": pfc_mnist,
    "pfc_fashion_mnist": pfc_fashion_mnist,
    "pfc_cifar10": pfc_cifar10,
    "pfc_stl10": pfc_stl10,
    "pfc_cifar100": pfc_cifar100,
    "resnet18": resnet18,
    "resnet34": resnet34,
    "resnet50": resnet50,
    "vgg11": vgg11,
    "vgg13": vgg13,
    "vgg19": vgg19,
    "densenet": DenseNet,
    "densenet40": densenet40,
    "densenet100": densenet100,
    "densenet201": densenet201,
    "densenet250": densenet250,
    "st_vgg": StVGG,
    "st_vgg_linear": _st_vgg_linear,
}


def available_models() -> list[str]:
    """Sorted names accepted by :func:`build_model`."""
    return sorted(_REGISTRY)


def build_model(name: str, **kwargs: Any) -> nn.Module:
    """Construct the model registered as ``name`` with keyword arguments ``kwargs``.

    Names are case-insensitive and ``-`` is read as ``_`` (``"ResNet18"``, ``"st-vgg"``).

    Raises:
        ValueError: unknown ``name`` (the message lists the available ones).
        TypeError: ``kwargs`` do not fit the model's signature (the message names it).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    if key not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(available_models())}")
    factory = _REGISTRY[key]
    signature = inspect.signature(factory).replace(return_annotation=inspect.Signature.empty)
    params = signature.parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(kwargs) - set(params))
        if unknown:
            raise TypeError(
                f"build_model({key!r}, ...): unexpected argument(s) {', '.join(unknown)}; "
                f"signature is {key}{signature}"
            )
    try:
        signature.bind(**kwargs)
    except TypeError as err:
        msg = f"build_model({key!r}, ...): {err}; signature is {key}{signature}"
        raise TypeError(msg) from None
    return factory(**kwargs)
