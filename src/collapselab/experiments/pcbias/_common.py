"""What paper 002's experiment modules share (private to the package): the data as the
networks see it, and the ensembles.

**Data.** Every dataset is a :class:`~collapselab.data.DataSpec` read by
:func:`~collapselab.data.load_data`. :func:`pcb_data` builds a preset's spec with the paper's
preprocessing (§4: images zero-padded, average-pooled, every channel standardised with the
training statistics, then flattened; one channel for grey images, one per feature for
vectors), :func:`data_variant` adds the manipulations an experiment trains on (shuffled
labels, amplified PCs, ZCA whitening, P-separable labels) at their places in the pipeline,
and :func:`read_inputs` reads a spec as float64 NumPy arrays, cached per process (the
members of an ensemble run in a few worker processes and all read the same data).

**Ensembles.** A network of an ensemble is a :class:`Member` (a picklable frozen dataclass:
its data, its seeds and what its kind of training needs); :func:`run_ensembles` runs several
ensembles as one sweep (:func:`~collapselab.experiments.sweeps.run_members`), each member
through :func:`train_member`.

**Batched ensembles** (``batched=True``): the members of a kind that defines
:meth:`Member.train_batch` and that differ only in their index (:meth:`Member.batch_key`)
train together, a chunk of them per sweep task (:func:`train_networks` through
:func:`~collapselab.experiments.sweeps.batched.run_batched_members`): one process, batched
products. Each member is still stored on its own, under its index and config hash, in the
sweep's store exactly as one-by-one training stores it, so a run resumes either way and the
experiment reads the same results. A member that fails inside a batch (divergence) is not
stored; the one-by-one sweep that follows loads every stored member and trains what is left
alone, so failures are reported and retried as before.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from collapselab.data import DataSpec, load_data
from collapselab.data.steps import (
    AmplifyPCs,
    Cast,
    Flatten,
    Pad,
    Pool,
    RelabelSeparable,
    ShuffleLabels,
    StandardizeChannels,
    Step,
    WhitenZCA,
)
from collapselab.experiments.registry import RunContext
from collapselab.experiments.sweeps import run_members
from collapselab.experiments.sweeps.batched import run_batched_members
from collapselab.store import Run

# ---------------------------------------------------------------------------------- data


def pcb_data(
    name: str,
    options: Mapping[str, Any] | None = None,
    *,
    pad: int | None = None,
    pool: int = 1,
    fallback: DataSpec | None = None,
) -> DataSpec:
    """The dataset ``name`` (its loader's ``options``) as paper 002's networks see it: images
    zero-padded to ``pad x pad`` (:class:`~collapselab.data.steps.Pad`), cast to float64,
    average-pooled by ``pool`` (:class:`~collapselab.data.steps.Pool`, only when ``pool >
    1``), every channel standardised with the training split's mean and standard deviation
    (:class:`~collapselab.data.steps.StandardizeChannels`), flattened to rows."""
    steps: list[Step] = [] if pad is None else [Pad(pad)]
    steps.append(Cast("float64"))
    if pool > 1:
        steps.append(Pool(pool))
    steps += [StandardizeChannels(), Flatten()]
    return DataSpec(name, dict(options or {}), tuple(steps), fallback)


def data_variant(
    spec: DataSpec,
    *,
    shuffle: float = 0.0,
    amplify: Mapping[str, Any] | None = None,
    whiten: float | None = None,
    separable: int | None = None,
) -> DataSpec:
    """``spec`` (one of :func:`pcb_data`) with the manipulations an experiment trains on,
    each at its place in the pipeline (its fallback likewise):

    * ``shuffle``: that fraction of the labels shuffled first
      (:class:`~collapselab.data.steps.ShuffleLabels`, before anything else);
    * ``amplify``: the arguments of :class:`~collapselab.data.pca.PCAmplification`, applied
      to the standardised inputs in their images' shape, so that its renormalisation is per
      channel as the paper's (002 App. D.1; per feature for vectors), before flattening;
    * ``whiten``: ZCA whitening with regulariser ``eps`` of the flat inputs;
    * ``separable``: ``P``, the labels of both splits replaced by those of a least-squares
      separator on the top ``P`` PCs (:class:`~collapselab.data.pca.SeparableRelabel`),
      last (after any shuffling).
    """
    steps = list(spec.steps)
    if Flatten() not in steps:
        raise ValueError(f"data_variant needs a spec with a Flatten step, got {spec.describe()}")
    flat = steps.index(Flatten())
    before = [AmplifyPCs(dict(amplify))] if amplify is not None else []
    after = [WhitenZCA(whiten)] if whiten is not None else []
    steps = steps[:flat] + before + [steps[flat]] + after + steps[flat + 1 :]
    if shuffle:
        steps.insert(0, ShuffleLabels(shuffle))
    if separable is not None:
        steps.append(RelabelSeparable(separable))
    fallback = (
        None
        if spec.fallback is None
        else data_variant(
            spec.fallback, shuffle=shuffle, amplify=amplify, whiten=whiten, separable=separable
        )
    )
    return dataclasses.replace(spec, steps=tuple(steps), fallback=fallback)


@dataclass(frozen=True)
class Inputs:
    """Flattened, standardised inputs in float64 (rows are examples) and integer labels."""

    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    name: str


@dataclass(frozen=True)
class _Request:
    """What :func:`read_inputs` caches on: the spec's recorded form, folder and seed (a
    :class:`DataSpec` holds mappings, so it is compared by its JSON text)."""

    key: str
    spec: DataSpec = dataclasses.field(compare=False)
    data_dir: str | None = dataclasses.field(compare=False)
    seed: int = dataclasses.field(compare=False)


def read_inputs(spec: DataSpec, data_dir: str | None, seed: int) -> Inputs:
    """The data of ``spec`` (:func:`~collapselab.data.load_data` with ``data_dir`` and
    ``seed``) as float64 NumPy arrays, cached per process. The dataset must have a test
    split."""
    key = json.dumps([spec.to_dict(), data_dir, seed], sort_keys=True)
    return _read_cached(_Request(key, spec, data_dir, seed))


@functools.lru_cache(maxsize=8)
def _read_cached(request: _Request) -> Inputs:
    splits = load_data(request.spec, request.data_dir, request.seed)
    if splits.test is None:
        raise ValueError(
            f"dataset {request.spec.name!r} must have a test split (give its test size)"
        )
    train, test = splits.train, splits.test
    return Inputs(train.x.numpy(), train.y.numpy(), test.x.numpy(), test.y.numpy(),
                  splits.n_classes, train.name)  # fmt: skip


def one_hot(y: np.ndarray, n_classes: int) -> np.ndarray:
    """``(n, K)`` one-hot float64 targets."""
    return np.eye(n_classes)[np.asarray(y, dtype=np.int64)]


def log_steps(steps: int, n: int) -> np.ndarray:
    """About ``n`` checkpoints ``0 <= s <= steps``, log-spaced after 0 (unique, sorted)."""
    marks = np.unique(np.geomspace(1, steps, n).round().astype(np.int64))
    return np.concatenate([[0], marks])


# ----------------------------------------------------------------------------- ensembles

M = TypeVar("M", bound="Member")


@dataclass(frozen=True, kw_only=True)
class Member:
    """One network of an ensemble, as the worker process that trains it receives it.

    Attributes:
        data: its dataset (read with ``data_dir`` and ``data_seed``, :meth:`inputs`).
        seed: the ensemble's seed; the network's initial weights are drawn after seeding
            torch with ``1000 seed + member``.
        member: its index in the ensemble.
        data_seed: the seed of the data (subsets, shuffled labels): the run's seed.
        data_dir: the folder of dataset files, as text (``None``: the usual places).

    Subclasses add what their kind of training needs and define :meth:`train`.
    """

    data: DataSpec
    seed: int = 0
    member: int = 0
    data_seed: int = 0
    data_dir: str | None = None

    def inputs(self) -> Inputs:
        """The member's data (:func:`read_inputs`)."""
        return read_inputs(self.data, self.data_dir, self.data_seed)

    def train(self) -> dict[str, Any]:
        """Train the network; its measurements (names to arrays and numbers)."""
        raise NotImplementedError

    @classmethod
    def train_batch(cls, members: Sequence[Member]) -> list[dict[str, Any] | None]:
        """Train ``members`` (one :meth:`batch_key`) as one batched model; each member's
        measurements as :meth:`train` gives them (to rounding, stated by the subclass), or
        ``None`` for a member that failed (it is trained again alone). Kinds without a
        batched trainer do not override it."""
        raise NotImplementedError

    def batch_key(self) -> Member | None:
        """What the members trained in one batch share: the member with index 0 (all other
        fields equal), or ``None`` when the kind has no batched trainer."""
        if type(self).train_batch.__func__ is Member.train_batch.__func__:  # type: ignore[attr-defined]
            return None
        return dataclasses.replace(self, member=0)

    def ensemble(self: M, n: int) -> list[M]:
        """``n`` members like this one, ``member`` ``0 .. n-1``."""
        return [dataclasses.replace(self, member=i) for i in range(n)]


def run_fields(context: RunContext) -> dict[str, Any]:
    """A run's fields of its members: the run's seed as ``seed`` and ``data_seed``, its data
    folder as text (members are hashed and pickled to worker processes)."""
    return {"seed": context.seed, "data_seed": context.seed, "data_dir": context.data_dir_text}


def train_member(config: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep task of every ensemble: train ``config["network"]``, a :class:`Member`
    (the sweep's contract is a function of a dict; the member store records and hashes the
    member's fields)."""
    return config["network"].train()


def train_networks(configs: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """The batched trainer of a chunk of members (configs ``{"network": member}`` of one
    :meth:`Member.batch_key`): their kind's :meth:`Member.train_batch`."""
    networks = [config["network"] for config in configs]
    return list(type(networks[0]).train_batch(networks))


def _network_key(config: Mapping[str, Any]) -> str | None:
    """The batch key of a member's config (:meth:`Member.batch_key`, as text), or ``None``
    for a kind without a batched trainer."""
    key = config["network"].batch_key()
    return None if key is None else repr(key)


def run_ensemble(
    members: Sequence[Member], run: Run, context: RunContext, label: str, *, batched: bool = False
) -> list[dict[str, Any]]:
    """One ensemble as a sweep stored under ``members/<label>``; the results in order.
    ``batched``: members that can be batched train as batched chunks first (module
    docstring); the one-by-one sweep then loads them and trains the rest alone (it runs
    only when a member is missing)."""
    configs = [{"network": member} for member in members]
    if batched:
        return run_batched_members(train_member, train_networks, configs, run, context,
                                   batch_key=_network_key, label=label)  # fmt: skip
    return run_members(train_member, configs, run, context, label=label)


def run_ensembles(
    ensembles: Mapping[str, Sequence[Member]],
    run: Run,
    context: RunContext,
    *,
    batched: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """Several ensembles (``label -> members``) as one sweep (one process pool for all,
    stored under ``members/ensembles``); the results by label. ``batched``: as in
    :func:`run_ensemble`."""
    owners = [label for label, batch in ensembles.items() for _ in batch]
    members = [member for batch in ensembles.values() for member in batch]
    results = run_ensemble(members, run, context, "ensembles", batched=batched)
    return {label: [r for r, o in zip(results, owners, strict=True) if o == label]
            for label in ensembles}  # fmt: skip


def stacked(results: Sequence[Mapping[str, Any]], key: str) -> np.ndarray | None:
    """The members' ``key`` stacked along a new first axis, or ``None`` when a member lacks
    it (a member stored by an earlier version, reloaded when a run resumes)."""
    if not results or any(key not in r for r in results):
        return None
    return np.stack([np.asarray(r[key]) for r in results])
