"""Presets of paper 004's experiments, as plain data (note 004 §5).

The paper's text lost every hyper-parameter (note §0, §5.1): K = 3 classes and the third
layer are all it keeps. The configurations here are the note's verified defaults (§5.2):

* linear, configuration A: ``K = 3, n = 10, d = 10, L = 4, λ_W = λ_H = 5e-3``, layer 3,
  ``W_l ~ N(0, 0.25/d)``, ``H_1 ~ N(0, 0.25)``, full-batch gradient descent at ``lr = 0.5``;
* linear, configuration B (unequal λ, K = 4): ``n = 5, d = 8, L = 3``,
  ``λ_W = (2e-3, 5e-3, 1e-2)``, ``λ_H = 3e-3``, ``lr = 0.3``;
* ReLU: ``K = 3, n = 10, L = 5, λ = 5e-3``, layer ``L − 1 = 4``, ``W_l ~ N(0, 1/d)``,
  ``H_1 ~ N(0, 1)``, ``lr = 0.3``, swept over widths and seeds (the symmetric solution
  appears at the larger width; at d = 10 some seeds end lower-rank, note §5.2).

``quick`` fits a 2-core CPU in minutes, ``standard`` runs the same models longer (more
steps, checkpoints, seeds and widths: the scale at which the claims are meant to hold),
``paper`` is the scale the paper's figures suggest (every problem is small: it needs no
GPU), ``tiny`` is the test suite's.
"""

from __future__ import annotations

from typing import Any

from collapselab.experiments.curvature.presets import STANDARD_CLASSES

_CONFIG_A = {
    "n_classes": 3,
    "n_per_class": 10,
    "width": 10,
    "n_layers": 4,
    "lambda_w": 5e-3,
    "lambda_h": 5e-3,
    "layer": 3,
    "lr": 0.5,
    "w_scale": 0.5,
    "h_scale": 0.5,
}
_TINY_LINEAR = {
    "n_classes": 3,
    "n_per_class": 3,
    # 5, not 4: the analysed layer's Hessian has P = width² entries and K² = 9 outliers,
    # and the outlier rule reads the first half of its spectrum (curvature.count_outliers);
    # at width 4 (P = 16 < 2K²) the outliers were more than the bulk it needs below them
    "width": 5,
    "n_layers": 3,
    "lambda_w": 5e-3,
    "lambda_h": 5e-3,
    "layer": 2,
    "lr": 0.5,
    "w_scale": 0.5,
    "h_scale": 0.5,
}

LINEAR: dict[str, dict[str, Any]] = {
    "quick": {**_CONFIG_A, "steps": 10_000, "checkpoints": 60},
    "standard": {**_CONFIG_A, "steps": 60_000, "checkpoints": 120},
    "paper": {**_CONFIG_A, "steps": 100_000, "checkpoints": 150},
    "tiny": {**_TINY_LINEAR, "steps": 8000, "checkpoints": 25},
}
"""``dlufm-linear``: Figs 3-8 and 12-14 (configuration A, layer 3)."""

_RELU = {
    "n_classes": 3,
    "n_per_class": 10,
    "n_layers": 5,
    "lambda_w": 5e-3,
    "lambda_h": 5e-3,
    "layer": 4,
    "lr": 0.3,
    "w_scale": 1.0,
    "h_scale": 1.0,
}

RELU: dict[str, dict[str, Any]] = {
    "quick": {**_RELU, "widths": [10, 30], "seeds": [0, 1, 2], "steps": 60_000, "checkpoints": 24},
    "standard": {
        **_RELU,
        "widths": [10, 20, 30],
        "seeds": [0, 1, 2, 3, 4],
        "steps": 200_000,
        "checkpoints": 40,
    },
    "paper": {
        **_RELU,
        "widths": [10, 20, 30, 60],
        "seeds": list(range(8)),
        "steps": 300_000,
        "checkpoints": 50,
    },
    "tiny": {
        **_RELU,
        "n_per_class": 3,
        "n_layers": 4,
        "layer": 3,
        "widths": [4, 6],
        "seeds": [0, 1],
        "steps": 3000,
        "checkpoints": 8,
    },
}
"""``dlufm-relu``: Figs 9-11 and Tables 1-4, a sweep over widths and seeds; the dynamics
figures follow one run that reached the symmetric solution (the widest, first seed)."""

_REG = {**_CONFIG_A, "lr": 0.25, "w_scale": 1.0, "h_scale": 1.0}
_REG_RATIOS = [
    0.02,
    0.05,
    0.1,
    0.2,
    0.3,
    0.4,
    0.5,
    0.6,
    0.7,
    0.8,
    0.85,
    0.9,
    0.95,
    0.98,
    1.02,
    1.05,
    1.1,
    1.2,
    1.5,
    2.0,
    3.0,
    5.0,
]

REGULARISATION: dict[str, dict[str, Any]] = {
    "quick": {
        **_REG,
        "ratios": [0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 1.05, 1.2, 1.5, 2.0, 3.0],
        "steps": 20_000,
    },
    "standard": {**_REG, "ratios": _REG_RATIOS, "steps": 60_000},
    "paper": {**_REG, "ratios": _REG_RATIOS, "steps": 100_000},
    "tiny": {
        **_TINY_LINEAR,
        "lr": 0.25,
        "w_scale": 1.0,
        "h_scale": 1.0,
        "ratios": [0.1, 0.5, 2.0],
        "steps": 6000,
    },
}
"""``dlufm-regularisation``: λ = λ_W = λ_H scaled so that ``β/β_c`` takes each ratio
(condition (2) fails beyond 1), GD from the same start against the closed form. The start
is N(0, 1/d) and N(0, 1) at ``lr = 0.25``: from configuration A's smaller start (scale 0.5)
gradient descent ends at lower-rank critical points already at ``β/β_c = 0.5`` (for
``L >= 2`` every singular direction has a local minimum at 0, note §8.3), and scale 1
diverges at ``lr = 0.5``."""

_CONFIG_B = {
    "n_classes": 4,
    "n_per_class": 5,
    "width": 8,
    "n_layers": 3,
    "lambda_w": [2e-3, 5e-3, 1e-2],
    "lambda_h": 3e-3,
    "lr": 0.3,
    "w_scale": 0.5,
    "h_scale": 0.5,
}
_RANDOM = [
    {
        "n_classes": 2,
        "n_per_class": 4,
        "widths": [3, 6],
        "lambda_w": [1e-2, 3e-3],
        "lambda_h": 2e-3,
        "lr": 0.3,
        "w_scale": 0.5,
        "h_scale": 0.5,
    },
    {
        "n_classes": 5,
        "n_per_class": 3,
        "widths": [6, 8, 7, 6, 5],
        "lambda_w": [1e-3, 3e-3, 2e-3, 4e-3, 1.5e-3],
        "lambda_h": 2e-3,
        "lr": 0.2,
        "w_scale": 1.0,
        "h_scale": 1.0,
    },
]

LAYERS: dict[str, dict[str, Any]] = {
    "quick": {"configs": [_CONFIG_B, *_RANDOM], "steps": 60_000, "tol": 1e-11},
    "standard": {"configs": [_CONFIG_B, *_RANDOM, _CONFIG_A], "steps": 100_000, "tol": 1e-12},
    "paper": {"configs": [_CONFIG_B, *_RANDOM, _CONFIG_A], "steps": 200_000, "tol": 1e-12},
    "tiny": {
        "configs": [{**_CONFIG_B, "n_per_class": 2, "width": 4, "w_scale": 1.0, "h_scale": 1.0}],
        "steps": 16_000,
        "tol": 1e-11,
    },
}
"""``dlufm-layers``: every layer of configuration B (unequal λ, K = 4) and of random
configurations (K = 2 and 5, unequal widths and λ, L = 2 and 5), solved by gradient
descent; λ_out(l) against λ_W(l) and every theorem's error at the solution. The deeper
K = 5 configuration and the tiny one start at scale 1: from scale 0.5 gradient descent
stalls near the origin (measured: objective gap 2.5 after 40k steps)."""

_MLP = {
    "classes": None,  # every class of the dataset
    "width": 32,
    "depth": 4,
    "layers": [3, 4],
    "lr": 0.02,
    "momentum": 0.9,
    "weight_decay": 5e-4,
    "batch_size": 50,
    "schedule": "constant",
    "milestones": None,
}

MLP: dict[str, dict[str, Any]] = {
    "quick": {**_MLP, "dataset": "digits", "n_per_class": 50, "epochs": 300, "eval_every": 25},
    "standard": {
        **_MLP,
        "classes": STANDARD_CLASSES,  # K = 3, paper 004's, as the curvature networks
        "width": 64,
        "dataset": "fashion_mnist",
        "n_per_class": 100,
        "epochs": 2000,
        "schedule": "step",
        "milestones": [667, 1333],
        "eval_every": 50,
    },
    "paper": {
        **_MLP,
        "width": 64,
        "dataset": "fashion_mnist",
        "n_per_class": 200,
        "epochs": 1000,
        "schedule": "step",
        "milestones": [333, 667],
        "eval_every": 50,
    },
    "tiny": {
        **_MLP,
        "width": 24,
        "depth": 3,
        "layers": [2, 3],
        "dataset": "digits",
        "n_per_class": 10,
        "epochs": 150,
        "schedule": "step",  # the standard preset's schedule, exercised by the tests
        "milestones": [50, 100],
        "batch_size": 20,
        "eval_every": 50,
    },
}
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
only). ``standard`` reads three classes (T-shirt/top, trouser, dress: ``K = 3``, paper 004's
``K``), as the curvature networks' standard preset does since 2026-11-28; with them it holds
1.0 from epoch 400 to 2000, as with all ten, in 2.5 min instead of 8.7."""
