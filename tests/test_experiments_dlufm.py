"""Paper 004's experiments: the tiny presets end to end (figures drawn, claims evaluated),
stored numbers against independent recomputation, and the ReLU claims on every branch."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from collapselab._threads import serial_threads
from collapselab.curvature import count_outliers as theory_count_outliers
from collapselab.data import DataSpec, load_data
from collapselab.experiments import (
    RunResults,
    evaluate_claims,
    experiments_for_paper,
    get_experiment,
    refresh_run,
    reproduce,
)
from collapselab.experiments.dlufm import (
    RELU_CLAIMS,
    claims,
    classify,
    lambda_for_ratio,
    presets,
)
from collapselab.experiments.dlufm.mlp import as_deep_ufm, bulk_outliers, mlp_dry_run
from collapselab.models import MLP
from collapselab.store import Run
from collapselab.theory.dlufm import (
    DeepLinearUFM,
    DeepReLUUFM,
    closed_form,
    gradient_descent,
    regularisation_threshold,
)
from collapselab.theory.dlufm_layerwise import layer_hessian
from collapselab.train import seed_everything
from tests._experiments import check_completed_run, stored_claims
from tests._idx_files import write_idx_dataset

IDS = ["dlufm-layers", "dlufm-linear", "dlufm-mlp", "dlufm-regularisation", "dlufm-relu"]


def lifted_claims(run) -> dict:
    """The run's claims evaluated now with their premises lifted (issue 35: a claim on a
    run that does not meet its premise is stored not evaluable; its computation is still
    what these tests check), by name."""
    lifted = [dataclasses.replace(c, premise=None) for c in get_experiment(run.experiment).claims]
    document = evaluate_claims(lifted, RunResults.from_run(run))
    return {entry["name"]: entry for entry in document["claims"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``reproduce 004 --preset tiny`` once for the module."""
    root = tmp_path_factory.mktemp("dlufm-runs")
    with serial_threads():
        result = reproduce("004", preset="tiny", root=root)
    ran = [o.experiment for o in result.outcomes]
    # paper 004 also holds the curvature of real networks (curvature-*, issue 12)
    assert [e for e in ran if not e.startswith("curvature-")] == IDS
    return {e: Run.open(root / f"{e}-tiny-seed0") for e in IDS}


def test_the_paper_registers_five_experiments_with_four_presets():
    found = {e.id: e for e in experiments_for_paper("004")}
    # paper 004 also holds the curvature of real networks (curvature-*, issue 12)
    assert sorted(i for i in found if not i.startswith("curvature-")) == IDS
    found = {i: found[i] for i in IDS}
    for experiment in found.values():
        assert {"tiny", "quick", "standard", "paper"} <= set(experiment.presets)
        assert experiment.paper == "004" and experiment.figures and experiment.claims
        assert experiment.draw is not None
        assert experiment.uses_device == (experiment.id == "dlufm-mlp")
        assert set(experiment.captions) == set(experiment.figures)


@pytest.mark.parametrize("experiment_id", IDS)
def test_tiny_preset_runs_end_to_end_with_figures_and_claims(runs, experiment_id):
    claims = check_completed_run(runs[experiment_id], get_experiment(experiment_id))
    if experiment_id == "dlufm-mlp":  # the tiny MLP may not reach zero error (premise)
        claims = lifted_claims(runs[experiment_id])
    if experiment_id != "dlufm-relu":  # the tiny ReLU runs may end lower-rank (below)
        for entry in claims.values():
            assert entry["verdict"] in ("holds", "does not hold"), entry


def test_the_linear_claims_hold_at_tiny_and_the_published_e1_reading_does_not(runs):
    claims = stored_claims(runs["dlufm-linear"])
    published = claims.pop("gradient-second-moment-as-published")
    assert published["verdict"] == "does not hold"
    assert published["values"]["rank"] == 3  # K, not K - 1
    assert published["kind"] == "erratum" and published["erratum"]["outcome"] == "confirmed"
    assert all(c["kind"] == "empirical" for c in claims.values())
    assert all(c["verdict"] == "holds" for c in claims.values()), claims
    for experiment_id in ("dlufm-layers", "dlufm-regularisation"):
        assert all(c["verdict"] == "holds" for c in stored_claims(runs[experiment_id]).values())


def test_linear_stored_spectra_equal_an_independent_recomputation(runs):
    run = runs["dlufm-linear"]
    config = run.config
    model = DeepLinearUFM(
        config["n_classes"], config["n_per_class"], config["width"], config["lambda_w"],
        config["lambda_h"], n_layers=config["n_layers"],
    )  # fmt: skip
    traj = gradient_descent(
        model, config["lr"], config["steps"], seed=0, w_scale=config["w_scale"],
        h_scale=config["h_scale"], checkpoints=config["checkpoints"],
    )  # fmt: skip
    dynamics = run.load_array("dynamics")
    assert np.array_equal(dynamics["steps"], traj.steps)
    layer = config["layer"]
    for i in (0, len(traj.steps) // 2, -1):
        kron = layer_hessian(model, traj.points[i], layer, method="kronecker")
        expected = np.sort(np.linalg.eigvalsh(kron))[::-1]
        assert np.allclose(dynamics["hessian"][i], expected, rtol=0, atol=1e-12)
        assert dynamics["objective"][i] == pytest.approx(model.objective(traj.points[i]), 1e-13)
    form = run.load_array("closed_form")
    assert float(form["t_star"]) == pytest.approx(closed_form(model).t_star, rel=1e-14)


def test_regularisation_ratios_are_the_ratios_of_the_closed_form(runs):
    run = runs["dlufm-regularisation"]
    stored = run.load_array("regularisation")
    config = run.config
    preset = get_experiment("dlufm-regularisation").config(run.preset)
    big_l = config["n_layers"]
    for ratio, lam, t_star in zip(stored["ratio"], stored["lambda"], stored["t_star"],
                                  strict=True):  # fmt: skip
        assert lam == pytest.approx(lambda_for_ratio(preset, ratio), rel=1e-14)
        model = DeepLinearUFM(config["n_classes"], config["n_per_class"], config["width"], lam,
                              lam, n_layers=big_l)  # fmt: skip
        form = closed_form(model)
        assert form.beta / regularisation_threshold(big_l) == pytest.approx(ratio, rel=1e-12)
        assert t_star == form.t_star
        assert (t_star == 0) == (ratio > 1)


def test_relu_sweep_records_every_run_and_its_classification(runs):
    run = runs["dlufm-relu"]
    config = run.config
    sweep = run.load_array("sweep")
    pairs = [(w, s) for w in config["widths"] for s in config["seeds"]]
    assert list(zip(sweep["width"].astype(int), sweep["seed"].astype(int), strict=True)) == pairs
    for i, (width, seed) in enumerate(pairs):
        final = run.load_array(f"final_d{width}_s{seed}")
        row = classify(final, config["n_classes"], config["layer"])
        assert row["symmetric"] == sweep["symmetric"][i]
        assert row["relu_inactive"] == sweep["relu_inactive"][i]
        assert row["masks_constant"] == sweep["masks_constant"][i]
        # sample-independent masks: no unit after W_l..W_{L−1} on for some samples only
        mixed = final["mixed_units"][config["layer"] - 1 :]
        assert bool(row["masks_constant"]) == (int(np.sum(mixed)) == 0)
        # the classification by its definition: ranks of W_lW_lᵀ and frames of the means
        ranks = [int(np.sum(v[np.isfinite(v)] > 1e-3 * np.nanmax(v))) for v in final["weights"]]
        frames = float(np.max(final["orthogonal_frame"][1:]))
        assert bool(row["symmetric"]) == (all(r == 3 for r in ranks) and frames <= 0.05)
    claims = stored_claims(run)
    assert claims["relu-symmetric-at-widest"]["verdict"] in (
        "holds",
        "does not hold",
        "inconclusive",
    )
    for name, entry in claims.items():
        if entry["verdict"] == "not evaluable":
            assert "no run reached the symmetric solution" in entry["detail"], name


def test_relu_claims_are_computed_on_every_run_marked_symmetric(runs):
    """Every ReLU claim's computation runs (and yields a verdict with numbers) when the runs
    count as symmetric: the tiny runs are too short to reach that solution themselves."""
    results = RunResults.from_run(runs["dlufm-relu"])
    arrays = {name: dict(results.arrays[name]) for name in results.arrays}
    arrays["sweep"]["symmetric"] = np.ones_like(arrays["sweep"]["symmetric"])
    # half the runs with sample-independent masks, half ReLU-active: every claim has runs
    constant = np.arange(arrays["sweep"]["symmetric"].size) % 2
    arrays["sweep"]["masks_constant"] = constant.astype(np.float64)
    forced = RunResults(results.metrics, results.manifest, arrays)
    document = evaluate_claims(RELU_CLAIMS, forced)
    for entry in document["claims"][1:]:
        assert entry["verdict"] in ("holds", "does not hold"), entry
        assert entry["values"], entry
    # every run now counts as symmetric: n of n seeds at the largest width, whose exact
    # (Clopper-Pearson) interval [0.025^(1/n), 1] straddles 2/3 below ten seeds
    widest = document["claims"][0]
    n = int(np.sum(arrays["sweep"]["width"] == np.max(arrays["sweep"]["width"])))
    assert widest["values"]["fraction_widest"] == 1.0
    assert widest["interval"]["low"] == pytest.approx(0.025 ** (1 / n), abs=1e-12)
    assert widest["verdict"] == ("holds" if n >= 10 else "inconclusive")
    names = [f"d{w}_s{s}" for w in run_widths(results) for s in run_seeds(results)]
    by_name = {c["name"]: c for c in document["claims"]}
    linear = set(by_name["relu-constant-masks-follow-the-linear-model"]["values"])
    unequal = set(by_name["relu-hessian-outliers-unequal"]["values"])
    assert unequal == {n for n, i in zip(names, constant, strict=True) if not i}
    assert {key[: -len("_spread")] for key in linear if key.endswith("_spread")} == {
        n for n, i in zip(names, constant, strict=True) if i
    }


def test_aligned_if_near_equal_is_the_smallest_alignment_near_equal_eigenvalues_allow():
    """Kantorovich's bound against brute force: the smallest ``a(v)`` over vectors in the span
    of two eigenvectors whose eigenvalues differ by the relative spread ``NEAR_EQUAL`` (a fine
    grid of angles), and random vectors in the span of nine eigenvalues within that spread
    never fall below it."""
    delta = claims.NEAR_EQUAL
    hessian = np.diag([1.0, 1.0 - delta])
    theta = np.linspace(0.0, np.pi / 2, 200_001)
    v = np.stack([np.cos(theta), np.sin(theta)])
    hv = hessian @ v
    a = np.sum(v * hv, axis=0) / np.linalg.norm(hv, axis=0)
    assert a.min() == pytest.approx(claims.ALIGNED_IF_NEAR_EQUAL, abs=1e-10)
    rng = np.random.default_rng(0)
    eig = np.concatenate([[1.0, 1.0 - delta], rng.uniform(1.0 - delta, 1.0, 7)])
    v = rng.standard_normal((9, 10_000))
    hv = eig[:, None] * v
    a = np.sum(v * hv, axis=0) / (np.linalg.norm(hv, axis=0) * np.linalg.norm(v, axis=0))
    assert a.min() >= claims.ALIGNED_IF_NEAR_EQUAL - 1e-15


def run_widths(results):
    return [int(w) for w in dict.fromkeys(results.array("sweep", "width"))]


def run_seeds(results):
    return [int(s) for s in dict.fromkeys(results.array("sweep", "seed"))]


def test_relu_endpoints_store_where_the_relus_act(runs):
    """The stored fraction of non-positive pre-activations per layer equals a recomputation
    from the endpoint (gradient descent again, deterministic from the seed) with the float64
    rounding bound written out here."""
    run = runs["dlufm-relu"]
    c = run.config
    width, seed = c["widths"][-1], c["seeds"][0]
    model = DeepReLUUFM(c["n_classes"], c["n_per_class"], width, c["lambda_w"], c["lambda_h"],
                        n_layers=c["n_layers"])  # fmt: skip
    end = gradient_descent(model, c["lr"], c["steps"], seed=seed, w_scale=c["w_scale"],
                           h_scale=c["h_scale"], checkpoints=c["checkpoints"]).final  # fmt: skip
    final = run.load_array(f"final_d{width}_s{seed}")
    h = end.H
    fractions = []
    for w in end.W[:-1]:
        z = w @ h
        gamma = w.shape[1] * 2.0**-53 / (1 - w.shape[1] * 2.0**-53)
        fractions.append(float(np.mean(z <= gamma * (np.abs(w) @ np.abs(h)))))
        h = np.maximum(z, 0.0)
    assert np.array_equal(final["preactivation_nonpositive"], np.asarray(fractions))
    row = classify(final, c["n_classes"], c["layer"])
    assert row["relu_inactive"] == float(all(f == 0 for f in fractions[c["layer"] - 1 :]))
    assert row["linear_everywhere"] == float(all(f == 0 for f in fractions))


def test_the_mlp_is_read_as_a_deep_relu_ufm_with_the_inputs_as_features(runs):
    """The trained MLP's outputs equal the deep UFM's at H_1 = Xᵀ, and the stored Hessian
    spectrum is that of the autodiff Hessian of the MLP's own MSE loss in its last weight."""
    run = runs["dlufm-mlp"]
    config = run.config
    data = load_data(get_experiment("dlufm-mlp").config(run.preset).data, None, 0)
    seed_everything(0)
    model = MLP(64, 10, width=config["width"], depth=config["depth"], bias=False)
    state = Run.open(run.path).latest_checkpoint().load()
    model.load_state_dict(state["model"])
    ufm, point = as_deep_ufm(model, data.train, config["weight_decay"])
    with torch.no_grad():
        outputs = model(data.train.x.double().float()).double().numpy()
    assert np.allclose(ufm.features(point)[-1], outputs, atol=1e-4)
    weight = model.classifier.weight.detach().double().clone().requires_grad_(True)
    x = data.train.x.double()
    hidden = x
    for block in model.layers:
        hidden = torch.relu(hidden @ block.linear.weight.detach().double().T)
    targets = torch.nn.functional.one_hot(data.train.y, 10).double()

    def loss(w: torch.Tensor) -> torch.Tensor:  # mean over samples of ½‖f − y‖²
        return 0.5 * ((hidden @ w.reshape(10, -1).T - targets) ** 2).sum() / x.shape[0]

    hess = torch.autograd.functional.hessian(loss, weight.reshape(-1)).numpy()
    expected = np.sort(np.linalg.eigvalsh(hess))[::-1]
    depth = config["depth"]
    stored = run.load_array(f"mlp_final_layer{depth}")["hessian"]
    assert np.allclose(stored, expected, atol=1e-9 * expected[0])


def test_the_mlp_follows_its_presets_step_schedule(runs):
    """The preset's ``schedule``/``milestones`` reach training: the recorded rate is
    ``lr`` until the first milestone, then divided by 10 after each."""
    run = runs["dlufm-mlp"]
    c = run.config
    rows = run.metrics()
    lr = rows[(rows["split"] == "train") & (rows["metric"] == "lr")].set_index("epoch")["value"]
    first, second = c["milestones"]
    assert c["schedule"] == "step"
    assert lr[first] == pytest.approx(c["lr"], rel=1e-12)
    assert lr[second] == pytest.approx(c["lr"] / 10, rel=1e-12)
    assert lr[c["epochs"]] == pytest.approx(c["lr"] / 100, rel=1e-12)


def test_the_curvature_family_measures_the_same_layer_hessian_as_app_f(runs):
    """Issue 13 x issue 12: on the trained MLP, the curvature family's top eigenvalue (Lanczos
    on the network's own Hessian-vector products) equals App. F's dense formula's, and the
    family's f_top and outliers are logged beside the theory module's. The family's Kronecker
    alignment is the theory module's mean ``a(v)``: both build ``v_kk'`` from the class means
    of ``h^(l+1) = σ(W_l h^(l))``, the next layer's input (the family read the pre-activation
    before the curvature audit, docs/curvature.md)."""
    run = runs["dlufm-mlp"]
    rows = run.metrics()
    rows = rows[rows["split"] == "mlp"]
    for stage in ("init", "final"):
        for ell in run.config["layers"]:
            at = rows[rows["layer"] == f"{stage}:W{ell}"].set_index("metric")["value"]
            assert at["family_gap"] < 1e-8, (stage, ell, at["family_gap"])
            snapshot = run.load_array(f"mlp_{stage}_layer{ell}")
            top = snapshot["hessian"][0]
            assert at["family_hessian_top_eigenvalue"] == pytest.approx(top, rel=1e-8)
            alignment = float(snapshot["alignment"].mean())
            assert at["family_kronecker_alignment_mean"] == pytest.approx(alignment, abs=1e-8)
            assert 0.0 <= at["family_gradient_fraction_top"] <= 1.0 + 1e-12
            assert at["family_hessian_outliers"] >= 1


def _largest_log_gap_loop(values, k):
    """The bulk-outlier count written out: sort descending, keep the top 2K² + K, and find
    the largest log ratio of consecutive values among the first half by a loop."""
    top = sorted((float(v) for v in values), reverse=True)[: 2 * k * k + k]
    best, where = 0.0, 0
    for j in range(len(top) // 2):
        a, b = max(top[j], 1e-12 * top[0]), max(top[j + 1], 1e-12 * top[0])
        if math.log(a) - math.log(b) > best:
            best, where = math.log(a) - math.log(b), j + 1
    return where


def test_mlp_outliers_are_counted_above_the_bulk_not_at_the_null_space(runs):
    """A spectrum like a trained network's (K² outliers, a non-zero bulk, a null space):
    the deep UFM's full-spectrum gap rule counts the rank, ``bulk_outliers`` the K²
    outliers; on an exactly zero bulk (the UFM at its optimum) the two agree. The stored
    rows and the knockout claim read the count of the loop above."""
    k = 4
    rng = np.random.default_rng(0)
    outliers = rng.uniform(1.0, 2.0, k * k)
    bulk = rng.uniform(1e-3, 2e-2, 300)
    spectrum = rng.permutation(np.concatenate([outliers, bulk, np.zeros(200)]))
    # one rule now: the theory's old full-spectrum rule counted the rank, k * k + 300
    assert theory_count_outliers(spectrum, "gap") == k * k
    assert bulk_outliers(spectrum, k) == _largest_log_gap_loop(spectrum, k) == k * k
    exact = np.concatenate([outliers, np.zeros(500)])
    assert bulk_outliers(exact, k) == theory_count_outliers(exact, "gap") == k * k
    run = runs["dlufm-mlp"]
    rows = run.metrics()
    rows = rows[rows["split"] == "mlp"]
    k = int(run.load_array("mlp_meta")["n_classes"])
    for stage in ("init", "final"):
        for ell in run.config["layers"]:
            at = rows[rows["layer"] == f"{stage}:W{ell}"].set_index("metric")["value"]
            snapshot = run.load_array(f"mlp_{stage}_layer{ell}")
            assert at["outliers"] == _largest_log_gap_loop(snapshot["hessian"], k)
    knockouts = lifted_claims(run)["mlp-papyan-knockouts"]["values"]
    for ell in run.config["layers"]:
        snapshot = run.load_array(f"mlp_final_layer{ell}")
        for part in ("none", "within", "cross", "class"):
            count = _largest_log_gap_loop(snapshot[f"knockout_logit_{part}"], k)
            assert knockouts[f"W{ell}_{part}"] == count, (ell, part)


def test_figures_are_redrawn_from_the_stored_results(runs):
    for experiment_id in ("dlufm-linear", "dlufm-relu"):
        run = runs[experiment_id]
        for png in (run.path / "figures").glob("*.png"):
            png.unlink()
        refresh_run(run.path)
        names = sorted(p.stem for p in (run.path / "figures").glob("*.png"))
        assert names == sorted(get_experiment(experiment_id).figures)


def test_presets_are_plain_data_and_the_quick_linear_configuration_is_note_a():
    quick = presets.LINEAR["quick"]
    assert (quick.n_classes, quick.n_per_class, quick.width, quick.n_layers) == (3, 10, 10, 4)
    assert quick.lambda_w == quick.lambda_h == 5e-3 and quick.layer == 3
    tables = [presets.LINEAR, presets.RELU, presets.REGULARISATION, presets.LAYERS]
    json.dumps([{tier: preset.to_dict() for tier, preset in table.items()} for table in tables])


def test_the_mlp_paper_preset_dry_runs_on_fashion_mnist_fixture_files(tmp_path):
    """The paper preset reads Fashion-MNIST's IDX files (fixtures in the real format) and
    builds its network; without the files it stops with a clear error."""
    config = get_experiment("dlufm-mlp").config("paper")
    n = config.data.options["n_train_per_class"]
    write_idx_dataset(tmp_path / "fashion-mnist", n_train=10 * n, n_test=10 * n)
    summary = mlp_dry_run(config, data_dir=tmp_path)
    width = config.width
    assert summary["dataset"] == "fashion_mnist" and summary["n_train"] == 10 * n
    assert summary["train_class_counts"] == [n] * 10 and summary["input_dim"] == 784
    assert summary["dims"] == [784] + [width] * (config.depth - 1) + [10]
    assert summary["hessian_sizes"] == {config.depth - 1: width * width,
                                        config.depth: 10 * width}  # fmt: skip
    with pytest.raises(FileNotFoundError, match="absent"):  # no stand-in data
        mlp_dry_run(config, data_dir=tmp_path / "absent")
    assert get_experiment("dlufm-mlp").dry_run is mlp_dry_run


def test_the_mlp_standard_preset_reads_paper_004s_three_classes(tmp_path):
    """``standard`` keeps Fashion-MNIST's classes 0, 1 and 3 (K = 3), relabelled 0..2 in that
    order, so its last layer has K = 3 outputs; a class list on a dataset without one is a
    clear error."""
    config = get_experiment("dlufm-mlp").config("standard")
    assert list(config.data.options["classes"]) == [0, 1, 3]
    n = config.data.options["n_train_per_class"]
    write_idx_dataset(tmp_path / "fashion-mnist", n_train=10 * n, n_test=10 * n)
    summary = mlp_dry_run(config, data_dir=tmp_path)
    assert summary["n_train"] == 3 * n and summary["train_class_counts"] == [n] * 3
    assert summary["dims"][-1] == 3
    assert summary["hessian_sizes"][config.depth] == 3 * config.width
    # relabelled 0, 1, 2 and sorted class-major, as the UFM's labels
    data = load_data(config.data, tmp_path, 0)
    assert data.train.y.tolist() == [0] * n + [1] * n + [2] * n
    with pytest.raises(ValueError, match=r"'digits'.*'classes'"):
        DataSpec("digits", config.data.options, steps=config.data.steps)


def test_reproduce_004_paper_dry_run_on_the_command_line(tmp_path):
    """Every experiment of paper 004 dry-runs from the command line without a traceback:
    dlufm-mlp and the four curvature experiments build their data and networks from
    Fashion-MNIST fixture files."""
    from typer.testing import CliRunner

    from collapselab.cli.main import app

    n = get_experiment("dlufm-mlp").config("paper").data.options["n_train_per_class"]
    write_idx_dataset(tmp_path / "fashion-mnist", n_train=10 * n, n_test=10 * n)
    result = CliRunner().invoke(
        app, ["reproduce", "004", "--preset", "paper", "--dry-run", "--data-dir", str(tmp_path)]
    )
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert "dlufm-mlp (preset paper)" in text and "input dim: 784" in text
    for name in (
        "curvature-mlp-ce",
        "curvature-mlp-mse",
        "curvature-conv-ce",
        "curvature-conv-mse",
    ):
        assert f"{name} (preset paper)" in text
    assert text.count("eigenpairs: 210") == 4 and text.count(f"n train: {10 * n}") >= 4
    assert "nothing was trained" in text


def test_mlp_claims_are_not_evaluable_without_zero_training_error(runs):
    run = runs["dlufm-mlp"]
    accuracy = float(run.load_array("mlp_meta")["train_accuracy"])
    stored = stored_claims(run)
    for name in ("mlp-hessian-k2-outliers", "mlp-kronecker-eigenvectors-align",
                 "mlp-gradient-in-top-space", "mlp-papyan-knockouts"):  # fmt: skip
        premise = stored[name]["premise"]
        assert premise["met"] is (accuracy == 1.0)
        assert premise["values"] == {"train_accuracy": accuracy}
        if accuracy < 1.0:
            assert stored[name]["verdict"] == "not evaluable"
            assert stored[name]["detail"] == (
                f"premise not met: final training accuracy {accuracy:.4f} (= 1?)"
            )


def test_mlp_claims_report_the_premise_of_each_layer_from_its_input_features(runs):
    """Every per-layer claim of dlufm-mlp ends with DNC1 of each analysed layer's input
    features; it equals Tr(Σ_W Σ_B⁺)/K of the trained MLP's own hidden features (the
    library's convention: ddof 0, class-balanced), computed here by loops over the samples."""
    run = runs["dlufm-mlp"]
    config = run.config
    data = load_data(get_experiment("dlufm-mlp").config(run.preset).data, None, 0)
    seed_everything(0)
    model = MLP(64, 10, width=config["width"], depth=config["depth"], bias=False)
    model.load_state_dict(Run.open(run.path).latest_checkpoint().load()["model"])
    x, y = data.train.x.double(), data.train.y.numpy()
    inputs = [x]  # h^(1) = x, h^(l+1) = relu(W_l h^(l))
    for block in model.layers:
        inputs.append(torch.relu(inputs[-1] @ block.linear.weight.detach().double().T))
    detail = lifted_claims(run)["mlp-hessian-k2-outliers"]["detail"]
    for ell in run.config["layers"]:
        h = inputs[ell - 1].numpy()
        classes = sorted(set(y.tolist()))
        means = [h[y == c].mean(axis=0) for c in classes]
        grand = np.mean(means, axis=0)
        within = sum(np.outer(v - means[c], v - means[c]) for c in classes for v in h[y == c])
        between = sum(np.outer(m - grand, m - grand) for m in means) / len(classes)
        dnc1 = np.trace(within / len(h) @ np.linalg.pinv(between, rcond=1e-10)) / len(classes)
        stored = float(run.load_array(f"mlp_final_layer{ell}")["dnc1"][ell - 1])
        assert stored == pytest.approx(dnc1, rel=1e-6)
        assert f"W_{ell} {stored:.3g} (" in detail
    for name in ("mlp-kronecker-eigenvectors-align", "mlp-gradient-in-top-space",
                 "mlp-papyan-knockouts"):  # fmt: skip
        assert lifted_claims(run)[name]["detail"].endswith(detail[detail.index(" [the premise") :])
