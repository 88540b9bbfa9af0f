"""Preprocessing the papers use: standardisation, padding, balanced subsets, label shuffling.

Fitted transforms (statistics from the training split, then applied to any split) derive from
:class:`FittedTransform`: ``fit(x)`` then ``apply(x)`` on tensors, or ``fit_apply(data)`` on
:class:`LabeledData` / :class:`DataSplits` (fit on the training split, apply to both).
Statistics and arithmetic are float64; outputs keep the input's floating dtype. Every
function that returns new data records what it did in ``meta["transforms"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np
import torch
import torch.nn.functional as F

from collapselab.checks import (
    ArgumentTypeError,
    as_tensor,
    check_choice,
    check_finite,
    check_float,
    check_int,
    check_seed,
)
from collapselab.data._rng import numpy_rng
from collapselab.data.dataset import DataSplits, LabeledData

Data = TypeVar("Data", torch.Tensor, LabeledData, DataSplits)

# Rows per float64 block: bounds the temporary memory of a pass over a large image tensor.
_BLOCK_ELEMENTS = 1 << 22


def _blocks(x: torch.Tensor) -> Iterator[slice]:
    per_row = max(1, int(np.prod(x.shape[1:])))
    rows = max(1, _BLOCK_ELEMENTS // per_row)
    for start in range(0, x.shape[0], rows):
        yield slice(start, min(start + rows, x.shape[0]))


def _samples(x: object, allow_empty: bool = False) -> torch.Tensor:
    """Inputs ``x`` of shape ``(N, ...)``: a floating tensor (or array) of finite values."""
    t = as_tensor("x", x)
    if t.ndim < 2:
        raise ValueError(f"x must have at least 2 dimensions (N, ...), got shape {tuple(t.shape)}")
    if not t.is_floating_point():
        raise ArgumentTypeError(f"x must be a floating-point tensor, got dtype {t.dtype}")
    if t.shape[0] == 0 and not allow_empty:
        raise ValueError(f"x must contain at least one sample, got shape {tuple(t.shape)}")
    check_finite("x", t)
    return t


def _note(meta: dict, note: str) -> dict:
    return {**meta, "transforms": [*meta.get("transforms", []), note]}


def _with_x(data: LabeledData, x: torch.Tensor, note: str) -> LabeledData:
    return LabeledData(x, data.y, data.n_classes, data.name, _note(data.meta, note))


def _with_y(data: LabeledData, y: torch.Tensor, note: str) -> LabeledData:
    return LabeledData(data.x, y, data.n_classes, data.name, _note(data.meta, note))


def _map_inputs(data: Data, fn: Callable[[torch.Tensor], torch.Tensor], note: str) -> Data:
    """Apply ``fn`` to a tensor, to ``data.x``, or to the ``x`` of both splits."""
    if isinstance(data, torch.Tensor):
        return fn(data)
    if isinstance(data, LabeledData):
        return _with_x(data, fn(data.x), note)
    if isinstance(data, DataSplits):
        test = None if data.test is None else _with_x(data.test, fn(data.test.x), note)
        return DataSplits(_with_x(data.train, fn(data.train.x), note), test)
    raise TypeError(
        f"data must be a torch.Tensor, LabeledData or DataSplits, got {type(data).__name__}"
    )


class FittedTransform:
    """A transform whose statistics are fitted on training inputs, then applied anywhere."""

    def fit(self, x: torch.Tensor) -> FittedTransform:
        """Fit on inputs ``x`` of shape ``(N, ...)``; returns ``self``."""
        raise NotImplementedError

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """Transform inputs ``x`` of the fitted shape; same dtype as ``x``."""
        raise NotImplementedError

    def _check_fitted(self, attribute: str) -> None:
        if getattr(self, attribute, None) is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(x) first")

    def __call__(self, data: Data) -> Data:
        """Apply to a tensor, a :class:`LabeledData` or both splits of a :class:`DataSplits`."""
        return _map_inputs(data, self.apply, repr(self))

    def fit_apply(self, data: Data) -> Data:
        """Fit on ``data`` (its training split for :class:`DataSplits`) and apply to all of it."""
        if isinstance(data, DataSplits):
            self.fit(data.train.x)
        elif isinstance(data, LabeledData):
            self.fit(data.x)
        elif isinstance(data, torch.Tensor):
            self.fit(data)
        else:
            raise TypeError(
                f"data must be a torch.Tensor, LabeledData or DataSplits, got {type(data).__name__}"
            )
        return self(data)


def _channel_view(x: torch.Tensor) -> torch.Tensor:
    """``(N, C, ...)`` as ``(N, C, L)``; a ``(N, D)`` input has ``D`` channels of length 1."""
    return x.reshape(x.shape[0], x.shape[1], -1)


class Standardize(FittedTransform):
    r"""Per-channel standardisation to mean 0 and standard deviation 1.

    ``x'_{n,c,...} = (x_{n,c,...} - m_c) / s_c`` with ``m_c`` and ``s_c`` (``ddof = 0``) taken
    over all samples and positions of channel ``c`` (axis 1) of the fitting data: the
    per-channel normalisation of papers 002 (§4) and 003 (§4.1). For ``(N, D)`` vectors each
    feature is a channel. A channel with ``s_c <= eps`` (e.g. a constant border pixel) is only
    centred (``s_c`` is replaced by 1).

    Args:
        eps: threshold below which a channel's standard deviation counts as zero.
    """

    def __init__(self, eps: float = 1e-12) -> None:
        self.eps = check_float("eps", eps, minimum=0.0)
        self.mean: torch.Tensor | None = None
        self.std: torch.Tensor | None = None

    def __repr__(self) -> str:
        return f"Standardize(eps={self.eps})"

    def fit(self, x: torch.Tensor) -> Standardize:
        x = _samples(x)
        n_per_channel = x.shape[0] * _channel_view(x[:1]).shape[2]
        total = torch.zeros(x.shape[1], dtype=torch.float64)
        for block in _blocks(x):
            total += _channel_view(x[block]).to(torch.float64).sum(dim=(0, 2))
        mean = total / n_per_channel
        squares = torch.zeros_like(mean)
        for block in _blocks(x):
            centred = _channel_view(x[block]).to(torch.float64) - mean[:, None]
            squares += (centred**2).sum(dim=(0, 2))
        std = torch.sqrt(squares / n_per_channel)
        self.mean, self.std = mean, torch.where(std > self.eps, std, torch.ones_like(std))
        return self

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        self._check_fitted("mean")
        x = _samples(x, allow_empty=True)
        if x.shape[1] != self.mean.shape[0]:
            raise ValueError(
                f"x has {x.shape[1]} channels (axis 1) but Standardize was fitted on "
                f"{self.mean.shape[0]}"
            )
        out = torch.empty_like(x)
        shape = (1, -1) + (1,) * (x.ndim - 2)
        mean, std = self.mean.reshape(shape), self.std.reshape(shape)
        for block in _blocks(x):
            out[block] = ((x[block].to(torch.float64) - mean) / std).to(x.dtype)
        return out


def _pad_offsets(size: int, current: int, axis: str) -> tuple[int, int]:
    if current > size:
        raise ValueError(f"cannot pad {axis}={current} to a smaller size {size}")
    before = (size - current) // 2
    return before, size - current - before


def _image_size(size: int | tuple[int, int]) -> tuple[int, int]:
    """``(H, W)`` of a size given as ``H = W`` or as a pair, each a positive int."""
    if isinstance(size, tuple):
        if len(size) != 2:
            raise ValueError(f"size must be an int or a pair (H, W), got {size!r}")
        height, width = (check_int("size", s, minimum=1) for s in size)
        return height, width
    side = check_int("size", size, minimum=1)
    return side, side


def pad_to_size(data: Data, size: int | tuple[int, int] = 32, value: float = 0.0) -> Data:
    """Zero-pad images ``(N, C, H, W)`` to ``size x size``, the original in the centre.

    Paper 003 §4.1: MNIST and Fashion-MNIST (28x28) are padded to 32x32 (2 pixels each side,
    as ``Pad(2)`` in the authors' notebook). An odd difference puts the extra row/column at
    the bottom/right. Pad before standardising so the border takes the background value.

    Args:
        data: a tensor, :class:`LabeledData` or :class:`DataSplits` of images.
        size: target ``H = W`` or a pair ``(H, W)``, each at least the current size.
        value: fill value.
    """
    height, width = _image_size(size)
    value = check_float("value", value)

    def pad(x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4:
            raise ValueError(f"pad_to_size expects images (N, C, H, W), got shape {tuple(x.shape)}")
        top, bottom = _pad_offsets(height, x.shape[2], "H")
        left, right = _pad_offsets(width, x.shape[3], "W")
        return F.pad(x, (left, right, top, bottom), mode="constant", value=value)

    return _map_inputs(data, pad, f"pad_to_size(size=({height}, {width}), value={value})")


def center_crop(data: Data, size: int | tuple[int, int] = 32) -> Data:
    """Crop images ``(N, C, H, W)`` to their central ``size x size`` pixels.

    Paper 000 (A.3) trains its MLPs on 32 x 32 crops of Tiny-ImageNet's 64 x 64 images
    (3072 inputs, as CIFAR-10); it crops at random for training and does not say how it
    evaluates (note A18): the central crop is the deterministic counterpart. An odd
    difference leaves the extra row/column at the top/left (rows ``(H - h) // 2`` on).

    Args:
        data: a tensor, :class:`LabeledData` or :class:`DataSplits` of images.
        size: target ``H = W`` or a pair ``(H, W)``, each at most the current size.
    """
    height, width = _image_size(size)

    def crop(x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4:
            raise ValueError(f"center_crop expects images (N, C, H, W), got shape {tuple(x.shape)}")
        if height > x.shape[2] or width > x.shape[3]:
            raise ValueError(
                f"cannot crop images of {x.shape[2]} x {x.shape[3]} to a larger {height} x {width}"
            )
        top, left = (x.shape[2] - height) // 2, (x.shape[3] - width) // 2
        return x[:, :, top : top + height, left : left + width].contiguous()

    return _map_inputs(data, crop, f"center_crop(size=({height}, {width}))")


def _balanced_index(
    y: torch.Tensor, n_classes: int, n: int, seed: int, stream: int
) -> torch.Tensor:
    labels = y.numpy()
    counts = np.bincount(labels, minlength=n_classes)
    short = [(c, int(k)) for c, k in enumerate(counts) if k < n]
    if short:
        raise ValueError(
            f"n_per_class={n} exceeds the size of classes {short} (class, count); "
            f"the smallest class has {int(counts.min())} samples"
        )
    rng = numpy_rng(seed, stream)
    chosen = [
        rng.choice(np.flatnonzero(labels == c), size=n, replace=False) for c in range(n_classes)
    ]
    return torch.from_numpy(np.sort(np.concatenate(chosen)))


def balanced_subset(
    data: LabeledData | DataSplits,
    n_per_class: int,
    seed: int = 0,
    n_test_per_class: int | None = None,
) -> LabeledData | DataSplits:
    """``n_per_class`` samples of every class, drawn without replacement, original order kept.

    Paper 003 §4.1 (balanced subsets, e.g. MNIST at 5000 per class). Every one of the
    ``n_classes`` classes must have at least ``n_per_class`` samples.

    Args:
        data: one split, or a :class:`DataSplits` whose training split is subsampled to
            ``n_per_class`` and whose test split to ``n_test_per_class`` (kept whole if None).
        n_per_class: samples kept per class.
        seed: seeds the draw (the test split uses an independent stream).
        n_test_per_class: see ``data``.
    """
    n_per_class = check_int("n_per_class", n_per_class, minimum=1)
    seed = check_seed("seed", seed)
    if isinstance(data, LabeledData):
        index = _balanced_index(data.y, data.n_classes, n_per_class, seed, 0)
        note = f"balanced_subset(n_per_class={n_per_class}, seed={seed})"
        return LabeledData(
            data.x[index], data.y[index], data.n_classes, data.name, _note(data.meta, note)
        )
    if not isinstance(data, DataSplits):
        raise TypeError(f"data must be LabeledData or DataSplits, got {type(data).__name__}")
    train = balanced_subset(data.train, n_per_class, seed)
    test = data.test
    if test is not None and n_test_per_class is not None:
        n_test_per_class = check_int("n_test_per_class", n_test_per_class, minimum=1)
        index = _balanced_index(test.y, test.n_classes, n_test_per_class, seed, 1)
        note = f"balanced_subset(n_per_class={n_test_per_class}, seed={seed})"
        test = LabeledData(
            test.x[index], test.y[index], test.n_classes, test.name, _note(test.meta, note)
        )
    return DataSplits(train, test)


def _shuffled(y: torch.Tensor, fraction: float, rng: np.random.Generator) -> torch.Tensor:
    n = int(y.shape[0])
    m = round(fraction * n)
    chosen = rng.choice(n, size=m, replace=False)
    new = y.clone()
    new[torch.from_numpy(chosen)] = y[torch.from_numpy(chosen[rng.permutation(m)])]
    return new


def shuffle_labels(
    data: LabeledData | DataSplits,
    fraction: float = 1.0,
    seed: int = 0,
    which: str = "train",
) -> LabeledData | DataSplits:
    """Randomly permute the labels of a ``fraction`` of the samples (shuffled-label data).

    ``round(fraction * N)`` samples are chosen without replacement and their labels are
    permuted among themselves, so class counts (and balance) are preserved exactly; a chosen
    sample may keep its label by chance (about ``1/K`` of them for ``K`` balanced classes).
    Used by paper 002 §4 (shuffled labels, and as the start of P-separable relabelling).

    Args:
        data: one split, or a :class:`DataSplits`.
        fraction: fraction in ``[0, 1]`` of samples whose labels are shuffled.
        seed: seeds the choice and the permutation (the test split uses its own stream).
        which: for :class:`DataSplits`, ``"train"`` (test labels stay true) or ``"both"``.
    """
    fraction = check_float("fraction", fraction, minimum=0.0, maximum=1.0)
    seed = check_seed("seed", seed)
    note = f"shuffle_labels(fraction={fraction}, seed={seed})"
    if isinstance(data, LabeledData):
        return _with_y(data, _shuffled(data.y, fraction, numpy_rng(seed, 0)), note)
    if not isinstance(data, DataSplits):
        raise TypeError(f"data must be LabeledData or DataSplits, got {type(data).__name__}")
    check_choice("which", which, ("train", "both"))
    train = _with_y(data.train, _shuffled(data.train.y, fraction, numpy_rng(seed, 0)), note)
    test = data.test
    if test is not None and which == "both":
        test = _with_y(test, _shuffled(test.y, fraction, numpy_rng(seed, 1)), note)
    return DataSplits(train, test)
