"""Curvature of a 1.2M-parameter conv net on 1,024 Fashion-MNIST images, against
hessian-eigenthings 1.0: top-10 Hessian eigenvalues at equal accuracy, every layer's top-k,
Papyan's decomposition of the last two layers, and the peak memory of the top-10 run.

Issue 32's scale targets. The net: conv 1->16 (3x3) ReLU maxpool, conv 16->32 (3x3) ReLU
maxpool, linear 1568->768 ReLU, linear 768->10 (1,217,482 parameters), trained 30 SGD steps
(batch 128, lr 0.05, momentum 0.9) on the first 1,024 Fashion-MNIST training images, read
from the system's IDX files (``collapselab.data``; nothing is downloaded). Float32, CE mean,
one torch thread; times are the process's CPU time (the machine is shared) with the wall time
beside it, every candidate in the same run. The reference is the float64 net's top 10 at
``tol=1e-6`` (eigenvalue errors of order the squared residual: far below 1e-4).

Run in the benchmark environment of ``bench_curvature_anchors.py``, from the repository root::

    PYTHONPATH=src nice /work/benchvenv/bin/python benchmarks/bench_curvature_convnet.py

Memory: a fresh child process loads the trained net and the data, and reports its peak
resident set (``VmHWM`` of ``/proc/self/status``; ``ru_maxrss`` would carry the
parent's peak across the fork) with the net and data loaded, after the first
product (which builds and keeps the graph), and after the top-10 run, against
``P x (k + block)`` float32 numbers.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from collapselab.curvature import (
    HessianOperator,
    Objective,
    class_pair_means,
    papyan_decomposition,
    top_eigenpairs,
)

K, TOL, DATA_DIR = 10, 1e-3, "/usr/share/datasets/fashion-mnist"


def convnet(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 768),
        nn.ReLU(),
        nn.Linear(768, 10),
    )


LAYERS = {"conv1": "0", "conv2": "3", "fc1": "7", "fc2": "9"}
"""Every layer with parameters, by its index in :func:`convnet`."""


def fashion(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    from collapselab.data import read_fashion_mnist

    splits = read_fashion_mnist(DATA_DIR, n_train_per_class=n // 10 + 1)
    x = torch.as_tensor(np.asarray(splits.train.x), dtype=torch.float32)[:n]
    y = torch.as_tensor(np.asarray(splits.train.y), dtype=torch.long)[:n]
    return x.reshape(n, 1, 28, 28), y


def trained(x: torch.Tensor, y: torch.Tensor) -> nn.Module:
    model = convnet(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for i in range(30):
        start = (i * 128) % len(y)
        opt.zero_grad()
        nn.functional.cross_entropy(
            model(x[start : start + 128]), y[start : start + 128]
        ).backward()
        opt.step()
    return model


def clock(fn: Callable[[], object]) -> tuple[object, float, float]:
    """``fn()``, its process CPU time and its wall time."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - cpu, time.perf_counter() - wall


def eigen_speed(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, args: argparse.Namespace
) -> None:
    import hessian_eigenthings as he

    P = sum(p.numel() for p in model.parameters())
    exact = copy.deepcopy(model).double()
    ref_op = HessianOperator(Objective(exact, "ce", [(x.double(), y)]))
    ref_pairs, ref_cpu, _ = clock(lambda: top_eigenpairs(ref_op, K, tol=1e-6, start=1))
    ref = ref_pairs.values.numpy()
    print(
        f"conv net, P = {P:,}, {len(y)} Fashion-MNIST images, CE mean, float32, one thread; "
        f"reference: float64, tol 1e-6, {ref_pairs.products} products, converged "
        f"{ref_pairs.converged}, {ref_cpu:.0f} s CPU: {np.array2string(ref, precision=5)}"
    )
    loss = nn.CrossEntropyLoss()

    def ours() -> tuple[np.ndarray, int, str]:
        op = HessianOperator(Objective(model, "ce", [(x, y)]), fused_ce=True)
        pairs = top_eigenpairs(op, K, tol=TOL, start=1)
        rel = float(pairs.residuals.max()) / float(pairs.values.abs().max())
        return pairs.values.numpy(), pairs.products, f"{pairs.converged} (res {rel:.0e})"

    def theirs(steps: int) -> Callable[[], tuple[np.ndarray, int, str]]:
        def run() -> tuple[np.ndarray, int, str]:
            op = he.HessianOperator(model, [(x, y)], lambda m, b: loss(m(b[0]), b[1]))
            out = he.lanczos(op, k=K, max_iter=steps, reorthogonalize=True, which="LA", seed=0)
            vals = np.sort(out.eigenvalues.numpy())[::-1]
            return vals, out.iterations, f"{int(out.converged.sum())}/{K} flagged"

        return run

    runs = {f"collapselab start=1 fused_ce tol={TOL}": ours}
    runs.update({f"he lanczos {n} steps": theirs(n) for n in args.steps})
    cpu: dict[str, list[float]] = {}
    wall: dict[str, list[float]] = {}
    info: dict[str, tuple[float, int, str]] = {}
    load = [os.getloadavg()[0]]
    for _ in range(args.repeats):
        for name, fn in runs.items():
            (vals, n, flag), c, w = clock(fn)
            cpu.setdefault(name, []).append(c)
            wall.setdefault(name, []).append(w)
            info[name] = (float(np.abs(vals[:K] - ref).max() / abs(ref[0])), n, flag)
            load.append(os.getloadavg()[0])
    head = f"{'candidate':36s} {'CPU min s':>9s} {'CPU med':>8s} {'wall min':>8s}"
    print(f"{head} max rel err products  convergence")
    for name in runs:
        err, n, flag = info[name]
        print(
            f"{name:36s} {min(cpu[name]):9.2f} {statistics.median(cpu[name]):8.2f} "
            f"{min(wall[name]):8.2f} {err:11.1e} {n:8d}  {flag}"
        )
    ours_name = next(iter(runs))
    for name in runs:
        if name != ours_name and info[name][0] <= 1e-4:
            print(
                f"ratio (CPU min) {name} / collapselab: {min(cpu[name]) / min(cpu[ours_name]):.2f}x"
            )
    print(f"1-minute load average during the runs: {min(load):.1f}-{max(load):.1f}")
    # One product each, after a warm-up: the cost per product, apart from the Lanczos steps.
    ops = {
        "collapselab (kept graph)": HessianOperator(
            Objective(model, "ce", [(x, y)]), fused_ce=True
        ),
        "hessian-eigenthings": he.HessianOperator(
            model, [(x, y)], lambda m, b: loss(m(b[0]), b[1])
        ),
    }
    v = torch.randn(P, generator=torch.Generator().manual_seed(1))
    for name, op in ops.items():
        op.matvec(v)
        _, c, w = clock(lambda op=op: [op.matvec(v) for _ in range(3)])
        print(f"  one Hessian-vector product, {name}: {c / 3:.3f} s CPU ({w / 3:.3f} s wall)")


def layer_spectra(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    """Every layer's top-k Hessian eigenvalues (its own block of the Hessian)."""
    print(f"\nper-layer top-{K} (Hessian block of each layer, float32, tol {TOL}, start=1)")
    for name, index in LAYERS.items():
        obj = Objective(model, "ce", [(x, y)], params=getattr(model, index))
        op = HessianOperator(obj, fused_ce=True)
        pairs, c, w = clock(lambda op=op: top_eigenpairs(op, min(K, op.dim - 1), tol=TOL, start=1))
        rel = float(pairs.residuals.max()) / float(pairs.values.abs().max())
        print(
            f"  {name:5s} P = {obj.dim:9,d}: {pairs.products:3d} products, {c:6.2f} s CPU "
            f"({w:.2f} wall), converged {pairs.converged}, max residual / lambda_1 {rel:.1e}; "
            f"top values {np.array2string(pairs.values.numpy()[:5], precision=4)}"
        )


def papyan_last_two(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    """Papyan's decomposition of each of the last two layers: class-pair means in one
    pass, the explicit class and cross parts, and the top-k of G and of G_within."""
    print(f"\nPapyan's decomposition (class centring), last two layers each, top-{K}, tol {TOL}")
    for name in ("fc1", "fc2"):
        obj = Objective(model, "ce", [(x, y)], params=getattr(model, LAYERS[name]))
        pairs, c_pairs, _ = clock(lambda obj=obj: class_pair_means(obj))
        dec = papyan_decomposition(obj, centring="class", pairs=pairs)
        G, c_g, _ = clock(lambda dec=dec: top_eigenpairs(dec.ggn, K, tol=TOL, start=1))
        W, c_w, _ = clock(lambda dec=dec: top_eigenpairs(dec.within_part, K, tol=TOL, start=1))
        (cls, crs), c_low, _ = clock(
            lambda dec=dec: (dec.class_part.eigenpairs()[0], dec.cross_part.eigenpairs()[0])
        )
        print(
            f"  {name} (P = {obj.dim:,}): class-pair means {c_pairs:.1f} s CPU; G top-{K} "
            f"{G.products} products {c_g:.1f} s (converged {G.converged}); G_within "
            f"{W.products} products {c_w:.1f} s ({W.converged}); class and cross parts' "
            f"spectra {c_low:.1f} s; image overlap {dec.image_overlap():.2e}\n"
            f"    G       {np.array2string(G.values.numpy()[:5], precision=4)}\n"
            f"    class   {np.array2string(cls.numpy()[:5], precision=4)}\n"
            f"    cross   {np.array2string(crs.numpy()[:5], precision=4)}\n"
            f"    within  {np.array2string(W.values.numpy()[:5], precision=4)}"
        )
        del pairs, dec


CHILD = """
import json, sys, torch
sys.path.insert(0, {here!r})
from bench_curvature_convnet import convnet, K, TOL
from collapselab.curvature import HessianOperator, Objective, top_eigenpairs
torch.set_num_threads(1)
model = convnet(0)
model.load_state_dict(torch.load({state!r}))
x, y = torch.load({batch!r})
def peak():  # this process's peak RSS in KiB (ru_maxrss would carry the parent's from the fork)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
before = peak()
op = HessianOperator(Objective(model, "ce", [(x, y)]), fused_ce=True)
op.matmat(torch.zeros(op.dim, 1))
graph = peak()
pairs = top_eigenpairs(op, K, tol=TOL, start=1)
after = peak()
print(json.dumps(dict(before=before, graph=graph, after=after, P=op.dim, n=pairs.products)))
"""


def memory(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        state, batch = os.path.join(tmp, "model.pt"), os.path.join(tmp, "batch.pt")
        torch.save(model.state_dict(), state)
        torch.save((x, y), batch)
        here = os.path.dirname(os.path.abspath(__file__))
        code = CHILD.format(here=here, state=state, batch=batch)
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(run.stderr)
    rec = json.loads(run.stdout.strip().splitlines()[-1])
    P, n, mib = rec["P"], rec["n"], 1 / 1024  # VmHWM is in KiB
    graph = (rec["graph"] - rec["before"]) * mib
    run_extra = (rec["after"] - rec["graph"]) * mib
    model_mb = P * 4 / 2**20
    bound = P * (K + 1) * 4 / 2**20
    print(
        f"\nmemory of the top-{K} run (fresh child process, peak RSS): {rec['before'] * mib:.0f} "
        f"MB with torch, the net ({model_mb:.1f} MB of parameters) and the data loaded; "
        f"+{graph:.0f} MB for the kept graph (first product); +{run_extra:.0f} MB more during "
        f"the run ({n} products). Bound of the issue beyond the net and graph: P x (k + block) "
        f"float32 = {bound:.0f} MB; what the solver keeps: the basis and its products, "
        f"2 x P x {n} float32 = {2 * P * n * 4 / 2**20:.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1024, help="a smoke run takes fewer")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, nargs="*", default=[20, 23, 26])
    parser.add_argument(
        "--parts", nargs="*", default=["eigen", "layers", "papyan", "memory"], help="what to run"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{os.cpu_count()} cores, torch {torch.__version__}, load {os.getloadavg()}")
    x, y = fashion(args.samples)
    model = trained(x, y)
    if "memory" in args.parts:  # first: a fresh child, before this process grows
        memory(model, x, y)
    if "eigen" in args.parts:
        eigen_speed(model, x, y, args)
    if "layers" in args.parts:
        layer_spectra(model, x, y)
    if "papyan" in args.parts:
        papyan_last_two(model, x, y)


if __name__ == "__main__":
    main()
