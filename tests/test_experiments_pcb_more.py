"""Paper 002's experiments on non-linear networks and manipulated data (Figs. 4d, 8, 9, 11,
13): the tiny presets end to end (figures drawn, claims evaluated) and the stored numbers
against independent recomputation."""

from __future__ import annotations

import numpy as np
import pytest

from collapselab._threads import serial_threads
from collapselab.experiments import get_experiment, run_experiment
from collapselab.store import Run
from tests._experiments import check_completed_run, stored_claims


def _run(root, experiment_id: str) -> Run:
    with serial_threads():
        run_experiment(experiment_id, preset="tiny", root=root, executor="serial")
    return Run.open(root / f"{experiment_id}-tiny-seed0")


@pytest.fixture(scope="module")
def frequency_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("pcb-frequency"), "pcbias-frequency")


def test_frequency_runs_end_to_end_with_figures_and_claims(frequency_run):
    claims = check_completed_run(frequency_run, get_experiment("pcbias-frequency"))
    for entry in claims.values():
        assert entry["verdict"] in ("holds", "does not hold"), entry


def test_frequency_scores_match_brute_force(frequency_run):
    """Critical frequency (a loop over the partial sums), discriminability (a loop over
    the points of the standardised data) and each snapshot's best-matching number of terms
    (a loop over the grid) recomputed here from the stored points and boundaries."""
    d = frequency_run.load_array("frequency")
    x, y, kappa, phi = d["x"], d["y"], d["kappa"], d["phi"]
    m = len(kappa)
    for i in range(0, len(y), 7):
        sums = np.cumsum(
            [np.sin(2 * np.pi * k * x[i, 0] + p) for k, p in zip(kappa, phi, strict=True)]
        )
        right = [(x[i, 1] <= s) == (y[i] == 1) for s in sums]
        expected = next(j + 1 for j in range(m) if all(right[j:]))
        assert d["critical_frequency"][i] == expected
    z = (x - x.mean(0)) / x.std(0)
    k = int(frequency_run.config["k"])
    for i in range(0, len(y), 11):
        dist = np.linalg.norm(z - z[i], axis=1)
        dist[i] = np.inf
        nearest = np.argsort(dist, kind="stable")[:k]
        assert d["discriminability"][i] == pytest.approx(np.mean(y[nearest] == y[i]), abs=1e-12)
    x1, x2 = d["grid_x1"], d["grid_x2"]
    for member in range(d["boundary"].shape[0]):
        for s in range(d["boundary"].shape[1]):
            region = d["boundary"][member, s]
            agree = []
            for j in range(1, m + 1):
                lam = sum(np.sin(2 * np.pi * kappa[i] * x1 + phi[i]) for i in range(j))
                agree.append(np.mean(region == (x2[:, None] <= lam[None, :])))
            np.testing.assert_allclose(d["agreement"][member, s], agree, atol=1e-12)
            assert d["terms"][member, s] == int(np.argmax(agree)) + 1
    assert np.all((d["accessibility"] >= 0) & (d["accessibility"] <= 1))
    epochs = int(frequency_run.config["epochs"])
    assert d["train_accuracy"].shape == (int(frequency_run.config["members"]), epochs + 1)


def test_frequency_claims_are_the_stored_group_correlations(frequency_run):
    """The claim's binned Pearson r is np.corrcoef of the critical frequencies with the
    mean accessibility per critical frequency, computed here from the stored arrays."""
    d = frequency_run.load_array("frequency")
    claims = stored_claims(frequency_run)
    for name, value in (
        ("critical-frequency-vs-accessibility", "accessibility"),
        ("discriminability-vs-critical-frequency", "discriminability"),
    ):
        cf = d["critical_frequency"]
        groups = np.unique(cf)
        means = [d[value][cf == g].mean() for g in groups]
        r = np.corrcoef(groups, means)[0, 1]
        stored = claims[name]
        assert stored["values"]["binned_pearson"] == pytest.approx(r, abs=1e-12)
        assert stored["verdict"] == ("holds" if r <= -0.5 else "does not hold")
    terms = claims["boundary-adds-frequencies"]["values"]
    assert terms["first_terms"] == pytest.approx(d["terms"][:, 0].mean())
    assert terms["last_terms"] == pytest.approx(d["terms"][:, -1].mean())


@pytest.fixture(scope="module")
def stvgg_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("pcb-stvgg"), "pcbias-stvgg")


def test_stvgg_runs_end_to_end_with_figures_and_claims(stvgg_run):
    claims = check_completed_run(stvgg_run, get_experiment("pcbias-stvgg"))
    for entry in claims.values():
        assert entry["verdict"] in ("holds", "does not hold"), entry


def test_linearised_compact_matrix_is_the_jacobian_of_the_linear_twin():
    """W from unit images equals autograd's Jacobian of the linear twin (identity
    activations, average pooling, eval mode) at 0, and the twin is W x + f(0) on random
    inputs; the ReLU network itself is not (its non-linearity is what is ignored)."""
    import torch

    from collapselab.experiments.pcb.stvgg import linearised_compact_matrix
    from collapselab.models import StVGG

    torch.manual_seed(0)
    net = StVGG(3, in_channels=2, input_size=16, width_multiplier=0.125)
    for p in net.parameters():  # non-zero biases, so f(0) != 0
        p.data.add_(0.05 * torch.randn_like(p))
    w = linearised_compact_matrix(net)
    twin = StVGG(3, in_channels=2, linear=True, input_size=16, width_multiplier=0.125)
    twin.load_state_dict(net.state_dict())
    twin.eval()
    twin.double()
    jac = torch.autograd.functional.jacobian(
        lambda v: twin(v.reshape(1, 2, 16, 16))[0], torch.zeros(512, dtype=torch.float64)
    )
    np.testing.assert_allclose(w, jac.numpy(), rtol=0, atol=1e-12 * np.abs(w).max())
    x = torch.randn(4, 2, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        expected = twin(x).numpy()
        zero = twin(torch.zeros(1, 2, 16, 16, dtype=torch.float64)).numpy()
        net.eval()
        relu = net(x.float()).double().numpy()
    np.testing.assert_allclose(x.reshape(4, -1).numpy() @ w.T + zero, expected, atol=1e-12)
    assert np.abs(x.reshape(4, -1).numpy() @ w.T + zero - relu).max() > 1e-3


def test_stvgg_initial_std_recomputed_from_the_members_seeds(stvgg_run):
    """The stored per-PC std at epoch 0 equals the one recomputed here: every member's
    network drawn again with its seed, linearised, rotated into the principal frame of the
    (upsampled) training images, std over members (ddof 1), root of the sum over classes."""
    import torch

    from collapselab.experiments.pcb._common import one_hot
    from collapselab.experiments.pcb.networks import build_network, member_seed
    from collapselab.experiments.pcb.stvgg import linearised_compact_matrix, stvgg_inputs
    from collapselab.theory.pc_bias import principal_frame
    from collapselab.train import seed_everything

    config = {**stvgg_run.config, "seed": 0, "data_seed": 0, "data_dir": None}
    inputs = stvgg_inputs(config)
    assert inputs.x.shape[1] == 256  # 8 x 8 digits upsampled twice
    x = inputs.x.reshape(-1, 16, 16)
    np.testing.assert_array_equal(x[:, ::2, ::2], x[:, 1::2, 1::2])
    frame = principal_frame(inputs.x, one_hot(inputs.y, inputs.n_classes))
    ws = []
    for member in range(int(config["members"])):
        seed_everything(member_seed({**config, "member": member}))
        with torch.no_grad():
            net = build_network(config["net"], 256, inputs.n_classes)
        ws.append(linearised_compact_matrix(net) @ frame.basis)
    ws = np.stack(ws)
    expected = np.sqrt(ws.var(axis=0, ddof=1).sum(axis=0))
    d = stvgg_run.load_array("stvgg")
    np.testing.assert_allclose(d["std"][0], expected, rtol=1e-9)
    np.testing.assert_allclose(d["change"][0], 0.0, atol=0)


def test_stvgg_paper_preset_dry_runs_on_cifar10_fixture_files(tmp_path):
    """The paper preset reads CIFAR-10's cats and dogs from fixture files in the official
    format, builds a full-width st-VGG (q = 3072) and linearises 16 columns; nothing
    trained."""
    from collapselab.experiments.dry_run import dry_run_experiment
    from tests.test_experiments_pcb import _write_cifar_fixtures

    _write_cifar_fixtures(tmp_path)
    result = dry_run_experiment(get_experiment("pcbias-stvgg"), "paper", data_dir=tmp_path)
    assert result.ok, result.error
    assert result.built["image"] == [3, 32, 32]
    assert result.built["compact_shape"] == [2, 3072]
    assert result.built["columns_checked"] == 16
    assert result.built["n_train"] == 8


def test_frequency_dry_run_has_nothing_to_read_and_the_presets_are_the_papers():
    """The frequency data are generated: a dry run reads nothing at any preset; the paper
    preset has the paper's 10000/1000 points, 100 networks, lr 0.05, batch 100 and Fig. 13's
    snapshot epochs."""
    from collapselab.experiments.dry_run import dry_run_experiment

    spec = get_experiment("pcbias-frequency")
    for preset in ("standard", "paper"):
        result = dry_run_experiment(spec, preset)
        assert result.ok and result.built is None
    paper = spec.presets["paper"]
    assert paper["datasets"]["main"] == {"name": "frequency", "n_train": 10000, "n_test": 1000}
    assert (paper["members"], paper["lr"], paper["batch_size"]) == (100, 0.05, 100)
    assert paper["snapshots"] == [1, 100, 1000, 10000] and paper["epochs"] == 10000
