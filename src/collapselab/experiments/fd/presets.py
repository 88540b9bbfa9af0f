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
samples per class; loss and accuracy on 100 training samples per class; the boundary read
on the third linear layer's output (the paper's "third linear layer", A.1); the plateau ends
when the loss is 5% below its initial value.

``standard`` is the same on Fashion-MNIST (all sweeps on it, 1000 samples per class, width
256, longer budgets); ``paper`` is the paper's scale (9×512 MLPs on CIFAR-10 and MNIST from
local files, CIFAR-10's 50 000 images, thousands of iterations: a GPU job); ``tiny`` is the
test suite's.
"""

from __future__ import annotations

from typing import Any

MEASUREMENT: dict[str, Any] = {
    "every": 10,
    "dense_every": 2,
    "half_window": 20,
    "probe_per_class": 20,
    "loss_per_class": 100,
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
        "base": {**_QUICK_BASE, "width": 256, "n_per_class": 1000, "iterations": 3000},
        "arms": {
            "fashion_mnist": {**_FMNIST, "n_per_class": 1000, "iterations": 3000},
            "clustered": {},
        },
    },
    "paper": {
        "dataset": "cifar10",
        "base": {**MODEL, **MEASUREMENT, "width": 512, "iterations": 5000},
        "arms": {
            "cifar10": {"dataset": "cifar10", "n_per_class": 5000},
            "mnist": {"dataset": "mnist", "n_per_class": 6000, "lr": 0.01},
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
