"""Two gloo processes on CPU all-reduce ClassStats to the single-process answer.

The classes are imbalanced, so the default ``weighting="auto"`` must resolve to
``"sample"`` on every process from the all-reduced counts, even on a process whose own
shard is balanced or empty.
"""

from __future__ import annotations

import json
import math
import os
import warnings

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from collapselab.metrics import mse_decomposition, nc1_snr
from collapselab.metrics.nc import nc_metrics
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


def collect(shards, mode, W, b, weighting="auto"):
    """Both passes over this process's shards; all-reduce when a group is running."""
    st = ClassStats(C, mode=mode, dim=D, weighting=weighting)
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


def results(shards, W, b, weighting="auto"):
    """Metrics by key, and the resolved weighting of every ClassStats collected."""
    out, resolved = {}, []
    for mode in ("dense", "projected"):
        st = collect(shards, mode, W, b, weighting)
        resolved.append(st.weighting)
        out |= {f"{mode}/{k}": v for k, v in nc_metrics(st).items()}
    dense = collect(shards, "dense", W, b, weighting)
    resolved.append(dense.weighting)
    out |= {f"mse/{k}": v for k, v in mse_decomposition(dense, 1e-2, W, b).as_dict().items()}
    out["snr/nc1_snr"] = nc1_snr(dense)
    return out, resolved


def worker(rank, world, init_file, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        H, y, W, b = make_data()
        # Uneven shards in uneven batches: rank 1 five rows of each class (a balanced
        # shard, 20 rows), rank 0 the other 25.
        first5 = np.concatenate([np.flatnonzero(y.numpy() == c)[:5] for c in range(C)])
        rest = np.setdiff1d(np.arange(len(y)), first5)
        rows = rest if rank == 0 else np.sort(first5)
        batches = np.array_split(rows, 2 if rank == 0 else 3)
        shards = [(H[i], y[i]) for i in batches]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            split, split_resolved = results(shards, W, b)
            # A process that sees no batch at all still takes part (dim= given).
            everything, empty_resolved = results([(H, y)] if rank == 0 else [], W, b)
        report = {
            "split": split,
            "empty": everything,
            "resolved": split_resolved + empty_resolved,
            "shard_counts": np.bincount(y[rows].numpy(), minlength=C).tolist(),
            "warnings": [str(w.message) for w in caught],
        }
        with open(os.path.join(out_dir, f"out{rank}.json"), "w") as f:
            json.dump(report, f)
    finally:
        dist.destroy_process_group()


def test_two_gloo_processes_match_single_process(tmp_path):
    init_file = tmp_path / "init"
    mp.spawn(worker, args=(2, str(init_file), str(tmp_path)), nprocs=2, join=True)
    got = []
    for rank in range(2):
        with open(tmp_path / f"out{rank}.json") as f:
            got.append(json.load(f))
    H, y, W, b = make_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, resolved = results([(H, y)], W, b)
        sample, _ = results([(H, y)], W, b, weighting="sample")
    assert resolved == ["sample"] * 3 and want == sample  # auto on these counts is "sample"
    assert len(want) > 30
    # Rank 1's shard alone would be balanced; it still resolves from the all-reduced counts.
    assert got[1]["shard_counts"] == [5, 5, 5, 5] and got[0]["shard_counts"] != [5, 5, 5, 5]
    for rank, report in enumerate(got):
        assert report["resolved"] == ["sample"] * 6, rank
        assert len(report["warnings"]) == 6, rank  # one per ClassStats, on every process
        assert all("counts [9, 12, 10, 14]" in m for m in report["warnings"]), rank
    for case in ("split", "empty"):
        for rank, report in enumerate(got):
            assert set(report[case]) == set(want)
            for key, value in want.items():
                assert math.isclose(report[case][key], value, rel_tol=1e-10, abs_tol=1e-15), (
                    rank,
                    case,
                    key,
                    report[case][key],
                    value,
                )


# ---------------------------------------------------------------------------------------
# every accumulator through the one generic reduction


def every_accumulator(shards, pairs):
    """One of each accumulator of collapselab.stats over ``shards`` of ``(H, y)`` rows (and
    of ``pairs`` of layer paths), all reduced by one ``stats.all_reduce`` call per pass."""
    from collapselab.stats import (
        CommonDirectionAccumulator,
        ConfusionCounts,
        CosineSimilarityAccumulator,
        GatingSimilarityAccumulator,
        LayerPathAccumulator,
        all_reduce,
    )

    stats = ClassStats(C, mode="dense", dim=D, weighting="sample")
    cos, gating = CosineSimilarityAccumulator(C), GatingSimilarityAccumulator(C)
    path, common, confusion = (
        LayerPathAccumulator(),
        CommonDirectionAccumulator(),
        ConfusionCounts(C),
    )
    for h, y in shards:
        stats.update(h, y)
        cos.update(h, y)
        gating.update(h > 0, y)
        common.update(h[:, :3], h[:, 3:], lr=0.5)
        confusion.update(y, (y + 1) % C)
    for layers in pairs:
        path.update(layers)
    accumulators = [stats, cos, gating, path, common, confusion]
    if dist.is_initialized():
        all_reduce(accumulators)
    stats.finalize_means()
    for h, y in shards:
        stats.update(h, y)
    if dist.is_initialized():
        all_reduce([stats])
    out = {}
    for acc in accumulators:
        for key, value in acc.state().items():
            out[f"{type(acc).__name__}/{key}"] = value.double().flatten().tolist()
    return out, {type(acc) for acc in accumulators}


def path_layers(H):
    return [H, 2.0 * H + 1.0, H.flip(1)]


def worker_every(rank, world, init_file, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        H, y, _, _ = make_data()
        rows = np.arange(len(y))[rank::world]
        shards = [(H[i], y[i]) for i in np.array_split(rows, 2)]
        pairs = [path_layers(H[i]) for i in np.array_split(rows, 3)]
        out, _ = every_accumulator(shards, pairs)
        with open(os.path.join(out_dir, f"every{rank}.json"), "w") as f:
            json.dump(out, f)
    finally:
        dist.destroy_process_group()


def test_every_accumulator_reduces_to_the_single_process_sums(tmp_path):
    from collapselab.stats import Accumulator

    mp.spawn(worker_every, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    H, y, _, _ = make_data()
    want, covered = every_accumulator([(H, y)], [path_layers(H)])
    # Every accumulator the stats layer defines takes part: a new one must join this test.
    defined = {c for c in Accumulator.__subclasses__() if c.__module__.startswith("collapselab.")}
    assert covered == defined
    for rank in range(2):
        with open(tmp_path / f"every{rank}.json") as f:
            got = json.load(f)
        assert got.keys() == want.keys()
        for key, values in want.items():
            np.testing.assert_allclose(got[key], values, rtol=1e-12, atol=1e-12, err_msg=key)
