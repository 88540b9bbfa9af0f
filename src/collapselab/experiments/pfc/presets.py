"""Typed presets of paper 001's experiments, four tiers each: ``tiny`` (the test suite's,
seconds), ``quick`` (minutes on a 2-core CPU), ``standard`` (Fashion-MNIST, within about an
hour on 2 cores) and ``paper`` (the paper's scale, for a GPU).

Every preset is a frozen dataclass checked field by field when it is made
(:class:`~collapselab.experiments.Preset`); change one for a run with
``collapselab sweep <id> --preset quick --set lr=0.1 --set epochs=200`` or, in Python,
``preset.replace(lr=0.1)``.

Deep networks (§IV-A). The paper's protocol (:data:`TABLE_I`): Table I's architecture for
each dataset read from local files, SGD with momentum 0.9, weight decay 5e-4, batch 128, 350
epochs, learning rate 0.005 (MNIST) or 0.01 (the others) divided by 10 after epochs 117 and
233, the features of the last stage's blocks. Choices the paper leaves open (note §7.6-7.8)
are ours and recorded here: balanced training sets (subsampled to the smallest class,
:class:`~collapselab.data.steps.Balance`), per-channel standardisation
(:class:`~collapselab.data.steps.StandardizeChannels`), no augmentation, metrics on the whole
training split, measurement at paper 003's log-spaced epochs.

Every training preset keeps the paper's protocol shape (SGD with momentum 0.9, weight decay
5e-4, batch 128, learning rate divided by 10 at a third and two thirds of training). With
far fewer optimiser steps per epoch than the paper's ~400, the small presets use a larger
learning rate and as many epochs as the terminal phase needs within the CPU budget, so that
the last block is (nearly) NCC separable on the training set, the paper's setting (§II-B).

* ``quick``: a balanced subset of Fashion-MNIST (130 training, 50 test images per class): a
  fully connected pre-activation ResNet (width 128, 6 blocks) on the 784 pixels and a
  two-stage conv ResNet on the 1 x 28 x 28 images. Without Fashion-MNIST's files it falls back
  to ``quick-bundled`` (derived, :meth:`TrainingPreset.bundled`): the same networks on
  scikit-learn's digits (1300 training images), the conv ResNet's first stage at stride 1 for
  the 8 x 8 images.
* ``standard``: a balanced subset of Fashion-MNIST (200 training, 100 test images per
  class): the fully connected ResNet at the paper's depth (10 blocks, width 512 instead of
  1000, learning rate 0.01) and the paper's own Fashion-MNIST network (Table I:
  32 x 14 x 14 with 5 blocks, 64 x 7 x 7 with 4 blocks; learning rate 0.05). The
  simulations (Figs. 1, 4, 5, Theorems 1-4) run the paper preset's instances. Measured:
  41.5 min for the paper's six experiments on 2 CPU cores at load average 3 to 4 (the conv
  network 30 min, the FC ResNet 9.5 min); 23.2 min on 2 quiet cores, load 1 to 1.5 (15.6
  and 6.1 min); both reach zero training error before the first
  rate drop (epochs 47 of 240 and 29 of 300).
* ``paper``: :data:`TABLE_I`'s MNIST row (``pfc-training-fc``) and Fashion-MNIST row
  (``pfc-training-conv``, whose variants ``paper-cifar10``, ``paper-stl10`` and
  ``paper-cifar100`` are the other rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from collapselab.data import DataSpec
from collapselab.data.steps import Balance, StandardizeChannels
from collapselab.experiments.preset import Preset, PresetError, tiers

__all__ = [
    "LAMBDA_SWEEP",
    "MUFM",
    "TABLE_I",
    "THEOREMS",
    "TOY",
    "TRAINING_CONV",
    "TRAINING_FC",
    "MufmInstance",
    "MufmPreset",
    "SweepPreset",
    "TheoremsPreset",
    "ToyPreset",
    "TrainingPreset",
]

# ---------------------------------------------------------------------------------------
# the deep-network experiments (Figs. 2-3)

ModelName = Literal[
    "fc_resnet", "conv_resnet", "pfc_mnist", "pfc_fashion_mnist", "pfc_cifar10", "pfc_stl10",
    "pfc_cifar100",
]  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class TrainingPreset(Preset):
    """A PFC training run (``pfc-training-fc``, ``pfc-training-conv``; §IV-A, Figs. 2-3).

    Attributes:
        data: the dataset and its preprocessing (:class:`~collapselab.data.DataSpec`).
        model: ``"fc_resnet"`` (:class:`~collapselab.models.FCResNet` of ``width`` and
            ``n_blocks``; input size and classes from the data), ``"conv_resnet"``
            (:class:`~collapselab.models.ConvResNet` of ``stages``, each ``(channels,
            blocks, stride)``) or a Table I network (``"pfc_mnist"``, ``"pfc_fashion_mnist"``,
            ``"pfc_cifar10"``, ``"pfc_stl10"``, ``"pfc_cifar100"``; :mod:`collapselab.models`),
            which takes none of the three.
        epochs, lr, milestones, momentum, weight_decay, batch_size: SGD with a step schedule
            dividing the learning rate by 10 after each milestone epoch
            (:class:`collapselab.train.TrainConfig`; the paper: 350 epochs, 117 and 233).
        measure: the measurement epochs: ``"log"`` (paper 003's log-spaced list scaled to
            ``epochs``), ``"all"`` or the epochs themselves (the last epoch is added); the
            initial model is measured too.
        geodesic_points: the t grid of the straight-line prediction (Fig. 3's blue curve).
        geodesic_direct: PFC1 and PFC2 along the line evaluated on the interpolated features
            (``True``) or from their exact closed forms (``False``, the paper scale: a pass
            over the features per t would cost too much); PFC3 is always evaluated directly.
        ot_subsample: training samples of the optimal-transport diagnostics (beyond the
            paper), ``None`` to skip them.
        one_thread: train and measure with one BLAS/torch thread (the small networks: on a
            shared 2-core machine threading their products only adds synchronisation,
            measured 7x slower with 2 threads); ``False``: torch's default.
        eval_batch_size: the batch size of the measurement passes.
        checkpoint_every: checkpoint period in epochs.
    """

    data: DataSpec
    model: ModelName
    width: int | None = None
    n_blocks: int | None = None
    stages: tuple[tuple[int, int, int], ...] | None = None
    epochs: int
    lr: float
    milestones: tuple[int, ...]
    momentum: float = 0.9
    weight_decay: float = 5e-4
    batch_size: int = 128
    measure: Literal["log", "all"] | tuple[int, ...] = "log"
    geodesic_points: int = 101
    geodesic_direct: bool = True
    ot_subsample: int | None = 300
    one_thread: bool = True
    eval_batch_size: int = 1024
    checkpoint_every: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        given = {"width": self.width, "n_blocks": self.n_blocks, "stages": self.stages}
        needed = {"fc_resnet": ("width", "n_blocks"), "conv_resnet": ("stages",)}
        wanted = needed.get(self.model, ())
        wrong = [name for name, value in given.items() if (value is None) == (name in wanted)]
        if wrong:
            raise PresetError(
                f"TrainingPreset.model {self.model!r} takes {list(wanted) or 'none'} of "
                f"width, n_blocks and stages; {', '.join(wrong)} wrongly set or missing"
            )
        if isinstance(self.measure, tuple) and any(epoch < 1 for epoch in self.measure):
            raise PresetError(f"TrainingPreset.measure: epochs count from 1, got {self.measure}")

    def bundled(self) -> TrainingPreset | None:
        """The preset on its data's bundled fallback (:meth:`Preset.bundled`); a conv
        ResNet's first stage then runs at stride 1.

        Why more than other data: the fallback's digits are 8 x 8 images, which a first
        stage at Fashion-MNIST's stride 2 would shrink to a 2 x 2 last stage; at stride 1
        the last stage is 4 x 4.
        """
        fallback = super().bundled()
        if fallback is None or self.stages is None:
            return fallback
        (channels, blocks, _), *rest = self.stages
        return fallback.replace(stages=((channels, blocks, 1), *rest))


TABLE_I_DATA = {
    name: DataSpec(name, steps=(Balance("smallest"), StandardizeChannels()))
    for name in ("mnist", "fashion_mnist", "cifar10", "stl10", "cifar100")
}
"""Table I's datasets from local files: the training split subsampled to its smallest class
(the paper assumes n samples in every class, §II; MNIST's classes hold 5421 to 6742 images),
every channel standardised with the training mean and standard deviation."""

_MNIST_ROW = TrainingPreset(
    data=TABLE_I_DATA["mnist"],
    model="pfc_mnist",
    epochs=350,
    lr=0.005,
    milestones=(117, 233),
    geodesic_direct=False,
    ot_subsample=1000,
    one_thread=False,
)

TABLE_I: dict[str, TrainingPreset] = {
    "mnist": _MNIST_ROW,
    **{
        row: _MNIST_ROW.replace(data=TABLE_I_DATA[row], model=f"pfc_{row}", lr=0.01)
        for row in ("fashion_mnist", "cifar10", "stl10", "cifar100")
    },
}
"""001 Table I: one paper-scale training configuration per dataset (local files): its
network, 350 epochs at learning rate 0.005 (MNIST) or 0.01, divided by 10 after epochs 117
and 233."""


def _digits(n_per_class: int, flatten: bool) -> DataSpec:
    """scikit-learn's bundled digits, a quarter of them for testing (the loader standardises
    them with the training statistics); flat vectors for the fully connected net."""
    return DataSpec(
        "digits", {"n_per_class": n_per_class, "test_fraction": 0.25, "flatten": flatten}
    )


def _fashion_quick(flatten: bool) -> DataSpec:
    """The quick tier's data: 130 training and 50 test Fashion-MNIST images per class,
    falling back to the bundled digits, 130 training images per class."""
    return DataSpec(
        "fashion_mnist",
        {"n_train_per_class": 130, "n_test_per_class": 50},
        steps=(StandardizeChannels(),),
        fallback=_digits(174, flatten),
    )


_FASHION_STANDARD = DataSpec(
    "fashion_mnist",
    {"n_train_per_class": 200, "n_test_per_class": 100},
    steps=(StandardizeChannels(),),
)

_FC_QUICK = TrainingPreset(
    data=_fashion_quick(flatten=True),
    model="fc_resnet",
    width=128,
    n_blocks=6,
    epochs=600,
    lr=0.05,
    milestones=(200, 400),
    checkpoint_every=100,
)

TRAINING_FC = tiers(
    tiny=_FC_QUICK.replace(
        data=_digits(12, flatten=True),
        width=16,
        n_blocks=3,
        epochs=4,
        milestones=(2, 3),
        measure="all",
        geodesic_points=11,
        ot_subsample=20,
        checkpoint_every=2,
    ),
    quick=_FC_QUICK,
    standard=_FC_QUICK.replace(
        data=_FASHION_STANDARD,
        width=512,
        n_blocks=10,
        epochs=300,
        lr=0.01,
        milestones=(100, 200),
        ot_subsample=500,
        checkpoint_every=25,
    ),
    paper=TABLE_I["mnist"],
)
"""``pfc-training-fc``: 001 Figs 2(a)/3(a), the fully connected ResNet (paper: MNIST)."""

_CONV_QUICK = TrainingPreset(
    data=_fashion_quick(flatten=False),
    model="conv_resnet",
    stages=((16, 1, 2), (32, 4, 2)),
    epochs=100,
    lr=0.05,
    milestones=(33, 66),
    checkpoint_every=25,
)

TRAINING_CONV = tiers(
    tiny=_CONV_QUICK.replace(
        data=_digits(8, flatten=False),
        stages=((4, 1, 1), (6, 2, 2)),
        epochs=3,
        milestones=(1, 2),
        measure="all",
        geodesic_points=11,
        ot_subsample=None,
        checkpoint_every=1,
    ),
    quick=_CONV_QUICK,
    standard=_CONV_QUICK.replace(
        data=_FASHION_STANDARD,
        model="pfc_fashion_mnist",
        stages=None,
        epochs=240,
        milestones=(80, 160),
        ot_subsample=500,
        checkpoint_every=25,
    ),
    paper=TABLE_I["fashion_mnist"],
    **{f"paper-{row}": TABLE_I[row] for row in ("cifar10", "stl10", "cifar100")},
)
"""``pfc-training-conv``: 001 Figs 2(b-e)/3(b-e), conv ResNets (paper: Fashion-MNIST; the
other Table I rows are the variants ``paper-cifar10``, ``paper-stl10``, ``paper-cifar100``)."""

# ---------------------------------------------------------------------------------------
# the simulations (Figs. 1, 4, 5; Theorems 1-4): ``standard`` is the paper's own instance,
# which runs in CPU minutes


@dataclass(frozen=True, kw_only=True)
class ToyPreset(Preset):
    """``pfc-toy`` (Fig. 1): ``n_classes`` clusters of ``n_per_class`` points in the plane
    (around random centres, Gaussian ``noise``) moving on straight lines to a simplex ETF of
    ``end_scale`` times their class means' RMS norm; PFC1-3 on ``n_grid`` values of t."""

    n_classes: int = 3
    n_per_class: int = 4
    noise: float = 0.8
    end_scale: float = 1.6
    n_grid: int = 101


_TOY = ToyPreset()
TOY = tiers(tiny=_TOY.replace(n_grid=21), quick=_TOY, standard=_TOY, paper=_TOY)
"""``pfc-toy``: 001 Fig. 1, straight-line trajectories in 2-D to simplex-ETF class means."""


@dataclass(frozen=True, kw_only=True)
class MufmInstance(Preset):
    """The §IV-B instance: ``x_{k,i} ~ N(μ_k, I_d)``, ``μ_k`` uniform on the unit sphere,
    ``n_classes`` (K) classes of ``n_per_class`` (n) samples in ``dim`` (d) dimensions, MSE
    loss with weight decay ``lambda_w`` (λ_W) on the classifier; the paper's values are the
    defaults."""

    n_classes: int = 5
    dim: int = 20
    n_per_class: int = 100
    lambda_w: float = 0.005


@dataclass(frozen=True, kw_only=True)
class _Solvers(MufmInstance):
    """The two solvers of every UFM/MUFM solve: the paper's plain gradient descent
    (``literal_lr``, ``literal_steps``) and L-BFGS to gradient norm ``tol`` (at most
    ``max_iter`` iterations)."""

    literal_lr: float = 0.1
    literal_steps: int = 50_000
    tol: float = 1e-9
    max_iter: int = 50_000


@dataclass(frozen=True, kw_only=True)
class MufmPreset(_Solvers):
    """``pfc-mufm`` (Fig. 4): the UFM and the MUFM at ``lam`` (λ), both solvers."""

    lam: float = 0.001


_MUFM = MufmPreset()
_TINY_INSTANCE = {"n_classes": 3, "dim": 6, "n_per_class": 8, "literal_steps": 300}
MUFM = tiers(tiny=_MUFM.replace(**_TINY_INSTANCE), quick=_MUFM, standard=_MUFM, paper=_MUFM)
"""``pfc-mufm``: 001 Fig. 4 (§IV-B: K = 5, d = 20, n = 100, λ_W = 0.005, λ = 0.001; plain GD
with learning rate 0.1 for 5 x 10^4 steps, and L-BFGS to convergence)."""


@dataclass(frozen=True, kw_only=True)
class SweepPreset(_Solvers):
    """``pfc-lambda-sweep`` (Fig. 5): the MUFM at ``n_points`` values of λ/λ_W log-spaced
    from ``ratio_min`` to ``ratio_max``, both solvers at every point."""

    ratio_min: float = 0.1
    ratio_max: float = 4.0
    n_points: int


_SWEEP_PAPER = SweepPreset(n_points=25)
LAMBDA_SWEEP = tiers(
    tiny=_SWEEP_PAPER.replace(n_points=3, **_TINY_INSTANCE),
    quick=_SWEEP_PAPER.replace(n_points=9),
    standard=_SWEEP_PAPER,
    paper=_SWEEP_PAPER,
)
"""``pfc-lambda-sweep``: 001 Fig. 5 (λ/λ_W from 0.1 to 4 at λ_W = 0.005; the paper gives no
grid: log-spaced points here)."""


@dataclass(frozen=True, kw_only=True)
class TheoremsPreset(MufmInstance):
    """``pfc-theorems``: the numerical checks of Theorems 1-4 (§III).

    Attributes:
        t1_trials, t1_classes, t1_dim, t1_per_class: Theorem 1's Monte-Carlo lines (also
            the classes and dimension of Theorem 2's).
        t2_scales, t2_trials: Theorem 2's start distances ε from the ETF and lines per ε.
        lam: the MUFM λ of Theorems 3 and 4 (on the §IV-B instance of the inherited fields).
        t3_layers: Theorem 3's layers L (the multilayer problem is solved at λ = L x lam).
        t4_lambdas, t4_flow_end, t4_flow_points: Theorem 4's large λ values, and the time
            grid of the gradient flow (21) on [0, t4_flow_end].
        tol: the gradient norm the L-BFGS solves stop at.
    """

    t1_trials: int
    t1_classes: int = 5
    t1_dim: int = 20
    t1_per_class: int = 10
    t2_scales: tuple[float, ...]
    t2_trials: int
    lam: float = 0.001
    t3_layers: int = 3
    t4_lambdas: tuple[float, ...]
    t4_flow_end: float = 2.0
    t4_flow_points: int
    tol: float = 1e-10


_THEOREMS_QUICK = TheoremsPreset(
    t1_trials=1000,
    t2_scales=(0.1, 0.3, 1.0, 3.0),
    t2_trials=200,
    t4_lambdas=(8.0, 16.0, 32.0),
    t4_flow_points=21,
)
_THEOREMS_PAPER = _THEOREMS_QUICK.replace(
    t1_trials=10_000,
    t2_scales=(0.03, 0.1, 0.3, 1.0, 3.0),
    t2_trials=2000,
    t4_lambdas=(8.0, 16.0, 32.0, 64.0),
    t4_flow_points=41,
)
THEOREMS = tiers(
    tiny=_THEOREMS_QUICK.replace(
        t1_trials=60,
        t1_classes=3,
        t1_dim=5,
        t1_per_class=3,
        t2_scales=(0.1, 3.0),
        t2_trials=10,
        n_classes=3,
        dim=5,
        n_per_class=4,
        lam=0.4,
        t4_lambdas=(8.0, 16.0),
        t4_flow_end=1.0,
        t4_flow_points=6,
    ),
    quick=_THEOREMS_QUICK,
    standard=_THEOREMS_PAPER,
    paper=_THEOREMS_PAPER,
)
"""``pfc-theorems``: Monte-Carlo and solved-instance checks of Theorems 1-4."""
