"""Presets of the curvature experiments: plain data (JSON-serialisable).

``quick`` (minutes on a 2-core CPU): five easily told apart Fashion-MNIST classes
(T-shirt/top, trouser, dress, sandal, bag: ``K = 5``, so ``K² = 25`` predicted outliers),
300 training images per class, a 784-64-64-K MLP or a two-convolution net, 40 epochs of
SGD with momentum 0.9 and weight decay 5e-4. The curvature family measures every weight
layer but the input one on a fixed balanced subset of 200 training images at epochs 0, 4
and 40. Fashion-MNIST is
read from ``--data-dir`` or, when not given, from Debian's ``dataset-fashion-mnist``
location (``/usr/share/datasets/fashion-mnist``), as :func:`collapselab.data.load_dataset`
finds it. Without the files the quick preset falls back to ``quick-bundled``: the same run on
scikit-learn's bundled 8x8 digits (the same five class ids); the run records which data it
used (manifest ``data``).

``standard``: three Fashion-MNIST classes (T-shirt/top, trouser, dress: the first three
of the quick preset's, ``K = 3``, paper 004's own ``K``, so ``K² = 9`` predicted outliers),
100 training images per class; a 784-128-128-128-128-K MLP or the two-convolution net;
momentum 0.9 and weight decay 5e-4 throughout. The **MLPs** train by full-batch gradient
descent (all 300 images per step) at a constant lr 0.05 for 20,000 steps, paper 004's
procedure, NC1 every 100 steps, curvature at steps 0, 6,666 and 20,000. The **conv nets**
train by SGD for 450 epochs, the rate divided by 10 after epochs 150 and 300 (Papyan's and
Han et al.'s 1/3 and 2/3), CE with Papyan's lr 0.05 and batches of 64, MSE with lr 0.05
and batches of 16, NC1 every 5 epochs, curvature at epochs 0, 150 and 450. Curvature of
the classifier and the layer before it on all 300 training images (``2K² + K = 21``
eigenpairs per spectrum). Chosen by the terminal-phase criterion of
:mod:`~collapselab.experiments.curvature.terminal` in pilots (docs/curvature.md, which
says whose claim counts were read before the choice):
with all ten classes no network met it; with these three classes both MSE networks do
under SGD (ratios 0.17 and 0.26; with 300 images per class neither reaches zero training
error or a falling NC1) and the CE networks do not (0.79 and 1.02); full-batch gradient
descent takes both MLPs deeper (MSE 0.003 against 0.15, CE 0.49: met), and costs the
conv nets about ten times as much per step, too much for the hour. No stand-in data: it
needs the Fashion-MNIST files.

``paper`` (:func:`paper`, for a GPU, not run here): all of Fashion-MNIST with the training
protocol of Papyan, Han & Donoho and Han et al. (note 003: 350 epochs, batches of 128,
weight decay 5e-4, decays after epochs 116 and 233), wider networks; checked by its dry run
on local files.

``tiny`` is the test-suite's: seconds, every claim evaluable.
"""

from __future__ import annotations

from typing import Any

QUICK_CLASSES = [0, 1, 3, 5, 8]
STANDARD_CLASSES = QUICK_CLASSES[:3]
"""T-shirt/top, trouser, dress: ``K = 3`` as in paper 004's experiments (note 004 §2)."""

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

_SGD = {"momentum": 0.9, "weight_decay": 5e-4, "batch_size": 64}


_QUICK_LAYERS = {"mlp": ["layers.1.linear", "classifier"], "conv": ["conv2", "fc", "classifier"]}
_STANDARD_LAYERS = {"mlp": ["layers.1.linear", "classifier"], "conv": ["fc", "classifier"]}
"""Weight layers measured at the quick preset: all but the input layer (whose 784 x 64 or
conv-1 weights cost most and are not the subject of the claims); ``None``: every layer.
The standard and paper presets measure the two layers the claims read."""


def _preset(
    net: str,
    loss: str,
    *,
    classes: list[int] | None,
    n_per_class: int,
    epochs: int,
    lr: float,
    curvature_epochs: list[int],
    samples: int,
    layers: list[str] | None = None,
    milestones: list[int] | None = None,
) -> dict[str, Any]:
    return {
        "dataset": "fashion_mnist",
        "classes": classes,
        "n_train_per_class": n_per_class,
        "n_test_per_class": max(n_per_class // 5, 10),
        "net": net,
        "width": 64,
        "channels": [8, 16],
        "loss": loss,
        "epochs": epochs,
        "lr": lr,
        "milestones": milestones or [epochs // 2, (3 * epochs) // 4],
        **_SGD,
        "curvature_epochs": curvature_epochs,
        "curvature_samples": samples,
        "curvature_layers": layers,
        "curvature_batch_size": 250,
        # CE: Papyan's class part in the class centring (the logit centring vanishes for CE)
        "centring": "logit" if loss == "mse" else "class",
        # f_top's top eigenspace: Theorem 4.1's K² outliers for MSE (paper 004 Thm 4.3,
        # App. C, note M14); the top K for CE (Gur-Ari et al., who observed it with CE)
        "fraction_k": "K^2" if loss == "mse" else "K",
        "tol": 1e-3,
        "curvature_keys": None,  # every key of the family
        "density_steps": 40,
        "cpu_threads": 1,  # small networks: one thread is faster on a shared 2-core machine
        "checkpoint_every": 1,  # epochs between checkpoints (a killed run resumes from one)
    }


_DIGITS = {"dataset": "digits", "n_per_class": 170}

STANDARD_EPOCHS = 450
STANDARD_MLP = {"width": 128, "depth": 5}
"""The standard MLP: 784-128-128-128-128-K (its layer before the classifier is
``layers.3.linear``, 16,384 weights)."""

_STANDARD_SGD = {
    "ce": {"lr": 0.05, "weight_decay": 5e-4, "batch_size": 64},
    "mse": {"lr": 0.05, "weight_decay": 5e-4, "batch_size": 16},
}
"""Per loss, the conv nets' SGD (the MLPs descend full batch, :func:`_full_batch`): Papyan's
(momentum 0.9, weight decay 5e-4) for cross-entropy; for MSE
(``nn.MSELoss()``, the mean over the K outputs) the same weight decay at lr 0.05 with
batches of 16, with which the pilots' MSE networks entered the terminal phase (module
docstring; at lr 0.1 the MLP's NC1 fell less after zero error or it did not interpolate)."""


FULL_BATCH_EPOCHS = 20_000
"""Steps of full-batch gradient descent of the standard MLPs (one step per epoch)."""


def _full_batch(n_train: int) -> dict[str, Any]:
    """Full-batch gradient descent with heavy-ball momentum 0.9 at a constant lr 0.05 and
    weight decay 5e-4 for :data:`FULL_BATCH_EPOCHS` steps: paper 004's procedure (the deep
    UFM is trained by full-batch gradient descent, note 004 §5.1) on the standard MLPs. In
    the pilots (docs/curvature.md) it took both MLPs deeper into the terminal phase than
    SGD with batches (NC1 ratio 0.003 against 0.15 under MSE; 0.49 against 0.79 under CE,
    where SGD never met the criterion); the conv nets cost about ten times as much per step,
    too much for the hour at 20,000 steps, and keep SGD."""
    E = FULL_BATCH_EPOCHS
    return {
        "batch_size": n_train,
        "lr": 0.05,
        "weight_decay": 5e-4,
        "epochs": E,
        "milestones": [],
        "curvature_epochs": [0, E // 3, E],
        "nc_every": 100,
        "checkpoint_every": 1000,  # a checkpoint per step would cost more than the step
    }


def standard(net: str, loss: str) -> dict[str, Any]:
    """The ``standard`` preset of one (network, loss) experiment (module docstring)."""
    E = STANDARD_EPOCHS
    layers = ["layers.3.linear", "classifier"] if net == "mlp" else _STANDARD_LAYERS["conv"]
    config = _preset(
        net,
        loss,
        classes=STANDARD_CLASSES,
        n_per_class=100,
        epochs=E,
        lr=_STANDARD_SGD[loss]["lr"],
        curvature_epochs=[0, E // 3, E],
        samples=300,
        layers=layers,
        milestones=[E // 3, (2 * E) // 3],  # Papyan's and Han et al.'s 1/3 and 2/3
    )
    config.update(_STANDARD_SGD[loss], n_test_per_class=100, nc_every=5)
    if net == "mlp":
        config.update(STANDARD_MLP, **_full_batch(100 * len(STANDARD_CLASSES)))
    return config


PAPER_EPOCHS = 350
PAPER_LR = {"ce": 0.0679, "mse": 0.0184}
"""Han et al.'s (paper 003) tuned rates for MNIST with ResNet-18, points 20 (CE) and 16 (MSE)
of their 25-point log grid from 1e-4 to 0.25 (note 003); paper 004 trains no real network."""

PAPER_NETWORKS = {"mlp": {"width": 512, "depth": 5}, "conv": {"width": 512, "channels": [32, 64]}}
"""The paper preset's networks: the standard MLP at width 512, the conv net with 32 and 64
channels and a 512-unit hidden layer."""


def paper(net: str, loss: str) -> dict[str, Any]:
    """The ``paper`` preset of one (network, loss) experiment: the training protocol of
    Papyan, Han & Donoho and of Han et al. (paper 003; note 003), the one the curvature
    claims' sources train with, on all of Fashion-MNIST, for a GPU. SGD with momentum 0.9,
    weight decay 5e-4 on every parameter, batches of 128, 350 epochs, the rate divided by 10
    after epochs 116 and 233 (``350 // 3``, ``2 * 350 // 3``), ``nn.MSELoss()`` for MSE.
    Curvature of the two layers the claims read on 1000 training images (100 per class) at
    epochs 0, 116 and 350; NC1 every 5 epochs. Not run here (no GPU); its dry run builds the
    data and networks from local files."""
    E = PAPER_EPOCHS
    config = _preset(
        net,
        loss,
        classes=None,
        n_per_class=6000,
        epochs=E,
        lr=PAPER_LR[loss],
        curvature_epochs=[0, E // 3, E],
        samples=1000,
        layers=["layers.3.linear", "classifier"] if net == "mlp" else _STANDARD_LAYERS["conv"],
        milestones=[E // 3, (2 * E) // 3],
    )
    config.update(
        PAPER_NETWORKS[net],
        n_train_per_class=None,  # every training image
        n_test_per_class=None,  # and every test image
        weight_decay=5e-4,
        batch_size=128,
        nc_every=5,
        cpu_threads=None,  # a GPU run: no single-thread CPU setting
    )
    return config


def presets(net: str, loss: str) -> dict[str, dict[str, Any]]:
    """The ``quick``, ``quick-bundled``, ``standard``, ``paper`` and ``tiny`` presets of one
    (network, loss) experiment."""
    lr = 0.05 if loss == "ce" else 0.1
    quick = _preset(
        net,
        loss,
        classes=QUICK_CLASSES,
        n_per_class=300,
        epochs=40,
        lr=lr,
        curvature_epochs=[0, 4, 40],
        samples=200,
        layers=_QUICK_LAYERS[net],
    )
    return {
        "quick": quick,
        "quick-bundled": {**quick, **_DIGITS},
        "standard": standard(net, loss),
        "paper": paper(net, loss),
        "tiny": {
            **_preset(
                net,
                loss,
                classes=[0, 1, 2],
                n_per_class=12,
                epochs=3,
                lr=lr,
                curvature_epochs=[0, 3],
                samples=30,
            ),
            "dataset": "digits",
            "width": 8,
            "channels": [2, 3],
            "batch_size": 12,
            "curvature_layers": {
                "mlp": ["layers.1.linear", "classifier"],
                "conv": ["fc", "classifier"],
            }[net],
            "curvature_keys": list(TINY_KEYS),
            "density_steps": 0,
            "tol": 1e-2,
        },
    }
