r"""Typed presets of paper 004's nine experiments, four tiers each: ``tiny`` (the test
suite's, seconds), ``quick`` (minutes on a 2-core CPU), ``standard`` (longer runs, more
seeds and widths; Fashion-MNIST for the networks) and ``paper`` (the paper's scale).

Every preset is a frozen dataclass checked field by field when it is made
(:class:`~collapselab.experiments.Preset`); change one for a run with
``collapselab sweep dlufm-linear --preset quick --set steps=20000 --set lr=0.4`` or, in
Python, ``preset.replace(steps=20_000)``.

**The deep UFM** (``dlufm-linear``, ``dlufm-relu``, ``dlufm-regularisation``,
``dlufm-layers``). The paper's text lost every hyper-parameter (note 004 §0, §5.1): K = 3
classes and the third layer are all it keeps. The configurations here are the note's
verified defaults (§5.2):

* linear, configuration A (:data:`CONFIG_A`): ``K = 3, n = 10, d = 10, L = 4,
  λ_W = λ_H = 5e-3``, layer 3, ``W_l ~ N(0, 0.25/d)``, ``H_1 ~ N(0, 0.25)``, full-batch
  gradient descent at ``lr = 0.5``;
* linear, configuration B (:data:`CONFIG_B`: unequal λ, K = 4): ``n = 5, d = 8, L = 3``,
  ``λ_W = (2e-3, 5e-3, 1e-2)``, ``λ_H = 3e-3``, ``lr = 0.3``;
* ReLU: ``K = 3, n = 10, L = 5, λ = 5e-3``, layer ``L − 1 = 4``, ``W_l ~ N(0, 1/d)``,
  ``H_1 ~ N(0, 1)``, ``lr = 0.3``, swept over widths and seeds (the symmetric solution
  appears at the larger width; at d = 10 some seeds end lower-rank, note §5.2).

``quick`` fits a 2-core CPU in minutes, ``standard`` runs the same models longer (more
steps, checkpoints, seeds and widths: the scale at which the claims are meant to hold),
``paper`` is the scale the paper's figures suggest (every problem is small: it needs no
GPU). No deep-UFM preset reads data: the model's features are free.

**A trained MLP** (``dlufm-mlp``, beyond the paper): :class:`MlpPreset`, its images a
:class:`~collapselab.data.DataSpec` (digits at ``tiny`` and ``quick``, Fashion-MNIST from
local files at ``standard`` and ``paper``, which need them: no stand-in data).

**Real networks' curvature** (``curvature-{mlp,conv}-{ce,mse}``): :class:`NetworkPreset`,
one table per (network, loss) in :data:`NETWORKS`:

* ``quick`` (minutes on a 2-core CPU): five easily told apart Fashion-MNIST classes
  (:data:`QUICK_CLASSES`, T-shirt/top, trouser, dress, sandal, bag: ``K = 5``, so
  ``K² = 25`` predicted outliers), 300 training images per class, a 784-64-64-K MLP or a
  two-convolution net, 40 epochs of SGD with momentum 0.9 and weight decay 5e-4; the
  curvature family measures every weight layer but the input one on a fixed balanced
  subset of 200 training images at epochs 0, 4 and 40. Fashion-MNIST is read from
  ``--data-dir``, ``$COLLAPSELAB_DATA_DIR`` or Debian's ``dataset-fashion-mnist`` location,
  as :func:`collapselab.data.load_dataset` finds it. Without the files the quick preset
  falls back to ``quick-bundled``, derived (:meth:`Preset.bundled`): its data's
  :attr:`~collapselab.data.DataSpec.fallback`, scikit-learn's bundled 8x8 digits with the
  same five class ids (the run records which data it used, manifest ``data``), everything
  else the quick preset's.
* ``standard``: three Fashion-MNIST classes (:data:`STANDARD_CLASSES`: the first three of
  the quick preset's, ``K = 3``, paper 004's own ``K``, so ``K² = 9`` predicted outliers),
  100 training images per class; a 784-128-128-128-128-K MLP or the two-convolution net;
  momentum 0.9 and weight decay 5e-4 throughout. The **MLPs** train by full-batch gradient
  descent (all 300 images per step) at a constant lr 0.05 for :data:`FULL_BATCH_EPOCHS`
  steps, paper 004's procedure (the deep UFM is trained by full-batch gradient descent,
  note 004 §5.1), NC1 every 100 steps, curvature at steps 0, 6,666 and 20,000. The **conv
  nets** train by SGD for 450 epochs, the rate divided by 10 after epochs 150 and 300
  (Papyan's and Han et al.'s 1/3 and 2/3), CE with Papyan's lr 0.05 and batches of 64, MSE
  (``nn.MSELoss()``, the mean over the K outputs) with lr 0.05 and batches of 16, NC1 every
  5 epochs, curvature at epochs 0, 150 and 450. Curvature of the classifier and the layer
  before it on all 300 training images (``2K² + K = 21`` eigenpairs per spectrum). Chosen
  by the terminal-phase criterion of :mod:`~collapselab.experiments.dlufm.terminal` in
  pilots (docs/curvature.md, which says whose claim counts were read before the choice):
  with all ten classes no network met it; with these three classes both MSE networks do
  under SGD (ratios 0.17 and 0.26; with 300 images per class neither reaches zero training
  error or a falling NC1) and the CE networks do not (0.79 and 1.02); full-batch gradient
  descent takes both MLPs deeper (MSE 0.003 against 0.15, CE 0.49: met), and costs the
  conv nets about ten times as much per step, too much for the hour. No stand-in data: it
  needs the Fashion-MNIST files.
* ``paper`` (for a GPU, not run here): all of Fashion-MNIST with the training protocol of
  Papyan, Han & Donoho and Han et al. (note 003: 350 epochs, batches of 128, weight decay
  5e-4, decays after epochs 116 and 233, :data:`PAPER_LR`); the conv networks are Papyan's
  own, VGG-11 on the images padded to 32 x 32 (:data:`PAPYAN_FASHION`; issue 35 item 5),
  the MLPs a wider 784-512-512-512-512-K; checked by its dry run on local files.
* ``tiny``: the test suite's, seconds on three digit classes, every claim evaluable.

``dlufm-mlp``'s standard preset reads the curvature networks' classes
(:data:`STANDARD_CLASSES`, one constant for both).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from collapselab.data import DataSpec
from collapselab.data.steps import (
    Cast,
    Flatten,
    KeepClasses,
    Pad,
    SortByClass,
    StandardizeChannels,
    StandardizeScalar,
)
from collapselab.experiments.preset import Preset, PresetError, tiers

__all__ = [
    "CONFIG_A",
    "CONFIG_B",
    "FULL_BATCH_EPOCHS",
    "LAYERS",
    "LINEAR",
    "MLP",
    "NETWORKS",
    "NETWORK_LOSSES",
    "PAPER_LR",
    "PAPYAN_FASHION",
    "QUICK_CLASSES",
    "REGULARISATION",
    "RELU",
    "STANDARD_CLASSES",
    "TINY_KEYS",
    "LayersPreset",
    "LinearPreset",
    "MlpPreset",
    "NetworkPreset",
    "RegularisationPreset",
    "ReluPreset",
    "UFMBase",
    "UFMConfig",
]

U = TypeVar("U", bound="UFMConfig")
N = TypeVar("N", bound="NetworkPreset")

# ---------------------------------------------------------------------------------------
# the deep unconstrained feature model


@dataclass(frozen=True, kw_only=True)
class UFMBase(Preset):
    """What every deep-UFM preset sets: the model's classes and regularisation, and the
    start and step of the paper's full-batch gradient descent.

    Attributes:
        n_classes, n_per_class: ``K`` and ``n`` (``N = Kn`` free feature columns).
        lambda_w: ``λ_W``, one for every layer or one per layer ``(λ_W(1), ..., λ_W(L))``.
        lambda_h: ``λ_H``.
        lr: the gradient-descent step.
        w_scale, h_scale: the start, ``W_l ~ N(0, w_scale²/d_l)`` and
            ``H_1 ~ N(0, h_scale²)`` (:meth:`~collapselab.theory.dlufm.DeepUFM.random_point`).
    """

    n_classes: int
    n_per_class: int
    lambda_w: float | tuple[float, ...]
    lambda_h: float
    lr: float
    w_scale: float = 1.0
    h_scale: float = 1.0


@dataclass(frozen=True, kw_only=True)
class UFMConfig(UFMBase):
    """One deep UFM: :class:`UFMBase` and its widths.

    Attributes:
        width: one width ``d`` for every layer (then ``n_layers`` says ``L``), or the widths
            ``(d_1, ..., d_L)`` (``L`` their number, ``n_layers`` ``None``).
        n_layers: ``L`` with one width.
    """

    width: int | tuple[int, ...]
    n_layers: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.width, int) and self.n_layers is None:
            raise PresetError(f"{type(self).__name__}: one width needs n_layers (L)")
        if isinstance(self.width, tuple) and self.n_layers is not None:
            raise PresetError(
                f"{type(self).__name__}: widths {self.width} say L themselves; n_layers must "
                f"be None, got {self.n_layers}"
            )

    @classmethod
    def on(cls: type[U], model: UFMConfig, **fields: Any) -> U:
        """A preset of this class on ``model``'s deep UFM (every field of ``model``), with
        the further ``fields`` of the class."""
        own = {f.name: getattr(model, f.name) for f in dataclasses.fields(UFMConfig)}
        return cls(**own, **fields)


@dataclass(frozen=True, kw_only=True)
class LinearPreset(UFMConfig):
    """``dlufm-linear``: gradient descent on the deep linear UFM, layer ``layer`` analysed
    at ``checkpoints`` log-spaced checkpoints of ``steps`` gradient steps."""

    layer: int
    steps: int
    checkpoints: int


@dataclass(frozen=True, kw_only=True)
class RegularisationPreset(UFMConfig):
    """``dlufm-regularisation``: the model with ``λ = λ_W = λ_H`` set so that ``β/β_c``
    takes each of ``ratios`` (its own ``lambda_w``, ``lambda_h`` are not used), ``steps``
    gradient steps each."""

    ratios: tuple[float, ...]
    steps: int


@dataclass(frozen=True, kw_only=True)
class ReluPreset(UFMBase):
    """``dlufm-relu``: the deep ReLU UFM of ``n_layers`` layers at every width of
    ``widths`` from the start of every seed of ``seeds``; layer ``layer`` analysed;
    ``steps`` gradient steps, ``checkpoints`` log-spaced checkpoints of the featured run;
    ``batched``: the seeds of a width descend together as one batched model
    (:func:`~collapselab.theory.dlufm_batched.batched_gradient_descent`, bit for bit the
    lone descents; ``False``: one by one, the control)."""

    n_layers: int
    widths: tuple[int, ...]
    seeds: tuple[int, ...]
    layer: int
    steps: int
    checkpoints: int
    batched: bool = True

    def at_width(self, width: int) -> UFMConfig:
        """The sweep's model at ``width``."""
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(UFMBase)}
        return UFMConfig(**own, width=width, n_layers=self.n_layers)


@dataclass(frozen=True, kw_only=True)
class LayersPreset(Preset):
    """``dlufm-layers``: every model of ``configs`` solved by ``steps`` gradient steps
    (stopping early at a gradient norm below ``tol``), every layer analysed."""

    configs: tuple[UFMConfig, ...]
    steps: int
    tol: float


CONFIG_A = UFMConfig(
    n_classes=3,
    n_per_class=10,
    width=10,
    n_layers=4,
    lambda_w=5e-3,
    lambda_h=5e-3,
    lr=0.5,
    w_scale=0.5,
    h_scale=0.5,
)
"""Note 004 §5.2's configuration A (``dlufm-linear``'s layer is its third)."""

_TINY_A = CONFIG_A.replace(
    n_per_class=3,
    # 5, not 4: the analysed layer's Hessian has P = width² entries and K² = 9 outliers,
    # and the outlier rule reads the first half of its spectrum (curvature.count_outliers);
    # at width 4 (P = 16 < 2K²) the outliers were more than the bulk it needs below them
    width=5,
    n_layers=3,
)

_LINEAR_QUICK = LinearPreset.on(CONFIG_A, layer=3, steps=10_000, checkpoints=60)

LINEAR = tiers(
    tiny=LinearPreset.on(_TINY_A, layer=2, steps=8000, checkpoints=25),
    quick=_LINEAR_QUICK,
    standard=_LINEAR_QUICK.replace(steps=60_000, checkpoints=120),
    paper=_LINEAR_QUICK.replace(steps=100_000, checkpoints=150),
)
"""``dlufm-linear``: Figs 3-8 and 12-14 (configuration A, layer 3)."""

_RELU_QUICK = ReluPreset(
    n_classes=3,
    n_per_class=10,
    n_layers=5,
    lambda_w=5e-3,
    lambda_h=5e-3,
    layer=4,
    lr=0.3,
    w_scale=1.0,
    h_scale=1.0,
    widths=(10, 30),
    seeds=(0, 1, 2),
    steps=60_000,
    checkpoints=24,
)

RELU = tiers(
    tiny=_RELU_QUICK.replace(
        n_per_class=3, n_layers=4, layer=3, widths=(4, 6), seeds=(0, 1), steps=3000, checkpoints=8
    ),
    quick=_RELU_QUICK,
    standard=_RELU_QUICK.replace(
        widths=(10, 20, 30), seeds=(0, 1, 2, 3, 4), steps=200_000, checkpoints=40
    ),
    paper=_RELU_QUICK.replace(
        widths=(10, 20, 30, 60), seeds=tuple(range(8)), steps=300_000, checkpoints=50
    ),
)
"""``dlufm-relu``: Figs 9-11 and Tables 1-4, a sweep over widths and seeds; the dynamics
figures follow one run that reached the symmetric solution (the widest, first seed)."""

_REG_RATIOS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98,
               1.02, 1.05, 1.1, 1.2, 1.5, 2.0, 3.0, 5.0)  # fmt: skip

_REG_QUICK = RegularisationPreset.on(
    CONFIG_A.replace(lr=0.25, w_scale=1.0, h_scale=1.0),
    ratios=(0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 1.05, 1.2, 1.5, 2.0, 3.0),
    steps=20_000,
)

REGULARISATION = tiers(
    tiny=RegularisationPreset.on(
        _TINY_A.replace(lr=0.25, w_scale=1.0, h_scale=1.0), ratios=(0.1, 0.5, 2.0), steps=6000
    ),
    quick=_REG_QUICK,
    standard=_REG_QUICK.replace(ratios=_REG_RATIOS, steps=60_000),
    paper=_REG_QUICK.replace(ratios=_REG_RATIOS, steps=100_000),
)
"""``dlufm-regularisation``: λ = λ_W = λ_H scaled so that ``β/β_c`` takes each ratio
(condition (2) fails beyond 1), GD from the same start against the closed form. The start
is N(0, 1/d) and N(0, 1) at ``lr = 0.25``: from configuration A's smaller start (scale 0.5)
gradient descent ends at lower-rank critical points already at ``β/β_c = 0.5`` (for
``L >= 2`` every singular direction has a local minimum at 0, note §8.3), and scale 1
diverges at ``lr = 0.5``."""

CONFIG_B = UFMConfig(
    n_classes=4,
    n_per_class=5,
    width=8,
    n_layers=3,
    lambda_w=(2e-3, 5e-3, 1e-2),
    lambda_h=3e-3,
    lr=0.3,
    w_scale=0.5,
    h_scale=0.5,
)
"""Note 004 §5.2's configuration B: unequal λ, K = 4."""

_RANDOM = (
    UFMConfig(n_classes=2, n_per_class=4, width=(3, 6), lambda_w=(1e-2, 3e-3), lambda_h=2e-3,
              lr=0.3, w_scale=0.5, h_scale=0.5),
    UFMConfig(n_classes=5, n_per_class=3, width=(6, 8, 7, 6, 5),
              lambda_w=(1e-3, 3e-3, 2e-3, 4e-3, 1.5e-3), lambda_h=2e-3, lr=0.2, w_scale=1.0,
              h_scale=1.0),
)  # fmt: skip
"""Random configurations: K = 2 and 5, unequal widths and λ, L = 2 and 5."""

_LAYERS_STANDARD = LayersPreset(configs=(CONFIG_B, *_RANDOM, CONFIG_A), steps=100_000, tol=1e-12)

LAYERS = tiers(
    tiny=LayersPreset(
        configs=(CONFIG_B.replace(n_per_class=2, width=4, w_scale=1.0, h_scale=1.0),),
        steps=16_000,
        tol=1e-11,
    ),
    quick=LayersPreset(configs=(CONFIG_B, *_RANDOM), steps=60_000, tol=1e-11),
    standard=_LAYERS_STANDARD,
    paper=_LAYERS_STANDARD.replace(steps=200_000),
)
"""``dlufm-layers``: every layer of configuration B (unequal λ, K = 4) and of random
configurations (K = 2 and 5, unequal widths and λ, L = 2 and 5), solved by gradient
descent; λ_out(l) against λ_W(l) and every theorem's error at the solution. The deeper
K = 5 configuration and the tiny one start at scale 1: from scale 0.5 gradient descent
stalls near the origin (measured: objective gap 2.5 after 40k steps)."""

# ---------------------------------------------------------------------------------------
# classes of Fashion-MNIST the networks read

QUICK_CLASSES = (0, 1, 3, 5, 8)
"""T-shirt/top, trouser, dress, sandal, bag: five easily told apart classes (``K = 5``)."""

STANDARD_CLASSES = QUICK_CLASSES[:3]
"""T-shirt/top, trouser, dress: ``K = 3`` as in paper 004's experiments (note 004 §2); the
standard presets of the curvature networks and of ``dlufm-mlp``."""

# ---------------------------------------------------------------------------------------
# dlufm-mlp: a bias-free ReLU MLP trained with MSE


@dataclass(frozen=True, kw_only=True)
class MlpPreset(Preset):
    """``dlufm-mlp``: a bias-free ReLU MLP (``width``, ``depth`` linear layers) trained with
    MSE, the layer-wise analysis of the weights ``W_l`` for ``l`` in ``layers``.

    Attributes:
        data: the images, flattened, standardised (one scalar mean and standard deviation
            of the training inputs), sorted class-major and cast to float32, the order of a
            deep UFM's columns (:data:`MLP_STEPS`).
        epochs, lr, momentum, weight_decay, batch_size: SGD (``mse_reduction`` the sum over
            the classes); ``schedule`` ``"constant"`` or ``"step"`` (the rate divided by 10
            after each of ``milestones``).
        eval_every: epochs between the training loop's evaluations and checkpoints.
    """

    data: DataSpec
    width: int
    depth: int
    layers: tuple[int, ...]
    epochs: int
    lr: float
    momentum: float = 0.9
    weight_decay: float = 5e-4
    batch_size: int = 50
    schedule: Literal["constant", "step"] = "constant"
    milestones: tuple[int, ...] | None = None
    eval_every: int

    def __post_init__(self) -> None:
        super().__post_init__()
        wrong = [ell for ell in self.layers if not 1 <= ell <= self.depth]
        if wrong:
            raise PresetError(
                f"MlpPreset.layers entries must be in [1, depth={self.depth}], got {wrong}"
            )


MLP_STEPS = (Flatten(), StandardizeScalar(), SortByClass(), Cast("float32"))
"""``dlufm-mlp``'s preprocessing: flat inputs standardised with one scalar mean and
standard deviation of the training split (``ddof = 1``, in float64), in class-major order
(the UFM's labels), as float32."""


def _digits(n: int) -> DataSpec:
    """scikit-learn's digits, ``n`` training images per class and ``max(n // 4, 1)`` test
    ones (``test_fraction`` 0.2 of ``n + max(n // 4, 1)``), through :data:`MLP_STEPS`."""
    return DataSpec("digits", {"n_per_class": n + max(n // 4, 1), "test_fraction": 0.2},
                    steps=MLP_STEPS)  # fmt: skip


_MLP_PAPER = MlpPreset(
    data=DataSpec(
        "fashion_mnist", {"n_train_per_class": 200, "n_test_per_class": 50}, steps=MLP_STEPS
    ),
    width=64,
    depth=4,
    layers=(3, 4),
    epochs=1000,
    lr=0.02,
    schedule="step",
    milestones=(333, 667),
    eval_every=50,
)

MLP = tiers(
    tiny=_MLP_PAPER.replace(
        data=_digits(10),
        width=24,
        depth=3,
        layers=(2, 3),
        epochs=150,
        milestones=(50, 100),  # the standard preset's schedule, exercised by the tests
        batch_size=20,
    ),
    quick=_MLP_PAPER.replace(
        data=_digits(50),
        width=32,
        epochs=300,
        schedule="constant",
        milestones=None,
        eval_every=25,
    ),
    standard=_MLP_PAPER.replace(
        data=DataSpec(
            "fashion_mnist",
            {"classes": STANDARD_CLASSES, "n_train_per_class": 100, "n_test_per_class": 25},
            steps=MLP_STEPS,
        ),
        epochs=2000,
        milestones=(667, 1333),
    ),
    paper=_MLP_PAPER,
)
"""``dlufm-mlp`` (beyond the paper): a bias-free ReLU MLP trained with MSE on real images
(digits at ``quick``; Fashion-MNIST from local files at ``standard`` and ``paper``, which
need them) to zero training error; the layer-wise analysis of its last two layers. SGD
at ``lr = 0.02`` with momentum 0.9 (measured on digits: ``lr = 0.05`` kills every unit of
the bias-free network, accuracy 0.1; 0.02 reaches zero error by epoch 100). ``standard``
and ``paper``: width 64 and the learning rate divided by 10 after 1/3 and 2/3 of the epochs
(Papyan's and Han et al.'s schedule), chosen on training accuracy alone so that the network
is at zero training error through the last part of training, the regime the theory is
about: at width 32 with a constant rate it ended at 0.998 (two of 1,000 images wrong; with
the step schedule 0.992, with weight decay 1e-4 0.998); at width 64 with a constant rate it
reached 1.0 at epoch 200 but fell to 0.91-0.97 at three later evaluations; with the step
schedule it holds 1.0 from epoch 400 to 2000 (2026-11-25 pilots, seed 0, training rows
only). ``standard`` reads three classes (:data:`STANDARD_CLASSES`: T-shirt/top, trouser,
dress, ``K = 3``, paper 004's ``K``), as the curvature networks' standard preset does since
2026-11-28; with them it holds 1.0 from epoch 400 to 2000, as with all ten, in 2.5 min
instead of 8.7."""

# ---------------------------------------------------------------------------------------
# curvature-{mlp,conv}-{ce,mse}: real networks' curvature

NETWORK_LOSSES: dict[str, dict[str, str]] = {
    # CE: Papyan's class part in the class centring (the logit centring vanishes for CE);
    # f_top's top eigenspace: Theorem 4.1's K² outliers for MSE (paper 004 Thm 4.3,
    # App. C, note M14), the top K for CE (Gur-Ari et al., who observed it with CE)
    "ce": {"centring": "class", "fraction_k": "K"},
    "mse": {"centring": "logit", "fraction_k": "K^2"},
}
"""What follows a network preset's loss: Papyan's centring and f_top's top eigenspace."""


@dataclass(frozen=True, kw_only=True)
class NetworkPreset(Preset):
    """A real network trained on images, its curvature measured on a schedule
    (``curvature-{mlp,conv}-{ce,mse}``).

    Attributes:
        data: the images (:class:`~collapselab.data.DataSpec`).
        net: ``"mlp"`` (:class:`~collapselab.models.MLP` with biases, ``depth`` linear
            layers of ``width``: 3 is 784-width-width-K), ``"conv"``
            (:class:`~collapselab.experiments.dlufm.networks.SmallConvNet` with
            ``channels`` and a ``width``-unit hidden layer) or ``"vgg11"``
            (:func:`~collapselab.models.vgg11` with BatchNorm, Papyan's network for
            Fashion-MNIST; width, depth and channels unused).
        loss: ``"ce"`` or ``"mse"``; ``centring`` (Papyan's decomposition) and
            ``fraction_k`` (f_top's top eigenspace, ``"K"`` or ``"K^2"``) follow it
            (:data:`NETWORK_LOSSES`, :meth:`with_loss`).
        epochs, lr, milestones, momentum, weight_decay, batch_size: SGD with the rate
            divided by 10 after each milestone epoch (a batch of the whole training set:
            full-batch gradient descent).
        curvature_epochs: the epochs at which the curvature family measures (0: the
            initial network); ``curvature_samples`` the fixed balanced subset of training
            images it reads, ``curvature_batch_size`` its batches, ``curvature_layers`` the
            weight layers it measures (``None``: every one), ``curvature_keys`` what it
            computes (``None``: every key), ``tol`` its Lanczos tolerance and
            ``density_steps`` its spectral-density steps (0: none).
        nc_every: NC1 measured every that many epochs as well (``None``: at the curvature
            epochs only).
        cpu_threads: torch's threads during training (1: on a shared 2-core machine one
            thread is faster for these small networks; ``None``: torch's default).
        checkpoint_every: epochs between checkpoints (a killed run resumes from one).
    """

    data: DataSpec
    net: Literal["mlp", "conv", "vgg11"]
    width: int = 64
    depth: int = 3
    channels: tuple[int, int] = (8, 16)
    loss: Literal["ce", "mse"]
    centring: Literal["logit", "class"]
    fraction_k: Literal["K", "K^2"]
    epochs: int
    lr: float
    milestones: tuple[int, ...]
    momentum: float = 0.9
    weight_decay: float = 5e-4
    batch_size: int = 64
    curvature_epochs: tuple[int, ...]
    curvature_samples: int
    curvature_layers: tuple[str, ...] | None = None
    curvature_batch_size: int = 250
    curvature_keys: tuple[str, ...] | None = None
    tol: float = 1e-3
    density_steps: int = 40
    nc_every: int | None = None
    cpu_threads: int | None = 1
    checkpoint_every: int = 1

    def with_loss(self: N, loss: str, **changes: Any) -> N:
        """The same run with ``loss`` (its centring and f_top space,
        :data:`NETWORK_LOSSES`) and ``changes``."""
        return self.replace(loss=loss, **NETWORK_LOSSES[loss], **changes)


TINY_KEYS = (
    "hessian_top_eigenvalue",
    "hessian_outliers",
    "ggn_top_eigenvalue",
    "ggn_outliers",
    "gradient_fraction_top",
    "papyan_within_top",
    "papyan_class_cross_overlap",
    "ggn_outliers_without_class",
    "ggn_outliers_without_cross",
    "kronecker_alignment_mean",
    "weight_outliers",
)
"""The keys the claims read (the tiny preset computes only these)."""


def _quick_data(flatten: bool) -> DataSpec:
    """The quick preset's Fashion-MNIST and its fallback, the same class ids of
    scikit-learn's digits (all 170 images per class the smallest class allows; flat for
    the MLP, 1 x 8 x 8 images for the conv net)."""
    return DataSpec(
        "fashion_mnist",
        {"classes": QUICK_CLASSES, "n_train_per_class": 300, "n_test_per_class": 60},
        fallback=DataSpec(
            "digits", {"n_per_class": 170, "flatten": flatten}, steps=(KeepClasses(QUICK_CLASSES),)
        ),
    )


_QUICK_MLP = NetworkPreset(
    data=_quick_data(flatten=True),
    net="mlp",
    loss="ce",
    **NETWORK_LOSSES["ce"],
    epochs=40,
    lr=0.05,
    milestones=(20, 30),
    curvature_epochs=(0, 4, 40),
    curvature_samples=200,
    # every weight layer but the input one (whose 784 x 64 or conv-1 weights cost most and
    # are not the subject of the claims)
    curvature_layers=("layers.1.linear", "classifier"),
)
_QUICK_CONV = _QUICK_MLP.replace(
    data=_quick_data(flatten=False), net="conv", curvature_layers=("conv2", "fc", "classifier")
)

_TINY_MLP = _QUICK_MLP.replace(
    data=DataSpec("digits", {"n_per_class": 12, "flatten": True}, steps=(KeepClasses((0, 1, 2)),)),
    width=8,
    channels=(2, 3),
    epochs=3,
    milestones=(1, 2),
    batch_size=12,
    curvature_epochs=(0, 3),
    curvature_samples=30,
    curvature_keys=TINY_KEYS,
    density_steps=0,
    tol=1e-2,
)
_TINY_CONV = _TINY_MLP.replace(
    data=DataSpec("digits", {"n_per_class": 12, "flatten": False}, steps=(KeepClasses((0, 1, 2)),)),
    net="conv",
    curvature_layers=("fc", "classifier"),
)

FULL_BATCH_EPOCHS = 20_000
"""Steps of full-batch gradient descent of the standard MLPs (one step per epoch)."""

_STANDARD_CONV = _QUICK_CONV.replace(
    data=DataSpec(
        "fashion_mnist",
        {"classes": STANDARD_CLASSES, "n_train_per_class": 100, "n_test_per_class": 100},
    ),
    epochs=450,
    milestones=(150, 300),  # Papyan's and Han et al.'s 1/3 and 2/3
    curvature_epochs=(0, 150, 450),
    curvature_samples=300,
    curvature_layers=("fc", "classifier"),  # the two layers the claims read
    nc_every=5,
)
_STANDARD_MLP = _STANDARD_CONV.replace(
    net="mlp",
    width=128,
    depth=5,  # 784-128-128-128-128-K: the layer before the classifier, layers.3.linear,
    # has 16,384 weights
    # full-batch gradient descent: paper 004's procedure (the deep UFM is trained by
    # full-batch gradient descent, note 004 §5.1); in the pilots (docs/curvature.md) it took
    # both MLPs deeper into the terminal phase than SGD with batches (NC1 ratio 0.003
    # against 0.15 under MSE; 0.49 against 0.79 under CE, where SGD never met the
    # criterion); the conv nets cost about ten times as much per step, too much for the
    # hour at 20,000 steps, and keep SGD
    batch_size=100 * len(STANDARD_CLASSES),
    epochs=FULL_BATCH_EPOCHS,
    milestones=(),
    curvature_epochs=(0, FULL_BATCH_EPOCHS // 3, FULL_BATCH_EPOCHS),
    curvature_layers=("layers.3.linear", "classifier"),
    nc_every=100,
    checkpoint_every=1000,  # a checkpoint per step would cost more than the step
)

PAPER_LR = {"ce": 0.0679, "mse": 0.0184}
"""Han et al.'s (paper 003) tuned rates for MNIST with ResNet-18, points 20 (CE) and 16 (MSE)
of their 25-point log grid from 1e-4 to 0.25 (note 003); paper 004 trains no real network."""

_PAPER_MLP = _STANDARD_MLP.replace(
    data=DataSpec("fashion_mnist"),  # every training and test image
    width=512,
    epochs=350,
    lr=PAPER_LR["ce"],
    milestones=(116, 233),  # 350 // 3, 2 * 350 // 3
    batch_size=128,
    curvature_epochs=(0, 116, 350),
    curvature_samples=1000,
    nc_every=5,
    cpu_threads=None,  # a GPU run: no single-thread CPU setting
    checkpoint_every=1,
)
"""The training protocol of Papyan, Han & Donoho and of Han et al. (paper 003; note 003),
the one the curvature claims' sources train with, on all of Fashion-MNIST, for a GPU: SGD
with momentum 0.9, weight decay 5e-4 on every parameter, batches of 128, 350 epochs, the
rate divided by 10 after epochs 116 and 233, ``nn.MSELoss()`` for MSE; curvature of the two
layers the claims read on 1000 training images (100 per class) at epochs 0, 116 and 350;
NC1 every 5 epochs. Its dry run builds the data and network from local files."""
PAPYAN_FASHION = DataSpec("fashion_mnist", steps=(Pad(32), StandardizeChannels()))
"""All of Fashion-MNIST as Papyan, Han & Donoho prepared it (note 003, [PNAS]): zero-padded
from 28 x 28 to 32 x 32, every channel standardised with the training split's mean and
standard deviation, no augmentation."""

_PAPER_CONV = _PAPER_MLP.replace(
    data=PAPYAN_FASHION,
    net="vgg11",
    # the classifier and the layer before it, VGG-11's last convolution (512 x 512 x 3 x 3)
    curvature_layers=("features.25", "classifier"),
)
"""The conv networks' ``paper`` preset: Papyan's own experiment for the cross-entropy
curvature claims, VGG-11 (BatchNorm, :func:`~collapselab.models.vgg11`) on all of
Fashion-MNIST padded to 32 x 32, the network Papyan, Han & Donoho and Papyan (2020) train on
it, with :data:`_PAPER_MLP`'s protocol (SGD, momentum 0.9, weight decay 5e-4, batches of 128,
350 epochs, the rate divided by 10 after epochs 116 and 233; CE at 0.0679, MSE at 0.0184,
the tuned rates of note 003). The protocol is note 003's digest of Papyan, Han & Donoho
(PNAS 2020), which it marks partly unverified; Papyan (2020)'s own text is not among the
project's papers, so that it trains the same way is this preset's assumption. Before issue
35 item 5 it trained the two-convolution net at 32 and 64 channels."""

NETWORKS: dict[tuple[str, str], dict[str, NetworkPreset]] = {
    ("mlp", "ce"): tiers(tiny=_TINY_MLP, quick=_QUICK_MLP, standard=_STANDARD_MLP,
                         paper=_PAPER_MLP),
    ("mlp", "mse"): tiers(
        tiny=_TINY_MLP.with_loss("mse", lr=0.1),
        quick=_QUICK_MLP.with_loss("mse", lr=0.1),
        standard=_STANDARD_MLP.with_loss("mse"),
        paper=_PAPER_MLP.with_loss("mse", lr=PAPER_LR["mse"]),
    ),
    ("conv", "ce"): tiers(tiny=_TINY_CONV, quick=_QUICK_CONV, standard=_STANDARD_CONV,
                          paper=_PAPER_CONV),
    ("conv", "mse"): tiers(
        tiny=_TINY_CONV.with_loss("mse", lr=0.1),
        quick=_QUICK_CONV.with_loss("mse", lr=0.1),
        # Papyan's SGD for CE; for MSE (nn.MSELoss(), the mean over the K outputs) the same
        # weight decay at lr 0.05 with batches of 16, with which the pilots' MSE networks
        # entered the terminal phase (at lr 0.1 the MLP's NC1 fell less after zero error or
        # it did not interpolate)
        standard=_STANDARD_CONV.with_loss("mse", batch_size=16),
        paper=_PAPER_CONV.with_loss("mse", lr=PAPER_LR["mse"]),
    ),
}  # fmt: skip
"""``curvature-<net>-<loss>``: the tiers of each network and loss (module docstring)."""
