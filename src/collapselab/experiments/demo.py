"""The demo: a small MLP trained on scikit-learn's bundled digits.

It exercises the whole stack on a laptop CPU in seconds: bundled data, a model, the seeded
training loop with checkpoints, the run store, a figure, two claims and the report. The
demo reproduces no paper; its claims are sanity checks of the training loop, decided on
the measured rows like any paper's claim.
"""

from __future__ import annotations

import math

from collapselab.data import digits
from collapselab.experiments.claims import (
    Claim,
    ClaimResult,
    Final,
    RunResults,
    value_above,
)
from collapselab.experiments.registry import Experiment, RunContext, register
from collapselab.models import MLP
from collapselab.report.figures import plot_training_curves
from collapselab.store import Run
from collapselab.train import TrainConfig, train

PRESETS = {
    "quick": {
        "width": 128,
        "depth": 4,
        "epochs": 30,
        "lr": 0.05,
        "momentum": 0.9,
        "weight_decay": 5e-4,
        "batch_size": 64,
    },
}


def run_demo(run: Run, context: RunContext) -> None:
    """Train the MLP and record loss/accuracy per epoch (the figure is drawn by
    :func:`draw_demo`)."""
    config = context.config
    data = digits(seed=context.seed)
    model = MLP(
        in_dim=data.input_shape[0],
        n_classes=data.n_classes,
        width=config["width"],
        depth=config["depth"],
        bias=True,
    )
    train_config = TrainConfig(
        epochs=config["epochs"],
        lr=config["lr"],
        momentum=config["momentum"],
        weight_decay=config["weight_decay"],
        batch_size=config["batch_size"],
        schedule="step",
        seed=context.seed,
        device=context.device,
        checkpoint_every=5,
    )
    train(model, data, train_config, callbacks=context.callbacks, run=run, finish_run=False)


def draw_demo(run: Run) -> None:
    """``figures/training.png``: loss (log scale) and accuracy per epoch, zero-error epoch."""
    metrics = run.metrics()
    zero = RunResults(metrics, run.manifest).zero_error_epoch()
    plot_training_curves(
        metrics, run.figure_path("training"), zero_error_epoch=zero, title="MLP on digits"
    )


def _reaches_zero_error(results: RunResults) -> ClaimResult:
    budget = int(results.config["epochs"])
    epoch = results.zero_error_epoch()
    final_train = Final("accuracy", "train")(results)
    values = {
        "zero_error_epoch": math.nan if epoch is None else float(epoch),
        "epochs": float(budget),
        "final_train_accuracy": final_train,
    }
    if epoch is None:
        detail = f"training accuracy never reached 1.0 (final {final_train:.4g})"
        return ClaimResult("does not hold", values, float(budget), detail)
    holds = epoch <= budget
    detail = f"first epoch with training accuracy 1.0: {epoch} (budget {budget})"
    return ClaimResult("holds" if holds else "does not hold", values, float(budget), detail)


CLAIMS = [
    Claim(
        name="zero-training-error",
        statement=(
            "The MLP interpolates the training set: training accuracy reaches 1.0 "
            "within the epoch budget (the terminal phase of training begins)."
        ),
        source="demo sanity check (not from a paper)",
        threshold="first epoch with training accuracy exactly 1.0 <= the configured epochs",
        evaluate=_reaches_zero_error,
    ),
    value_above(
        name="test-accuracy",
        statement="The trained MLP generalises: test accuracy at the end is at least 0.9.",
        source="demo sanity check (not from a paper)",
        value=Final("accuracy", "test"),
        threshold=0.9,
    ),
]


DEMO = register(
    Experiment(
        id="demo",
        paper="demo",
        title="loss and accuracy of an MLP on digits",
        presets=PRESETS,
        runtime_quick="~10 s",
        run=run_demo,
        figures=["training"],
        figure="training curves",
        claims=CLAIMS,
        draw=draw_demo,
    )
)
