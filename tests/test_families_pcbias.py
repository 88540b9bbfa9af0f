"""The pcbias family through the Monitor on a tiny deep linear network, against the pure
functions of collapselab.metrics.pcbias and an independent float64 reference (the compact
matrix and its least-squares optimum by numpy, the principal frame by SVD)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from collapselab.data import LabeledData
from collapselab.families import compact_pc_from_runs
from collapselab.families.builtin import PCBias
from collapselab.families.catalogue import catalogue
from collapselab.families.pcbias import DISTANCE_KEYS, SCALE_KEYS
from collapselab.metrics.pcbias import pc_distance, pc_ensemble_std, scale_matrix_statistics
from collapselab.models import DeepLinear, DeepReLU
from collapselab.store import Run
from collapselab.theory.pcbias import expected_scales, gradient_scale_matrices
from collapselab.track import Monitor

Q, K, N = 6, 3, 48


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    y = np.arange(N) % K
    x = (rng.normal(size=(N, Q)) + rng.normal(size=(K, Q))[y]) * np.geomspace(2.0, 0.2, Q)
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    model = DeepLinear([Q, 10, 10, K], init="def3")
    return model, LabeledData(xt, yt, K), xt.double().numpy(), y


def _compact(model: DeepLinear) -> np.ndarray:
    """W_L ... W_1 multiplied in float64 (the family reads the weights in float64)."""
    out = np.eye(Q)
    for layer in model.layers:
        out = layer.weight.detach().double().numpy() @ out
    return out


def _reference_distance(model: DeepLinear, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-PC column distances by an independent route: SVD of X for the frame (signs do
    not matter for a column norm), least squares for W_opt in input coordinates."""
    w = _compact(model)
    w_opt = np.linalg.lstsq(x, np.eye(K)[y], rcond=None)[0].T
    u = np.linalg.svd(x, full_matrices=False)[2].T
    return np.linalg.norm((w - w_opt) @ u, axis=0), float(np.linalg.norm(w - w_opt))


def test_pcbias_family_through_the_monitor_matches_the_pure_functions():
    model, data, x, y = _setup()
    family = PCBias.from_data(data.x, data.y, K, fraction=0.34)
    monitor = Monitor(model, data, families=[family], schedule=None, loss="mse")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    seen = []
    for measurement in range(2):
        got = monitor.measure_now(epoch=measurement, step=measurement)["train"]
        seen.append(got[""]["pc_distance"])
        per_pc, frob = _reference_distance(model, x, y)
        stored = monitor.last_arrays["pcbias"]["pc_distance"]
        np.testing.assert_allclose(stored, per_pc, rtol=1e-9, atol=1e-12)
        assert got[""]["pc_distance"] == pytest.approx(frob, rel=1e-9)
        count = math.ceil(0.34 * Q)  # 3 of 6 PCs
        assert got[""]["pc_distance_top"] == pytest.approx(per_pc[:count].mean(), rel=1e-9)
        assert got[""]["pc_distance_bottom"] == pytest.approx(per_pc[-count:].mean(), rel=1e-9)
        ws = [layer.weight.detach().double().numpy() for layer in model.layers]
        a, b = gradient_scale_matrices(ws)
        alpha, beta = expected_scales(model.widths, "def3")
        for layer in range(3):
            row = got[f"layers.{layer}"]
            sa = scale_matrix_statistics(a[layer], alpha[layer])
            sb = scale_matrix_statistics(b[layer], beta[layer])
            dev = np.abs(np.diag(b[layer]) - beta[layer])  # explicit for one statistic
            assert row["scale_b_diagonal_mean"] == pytest.approx(dev.mean(), rel=1e-9, abs=1e-15)
            for key in SCALE_KEYS:
                ref = sa if key.startswith("scale_a") else sb
                stat = key.split("_", 2)[2]
                assert row[key] == pytest.approx(ref[stat], rel=1e-9, abs=1e-15), (layer, key)
        # a few GD steps on the summed squared loss between the two measurements
        for _ in range(5):
            opt.zero_grad()
            loss = 0.5 * ((model(data.x) - torch.eye(K)[data.y]) ** 2).sum() / N
            loss.backward()
            opt.step()
    assert seen[1] != seen[0]  # the second measurement read the trained weights


def test_pcbias_family_row_variant_and_trace_reference():
    model, data, _, _ = _setup(1)
    family = PCBias.from_data(data.x, data.y, K, row=0, scales="trace")
    monitor = Monitor(model, data, families=[family], schedule=None, loss="mse")
    got = monitor.measure_now()
    frame = family.frame
    ref = pc_distance(frame.rotate(_compact(model))[None, None], frame.optimum(), row=0)[0]
    np.testing.assert_allclose(monitor.last_arrays["pcbias"]["pc_distance"], ref, rtol=1e-12)
    np.testing.assert_allclose(
        monitor.last_arrays["pcbias"]["compact_pc"], frame.rotate(_compact(model)), rtol=1e-12
    )
    weights = [layer.weight.detach().double().numpy() for layer in model.layers]
    diag = np.diag(gradient_scale_matrices(weights)[0][0])
    assert got["train"]["layers.0"]["scale_a_diagonal_mean"] == pytest.approx(
        np.abs(diag - diag.mean()).mean(), rel=1e-9
    )
    assert got["train"][""]["pc_distance_top"] == pytest.approx(ref[:1].mean(), rel=1e-9)


def test_pcbias_family_is_registered_and_checks_its_input():
    keys = {k.name for name, k in catalogue() if name == "pcbias"}
    assert keys == set(DISTANCE_KEYS) | set(SCALE_KEYS)
    assert PCBias().requested == SCALE_KEYS  # no frame: only the weight statistics
    with pytest.raises(ValueError, match="need frame="):
        PCBias(["pc_distance"])
    with pytest.raises(TypeError, match="frame must be"):
        PCBias(frame=np.eye(3))
    _, data, _, _ = _setup()
    with pytest.raises(ValueError, match="labels has 47 entries but x has 48"):
        PCBias.from_data(data.x, data.y[:-1])
    with pytest.raises(ValueError, match="scales"):
        PCBias(scales="expected")
    # a model that is not a bias-free linear chain: the Monitor warns and skips the family
    mlp = torch.nn.Sequential(torch.nn.Linear(Q, 4), torch.nn.ReLU(), torch.nn.Linear(4, K))
    with pytest.warns(UserWarning, match="bias-free"):
        monitor = Monitor(
            mlp, data, families=[PCBias()], layers=["1"], n_classes=K, schedule=None, loss="mse"
        )
        got = monitor.measure_now()
    assert "0" not in got["train"] and "2" not in got["train"]


def test_an_ensembles_compact_matrices_come_back_from_the_stored_runs(tmp_path):
    """Two tracked runs -> (E, N, K, q); their per-PC std equals an explicit loop over the
    members' W U (U from an SVD of X, up to each column's sign, which a std ignores)."""
    runs, members = [], []
    _, data, x0, _ = _setup(0)  # one data set, two inits
    for seed in (0, 1):
        model = _setup(seed)[0]
        run = Run.create(tmp_path, "pcbias-ensemble", seed=seed)
        family = PCBias.from_data(data.x, data.y, K)
        monitor = Monitor(model, data, families=[family], schedule=None, loss="mse", run=run)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        compacts = []
        for step in range(3):
            monitor.measure_now(epoch=step, step=step)
            compacts.append(_compact(model))
            opt.zero_grad()
            (0.5 * ((model(data.x) - torch.eye(K)[data.y]) ** 2).sum() / N).backward()
            opt.step()
        run.flush()
        runs.append(run)
        members.append(compacts)
    steps, compact = compact_pc_from_runs([runs[0], runs[1].path])
    np.testing.assert_array_equal(steps, [0, 1, 2])
    assert compact.shape == (3, 2, K, Q)
    u = np.linalg.svd(x0, full_matrices=False)[2].T
    for e in range(3):
        for j in range(Q):
            cols = [members[i][e] @ u[:, j] for i in range(2)]
            mean = (cols[0] + cols[1]) / 2
            std = math.sqrt(sum(((c - mean) ** 2).sum() for c in cols) / (2 - 1))  # ddof 1
            assert pc_ensemble_std(compact)[e, j] == pytest.approx(std, rel=1e-6, abs=1e-9)
    with pytest.raises(ValueError, match="non-empty list of runs"):
        compact_pc_from_runs([])
    empty = Run.create(tmp_path, "pcbias-none")
    with pytest.raises(ValueError, match="no pcbias measurement with compact_pc"):
        compact_pc_from_runs([empty])


def test_a_relu_chain_is_not_a_deep_linear_network():
    """DeepReLU has a bias-free linear chain's parameters; its ReLUs make it non-linear, so
    the family names them (the Monitor warns and skips) instead of reporting a compact
    matrix the net does not have."""
    _, data, _, _ = _setup()
    net = DeepReLU([Q, 10, 10, K], init="def3")
    with pytest.warns(UserWarning, match=r"\['acts.0', 'acts.1'\] are activations"):
        monitor = Monitor(net, data, families=[PCBias()], layers=["acts.0"], n_classes=K,
                          schedule=None, loss="mse")  # fmt: skip
        got = monitor.measure_now()
    assert all("scale_a_diagonal_mean" not in v for v in got["train"].values())
