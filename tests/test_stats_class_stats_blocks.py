"""The NC statistics in cache-sized row blocks (issue 32) against a float64 brute force.

Both passes of :class:`~collapselab.stats.ClassStats` convert and reduce a batch block by
block (``_BLOCK_ENTRIES``); :func:`collapselab.measure` checks NaN/Inf through the class
sums of pass 1. The reference here is independent of both: NumPy float64, explicit loops
over the classes, dense ``D x D`` covariances and ``numpy.linalg.pinv``. The data have
uneven class sizes; tiny blocks (7 rows) put block boundaries inside classes, blocks
without some classes and a short last block into every pass. With several torch threads
both passes run as row streams whose shards are merged (the last section).
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch

from collapselab import _threads as threads_module
from collapselab import measure
from collapselab.families import collection as collection_module
from collapselab.stats import ClassStats, class_stats

pytestmark = pytest.mark.filterwarnings("ignore:imbalanced classes:UserWarning")

REQUEST = ["nc1", "nc1_trace_ratio", "nc2_etf_distance"]
COUNTS = (31, 57, 2, 90, 44, 9)  # uneven, one class of two samples


def data(seed=0, d=40, counts=COUNTS, dtype=np.float32, spread=3.0):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.full(k, c) for c, k in enumerate(counts)])
    rng.shuffle(y)
    means = rng.normal(scale=spread, size=(len(counts), d)) + 5.0
    H = (means[y] + rng.normal(size=(len(y), d))).astype(dtype)
    return H, y


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Blocks of 7 rows in both passes."""
    monkeypatch.setattr(class_stats, "_BLOCK_ENTRIES", 1)
    monkeypatch.setattr(class_stats, "_MIN_BLOCK_ROWS", 7)


def brute(H, y, c, weighting):
    """Class statistics by explicit loops over the classes, float64 NumPy."""
    H = np.asarray(H, dtype=np.float64)
    n = np.array([np.sum(y == k) for k in range(c)], dtype=np.float64)
    pi = np.full(c, 1.0 / c) if weighting == "balanced" else n / n.sum()
    mu = np.stack([H[y == k].mean(axis=0) for k in range(c)])
    mu_g = pi @ mu
    d = H.shape[1]
    sw = np.zeros((d, d))
    var = np.zeros(c)
    for k in range(c):
        dev = H[y == k] - mu[k]
        sw += pi[k] / n[k] * dev.T @ dev
        var[k] = np.mean(np.sum(dev * dev, axis=1))
    sb = np.zeros((d, d))
    for k in range(c):
        sb += pi[k] * np.outer(mu[k] - mu_g, mu[k] - mu_g)
    return {"mu": mu, "mu_g": mu_g, "sw": sw, "sb": sb, "var": var, "pi": pi}


def brute_request(H, y, c, weighting):
    b = brute(H, y, c, weighting)
    centred = b["mu"] - b["mu_g"]
    gram = centred @ centred.T
    etf = (np.eye(c) - 1.0 / c) / math.sqrt(c - 1)
    return {
        "nc1": float(np.trace(b["sw"] @ np.linalg.pinv(b["sb"], rcond=1e-10)) / c),
        "nc1_trace_ratio": float(np.trace(b["sw"]) / np.trace(b["sb"])),
        "nc2_etf_distance": float(np.linalg.norm(gram / np.linalg.norm(gram) - etf)),
    }


def brute_decisions(H, y, c, ncc_means, W, b):
    """NCC and classifier confusion counts, row = label, by explicit distances."""
    H = np.asarray(H, dtype=np.float64)
    dist = np.stack([np.sum((H - ncc_means[k]) ** 2, axis=1) for k in range(c)], axis=1)
    ncc = np.argmin(dist, axis=1)
    clf = np.argmax(H @ W.T + b, axis=1)
    conf = np.zeros((2, c, c), dtype=np.int64)
    np.add.at(conf[0], (y, ncc), 1)
    np.add.at(conf[1], (y, clf), 1)
    return conf[0], conf[1]


@pytest.mark.parametrize("blocks", ["default", "tiny"])
@pytest.mark.parametrize("chunk_size", [None, 64, 101])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nc_request_matches_the_float64_brute_force(request, blocks, chunk_size, dtype):
    if blocks == "tiny":
        request.getfixturevalue("tiny_blocks")
    H, y = data(dtype=dtype)
    got = measure(H, y, keys=REQUEST, chunk_size=chunk_size)
    want = brute_request(H, y, len(COUNTS), "sample")
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert math.isclose(got[key], value, rel_tol=1e-10), (key, got[key], value)


def test_nc_request_at_a_dimension_of_several_blocks():
    # D = 1200: 54 rows per default block, so the 233 rows take 5 blocks, the last short.
    H, y = data(seed=1, d=1200, counts=(40, 71, 3, 119))
    got = measure(H, y, keys=REQUEST, weighting="balanced")
    want = brute_request(H, y, 4, "balanced")
    for key, value in want.items():
        assert math.isclose(got[key], value, rel_tol=1e-10), (key, got[key], value)


def test_collapsed_features_stay_exact():
    # Within-class spread 1e-6 of the means: the deviations are formed before any product,
    # so the projected scatter keeps its relative accuracy.
    rng = np.random.default_rng(5)
    H, y = data(seed=2, d=64, dtype=np.float64)
    mu = np.stack([H[y == k].mean(axis=0) for k in range(len(COUNTS))])
    H = mu[y] * 1e3 + 1e-3 * rng.normal(size=H.shape)
    got = measure(H, y, keys=REQUEST)
    want = brute_request(H, y, len(COUNTS), "sample")
    for key, value in want.items():
        assert math.isclose(got[key], value, rel_tol=1e-9), (key, got[key], value)


@pytest.mark.parametrize("mode", ["projected", "dense"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_streamed_batches_in_tiny_blocks_match_the_brute_force(tiny_blocks, mode, dtype):
    H, y = data(seed=3, d=12, dtype=np.float64)
    c = len(COUNTS)
    rng = np.random.default_rng(6)
    W, b = rng.normal(size=(c, 12)), rng.normal(size=c)
    Ht = torch.from_numpy(H).to(dtype)
    yt = torch.from_numpy(y)
    # Batches of uneven sizes: one of zero rows, one holding only class 3, the rest.
    only3 = np.flatnonzero(y == 3)[:20]
    rest = np.setdiff1d(np.arange(len(y)), only3)
    parts = [rest[:5], np.array([], dtype=np.int64), only3, rest[5:100], rest[100:]]
    st = ClassStats(c, mode=mode, weighting="sample")
    for idx in parts:
        st.update_means(Ht[idx], yt[idx])
    st.finalize_means(W=W, b=b)
    for idx in parts:
        st.update_scatter(Ht[idx], yt[idx])

    H64 = Ht.to(torch.float64).numpy()  # the values measured (float32 ones for float32)
    ref = brute(H64, y, c, "sample")
    np.testing.assert_allclose(st.means.numpy(), ref["mu"], rtol=1e-13)
    np.testing.assert_allclose(st.class_variances.numpy(), ref["var"], rtol=1e-12)
    assert math.isclose(st.within_trace, np.trace(ref["sw"]), rel_tol=1e-12)
    basis = st.basis.numpy()
    np.testing.assert_allclose(
        st.within_projected.numpy(), basis.T @ ref["sw"] @ basis, rtol=1e-11, atol=1e-13
    )
    if mode == "dense":
        np.testing.assert_allclose(st.within_cov.numpy(), ref["sw"], rtol=1e-11, atol=1e-13)
    ncc, clf = brute_decisions(H64, y, c, ref["mu"], W, b)
    assert np.array_equal(st.ncc_confusion.numpy(), ncc)
    assert np.array_equal(st.classifier_confusion.numpy(), clf)


def test_measure_decisions_in_tiny_blocks_match_the_brute_force(tiny_blocks):
    H, y = data(seed=4, d=30)
    c = len(COUNTS)
    rng = np.random.default_rng(7)
    W, b = rng.normal(size=(c, 30)), rng.normal(size=c)
    got = measure(H, y, W, b, chunk_size=50)
    ncc, clf = brute_decisions(H, y, c, brute(H, y, c, "sample")["mu"], W, b)
    assert got["ncc_accuracy"] == np.trace(ncc) / len(y)
    assert got["accuracy"] == np.trace(clf) / len(y)


@pytest.mark.parametrize("where", ["features", "test_features"])
def test_nan_is_reported_with_its_count_after_the_class_sums(where):
    H, y = data(seed=5)
    bad = H.copy()
    bad[17, 3] = np.nan
    bad[40, 0] = np.inf
    args = {"features": bad, "test_features": H}
    if where == "test_features":
        args = {"features": H, "test_features": bad}
    with pytest.raises(ValueError, match=rf"{where} contains NaN or Inf \(2 of"):
        measure(args["features"], y, test_features=args["test_features"], test_labels=y)


# ------------------------------------------------------------------ row streams
# With two or more torch threads, measure() runs both passes as row streams, one torch
# thread each, whose shards are merged (collapselab._threads.run_streams,
# ClassStats.shard). The test data are small, so the size thresholds are lowered.


@pytest.fixture
def streams(monkeypatch, tiny_blocks):
    """Row streams on every call, over blocks of 7 rows, with three torch threads."""
    monkeypatch.setattr(threads_module, "SMALL_WORK", 0)
    monkeypatch.setattr(threads_module, "STREAM_MIN_ENTRIES", 1)
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    yield
    torch.set_num_threads(before)


def counted_streams(monkeypatch):
    """Record how many tasks each run_streams call of the engine gets."""
    calls: list[int] = []

    def run(tasks):
        calls.append(len(tasks))
        return threads_module.run_streams(tasks)

    monkeypatch.setattr(collection_module, "run_streams", run)
    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["projected", "dense"])
def test_streams_match_the_brute_force(streams, monkeypatch, dtype, mode):
    calls = counted_streams(monkeypatch)
    H, y = data(seed=8, d=24, dtype=dtype)
    c = len(COUNTS)
    rng = np.random.default_rng(9)
    W, b = rng.normal(size=(c, 24)), rng.normal(size=c)
    got = measure(H, y, W, b, chunk_size=20, mode=mode)
    assert calls == [3, 3]  # both passes in three streams
    want = brute_request(H, y, c, "sample")
    for key, value in want.items():
        assert math.isclose(got[key], value, rel_tol=1e-10), (key, got[key], value)
    ncc, clf = brute_decisions(H, y, c, brute(H, y, c, "sample")["mu"], W, b)
    assert got["ncc_accuracy"] == np.trace(ncc) / len(y)
    assert got["accuracy"] == np.trace(clf) / len(y)
    # One stream (one thread) gives the same values up to the order of the sums.
    torch.set_num_threads(1)
    one = measure(H, y, W, b, chunk_size=20, mode=mode)
    assert calls == [3, 3]
    assert got.keys() == one.keys()
    for key, value in one.items():
        assert math.isclose(got[key], value, rel_tol=1e-13, abs_tol=1e-15), (key, got[key])


def test_streams_keep_strongly_collapsed_features_exact(streams):
    # float32 features whose within-class spread is 1e-4 of their distance from the
    # origin and NC1 about 1e-8: the deviations are formed in float64 before any product.
    rng = np.random.default_rng(10)
    c, d = 6, 32
    y = np.repeat(np.arange(c), 40)
    rng.shuffle(y)
    mu = 1e2 + rng.normal(size=(c, d))
    H = (mu[y] + 1e-4 * rng.normal(size=(len(y), d))).astype(np.float32)
    got = measure(H, y, keys=REQUEST, chunk_size=30)
    want = brute_request(H, y, c, "balanced")
    assert 1e-9 < want["nc1"] < 1e-7
    for key, value in want.items():
        assert math.isclose(got[key], value, rel_tol=1e-10), (key, got[key], value)


def test_streams_restore_the_thread_setting(streams):
    H, y = data(seed=11)
    measure(H, y, keys=REQUEST)
    assert torch.get_num_threads() == 3
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    assert seen == [3]  # the process-wide default new threads start from


def test_run_streams_runs_each_task_on_one_thread_and_keeps_the_order():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        tasks = [lambda i=i: (i, torch.get_num_threads(), threading.get_ident()) for i in range(4)]
        out = threads_module.run_streams(tasks)
        assert [i for i, _, _ in out] == [0, 1, 2, 3]
        assert all(t == 1 for _, t, _ in out)
        assert out[0][2] == threading.get_ident()  # the first on the calling thread
        assert torch.get_num_threads() == 2

        def fail():
            raise KeyError("stream 2")

        with pytest.raises(KeyError, match="stream 2"):
            threads_module.run_streams([lambda: 1, fail])
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_stream_count_only_inside_thread_streams():
    cpu = torch.device("cpu")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        big = 4 * threads_module.STREAM_MIN_ENTRIES
        assert threads_module.stream_count(big, cpu) == 1  # a Monitor's hooks, say
        with threads_module.thread_streams():
            assert torch.get_num_threads() == 1
            assert threads_module.stream_count(big, cpu) == 2
            assert threads_module.stream_count(threads_module.STREAM_MIN_ENTRIES, cpu) == 1
            with threads_module.caller_threads():
                assert torch.get_num_threads() == 2
                assert threads_module.stream_count(big, cpu) == 1
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("mode", ["projected", "dense"])
def test_shards_merge_to_the_statistics_of_one_stream(mode):
    H, y = data(seed=12, d=16, dtype=np.float64)
    Ht, yt = torch.from_numpy(H), torch.from_numpy(y)
    c = len(COUNTS)
    whole = ClassStats(c, mode=mode, weighting="sample")
    parts = ClassStats(c, mode=mode, weighting="sample")
    halves = (slice(0, 100), slice(100, None))
    whole.update_means(Ht, yt)
    shard = parts.shard()  # before any batch: sized by its first batch
    parts.update_means(Ht[halves[0]], yt[halves[0]])
    shard.update_means(Ht[halves[1]], yt[halves[1]])
    parts.merge(shard)
    for st in (whole, parts):
        st.finalize_means()
    shard = parts.shard()
    assert shard.means is parts.means  # the fixed state is shared
    whole.update_scatter(Ht, yt)
    parts.update_scatter(Ht[halves[0]], yt[halves[0]])
    assert not parts.pass2_complete
    shard.update_scatter(Ht[halves[1]], yt[halves[1]])
    parts.merge(shard)
    np.testing.assert_allclose(parts.means.numpy(), whole.means.numpy(), rtol=1e-14)
    np.testing.assert_allclose(
        parts.class_variances.numpy(), whole.class_variances.numpy(), rtol=1e-14
    )
    np.testing.assert_allclose(
        parts.within_projected.numpy(), whole.within_projected.numpy(), rtol=1e-13, atol=1e-15
    )
    assert torch.equal(parts.ncc_confusion, whole.ncc_confusion)
    ref = brute(H, y, c, "sample")
    np.testing.assert_allclose(parts.class_variances.numpy(), ref["var"], rtol=1e-12)
