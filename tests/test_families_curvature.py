"""The curvature family in the Monitor: values equal the curvature package's, its schedule,
its spectra in arrays/ of the run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab.curvature import (
    GGNOperator,
    HessianOperator,
    Objective,
    papyan_decomposition,
    top_eigenpairs,
    weight_spectrum,
)
from collapselab.data import LabeledData
from collapselab.families import catalogue
from collapselab.families.builtin import BUILTIN, Curvature
from collapselab.models import MLP
from collapselab.store import Run
from collapselab.track import Monitor, Schedule
from tests._curvature import blobs, ufm_at_dnc

KEYS = [
    "hessian_top_eigenvalue",
    "ggn_top_eigenvalue",
    "gradient_fraction_top",
    "top_subspace_overlap",
    "papyan_class_top",
    "papyan_cross_rank",
    "weight_top_eigenvalue",
]


def _setup(seed: int = 0):
    x, y = blobs(n=24, d=5)
    torch.manual_seed(seed)
    model = MLP(5, 3, width=6, depth=3, bias=True).double()
    return model, LabeledData(x, y, 3), x, y


def test_the_family_is_registered_and_in_the_catalogue():
    assert Curvature in BUILTIN
    owned = {key.name for family, key in catalogue() if family == "curvature"}
    assert {"hessian_outliers", "papyan_within_top", "kronecker_alignment_min"} <= owned
    assert all(key.where == "weights" for family, key in catalogue() if family == "curvature")


def test_monitor_values_equal_the_curvature_package(tmp_path):
    model, data, x, y = _setup()
    run = Run.create(tmp_path, "curv")
    family = Curvature(
        KEYS,
        schedule=Schedule.build([2]),  # epoch 0 (the initial model) and epoch 2
        samples=24,
        batch_size=10,
        tol=1e-10,
        centring="class",
    )
    monitor = Monitor(model, data, families=[family], schedule=None, run=run, loss="mse")
    first = monitor.measure_now(epoch=0, step=0)["train"]
    assert {"layers.0.linear", "layers.1.linear", "classifier"} <= set(first)
    assert monitor.measure_now(epoch=1, step=3)["train"].get("classifier") is None  # skipped
    with torch.no_grad():
        model.classifier.weight.mul_(1.5)
    third = monitor.measure_now(epoch=2, step=6)["train"]
    run.flush()
    K, top = 3, 12
    for name in ("layers.1.linear", "classifier"):
        module = model.get_submodule(name)
        obj = Objective(model, "mse", [(x, y)], params=[module.weight])  # the same 24 samples
        H = HessianOperator(obj).dense()
        eig = np.linalg.eigvalsh(H.numpy())[::-1]
        assert third[name]["hessian_top_eigenvalue"] == pytest.approx(eig[0], rel=1e-8)
        pairs = top_eigenpairs(HessianOperator(obj), top, tol=1e-10)
        g = obj.gradient()
        fraction = float(((pairs.vectors[:, :K].T @ g) ** 2).sum() / (g @ g))
        assert third[name]["gradient_fraction_top"] == pytest.approx(fraction, rel=1e-6)
        assert 0.0 <= third[name]["top_subspace_overlap"] <= 1.0 + 1e-12
        ggn = np.linalg.eigvalsh(GGNOperator(obj).dense().numpy())[::-1]
        assert third[name]["ggn_top_eigenvalue"] == pytest.approx(ggn[0], rel=1e-8)
        dec = papyan_decomposition(obj, centring="class")
        top_class = float(dec.class_part.eigenpairs()[0][0])
        assert third[name]["papyan_class_top"] == pytest.approx(top_class, rel=1e-10)
        assert third[name]["papyan_cross_rank"] == len(dec.cross_part.eigenpairs()[0])
        assert third[name]["weight_top_eigenvalue"] == pytest.approx(weight_spectrum(module)[0])
    rows = run.metrics()
    assert set(rows[rows["layer"] == "classifier"]["step"]) == {0, 6}
    assert run.array_names() == ["curvature_step00000000", "curvature_step00000006"]
    arrays = run.load_array("curvature_step00000006")
    assert int(arrays["step"]) == 6 and int(arrays["epoch"]) == 2
    assert arrays["classifier:hessian_eigenvalues"][0] == pytest.approx(
        third["classifier"]["hessian_top_eigenvalue"]
    )
    density = arrays["classifier:hessian_density_weights"]
    assert np.allclose(density.sum(axis=1), 1.0)


def test_epochs_schedule_and_errors():
    model, data, *_ = _setup()
    fam = Curvature(["weight_top_eigenvalue"], schedule=Schedule.build([3], initial=False))
    monitor = Monitor(model, data, families=[fam], schedule=None, loss="ce")
    assert "classifier" not in monitor.measure_now(epoch=1)["train"]
    assert "classifier" in monitor.measure_now(epoch=3)["train"]
    with pytest.warns(UserWarning, match="needs the loss by name"):
        Monitor(
            model,
            data,
            families=[Curvature(["weight_top_eigenvalue"])],
            schedule=None,
            loss=lambda f, y: torch.nn.functional.cross_entropy(f, y, reduction="none"),
        ).measure_now()
    with pytest.raises(ValueError, match="multiple of 3"):
        Curvature(trace_products=10)
    with pytest.raises(ValueError, match="layers must be 'auto'"):
        Curvature(layers="classifier")


def test_the_family_on_the_deep_linear_ufm_gives_the_kronecker_formula():
    """Issue 13's cross-check: on paper 004's deep linear UFM as an ``nn.Module``, the family's
    layer-wise Hessian (top eigenvalues, Hutch++ trace, spectrum in the arrays) is note 004
    §3.8's ``(W_{L:l+1}ᵀW_{L:l+1}) ⊗ (1/N) H_l H_lᵀ``, away from collapse; at exact DNC the
    inner layer has K² outliers and the Kronecker vectors are eigenvectors (M11)."""
    K, L = 3, 3
    keys = ["hessian_top_eigenvalue", "hessian_outliers", "hessian_trace"]
    keys += ["kronecker_alignment_min", "ggn_top_eigenvalue"]

    def formula(model, x, m):
        left = torch.eye(K, dtype=torch.float64)
        for j in range(L, m, -1):
            left = left @ model.layers[j].weight.detach()
        feats = x @ model.layers[0].weight.detach().T
        for j in range(1, m):
            feats = feats @ model.layers[j].weight.detach().T
        return torch.kron(left.T @ left, feats.T @ feats / len(x))

    for collapsed in (False, True):
        model, x, y = ufm_at_dnc(K=K, L=L)
        if not collapsed:
            g = torch.Generator().manual_seed(5)
            with torch.no_grad():
                for layer in model.layers:
                    layer.weight.add_(0.3 * torch.randn(layer.weight.shape, generator=g).double())
        family = Curvature(
            keys, loss="mse_half", samples=len(y), batch_size=5, tol=1e-12, trace_products=108
        )
        monitor = Monitor(model, LabeledData(x, y, K), families=[family], schedule=None, loss="mse")
        values = monitor.measure_now(epoch=0)["train"]
        arrays = monitor.last_arrays["curvature"]
        for m in range(1, L + 1):
            name = f"layers.{m}"
            H = formula(model, x, m)
            eig = np.linalg.eigvalsh(H.numpy())[::-1]
            got = values[name]
            assert got["hessian_top_eigenvalue"] == pytest.approx(eig[0], rel=1e-10), name
            assert got["ggn_top_eigenvalue"] == pytest.approx(eig[0], rel=1e-10), name  # H = G
            assert got["hessian_trace"] == pytest.approx(float(torch.trace(H)), rel=1e-10), name
            spectrum = arrays[f"{name}:hessian_eigenvalues"]
            assert np.abs(spectrum - eig[: spectrum.size]).max() < 1e-10 * eig[0], name
        if collapsed:  # Theorem 4.1 on the inner layers
            for m in (1, 2):
                assert values[f"layers.{m}"]["hessian_outliers"] == K * K
                assert values[f"layers.{m}"]["kronecker_alignment_min"] == pytest.approx(1.0)


def test_the_family_measures_batchnorm_networks_with_running_statistics():
    """The Monitor measures in eval mode: BatchNorm layers use their running statistics
    (the package's ``batchnorm="eval"``), and the model's state is left as it was."""
    x, y = blobs(n=24, d=5)
    torch.manual_seed(0)
    model = MLP(5, 3, width=6, depth=3, bias=True, norm="batchnorm").double()
    with torch.no_grad():
        model(x)  # non-trivial running statistics
    running = model.layers[1].norm.running_mean.clone()
    family = Curvature(["hessian_top_eigenvalue"], layers=["classifier"], samples=24, tol=1e-10)
    monitor = Monitor(model, LabeledData(x, y, 3), families=[family], schedule=None, loss="ce")
    got = monitor.measure_now(epoch=0)["train"]["classifier"]["hessian_top_eigenvalue"]
    obj = Objective(model, "ce", [(x, y)], params=[model.classifier.weight], batchnorm="eval")
    ref = np.linalg.eigvalsh(HessianOperator(obj).dense().numpy())[-1]
    assert got == pytest.approx(ref, rel=1e-9)
    assert model.training and torch.equal(model.layers[1].norm.running_mean, running)
