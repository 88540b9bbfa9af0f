"""Two gloo processes on CPU all-reduce ClassStats to the single-process answer."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from collapselab.metrics import mse_decomposition, nc1_snr, nc_metrics
from collapselab.stats import ClassStats

C, D = 4, 6


def make_data():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(C), [9, 12, 10, 14])
    rng.shuffle(y)
    H = rng.normal(scale=2.0, size=(C, D))[y] + rng.normal(size=(len(y), D))
    W = rng.normal(size=(C, D))
    b = rng.normal(size=C)
    return torch.from_numpy(H), torch.from_numpy(y), torch.from_numpy(W), torch.from_numpy(b)


def collect(shards, mode, W, b):
    """Both passes over this process's shards; all-reduce when a group is running."""
    st = ClassStats(C, mode=mode, dim=D)
    for h, y in shards:
        st.update_means(h, y)
    if dist.is_initialized():
        st.all_reduce()
    st.finalize_means(W=W, b=b)
    for h, y in shards:
        st.update_scatter(h, y)
    if dist.is_initialized():
        st.all_reduce()
    return st


def results(shards, W, b):
    out = {}
    for mode in ("dense", "projected"):
        st = collect(shards, mode, W, b)
        out |= {f"{mode}/{k}": v for k, v in nc_metrics(st).items()}
    dense = collect(shards, "dense", W, b)
    out |= {f"mse/{k}": v for k, v in mse_decomposition(dense, 1e-2, W, b).as_dict().items()}
    out["snr/nc1_snr"] = nc1_snr(dense)
    return out


def worker(rank, world, init_file, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        H, y, W, b = make_data()
        # Uneven shards in uneven batches: rank 0 the first 17 rows, rank 1 the rest.
        rows = np.arange(17) if rank == 0 else np.arange(17, len(y))
        batches = np.array_split(rows, 2 if rank == 0 else 3)
        shards = [(H[i], y[i]) for i in batches]
        split = results(shards, W, b)
        # A process that sees no batch at all still takes part (dim= given).
        everything = results([(H, y)] if rank == 0 else [], W, b)
        if rank == 0:
            with open(os.path.join(out_dir, "out.json"), "w") as f:
                json.dump({"split": split, "empty": everything}, f)
    finally:
        dist.destroy_process_group()


def test_two_gloo_processes_match_single_process(tmp_path):
    init_file = tmp_path / "init"
    mp.spawn(worker, args=(2, str(init_file), str(tmp_path)), nprocs=2, join=True)
    with open(tmp_path / "out.json") as f:
        got = json.load(f)
    H, y, W, b = make_data()
    want = results([(H, y)], W, b)
    assert len(want) > 30
    for case in ("split", "empty"):
        assert set(got[case]) == set(want)
        for key, value in want.items():
            assert math.isclose(got[case][key], value, rel_tol=1e-10, abs_tol=1e-15), (
                case,
                key,
                got[case][key],
                value,
            )
