"""Helpers shared by paper 002's experiment modules (private to the package): the data of a
configuration, the ensembles, the claims' verdicts."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from collapselab.data import DataSplits, LabeledData, load_dataset
from collapselab.data.pca import PCAmplification, SeparableRelabel, ZCAWhitening
from collapselab.data.transforms import Standardize, pad_to_size, shuffle_labels
from collapselab.experiments.claims import ClaimResult
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.store import Run

PAPER = "002"

Task = Callable[[dict[str, Any]], dict[str, Any]]
"""A module-level function of one member's configuration returning its result dict."""


def run_ensembles(
    task: Task, ensembles: Mapping[str, dict[str, Any]], run: Run, context: RunContext
) -> dict[str, list[dict[str, Any]]]:
    """Several ensembles (``label -> config`` with ``members`` members each) as one sweep (one
    process pool for all, stored under ``members/ensembles``); the results by label."""
    configs, owners = [], []
    for label, config in ensembles.items():
        batch = members(config, int(config["members"]))
        configs += batch
        owners += [label] * len(batch)
    results = run_members(task, configs, run, context, label="ensembles")
    return {label: [r for r, o in zip(results, owners, strict=True) if o == label]
            for label in ensembles}  # fmt: skip


def stacked(results: Sequence[Mapping[str, Any]], key: str) -> np.ndarray | None:
    """The members' ``key`` stacked along a new first axis, or ``None`` when a member lacks
    it (a member stored by an earlier version, reloaded when a run resumes)."""
    if not results or any(key not in r for r in results):
        return None
    return np.stack([np.asarray(r[key]) for r in results])


def member_base(context: RunContext, **extra: Any) -> dict[str, Any]:
    """A run's configuration as its members see it: the preset's config, the run's seed as
    the members' ``seed`` and ``data_seed``, the data directory as text (members are
    pickled to worker processes), and ``extra``."""
    return {**context.config, "seed": context.seed, "data_seed": context.seed,
            "data_dir": context.data_dir_text, **extra}  # fmt: skip


def members(config: Mapping[str, Any], n: int, **fields: Any) -> list[dict[str, Any]]:
    """``n`` member configurations: ``config`` with ``fields`` and ``member`` 0..n-1 (each
    member's initialisation seed is derived from it)."""
    return [{**config, **fields, "member": i} for i in range(n)]


# ---------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Inputs:
    """Flattened, standardised inputs in float64 (rows are examples) and integer labels."""

    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    name: str


def _flat(split: LabeledData) -> torch.Tensor:
    return split.x.reshape(split.x.shape[0], -1).double()


def _pool(x: torch.Tensor, factor: int) -> torch.Tensor:
    """Average-pool square single-channel images (flattened or not) by ``factor``."""
    if factor == 1:
        return x
    if x[0].numel() != x[0].shape[-1] ** 2 and x[0].shape[0] != 1:
        raise ValueError(f"pool needs single-channel square images, got {tuple(x.shape[1:])}")
    side = round(x[0].numel() ** 0.5)
    images = x.reshape(x.shape[0], 1, side, side)
    return torch.nn.functional.avg_pool2d(images, factor)


def read_dataset(spec: Mapping[str, Any], data_dir: str | None, seed: int) -> Inputs:
    """The dataset of ``spec`` (``name`` and its loader's options; ``pool``: average-pooling
    factor for images; ``pad``: images zero-padded to this size first; ``shuffle``: the
    fraction of training labels shuffled; ``whiten``: ZCA-whiten with training statistics,
    ``eps``; ``amplify``: the arguments of :class:`~collapselab.data.pca.PCAmplification`,
    fitted on the training inputs and applied to both splits, on the images' shape so that
    its renormalisation is per channel as the paper's (002 App. D.1, §4; per feature for
    generated vectors); ``separable``: ``P``, the labels of both splits replaced by a
    least-squares separator's on the top ``P`` PCs, :class:`~collapselab.data.pca.
    SeparableRelabel`, after any shuffling), inputs standardised per channel with training
    statistics (paper 002 §4: one channel for grey images, one per feature for generated
    vectors), cached per process."""
    key = json.dumps({"spec": dict(spec), "data_dir": data_dir, "seed": seed}, sort_keys=True)
    return _read_cached(key)


@functools.lru_cache(maxsize=8)
def _read_cached(key: str) -> Inputs:
    request = json.loads(key)
    spec = dict(request["spec"])
    name = spec.pop("name")
    pool = int(spec.pop("pool", 1))
    pad = spec.pop("pad", None)
    whiten = spec.pop("whiten", None)
    shuffle = float(spec.pop("shuffle", 0.0))
    amplify = spec.pop("amplify", None)
    separable = spec.pop("separable", None)
    splits: DataSplits = load_dataset(
        name, data_dir=request["data_dir"], seed=request["seed"], **spec
    )
    if splits.test is None:
        raise ValueError(f"dataset {name!r} must have a test split (give its test size)")
    if shuffle:
        splits = shuffle_labels(splits, shuffle, seed=request["seed"])
    if pad is not None:
        splits = pad_to_size(splits, int(pad))
    train_x, test_x = _pool(splits.train.x.double(), pool), _pool(splits.test.x.double(), pool)
    standard = Standardize().fit(train_x)
    train_x, test_x = standard.apply(train_x), standard.apply(test_x)
    if amplify is not None:  # on the images' shape: renormalised per channel, not per pixel
        gain = PCAmplification(**amplify).fit(train_x)
        train_x, test_x = gain.apply(train_x), gain.apply(test_x)
    train_x, test_x = train_x.reshape(len(train_x), -1), test_x.reshape(len(test_x), -1)
    if whiten is not None:
        zca = ZCAWhitening(eps=float(whiten)).fit(train_x)
        train_x, test_x = zca.apply(train_x), zca.apply(test_x)
    train_y, test_y = splits.train.y, splits.test.y
    if separable is not None:
        relabel = SeparableRelabel(int(separable)).fit(train_x, train_y, splits.n_classes)
        train_y, test_y = relabel.train_labels, relabel.predict(test_x)
    return Inputs(train_x.numpy(), train_y.numpy(), test_x.numpy(), test_y.numpy(),
                  splits.n_classes, splits.train.name)  # fmt: skip


def one_hot(y: np.ndarray, n_classes: int) -> np.ndarray:
    """``(n, K)`` one-hot float64 targets."""
    return np.eye(n_classes)[np.asarray(y, dtype=np.int64)]


def whitened(spec: Mapping[str, Any], eps: float) -> dict[str, Any]:
    """``spec`` with ZCA whitening (regulariser ``eps``) after the standardisation."""
    return {**spec, "whiten": float(eps)}


# --------------------------------------------------------------------------------- claims


def verdict(
    ok: bool, values: Mapping[str, float], threshold: float | None, detail: str
) -> ClaimResult:
    """A claim's result from its decision, the numbers, the numeric threshold, a sentence."""
    return ClaimResult("holds" if ok else "does not hold", dict(values), threshold, detail)


def log_steps(steps: int, n: int) -> np.ndarray:
    """About ``n`` checkpoints ``0 <= s <= steps``, log-spaced after 0 (unique, sorted)."""
    marks = np.unique(np.geomspace(1, steps, n).round().astype(np.int64))
    return np.concatenate([[0], marks])
