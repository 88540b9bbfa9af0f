"""Benchmark 1: ``collapselab.measure`` vs a naive reference on N=50,000, D=512, C=10.

Target (issue "Measurement engine", Performance): ``measure`` at least 10x faster than a
naive reference (per-class Python loops, dense D x D covariances in NumPy float64,
``numpy.linalg.pinv``), with the same values to 1e-8 relative. Prints the timings, their
ratio, and the relative difference of every key.

Two references: ``gemm`` (one BLAS product per class covariance) and, with ``--notebook``,
``notebook`` (per-sample outer products summed per batch and class, a Python loop over
samples for the nearest-class-mean decisions: the accumulate-then-measure pattern of the
reference neural-collapse code). Two floors are timed as well: the float64 copy of the
input and that copy plus its Gram matrix by a symmetric rank-k update, the least work an
exact float64 dense within-class covariance needs (``nc1_snr`` and the MSE family use it).

Both sides receive the same float32 input (a float32 torch tensor for ``measure``, its
NumPy view for the reference, which converts to float64 itself) and compute the same keys:
the NC catalogue with a classifier ``(W, b)`` and the MSE decomposition for ``lam``.
Timings are the minimum over ``--repeats`` interleaved runs (the machine may be shared).

Usage::

    python benchmarks/bench_measure.py
    python benchmarks/bench_measure.py --n 50000 --d 512 --c 10 --repeats 3
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from collapselab import measure

sys.path.insert(0, str(Path(__file__).resolve().parent))


def class_covariances_gemm(H, y, C):
    """Per class: mean and dense D x D covariance, one BLAS matrix product per class."""
    mus, covs = [], []
    for c in range(C):
        Hc = H[y == c]
        mu = Hc.mean(axis=0)
        Z = Hc - mu
        mus.append(mu)
        covs.append(Z.T @ Z / len(Hc))
    return mus, covs


def _class_covariances_outer(H, y, C, batch_size=128):
    """The MSE-NC notebook's way: over batches, per class, sum per-sample outer products."""
    D = H.shape[1]
    sums, counts = np.zeros((C, D)), np.zeros(C)
    for start in range(0, len(y), batch_size):
        h, t = H[start : start + batch_size], y[start : start + batch_size]
        for c in range(C):
            sums[c] += h[t == c].sum(axis=0)
            counts[c] += np.sum(t == c)
    mus = [sums[c] / counts[c] for c in range(C)]
    covs = [np.zeros((D, D)) for _ in range(C)]
    for start in range(0, len(y), batch_size):
        h, t = H[start : start + batch_size], y[start : start + batch_size]
        for c in range(C):
            z = h[t == c] - mus[c]
            covs[c] += (z[:, :, None] * z[:, None, :]).sum(axis=0)
    return mus, [cov / counts[c] for c, cov in enumerate(covs)]


def naive_reference(
    H32: np.ndarray,
    y: np.ndarray,
    W: np.ndarray,
    b: np.ndarray,
    lam: float,
    style: str = "gemm",
):
    """Every key of ``measure(H, y, W, b, lam)`` from the definitions, one class at a time.

    ``style="gemm"``: each class covariance is one BLAS product ``Z^T Z`` and the
    nearest-class-mean distances are computed per class on all samples at once.
    ``style="notebook"``: as the MSE-NC notebook (note 003) computes them: per-sample outer
    products summed over batches of 128, and a Python loop over samples for the
    nearest-class-mean distances. Balanced classes are assumed (as generated below), so
    class-balanced and sample weights coincide.
    """
    H = H32.astype(np.float64)
    N, D = H.shape
    C = W.shape[0]
    if style == "gemm":
        mus, covs = class_covariances_gemm(H, y, C)
    else:
        mus, covs = _class_covariances_outer(H, y, C)
    counts = [int(np.sum(y == c)) for c in range(C)]
    variances = [np.trace(cov) for cov in covs]
    M = np.stack(mus, axis=1)  # D x C
    mu_G = M.mean(axis=1)
    Mbar = M - mu_G[:, None]
    Sigma_W = sum(covs) / C
    Sigma_B = Mbar @ Mbar.T / C
    out = {}
    # pinv of the rank-(C-1) Sigma_B: singular values below 1e-10 of the largest are zero
    # (NumPy's default cut-off, 1e-15, would invert rounding noise of size 1e-16).
    out["nc1"] = np.trace(Sigma_W @ np.linalg.pinv(Sigma_B, rcond=1e-10)) / C
    out["nc1_trace_ratio"] = np.trace(Sigma_W) / np.trace(Sigma_B)
    ratios = []
    for c in range(C):
        for d in range(C):
            if c != d:
                dist2 = np.sum((M[:, c] - M[:, d]) ** 2)
                ratios.append((variances[c] + variances[d]) / (2 * dist2))
    out["nc1_cdnv"] = np.mean(ratios)
    evals, evecs = np.linalg.eigh(Sigma_W)
    inv_sqrt = evecs @ np.diag(evals**-0.5) @ evecs.T
    omega = np.linalg.svd(inv_sqrt @ Mbar, compute_uv=False)[: C - 1]
    out["nc1_snr"] = np.sum(omega**-2.0)

    def norms_and_cosines(V):  # rows are vectors
        norms = np.array([np.linalg.norm(v) for v in V])
        cos = [
            V[i] @ V[j] / (norms[i] * norms[j]) for i in range(len(V)) for j in range(i + 1, len(V))
        ]
        return norms, np.array(cos)

    for name, V in (("means", Mbar.T), ("classifiers", W)):
        norms, cos = norms_and_cosines(V)
        out[f"nc2_equinorm_{name}"] = np.std(norms, ddof=1) / np.mean(norms)
        out[f"nc2_equiangle_{name}"] = np.std(cos, ddof=1)
        out[f"nc2_maxangle_{name}"] = np.mean(np.abs(cos + 1.0 / (C - 1)))
    G = Mbar.T @ Mbar
    E = (np.eye(C) - np.ones((C, C)) / C) / math.sqrt(C - 1)
    out["nc2_etf_distance"] = np.linalg.norm(G / np.linalg.norm(G) - E)
    G0 = M.T @ M
    out["nc2_orthogonal_frame"] = np.linalg.norm(G0 / np.linalg.norm(G0) - np.eye(C) / math.sqrt(C))
    out["nc3_self_duality"] = np.sum((W / np.linalg.norm(W) - Mbar.T / np.linalg.norm(Mbar)) ** 2)
    out["nc3_self_duality_classwise"] = np.mean(
        [
            np.sum((W[c] / np.linalg.norm(W[c]) - Mbar[:, c] / np.linalg.norm(Mbar[:, c])) ** 2)
            for c in range(C)
        ]
    )
    if style == "gemm":
        dist = np.stack([np.linalg.norm(H - M[:, c], axis=1) for c in range(C)], axis=1)
        ncc = np.argmin(dist, axis=1)
    else:
        ncc = np.array([np.argmin(np.linalg.norm(h - M.T, axis=1)) for h in H])
    clf = np.argmax(H @ W.T + b, axis=1)
    out["ncc_accuracy"] = np.mean(ncc == y)
    out["accuracy"] = np.mean(clf == y)
    out["nc4_ncc_mismatch"] = np.mean(ncc != clf)
    out["nc1_dense"] = 1.0
    # MSE family (note 003 §2.4): extended features h~ = [h; 1], W~ = [W, b].
    Y = np.eye(C)
    S_ext = np.zeros((D + 1, D + 1))
    YH_ext = np.zeros((C, D + 1))
    for c in range(C):
        Hc = np.hstack([H[y == c], np.ones((counts[c], 1))])
        S_ext += Hc.T @ Hc / N
        YH_ext += np.outer(Y[c], Hc.sum(axis=0)) / N
    A = S_ext + lam * np.eye(D + 1)
    W_ls = np.linalg.solve(A.T, YH_ext.T).T  # Ave(y h~^T) (S~ + lam I)^-1
    W_t = np.hstack([W, b[:, None]])

    def loss(Wt):
        total = 0.0
        for c in range(C):
            Hc = np.hstack([H[y == c], np.ones((counts[c], 1))])
            total += np.sum((Hc @ Wt.T - Y[c]) ** 2)
        return 0.5 * total / N + 0.5 * lam * np.sum(Wt**2)

    Sigma_W_ext = np.zeros((D + 1, D + 1))
    Sigma_W_ext[:D, :D] = Sigma_W
    nc1_term = 0.5 * np.trace(W_ls @ (Sigma_W_ext + lam * np.eye(D + 1)) @ W_ls.T)
    M_ext = np.vstack([M, np.ones((1, C))])
    nc23_term = 0.5 / C * np.linalg.norm(W_ls @ M_ext - np.eye(C)) ** 2
    dW = W_t - W_ls
    out["mse_ls_loss"] = loss(W_ls)
    out["mse_nc1_term"] = nc1_term
    out["mse_nc23_term"] = nc23_term
    out["mse_loss"] = loss(W_t)
    out["mse_ls_perp"] = 0.5 * np.trace(dW @ A @ dW.T)
    out["mse_ls_perp_ratio"] = out["mse_ls_perp"] / out["mse_ls_loss"]
    out["mse_ls_distance"] = np.linalg.norm(dW)
    return {k: float(v) for k, v in out.items()}


def make_data(n: int, d: int, c: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(c), n // c)
    rng.shuffle(y)
    centres = rng.normal(scale=0.1, size=(c, d))
    H = (centres[y] + rng.normal(size=(len(y), d))).astype(np.float32)
    W = rng.normal(size=(c, d)) / math.sqrt(d)
    b = rng.normal(size=c)
    return H, y, W, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--d", type=int, default=512)
    parser.add_argument("--c", type=int, default=10)
    parser.add_argument("--lam", type=float, default=2.5e-3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--notebook", action="store_true", help="also time the notebook-style reference (slow)"
    )
    args = parser.parse_args()
    H, y, W, b = make_data(args.n, args.d, args.c)
    Ht, yt = torch.from_numpy(H), torch.from_numpy(y)
    Wt, bt = torch.from_numpy(W), torch.from_numpy(b)

    def run_measure():
        return measure(Ht, yt, Wt, bt, args.lam)

    runs = {
        "measure": run_measure,
        "naive (per-class GEMM)": lambda: naive_reference(H, y, W, b, args.lam, "gemm"),
        # Not candidates: the least work any exact float64 computation of the dense
        # within-class covariance does (nc1_snr and the MSE family need it).
        "floor: float64 copy": lambda: H.astype(np.float64),
        "floor: copy + Gram (syrk)": lambda: _gram_floor(H),
    }
    run_measure()  # warm-up
    times: dict[str, list[float]] = {k: [] for k in runs}
    values = {}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            values[name] = fn()
            times[name].append(time.perf_counter() - t0)
    if args.notebook:  # one run: it takes minutes
        name = "naive (notebook style)"
        t0 = time.perf_counter()
        values[name] = naive_reference(H, y, W, b, args.lam, "notebook")
        times[name] = [time.perf_counter() - t0]

    print(f"torch {torch.__version__}, numpy {np.__version__}, threads {torch.get_num_threads()}")
    print(f"N={args.n}, D={args.d}, C={args.c}, float32 input, lam={args.lam}")
    base = min(times["measure"])
    for name, ts in times.items():
        print(
            f"{name:26s} min {min(ts):8.3f}s  median {statistics.median(ts):8.3f}s  "
            f"time / measure(min) {min(ts) / base:6.2f}"
        )
    ours = values["measure"]
    for name in values:
        if name == "measure" or name.startswith("floor"):
            continue
        worst = max(_rel(ours[k], values[name][k]) for k in ours if k in values[name])
        print(f"max relative difference, measure vs {name}: {worst:.2e}")
    ref = values["naive (per-class GEMM)"]
    missing = sorted(set(ref) ^ set(ours))
    if missing:
        print(f"keys present on one side only: {missing}")
    worst = 0.0
    print(f"{'key':30s} {'measure':>22s} {'naive (GEMM)':>22s} {'rel. diff':>10s}")
    for key in sorted(set(ref) & set(ours)):
        rel = _rel(ours[key], ref[key])
        worst = max(worst, rel)
        print(f"{key:30s} {ours[key]:22.15g} {ref[key]:22.15g} {rel:10.2e}")
    print(f"max relative difference: {worst:.2e} (target 1e-8)")


def _gram_floor(H32: np.ndarray) -> np.ndarray:
    """``X^T X`` of the float64 copy ``X``: NumPy calls BLAS ``syrk`` (half a general product)
    for ``a.T @ a`` on one buffer, the cheapest exact O(N D^2) float64 product at hand."""
    X = H32.astype(np.float64)
    return X.T @ X


def _rel(a: float, r: float) -> float:
    return abs(a - r) / abs(r) if r != 0 else abs(a - r)


if __name__ == "__main__":
    main()
