"""Presets of paper 000's experiments, as plain data (note 000 §5, §6 "CPU feasibility").

The paper trains 9-layer, 512-wide bias-free ReLU MLPs with SGD (η = 0.1, batch 100) on
CIFAR-10 (MNIST at η = 0.01, Tiny-ImageNet), for thousands of iterations. On a 2-core CPU the
``quick`` preset keeps the depth (9 linear layers) and the optimiser and scales the rest:

* width 128 instead of 512, 5000 training samples, a few hundred iterations;
* generated clustered data (10 classes of 4 Gaussian clusters in 64 dimensions, means on a
  sphere of radius 3; the note's pilot used the same kind of data) for the baseline's second
  dataset and for every sweep;
* Fashion-MNIST (local files; ``quick-bundled`` falls back to scikit-learn's digits) for
  the baseline's image dataset, with the init's variance scaled by γ = 0.3: at width 128
  and γ = 1 a 9-layer MLP on Fashion-MNIST has no measurable plateau (measured: the loss on
  1000 training samples is 1.5 after 40 steps), at γ = 0.3 it has one of about 600 steps;
  on digits (1700 images) γ = 0.5 gives a plateau of about 280 steps (γ = 1: 20 steps,
  γ = 0.3: no drop in 900).

Measurement (every preset): every 10 iterations, densely (every 2) in a window of ±20
iterations around the detected M2 peak (replayed, :mod:`.measurement`), on a probe set of 20
samples per class; loss and accuracy on that probe set, from the Monitor's own forward pass
(``loss_per_class: 0``; a separate subset of 100 per class costs one more forward pass of
1,000 samples per measurement, 29% of the ten training steps between two measurements at
width 512, benchmarks/README.md; the ``tiny`` preset keeps one so that path stays tested);
the boundary read
on the third linear layer's output (the paper's "third linear layer", A.1); the plateau ends
when the loss is 5% below its initial value.

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
of iterations: a GPU job); ``tiny`` is the test suite's.
"""

from __future__ import annotations

from typing import Any

MEASUREMENT: dict[str, Any] = {
    "every": 10,
    "dense_every": 2,
    "half_window": 20,
    "probe_per_class": 20,
    "loss_per_class": 0,
    "phase_layer": 3,
    "smooth": 3,
    "loss_drop": 0.05,
}

MODEL: dict[str, Any] = {
    "depth": 9,
    "width": 128,
    "activation": "relu",
    "negative_slope": 0.01,
    "norm": "none",
    "gamma": 1.0,
    "lr": 0.1,
    "momentum": 0.0,
    "l2": 0.0,
    "batch_size": 100,
}

CLUSTERED: dict[str, Any] = {
    "dataset": "clustered",
    "dim": 64,
    "clusters": 4,
    "mean_scale": 3.0,
    "n_per_class": 500,
}

_QUICK_BASE = {**MODEL, **MEASUREMENT, **CLUSTERED, "iterations": 600}
_FMNIST = {"dataset": "fashion_mnist", "n_per_class": 500, "gamma": 0.3, "iterations": 900}
_DIGITS = {"dataset": "digits", "n_per_class": 170, "gamma": 0.5, "iterations": 600}

_PAPER_MLP = {"depth": 9, "width": 512}
"""The paper's MLP: 9 linear layers, 512 wide (§3's CIFAR-10 example, A.11-A.13, Table 1)."""

_STANDARD_BASE = {**_QUICK_BASE, **_FMNIST, **_PAPER_MLP, "n_per_class": None, "iterations": 2000}
"""``standard``'s sweep base: the paper's 9 × 512 MLP on the whole Fashion-MNIST training
set (``n_per_class`` None), γ = 0.3, 2,000 iterations (module docstring)."""

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

_TINY_IMAGENET = {
    "dataset": "tiny_imagenet",
    "class_names": list(TINY_IMAGENET_CLASSES),
    "crop": 32,
    "n_per_class": None,
}
"""The paper's Tiny-ImageNet arm (A.3: 50 classes, 32 x 32 crops, η = 0.1; the paper crops
at random for training, this is the central crop: fd trains without augmentation)."""

TWO_PHASE: dict[str, dict[str, Any]] = {
    "quick": {
        "dataset": "fashion_mnist",
        "base": _QUICK_BASE,
        "arms": {"fashion_mnist": _FMNIST, "clustered": {}},
    },
    "quick-bundled": {
        "dataset": "digits",
        "base": _QUICK_BASE,
        "arms": {"digits": _DIGITS, "clustered": {}},
    },
    "standard": {
        "dataset": "fashion_mnist",
        "base": {**_QUICK_BASE, **_PAPER_MLP, "n_per_class": 1000, "iterations": 3000},
        "arms": {
            "fashion_mnist": {**_FMNIST, "n_per_class": None, "iterations": 3000},
            "clustered": {},
        },
    },
    "paper": {
        "dataset": "cifar10",
        "base": {**MODEL, **MEASUREMENT, "width": 512, "iterations": 5000},
        "arms": {
            "cifar10": {"dataset": "cifar10", "n_per_class": None},
            "mnist": {"dataset": "mnist", "n_per_class": None, "lr": 0.01},
            "tiny_imagenet": _TINY_IMAGENET,
        },
    },
    "tiny": {
        "base": {
            **MODEL,
            **MEASUREMENT,
            **CLUSTERED,
            "depth": 8,
            "width": 48,
            "dim": 32,
            "n_per_class": 60,
            "batch_size": 50,
            "iterations": 300,
            "probe_per_class": 6,
            "loss_per_class": 30,
            "half_window": 10,
        },
        "arms": {"clustered": {}},
    },
}
"""``fd-two-phase``: the baseline on an image dataset and on generated clustered data."""


def _groups(groups: dict[str, list[tuple[Any, str]]]) -> dict[str, list[list[Any]]]:
    return {name: [[value, arm] for value, arm in pairs] for name, pairs in groups.items()}


OPERATION_ARMS: dict[str, dict[str, Any]] = {
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
"""The arms of ``fd-operations`` (changes to the base config); ``baseline`` is shared by
every group (no normalisation, m = 0, γ = 1, λ = 0)."""

OPERATION_GROUPS = _groups(
    {
        "normalisation": [
            ("none", "baseline"),
            ("batchnorm", "norm-batchnorm"),
            ("norm1", "norm-norm1"),
        ],
        "momentum": [(0.0, "baseline"), (0.5, "momentum-0.5"), (0.9, "momentum-0.9")],
        "momentum_equal_lr": [
            (0.0, "baseline"),
            (0.5, "momentum-0.5-lr-0.05"),
            (0.9, "momentum-0.9-lr-0.01"),
        ],
        "gamma": [(0.1, "gamma-0.1"), (0.5, "gamma-0.5"), (1.0, "baseline"), (2.0, "gamma-2")],
        "l2": [(0.0, "baseline"), (1e-4, "l2-0.0001"), (1e-3, "l2-0.001"), (1e-2, "l2-0.01")],
        "stuck": [(0.1, "gamma-0.1"), (1.0, "baseline")],
    }
)
"""Which arm each swept value ran as. ``momentum_equal_lr`` is the control of note A19:
η(m) = 0.1 (1 - m), so that the effective step η/(1 - m) stays 0.1."""

_TINY_BASE = TWO_PHASE["tiny"]["base"]

OPERATIONS: dict[str, dict[str, Any]] = {
    "quick": {"base": _QUICK_BASE, "arms": OPERATION_ARMS, "groups": OPERATION_GROUPS},
    "standard": {
        "dataset": "fashion_mnist",
        "base": _STANDARD_BASE,
        "arms": {
            **OPERATION_ARMS,
            "gamma-0.1": {"gamma": 0.03},
            "gamma-0.5": {"gamma": 0.1},
            "gamma-2": {"gamma": 1.0},
        },
        "repeat": {"groups": ["momentum_equal_lr", "l2"], "seeds": 3},
        "groups": _groups(
            {
                **{k: [tuple(p) for p in v] for k, v in OPERATION_GROUPS.items()},
                "gamma": [
                    (0.03, "gamma-0.1"),
                    (0.1, "gamma-0.5"),
                    (0.3, "baseline"),
                    (1.0, "gamma-2"),
                ],
                "stuck": [(0.03, "gamma-0.1"), (0.3, "baseline")],
            }
        ),
    },
    "paper": {
        "dataset": "cifar10",
        "base": {**TWO_PHASE["paper"]["base"], "dataset": "cifar10", "n_per_class": None},
        "arms": OPERATION_ARMS,
        "groups": OPERATION_GROUPS,
    },
    "tiny": {
        "base": {**_TINY_BASE, "iterations": 200},
        "arms": {
            "baseline": {},
            "norm-norm1": {"norm": "norm1"},
            "momentum-0.9": {"momentum": 0.9},
            "gamma-0.1": {"gamma": 0.1},
        },
        "groups": _groups(
            {
                "normalisation": [("none", "baseline"), ("norm1", "norm-norm1")],
                "momentum": [(0.0, "baseline"), (0.9, "momentum-0.9")],
                "stuck": [(0.1, "gamma-0.1"), (1.0, "baseline")],
            }
        ),
    },
}
"""``fd-operations``: the four operations and stuck vs unstuck (§5, Fig. 8, S-Fig. 24,
28-29), on clustered data at ``quick``. At ``standard`` (the paper's 9 × 512 MLP on
Fashion-MNIST, whose baseline uses γ = 0.3; the paper's A.12-A.13 used 7- and 9-layer, 512-wide
MLPs) the γ arms are scaled by 0.3 too (0.03, 0.1, 0.3, 1; the arm names keep the quick
preset's), and the arms of the equal-effective-step momentum control and of the L2 sweep are
trained with three seeds (``repeat``: their differences were a few percent at the earlier
standard scale), compared as medians."""

ROBUSTNESS_ARMS: dict[str, dict[str, Any]] = {
    "baseline": {},
    "depth-5": {"depth": 5},
    "depth-7": {"depth": 7},
    "width-64": {"width": 64},
    "width-256": {"width": 256},
    "lr-0.01": {"lr": 0.01, "iterations": 3000, "every": 50, "dense_every": 10, "half_window": 100},
    "batch-500": {"batch_size": 500},
    "batch-1000": {"batch_size": 1000},
    "leaky-0.1": {"activation": "leaky_relu", "negative_slope": 0.1},
    "leaky-0.01": {"activation": "leaky_relu", "negative_slope": 0.01},
}
"""The arms of ``fd-robustness``. At η = 0.01 the budget is 5× the iterations (the plateau
scales with 1/η), measured every 50 (every 10 in the window)."""

ROBUSTNESS_GROUPS = _groups(
    {
        "depth": [(5, "depth-5"), (7, "depth-7"), (9, "baseline")],
        "width": [(64, "width-64"), (128, "baseline"), (256, "width-256")],
        "learning_rate": [(0.1, "baseline"), (0.01, "lr-0.01")],
        "batch_size": [(100, "baseline"), (500, "batch-500"), (1000, "batch-1000")],
        "activation": [
            ("relu", "baseline"),
            ("leaky_relu 0.1", "leaky-0.1"),
            ("leaky_relu 0.01", "leaky-0.01"),
        ],
    }
)

_SMALL_MLP = {"depth": 7, "width": 256}
"""The 7-layer, 256-wide MLPs of the paper's batch-size and learning-rate sweeps (A.9, A.10)."""

ROBUSTNESS: dict[str, dict[str, Any]] = {
    "quick": {"base": _QUICK_BASE, "arms": ROBUSTNESS_ARMS, "groups": ROBUSTNESS_GROUPS},
    "standard": {
        "dataset": "fashion_mnist",
        "base": _STANDARD_BASE,
        "arms": {
            "baseline": {},
            "depth-5": {"depth": 5},
            "depth-7": {"depth": 7},
            "width-128": {"width": 128},
            "width-256": {"width": 256},
            "leaky-0.1": ROBUSTNESS_ARMS["leaky-0.1"],
            "leaky-0.01": ROBUSTNESS_ARMS["leaky-0.01"],
            "7x256": _SMALL_MLP,
            "7x256-batch-500": {**_SMALL_MLP, "batch_size": 500},
            "7x256-batch-1000": {**_SMALL_MLP, "batch_size": 1000},
            "7x256-lr-0.01": {**_SMALL_MLP, **ROBUSTNESS_ARMS["lr-0.01"], "iterations": 6000},
        },
        "groups": _groups(
            {
                "depth": [(5, "depth-5"), (7, "depth-7"), (9, "baseline")],
                "width": [(128, "width-128"), (256, "width-256"), (512, "baseline")],
                "learning_rate": [(0.1, "7x256"), (0.01, "7x256-lr-0.01")],
                "batch_size": [
                    (100, "7x256"),
                    (500, "7x256-batch-500"),
                    (1000, "7x256-batch-1000"),
                ],
                "activation": ROBUSTNESS_GROUPS["activation"],
            }
        ),
    },
    "paper": {
        "dataset": "cifar10",
        "base": {**TWO_PHASE["paper"]["base"], "dataset": "cifar10", "n_per_class": None},
        "arms": ROBUSTNESS_ARMS,
        "groups": ROBUSTNESS_GROUPS,
    },
    "tiny": {
        "base": {**_TINY_BASE, "iterations": 200},
        "arms": {"baseline": {}, "leaky-0.1": {"activation": "leaky_relu", "negative_slope": 0.1}},
        "groups": _groups({"activation": [("relu", "baseline"), ("leaky_relu 0.1", "leaky-0.1")]}),
    },
}
"""``fd-robustness``: the phenomenon across depth, width, learning rate, batch size and
activation (Appendix A.9-A.11, note §6.9). At ``standard``: depth 5, 7, 9 and width 128,
256, 512 around the paper's 9 × 512 MLP (the paper's range: depths 4-9, widths 32-512),
the activations on it (A.11: 9-layer, 512-wide MLPs), and the batch sizes and learning
rates on a 7-layer, 256-wide MLP (A.9, A.10)."""


_DIRECTIONS = {
    "analysis_layer": 3,
    "table_layers": [2, 3, 4, 5, 6],
    "captures": 20,
    "top_k": 5,
    "n_noise": 3,
}

DIRECTIONS: dict[str, dict[str, Any]] = {
    "quick": {"base": _QUICK_BASE, **_DIRECTIONS},
    "standard": {
        "dataset": "fashion_mnist",
        **_DIRECTIONS,
        "captures": 30,
        "base": _STANDARD_BASE,
    },
    "paper": {
        "dataset": "cifar10",
        **_DIRECTIONS,
        "captures": 40,
        "base": {**TWO_PHASE["paper"]["base"], "dataset": "cifar10", "n_per_class": None},
    },
    "tiny": {
        "base": {**_TINY_BASE, "probe_per_class": 4},
        **_DIRECTIONS,
        "captures": 5,
        "table_layers": [2, 3],
    },
}
"""``fd-directions``: the common-direction analysis of Figs 4-7 and Table 1 over the
detected phase 1 of the baseline (clustered data at ``quick``; the paper: 9-layer, 512-wide
MLPs on CIFAR-10, Tiny-ImageNet and MNIST, layers 2-6)."""
