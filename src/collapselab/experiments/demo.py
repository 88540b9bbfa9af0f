"""The demo: a small MLP trained on scikit-learn's bundled digits.

It exercises the whole stack on a laptop CPU in seconds: bundled data, a model, the seeded
training loop with checkpoints, the run store and a figure.
"""

from __future__ import annotations

from collapselab.data import digits
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
    """Train the MLP, record loss/accuracy per epoch, draw ``figures/training.png``."""
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
    result = train(
        model, data, train_config, callbacks=context.callbacks, run=run, finish_run=False
    )
    plot_training_curves(
        run.metrics(),
        run.figure_path("training"),
        zero_error_epoch=result.zero_error_epoch,
        title="MLP on digits",
    )


DEMO = register(
    Experiment(
        id="demo",
        paper="demo",
        title="loss and accuracy of an MLP on digits",
        presets=PRESETS,
        runtime_quick="~10 s",
        run=run_demo,
        figures=["training"],
    )
)
