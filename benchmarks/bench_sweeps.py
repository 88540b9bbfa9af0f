"""Sweep benchmark: 10 small networks, serial against the local process pool on 2 cores.

Checks the target of issue 14 ("Ensembles and sweeps that scale out"): on 2 cores, 10 small
networks trained in parallel by :func:`collapselab.experiments.sweeps.run_sweep` with the
local executor finish in at most 0.6x the serial wall time. Each member trains a small MLP
(``--width``, two hidden layers) with full-batch gradient descent on its own Gaussian
mixture for ``--steps`` steps on one torch thread (a few seconds each); both sweeps must give
bit-identical results (checked). Not a test: a timing, which needs a quiet machine.

    python benchmarks/bench_sweeps.py            # 10 members, 2 workers
    python benchmarks/bench_sweeps.py --members 4 --steps 100   # a quick look

The pool's wall time includes starting its workers (the first sweep of the process starts
the forkserver, which imports torch and collapselab once). The load average is printed
before and after each sweep; ``--repeats`` times the pair again (the forkserver is then
already running, as for every sweep after the first in a process).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import numpy as np
import torch

from collapselab.experiments.sweeps import run_sweep


def train_mlp(config: dict[str, Any]) -> dict[str, Any]:
    """Train one MLP on a Gaussian mixture drawn from ``config['seed']``; its final loss,
    accuracy and last-layer weights."""
    cpu_start = time.process_time()
    generator = torch.Generator().manual_seed(config["seed"])
    n, dim, classes, width = config["n"], config["dim"], config["classes"], config["width"]
    means = 2.0 * torch.randn(classes, dim, generator=generator)
    labels = torch.arange(n) % classes
    inputs = means[labels] + torch.randn(n, dim, generator=generator)
    model = torch.nn.Sequential(
        torch.nn.Linear(dim, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, classes),
    )
    optimiser = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for _ in range(config["steps"]):
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        logits = model(inputs)
    return {
        "loss": float(loss.detach()),
        "accuracy": float((logits.argmax(1) == labels).float().mean()),
        "last_layer": model[-1].weight.detach().numpy().copy(),
        "cpu_s": time.process_time() - cpu_start,  # not compared: depends on the machine
    }


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _timed(executor: str, configs: list[dict[str, Any]], workers: int) -> tuple[float, list]:
    print(f"{executor}: load before {_load()}", flush=True)
    start = time.perf_counter()
    result = run_sweep(train_mlp, configs, executor=executor, workers=workers, threads=1)
    wall = time.perf_counter() - start
    print(f"{executor}: {wall:.2f} s, load after {_load()}", flush=True)
    return wall, result.results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=1, help="serial/local pairs to time")
    args = parser.parse_args()
    configs = [
        {"seed": seed, "n": 2048, "dim": 32, "classes": 10, "width": args.width,
         "lr": 0.05, "steps": args.steps}
        for seed in range(args.members)
    ]  # fmt: skip
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, torch {torch.__version__}; {args.members} members of "
        f"{args.steps} steps, MLP {configs[0]['dim']}-{args.width}-{args.width}-10, "
        f"{args.workers} workers",
        flush=True,
    )
    ratios = []
    for _ in range(args.repeats):
        serial_s, serial = _timed("serial", configs, args.workers)
        local_s, local = _timed("local", configs, args.workers)
        for a, b in zip(serial, local, strict=True):
            assert a["loss"] == b["loss"] and a["accuracy"] == b["accuracy"]
            np.testing.assert_array_equal(a["last_layer"], b["last_layer"])
        ratios.append(local_s / serial_s)
        cpu = [sum(r["cpu_s"] for r in rs) for rs in (serial, local)]
        print(
            f"CPU time in the members: serial {cpu[0]:.1f} s, local {cpu[1]:.1f} s; "
            f"results identical; per member {serial_s / args.members:.2f} s serial; "
            f"local/serial = {ratios[-1]:.2f} (target <= 0.60)",
            flush=True,
        )
    print("ratios: " + ", ".join(f"{r:.2f}" for r in ratios))


if __name__ == "__main__":
    main()
