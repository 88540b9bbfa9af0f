"""Benchmark 2: ``measure`` at D = 32,768, C = 100, N = 20,000 (projected statistics).

Target (issue "Measurement engine", Performance): ``measure`` completes, in projected mode,
with a peak memory under 1.5 GB beyond the input. (A dense within-class covariance alone
would take 32768^2 * 8 B = 8.6 GB.) The input, 20,000 x 32,768 float32 = 2.6 GB, is
generated in place in chunks so that generating it costs no more than the input itself.

Memory method: each configuration runs in a fresh subprocess (Linux). After generating the
input, the process resets its peak-RSS counter (``echo 5 > /proc/self/clear_refs``, which
sets ``VmHWM`` to the current ``VmRSS``), records ``VmRSS``, calls ``measure`` and reads
``VmHWM``: the peak resident memory during the call. ``VmHWM - VmRSS(before)`` is the
memory used beyond the input (and the interpreter); it counts torch's CPU allocations too,
which ``tracemalloc`` does not see. ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` is printed
as well (it cannot be reset, so it is only an upper bound). As a guard for the shared
machine, the subprocess runs under an address-space limit (``--limit-gb``): a
configuration that needs more fails with an allocation error instead of calling in the
kernel's out-of-memory killer.

Usage::

    python benchmarks/bench_measure_large.py       # measure's default chunk size, then 8192
    python benchmarks/bench_measure_large.py --chunk-sizes default,8192,1024
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _status() -> dict[str, int]:
    """``/proc/self/status`` memory fields in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "VmSize"):
                out[key] = int(value.split()[0]) * 1024
    return out


def child(n: int, d: int, c: int, chunk_size: int | None, threads: int, keys: str) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    from collapselab import measure

    g = torch.Generator().manual_seed(0)
    y = torch.arange(n) % c
    y = y[torch.randperm(n, generator=g)]
    centres = 0.05 * torch.randn(c, d, generator=g)
    X = torch.empty(n, d, dtype=torch.float32)
    step = 500  # 500 x 32768 float32 = 66 MB of temporaries per chunk
    for i in range(0, n, step):
        block = X[i : i + step]
        torch.randn(block.shape, generator=g, out=block)
        block.add_(centres[y[i : i + step]])
    W = torch.randn(c, d, generator=g, dtype=torch.float64) / d**0.5
    b = torch.randn(c, generator=g, dtype=torch.float64)
    input_bytes = X.numel() * X.element_size()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status()
    t0 = time.perf_counter()
    if keys == "all":
        out = measure(X, y, W, b, chunk_size=chunk_size)
    else:  # a request of some keys only (no classifier)
        out = measure(X, y, chunk_size=chunk_size, keys=keys.split(","))
    seconds = time.perf_counter() - t0
    after = _status()
    return {
        "chunk_size": chunk_size,
        "seconds": seconds,
        "input_gb": input_bytes / 1e9,
        "rss_before_gb": before["VmRSS"] / 1e9,
        "peak_gb": after["VmHWM"] / 1e9,
        "extra_peak_gb": (after["VmHWM"] - before["VmRSS"]) / 1e9,
        "ru_maxrss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
        "nc1_dense": out.get("nc1_dense", float("nan")),
        "keys": len(out),
        "values": {k: float(v) for k, v in out.items()},
        "numpy": np.__version__,
        "torch": torch.__version__,
    }


def _name(chunk_size: int | None) -> str:
    return "default" if chunk_size is None else str(chunk_size)


def run_child(args: argparse.Namespace, chunk_size: int | None) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        f"--n={args.n}",
        f"--d={args.d}",
        f"--c={args.c}",
        f"--threads={args.threads}",
        f"--chunk-sizes={_name(chunk_size)}",
        f"--keys={args.keys}",
    ]
    env = dict(os.environ)
    if args.src:  # another source tree of collapselab (e.g. an earlier commit), same run
        env["PYTHONPATH"] = args.src
    limit = int(args.limit_gb * 1e9)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=cap, env=env)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"chunk_size": chunk_size, "error": " | ".join(tail)}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--d", type=int, default=32_768)
    parser.add_argument("--c", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--chunk-sizes",
        default="default,8192",
        help="measure(chunk_size=...); 'default' leaves it to measure (default_chunk_size)",
    )
    parser.add_argument("--limit-gb", type=float, default=16.0, help="address-space cap")
    parser.add_argument(
        "--keys", default="all", help="'all' (with a classifier) or comma-separated keys"
    )
    parser.add_argument(
        "--src", default="", help="run another collapselab source tree (its src/ directory)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [None if s == "default" else int(s) for s in args.chunk_sizes.split(",")]
    if args.child:
        print(json.dumps(child(args.n, args.d, args.c, sizes[0], args.threads, args.keys)))
        return
    print(
        f"N={args.n}, D={args.d}, C={args.c}, float32 input, threads {args.threads}, "
        f"keys {args.keys}" + (f", source {args.src}" if args.src else "")
    )
    print(f"address-space limit per run: {args.limit_gb} GB")
    results = []
    for size in sizes:
        res = run_child(args, size)
        results.append(res)
        label = f"chunk_size={_name(size):>7s}"
        if "error" in res:
            print(f"{label}: FAILED ({res['error']})")
            continue
        print(
            f"{label}: {res['seconds']:.1f}s, input {res['input_gb']:.2f} GB, "
            f"RSS before {res['rss_before_gb']:.2f} GB, peak {res['peak_gb']:.2f} GB, "
            f"peak beyond input+interpreter {res['extra_peak_gb']:.2f} GB "
            f"(target < 1.5), ru_maxrss {res['ru_maxrss_gb']:.2f} GB, "
            f"nc1_dense={res['nc1_dense']:.0f}, {res['keys']} keys"
        )
    ok = [r for r in results if "error" not in r]
    if len(ok) > 1:
        ref = ok[0]["values"]
        for r in ok[1:]:
            worst = max(abs(r["values"][k] - v) / max(abs(v), 1e-300) for k, v in ref.items())
            print(
                f"max relative difference, chunk_size={_name(r['chunk_size'])} vs the first "
                f"run: {worst:.2e}"
            )
    if ok:
        print("values:", json.dumps({k: round(v, 10) for k, v in ok[0]["values"].items()}))


if __name__ == "__main__":
    main()
