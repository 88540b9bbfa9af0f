"""Two gloo processes, each measuring its shard, give the single-process Monitor values."""

from __future__ import annotations

import json
import math
import os
import warnings
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from collapselab.data.dataset import LabeledData
from collapselab.families import (
    MSE,
    Curvature,
    Diversity,
    Family,
    Key,
    LearningOrder,
    Needs,
    PCBias,
    register_family,
    unregister_family,
)
from collapselab.models import MLP, DeepLinear
from collapselab.stats import Accumulator
from collapselab.store import Run
from collapselab.track import Monitor

KW = {"families": ["nc", "pfc", Diversity(gradients=True), MSE(lam=1e-2)]}


def make():
    g = torch.Generator().manual_seed(0)
    y = torch.arange(3).repeat_interleave(14)
    x = 2.0 * torch.randn(3, 4, generator=g)[y] + torch.randn(len(y), 4, generator=g)
    yt = torch.arange(3).repeat_interleave(5)
    xt = 2.0 * torch.randn(3, 4, generator=g)[yt] + torch.randn(len(yt), 4, generator=g)
    torch.manual_seed(0)
    model = MLP(4, 3, width=5, depth=3, bias=True).double()
    return model, LabeledData(x, y, 3), LabeledData(xt, yt, 3)


@contextmanager
def gloo_group(rank, world, init_file):
    """This process as rank ``rank`` of a gloo group (one torch thread), destroyed on exit."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        yield
    finally:
        dist.destroy_process_group()


def worker(rank, world, init_file, out_dir):
    with gloo_group(rank, world, init_file):
        model, train, test = make()
        # Uneven shards, in batches of different sizes on the two ranks.
        tr = torch.arange(17) if rank == 0 else torch.arange(17, len(train))
        te = torch.arange(4) if rank == 0 else torch.arange(4, len(test))
        run = Run.create(out_dir, f"rank{rank}")
        monitor = Monitor(
            model, train.subset(tr), test.subset(te), run=run, batch_size=5 + 3 * rank, **KW
        )
        res = monitor.measure_now(epoch=1)
        run.flush()
        with open(os.path.join(out_dir, f"out{rank}.json"), "w") as f:
            json.dump({"results": res, "rows": len(run.metrics())}, f)


def test_two_gloo_processes_match_single_process(tmp_path):
    mp.spawn(worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    outs = [json.loads((tmp_path / f"out{r}.json").read_text()) for r in (0, 1)]
    model, train, test = make()
    single = Monitor(model, train, test, batch_size=11, **KW).measure_now(epoch=1)
    assert outs[0]["rows"] > 0 and outs[1]["rows"] == 0  # only rank 0 writes
    n = 0
    for out in outs:
        got = out["results"]
        assert got.keys() == single.keys()
        for split in single:
            assert got[split].keys() == single[split].keys()
            for layer, values in single[split].items():
                assert got[split][layer].keys() == values.keys()
                for key, value in values.items():
                    other = got[split][layer][key]
                    assert math.isclose(other, value, rel_tol=1e-10, abs_tol=1e-12) or (
                        math.isnan(other) and math.isnan(value)
                    ), (split, layer, key, other, value)
                    n += 1
    assert n > 300


M4 = ["pseudo_neuron_cosine_probe_mean", "pseudo_neuron_cosine_per_sample"]
# float64 factors of the MLP 4-5-5-3: (4+5) + (5+5) + (5+3) values per sample, 216 bytes:
# rank 0's 17 samples (3,672 bytes) fit in this budget, rank 1's 25 (5,400) do not.
FACTOR_BUDGET = 4000


def factor_worker(rank, world, init_file, out_dir):
    with gloo_group(rank, world, init_file):
        model, train, _ = make()
        shard = torch.arange(17) if rank == 0 else torch.arange(17, len(train))
        fam = Diversity([*M4, "gradient_cosine_all"], gradients=True)
        monitor = Monitor(
            model, train.subset(shard), families=[fam], batch_size=6, cache_bytes=FACTOR_BUDGET
        )
        calls = [0]
        model.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
        res = monitor.measure_now(step=0)["train"]
        m4 = {n: {k: v[k] for k in M4} for n, v in res.items() if M4[0] in v}
        with open(os.path.join(out_dir, f"factors{rank}.json"), "w") as f:
            json.dump({"forwards": calls[0], "m4": m4}, f)


def test_processes_agree_on_reusing_the_sweeps_factors(tmp_path):
    """One process keeps the sweep's M4 factors within cache_bytes, the other cannot: both
    then run the family's own pass (a wrapped model's forward may run collectives, so every
    process must take the same passes), and both get the M4 of the whole data (the diversity
    family is "reduced": its M4 sums are added over the processes)."""
    mp.spawn(factor_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    outs = [json.loads((tmp_path / f"factors{r}.json").read_text()) for r in (0, 1)]
    # 17 and 25 samples in batches of 6: 3 and 5 batches, each run twice (sweep, own pass)
    assert [o["forwards"] for o in outs] == [6, 10]
    model, train, _ = make()
    alone = Monitor(model, train, families=[Diversity([*M4], gradients=True)])
    single = alone.measure_now(step=0)["train"]
    for out in outs:
        assert out["m4"]
        for name, values in out["m4"].items():
            for key in M4:
                assert math.isclose(values[key], single[name][key], rel_tol=1e-12), (name, key)


# ---------------------------------------------------------------------------------------
# Every built-in family under two processes, and families written outside the package.
#
# Tolerance: float64 throughout. A "reduced" value differs from one process's only in the
# order of its sums (a sum per shard, then the two added): a few ulps (1e-16 relative) of
# sums over 42 samples, amplified by the metrics' conditioning on this well-separated data
# by far less than 1e4 (the pseudo-inverse of the between-class scatter, cosines of
# sums): rel 1e-10 (abs 1e-12 for values near 0) leaves a wide margin while any change of
# the data each process reads (a shard's value instead of the whole's) moves the values
# by more than 1e-3. "replicated" and "rank0" values are computed from the same inputs as
# one process's (the same subset in the same order, the same weights): they agree to the
# same tolerance, and the learning-order arrays exactly.

CURVATURE_KEYS = [
    "hessian_top_eigenvalue",
    "hessian_outliers",
    "hessian_trace",
    "ggn_top_eigenvalue",
    "gradient_fraction_top",
    "papyan_class_top",
    "kronecker_alignment_mean",
    "weight_top_eigenvalue",
    "gradient_covariance_top_eigenvalue",
    "feature_covariance_top_eigenvalue",
]
# 6 samples of each class: class 0 from rank 0's shard, class 1 from both, class 2 from
# rank 1's; each process's own first samples would be another subset.
CURVATURE = {"samples": 18, "batch_size": 5, "tol": 1e-12, "density_steps": 0}


def every_family():
    """A fresh object of every built-in family (the pcbias family: see pcbias_setup)."""
    return [
        "nc",
        "pfc",
        MSE(lam=1e-2),
        Diversity(gradients=True, weight_changes=True),
        Curvature(CURVATURE_KEYS, **CURVATURE),
        LearningOrder(),
    ]


def pcbias_setup(train):
    """A deep linear network (the pcbias family reads a bias-free linear chain) and the
    family with the whole training set's principal frame (given to every process)."""
    torch.manual_seed(1)
    net = DeepLinear([4, 6, 5, 3]).double()
    return net, PCBias.from_data(train.x, train.y, 3)


class SquaredNorms(Accumulator):
    """Per-class sums of ||h||^2 and counts."""

    def update(self, features, labels):
        if self.is_empty:
            self._sums = {
                "sq": torch.zeros(3, dtype=torch.float64),
                "n": torch.zeros(3, dtype=torch.float64),
            }
        self._sums["sq"].index_add_(0, labels, (features * features).sum(dim=1))
        self._sums["n"] += torch.bincount(labels, minlength=3)
        return self


class MeanSquaredNorm(Family):
    """Accumulators only and no declared mode: "reduced" by default."""

    name = "test_dist_norm"
    keys = (Key("test_dist_mean_sq_norm", "(1/N) Σ_i ‖h_i‖²", "test", Needs(signals={"features"})),)

    def accumulators(self, split, layout, keys):
        return {name: SquaredNorms() for name in layout.layers}

    def update(self, accs, layer, signal, values, y):
        accs[layer].update(values, y)

    def compute_layer(self, keys, layer, accs):
        s = accs[layer.name].state()
        return {"test_dist_mean_sq_norm": float(s["sq"].sum() / s["n"].sum())}


class ClassifierNorm(Family):
    """A model procedure on the weights, declared "replicated"."""

    name = "test_dist_weights"
    distributed = "replicated"
    keys = (Key("test_dist_classifier_norm", "‖W‖_F", "test", Needs(model=True), where="model"),)

    def compute_model(self, keys, access):
        norm = float(access.model.classifier.weight.detach().norm())
        return {"train": {"": {"test_dist_classifier_norm": norm}}}


class ShardSize(Family):
    """A model procedure that declares no mode: refused under torch.distributed."""

    name = "test_dist_shard"
    keys = (Key("test_dist_shard_size", "samples seen", "test", Needs(model=True), where="model"),)

    def compute_model(self, keys, access):
        n = sum(len(batch[1]) for batch in access.data["train"])
        return {"train": {"": {"test_dist_shard_size": float(n)}}}


USER_FAMILIES = (MeanSquaredNorm, ClassifierNorm, ShardSize)


@contextmanager
def user_families():
    for cls in USER_FAMILIES:
        register_family(cls)
    try:
        yield
    finally:
        for cls in USER_FAMILIES:
            unregister_family(cls.name)


def sampler_loaders(*datasets, rank=None):
    """Loaders in batches of 5 over each whole data set: strided shards of a
    DistributedSampler (no shuffling; it repeats samples of the start to even the shards),
    or, with ``rank=None``, the one process's unshuffled loaders."""
    out = []
    for data in datasets:
        dataset = TensorDataset(data.x, data.y)
        sampler = None
        if rank is not None:
            sampler = DistributedSampler(dataset, num_replicas=2, rank=rank, shuffle=False)
        out.append(DataLoader(dataset, batch_size=5, sampler=sampler))
    return out


def measure_everything(rank):
    """What every process (rank 0, 1) or one process (rank None) measures."""
    model, train, test = make()
    shards = {
        0: (torch.arange(17), torch.arange(4)),
        1: (torch.arange(17, 42), torch.arange(4, 15)),
    }
    tr, te = (
        (train, test)
        if rank is None
        else (train.subset(shards[rank][0]), test.subset(shards[rank][1]))
    )
    size = 11 if rank is None else 5 + 3 * rank
    out = {}
    monitor = Monitor(model, tr, te, families=every_family(), batch_size=size)
    out["builtin"] = monitor.measure_now(epoch=1)
    order = monitor.last_arrays.get("learning_order", {})
    out["order"] = {k: v.tolist() for k, v in order.items() if k != "step"}
    net, family = pcbias_setup(train)
    out["pcbias"] = Monitor(net, tr, families=[family], batch_size=size).measure_now(epoch=1)
    # 42 and 14 samples: no repeated sample (it would count twice in the sums)
    loaders = sampler_loaders(train, test.subset(torch.arange(14)), rank=rank)
    families = ["nc", Curvature(CURVATURE_KEYS, **CURVATURE), LearningOrder()]
    out["sampler"] = Monitor(model, *loaders, families=families).measure_now(epoch=1)
    # 15 samples: rank 1 repeats the first; the learning order takes it once
    padded = Monitor(model, *sampler_loaders(test, rank=rank), families=[LearningOrder()])
    out["padded"] = padded.measure_now(epoch=1)["train"][""]["correct_fraction"]
    order = padded.last_arrays.get("learning_order", {})
    out["padded_order"] = {k: v.tolist() for k, v in order.items() if k != "step"}
    if rank is not None:  # shuffled shards: no global order to pick the subset in
        dataset = TensorDataset(train.x, train.y)
        sampler = DistributedSampler(dataset, num_replicas=2, rank=rank, shuffle=True, seed=0)
        shuffled = Monitor(
            model,
            DataLoader(dataset, batch_size=5, sampler=sampler),
            families=[Curvature(CURVATURE_KEYS, **CURVATURE)],
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            measured = shuffled.measure_now(epoch=1)["train"]
        skipped = [
            str(w.message) for w in caught if "'curvature' (model) skipped" in str(w.message)
        ]
        out["shuffled"] = {"measured": "classifier" in measured, "skipped": skipped}
    with user_families():
        user = Monitor(model, tr, families=[MeanSquaredNorm(), ClassifierNorm()], batch_size=size)
        out["user"] = user.measure_now(epoch=1)
        if rank is not None:
            try:
                Monitor(model, tr, families=[ShardSize()])
            except RuntimeError as err:
                out["refused"] = str(err)
            if rank == 1:
                with torch.no_grad():
                    model.classifier.weight.add_(1e-3)  # the processes' weights now differ
            try:
                user.measure_now(epoch=2)
            except RuntimeError as err:
                out["weights_differ"] = str(err)
    return out


def every_family_worker(rank, world, init_file, out_dir):
    with gloo_group(rank, world, init_file):
        out = measure_everything(rank)
        with open(os.path.join(out_dir, f"every{rank}.json"), "w") as f:
            json.dump(out, f)


def assert_same_values(got, single, what):
    """Every value of ``single`` in ``got``, within the tolerance above; returns how many."""
    assert got.keys() == single.keys(), what
    n = 0
    for split in single:
        assert got[split].keys() == single[split].keys(), (what, split)
        for layer, values in single[split].items():
            assert got[split][layer].keys() == values.keys(), (what, split, layer)
            for key, value in values.items():
                other = got[split][layer][key]
                assert math.isclose(other, value, rel_tol=1e-10, abs_tol=1e-12) or (
                    math.isnan(other) and math.isnan(value)
                ), (what, split, layer, key, other, value)
                n += 1
    return n


def test_every_builtin_family_under_two_processes_equals_one_process(tmp_path):
    mp.spawn(every_family_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    outs = [json.loads((tmp_path / f"every{r}.json").read_text()) for r in (0, 1)]
    single = json.loads(json.dumps(measure_everything(None)))  # the same float conversions
    for rank, out in enumerate(outs):
        counts = {
            what: assert_same_values(out[what], single[what], (rank, what))
            for what in ("builtin", "pcbias", "sampler", "user")
        }
        assert counts["builtin"] >= 192 and counts["pcbias"] >= 28 and counts["sampler"] >= 84
        assert counts["user"] == 4  # three layers' mean squared norm, the classifier's norm
    # every family took part: a key of each, in both processes
    train = single["builtin"]["train"]
    for key in ("nc1", "pfc_position", "mse_loss", "gradient_cosine_all"):
        assert any(key in values for values in train.values()), key
    assert "pseudo_neuron_cosine_probe_mean" in train["layers.0.linear"]
    assert set(CURVATURE_KEYS) - {"kronecker_alignment_mean"} <= set(train["classifier"])
    assert "correct_fraction" in train[""] and "correct_fraction" in single["builtin"]["test"][""]
    assert "pc_distance" in single["pcbias"]["train"][""]
    assert "scale_a_diagonal_mean" in single["pcbias"]["train"]["layers.0"]
    # rank 0 gathered the learning order of every process in the global data order
    assert outs[0]["order"] == single["order"] and outs[1]["order"] == {}
    assert len(single["order"]["correct_train"]) == 42
    for out in outs:
        assert out["padded"] == single["padded"]
    assert outs[0]["padded_order"] == single["padded_order"]
    assert len(single["padded_order"]["labels_train"]) == 15  # the repeated sample once
    # shuffled shards: the curvature family is skipped in both processes, saying why
    for out in outs:
        assert not out["shuffled"]["measured"] and len(out["shuffled"]["skipped"]) == 1
        assert "DistributedSampler with shuffle=False" in out["shuffled"]["skipped"][0]
    # a user family with a model procedure and no mode is refused, naming what to do
    for out in outs:
        message = out["refused"]
        assert "'test_dist_shard'" in message and "'refuse'" in message
        assert "distributed=False" in message and "'replicated'" in message
        assert "'test_dist_weights'" in out["weights_differ"]
        assert "weights differ" in out["weights_differ"]
