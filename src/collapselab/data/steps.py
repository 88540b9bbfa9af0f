r"""The preprocessing steps of a :class:`~collapselab.data.DataSpec`, one small class each.

A step is a frozen dataclass of plain data with ``apply(data, seed) -> data`` on a
:class:`~collapselab.data.DataSplits`; a fitted step (standardisation, whitening,
amplification, relabelling) fits on the training split and applies to both. ``seed`` is the
run's seed; a step that draws (subsets, label shuffling) uses the streams of the transform it
wraps (:mod:`collapselab.data.transforms`). :data:`STEPS` lists them by recorded name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import torch

from collapselab.data import transforms
from collapselab.data.dataset import DataSplits, LabeledData
from collapselab.data.pca import PCAmplification, SeparableRelabel, ZCAWhitening

__all__ = [
    "STEPS",
    "AmplifyPCs",
    "Balance",
    "Cast",
    "CenterCrop",
    "DropTest",
    "Flatten",
    "KeepClasses",
    "Pad",
    "Pool",
    "RelabelSeparable",
    "ShuffleLabels",
    "SortByClass",
    "StandardizeChannels",
    "StandardizeScalar",
    "Step",
    "WhitenZCA",
]


class Step:
    """A preprocessing step of a :class:`DataSpec`: ``apply(data, seed) -> data``.

    Subclasses are frozen dataclasses whose fields are plain data; :meth:`to_dict` records
    one in a run's manifest.
    """

    name: ClassVar[str] = ""

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.name, **{f.name: getattr(self, f.name) for f in fields(self)}}


def _map_splits(data: DataSplits, fn: Any) -> DataSplits:
    """``fn`` applied to every split's :class:`LabeledData`."""
    return DataSplits(fn(data.train), None if data.test is None else fn(data.test))


def _with_x(split: LabeledData, x: torch.Tensor) -> LabeledData:
    return LabeledData(x, split.y, split.n_classes, split.name, dict(split.meta))


@dataclass(frozen=True)
class Balance(Step):
    """Balanced class subsets (:func:`~collapselab.data.balanced_subset`).

    ``n_train_per_class``: samples per class of the training split, or ``"smallest"``: as
    many as the smallest class has (paper 001's ``n`` samples per class, §II); ``None``
    leaves the training split whole. ``n_test_per_class``: likewise for the test split; with
    a training size it is drawn in the same call (the test split's own stream), without one
    it is drawn alone with ``seed + 1``.
    """

    n_train_per_class: int | str | None = None
    n_test_per_class: int | None = None
    name: ClassVar[str] = "balance"

    def __post_init__(self) -> None:
        if isinstance(self.n_train_per_class, str) and self.n_train_per_class != "smallest":
            raise ValueError(
                f"Balance: n_train_per_class must be a count, 'smallest' or None, "
                f"got {self.n_train_per_class!r}"
            )

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        n_train, n_test = self.n_train_per_class, self.n_test_per_class
        if n_train == "smallest":
            n_train = int(data.train.class_counts().min())
            if n_train == 0:
                raise ValueError(
                    f"dataset {data.train.name!r}: a class has no training sample; cannot balance"
                )
        if n_train is not None:
            return transforms.balanced_subset(
                data, int(n_train), seed=seed, n_test_per_class=n_test
            )
        if n_test is not None and data.test is not None:
            return DataSplits(
                data.train, transforms.balanced_subset(data.test, n_test, seed=seed + 1)
            )
        return data


@dataclass(frozen=True)
class KeepClasses(Step):
    """Only the samples of ``classes``, relabelled ``0 .. K-1`` in the order given."""

    classes: tuple[int, ...]
    name: ClassVar[str] = "keep_classes"

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        def keep(split: LabeledData) -> LabeledData:
            lookup = torch.full((split.n_classes,), -1, dtype=torch.long)
            lookup[torch.tensor(self.classes)] = torch.arange(len(self.classes))
            kept = lookup[split.y] >= 0
            return LabeledData(split.x[kept], lookup[split.y[kept]], len(self.classes),
                               name=split.name)  # fmt: skip

        return _map_splits(data, keep)


@dataclass(frozen=True)
class DropTest(Step):
    """The training split alone (an experiment that measures on its training data only)."""

    name: ClassVar[str] = "drop_test"

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        return DataSplits(data.train)


@dataclass(frozen=True)
class _Resize(Step):
    """Every image brought to ``size x size`` by the subclass's ``resize(data, size)``."""

    size: int
    resize: ClassVar[Callable[[DataSplits, int], DataSplits]]

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        return type(self).resize(data, self.size)


@dataclass(frozen=True)
class CenterCrop(_Resize):
    """The central ``size x size`` pixels of every image (:func:`~collapselab.data.center_crop`)."""

    name: ClassVar[str] = "center_crop"
    resize = staticmethod(transforms.center_crop)


@dataclass(frozen=True)
class Pad(_Resize):
    """Images zero-padded to ``size x size`` (:func:`~collapselab.data.pad_to_size`)."""

    name: ClassVar[str] = "pad"
    resize = staticmethod(transforms.pad_to_size)


@dataclass(frozen=True)
class Pool(Step):
    """Average pooling of single-channel square images by ``factor`` (flat inputs are
    taken as square images first); ``factor`` 1 leaves the inputs as they are."""

    factor: int
    name: ClassVar[str] = "pool"

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        if self.factor == 1:
            return data
        return _map_splits(data, lambda s: _with_x(s, _pool(s.x, self.factor)))


def _pool(x: torch.Tensor, factor: int) -> torch.Tensor:
    side = round(x[0].numel() ** 0.5)
    if side * side != x[0].numel() or (x.ndim > 2 and x.shape[1] != 1):
        raise ValueError(f"pool needs single-channel square images, got {tuple(x.shape[1:])}")
    images = x.reshape(x.shape[0], 1, side, side)
    return torch.nn.functional.avg_pool2d(images, factor)


@dataclass(frozen=True)
class Flatten(Step):
    """Every input flattened to a vector, ``(N, ...) -> (N, D)``."""

    name: ClassVar[str] = "flatten"

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        return _map_splits(data, lambda s: _with_x(s, s.x.reshape(s.x.shape[0], -1)))


@dataclass(frozen=True)
class StandardizeChannels(Step):
    r"""Per-channel standardisation with the training split's statistics
    (:class:`~collapselab.data.Standardize`: ``(x - m_c) / s_c``, ``ddof = 0``, computed in
    float64, the input's dtype kept)."""

    name: ClassVar[str] = "standardize_channels"

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        return transforms.Standardize().fit_apply(data)


@dataclass(frozen=True)
class StandardizeScalar(Step):
    r"""One scalar mean and standard deviation of every entry of the training inputs:

    .. math::

        x' = (x - m) / s, \qquad m = \frac{1}{N D}\sum_{n,d} x_{nd}, \qquad
        s^2 = \frac{1}{N D - 1}\sum_{n,d} (x_{nd} - m)^2

    (``ddof = 1``, torch's default, as papers 000's and 004's experiments standardise),
    computed and returned in float64; a :class:`Cast` step after it chooses the dtype.
    """

    name: ClassVar[str] = "standardize_scalar"

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        train = data.train.x.double()
        mean, std = train.mean(), train.std()
        return _map_splits(data, lambda s: _with_x(s, (s.x.double() - mean) / std))


@dataclass(frozen=True)
class Cast(Step):
    """Inputs converted to ``dtype`` (``"float32"`` or ``"float64"``)."""

    dtype: str
    name: ClassVar[str] = "cast"

    def __post_init__(self) -> None:
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"Cast: dtype must be 'float32' or 'float64', got {self.dtype!r}")

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        dtype = getattr(torch, self.dtype)
        return _map_splits(data, lambda s: _with_x(s, s.x.to(dtype)))


@dataclass(frozen=True)
class SortByClass(Step):
    """Samples of every split in class-major order (a stable sort by label), the order of an
    unconstrained feature model's columns."""

    name: ClassVar[str] = "sort_by_class"

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        def sort(split: LabeledData) -> LabeledData:
            order = torch.argsort(split.y, stable=True)
            return LabeledData(split.x[order], split.y[order], split.n_classes, split.name,
                               dict(split.meta))  # fmt: skip

        return _map_splits(data, sort)


@dataclass(frozen=True)
class ShuffleLabels(Step):
    """A ``fraction`` of the labels of each split replaced by a random permutation
    (:func:`~collapselab.data.shuffle_labels`, seeded by the run's seed)."""

    fraction: float
    name: ClassVar[str] = "shuffle_labels"

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        return transforms.shuffle_labels(data, self.fraction, seed=seed) if self.fraction else data


@dataclass(frozen=True)
class AmplifyPCs(Step):
    """The principal components amplified as :class:`~collapselab.data.PCAmplification` with
    these arguments, fitted on the training inputs in their current shape (images: the
    renormalisation is per channel, paper 002 App. D.1)."""

    options: Mapping[str, Any] = field(default_factory=dict)
    name: ClassVar[str] = "amplify_pcs"

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        gain = PCAmplification(**dict(self.options)).fit(data.train.x)
        return _map_splits(data, lambda s: _with_x(s, gain.apply(s.x)))


@dataclass(frozen=True)
class WhitenZCA(Step):
    """ZCA whitening with the training statistics (:class:`~collapselab.data.ZCAWhitening`
    with ``eps``); the inputs must be flat."""

    eps: float
    name: ClassVar[str] = "whiten_zca"

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        zca = ZCAWhitening(eps=float(self.eps)).fit(data.train.x)
        return _map_splits(data, lambda s: _with_x(s, zca.apply(s.x)))


@dataclass(frozen=True)
class RelabelSeparable(Step):
    """Both splits' labels replaced by those of a least-squares separator on the training
    inputs' top ``pcs`` principal components (:class:`~collapselab.data.SeparableRelabel`);
    the inputs must be flat."""

    pcs: int
    name: ClassVar[str] = "relabel_separable"

    def apply(self, data: DataSplits, seed: int) -> DataSplits:
        train = data.train
        relabel = SeparableRelabel(int(self.pcs)).fit(train.x, train.y, data.n_classes)
        relabelled = LabeledData(train.x, relabel.train_labels, train.n_classes, train.name,
                                 dict(train.meta))  # fmt: skip
        if data.test is None:
            return DataSplits(relabelled)
        test = data.test
        predicted = relabel.predict(test.x)
        return DataSplits(relabelled, LabeledData(test.x, predicted, test.n_classes, test.name,
                                                  dict(test.meta)))  # fmt: skip


STEPS: dict[str, type[Step]] = {
    cls.name: cls
    for cls in (
        Balance,
        KeepClasses,
        DropTest,
        CenterCrop,
        Pad,
        Pool,
        Flatten,
        StandardizeChannels,
        StandardizeScalar,
        Cast,
        SortByClass,
        ShuffleLabels,
        AmplifyPCs,
        WhitenZCA,
        RelabelSeparable,
    )
}
"""Every step by its recorded name (:meth:`Step.to_dict`'s ``"step"``)."""
