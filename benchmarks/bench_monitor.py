"""Benchmark 3: a Monitor sweep of every block of a 6-block ResNet vs one plain forward pass.

Target (issue "Measurement engine", Performance): one measurement of all blocks takes at
most 2.5x the time of one ``torch.no_grad()`` forward pass over the same DataLoader. A
measurement reads every feature twice (class means first, then the within-class scatter
and nearest-class-mean decisions against those means). Two monitors are timed: the default
one keeps the pass-1 features for pass 2 when they fit in ``cache_bytes`` (1 GiB; here
they do), so it runs the model once; the other (``cache_bytes=0``) runs it twice, so 2.0x
is its floor. Their values must agree exactly; the script checks that.

Timings are interleaved (plain, monitor, plain, monitor, ...) and the minimum over the
repeats is reported, the usual estimator on a machine shared with other work; medians
are printed too.

Usage::

    python benchmarks/bench_monitor.py                 # defaults below
    python benchmarks/bench_monitor.py --repeats 5 --threads 1 --width 64
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import statistics
import sys
import time

import torch

from collapselab.data.dataset import LabeledData
from collapselab.models import ConvResNet
from collapselab.track import Monitor


def build(width: int, seed: int = 0) -> ConvResNet:
    """6 residual blocks in two stages (3 at ``width`` x 16 x 16, 3 at ``2 width`` x 8 x 8)."""
    torch.manual_seed(seed)
    model = ConvResNet(3, 10, [(width, 3, 2), (2 * width, 3, 2)])
    return model.eval()


def plain_forward(model, loader) -> None:
    with torch.no_grad():
        for x, _ in loader:
            model(x)


def timed(fn) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of ``fn()``."""
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="samples (rounded down to 10s)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--width", type=int, default=32, help="channels of the first stage")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--metrics", default="nc", help="comma-separated families")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument(
        "--baseline-src",
        default="",
        help="also run the benchmark on another collapselab source tree (its src/ directory), "
        "in a child process, for a before/after comparison in one run",
    )
    args = parser.parse_args()
    if args.baseline_src:
        import subprocess

        argv = [a for a in sys.argv[1:] if not a.startswith("--baseline-src")]
        if args.baseline_src in argv:
            argv.remove(args.baseline_src)
        env = {**os.environ, "PYTHONPATH": args.baseline_src}
        print(f"=== baseline: {args.baseline_src}")
        subprocess.run([sys.executable, __file__, *argv], env=env, check=True)
        print("=== this version")
    if args.threads:
        torch.set_num_threads(args.threads)
    now = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"command: python {' '.join(sys.argv)}; {now}")
    print("load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))

    model = build(args.width)
    g = torch.Generator().manual_seed(0)
    n = args.n - args.n % 10  # balanced classes
    x = torch.randn(n, 3, 32, 32, generator=g)
    y = torch.arange(n) % 10
    loader = LabeledData(x, y, 10).loader(batch_size=args.batch_size)
    families = args.metrics.split(",")
    # Versions before the families redesign named the argument metrics=.
    name = "families" if "families" in inspect.signature(Monitor).parameters else "metrics"
    monitors = {
        "monitor (cached)": Monitor(model, loader, schedule=None, **{name: families}),
        "monitor (two forwards)": Monitor(
            model, loader, schedule=None, cache_bytes=0, **{name: families}
        ),
    }
    times: dict[str, list[tuple[float, float]]] = {"plain forward": [], **{k: [] for k in monitors}}
    # Warm-up (allocator, thread pool, first-batch set-up).
    plain_forward(model, loader)
    results = {name: mon.measure_now(log=False) for name, mon in monitors.items()}
    values = results["monitor (cached)"]
    dims = monitors["monitor (cached)"].dims
    for _ in range(args.repeats):
        times["plain forward"].append(timed(lambda: plain_forward(model, loader)))
        for name, mon in monitors.items():
            times[name].append(timed(lambda mon=mon: mon.measure_now(log=False)))

    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(
        f"model: ConvResNet 6 blocks, stages [({args.width},3,2), ({2 * args.width},3,2)], "
        f"input 3x32x32; N={n}, batch {args.batch_size}; families {families}"
    )
    print(f"measured layers ({len(dims)}): " + ", ".join(f"{k} D={v}" for k, v in dims.items()))
    walls = {k: [w for w, _ in v] for k, v in times.items()}
    cpus = {k: [c for _, c in v] for k, v in times.items()}
    base_wall, base_cpu = min(walls["plain forward"]), min(cpus["plain forward"])
    med_wall = statistics.median(walls["plain forward"])
    for name in times:
        w, c = walls[name], cpus[name]
        print(
            f"{name:24s} wall min {min(w):7.3f}s (x{min(w) / base_wall:4.2f})  "
            f"median {statistics.median(w):7.3f}s (x{statistics.median(w) / med_wall:4.2f})  "
            f"cpu min {min(c):7.3f}s (x{min(c) / base_cpu:4.2f})"
        )
    finite = sum(
        math.isfinite(v)
        for split in values.values()
        for layer in split.values()
        for v in layer.values()
    )
    print(f"values: {finite} finite metric values")
    other = results["monitor (two forwards)"]
    same = all(
        v == other[s][layer][k] or (math.isnan(v) and math.isnan(other[s][layer][k]))
        for s, split in values.items()
        for layer, metrics in split.items()
        for k, v in metrics.items()
    )
    print(f"cached and two-forward values identical: {same}")
    print("load average {:.2f} {:.2f} {:.2f} at the end".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
