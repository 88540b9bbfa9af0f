"""Two gloo processes, each measuring its shard, give the single-process Monitor values."""

from __future__ import annotations

import json
import math
import os
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from collapselab.data.dataset import LabeledData
from collapselab.families import MSE, Diversity
from collapselab.models import MLP
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
    process must take the same passes), and each gets its own shard's M4."""
    mp.spawn(factor_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    outs = [json.loads((tmp_path / f"factors{r}.json").read_text()) for r in (0, 1)]
    # 17 and 25 samples in batches of 6: 3 and 5 batches, each run twice (sweep, own pass)
    assert [o["forwards"] for o in outs] == [6, 10]
    model, train, _ = make()
    alone = Monitor(
        model, train.subset(torch.arange(17)), families=[Diversity([*M4], gradients=True)]
    )
    single = alone.measure_now(step=0)["train"]
    for name, values in outs[0]["m4"].items():
        for key in M4:
            assert math.isclose(values[key], single[name][key], rel_tol=1e-12), (name, key)
