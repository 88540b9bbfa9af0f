"""Datasets by name: ``load_dataset("cifar10", data_dir=..., seed=0, classes=(3, 5))``."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collapselab.data.bundled import digits, mnist1d
from collapselab.data.dataset import DataSplits
from collapselab.data.frequency import frequency_dataset
from collapselab.data.readers import (
    read_cifar10,
    read_cifar100,
    read_fashion_mnist,
    read_mnist,
    read_stl10,
    read_svhn,
)
from collapselab.data.synthetic import gaussian_mixture, spectrum_gaussian


@dataclass(frozen=True)
class _Entry:
    loader: Callable[..., DataSplits]
    from_files: bool


_REGISTRY: dict[str, _Entry] = {
    "gaussian_mixture": _Entry(gaussian_mixture, False),
    "spectrum_gaussian": _Entry(spectrum_gaussian, False),
    "frequency": _Entry(frequency_dataset, False),
    "mnist1d": _Entry(mnist1d, False),
    "digits": _Entry(digits, False),
    "mnist": _Entry(read_mnist, True),
    "fashion_mnist": _Entry(read_fashion_mnist, True),
    "cifar10": _Entry(read_cifar10, True),
    "cifar100": _Entry(read_cifar100, True),
    "svhn": _Entry(read_svhn, True),
    "stl10": _Entry(read_stl10, True),
}

_ALIASES = {
    "fashionmnist": "fashion_mnist",
    "cifar_10": "cifar10",
    "cifar_100": "cifar100",
    "stl_10": "stl10",
    "mnist_1d": "mnist1d",
}


def available_datasets() -> list[str]:
    """Names accepted by :func:`load_dataset`: generated and bundled first, then file-based."""
    return list(_REGISTRY)


def _canonical(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(_REGISTRY)}")
    return key


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    seed: int = 0,
    **options: Any,
) -> DataSplits:
    """Load a dataset by name; ``options`` are the keyword arguments of its function.

    ============================  ===============================================
    name                          function
    ============================  ===============================================
    ``gaussian_mixture``          :func:`~collapselab.data.gaussian_mixture`
    ``spectrum_gaussian``         :func:`~collapselab.data.spectrum_gaussian`
    ``frequency``                 :func:`~collapselab.data.frequency_dataset`
    ``mnist1d``                   :func:`~collapselab.data.mnist1d`
    ``digits``                    :func:`~collapselab.data.digits`
    ``mnist``, ``fashion_mnist``  :func:`~collapselab.data.read_mnist`, ...
    ``cifar10``, ``cifar100``     :func:`~collapselab.data.read_cifar10`, ...
    ``svhn``, ``stl10``           :func:`~collapselab.data.read_svhn`, ...
    ============================  ===============================================

    Names are case-insensitive and ``-`` may replace ``_``. ``seed`` seeds generation or,
    for file-based datasets, their subsampling. ``data_dir`` is required by the file-based
    datasets (the CLI's ``--data-dir``) and ignored by the others.
    """
    key = _canonical(name)
    entry = _REGISTRY[key]
    signature = inspect.signature(entry.loader)
    params = signature.parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    reserved = {"seed", "data_dir"}
    unknown = sorted(k for k in options if k in reserved or (k not in params and not accepts_any))
    if unknown:
        valid = [
            p
            for p in params
            if p not in reserved and params[p].kind is not inspect.Parameter.VAR_KEYWORD
        ]
        raise TypeError(f"unknown option(s) {unknown} for dataset {key!r}; valid options: {valid}")
    if entry.from_files:
        if data_dir is None:
            return entry.loader(None, seed=seed, **options)  # raises the "pass --data-dir" error
        args: tuple = (data_dir,)
    else:
        args = ()
    try:
        signature.bind(*args, seed=seed, **options)
    except TypeError as err:
        required = [
            p.name
            for p in params.values()
            if p.default is inspect.Parameter.empty
            and p.kind is not inspect.Parameter.VAR_KEYWORD
            and p.name != "data_dir"
        ]
        raise TypeError(f"dataset {key!r} requires the options {required}: {err}") from None
    return entry.loader(*args, seed=seed, **options)
