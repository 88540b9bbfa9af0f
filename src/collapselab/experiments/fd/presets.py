r"""Typed presets of paper 000's experiments (note 000 §5, §6 "CPU feasibility").

One measured training run (a sweep **member**, :class:`Member`) is its data (a
:class:`~collapselab.data.DataSpec`), its :class:`Model`, its :class:`Training` and its
:class:`Measurement`. An experiment's preset is a **base** member plus what the experiment
varies: named **arms** (changes to the base: ``{"momentum": 0.9, "lr": 0.01}``, checked
against the member's fields when the preset is made), the **groups** of a sweep (which arm
each swept value ran as) and its **repeat** (arms trained with further seeds), or the
settings of the common-direction analysis:

==================  =================  ====================================================
experiment          preset class       fields
==================  =================  ====================================================
``fd-two-phase``    :class:`TwoPhase`  ``base``, ``arms`` (one per dataset)
``fd-operations``   :class:`Sweep`     ``base``, ``arms``, ``groups``, ``repeat``
``fd-robustness``   :class:`Sweep`     ``base``, ``arms``, ``groups``, ``repeat``
``fd-directions``   :class:`Directions`  ``base``, ``analysis_layer``, ``table_layers``,
                                       ``captures``, ``top_k``, ``n_noise``
==================  =================  ====================================================

``preset.replace(lr=0.05)`` (and ``collapselab sweep ... --set lr=0.05``) changes a field
of the base member where the preset has no field of that name; an arm that sets the same
field keeps its own value.

The paper trains 9-layer, 512-wide bias-free ReLU MLPs with SGD (η = 0.1, batch 100) on
CIFAR-10 (MNIST at η = 0.01, Tiny-ImageNet), for thousands of iterations. On a 2-core CPU the
``quick`` preset keeps the depth (9 linear layers) and the optimiser and scales the rest:

* width 128 instead of 512, 5000 training samples, a few hundred iterations;
* generated clustered data (10 classes of 4 Gaussian clusters in 64 dimensions, means on a
  sphere of radius 3; the note's pilot used the same kind of data) for the baseline's second
  dataset and for every sweep;
* Fashion-MNIST (local files; ``quick-bundled`` falls back to scikit-learn's digits, see
  :meth:`TwoPhase.bundled`) for the baseline's image dataset, with the init's variance
  scaled by γ = 0.3: at width 128 and γ = 1 a 9-layer MLP on Fashion-MNIST has no
  measurable plateau (measured: the loss on 1000 training samples is 1.5 after 40 steps), at
  γ = 0.3 it has one of about 600 steps; on digits (1700 images) γ = 0.5 gives a plateau of
  about 280 steps (γ = 1: 20 steps, γ = 0.3: no drop in 900).

Every dataset is read the same way (:data:`PREPROCESSING`): the training split alone,
flattened, standardised with one scalar mean and standard deviation of its entries.

Measurement (every preset): every 10 iterations, densely (every 2) in a window of ±20
iterations around the detected M2 peak (replayed, :mod:`.measurement`), on a probe set of 20
samples per class; loss and accuracy on that probe set, from the Monitor's own forward pass
(``loss_per_class: 0``; a separate subset of 100 per class costs one more forward pass of
1,000 samples per measurement, 29% of the ten training steps between two measurements at
width 512, benchmarks/README.md; the ``tiny`` preset keeps one so that path stays tested);
the boundary read on the third linear layer's output (the paper's "third linear layer",
A.1); the plateau ends when the loss is 5% below its initial value.

``standard`` (measured: 17.7 min on 2 quiet cores, load 1.2 to 2.1; 1 h 30 min at load
4.6 to 8.4; docs/diversity.md) moves toward the paper's regime on Fashion-MNIST:
the paper's 9-layer, 512-wide MLPs (§3, App. A.1, A.11-A.13, Fig. 4, Table 1) trained on the
whole training set (60 000 images; the paper trained on whole datasets) with the paper's
optimiser (SGD η = 0.1, batch 100, no momentum, no L2), every sweep on it; the batch-size and
learning-rate sweeps on the 7-layer, 256-wide MLPs the paper used for them (A.9, A.10); the
two comparisons whose differences were small at the earlier standard scale (the momentum
control at an equal effective step, note A19, and the L2 sweep) with three seeds, compared
as medians. It keeps the quick preset's γ = 0.3 (at γ = 1 Fashion-MNIST has no plateau to
measure) and its iteration budgets (the paper states none, note A18: 2,000 for the sweeps,
3,000 for the baseline, 6,000 at η = 0.01; the plateau of the 9 × 512 baseline ends near
step 450). ``paper`` is the paper's scale (9×512 MLPs on CIFAR-10, MNIST and, for the
two-phase baseline, the paper's 50-class Tiny-ImageNet subset, from local files; thousands
of iterations: a GPU job); ``tiny`` is the test suite's (seconds).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from collapselab.data import DataSpec, steps
from collapselab.experiments.preset import Preset, PresetError, tiers

__all__ = [
    "DIRECTIONS",
    "OPERATIONS",
    "PREPROCESSING",
    "ROBUSTNESS",
    "TINY_IMAGENET_CLASSES",
    "TWO_PHASE",
    "Arms",
    "Directions",
    "Measurement",
    "Member",
    "Model",
    "Repeat",
    "Sweep",
    "Training",
    "TwoPhase",
]

M = TypeVar("M", bound="Member")
B = TypeVar("B", bound="OnBase")


# ---------------------------------------------------------------------- one member
@dataclass(frozen=True, kw_only=True)
class Model(Preset):
    """The MLP (R1): ``depth`` linear layers of ``width``, no bias (Eq. 1), ``activation``
    (LeakyReLU with ``negative_slope``), an optional normalisation after every hidden linear
    layer (``batchnorm``, or the affine-free ``norm1``), and the Xavier-normal init with
    its variance multiplied by ``gamma``."""

    depth: int = 9
    width: int = 128
    activation: Literal["relu", "leaky_relu"] = "relu"
    negative_slope: float = 0.01
    norm: Literal["none", "batchnorm", "norm1"] = "none"
    gamma: float = 1.0


@dataclass(frozen=True, kw_only=True)
class Training(Preset):
    """Plain SGD (R2) for ``iterations`` steps of ``batch_size``: learning rate ``lr``,
    ``momentum`` (PyTorch's heavy ball) and ``l2``, the paper's λ of ``L + λ‖W‖²``
    (PyTorch's weight decay ``2λ``, note A20)."""

    lr: float = 0.1
    momentum: float = 0.0
    l2: float = 0.0
    batch_size: int = 100
    iterations: int = 600


@dataclass(frozen=True, kw_only=True)
class Measurement(Preset):
    """When and on what a run is measured (:mod:`.measurement`), and how its phases are
    detected (:func:`~.training.detect`).

    Attributes:
        every: iterations between two measurements.
        dense_every: iterations between two measurements inside the replayed window.
        half_window: half-width of that window around the detected M2 peak.
        probe_per_class: samples per class of the fixed probe set.
        loss_per_class: samples per class of a separate loss subset; 0: the loss and
            accuracy of the probe set, from the Monitor's forward pass.
        phase_layer: the linear layer ``l`` whose output ``F^(l)`` decides the boundary
            (the paper's "third linear layer").
        smooth: odd moving-average window of M2, in points.
        loss_drop: δ as a fraction of the initial loss: the plateau ends at the first step
            with the loss below ``(1 - δ)`` times its initial value.
    """

    every: int = 10
    dense_every: int = 2
    half_window: int = 20
    probe_per_class: int = 20
    loss_per_class: int = 0
    phase_layer: int = 3
    smooth: int = 3
    loss_drop: float = 0.05


_PARTS = {"model": Model, "training": Training, "measurement": Measurement}
"""The parts of a :class:`Member`, by field name."""


@dataclass(frozen=True, kw_only=True)
class Member(Preset):
    """One measured training run (a sweep member): ``data``, ``model``, ``training`` and
    ``measurement``.

    :meth:`replace` takes the fields of its parts too: ``member.replace(lr=0.01,
    depth=7)`` changes ``training.lr`` and ``model.depth``.

    Raises:
        ValueError: ``measurement.phase_layer`` is not a hidden linear layer of the model.
    """

    data: DataSpec
    model: Model = field(default_factory=Model)
    training: Training = field(default_factory=Training)
    measurement: Measurement = field(default_factory=Measurement)

    def __post_init__(self) -> None:
        super().__post_init__()
        depth, layer = self.model.depth, self.measurement.phase_layer
        if not 1 <= layer <= depth - 1:
            raise ValueError(
                f"phase_layer must be a hidden linear layer in [1, {depth - 1}] (depth "
                f"{depth}), got {layer}"
            )

    @property
    def phase_layer_name(self) -> str:
        """The module whose output decides the phase boundary (``layers.{l-1}.act``)."""
        return f"layers.{self.measurement.phase_layer - 1}.act"

    @classmethod
    def field_names(cls) -> list[str]:
        """Every name :meth:`replace` takes: its own fields and those of its parts."""
        return [f.name for c in (cls, *_PARTS.values()) for f in dataclasses.fields(c)]

    def replace(self: M, **changes: Any) -> M:
        """A copy with ``changes``: fields of the member or of its parts, by name.

        Raises:
            KeyError: a name that is neither (the message lists them all).
            PresetError: a value of the wrong kind.
        """
        own = {f.name for f in dataclasses.fields(self)}
        mine = {k: v for k, v in changes.items() if k in own}
        for key, value in changes.items():
            if key in own:
                continue
            part = next((p for p, kind in _PARTS.items() if key in _names(kind)), None)
            if part is None:
                raise KeyError(
                    f"{type(self).__name__} has no config key {key!r}; its keys: "
                    f"{', '.join(sorted(self.field_names()))}"
                )
            mine[part] = mine.get(part, getattr(self, part)).replace(**{key: value})
        return super().replace(**mine)


def _names(kind: type[Preset]) -> set[str]:
    return {f.name for f in dataclasses.fields(kind)}


# ---------------------------------------------------------------------- experiments
ArmChanges = Mapping[str, int | float | str | DataSpec]
"""An arm: field of :class:`Member` (or of its parts) -> the value it runs with."""


@dataclass(frozen=True, kw_only=True)
class OnBase(Preset):
    """A preset built on a ``base`` :class:`Member`: :meth:`replace` with a name the preset
    does not have changes the base (``replace(lr=0.05)``: ``base.training.lr``)."""

    base: Member

    def replace(self: B, **changes: Any) -> B:
        """A copy with ``changes``: the preset's own fields, and the base member's fields
        (and its parts') by name (:meth:`Member.replace`).

        Raises:
            KeyError: a name that is neither (the message lists both).
            PresetError: a value of the wrong kind.
        """
        own = {f.name for f in dataclasses.fields(self)}
        mine = {k: v for k, v in changes.items() if k in own}
        rest = {k: v for k, v in changes.items() if k not in own}
        if rest:
            try:
                mine["base"] = mine.get("base", self.base).replace(**rest)
            except KeyError:
                raise KeyError(
                    f"{type(self).__name__} has no config key "
                    f"{', '.join(map(repr, sorted(set(rest) - set(Member.field_names()))))}; "
                    f"its keys: {', '.join(sorted(own))}, and its base member's: "
                    f"{', '.join(sorted(Member.field_names()))}"
                ) from None
        return super().replace(**mine)


@dataclass(frozen=True, kw_only=True)
class Arms(OnBase):
    """A ``base`` member and named ``arms``, each a set of changes to the base (checked
    when the preset is made: every field known, every value of its kind)."""

    arms: Mapping[str, ArmChanges]

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in self.arms:
            try:
                self.member(name)
            except (KeyError, ValueError) as error:
                message = error.args[0] if error.args else error
                raise PresetError(f"{type(self).__name__}.arms[{name!r}]: {message}") from None

    def member(self, arm: str) -> Member:
        """The member that ``arm`` runs: the base with the arm's changes."""
        return self.base.replace(**self.arms[arm])


@dataclass(frozen=True, kw_only=True)
class TwoPhase(Arms):
    """``fd-two-phase``: the baseline on each dataset, an arm per dataset named after it."""

    def bundled(self) -> TwoPhase | None:
        """The same preset on bundled or generated data: every file dataset replaced by its
        fallback (:meth:`Preset.bundled`), and every arm that names a file dataset replaced
        by :data:`DIGITS_ARM`, named ``"digits"``.

        Other data alone does not do: the plateau's length depends on the dataset and on
        the init's variance (module docstring). On digits (1,700 images) Fashion-MNIST's
        γ = 0.3 gives no loss drop in 900 iterations, γ = 0.5 a plateau of about 280 steps,
        which 600 iterations cover; and an arm is named after its data.
        """
        plain = super().bundled()
        if plain is None:
            return None
        arms = dict(
            ("digits", DIGITS_ARM) if _names_files(changes) else (name, changes)
            for name, changes in self.arms.items()
        )
        return plain.replace(arms=arms)


def _names_files(changes: ArmChanges) -> bool:
    """Whether an arm's changes name a dataset read from files."""
    data = changes.get("data")
    return isinstance(data, DataSpec) and data.reads_files


@dataclass(frozen=True, kw_only=True)
class Repeat(Preset):
    """The arms of ``groups`` trained with ``seeds`` seeds in all (the run's seed and the
    next ``seeds - 1``), their phase-1 lengths compared as medians."""

    groups: tuple[str, ...]
    seeds: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seeds < 1:
            raise ValueError(f"repeat.seeds must be >= 1, got {self.seeds}")


GroupPoints = tuple[tuple[int | float | str, str], ...]
"""A sweep group: ``((value, arm), ...)``: the arm each swept value ran as."""


@dataclass(frozen=True, kw_only=True)
class Sweep(Arms):
    """``fd-operations`` and ``fd-robustness``: arms and the ``groups`` they serve (an arm
    may serve several groups, the baseline typically), some groups maybe ``repeat``-ed.

    Raises:
        ValueError: a group names an arm the preset does not have, or ``repeat`` names a
            group it does not have.
    """

    groups: Mapping[str, GroupPoints]
    repeat: Repeat | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, points in self.groups.items():
            missing = sorted({arm for _, arm in points} - set(self.arms))
            if missing:
                raise ValueError(f"group {name!r} names arms the preset does not have: {missing}")
        if self.repeat is not None:
            unknown = sorted(set(self.repeat.groups) - set(self.groups))
            if unknown:
                raise ValueError(f"repeat.groups names groups the config does not have: {unknown}")


@dataclass(frozen=True, kw_only=True)
class Directions(OnBase):
    """``fd-directions``: the common-direction analysis of the base's phase 1.

    Attributes:
        analysis_layer: the linear layer of Fig. 4-6 and of the ε spectra.
        table_layers: the layers of Table 1 (Theorem 1 through the next layer's direction).
        captures: probe states captured over the window (and one step after each).
        top_k: common directions by deflation (Fig. 4).
        n_noise: Theorem 1's noise terms S_1 .. S_k reported (Table 1).

    Raises:
        ValueError: an analysed layer that is not a hidden linear layer of the base model.
    """

    analysis_layer: int = 3
    table_layers: tuple[int, ...] = (2, 3, 4, 5, 6)
    captures: int = 20
    top_k: int = 5
    n_noise: int = 3

    def __post_init__(self) -> None:
        super().__post_init__()
        depth = self.base.model.depth
        for ell in (*self.table_layers, self.analysis_layer):
            if not 1 <= ell < depth:
                raise ValueError(f"analysed layers must be in [1, {depth - 1}], got {ell}")


# ---------------------------------------------------------------------- data
PREPROCESSING = (
    steps.DropTest(),
    steps.Flatten(),
    steps.StandardizeScalar(),
    steps.Cast("float32"),
)
"""Every dataset's steps: the training split alone (fd measures on training data only),
flattened, standardised with one scalar mean and standard deviation of every entry (ddof 1,
in float64), in float32."""


def _files(n_per_class: int | None, **options: Any) -> dict[str, Any]:
    """The loader options of a file dataset: ``n_per_class`` training images per class
    (``None``: all), one test image per class (dropped by :data:`PREPROCESSING`)."""
    return {"n_train_per_class": n_per_class, "n_test_per_class": 1, **options}


DIGITS = DataSpec(
    "digits", {"n_per_class": 170, "test_fraction": 0.0, "standardize": False}, PREPROCESSING
)
"""scikit-learn's digits, 170 per class, the fallback of Fashion-MNIST."""

FASHION_MNIST = DataSpec("fashion_mnist", _files(500), PREPROCESSING, DIGITS)
"""Fashion-MNIST, 500 training images per class (``quick``)."""

FASHION_MNIST_WHOLE = DataSpec("fashion_mnist", _files(None), PREPROCESSING)
"""The whole Fashion-MNIST training set, 60,000 images (``standard``)."""

CIFAR10 = DataSpec("cifar10", _files(None), PREPROCESSING)
MNIST = DataSpec("mnist", _files(None), PREPROCESSING)

CLUSTERED = DataSpec(
    "gaussian_mixture",
    {
        "n_classes": 10,
        "dim": 64,
        "n_train_per_class": 500,
        "clusters_per_class": 4,
        "mean_scale": 3.0,
    },
    PREPROCESSING,
)
"""Generated clustered data: 10 classes of 4 Gaussian clusters (unit noise) in 64
dimensions, cluster means on the sphere of radius 3, 500 samples per class."""

CLUSTERED_1000 = dataclasses.replace(
    CLUSTERED, options={**CLUSTERED.options, "n_train_per_class": 1000}
)
CLUSTERED_TINY = dataclasses.replace(
    CLUSTERED, options={**CLUSTERED.options, "dim": 32, "n_train_per_class": 60}
)

TINY_IMAGENET_CLASSES = (
    "orangutan",
    "parking meter",
    "snorkel",
    "American alligator",
    "oboe",
    "basketball",
    "rocking chair",
    "hopper",
    "neck brace",
    "candy store",
    "broom",
    "seashore",
    "sewing machine",
    "sunglasses",
    "panda",
    "pretzel",
    "pig",
    "volleyball",
    "puma",
    "alp",
    "barbershop",
    "ox",
    "flagpole",
    "lifeboat",
    "teapot",
    "walking stick",
    "brain coral",
    "slug",
    "abacus",
    "comic book",
    "CD player",
    "school bus",
    "banister",
    "bathtub",
    "German shepherd",
    "black stork",
    "computer keyboard",
    "tarantula",
    "sock",
    "Arabian camel",
    "bee",
    "cockroach",
    "cannon",
    "tractor",
    "cardigan",
    "suspension bridge",
    "beer bottle",
    "viaduct",
    "guacamole",
    "iPod",
)
"""The paper's 50 Tiny-ImageNet classes (Appendix A.3, in its order), resolved against the
local ``words.txt`` (:func:`~collapselab.data.read_tiny_imagenet`)."""

TINY_IMAGENET = DataSpec(
    "tiny_imagenet",
    _files(None, class_names=list(TINY_IMAGENET_CLASSES)),
    (PREPROCESSING[0], steps.CenterCrop(32), *PREPROCESSING[1:]),
)
"""The paper's Tiny-ImageNet (A.3: its 50 classes, 32 x 32 crops; the paper crops at
random for training, this is the central crop: fd trains without augmentation)."""


# ---------------------------------------------------------------------- bases
QUICK = Member(data=CLUSTERED)
"""``quick``'s base: the 9-layer, 128-wide MLP on clustered data, 600 iterations."""

TINY = Member(
    data=CLUSTERED_TINY,
    model=Model(depth=8, width=48),
    training=Training(batch_size=50, iterations=300),
    measurement=Measurement(probe_per_class=6, loss_per_class=30, half_window=10),
)
"""``tiny``'s base (the test suite's): an 8 × 48 MLP on 600 clustered samples."""

STANDARD = Member(
    data=FASHION_MNIST_WHOLE, model=Model(width=512, gamma=0.3), training=Training(iterations=2000)
)
"""``standard``'s sweep base: the paper's 9 × 512 MLP on the whole Fashion-MNIST training
set, γ = 0.3, 2,000 iterations (module docstring)."""

PAPER = Member(data=CIFAR10, model=Model(width=512), training=Training(iterations=5000))
"""``paper``'s base: the paper's 9 × 512 MLP on CIFAR-10, 5,000 iterations."""


# ---------------------------------------------------------------------- fd-two-phase
FASHION_MNIST_ARM: ArmChanges = {"data": FASHION_MNIST, "gamma": 0.3, "iterations": 900}
DIGITS_ARM: ArmChanges = {"data": DIGITS, "gamma": 0.5, "iterations": 600}
"""The image arm on bundled data (:meth:`TwoPhase.bundled`)."""

TWO_PHASE = tiers(
    tiny=TwoPhase(base=TINY, arms={"clustered": {}}),
    quick=TwoPhase(base=QUICK, arms={"fashion_mnist": FASHION_MNIST_ARM, "clustered": {}}),
    standard=TwoPhase(
        base=Member(
            data=CLUSTERED_1000, model=Model(width=512), training=Training(iterations=3000)
        ),
        arms={
            "fashion_mnist": {"data": FASHION_MNIST_WHOLE, "gamma": 0.3, "iterations": 3000},
            "clustered": {},
        },
    ),
    paper=TwoPhase(
        base=PAPER,
        arms={
            "cifar10": {"data": CIFAR10},
            "mnist": {"data": MNIST, "lr": 0.01},
            "tiny_imagenet": {"data": TINY_IMAGENET},
        },
    ),
)
"""``fd-two-phase``: the baseline on an image dataset and on generated clustered data
(``standard``: 1,000 clustered samples per class and 3,000 iterations; ``paper``: the paper's
three datasets, MNIST at its η = 0.01, A.2)."""


# ---------------------------------------------------------------------- fd-operations
OPERATION_ARMS: dict[str, ArmChanges] = {
    "baseline": {},
    "norm-batchnorm": {"norm": "batchnorm"},
    "norm-norm1": {"norm": "norm1"},
    "momentum-0.5": {"momentum": 0.5},
    "momentum-0.9": {"momentum": 0.9},
    "momentum-0.5-lr-0.05": {"momentum": 0.5, "lr": 0.05},
    "momentum-0.9-lr-0.01": {"momentum": 0.9, "lr": 0.01},
    "gamma-0.1": {"gamma": 0.1},
    "gamma-0.5": {"gamma": 0.5},
    "gamma-2": {"gamma": 2.0},
    "l2-0.0001": {"l2": 1e-4},
    "l2-0.001": {"l2": 1e-3},
    "l2-0.01": {"l2": 1e-2},
}
"""The arms of ``fd-operations``; ``baseline`` is shared by every group (no normalisation,
m = 0, γ = 1, λ = 0)."""

OPERATION_GROUPS: dict[str, GroupPoints] = {
    "normalisation": (
        ("none", "baseline"),
        ("batchnorm", "norm-batchnorm"),
        ("norm1", "norm-norm1"),
    ),
    "momentum": ((0.0, "baseline"), (0.5, "momentum-0.5"), (0.9, "momentum-0.9")),
    "momentum_equal_lr": (
        (0.0, "baseline"),
        (0.5, "momentum-0.5-lr-0.05"),
        (0.9, "momentum-0.9-lr-0.01"),
    ),
    "gamma": ((0.1, "gamma-0.1"), (0.5, "gamma-0.5"), (1.0, "baseline"), (2.0, "gamma-2")),
    "l2": ((0.0, "baseline"), (1e-4, "l2-0.0001"), (1e-3, "l2-0.001"), (1e-2, "l2-0.01")),
    "stuck": ((0.1, "gamma-0.1"), (1.0, "baseline")),
}
"""Which arm each swept value ran as. ``momentum_equal_lr`` is the control of note A19:
η(m) = 0.1 (1 - m), so that the effective step η/(1 - m) stays 0.1."""

OPERATIONS = tiers(
    tiny=Sweep(
        base=TINY.replace(iterations=200),
        arms={
            "baseline": {},
            "norm-norm1": {"norm": "norm1"},
            "momentum-0.9": {"momentum": 0.9},
            "gamma-0.1": {"gamma": 0.1},
        },
        groups={
            "normalisation": (("none", "baseline"), ("norm1", "norm-norm1")),
            "momentum": ((0.0, "baseline"), (0.9, "momentum-0.9")),
            "stuck": ((0.1, "gamma-0.1"), (1.0, "baseline")),
        },
    ),
    quick=Sweep(base=QUICK, arms=OPERATION_ARMS, groups=OPERATION_GROUPS),
    standard=Sweep(
        base=STANDARD,
        arms={
            **OPERATION_ARMS,
            "gamma-0.1": {"gamma": 0.03},
            "gamma-0.5": {"gamma": 0.1},
            "gamma-2": {"gamma": 1.0},
        },
        groups={
            **OPERATION_GROUPS,
            "gamma": ((0.03, "gamma-0.1"), (0.1, "gamma-0.5"), (0.3, "baseline"), (1.0, "gamma-2")),
            "stuck": ((0.03, "gamma-0.1"), (0.3, "baseline")),
        },
        repeat=Repeat(groups=("momentum_equal_lr", "l2"), seeds=3),
    ),
    paper=Sweep(base=PAPER, arms=OPERATION_ARMS, groups=OPERATION_GROUPS),
)
"""``fd-operations``: the four operations and stuck vs unstuck (§5, Fig. 8, S-Fig. 24,
28-29), on clustered data at ``quick``. At ``standard`` (the paper's 9 × 512 MLP on
Fashion-MNIST, whose baseline uses γ = 0.3; the paper's A.12-A.13 used 7- and 9-layer, 512-wide
MLPs) the γ arms are scaled by 0.3 too (0.03, 0.1, 0.3, 1; the arm names keep the quick
preset's), and the arms of the equal-effective-step momentum control and of the L2 sweep are
trained with three seeds (``repeat``: their differences were a few percent at the earlier
standard scale), compared as medians."""


# ---------------------------------------------------------------------- fd-robustness
SLOW_LR: ArmChanges = {
    "lr": 0.01,
    "iterations": 3000,
    "every": 50,
    "dense_every": 10,
    "half_window": 100,
}
"""η = 0.01: 5× the iterations (the plateau scales with 1/η), measured every 50 (every 10 in
the window)."""

ROBUSTNESS_ARMS: dict[str, ArmChanges] = {
    "baseline": {},
    "depth-5": {"depth": 5},
    "depth-7": {"depth": 7},
    "width-64": {"width": 64},
    "width-256": {"width": 256},
    "lr-0.01": SLOW_LR,
    "batch-500": {"batch_size": 500},
    "batch-1000": {"batch_size": 1000},
    "leaky-0.1": {"activation": "leaky_relu", "negative_slope": 0.1},
    "leaky-0.01": {"activation": "leaky_relu", "negative_slope": 0.01},
}
"""The arms of ``fd-robustness``."""

ACTIVATIONS: GroupPoints = (
    ("relu", "baseline"),
    ("leaky_relu 0.1", "leaky-0.1"),
    ("leaky_relu 0.01", "leaky-0.01"),
)

ROBUSTNESS_GROUPS: dict[str, GroupPoints] = {
    "depth": ((5, "depth-5"), (7, "depth-7"), (9, "baseline")),
    "width": ((64, "width-64"), (128, "baseline"), (256, "width-256")),
    "learning_rate": ((0.1, "baseline"), (0.01, "lr-0.01")),
    "batch_size": ((100, "baseline"), (500, "batch-500"), (1000, "batch-1000")),
    "activation": ACTIVATIONS,
}

SMALL_MLP: ArmChanges = {"depth": 7, "width": 256}
"""The 7-layer, 256-wide MLPs of the paper's batch-size and learning-rate sweeps (A.9, A.10)."""

ROBUSTNESS = tiers(
    tiny=Sweep(
        base=TINY.replace(iterations=200),
        arms={"baseline": {}, "leaky-0.1": ROBUSTNESS_ARMS["leaky-0.1"]},
        groups={"activation": ACTIVATIONS[:2]},
    ),
    quick=Sweep(base=QUICK, arms=ROBUSTNESS_ARMS, groups=ROBUSTNESS_GROUPS),
    standard=Sweep(
        base=STANDARD,
        arms={
            "baseline": {},
            "depth-5": {"depth": 5},
            "depth-7": {"depth": 7},
            "width-128": {"width": 128},
            "width-256": {"width": 256},
            "leaky-0.1": ROBUSTNESS_ARMS["leaky-0.1"],
            "leaky-0.01": ROBUSTNESS_ARMS["leaky-0.01"],
            "7x256": SMALL_MLP,
            "7x256-batch-500": {**SMALL_MLP, "batch_size": 500},
            "7x256-batch-1000": {**SMALL_MLP, "batch_size": 1000},
            "7x256-lr-0.01": {**SMALL_MLP, **SLOW_LR, "iterations": 6000},
        },
        groups={
            "depth": ((5, "depth-5"), (7, "depth-7"), (9, "baseline")),
            "width": ((128, "width-128"), (256, "width-256"), (512, "baseline")),
            "learning_rate": ((0.1, "7x256"), (0.01, "7x256-lr-0.01")),
            "batch_size": ((100, "7x256"), (500, "7x256-batch-500"), (1000, "7x256-batch-1000")),
            "activation": ACTIVATIONS,
        },
    ),
    paper=Sweep(base=PAPER, arms=ROBUSTNESS_ARMS, groups=ROBUSTNESS_GROUPS),
)
"""``fd-robustness``: the phenomenon across depth, width, learning rate, batch size and
activation (Appendix A.9-A.11, note §6.9). At ``standard``: depth 5, 7, 9 and width 128,
256, 512 around the paper's 9 × 512 MLP (the paper's range: depths 4-9, widths 32-512),
the activations on it (A.11: 9-layer, 512-wide MLPs), and the batch sizes and learning
rates on a 7-layer, 256-wide MLP (A.9, A.10)."""


# ---------------------------------------------------------------------- fd-directions
DIRECTIONS = tiers(
    tiny=Directions(base=TINY.replace(probe_per_class=4), captures=5, table_layers=(2, 3)),
    quick=Directions(base=QUICK),
    standard=Directions(base=STANDARD, captures=30),
    paper=Directions(base=PAPER, captures=40),
)
"""``fd-directions``: the common-direction analysis of Figs 4-7 and Table 1 over the
detected phase 1 of the baseline (clustered data at ``quick``; the paper: 9-layer, 512-wide
MLPs on CIFAR-10, Tiny-ImageNet and MNIST, layers 2-6)."""
