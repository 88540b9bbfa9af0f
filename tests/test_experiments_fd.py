"""Paper 000's experiments: the per-iteration measurement (schedule, replay, M4 sources),
phase detection, and the tiny presets end to end with their stored numbers."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from collapselab._threads import serial_threads
from collapselab.data import (
    DataSplits,
    LabeledData,
    gaussian_mixture,
    load_data,
    read_tiny_imagenet,
)
from collapselab.experiments import TIERS, get_experiment, run_experiment
from collapselab.experiments.fd import presets
from collapselab.experiments.fd.claims import DIRECTION_CLAIMS, TWO_PHASE_CLAIMS
from collapselab.experiments.fd.directions import run_directions
from collapselab.experiments.fd.measurement import (
    DiversityRecorder,
    Trajectory,
    boundary_schedule,
    class_stratified,
    probe_indices,
)
from collapselab.experiments.fd.operations import replica_arms
from collapselab.experiments.fd.presets import Repeat, Sweep, TwoPhase
from collapselab.experiments.fd.training import (
    Job,
    build_model,
    detect,
    dry_run,
    measure,
    train_config,
)
from collapselab.experiments.fd.two_phase import run_two_phase
from collapselab.metrics.diversity import pseudo_neuron_similarity
from collapselab.models import MLP
from collapselab.track import Schedule
from collapselab.train import train
from tests._experiments import check_completed_run, experiment, registered, stored_claims
from tests._idx_files import write_idx_dataset
from tests._tiny_imagenet_files import write_tiny_imagenet

TINY = presets.TWO_PHASE["tiny"].base


@pytest.fixture(scope="module")
def two_phase_run(tmp_path_factory):
    """``run fd-two-phase --preset tiny`` once for the module."""
    root = tmp_path_factory.mktemp("fd-runs")
    with serial_threads():
        return run_experiment("fd-two-phase", preset="tiny", root=root, executor="serial")


def test_boundary_schedule_coarse_dense_and_replay_only():
    s = boundary_schedule(10, 2, (34, 42))
    assert [t for t in range(0, 51) if s.at_step(t)] == [0, 10, 20, 30, 34, 36, 38, 40, 42, 50]
    replay = boundary_schedule(10, 2, (34, 42), replay=True)
    assert [t for t in range(0, 51) if replay.at_step(t)] == [34, 36, 38, 42]


def test_probe_set_is_class_stratified_and_fixed():
    y = torch.tensor([0, 1, 2] * 10 + [2] * 5)
    a, b = class_stratified(y, 4, seed=3), class_stratified(y, 4, seed=3)
    assert torch.equal(a, b)
    assert torch.bincount(y[a]).tolist() == [4, 4, 4]
    with pytest.raises(ValueError, match="class 0 has 10 training samples; the loss subset"):
        class_stratified(y, 11, seed=0, what="the loss subset")
    data = LabeledData(torch.zeros(4, 2), torch.tensor([0, 0, 2, 2]), 3, "d", {})
    with pytest.raises(ValueError, match=r"no sample of classes \[1\]"):
        probe_indices(data, 1, seed=0)


def _small(seed: int = 0) -> tuple[DataSplits, MLP]:
    data = gaussian_mixture(3, 6, 20, clusters_per_class=2, mean_scale=2.0, seed=seed)
    return data, MLP(6, 3, width=5, depth=4, gamma=1.0)


def test_m4_probe_mean_is_m4_of_the_autograd_mean_gradient():
    """The recorded probe-mean M4 (the family's, from rank-1 factors) equals M4 of
    -η ∂(mean probe loss)/∂W computed by autograd on the same weights."""
    data, _ = _small()
    model = build_model(TINY.model.replace(depth=4, width=5), 6, 3, seed=0)
    probe = LabeledData(data.train.x, data.train.y, 3, "p", {})
    rec = DiversityRecorder(model, probe, data.train, boundary_schedule(1), lr=0.1)
    rec.on_train_start(None)
    row = rec.rows[0]
    loss = torch.nn.functional.cross_entropy(model(data.train.x), data.train.y)
    for i in range(3):
        weight = model.layers[i].linear.weight
        (grad,) = torch.autograd.grad(loss, [weight], retain_graph=True)
        expected = pseudo_neuron_similarity(-0.1 * grad.double())
        assert row[f"m4_probe_mean/layers.{i}.linear"] == pytest.approx(expected, rel=1e-6)
        if i > 0:  # post-ReLU inputs: the per-sample form is identically 1 (note A5)
            assert row[f"m4_per_sample/layers.{i}.linear"] == pytest.approx(1.0)
    assert np.isnan(row["m4_batch/layers.0.linear"])  # no step taken yet


def test_replay_reproduces_the_coarse_measurement_and_m4_batch_is_the_step():
    """The measurement does not change training: a replay measured at other steps gives
    bit-identical values at the steps both measured; m4_batch is M4 of W_t - W_{t-1}."""
    data, _ = _small()
    config = TINY.replace(iterations=24, batch_size=20)
    cfg = train_config(config.training, 60, seed=0, device="cpu")
    probe = LabeledData(data.train.x[::4], data.train.y[::4], 3, "p", {})

    def record(schedule: Schedule) -> list[dict]:
        model = build_model(config.model, 6, 3, seed=0)
        rec = DiversityRecorder(model, probe, data.train, schedule, cfg.lr, stop=24)
        train(model, data, cfg, [rec], None)
        return rec.rows

    coarse = record(boundary_schedule(8))
    dense = record(boundary_schedule(8, 1, (7, 9)))
    by_step = {r["step"]: r for r in dense}
    for row in coarse:
        assert row == pytest.approx(by_step[row["step"]], nan_ok=True)
    assert [r["step"] for r in dense] == [0, 7, 8, 9, 16, 24]
    # m4_batch at step 8 from an independent replay: W_8 - W_7
    model = build_model(config.model, 6, 3, seed=0)
    weights = []

    class Keep:
        def on_iteration_end(self, state):
            if state.iteration in (7, 8):
                weights.append(model.layers[1].linear.weight.detach().clone())

    train(model, data, cfg, [Keep()], None)
    expected = pseudo_neuron_similarity(weights[1] - weights[0])
    assert by_step[8]["m4_batch/layers.1.linear"] == pytest.approx(expected, rel=1e-12)
    assert np.isnan(by_step[0]["m4_batch/layers.1.linear"])
    # the per-sample form is degenerate: 1 after a ReLU (note A5)
    assert by_step[8]["m4_per_sample/layers.1.linear"] == pytest.approx(1.0)


def _trajectory(loss: list[float], m2: list[float]) -> Trajectory:
    steps = np.arange(len(loss)) * 10
    n = len(loss)
    layer = "layers.2.act"
    return Trajectory(
        steps,
        {
            "loss": np.array(loss, dtype=float),
            f"feature_cosine_cross_class/{layer}": np.array(m2, dtype=float),
            f"gradient_cosine_within_class/{layer}": np.linspace(0.1, 0.5, n),
        },
        None,
        None,
    )


def test_a_run_that_never_leaves_phase_1_gets_no_boundary():
    stuck = _trajectory([2.30, 2.30, 2.299, 2.30, 2.298], [0.5, 0.51, 0.52, 0.53, 0.54])
    found = detect(stuck, TINY.replace(smooth=1))
    assert found["left_phase1"] == 0.0 and found["plateau_end"] == -1.0
    assert found["phase1_length"] == 40.0  # censored at the last measured step
    two = _trajectory([2.30, 2.29, 2.28, 2.0, 1.5], [0.5, 0.6, 0.7, 0.6, 0.4])
    found = detect(two, TINY.replace(smooth=1))
    assert found["left_phase1"] == 1.0 and found["plateau_end"] == 30.0
    assert found["m2_peak_step"] == 20.0 and found["m2_peak"] == pytest.approx(0.7)


def test_a_phase_layer_out_of_range_is_a_clear_error():
    with pytest.raises(ValueError, match=r"phase_layer must be a hidden linear layer in \[1, 7\]"):
        measure(Job(TINY.replace(phase_layer=8)))


def test_two_phase_tiny_end_to_end_m2_rises_before_the_loss_drops(two_phase_run):
    """The small end-to-end run: the stored M2 of the third layer rises before the stored
    loss leaves its plateau, and the claim says so with those numbers."""
    spec = get_experiment("fd-two-phase")
    claims = check_completed_run(two_phase_run, spec)
    stored = two_phase_run.load_array("traj_clustered")
    steps, loss = stored["steps"], stored["loss"]
    m2 = stored["feature_cosine_cross_class"][:, 2]
    end = float(stored["phase_plateau_end"])
    assert end > 0 and loss[steps == end][0] < 0.95 * loss[0]
    assert np.all(loss[steps < end] >= 0.95 * loss[0])  # the plateau
    rise = m2[steps <= end].max() - m2[0]
    assert rise >= 0.02
    entry = claims["m2-rises-before-loss-drops"]
    assert entry["verdict"] == "holds"
    assert entry["values"]["clustered_rise"] == pytest.approx(rise)
    lo, hi = stored["dense_window"]
    assert 0 < lo < hi  # the window around the M2 peak, measured every 2 iterations
    assert set(np.diff(steps[(steps >= lo) & (steps <= hi)]).tolist()) == {2}


def _plateau_end(stored: dict) -> float:
    """Recomputed from the stored loss: the first step 5% below the start (-1: never)."""
    loss, steps = stored["loss"], stored["steps"]
    hits = np.nonzero(loss < 0.95 * loss[0])[0]
    return float(steps[hits[0]]) if hits.size else -1.0


@pytest.fixture(scope="module")
def operations_run(tmp_path_factory):
    """``run fd-operations --preset tiny`` once for the module."""
    root = tmp_path_factory.mktemp("fd-ops")
    with serial_threads():
        return run_experiment("fd-operations", preset="tiny", root=root, executor="serial")


def test_operations_tiny_claims_are_the_stored_phase_lengths(operations_run):
    spec = get_experiment("fd-operations")
    claims = check_completed_run(operations_run, spec)
    arms = presets.OPERATIONS["tiny"].arms
    ends = {arm: _plateau_end(operations_run.load_array(f"traj_{arm}")) for arm in arms}
    for arm in arms:
        stored = operations_run.load_array(f"traj_{arm}")
        assert float(stored["phase_plateau_end"]) == ends[arm]
        assert float(stored["phase_left_phase1"]) == float(ends[arm] >= 0)
    norm = claims["normalisation-breaks-the-trap"]
    assert norm["values"]["none_phase1_length"] == ends["baseline"] > 0
    lengths = claims["momentum-shortens-phase-1"]["values"]
    assert lengths["m0.0_phase1_length"] == ends["baseline"]
    expected = "holds" if ends["momentum-0.9"] < ends["baseline"] else "does not hold"
    assert claims["momentum-shortens-phase-1"]["verdict"] == expected
    stuck = claims["small-gamma-gets-stuck"]
    assert stuck["verdict"] == ("holds" if ends["gamma-0.1"] < 0 else "does not hold")
    assert stuck["values"]["small_gamma_left_phase1"] == float(ends["gamma-0.1"] >= 0)
    # groups the tiny preset does not sweep are not evaluable, not guessed
    assert claims["smaller-l2-shortens-phase-1"]["verdict"] == "not evaluable"


def test_repeated_arms_are_trained_with_further_seeds_and_compared_as_medians(
    tmp_path, monkeypatch
):
    """``repeat``: the arms of the equal-effective-step momentum control trained with three
    seeds each; the claim compares the medians of the stored lengths, lists every seed's,
    and is counted as an erratum demonstration (the note's control, A19)."""
    base = presets.OPERATIONS["tiny"].base.replace(iterations=120)
    config = Sweep(
        base=base,
        arms={
            "baseline": {},
            "momentum-0.9-lr-0.01": {"momentum": 0.9, "lr": 0.01},
            "momentum-0.9": {"momentum": 0.9},
        },
        groups={
            "momentum_equal_lr": [[0.0, "baseline"], [0.9, "momentum-0.9-lr-0.01"]],
            "momentum": [[0.0, "baseline"], [0.9, "momentum-0.9"]],  # baseline repeated only
        },
        repeat=Repeat(groups=["momentum_equal_lr"], seeds=3),
    )
    monkeypatch.setitem(get_experiment("fd-operations").presets, "tiny", config)
    with serial_threads():
        run = run_experiment("fd-operations", preset="tiny", root=tmp_path, executor="serial")
    replicas = run.manifest["replicas"]
    assert replicas["baseline"] == ["baseline", "baseline-seed1", "baseline-seed2"]
    assert "momentum-0.9" not in replicas
    lengths = {}
    for arm, names in replicas.items():
        stored = [run.load_array(f"traj_{name}") for name in names]
        lengths[arm] = [float(t["phase_phase1_length"]) for t in stored]
        first = stored[0]["feature_cosine_cross_class"]
        assert not np.array_equal(first, stored[1]["feature_cosine_cross_class"])  # new seed
    entry = stored_claims(run)["momentum-shortens-phase-1-at-equal-effective-lr"]
    assert entry["kind"] == "erratum"
    values = entry["values"]
    for value, arm in ((0.0, "baseline"), (0.9, "momentum-0.9-lr-0.01")):
        assert values[f"m{value}_phase1_length"] == np.median(lengths[arm])
        for i, length in enumerate(lengths[arm]):
            assert values[f"m{value}_seed{i}_phase1_length"] == length
    shorter = np.median(lengths["momentum-0.9-lr-0.01"]) < np.median(lengths["baseline"])
    assert entry["verdict"] == ("holds" if shorter else "does not hold")
    assert entry["erratum"]["wording"] == (
        "paper's attribution not refuted" if shorter else "paper's attribution confirmed confounded"
    )
    assert "(median of 3 seeds per arm)" in entry["detail"]
    mixed = stored_claims(run)["momentum-shortens-phase-1"]
    assert "(median of 3 seeds for 0.0; one seed for the others)" in mixed["detail"]
    assert mixed["values"]["m0.0_phase1_length"] == np.median(lengths["baseline"])
    assert "m0.9_seed0_phase1_length" not in mixed["values"]  # one seed: no per-seed values


def test_repeat_names_known_groups_and_at_least_one_seed():
    groups = {"l2": [[0.0, "baseline"], [1e-4, "l2-0.0001"]]}
    changes = {"baseline": {}, "l2-0.0001": {"l2": 1e-4}}

    def sweep(**repeat) -> Sweep:
        return Sweep(
            base=TINY, arms=changes, groups=groups, repeat=Repeat(**repeat) if repeat else None
        )

    assert replica_arms(sweep(), 0) == {}
    arms = replica_arms(sweep(groups=["l2"], seeds=2), 5)
    assert arms == {
        "baseline": ["baseline", "baseline-seed6"],
        "l2-0.0001": ["l2-0.0001", "l2-0.0001-seed6"],
    }
    with pytest.raises(ValueError, match=r"groups the config does not have: \['gamma'\]"):
        replica_arms(sweep(groups=["gamma"], seeds=2), 0)
    with pytest.raises(ValueError, match=r"repeat\.seeds must be >= 1, got 0"):
        replica_arms(sweep(groups=["l2"], seeds=0), 0)


def test_robustness_tiny_runs_and_reports_each_sweep(tmp_path):
    spec = get_experiment("fd-robustness")
    with serial_threads():
        run = run_experiment("fd-robustness", preset="tiny", root=tmp_path, executor="serial")
    claims = check_completed_run(run, spec)
    entry = claims["two-phases-across-activation"]
    rises = {}
    for value, arm in presets.ROBUSTNESS["tiny"].groups["activation"]:
        stored = run.load_array(f"traj_{arm}")
        end = float(stored["phase_phase1_length"])
        m2 = stored["feature_cosine_cross_class"][:, 2][stored["steps"] <= end]
        rises[value] = m2.max() - m2[0]
        assert entry["values"][f"{value}_m2_rise"] == pytest.approx(rises[value])
    assert claims["two-phases-across-depth"]["verdict"] == "not evaluable"


def test_paper_preset_dry_run_on_fixture_files(tmp_path):
    """The paper preset's arms (CIFAR-10 and MNIST, 9 x 512) built from fixture files."""
    write_idx_dataset(tmp_path, n_train=1000, n_test=10)  # balanced: 100 per class
    rng = np.random.default_rng(0)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for i in range(1, 6):
        batch = {
            b"data": rng.integers(0, 256, (200, 3072), dtype=np.uint8),
            b"labels": [j % 10 for j in range(200)],
        }
        (folder / f"data_batch_{i}").write_bytes(pickle.dumps(batch, protocol=2))
    test = {b"data": rng.integers(0, 256, (10, 3072), dtype=np.uint8), b"labels": list(range(10))}
    (folder / "test_batch").write_bytes(pickle.dumps(test, protocol=2))
    config = get_experiment("fd-two-phase").config("paper")
    assert set(config.arms) == {"cifar10", "mnist", "tiny_imagenet"}  # Tiny-ImageNet: below
    arms = {k: v for k, v in config.arms.items() if k != "tiny_imagenet"}
    summary = dry_run(config.replace(arms=arms), data_dir=tmp_path)
    assert set(summary) == {"cifar10", "mnist"}
    cifar, mnist = summary["cifar10"], summary["mnist"]
    assert cifar["input_dim"] == 3072 and mnist["input_dim"] == 784
    assert cifar["train_class_counts"] == [100] * 10 and mnist["n_train"] == 1000
    for arm in (cifar, mnist):
        assert arm["depth"] == 9 and arm["width"] == 512 and arm["batch_size"] == 100
        assert arm["logits_shape"] == [100, 10] and arm["probe_size"] == 200
        assert arm["phase_layer"] == "layers.2.act"
    assert cifar["lr"] == 0.1 and mnist["lr"] == 0.01  # the paper's A.1 and A.2
    ops = dry_run(get_experiment("fd-operations").config("paper"), data_dir=tmp_path)
    assert ops["norm-batchnorm"]["norm"] == "batchnorm" and ops["gamma-0.1"]["gamma"] == 0.1
    assert ops["l2-0.01"]["weight_decay"] == pytest.approx(0.02)  # λ‖W‖²: decay 2λ


def test_paper_preset_tiny_imagenet_arm_dry_run_on_fixture_files(tmp_path):
    """The paper's Tiny-ImageNet arm (A.3: its 50 classes by name, 32 x 32 crops, 9 x 512)
    built from a fixture tiny-imagenet-200 folder of 36 x 36 PNGs whose words.txt names
    the 50 classes among decoys (the probe and loss sets shrunk to the fixture's 3 images
    per class; everything else is the preset's)."""
    names = presets.TINY_IMAGENET_CLASSES
    words = {f"n{i:08d}": f"{name}, decoy {i}" for i, name in enumerate(reversed(names))}
    words |= {"n99999999": "giant decoy"}  # a class of the dataset the paper did not use
    write_tiny_imagenet(tmp_path, words, n_train=3, n_val=1, size=36)
    config = get_experiment("fd-two-phase").config("paper")
    arm = config.arms["tiny_imagenet"]
    small = config.replace(probe_per_class=2, loss_per_class=3, arms={"tiny_imagenet": arm})
    summary = dry_run(small, data_dir=tmp_path)
    tiny = summary["tiny_imagenet"]
    assert tiny["class_names"] == list(names)  # the paper's order, not the files'
    assert tiny["train_class_counts"] == [3] * 50 and tiny["input_dim"] == 3 * 32 * 32
    assert tiny["depth"] == 9 and tiny["width"] == 512 and tiny["lr"] == 0.1
    assert tiny["logits_shape"] == [100, 50] and tiny["batch_size"] == 100
    data = load_data(small.member("tiny_imagenet").data, tmp_path, 0)  # the central 32 x 32
    raw = read_tiny_imagenet(tmp_path, class_names=names).train.x[:, :, 2:34, 2:34]
    flat = raw.reshape(150, -1).double()
    expected = ((flat - flat.mean()) / flat.std()).float()  # one scalar mean and std
    assert torch.allclose(data.train.x, expected, atol=1e-6)


def test_directions_tiny_window_analysis_and_claims_from_stored_arrays(tmp_path):
    spec = get_experiment("fd-directions")
    with serial_threads():
        run = run_experiment("fd-directions", preset="tiny", root=tmp_path, executor="serial")
    claims = check_completed_run(run, spec)
    d = run.load_array("directions")
    end = float(run.load_array("traj_baseline")["phase_plateau_end"])
    assert end > 0 and d["window"][0] == 0 and d["window"][-1] == end  # phase 1: [0, T_end]
    acc = d["class_accuracy"]
    assert set(d["leading"].tolist()) == set(np.argsort(-acc, kind="stable")[:2].tolist())
    s = d["strengths"]
    assert s.shape == (2, 5) and np.all(s >= 0)
    ratio = s[:, 0] / s[:, 1]
    for cls, r in zip(d["leading"], ratio, strict=True):
        assert claims["primary-direction-dominates-average-change"]["values"][
            f"class{cls}_s1_over_s2"
        ] == pytest.approx(r)
    table = d["s_primary"] / d["s_noise"].max(axis=2)
    expected = "holds" if np.all(table >= 9.0) else "does not hold"
    assert claims["s-primary-order-of-magnitude-above-s-k"]["verdict"] == expected
    for mode in ("neg_grad", "single_sample_step", "batch_step"):
        assert d[f"o_{mode}_mean"].shape == d["window"].shape
    assert np.all(np.abs(d["m10_mean"]) <= 1.0)
    n_dominant = int(np.sum(acc > 2 / acc.size))
    assert claims["one-or-two-classes-learnt-in-phase-1"]["values"]["dominant_classes"] == (
        n_dominant
    )


def test_directions_of_a_stuck_baseline_say_so_instead_of_inventing_a_window(tmp_path):
    stuck = presets.DIRECTIONS["tiny"].replace(gamma=0.05, iterations=60)
    spec = experiment(
        "fd-directions-stuck",
        run_directions,
        paper="000",
        presets=dict.fromkeys(TIERS, stuck),
        claims=DIRECTION_CLAIMS,
    )
    with registered(spec), serial_threads():
        run = run_experiment("fd-directions-stuck", root=tmp_path, executor="serial")
    assert "directions" not in run.array_names()
    assert "never left phase 1" in run.manifest["directions"]
    entries = stored_claims(run)
    assert {e["verdict"] for e in entries.values()} == {"not evaluable"}
    assert "never left phase 1" in entries["o-positive"]["detail"]


def test_a_non_finite_loss_stops_the_run_cleanly_and_keeps_what_was_measured(tmp_path):
    diverging = TwoPhase(base=TINY.replace(lr=50.0, iterations=60), arms={"clustered": {}})
    spec = experiment(
        "fd-diverging",
        run_two_phase,
        paper="000",
        presets=dict.fromkeys(TIERS, diverging),
        claims=TWO_PHASE_CLAIMS,
    )
    with registered(spec), serial_threads():
        run = run_experiment("fd-diverging", root=tmp_path, executor="serial")
    stored = run.load_array("traj_clustered")
    assert "non-finite" in str(stored["stopped"]) or "NaN" in str(stored["stopped"])
    steps = stored["steps"]
    assert steps[0] == 0 and steps[-1] < 60  # measured until training stopped
    assert (
        np.isfinite(stored["loss"][0])
        and np.isfinite(stored["feature_cosine_cross_class"][0]).all()
    )
