r"""Evaluation hooks on transformed copies of a dataset (note 002 R16).

A network trained on the original data is scored, at every checkpoint, on copies of an
evaluation split passed through a transform fitted on the **training** inputs: the
projection onto the top ``P`` PCs (:class:`~collapselab.data.pca.PCAProjection`,
reconstructed in input space; Fig. 5) or ZCA whitening
(:class:`~collapselab.data.pca.ZCAWhitening`). A transform is named by a short string, the
form the presets and members take (their ``eval_transforms`` field):

* ``"pca:<P>"``: the top-``P`` projection, ``P >= 1`` (centred PCs);
* ``"zca"``: ZCA whitening with the library's default regulariser ``eps = 1e-5``;
  ``"zca:<eps>"`` with the given ``eps >= 0``.

:func:`transformed_sets` builds the copies once; :func:`set_accuracies` scores a model on
them (the fraction of each copy whose argmax prediction is its label).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from collapselab.data.pca import PCAProjection, ZCAWhitening
from collapselab.data.transforms import FittedTransform

__all__ = ["EvalSet", "eval_transform", "set_accuracies", "transformed_sets"]

_EXPECTED = "'pca:<P>' (an integer P >= 1), 'zca' or 'zca:<eps>' (a number eps >= 0)"


@dataclass(frozen=True)
class EvalSet:
    """A transformed evaluation split: its transform's name, inputs and labels."""

    name: str
    x: torch.Tensor
    y: torch.Tensor


def eval_transform(name: str) -> FittedTransform:
    """The unfitted transform named ``name`` (``"pca:<P>"``, ``"zca"``, ``"zca:<eps>"``)."""
    if not isinstance(name, str):
        raise ValueError(f"eval_transforms entry {name!r} is not a string; expected {_EXPECTED}")
    kind, _, argument = name.partition(":")
    try:
        if kind == "pca" and argument:
            return PCAProjection(int(argument))
        if kind == "zca":
            return ZCAWhitening(float(argument)) if argument else ZCAWhitening()
    except ValueError as error:
        raise ValueError(f"eval_transforms entry {name!r} is invalid ({error}); expected "
                         f"{_EXPECTED}") from error  # fmt: skip
    raise ValueError(f"eval_transforms entry {name!r} is unknown; expected {_EXPECTED}")


def transformed_sets(
    names: Sequence[str], fit_on: torch.Tensor, x: torch.Tensor, y: torch.Tensor
) -> list[EvalSet]:
    """One :class:`EvalSet` per name, in order: the transform fitted on ``fit_on`` (the
    training inputs) and applied to ``x`` (same dtype as ``x``), labels ``y``."""
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} rows but y has {len(y)}: one label per example")
    return [EvalSet(name, eval_transform(name).fit(fit_on).apply(x), y) for name in names]


def set_accuracies(
    model: Callable[[torch.Tensor], torch.Tensor], sets: Sequence[EvalSet]
) -> list[float]:
    """The accuracy of ``model`` (inputs to logits, argmax over the last axis) on each set,
    in order, without gradients."""
    with torch.no_grad():
        return [float((model(s.x).argmax(1) == s.y).double().mean()) for s in sets]
