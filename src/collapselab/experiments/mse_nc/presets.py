r"""The configurations of paper 003's experiments: typed presets, the protocol as data.

Two preset classes, one per experiment, each with the four tiers (``tiny``: the test
suite's seconds; ``quick``: minutes on 2 CPU cores; ``standard``: real images, about half
an hour on 2 cores; ``paper``: the paper's scale, for a GPU):

* :class:`CollapsePreset` (``mse-nc-collapse``): named **datasets**
  (:class:`~collapselab.data.DataSpec`\ s), named **nets** (:class:`Net`), the **arms**
  (:class:`Combination`: a dataset, a net and the learning-rate rule; each trains once per
  loss), the paper's optimiser (flat fields: ``epochs``, ``batch_size``, ``momentum``,
  ``weight_decay``, ``schedule``, ``milestones``, ``gamma``, ``drop_last``,
  ``mse_reduction``), the measurement (``measure_schedule``, ``measure_batch_size``,
  ``weighting``), DeepFool (:class:`Robustness`) and the learning-rate sweep
  (:class:`RateSweep`). :data:`COLLAPSE_PRESETS`.
* :class:`TheoryPreset` (``mse-nc-theory``): the renormalised simulator
  (:class:`SNRSimulation`) and the UFM descent (:class:`UFMDescent`).
  :data:`THEORY_PRESETS`.

The paper's protocol (note 003 §4):

* :data:`PAPER_TABLE`: the paper's networks per dataset (note 003 §4.2, final MSE depths).
* :data:`PAPER_N_PER_CLASS`: the balanced training subset sizes (note 003 §4.1; MNIST and
  SVHN recalled from PNAS, unverified).
* :func:`paper_lr_grid`: the 25 learning rates log-spaced in ``[1e-4, 0.25]``; grid points
  16 and 20 (from 0) are the notebook's tuned MNIST-ResNet18 rates 0.0184 (MSE) and 0.0679
  (CE) (note 003 §4.3).
* :data:`PAPER_TABLE1`: the paper's Table 1.

Quick preset (2 CPU cores, minutes): a balanced subset of Fashion-MNIST (130 training and 50
test images per class, padded to 32 x 32) with a BatchNorm MLP and a ResNet18 at 1/8 width,
and the generated MNIST-1D (balanced 250 / 80 per class) with a BatchNorm MLP; 300 epochs
(the ResNet 100) with the paper's optimiser, schedule, batch size and weight decay. Without
Fashion-MNIST's files it falls back to ``quick-bundled`` (:meth:`CollapsePreset.bundled`):
the same with scikit-learn's bundled digits (8x8, 130 training and 44 test images per class)
in place of Fashion-MNIST (the ResNet 150 epochs). There is no sweep (it would cost several
times the rest): every arm trains at one rate of the paper's grid, the same for MSE and CE,
chosen so that the network interpolates before the first rate drop and the terminal phase
starts at the initial rate: the largest rate, 0.25, for the MLPs; 0.0679 for the ResNet,
which at 0.25 interpolated only after the first drop (0.130 was not tried).

Standard preset (30 minutes measured on 2 quiet CPU cores with the arms side by side,
2026-11-27): the paper's VGG11 at a quarter of its width on a balanced 500-per-class subset
of Fashion-MNIST (300 test images per class), padded and standardised, MSE and CE at rate
0.0679 for 300 epochs (the rate drops after 100 and 200), so that both losses interpolate
before the first drop and the terminal phase is long enough for the collapse metrics to
fall. Fewer optimiser steps than the paper's (5000 instead of 60000 images per epoch) is
what the CPU budget allows. A BatchNorm MLP (width 512) was tried and left out: it
interpolated only after the first rate drop (MSE at epoch 193 of 300); a ResNet18 at 1/8
width costs more per image than this VGG and does not fit the budget beside it. The theory
experiment's ``standard`` is its ``paper`` preset.

Tiny preset (the test suite's, seconds): a well-separated Gaussian mixture (4 classes, 30
training and 10 test samples per class), two small BatchNorm MLPs, 12 epochs (the swept one
10, at grid points 22 and 24).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from collapselab.data import DataSpec
from collapselab.data.steps import Balance, Pad, StandardizeChannels
from collapselab.experiments.preset import Preset, PresetError, tiers
from collapselab.train.config import MSEReduction, ScheduleName

LOSSES = ("mse", "ce")
"""The losses an arm trains with: MSE on one-hot targets and cross-entropy."""

Loss = Literal["mse", "ce"]

# ----------------------------------------------------------------- the paper's protocol
PAPER_EPOCHS = 350
"""Training epochs of every paper-preset run (note 003 §4.3)."""

PAPER_TABLE: dict[str, dict[str, str]] = {
    "mnist": {"vgg": "vgg11", "resnet": "resnet18", "densenet": "densenet40"},
    "fashion_mnist": {"vgg": "vgg11", "resnet": "resnet18", "densenet": "densenet250"},
    "svhn": {"vgg": "vgg13", "resnet": "resnet34", "densenet": "densenet40"},
    "cifar10": {"vgg": "vgg11", "resnet": "resnet50", "densenet": "densenet100"},
    "stl10": {"vgg": "vgg11", "resnet": "resnet18", "densenet": "densenet201"},
}
"""Dataset -> {family: network} of paper 003's experiments (note 003 §4.2)."""

PAPER_N_PER_CLASS: dict[str, int] = {
    "mnist": 5000,
    "fashion_mnist": 6000,
    "svhn": 4600,
    "cifar10": 5000,
    "stl10": 500,
}
"""Balanced training examples per class (note 003 §4.1; MNIST and SVHN after PNAS,
recalled and unverified; the others are the full, already balanced training sets)."""

PAPER_PAD_TO: dict[str, int | None] = {
    "mnist": 32,
    "fashion_mnist": 32,
    "svhn": None,
    "cifar10": None,
    "stl10": None,
}
"""Zero-padding of the images (MNIST and FashionMNIST 28 -> 32, note 003 §4.1)."""

PAPER_TABLE1: dict[tuple[str, str], tuple[float, float]] = {
    ("mnist", "vgg"): (99.23, 99.59),
    ("mnist", "resnet"): (99.16, 99.70),
    ("mnist", "densenet"): (99.62, 99.70),
    ("fashion_mnist", "vgg"): (92.76, 92.95),
    ("fashion_mnist", "resnet"): (93.55, 93.76),
    ("fashion_mnist", "densenet"): (90.56, 92.95),
    ("svhn", "vgg"): (89.35, 93.91),
    ("svhn", "resnet"): (85.18, 92.65),
    ("svhn", "densenet"): (95.61, 95.23),
    ("cifar10", "vgg"): (83.13, 84.54),
    ("cifar10", "resnet"): (75.43, 76.39),
    ("cifar10", "densenet"): (91.77, 91.78),
    ("stl10", "vgg"): (60.43, 67.24),
    ("stl10", "resnet"): (59.35, 60.56),
    ("stl10", "densenet"): (58.74, 60.41),
}
"""The paper's Table 1 (note 003 §5.1): test accuracy (%) at the first zero-training-error
epoch and at the end of MSE training, by (dataset, network family)."""


def paper_lr_grid(low: float = 1e-4, high: float = 0.25, n: int = 25) -> list[float]:
    """``n`` learning rates log-spaced from ``low`` to ``high`` (``np.logspace``), as floats.

    The default is the paper's 25-point grid (note 003 §4.3): index 16 is 0.0184 and index
    20 is 0.0679, the notebook's tuned rates for MSE and CE on MNIST-ResNet18.
    """
    if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not (0 < low <= high) or not np.isfinite(high):
        raise ValueError(f"need 0 < low <= high < inf, got low={low!r}, high={high!r}")
    if n == 1:
        return [float(low)]
    return [float(v) for v in np.logspace(np.log10(low), np.log10(high), n)]


# ------------------------------------------------------------------ the preset classes
@dataclass(frozen=True, kw_only=True)
class Net(Preset):
    """A network of the model registry (:func:`~collapselab.models.build_model`): its
    ``name`` and keyword arguments; the input size and the class count come from the data."""

    name: str
    kwargs: Mapping[str, int | float | str | bool] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Combination(Preset):
    """A (dataset, network) combination, trained once per loss of the preset (its arms).

    Attributes:
        dataset, net: keys of the preset's ``datasets`` and ``nets``.
        lr: the learning rate of both losses, ``"sweep"`` (chosen by the preset's
            :class:`RateSweep`), or a rate (or ``"sweep"``) per loss (``{"mse": ..., "ce":
            ...}``).
        epochs: this combination's budget (``None``: the preset's ``epochs``).
        bundled_epochs: its budget on the bundled fallback data (``None``: ``epochs``;
            :meth:`CollapsePreset.bundled`).
    """

    dataset: str
    net: str
    lr: float | Literal["sweep"] | Mapping[str, float | Literal["sweep"]]
    epochs: int | None = None
    bundled_epochs: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        rules = self.lr.values() if isinstance(self.lr, Mapping) else [self.lr]
        for rule in rules:
            if rule != "sweep" and not (math.isfinite(rule) and rule > 0):
                raise PresetError(f"Combination.lr must be positive and finite, got {rule!r}")
        for name in ("epochs", "bundled_epochs"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise PresetError(f"Combination.{name} must be a positive int, got {value!r}")

    def rate(self, loss: str) -> float | None:
        """The learning rate of ``loss`` (``None``: chosen by the sweep)."""
        rule = self.lr
        if isinstance(rule, Mapping):
            if loss not in rule:
                raise PresetError(f"Combination.lr gives no rate for loss {loss!r}")
            rule = rule[loss]
        return None if rule == "sweep" else rule


@dataclass(frozen=True, kw_only=True)
class Robustness(Preset):
    """DeepFool robustness (:func:`~collapselab.probe.robustness.deepfool_robustness`) on a
    balanced test subset of ``n_test_per_class`` per class (``None``: the whole test split),
    measured ``when``: ``"tpt"`` (every measured epoch from the zero-error epoch on),
    ``"all"``, ``"ends"`` (the zero-error epoch and the last) or ``"never"``."""

    n_test_per_class: int | None = 100
    overshoot: float = 0.02
    max_iter: int = 50
    when: Literal["tpt", "all", "ends", "never"] = "tpt"


@dataclass(frozen=True, kw_only=True)
class RateSweep(Preset):
    """The learning-rate sweep (note 003 §4.3): ``n`` rates log-spaced in ``[low, high]``
    (:func:`paper_lr_grid`), the grid points ``indices`` of them (``None``: all), the one
    with the lowest final test error selected; ``require_zero_error`` (our addition)
    restricts the choice to rates whose network reaches zero training error
    (:func:`~collapselab.experiments.mse_nc.sweep.select_rate`)."""

    low: float = 1e-4
    high: float = 0.25
    n: int = 25
    indices: tuple[int, ...] | None = None
    select: Literal["final_test_error"] = "final_test_error"
    require_zero_error: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.indices is not None:
            bad = [i for i in self.indices if not 0 <= i < self.n]
            if bad or not self.indices:
                raise PresetError(
                    f"RateSweep.indices must be grid indices in [0, {self.n}), got "
                    f"{list(self.indices)}"
                )


@dataclass(frozen=True, kw_only=True)
class CollapsePreset(Preset):
    """The configuration of ``mse-nc-collapse`` (see the module docstring).

    Every arm trains with SGD (``momentum``, ``weight_decay`` on every parameter), batches
    of ``batch_size`` (incomplete last ones dropped with ``drop_last``), the ``schedule``
    (``"step"``: the rate times ``gamma`` after ``milestones``, ``None``: ``E // 3`` and
    ``2E // 3``), ``nn.MSELoss()`` with ``mse_reduction`` for MSE; it is measured on
    ``measure_schedule`` (``"log"``: the paper's log-spaced epochs scaled to the budget, or
    the epochs), in batches of ``measure_batch_size``, class statistics weighted by
    ``weighting``; ``torch_threads`` (``None``: torch's default) is the thread count of
    the run and of each arm trained side by side; ``batched``: the points of a learning-rate
    sweep train together as one batched model (float32: equal to one-by-one training up to
    rounding, docs/mse_nc.md; ``False``: one by one, the control).

    Raises:
        PresetError: an arm names a dataset or a net that is not defined, a swept arm
            without ``lr_sweep``, a rate missing for a loss, or ``losses`` empty or repeated.
    """

    datasets: Mapping[str, DataSpec]
    nets: Mapping[str, Net]
    arms: tuple[Combination, ...]
    losses: tuple[Loss, ...] = LOSSES
    epochs: int = PAPER_EPOCHS
    batch_size: int = 128
    momentum: float = 0.9
    weight_decay: float = 5e-4
    schedule: ScheduleName = "step"
    milestones: tuple[int, ...] | None = None
    gamma: float = 0.1
    drop_last: bool = True
    mse_reduction: MSEReduction = "mean"
    measure_schedule: Literal["log"] | tuple[int, ...] = "log"
    measure_batch_size: int = 256
    weighting: Literal["sample", "balanced", "auto"] = "sample"
    robustness: Robustness | None = Robustness()
    lr_sweep: RateSweep | None = None
    torch_threads: int | None = None
    batched: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.losses or len(set(self.losses)) != len(self.losses):
            raise PresetError(f"CollapsePreset.losses must be distinct, one or both of "
                              f"{LOSSES}, got {list(self.losses)}")  # fmt: skip
        for i, arm in enumerate(self.arms):
            where = f"CollapsePreset.arms[{i}]"
            if arm.dataset not in self.datasets:
                raise PresetError(f"{where}: unknown dataset {arm.dataset!r}; "
                                  f"defined: {list(self.datasets)}")  # fmt: skip
            if arm.net not in self.nets:
                raise PresetError(f"{where}: unknown net {arm.net!r}; defined: {list(self.nets)}")
            rates = [arm.rate(loss) for loss in self.losses]
            if None in rates and self.lr_sweep is None:
                raise PresetError(f"{where} asks for a sweep but lr_sweep is None")

    def bundled(self) -> CollapsePreset | None:
        """The preset on bundled or generated data (:meth:`Preset.bundled`), and more:
        a dataset key that names its file dataset is renamed after the fallback
        (``fashion_mnist`` becomes ``digits``: the arms and their rows are named after the
        data they train on), and an arm with ``bundled_epochs`` trains that many epochs
        (the quick ResNet-18 interpolates later on the 8 x 8 digits than on Fashion-MNIST:
        150 epochs there, 100 on Fashion-MNIST)."""
        bundled = super().bundled()
        if bundled is None:
            return None
        keys = {
            key: bundled.datasets[key].name if key == spec.name and spec.reads_files else key
            for key, spec in self.datasets.items()
        }
        if len(set(keys.values())) != len(keys):
            raise PresetError(f"the bundled datasets' names collide: {keys}")
        arms = tuple(
            arm.replace(
                dataset=keys[arm.dataset],
                epochs=arm.epochs if arm.bundled_epochs is None else arm.bundled_epochs,
                bundled_epochs=None,
            )
            for arm in bundled.arms
        )
        datasets = {keys[key]: spec for key, spec in bundled.datasets.items()}
        return bundled.replace(datasets=datasets, arms=arms)


@dataclass(frozen=True, kw_only=True)
class SNRSimulation(Preset):
    """App. D.1's renormalised gradient descent
    (:func:`~collapselab.theory.snr_dynamics.verify_snr_dynamics`) on an unconstrained-
    features instance of ``n_classes`` x ``n_per_class`` features of dimension ``dim`` with
    initial SNR singular values ``omega0`` (``None``: a random instance drawn from
    ``seed``), to flow time ``t_end`` in steps of ``lr``, ``n_records`` records."""

    n_classes: int
    n_per_class: int
    dim: int
    omega0: tuple[float, ...] | None
    t_end: float
    lr: float
    method: Literal["literal", "projected", "flow"] = "literal"
    n_records: int
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class UFMDescent(Preset):
    """Plain gradient descent on the MSE unconstrained-features model
    (:func:`~collapselab.theory.ufm_mse.ufm_mse_descent`): classifier decay ``lam``,
    feature decay ``lam_h``, ``n_steps`` steps of ``lr``, ``n_records`` log-spaced
    records, the start drawn from ``seed``."""

    n_classes: int
    n_per_class: int
    dim: int
    lam: float
    lam_h: float
    lr: float
    n_steps: int
    n_records: int
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class TheoryPreset(Preset):
    """The configuration of ``mse-nc-theory``: the two simulations, on ``torch_threads``."""

    snr: SNRSimulation
    ufm: UFMDescent
    torch_threads: int | None = 1


# ------------------------------------------------------------------------ the data
DIGITS = DataSpec("digits", {"n_per_class": 174, "test_fraction": 0.25, "flatten": False})
"""scikit-learn's bundled digits as 1 x 8 x 8 images, 174 per class split 3:1 (130 training,
44 test per class), standardised by the loader with the training statistics."""

FASHION_MNIST_QUICK = DataSpec(
    "fashion_mnist",
    {"n_train_per_class": 130, "n_test_per_class": 50},
    steps=(Pad(32), StandardizeChannels()),
    fallback=DIGITS,
)
"""A balanced 130 training and 50 test images per class of Fashion-MNIST, zero-padded to
32 x 32 (before standardising, so the border takes the background value), standardised per
channel with the training statistics; the digits without its files."""

FASHION_MNIST_STANDARD = DataSpec(
    "fashion_mnist",
    {"n_train_per_class": 500, "n_test_per_class": 300},
    steps=(Pad(32), StandardizeChannels()),
)
"""A balanced 500 training and 300 test images per class of Fashion-MNIST, padded to 32 x 32
and standardised per channel."""

MNIST1D = DataSpec("mnist1d", {"n_train": 4000, "n_test": 1000}, steps=(Balance(250, 80),))
"""The generated MNIST-1D (standardised by the generator), balanced to 250 training and 80
test samples per class."""

BLOBS = DataSpec(
    "gaussian_mixture",
    {"n_classes": 4, "dim": 16, "n_train_per_class": 30, "n_test_per_class": 10,
     "mean_scale": 10.0},
)  # fmt: skip
"""The tiny preset's data: a well-separated Gaussian mixture, 4 classes in 16 dimensions."""


def paper_data(dataset: str) -> DataSpec:
    """One dataset of the paper preset: its balanced training subset
    (:data:`PAPER_N_PER_CLASS`), the whole test split, zero-padded where
    :data:`PAPER_PAD_TO` says, standardised per channel (note 003 §4.1)."""
    pad = PAPER_PAD_TO[dataset]
    steps = (Pad(pad),) if pad is not None else ()
    return DataSpec(
        dataset,
        {"n_train_per_class": PAPER_N_PER_CLASS[dataset]},
        steps=(*steps, StandardizeChannels()),
    )


# ------------------------------------------------------------------ mse-nc-collapse
QUICK_LR = paper_lr_grid()[24]
"""The quick preset's rate for the MLPs: the largest of the paper's grid (0.25), both losses."""

QUICK_RESNET_LR = paper_lr_grid()[20]
"""The quick preset's rate for the ResNet: grid point 20 (0.0679), both losses. At 0.25 it
interpolated only after the first rate drop (epoch 41 of 120, 52 of 150, MSE)."""

STANDARD_LR = paper_lr_grid()[20]
"""The standard preset's rate: grid point 20 (0.0679, the notebook's tuned CE rate for
MNIST-ResNet18), for both losses."""

MLP = Net(name="mlp", kwargs={"width": 256, "depth": 4, "norm": "batchnorm", "bias": True})
"""The quick preset's MLP: four linear layers of width 256 with BatchNorm and biases."""

COLLAPSE_TINY = CollapsePreset(
    datasets={"blobs": BLOBS},
    nets={
        "mlp": MLP.replace(kwargs={**MLP.kwargs, "width": 32, "depth": 3}),
        "wide": MLP.replace(kwargs={**MLP.kwargs, "width": 64, "depth": 2}),
    },
    arms=(
        Combination(dataset="blobs", net="mlp", lr=0.25),
        Combination(dataset="blobs", net="wide", lr="sweep", epochs=10),
    ),
    epochs=12,
    batch_size=32,
    measure_batch_size=1024,
    robustness=Robustness(n_test_per_class=2),
    lr_sweep=RateSweep(indices=(22, 24)),
    torch_threads=1,
)
"""Seconds: two small MLPs on the Gaussian mixture, one at a fixed rate, one swept over two
grid points."""

COLLAPSE_QUICK = CollapsePreset(
    datasets={"fashion_mnist": FASHION_MNIST_QUICK, "mnist1d": MNIST1D},
    nets={"mlp": MLP, "resnet18": Net(name="resnet18", kwargs={"width_multiplier": 0.125})},
    arms=(
        Combination(dataset="fashion_mnist", net="mlp", lr=QUICK_LR),
        Combination(dataset="mnist1d", net="mlp", lr=QUICK_LR),
        Combination(
            dataset="fashion_mnist",
            net="resnet18",
            lr=QUICK_RESNET_LR,
            epochs=100,
            bundled_epochs=150,
        ),
    ),
    epochs=300,
    measure_batch_size=1024,
    robustness=Robustness(n_test_per_class=10),
    torch_threads=1,
)
"""Minutes on 2 CPU cores: the quick networks on a small balanced subset of Fashion-MNIST
and on MNIST-1D, the paper's optimiser; ``quick-bundled`` (derived) without Fashion-MNIST."""

COLLAPSE_STANDARD = CollapsePreset(
    datasets={"fashion_mnist": FASHION_MNIST_STANDARD},
    nets={"vgg11": Net(name="vgg11", kwargs={"width_multiplier": 0.25})},
    arms=(Combination(dataset="fashion_mnist", net="vgg11", lr=STANDARD_LR),),
    epochs=300,
    measure_batch_size=1024,
    robustness=Robustness(n_test_per_class=10),
    torch_threads=1,
)
"""Half an hour on 2 CPU cores: the paper's Fashion-MNIST network family (VGG11, at a
quarter of its width) on a balanced 500-per-class subset of Fashion-MNIST, with MSE and
with cross-entropy, the paper's optimiser over 300 epochs."""

COLLAPSE_PAPER = CollapsePreset(
    datasets={name: paper_data(name) for name in PAPER_TABLE},
    nets={name: Net(name=name)
          for name in sorted({net for row in PAPER_TABLE.values() for net in row.values()})},
    arms=tuple(Combination(dataset=dataset, net=net, lr="sweep")
               for dataset, row in PAPER_TABLE.items() for net in row.values()),
    lr_sweep=RateSweep(),
)  # fmt: skip
"""The paper's scale: 5 datasets x 3 networks x {MSE, CE}, 350 epochs, 25-point sweeps."""

COLLAPSE_PRESETS = tiers(
    tiny=COLLAPSE_TINY, quick=COLLAPSE_QUICK, standard=COLLAPSE_STANDARD, paper=COLLAPSE_PAPER
)
"""The tiers of ``mse-nc-collapse`` (``quick-bundled`` is derived when it is registered)."""

# -------------------------------------------------------------------- mse-nc-theory
THEORY_TINY = TheoryPreset(
    snr=SNRSimulation(n_classes=3, n_per_class=6, dim=3, omega0=(0.8, 0.3), t_end=200.0,
                      lr=0.25, n_records=9),
    ufm=UFMDescent(n_classes=3, n_per_class=6, dim=5, lam=5e-4, lam_h=1e-4, lr=1.0,
                   n_steps=3000, n_records=12),
)  # fmt: skip
"""Seconds: three classes, a few hundred steps of each simulation."""

THEORY_QUICK = TheoryPreset(
    snr=SNRSimulation(n_classes=4, n_per_class=10, dim=4, omega0=(1.026, 0.329, 0.162),
                      t_end=4000.0, lr=0.5, n_records=41),
    ufm=UFMDescent(n_classes=4, n_per_class=25, dim=16, lam=5e-4, lam_h=1e-5, lr=0.5,
                   n_steps=200000, n_records=40),
)  # fmt: skip
"""Note 003 §5.4 (b)-(d): the renormalised simulator and the UFM-MSE descent (seconds)."""

THEORY_PAPER = TheoryPreset(
    snr=THEORY_QUICK.snr.replace(n_classes=10, n_per_class=20, dim=10, omega0=None,
                                 t_end=2.0e4, n_records=61),
    ufm=THEORY_QUICK.ufm.replace(n_classes=10, n_per_class=50, dim=20, n_records=60),
)  # fmt: skip
"""Larger instances of the same simulations (still CPU minutes)."""

THEORY_PRESETS = tiers(
    tiny=THEORY_TINY, quick=THEORY_QUICK, standard=THEORY_PAPER, paper=THEORY_PAPER
)
"""``standard`` runs the paper preset's instances: about a minute on 2 CPU cores."""
