"""Curvature benchmark: collapselab.curvature against curvlinops and PyHessian, one run.

Checks the performance targets of the issue "Curvature of real networks":

1. values: Hessian, GGN and empirical-Fisher products of collapselab equal curvlinops'
   (float64, small MLP), and the top-10 Hessian eigenvalues of the three tools agree;
2. speed: top-10 Hessian eigenvalues of a ~100k-parameter MLP on 2,048 samples, same model,
   data and tolerance: collapselab (restarted block Lanczos) vs PyHessian (power iteration
   with deflation, ``cuda=False``) vs curvlinops + ``scipy.sparse.linalg.eigsh``;
3. the cost of Papyan's decomposition of one layer (passes over the data, products);
4. the peak memory of the top-k run, against ``P x k`` and ``P x P``.

Needs a benchmark environment with curvlinops and PyHessian next to collapselab (they are
not dependencies: curvlinops' metadata pulls torchvision through backpack, which is broken
against the CPU torch here)::

    python3 -m venv /tmp/bench-venv && . /tmp/bench-venv/bin/activate
    pip install -c constraints.txt -e .
    pip install -c constraints.txt --no-deps curvlinops-for-pytorch backpack-for-pytorch pyhessian
    pip install -c constraints.txt tqdm einops einconv linear_operator opt-einsum unfoldNd
    python benchmarks/bench_curvature.py --repeats 3

Every candidate is timed in turn, ``--repeats`` times, interleaved; the minimum and median
wall times are reported with the load average before and after.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn

from collapselab.curvature import (
    EmpiricalFisherOperator,
    GGNOperator,
    HessianOperator,
    Objective,
    class_pair_means,
    top_eigenpairs,
)
from collapselab.curvature.eigen import basis_dtype


def mlp(widths: list[int], seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def data(
    n: int, d: int, k: int, seed: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    means = 2.0 * torch.randn(k, d, generator=g) / d**0.5
    y = torch.arange(k).repeat(n // k + 1)[:n]
    x = means[y] + torch.randn(n, d, generator=g) / d**0.5
    return x.to(dtype), y


def train_briefly(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int) -> None:
    """A few SGD steps, so that the spectrum has its outliers."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for i in range(steps):
        rows = slice((i * 128) % len(y), (i * 128) % len(y) + 128)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[rows]), y[rows]).backward()
        opt.step()


def value_check() -> None:
    from curvlinops import EFLinearOperator, GGNLinearOperator, HessianLinearOperator

    model = mlp([20, 16, 12, 5], seed=1).double()
    x, y = data(200, 20, 5, seed=2, dtype=torch.float64)
    batches = [(x[i : i + 50], y[i : i + 50]) for i in range(0, 200, 50)]
    params = [p for p in model.parameters()]
    obj = Objective(model, "ce", batches)
    V = torch.randn(obj.dim, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    loss = nn.CrossEntropyLoss()
    print("1. values (float64, MLP 20-16-12-5, 200 samples, CE mean), max |ours - curvlinops|:")
    for name, ours, theirs in (
        ("Hessian", HessianOperator, HessianLinearOperator),
        ("GGN", GGNOperator, GGNLinearOperator),
        ("empirical Fisher", EmpiricalFisherOperator, EFLinearOperator),
    ):
        ref = theirs(model, loss, params, batches, check_deterministic=False).to_scipy()
        a = ours(obj).matmat(V).numpy()
        b = np.stack([ref @ V[:, j].numpy() for j in range(V.shape[1])], axis=1)
        print(f"   {name:17s} {np.abs(a - b).max():.2e} (scale {np.abs(b).max():.2e})")


def timed(fn, repeats: int, log: dict[str, list[float]], name: str):
    start = time.perf_counter()
    out = fn()
    log.setdefault(name, []).append(time.perf_counter() - start)
    return out


def speed(repeats: int, tol: float, k: int, threads: int) -> None:
    from curvlinops import HessianLinearOperator
    from pyhessian import hessian
    from scipy.sparse.linalg import eigsh

    torch.set_num_threads(threads)
    model = mlp([784, 120, 64, 10], seed=0)
    x, y = data(2048, 784, 10, seed=0, dtype=torch.float32)
    train_briefly(model, x, y, 60)
    P = sum(p.numel() for p in model.parameters())
    loss = nn.CrossEntropyLoss()
    params = [p for p in model.parameters()]
    print(
        f"\n2. top-{k} Hessian eigenvalues: MLP 784-120-64-10 ({P} parameters), 2048 samples "
        f"in one batch, CE mean, float32, tol={tol}, {threads} thread(s)"
    )
    exact = copy.deepcopy(model).double()  # the reference: float64, tight tolerance
    reference = top_eigenpairs(
        HessianOperator(Objective(exact, "ce", [(x.double(), y)])), k, tol=1e-9
    ).values.numpy()
    times: dict[str, list[float]] = {}
    values: dict[str, np.ndarray] = {}
    products: dict[str, int] = {}

    in_products: list[float] = []  # per collapselab run: its time inside the products

    def ours() -> np.ndarray:
        op = HessianOperator(Objective(model, "ce", [(x, y)]))
        spent, inner = [0.0], op.matmat

        def matmat(V: torch.Tensor) -> torch.Tensor:
            start = time.perf_counter()
            out = inner(V)
            spent[0] += time.perf_counter() - start
            return out

        op.matmat = matmat  # times the products inside the run
        pairs = top_eigenpairs(op, k, tol=tol)
        products["collapselab"] = pairs.products
        in_products.append(spent[0])
        return pairs.values.numpy()

    def curvlinops_eigsh() -> np.ndarray:
        op = HessianLinearOperator(model, loss, params, [(x, y)], check_deterministic=False)
        count = {"n": 0}
        scipy_op = op.to_scipy()
        inner = scipy_op.matvec

        def mv(v: np.ndarray) -> np.ndarray:
            count["n"] += 1
            return inner(v)

        from scipy.sparse.linalg import LinearOperator

        wrapped = LinearOperator(scipy_op.shape, matvec=mv, dtype=np.float32)
        vals = eigsh(wrapped, k=k, which="LA", tol=tol, return_eigenvectors=False)
        products["curvlinops+eigsh"] = count["n"]
        return np.sort(vals)[::-1]

    pyhessian_module = sys.modules["pyhessian.hessian"]  # the package exports a class of that name

    hvp = pyhessian_module.hessian_vector_product

    def counted_hvp(*args):
        products["PyHessian"] = products.get("PyHessian", 0) + 1
        return hvp(*args)

    pyhessian_module.hessian_vector_product = counted_hvp

    def pyhessian_power(tol_power: float) -> np.ndarray:
        products["PyHessian"] = 0
        h = hessian(model, loss, data=(x, y), cuda=False)
        vals, _ = h.eigenvalues(maxIter=1000, tol=tol_power, top_n=k)
        return np.sort(np.array(vals))[::-1]

    load_before = os.getloadavg()
    for _ in range(repeats):
        for name, fn in (
            ("collapselab", ours),
            ("curvlinops+eigsh", curvlinops_eigsh),
            ("PyHessian", lambda: pyhessian_power(tol)),
            ("PyHessian tol/100", lambda: pyhessian_power(tol / 100)),
        ):
            before = dict(products)
            values[name] = timed(fn, repeats, times, name)
            if name == "PyHessian tol/100":
                products[name] = products["PyHessian"]
                products["PyHessian"] = before.get("PyHessian", 0)
    load_after = os.getloadavg()
    best = {n: min(t) for n, t in times.items()}
    for name, t in times.items():
        err = np.abs(values[name] - reference).max() / abs(reference[0])
        extra = f", {products[name]} products" if name in products else ""
        print(
            f"   {name:17s} min {min(t):7.2f} s  median {statistics.median(t):7.2f} s  "
            f"max rel. error of the {k} values {err:.1e}{extra}"
        )
    print(
        "   ratios (min times): PyHessian / collapselab = "
        f"{best['PyHessian'] / best['collapselab']:.1f}x (same tol), "
        f"{best['PyHessian tol/100'] / best['collapselab']:.1f}x (PyHessian at tol/100), "
        f"curvlinops+eigsh / collapselab = {best['curvlinops+eigsh'] / best['collapselab']:.2f}x"
    )
    run = int(np.argmin(times["collapselab"]))  # the best run, split
    n, spent = products["collapselab"], in_products[run]
    print(
        f"   where collapselab's time goes (its best run): {n} products {spent:.3f} s "
        f"({spent / n * 1e3:.1f} ms each, the first building the graph), the Lanczos steps "
        f"the other {best['collapselab'] - spent:.3f} s of {best['collapselab']:.3f} s"
    )
    print(f"   reference (float64, tol 1e-9): {np.array2string(reference, precision=4)}")
    print(f"   load average before {load_before}, after {load_after}")


def decomposition_cost(k: int, tol: float, threads: int) -> None:
    """The full decomposition of one layer: class-pair means, G, G_within and the two
    operator knock-outs (top-k each), with the passes over the data counted."""
    from collapselab.curvature import papyan_decomposition

    torch.set_num_threads(threads)
    model = mlp([784, 120, 64, 10], seed=0)
    x, y = data(2048, 784, 10, seed=0, dtype=torch.float32)
    train_briefly(model, x, y, 60)
    batches = [(x[i : i + 512], y[i : i + 512]) for i in range(0, 2048, 512)]
    obj = Objective(model, "ce", batches, params=[model[2].weight])
    t0 = time.perf_counter()
    obj.gradient()
    grad_time = time.perf_counter() - t0
    passes0 = obj.passes
    start = time.perf_counter()
    pairs = class_pair_means(obj)
    pair_time = time.perf_counter() - start
    dec = papyan_decomposition(obj, centring="class", pairs=pairs)
    products = 0
    for op in (dec.ggn, dec.within_part, dec.knockout("class"), dec.knockout("cross")):
        products += top_eigenpairs(op, k, tol=tol).products
    dec.class_part.eigenpairs()
    dec.cross_part.eigenpairs()
    total = time.perf_counter() - start
    print(
        f"\n3. Papyan's decomposition of layer 2 (P = {obj.dim}, K = 10, 2048 samples in 4 "
        f"batches, CE, class centring, top-{k} of G, G_within and the two knock-outs, "
        f"tol={tol}): {obj.passes - passes0} passes over the data (class-pair means: 1 pass "
        f"of {pair_time:.3f} s = {pair_time / grad_time:.1f} gradient passes of "
        f"{grad_time:.3f} s; G's graphs: 1 pass, kept for every product), "
        f"{products} Lanczos products, {total:.2f} s in all; factors "
        f"{tuple(pairs.means.shape)} (K·C vectors of P, never P x P)"
    )


def memory(k: int, tol: float) -> None:
    """Peak resident memory of the top-k Lanczos run, in a fresh child process that loads
    the briefly trained model (so that training's own peak is not in the baseline)."""
    import json
    import subprocess
    import tempfile

    model = mlp([784, 120, 64, 10], seed=0)
    x, y = data(2048, 784, 10, seed=0, dtype=torch.float32)
    train_briefly(model, x, y, 60)
    with tempfile.TemporaryDirectory() as tmp:
        state = os.path.join(tmp, "model.pt")
        torch.save(model.state_dict(), state)
        code = f"""
import json, resource, sys, torch
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
from bench_curvature import mlp, data
from collapselab.curvature import HessianOperator, Objective, top_eigenpairs
torch.set_num_threads(1)
model = mlp([784, 120, 64, 10], seed=0)
model.load_state_dict(torch.load({state!r}))
x, y = data(2048, 784, 10, seed=0, dtype=torch.float32)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
pairs = top_eigenpairs(HessianOperator(Objective(model, "ce", [(x, y)])), {k}, tol={tol})
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"before": before, "after": after, "P": pairs.vectors.shape[0]}}))
"""
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(run.stderr)
    rec = json.loads(run.stdout.strip().splitlines()[-1])
    P = rec["P"]
    extra_mb = (rec["after"] - rec["before"]) / 1024
    block = 1  # top_eigenpairs' default on the CPU
    dim = max(6 * k, 2 * k + 2 * block, 40) + block  # its buffers' capacity
    dtype = basis_dtype(torch.float32, tol)
    size = torch.empty(0, dtype=dtype).element_size()
    print(
        f"\n4. memory of top-{k} (child process, peak RSS): {rec['before'] / 1024:.0f} MB with "
        f"the model and data loaded; +{extra_mb:.0f} MB at the peak of the Lanczos run "
        f"(its basis and products: 2 x P x {dim} {str(dtype).removeprefix('torch.')} = "
        f"{2 * P * dim * size / 2**20:.0f} MB at most, plus the kept graph of the 2048 "
        f"samples); a P x P float32 matrix would be {P * P * 4 / 2**30:.0f} GB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}"
    )
    value_check()
    speed(args.repeats, args.tol, args.k, args.threads)
    decomposition_cost(args.k, args.tol, args.threads)
    memory(args.k, args.tol)


if __name__ == "__main__":
    main()
