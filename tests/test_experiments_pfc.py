"""Paper 001's experiments: tiny presets end to end, stored numbers against independent
recomputation, and the claim evaluators against brute-force references on synthetic runs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from collapselab._threads import serial_threads
from collapselab.experiments import (
    RunResults,
    evaluate_claims,
    experiments_for_paper,
    get_experiment,
    refresh_run,
    run_experiment,
)
from collapselab.experiments.pfc import (
    TRAINING_CLAIMS,
    build_network_setup,
    mufm_data,
    toy_instance,
)
from collapselab.experiments.pfc.claims import BAND, DEPTH_RHO, EARLY_MARGIN
from collapselab.experiments.pfc.training import run_training
from collapselab.experiments.registry import RunContext
from collapselab.metrics.nc import nc1_trace_ratio, nc2_etf_distance, ncc_accuracy
from collapselab.store import Run
from collapselab.theory.ufm import column_pfc
from collapselab.train import seed_everything
from tests._experiments import check_completed_run, stored_claims

IDS = [
    "pfc-toy",
    "pfc-training-fc",
    "pfc-training-conv",
    "pfc-mufm",
    "pfc-lambda-sweep",
    "pfc-theorems",
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every experiment's tiny preset, run once for the module."""
    root = tmp_path_factory.mktemp("pfc-runs")
    with serial_threads():  # module-scoped: runs before the per-test autouse fixture
        return {e: run_experiment(e, preset="tiny", root=root) for e in IDS}


def test_the_paper_registers_six_experiments_with_three_presets():
    found = {e.id: e for e in experiments_for_paper("pfc")}
    assert sorted(found) == sorted(IDS)
    for experiment in found.values():
        assert {"quick", "paper", "tiny"} <= set(experiment.presets)
        assert experiment.paper == "001" and experiment.figures and experiment.claims
        assert experiment.draw is not None


@pytest.mark.parametrize("experiment_id", IDS)
def test_tiny_preset_runs_end_to_end_with_figures_and_evaluable_claims(runs, experiment_id):
    claims = check_completed_run(runs[experiment_id], get_experiment(experiment_id))
    for entry in claims.values():
        assert entry["verdict"] in ("holds", "does not hold"), entry


def test_figures_are_redrawn_from_the_stored_results(runs):
    for experiment_id in ("pfc-training-fc", "pfc-lambda-sweep"):
        run = runs[experiment_id]
        for png in (run.path / "figures").glob("*.png"):
            png.unlink()
        refresh_run(run.path)
        names = sorted(p.stem for p in (run.path / "figures").glob("*.png"))
        assert names == sorted(get_experiment(experiment_id).figures)


# ---------------------------------------------------------------------------------------
# stored numbers against independent recomputation


def _preset(run: Run):
    """The typed preset a run ran (its manifest records it as plain data)."""
    return get_experiment(run.experiment).config(run.preset)


def _final_layer_values(run: Run, metric: str) -> pd.Series:
    table = run.metrics()
    rows = table[(table["metric"] == metric) & (table["layer"] != "") & (table["epoch"] >= 0)]
    rows = rows[rows["epoch"] == rows["epoch"].max()]
    return rows.drop_duplicates("layer", keep="last").set_index("layer")["value"]


def _trained_features(run: Run) -> tuple[list[np.ndarray], np.ndarray]:
    """Rebuild the tiny network from its last checkpoint and capture every measured layer."""
    setup = build_network_setup(_preset(run), seed=run.seed)
    state = Run.open(run.path).latest_checkpoint().load()
    setup.model.load_state_dict(state["model"])
    setup.model.eval()
    outputs: dict[str, torch.Tensor] = {}
    modules = dict(setup.model.named_modules())
    hooks = [
        modules[name].register_forward_hook(
            lambda m, a, out, name=name: outputs.__setitem__(name, out.detach())
        )
        for name in setup.layers
    ]
    with torch.no_grad():
        setup.model(setup.data.train.x)
    for hook in hooks:
        hook.remove()
    feats = [outputs[name].flatten(1).double().numpy() for name in setup.layers]
    return feats, setup.data.train.y.numpy()


def test_training_run_stores_s_positions_and_geodesic_end_points(runs):
    run = runs["pfc-training-fc"]
    feats, y = _trained_features(run)
    # Theorem 1's S by explicit loops over classes (mean of the class means as h_G)
    classes = np.unique(y)
    m0 = np.array([feats[0][y == k].mean(axis=0) for k in classes])
    m1 = np.array([feats[-1][y == k].mean(axis=0) for k in classes])
    c0, c1 = m0 - m0.mean(axis=0), m1 - m1.mean(axis=0)
    s = sum(float(c0[k] @ c1[k]) for k in range(classes.size))
    table = run.metrics()
    stored = table[table["metric"] == "theorem1_s"]["value"].iloc[-1]
    assert stored == pytest.approx(s, rel=1e-5)
    # relative positions pos(l): cumulative un-squared path length over all samples
    steps = [np.linalg.norm(b - a, axis=1).sum() for a, b in itertools.pairwise(feats)]
    expected = np.concatenate([[0.0], np.cumsum(steps) / np.sum(steps)])
    geo = run.load_array("geodesic")
    np.testing.assert_allclose(geo["positions"], expected, rtol=1e-5, atol=1e-6)
    # at t = 0 and t = 1 the line is the actual first / last layer: prediction = measurement
    for key, fn in (
        ("nc1_trace_ratio", nc1_trace_ratio),
        ("nc2_etf_distance", nc2_etf_distance),
        ("ncc_accuracy", ncc_accuracy),
    ):
        observed = _final_layer_values(run, key)
        layers = [str(n) for n in geo["layers"]]
        for i in (0, -1):
            direct = fn(torch.from_numpy(feats[i]), torch.from_numpy(y))
            assert observed[layers[i]] == pytest.approx(direct, rel=1e-5, abs=1e-7)
            assert geo[f"predicted_{key}"][i] == pytest.approx(direct, rel=1e-5, abs=1e-7)
        assert geo[f"curve_{key}"].shape == geo["t"].shape == (11,)
    # the closed form of PFC1 along the line is the directly evaluated curve
    np.testing.assert_allclose(geo["pfc1_closed_form"], geo["curve_nc1_trace_ratio"], rtol=1e-9)


def test_mufm_rows_are_the_metrics_of_the_stored_solutions(runs):
    run = runs["pfc-mufm"]
    config = _preset(run)
    X, y = mufm_data(config, run.seed)
    assert X.shape == (config.dim, config.n_classes * config.n_per_class)
    assert np.all(np.diff(y) >= 0)  # columns sorted by class, as Y = I_K ⊗ 1_n^T
    solutions = run.load_array("solutions")
    np.testing.assert_array_equal(solutions["X"], X)
    table = run.metrics()
    for layer in ("ufm_literal", "ufm_converged", "mufm_literal", "mufm_converged"):
        expected = column_pfc(solutions[layer], y)
        rows = table[table["layer"] == layer].set_index("metric")["value"]
        for key, value in expected.items():
            assert rows[key] == pytest.approx(value, rel=1e-12)
    H = solutions["mufm_converged"]
    align = np.linalg.norm(H / np.linalg.norm(H) - X / np.linalg.norm(X))
    rows = table[table["layer"] == "mufm_converged"].set_index("metric")["value"]
    assert rows["alignment"] == pytest.approx(align, rel=1e-12)
    assert rows["grad_norm"] <= config.tol
    claims = stored_claims(run)
    assert claims["ufm-exact-collapse"]["verdict"] == "holds"
    assert claims["converged-below-literal"]["verdict"] == "holds"


def test_lambda_sweep_grid_and_claims(runs):
    run = runs["pfc-lambda-sweep"]
    sweep = run.load_array("sweep")
    np.testing.assert_allclose(sweep["ratio"], [0.1, math.sqrt(0.4), 4.0], rtol=1e-12)
    np.testing.assert_allclose(sweep["lam"], sweep["ratio"] * 0.005, rtol=1e-12)
    assert sweep["converged_nc1_trace_ratio"].shape == (3,)
    assert np.all(sweep["converged_objective"] < sweep["literal_objective"])
    claims = stored_claims(run)
    for name, key in (
        ("sweep-alignment-decreases-with-lambda", "converged_alignment"),
        ("sweep-pfc1-increases-with-lambda", "converged_nc1_trace_ratio"),
    ):
        expected = stats.spearmanr(sweep["ratio"], sweep[key]).statistic
        assert claims[name]["values"]["spearman"] == pytest.approx(expected, abs=1e-12)


def test_theorem_claims_separate_the_published_and_corrected_reduction(runs):
    claims = stored_claims(runs["pfc-theorems"])
    assert claims["theorem3-reduction-corrected"]["verdict"] == "holds"
    published = claims["theorem3-reduction-as-published"]
    assert published["verdict"] == "does not hold"
    assert published["values"]["feature_error"] > 1e-2
    assert claims["theorem1-monotone-when-s-nonnegative"]["verdict"] == "holds"


def test_toy_instance_ends_on_the_procrustes_aligned_simplex_etf():
    h0, h1, y = toy_instance(3, 4, 0.8, 1.6, seed=3)
    labels = torch.from_numpy(y)
    assert nc1_trace_ratio(torch.from_numpy(h1), labels) == 0.0
    assert nc2_etf_distance(torch.from_numpy(h1), labels) < 1e-12
    m0 = np.array([h0[y == k].mean(axis=0) for k in range(3)])
    m1 = np.array([h1[y == k][0] for k in range(3)])
    c0, c1 = m0 - m0.mean(axis=0), m1 - m1.mean(axis=0)
    np.testing.assert_allclose(m1.mean(axis=0), m0.mean(axis=0), atol=1e-12)
    rms = np.sqrt(np.mean(np.sum(c0**2, axis=1)))
    np.testing.assert_allclose(np.linalg.norm(c1, axis=1), 1.6 * rms, rtol=1e-12)
    # Procrustes: no rotation or reflection of the ETF has a larger S = Σ_k <c0_k, c1_k>
    s = float(np.sum(c0 * c1))
    best = -np.inf
    for angle in np.linspace(0.0, 2 * np.pi, 721):
        rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
        for flip in (np.eye(2), np.diag([1.0, -1.0])):
            best = max(best, float(np.sum(c0 * (c1 @ flip @ rot))))
    assert s >= best - 1e-9 and s > 0


# ---------------------------------------------------------------------------------------
# claim evaluators against brute force on a synthetic run


def _synthetic_results(final: dict[str, list[float]], early: dict[int, list[float]], geo: dict):
    layers = ["l0", "l1", "l2", "l3"]
    rows = []
    for epoch, pfc1 in early.items():
        for layer, v in zip(layers, pfc1, strict=True):
            rows.append((epoch, epoch, "train", layer, "nc1_trace_ratio", v))
    for key, values in final.items():
        for layer, v in zip(layers, values, strict=True):
            rows.append((10, 10, "train", layer, key, v))
    rows += [(10, 10, "train", "", "theorem1_s", 2.5), (10, 10, "train", "", "accuracy", 1.0)]
    rows += [(10, 10, "train", "", "effective_depth", 3.0)]
    table = pd.DataFrame(rows, columns=["step", "epoch", "split", "layer", "metric", "value"])
    arrays = {"geodesic": {"layers": np.array(layers), **geo}}
    return RunResults(table, {"preset": "tiny", "config": {}}, arrays)


def _brute_band(observed: dict[str, list[float]], predicted: dict[str, list[float]]) -> float:
    worst = 0.0
    for key in observed:
        obs, pred = list(observed[key]), list(predicted[key])
        if key == "nc1_trace_ratio":
            obs, pred = [math.log10(v) for v in obs], [math.log10(v) for v in pred]
        span = max(obs) - min(obs)
        for o, p in zip(obs, pred, strict=True):
            worst = max(worst, abs(p - o) / span)
    return worst


def test_training_claims_on_a_synthetic_run_match_brute_force():
    final = {
        "nc1_trace_ratio": [1.0, 0.5, 0.3, 0.1],
        "nc2_etf_distance": [0.8, 0.5, 0.6, 0.7],  # rises after layer 1: rho = -0.2
        "ncc_accuracy": [0.9, 0.95, 1.0, 1.0],
    }
    early = {0: [1.0, 1.1, 1.2, 1.3], 1: [1.0, 0.9, 0.95, 0.8]}
    predicted = {
        "nc1_trace_ratio": [1.0, 0.4, 0.25, 0.1],
        "nc2_etf_distance": [0.8, 0.7, 0.55, 0.3],
        "ncc_accuracy": [0.9, 0.97, 0.99, 1.0],
    }
    t = np.linspace(0, 1, 5)
    geo = {
        **{f"predicted_{k}": np.array(v) for k, v in predicted.items()},
        "curve_nc1_trace_ratio": np.array([1.0, 0.6, 0.3, 0.2, 0.1]),
        "curve_nc2_etf_distance": np.array([0.8, 0.7, 0.71, 0.5, 0.3]),  # rises once
        "curve_ncc_accuracy": np.array([0.9, 0.95, 1.0, 1.0, 1.0]),
        "t": t,
    }
    document = evaluate_claims(TRAINING_CLAIMS, _synthetic_results(final, early, geo))
    got = {e["name"]: e for e in document["claims"]}
    assert got["last-layer-ncc-separable"]["verdict"] == "holds"
    assert got["last-layer-ncc-separable"]["values"]["effective_depth"] == 3.0
    assert got["pfc1-decreases-with-depth"]["verdict"] == "holds"
    assert got["pfc1-decreases-with-depth"]["values"]["spearman"] == pytest.approx(-1.0)
    assert got["pfc2-decreases-with-depth"]["values"]["spearman"] == pytest.approx(-0.2)
    assert got["pfc2-decreases-with-depth"]["verdict"] == "does not hold" and 0.2 < DEPTH_RHO
    assert got["pfc3-increases-with-depth"]["verdict"] == "holds"
    # early: rho(epoch 0) = +1, rho(epoch 1) = -0.8, rho(final PFC1) = -1
    at_init = got["order-not-established-at-initialization"]
    assert at_init["values"]["rho_early_minus_final"] == pytest.approx(2.0)
    assert at_init["verdict"] == "holds"
    after_one = got["order-not-established-after-first-epoch"]
    assert after_one["values"]["rho_early_minus_final"] == pytest.approx(0.2)
    assert after_one["verdict"] == "does not hold" and 0.2 < EARLY_MARGIN
    assert got["theorem1-s-nonnegative"]["verdict"] == "holds"
    band = got["geodesic-within-band"]
    assert band["values"]["max_deviation"] == pytest.approx(_brute_band(final, predicted))
    assert band["verdict"] == (
        "holds" if _brute_band(final, predicted) <= BAND else "does not hold"
    )
    mono = got["geodesic-prediction-monotone"]
    assert mono["verdict"] == "does not hold"
    assert mono["values"]["pfc2_max_rise"] == pytest.approx(0.01)


def test_paper_scale_geodesic_closed_forms_equal_the_direct_curves(runs, tmp_path):
    # the paper preset evaluates PFC1/PFC2 along the line in closed form (geodesic_direct
    # False); the same training (same seed) must give the directly evaluated tiny curves
    reference = runs["pfc-training-fc"]
    config = _preset(reference).replace(geodesic_direct=False)
    run = Run.create(tmp_path, "pfc-training-fc", "tiny", config.to_dict(), seed=0, run_id="closed")
    seed_everything(0)
    with run:
        run.set_status("running")
        run_training(run, RunContext(preset="tiny", config=config, seed=0))
    closed, direct = run.load_array("geodesic"), reference.load_array("geodesic")
    np.testing.assert_allclose(closed["positions"], direct["positions"], rtol=1e-12)
    for key in ("nc1_trace_ratio", "nc2_etf_distance", "ncc_accuracy"):
        for kind in ("curve", "predicted"):
            np.testing.assert_allclose(
                closed[f"{kind}_{key}"], direct[f"{kind}_{key}"], rtol=1e-9, atol=1e-12
            )
