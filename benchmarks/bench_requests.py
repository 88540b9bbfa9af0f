"""Benchmark 4: ``measure`` requests that collect only what their keys need.

Targets (issue "Families as objects", performance):

1. ``request``: the NC1 + trace-ratio + ETF request, ``measure(X, y, keys=["nc1",
   "nc1_trace_ratio", "nc2_etf_distance"])``, at N = 50,000, C = 10, D = 512 and 2,048, at
   least 3x faster than the reference neural-collapse library's accumulate-and-measure
   pattern, with values exact in float64 (1e-10 against a per-class float64 dense
   baseline). The reference pattern is re-written here from its documentation (not
   copied): in float32, pass 1 accumulates class totals with a one-hot matrix product per
   batch of 512, pass 2 the ``D x D`` within-class covariance as ``diff^T diff`` of each
   batch's deviations from the class means, then NC1 is ``trace(pinv(Sigma_B) Sigma_W)/C``,
   the trace ratio ``trace(Sigma_W)/trace(Sigma_B)`` and the ETF error the Frobenius distance
   of the normalised Gram of the centred means to the simplex ETF's. The dense baseline is
   NumPy float64: per-class covariances ``Z^T Z``, ``pinv`` of ``Sigma_B``.
2. ``full``: the whole catalogue (``measure(X, y, W, b, lam)``, every key) no slower than a
   previous version of collapselab (``--baseline-src``: the ``src`` directory of a checkout
   of that version), both run in child processes, interleaved, on the same data.
3. ``small``: ``measure`` at N = 2,000, D = 64 with torch's default threads while other
   jobs keep the cores busy (``--burners`` busy processes are started for it), against the
   same call on one thread and, with ``--baseline-src``, the previous version.

Timings are the minimum over ``--repeats`` interleaved runs, with medians. The load
average is printed before each section.

Usage::

    python benchmarks/bench_requests.py request --d 512 --repeats 7
    python benchmarks/bench_requests.py request --d 2048 --repeats 3 --no-baseline
    python benchmarks/bench_requests.py full --baseline-src /path/to/old/checkout/src
    python benchmarks/bench_requests.py small --baseline-src /path/to/old/checkout/src
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_measure import class_covariances_gemm, make_data  # benchmark 1's data and covariances

REQUEST = ["nc1", "nc1_trace_ratio", "nc2_etf_distance"]


def reference_pattern(X, y, c: int, batch: int = 512) -> dict[str, float]:
    """The reference library's accumulate-and-measure pattern, in float32 (see above)."""
    import torch

    n, d = X.shape
    classes = torch.arange(c)
    counts = torch.zeros(c)
    totals = torch.zeros(c, d)
    for s in range(0, n, batch):
        onehot = (y[s : s + batch, None] == classes).float()  # (B, C)
        counts += onehot.sum(0)
        totals += onehot.T @ X[s : s + batch]
    means = totals / counts[:, None]
    global_mean = means.mean(0)
    covar = torch.zeros(d, d)
    for s in range(0, n, batch):
        diff = X[s : s + batch] - means[y[s : s + batch]]
        covar += diff.T @ diff
    within = covar / n
    centred = means - global_mean
    between = centred.T @ centred / c
    nc1 = float(torch.trace(torch.linalg.pinv(between) @ within)) / c
    ratio = float(torch.trace(within) / torch.trace(between))
    gram = centred @ centred.T
    etf = (torch.eye(c) - 1.0 / c) / math.sqrt(c - 1)
    return {
        "nc1": nc1,
        "nc1_trace_ratio": ratio,
        "nc2_etf_distance": float((gram / gram.norm() - etf).norm()),
    }


def dense_baseline(H32, y, c: int) -> dict[str, float]:
    """Per-class float64 dense NC1, trace ratio and ETF distance in NumPy (the exact values)."""
    import numpy as np

    means, covs = class_covariances_gemm(H32.astype(np.float64), y, c)
    M = np.stack(means, axis=1)
    Mbar = M - M.mean(axis=1, keepdims=True)
    within = sum(covs) / c
    between = Mbar @ Mbar.T / c
    G = Mbar.T @ Mbar
    E = (np.eye(c) - 1.0 / c) / math.sqrt(c - 1)
    return {
        "nc1": float(np.trace(within @ np.linalg.pinv(between, rcond=1e-10)) / c),
        "nc1_trace_ratio": float(np.trace(within) / np.trace(between)),
        "nc2_etf_distance": float(np.linalg.norm(G / np.linalg.norm(G) - E)),
    }


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _summary(times: dict[str, list[float]], base: str) -> None:
    ref = min(times[base])
    for name, ts in times.items():
        print(
            f"  {name:34s} min {min(ts):8.3f}s  median {statistics.median(ts):8.3f}s  "
            f"x{min(ts) / ref:6.2f} of {base}"
        )


def section_request(args: argparse.Namespace) -> None:
    import torch

    import collapselab
    from collapselab import measure

    print(f"== request, N={args.n}, D={args.d}, C={args.c}; {_load()}")
    print(
        f"   command: {' '.join(sys.argv)}; {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}"
    )
    print(
        f"   torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"collapselab from {Path(collapselab.__file__).parent}"
    )
    H, y, _, _ = make_data(args.n, args.d, args.c)
    Ht, yt = torch.from_numpy(H), torch.from_numpy(y)
    runs = {
        "measure(keys=NC1+ratio+ETF)": lambda: measure(Ht, yt, keys=REQUEST),
        "reference pattern (float32)": lambda: reference_pattern(Ht, yt, args.c),
        "dense float64 baseline": lambda: dense_baseline(H, y, args.c),
    }
    if args.no_baseline:
        del runs["dense float64 baseline"]
    times: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    values = {name: fn() for name, fn in runs.items()}  # warm-up
    if args.no_baseline:
        values["dense float64 baseline"] = dense_baseline(H, y, args.c)
    for _ in range(args.repeats):
        for name, fn in runs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    print("  wall-clock:")
    _summary(times, "measure(keys=NC1+ratio+ETF)")
    print("  process CPU time (all threads):")
    _summary(cpu, "measure(keys=NC1+ratio+ETF)")
    exact = values["dense float64 baseline"]
    for name in ("measure(keys=NC1+ratio+ETF)", "reference pattern (float32)"):
        worst = max(abs(values[name][k] - v) / abs(v) for k, v in exact.items())
        print(f"  max relative difference to the dense float64 baseline, {name}: {worst:.1e}")
    target = 3 if args.d <= 512 else 7
    speedup = min(times["reference pattern (float32)"]) / min(times["measure(keys=NC1+ratio+ETF)"])
    print(
        f"  speed-up over the reference pattern, wall-clock minima: {speedup:.2f}x "
        f"(target >= {target}x)"
    )
    for name, v in values["measure(keys=NC1+ratio+ETF)"].items():
        print(f"  measure {name} = {v!r}")
    print(f"  {_load()} at the end")


# ---------------------------------------------------------------------------------------
# child processes: one version of collapselab, timed on the benchmark's data


def child(kind: str, n: int, d: int, c: int, repeats: int, threads: int | None) -> dict:
    import torch

    if threads:
        torch.set_num_threads(threads)
    import collapselab

    H, y, W, b = make_data(n, d, c)
    Ht, yt = torch.from_numpy(H), torch.from_numpy(y)
    Wt, bt = torch.from_numpy(W), torch.from_numpy(b)
    if kind == "full":
        call = lambda: collapselab.measure(Ht, yt, Wt, bt, 2.5e-3)  # noqa: E731
    else:
        call = lambda: collapselab.measure(Ht, yt)  # noqa: E731
    values = call()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return {
        "times": times,
        "values": values,
        "source": str(Path(collapselab.__file__).parent),
        "threads": torch.get_num_threads(),
    }


def run_child(args: argparse.Namespace, kind: str, src: str, threads: int | None) -> dict:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    cmd = [sys.executable, __file__, "--child", kind, f"--n={args.n}", f"--d={args.d}"]
    cmd += [f"--c={args.c}", "--repeats=3"] + ([f"--threads={threads}"] if threads else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _versions(args: argparse.Namespace, kind: str, candidates: dict) -> None:
    times: dict[str, list[float]] = {name: [] for name in candidates}
    values = {}
    for _ in range(args.repeats):
        for name, (src, threads) in candidates.items():
            res = run_child(args, kind, src, threads)
            times[name].extend(res["times"])
            values[name] = res["values"]
    first = next(iter(candidates))
    _summary(times, first)
    for name in list(candidates)[1:]:
        common = set(values[first]) & set(values[name])
        worst = max(
            abs(values[first][k] - values[name][k]) / max(abs(values[name][k]), 1e-300)
            for k in common
        )
        print(
            f"  {len(common)} common keys; max relative difference, {first} vs {name}: {worst:.1e}"
        )


def section_full(args: argparse.Namespace) -> None:
    print(f"== full catalogue, N={args.n}, D={args.d}, C={args.c}; {_load()}")
    candidates = {"this version": ("", args.threads)}
    if args.baseline_src:
        candidates[f"baseline {args.baseline_src}"] = (args.baseline_src, args.threads)
    _versions(args, "full", candidates)


def section_small(args: argparse.Namespace) -> None:
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)
    ]
    try:
        time.sleep(1.0)
        print(
            f"== small, N={args.n}, D={args.d}, C={args.c}, {args.burners} busy processes; "
            + _load()
        )
        candidates = {"this version": ("", None), "this version, 1 thread": ("", 1)}
        if args.baseline_src:
            candidates["baseline, default threads"] = (args.baseline_src, None)
            candidates["baseline, 1 thread"] = (args.baseline_src, 1)
        _versions(args, "small", candidates)
    finally:
        for p in burners:
            p.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("section", choices=["request", "full", "small"])
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--d", type=int, default=None)
    parser.add_argument("--c", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--baseline-src", default="")
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="request: time only measure and the reference pattern (the dense float64 "
        "baseline is computed once, for the values)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    small = args.section == "small"
    args.n = args.n or (2_000 if small else 50_000)
    args.d = args.d or (64 if small else 512)
    if args.child:
        print(json.dumps(child(args.section, args.n, args.d, args.c, args.repeats, args.threads)))
        return
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    {"request": section_request, "full": section_full, "small": section_small}[args.section](args)


if __name__ == "__main__":
    main()
