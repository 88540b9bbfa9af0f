"""Benchmark 3: a Monitor sweep of every block of a 6-block ResNet vs one plain forward pass.

Target (issue "Measurement engine", Performance): one measurement of all blocks takes at
most 2.5x the time of one ``torch.no_grad()`` forward pass over the same DataLoader. A
measurement needs two forward passes (class means first, then the within-class scatter
and nearest-class-mean decisions against those means; features are not stored), so 2.0x
is the floor and the statistics get the remaining 0.5x.

Timings are interleaved (plain, monitor, plain, monitor, ...) and the minimum over the
repeats is reported, the usual estimator on a machine shared with other work; medians
are printed too. ``--proposed`` also times the Monitor with the ClassStats batch updates
proposed in ``benchmarks/_proposed_stats.py`` and checks that every value agrees.

Usage::

    python benchmarks/bench_monitor.py                 # defaults below
    python benchmarks/bench_monitor.py --proposed --repeats 7
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import torch

import collapselab.track.monitor as monitor_module
from collapselab.data.dataset import LabeledData
from collapselab.models import ConvResNet
from collapselab.track import Monitor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _proposed_stats import ProposedClassStats


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


def compare(a, b) -> float:
    worst = 0.0
    for split in a:
        for layer in a[split]:
            for key, v in a[split][layer].items():
                w = b[split][layer][key]
                if math.isnan(v) and math.isnan(w):
                    continue
                worst = max(worst, abs(v - w) / max(abs(v), 1e-300))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="samples (rounded down to 10s)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--width", type=int, default=32, help="channels of the first stage")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--metrics", default="nc", help="comma-separated families")
    parser.add_argument("--proposed", action="store_true", help="also time ProposedClassStats")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    model = build(args.width)
    g = torch.Generator().manual_seed(0)
    n = args.n - args.n % 10  # balanced classes
    x = torch.randn(n, 3, 32, 32, generator=g)
    y = torch.arange(n) % 10
    loader = LabeledData(x, y, 10).loader(batch_size=args.batch_size)
    families = args.metrics.split(",")
    monitor = Monitor(model, loader, metrics=families, schedule=None)
    dims = None

    variants = {"monitor": monitor_module.ClassStats}
    if args.proposed:
        variants["monitor+proposed-stats"] = ProposedClassStats
    times: dict[str, list[tuple[float, float]]] = {"plain forward": []}
    times |= {k: [] for k in variants}
    results = {}
    # Warm-up (allocator, thread pool, first-batch set-up).
    plain_forward(model, loader)
    for name, cls in variants.items():
        monitor_module.ClassStats = cls
        results[name] = monitor.measure_now(log=False)
        dims = monitor.dims
    for _ in range(args.repeats):
        times["plain forward"].append(timed(lambda: plain_forward(model, loader)))
        for name, cls in variants.items():
            monitor_module.ClassStats = cls
            times[name].append(timed(lambda: monitor.measure_now(log=False)))
    monitor_module.ClassStats = variants["monitor"]

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
    if args.proposed:
        diff = compare(results["monitor"], results["monitor+proposed-stats"])
        print(f"max relative difference, proposed vs current stats: {diff:.2e}")


if __name__ == "__main__":
    main()
