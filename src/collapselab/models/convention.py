"""The layer-naming convention every collapselab model follows, and a checker for it."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import nn


@runtime_checkable
class FeatureModel(Protocol):
    """What probes and monitors rely on (see the :mod:`collapselab.models` docstring).

    Attributes:
        feature_layers: ordered names (as in ``model.named_modules()``) of the modules whose
            outputs are the per-layer features researchers measure.
        penultimate: name of the module whose output is the classifier's input.
        classifier: the final ``nn.Linear``; its ``weight`` is W (C x D), ``bias`` is b or None.
    """

    @property
    def feature_layers(self) -> list[str]: ...

    @property
    def penultimate(self) -> str: ...

    @property
    def classifier(self) -> nn.Linear: ...


def check_convention(model: nn.Module) -> None:
    """Raise if ``model`` does not follow the :class:`FeatureModel` convention.

    Checks that ``feature_layers`` is a list of distinct names and that each of them and
    ``penultimate`` names a submodule of ``model``, and that ``classifier`` is an
    ``nn.Linear`` registered inside ``model``. Useful for user-supplied models before they
    are handed to probes.

    Raises:
        TypeError: an attribute is missing or has the wrong type.
        ValueError: a name does not resolve in ``model.named_modules()``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    for attr in ("feature_layers", "penultimate", "classifier"):
        if not hasattr(model, attr):
            raise TypeError(f"model {type(model).__name__} has no attribute {attr!r}")
    names = model.feature_layers
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TypeError("model.feature_layers must be a list of str")
    if len(set(names)) != len(names):
        raise ValueError(f"model.feature_layers has duplicate names: {names}")
    if not isinstance(model.penultimate, str):
        raise TypeError("model.penultimate must be a str")
    available = dict(model.named_modules())
    for name in [*names, model.penultimate]:
        if name == "" or name not in available:
            raise ValueError(
                f"layer name {name!r} of {type(model).__name__} does not resolve in "
                "model.named_modules()"
            )
    clf = model.classifier
    if not isinstance(clf, nn.Linear):
        raise TypeError(f"model.classifier must be an nn.Linear, got {type(clf).__name__}")
    if not any(m is clf for m in available.values()):
        raise ValueError("model.classifier is not a submodule of model")
