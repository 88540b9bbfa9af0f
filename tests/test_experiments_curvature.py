"""The curvature experiments (paper 004's real networks, collapselab.experiments.dlufm) at the
tiny preset: end to end, claims, figures, data fallback."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from collapselab.data import load_data
from collapselab.experiments import get_experiment, refresh_run, run_experiment
from collapselab.experiments.claims import RunResults, evaluate_claims
from collapselab.experiments.data_plan import plan_data
from collapselab.experiments.dlufm import NETWORK_CLAIMS as CLAIMS
from collapselab.experiments.dlufm import build_network
from collapselab.train import TrainConfig, stationarity

IDS = ["curvature-mlp-ce", "curvature-conv-mse"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("curvature-runs")
    return {e: run_experiment(e, preset="tiny", root=root) for e in IDS}


def test_four_experiments_are_registered():
    for net in ("mlp", "conv"):
        for loss in ("ce", "mse"):
            exp = get_experiment(f"curvature-{net}-{loss}")
            assert exp.paper == "004"
            assert set(exp.presets) == {"quick", "quick-bundled", "standard", "paper", "tiny"}
            assert exp.presets["quick"].data.name == "fashion_mnist"
            assert exp.presets["quick-bundled"].data.name == "digits"
            assert exp.fallbacks == {"quick": "quick-bundled"}  # standard has none
            assert exp.runtime("quick") and exp.runtime("standard")


@pytest.mark.parametrize("experiment_id", IDS)
def test_tiny_runs_claims_are_not_evaluable_outside_the_terminal_phase(runs, experiment_id):
    run = runs[experiment_id]
    tpt = run.manifest["curvature"]["terminal_phase"]
    assert tpt["reached"] is False
    claims = json.loads((run.path / "claims.json").read_text())
    assert claims["summary"] == {"holds": 0, "does not hold": 0, "not evaluable": len(CLAIMS)}
    assert claims["tiers"]["beyond"]["premise not met"] == len(CLAIMS)
    for entry in claims["claims"]:
        assert entry["detail"] == f"premise not met: {tpt['summary']}"
        assert entry["premise"]["met"] is False
        assert entry["premise"]["values"]["final_train_accuracy"] == tpt["final_train_accuracy"]


@pytest.mark.parametrize("experiment_id", IDS)
def test_tiny_runs_end_to_end_with_figures_spectra_and_claims(runs, experiment_id):
    run = runs[experiment_id]
    assert run.status == "completed"
    names = run.array_names()
    assert len(names) == 2 and names[0] == "curvature_step00000000"  # epochs 0 and 3
    final = run.load_array(names[-1])
    assert int(final["epoch"]) == 3
    layer = run.manifest["curvature"]["weight_layers"][-1]
    assert f"{layer}:hessian_eigenvalues" in final and f"{layer}:papyan_cross_eigenvalues" in final
    for fig in ("spectra", "decomposition", "alignment"):
        assert (run.path / "figures" / f"{fig}.png").stat().st_size > 1000
    # the claims' computations, with their premise (the terminal phase, which a 3-epoch run
    # never reaches: the stored claims are not evaluable, test below) lifted
    lifted = [dataclasses.replace(c, premise=None) for c in CLAIMS]
    claims = evaluate_claims(lifted, RunResults.from_run(run))
    verdicts = {c["name"]: c["verdict"] for c in claims["claims"]}
    assert set(verdicts) == {c.name for c in CLAIMS}
    # paper 004 treats MSE: on a cross-entropy run its two MSE-only statements are not
    # evaluated, with the reason; every other claim gets a verdict
    mse_only = {"class-cross-orthogonal", "kronecker-eigenvectors"}
    scoped = mse_only if run.manifest["config"]["loss"] == "ce" else set()
    assert {n for n, v in verdicts.items() if v == "not evaluable"} == scoped, verdicts
    assert all(v in ("holds", "does not hold") for n, v in verdicts.items() if n not in scoped)
    for entry in claims["claims"]:
        if entry["name"] in scoped:
            assert "not evaluated on a cross-entropy run" in entry["detail"]
    assert claims["summary"]["not evaluable"] == len(scoped)
    rows = run.metrics()
    assert {"nc1", "hessian_top_eigenvalue", "gradient_fraction_top"} <= set(rows["metric"])
    assert run.manifest["curvature"]["data"] == {"dataset": "digits"}
    tpt = run.manifest["curvature"]["terminal_phase"]  # the criterion's record, and its line
    nc1 = rows[(rows["metric"] == "nc1") & (rows["layer"] == tpt["nc1_layer"])]
    assert tpt["final_epoch"] == 3
    assert tpt["nc1_final"] == float(nc1[nc1["epoch"] == 3]["value"].iloc[-1])
    assert run.manifest["terminal_phase"] == tpt["summary"]
    # the distance to a critical point: train.stationarity on the final checkpoint's
    # network, rebuilt here in float64
    config = get_experiment(experiment_id).config(run.preset)
    assert json.loads(json.dumps(config.to_dict())) == run.manifest["config"]
    data = load_data(config.data, None, seed=0)
    model = build_network(config, data)
    model.load_state_dict(run.latest_checkpoint().load(weights_only=False)["model"])
    expected = stationarity(model.double(), data.train, TrainConfig(**run.manifest["train_config"]))
    distance = run.manifest["curvature"]["stationarity"]
    layers = run.manifest["curvature"]["weight_layers"][-2:]
    assert set(distance) == {"total", *(f"{name}.weight" for name in layers)}
    for key, value in distance.items():
        assert value == pytest.approx(expected[key], rel=1e-12) and value > 0
    # every verdict's detail ends with the premise read from those records: NC1 of the
    # classifier's input at the last measurement, whether the terminal phase was reached,
    # and the distance to a critical point
    phase = "reached" if tpt["reached"] else "not reached"
    premise = (
        f" [the premise, collapse: NC1 of {tpt['nc1_layer']!r} (the classifier's input) "
        f"{tpt['nc1_final']:.3g} at epoch 3, 0 at collapse; terminal phase {phase}; "
        f"‖∇L + wd θ‖/‖wd θ‖ {distance['total']:.3g}, 0 at a critical point]"
    )
    for entry in claims["claims"]:
        assert entry["detail"].endswith(premise) == (entry["name"] not in scoped), entry


def test_a_run_without_nc1_at_the_end_still_gets_verdicts_with_its_premise(runs):
    """Where the NC family was skipped at the last curvature epoch (a network that died, its
    class means equal), the terminal-phase record has no NC1: every claim still gets its
    verdict, and the premise says NC1 was not measured (a TypeError on formatting None
    made every claim "not evaluable" before)."""
    import copy

    from collapselab.experiments.claims import RunResults, evaluate_claim

    results = RunResults.from_run(runs["curvature-mlp-ce"])
    manifest = copy.deepcopy(dict(results.manifest))
    manifest["curvature"]["terminal_phase"].update(
        nc1_final=None, nc1_at_entry=None, nc1_ratio=None, reached=False
    )
    manifest["curvature"]["stationarity"] = None  # a run made before it was measured
    blind = RunResults(results.metrics, manifest, results.arrays)
    premise = " [the premise, collapse: NC1 of 'layers.1.act' (the classifier's input) not "
    premise += "measured at epoch 3, 0 at collapse; terminal phase not reached]"
    for claim in CLAIMS:
        got, before = evaluate_claim(claim, blind), evaluate_claim(claim, results)
        assert got.verdict == before.verdict and "raised" not in got.detail, got.detail
        if got.verdict != "not evaluable":  # the two MSE-only claims on this CE run
            assert got.detail.endswith(premise), got.detail


def test_figures_are_redrawn_from_the_stored_results(runs):
    run = runs["curvature-mlp-ce"]
    (run.path / "figures" / "spectra.png").unlink()
    refresh_run(run.path)
    assert (run.path / "figures" / "spectra.png").exists()


def test_quick_falls_back_to_bundled_digits_without_fashion_mnist(tmp_path):
    """Without the files (the suite hides the machine's datasets) the data plan runs
    ``quick-bundled``: the same five class ids of the bundled digits."""
    for experiment_id in ("curvature-mlp-ce", "curvature-conv-mse"):
        plan = plan_data(get_experiment(experiment_id), "quick")
        assert plan.preset == "quick-bundled" and plan.fell_back
    spec = get_experiment("curvature-mlp-ce").config("quick-bundled").data
    assert spec.name == "digits"
    data = load_data(spec, None, seed=0)
    assert data.n_classes == 5 and data.input_shape == (64,)


def test_standard_reads_three_fashion_mnist_classes_from_the_debian_files(fashion_mnist_dir):
    for net in ("mlp", "conv"):  # images (1, 28, 28); the MLP flattens them
        config = get_experiment(f"curvature-{net}-ce").config("standard")
        assert list(config.data.options["classes"]) == [0, 1, 3]  # K = 3, paper 004's
        plan = plan_data(get_experiment(f"curvature-{net}-ce"), "standard")
        assert plan.preset == "standard" and str(fashion_mnist_dir) in plan.summary()
        assert config.data.name == "fashion_mnist"
        data = load_data(config.data, None, seed=0)
        assert data.n_classes == 3 and tuple(data.input_shape) == (1, 28, 28)
        counts = torch.bincount(data.train.y, minlength=3)
        assert counts.tolist() == [config.data.options["n_train_per_class"]] * 3
        # the measured layers are the classifier and the one before it, which the claims read
        model = build_network(config, data)
        weights = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
        assert list(config.curvature_layers) == weights[-2:]
        assert config.nc_every and max(config.curvature_epochs) == config.epochs


@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_standard_mlps_descend_full_batch_and_conv_nets_keep_sgd(loss):
    """Paper 004's procedure where the hour allows it (docs/curvature.md, "Full-batch
    gradient descent for the standard MLPs"): one step per epoch over all 300 images at a
    constant rate; the conv nets keep SGD with its two decays."""
    mlp = get_experiment(f"curvature-mlp-{loss}").config("standard")
    conv = get_experiment(f"curvature-conv-{loss}").config("standard")
    n_train = mlp.data.options["n_train_per_class"] * len(mlp.data.options["classes"])
    assert (mlp.batch_size, list(mlp.milestones), mlp.lr) == (n_train, [], 0.05)
    assert mlp.epochs == 20_000 and list(mlp.curvature_epochs) == [0, 6666, 20_000]
    assert mlp.epochs % mlp.checkpoint_every == 0 and mlp.checkpoint_every > 1
    assert conv.batch_size < n_train and list(conv.milestones) == [150, 300]
    assert conv.checkpoint_every == 1 and conv.epochs == 450


@pytest.mark.parametrize(
    ("net", "sizes"),
    [
        ("mlp", {"layers.3.linear": 512 * 512, "classifier": 512 * 10}),
        # issue 35 item 5: Papyan's VGG-11, its last convolution and classifier
        ("conv", {"features.25": 512 * 512 * 9, "classifier": 512 * 10}),
    ],
)
def test_the_paper_preset_dry_runs_on_fashion_mnist_fixture_files(tmp_path, net, sizes):
    """The paper preset (all of Fashion-MNIST, Papyan's and Han et al.'s protocol, for a GPU)
    reads IDX fixture files, builds its network and passes a batch, without training; its
    protocol is the one note 003 gives (350 epochs, decays at 116 and 233, batches of 128,
    weight decay 5e-4, rates 0.0679 CE and 0.0184 MSE). A measured layer that the network
    lacks is a clear error."""
    from collapselab.experiments.dlufm import network_dry_run
    from collapselab.experiments.dry_run import dry_run_experiment
    from tests._idx_files import write_idx_dataset

    arrays = write_idx_dataset(tmp_path, n_train=40, n_test=20)
    for loss, lr in (("ce", 0.0679), ("mse", 0.0184)):
        config = get_experiment(f"curvature-{net}-{loss}").config("paper")
        assert (config.epochs, list(config.milestones), config.batch_size) == (
            350,
            [116, 233],
            128,
        )
        assert (config.lr, config.weight_decay, config.momentum) == (lr, 5e-4, 0.9)
        result = dry_run_experiment(
            get_experiment(f"curvature-{net}-{loss}"), "paper", data_dir=tmp_path
        )
        assert result.ok, result.error
        built = result.built
        counts = torch.bincount(
            torch.from_numpy(arrays["train-labels-idx1-ubyte"]).long(), minlength=10
        )
        assert built["n_train"] == 40 and built["train_class_counts"] == counts.tolist()
        assert built["hessian_sizes"] == sizes and built["eigenpairs"] == 210
    paper = get_experiment(f"curvature-{net}-ce").config("paper")
    wrong = paper.replace(curvature_layers=["layers.9.linear"])
    with pytest.raises(ValueError, match=r"\['layers.9.linear'\] are not weight layers of the"):
        network_dry_run(wrong, tmp_path)
