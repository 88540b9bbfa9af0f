"""A new paper's experiment, written outside collapselab through its public API, in the shape of
the built-in papers (presets, one run module, claims, figures, one registration table: five
files), is registered on import and reproduced with one call."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path

import pytest

from collapselab.experiments import experiments_for_paper, reproduce, unregister

PACKAGE = {
    "presets.py": '''
        """Typed presets of the toy paper: the same four tiers as every experiment."""
        from dataclasses import dataclass

        from collapselab.data import DataSpec, steps
        from collapselab.experiments import Preset, tiers


        @dataclass(frozen=True, kw_only=True)
        class Shrink(Preset):
            data: DataSpec
            steps: int = 6
            rate: float = 0.5


        BLOBS = DataSpec(
            "gaussian_mixture",
            {"n_classes": 3, "dim": 5, "n_train_per_class": 20},
            steps=(steps.Cast("float64"),),
        )
        PRESETS = tiers(
            tiny=Shrink(data=BLOBS, steps=3),
            quick=Shrink(data=BLOBS),
            standard=Shrink(data=BLOBS, steps=10),
            paper=Shrink(data=BLOBS, steps=20),
        )
    ''',
    "shrink.py": '''
        """The run: samples pulled toward their class means, NC1 measured at every step."""
        import collapselab
        from collapselab.data import load_data


        def run_shrink(run, context):
            config = context.config
            data = load_data(config.data, context.data_dir, context.seed).train
            means = [data.x[data.y == c].mean(0) for c in range(data.n_classes)]
            centre = __import__("torch").stack(means)[data.y]
            for step in range(config.steps + 1):
                x = centre + (data.x - centre) * (1 - config.rate) ** step
                nc1 = collapselab.measure(x, data.y, keys=["nc1"])["nc1"]
                run.log(step, "nc1", nc1, epoch=step)
    ''',
    "claims.py": '''
        """The toy paper's claim, evaluated on the measured rows."""
        from collapselab.experiments import Series, decreases_by

        CLAIMS = [
            decreases_by(
                name="nc1-falls",
                statement="NC1 falls by at least a factor 4 as the samples shrink.",
                source="toy paper, Fig. 1",
                series=Series("nc1", "train", ""),
                factor=4.0,
            )
        ]
    ''',
    "figures.py": '''
        """The toy paper's figure."""
        from collapselab.report import plot_panels

        CAPTIONS = {"nc1": "NC1 against the step."}


        def draw(run):
            rows = run.metrics()
            plot_panels(rows, run.figure_path("nc1"), panel="metric", panels=["nc1"],
                        titles={"nc1": "NC1"}, logy={"nc1": True}, xlabel="step", ylabel="")
    ''',
    "__init__.py": '''
        """The toy paper: its experiments, registered from one table."""
        from collapselab.experiments import Experiment, register_paper

        from . import claims, figures, presets, shrink

        EXPERIMENTS = register_paper("toy-collapse", [
            Experiment(
                id="toy-shrink",
                title="samples shrink toward their class means",
                presets=presets.PRESETS,
                run=shrink.run_shrink,
                claims=claims.CLAIMS,
                draw=figures.draw,
                captions=figures.CAPTIONS,
                figure="Fig. 1",
                uses_device=False,
            ),
        ])
    ''',
}


@pytest.fixture
def toy_paper(tmp_path: Path):
    package = tmp_path / "src" / "toy_collapse_paper"
    package.mkdir(parents=True)
    for name, text in PACKAGE.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    sys.path.insert(0, str(package.parent))
    try:
        importlib.import_module("toy_collapse_paper")
        yield package
    finally:
        sys.path.remove(str(package.parent))
        for name in [m for m in sys.modules if m.startswith("toy_collapse_paper")]:
            del sys.modules[name]
        unregister("toy-shrink")


def test_a_new_paper_takes_five_files_and_reproduces_with_one_call(toy_paper, tmp_path) -> None:
    assert sorted(p.name for p in toy_paper.glob("*.py")) == sorted(PACKAGE)
    (experiment,) = experiments_for_paper("toy-collapse")
    assert experiment.paper == "toy-collapse" and experiment.figures == ["nc1"]
    assert set(experiment.presets) == {"tiny", "quick", "standard", "paper"}
    result = reproduce("toy-collapse", preset="quick", root=tmp_path / "runs")
    assert result.ok and [o.outcome for o in result.outcomes] == ["completed"]
    run_dir = tmp_path / "runs" / "toy-shrink-quick-seed0"
    claims = json.loads((run_dir / "claims.json").read_text())["claims"]
    assert [(c["name"], c["verdict"]) for c in claims] == [("nc1-falls", "holds")]
    # each step halves every deviation from the class mean: Sigma_W, so NC1, falls 4^6-fold
    assert claims[0]["values"]["end/start"] == pytest.approx(4.0**-6, rel=1e-10)
    assert (run_dir / "figures" / "nc1.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "runs" / "index.html").is_file()
