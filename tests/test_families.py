"""Families as objects: needs, the catalogue, requests that collect only what they need, and
families written outside the package (in measure and in the Monitor, a model procedure too)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import collapselab
from collapselab.data.dataset import LabeledData
from collapselab.families import (
    DISTRIBUTED_MODES,
    MSE,
    NC,
    PFC,
    Diversity,
    Family,
    Key,
    Needs,
    catalogue,
    family_names,
    register_family,
    unregister_family,
)
from collapselab.families.builtin import BUILTIN
from collapselab.families.catalogue import owner, plan
from collapselab.families.collection import Collection, Request, StatsOptions
from collapselab.families.family import Layout
from collapselab.metrics.diversity import feature_cosine_similarity
from collapselab.models import MLP
from collapselab.probe import FeatureCapture, eval_mode
from collapselab.stats import Accumulator
from collapselab.track import Monitor


def blobs(seed: int = 0, n: int = 12, c: int = 3, d: int = 5, scale: float = 2.0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(c).repeat_interleave(n)
    x = scale * torch.randn(c, d, generator=g, dtype=torch.float64)[y]
    return x + torch.randn(len(y), d, generator=g, dtype=torch.float64), y


# ---------------------------------------------------------------------------------------
# Needs


def test_needs_union_and_passes():
    a = Needs(scatter="means")
    b = Needs(scatter="projected", ncc=True, signals={"gates"})
    c = Needs(scatter="auto", signals=frozenset({"features"}), model=True)
    u = a | b | c
    assert (u.scatter, u.ncc, u.classifier, u.model) == ("auto", True, False, True)
    assert u.signals == frozenset({"gates", "features"})
    assert (Needs().passes, a.passes, b.passes, Needs(signals={"features"}).passes) == (0, 1, 2, 1)
    with pytest.raises(ValueError, match="scatter must be one of"):
        Needs(scatter="full")
    with pytest.raises(ValueError, match="signals must be among"):
        Needs(signals={"weights"})
    with pytest.raises(ValueError, match="need scatter='projected'"):
        Needs(scatter="means", ncc=True)


# ---------------------------------------------------------------------------------------
# the catalogue


def test_every_key_has_one_owner_and_the_builtin_families_are_registered():
    assert {"nc", "mse", "pfc", "diversity"} <= set(family_names())
    names = [key.name for _, key in catalogue()]
    assert len(names) == len(set(names))
    assert owner("nc1") == "nc" and owner("mse_loss") == "mse" and owner("pfc_position") == "pfc"
    with pytest.raises(ValueError, match=r"unknown metric key 'nc1_trace'.*nc1_trace_ratio"):
        owner("nc1_trace")


def test_plan_routes_requested_keys_to_their_owners():
    pfc = PFC()
    resolved = plan([pfc])
    by_name = {fam.name: (fam, keys) for fam, keys in resolved.items()}
    # PFC asks the NC family for PFC1-3; a default NC object computes them.
    assert by_name["nc"][1] == {"nc1_trace_ratio", "nc2_etf_distance", "ncc_accuracy"}
    assert by_name["pfc"][0] is pfc and "pfc_position" in by_name["pfc"][1]
    nc = NC(keys=["nc1"], ddof=0)
    resolved = plan([nc, "pfc"], keys=["nc1_cdnv"])
    assert resolved[nc] == {
        "nc1",
        "nc1_cdnv",
        "nc1_trace_ratio",
        "nc2_etf_distance",
        "ncc_accuracy",
    }
    with pytest.raises(ValueError, match="given twice"):
        plan(["nc", NC()])
    with pytest.raises(ValueError, match="needs lam"):
        plan(["mse"])
    with pytest.raises(ValueError, match="needs lam"):
        plan(keys=["mse_loss"])
    with pytest.raises(TypeError, match="Family objects or family names"):
        plan([3])


def test_register_family_checks_names_and_keys():
    class Good(Family):
        name = "good_family"
        keys = (Key("good_key", "1", "test"),)

    class Clash(Family):
        name = "clash_family"
        keys = (Key("nc1", "taken", "test"),)

    class BadName(Family):
        name = "Bad Name"
        keys = (Key("bad_key", "1", "test"),)

    try:
        assert register_family(Good) is Good
        assert register_family(Good) is Good  # the same class again: no-op
        assert owner("good_key") == "good_family"
        with pytest.raises(ValueError, match="'nc1' of 'clash_family' is already defined by 'nc'"):
            register_family(Clash)
        with pytest.raises(ValueError, match="snake_case"):
            register_family(BadName)
        with pytest.raises(TypeError, match="Family subclass"):
            register_family(NC())
    finally:
        unregister_family("good_family")
    with pytest.raises(ValueError, match="unknown metric key"):
        owner("good_key")


# ---------------------------------------------------------------------------------------
# only what the request needs


def _collection(request: Request, d: int, mode: str = "auto"):
    layout = Layout(("",), {"": d}, "", n_classes=3)
    options = StatsOptions(mode=mode)
    request.setup(layout, options)
    return Collection(request, "train", layout, options)


def test_requests_collect_only_what_their_keys_need():
    h, y = blobs(0, d=5)
    cheap = _collection(Request(keys=["nc1", "nc1_trace_ratio", "nc2_etf_distance"]), 5)
    cheap.add("", "features", h, y)
    cheap.finalize()
    cheap.add_second("", h, y)
    stats = cheap.stats[""]
    assert stats.mode == "projected" and stats.state()["within"].shape == (2, 2)
    assert not stats.ncc and "ncc_confusion" not in stats.state()  # no decisions
    full = _collection(Request(["nc"]), 5)
    assert full.needs[""].scatter == "auto" and full.needs[""].ncc
    # The NC2 keys need the class means only: no pass 2 at all.
    means = _collection(Request(keys=["nc2_etf_distance", "nc2_equinorm_means"]), 5)
    assert means.second_pass == []
    # Diversity reads features only: no class statistics.
    div = _collection(Request(keys=["feature_cosine_all"]), 5)
    assert div.stats == {} and div.reads("features")
    # The dense scatter is required by the MSE family: refused when D is too large.
    with pytest.raises(ValueError, match="need the dense D x D within-class covariance"):
        _collection(Request([MSE(lam=1e-3)]), 5, mode="projected")


def test_measure_with_keys_equals_the_full_request():
    h, y = blobs(1, d=6)
    W = torch.randn(3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    full = collapselab.measure(h, y, W, lam=1e-3)
    for keys in (
        ["nc1", "nc1_trace_ratio", "nc2_etf_distance"],
        ["ncc_accuracy", "nc4_ncc_mismatch", "accuracy"],
        ["nc2_equinorm_means", "nc3_self_duality"],
        ["mse_ls_perp", "nc1_snr"],
    ):
        part = collapselab.measure(h, y, W, lam=1e-3, keys=keys)
        assert set(part) == set(keys)
        for k in keys:
            assert math.isclose(part[k], full[k], rel_tol=1e-12, abs_tol=1e-15), k
    # families= with options; a diversity key that needs only features works in measure.
    got = collapselab.measure(h, y, families=[NC(["nc1"], divide_by_c=False)])
    assert math.isclose(got["nc1"], 3 * full["nc1"], rel_tol=1e-12)
    div = collapselab.measure(h, y, keys=["feature_cosine_all"])
    assert div["feature_cosine_all"] == pytest.approx(
        feature_cosine_similarity(h, y).all_pairs, abs=1e-14
    )
    with pytest.raises(ValueError, match="needs more than a feature matrix"):
        collapselab.measure(h, y, keys=["gating_cosine_all"])
    with pytest.raises(ValueError, match="unknown metric key"):
        collapselab.measure(h, y, keys=["nc9"])


def test_monitor_runs_one_forward_pass_when_no_key_needs_pass_two():
    torch.manual_seed(0)
    x, y = blobs(2, n=10, d=4)
    data = LabeledData(x.float(), y, 3)
    model = MLP(4, 3, width=6, depth=3).double()
    passes = []
    handle = model.register_forward_pre_hook(lambda module, args: passes.append(1))
    batches = math.ceil(30 / 8)
    for families, n_passes in (
        ([NC(["nc2_etf_distance", "nc2_equinorm_means"])], batches),
        ([Diversity()], batches),
        ([NC(["nc1"])], 2 * batches),
    ):
        passes.clear()
        Monitor(model, data, families=families, cache_bytes=0, batch_size=8).measure_now()
        assert len(passes) == n_passes, families
    handle.remove()


# ---------------------------------------------------------------------------------------
# families written outside the package


class SquaredNorms(Accumulator):
    """Per-class sums of squared feature norms (a user's accumulator)."""

    def __init__(self, n_classes: int) -> None:
        super().__init__()
        self.n_classes = n_classes

    def update(self, features, labels):
        if self.is_empty:
            self._sums = {
                "sq": torch.zeros(self.n_classes, dtype=torch.float64),
                "n": torch.zeros(self.n_classes, dtype=torch.int64),
            }
        self._sums["sq"].index_add_(0, labels, (features * features).sum(dim=1))
        self._sums["n"] += torch.bincount(labels, minlength=self.n_classes)
        return self


class MeanNorm(Family):
    """The mean squared feature norm, and the between-class share of the variance."""

    name = "test_mean_norm"
    keys = (
        Key("test_mean_sq_norm", "(1/N) Σ_i ‖h_i‖²", "test", Needs(signals={"features"})),
        Key("test_between_share", "Tr Σ_B / Tr Σ_T", "test", Needs(scatter="projected")),
    )

    def accumulators(self, split, layout, keys):
        return {name: SquaredNorms(layout.n_classes) for name in layout.layers}

    def update(self, accs, layer, signal, values, y):
        accs[layer].update(values, y)

    def compute_layer(self, keys, layer, accs):
        out = {}
        if "test_mean_sq_norm" in keys:
            s = accs[layer.name].state()
            out["test_mean_sq_norm"] = float(s["sq"].sum() / s["n"].sum())
        if "test_between_share" in keys:
            st = layer.stats
            out["test_between_share"] = st.between_trace / (st.between_trace + st.within_trace)
        return out


class ClassifierHessianTrace(Family):
    """Tr of the Hessian of the mean training loss w.r.t. the classifier weight, from
    Hessian-vector products with the standard basis (a model procedure)."""

    name = "test_hessian"
    keys = (Key("test_hessian_trace", "Tr ∇²_W L", "test", Needs(model=True), where="model"),)

    def compute_model(self, keys, access):
        W = access.model.classifier.weight
        x, y = next(iter(access.data["train"]))

        def loss_of(w):
            logits = torch.func.functional_call(
                access.model, {"classifier.weight": w}, (x.to(w.dtype),)
            )
            return access.loss(logits, y).mean()

        trace = 0.0
        for i in range(W.numel()):
            e = torch.zeros(W.numel(), dtype=W.dtype)
            e[i] = 1.0
            _, hvp = torch.func.jvp(torch.func.grad(loss_of), (W.detach(),), (e.view_as(W),))
            trace += float(hvp.detach().flatten()[i])
        return {"train": {"": {"test_hessian_trace": trace}}}


@pytest.fixture
def user_families():
    register_family(MeanNorm)
    register_family(ClassifierHessianTrace)
    yield
    unregister_family("test_mean_norm")
    unregister_family("test_hessian")


def test_a_user_family_in_measure_and_in_the_monitor(user_families):
    h, y = blobs(3, d=5)
    got = collapselab.measure(h, y, keys=["test_mean_sq_norm", "test_between_share", "nc1"])
    means = torch.stack([h[y == c].mean(0) for c in range(3)])
    within = sum(((h[y == c] - means[c]) ** 2).sum() / len(y) for c in range(3))
    between = ((means - means.mean(0)) ** 2).sum() / 3
    assert got["test_mean_sq_norm"] == pytest.approx(float((h * h).sum(1).mean()), rel=1e-13)
    assert got["test_between_share"] == pytest.approx(
        float(between / (between + within)), rel=1e-12
    )
    assert got["nc1"] == pytest.approx(collapselab.measure(h, y)["nc1"], rel=1e-12)

    torch.manual_seed(3)
    data = LabeledData(h, y, 3)
    model = MLP(5, 3, width=7, depth=3, bias=True).double()
    monitor = Monitor(model, data, families=["nc", MeanNorm()], batch_size=7, schedule=None)
    res = monitor.measure_now()["train"]
    with eval_mode(model), FeatureCapture(model, monitor.layers) as cap, torch.no_grad():
        model(h)
        features = {n: t.clone() for n, t in cap.features.items()}
    for layer, H in features.items():
        ref = collapselab.measure(H, y, keys=["test_mean_sq_norm", "test_between_share", "nc1"])
        for key, value in ref.items():
            assert res[layer][key] == pytest.approx(value, rel=1e-10, abs=1e-13), (layer, key)


def test_a_model_procedure_family_matches_the_dense_hessian(user_families):
    h, y = blobs(4, d=4)
    data = LabeledData(h, y, 3)
    torch.manual_seed(4)
    model = MLP(4, 3, width=5, depth=3, bias=True).double()
    monitor = Monitor(
        model, data, families=[ClassifierHessianTrace(), "nc"], batch_size=len(y), schedule=None
    )
    got = monitor.measure_now()["train"][""]["test_hessian_trace"]
    W = model.classifier.weight.detach()

    def loss_of(w):
        logits = torch.func.functional_call(model, {"classifier.weight": w}, (h,))
        return nn.functional.cross_entropy(logits, y)

    with eval_mode(model):
        dense = torch.autograd.functional.hessian(loss_of, W).reshape(W.numel(), W.numel())
    assert got == pytest.approx(float(torch.trace(dense)), rel=1e-12)
    assert np.isfinite(got) and got > 0


def test_every_builtin_family_declares_its_distributed_mode():
    modes = {cls.name: cls.distributed for cls in BUILTIN}
    assert modes == {
        "nc": "reduced",
        "mse": "reduced",
        "pfc": "reduced",
        "diversity": "reduced",
        "curvature": "replicated",
        "pcbias": "replicated",
        "learning_order": "rank0",
    }
    assert all(mode in DISTRIBUTED_MODES for mode in modes.values())


def test_a_user_familys_default_mode_and_a_declared_one(user_families):
    # accumulators only: reduced; a model procedure without a declaration: refused
    assert MeanNorm().distributed_mode() == "reduced"
    assert ClassifierHessianTrace().distributed_mode() == "refuse"

    class Declared(ClassifierHessianTrace):
        name = "test_declared"
        distributed = "replicated"
        keys = (Key("test_declared_trace", "Tr", "test", Needs(model=True), where="model"),)

    assert Declared().distributed_mode() == "replicated"

    class Bad(Family):
        name = "test_bad_mode"
        distributed = "everywhere"
        keys = (Key("test_bad_mode_key", "1", "test"),)

    with pytest.raises(ValueError, match=r"distributed must be None or one of \('reduced'"):
        register_family(Bad)
