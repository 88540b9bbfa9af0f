"""Module-level sweep tasks for the sweep tests (a process pool must import them)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch


def train_linear(config: dict[str, Any]) -> dict[str, Any]:
    """A few full-batch GD steps of a linear regression, all randomness from the config."""
    generator = torch.Generator().manual_seed(config["seed"])
    x = torch.randn(64, 8, generator=generator, dtype=torch.float64)
    y = x @ torch.randn(8, 1, generator=generator, dtype=torch.float64)
    w = torch.zeros(8, 1, dtype=torch.float64, requires_grad=True)
    for _ in range(config.get("steps", 20)):
        loss = ((x @ w - y) ** 2).mean()
        (grad,) = torch.autograd.grad(loss, w)
        with torch.no_grad():
            w -= config["lr"] * grad
    return {
        "loss": float(loss.detach()),
        "weights": w.detach().numpy().ravel(),
        "noise": float(torch.rand(()).item()),  # the global generator, seeded by the sweep
        "threads": torch.get_num_threads(),
        "name": f"lr={config['lr']}",
    }


def count_calls(config: dict[str, Any]) -> dict[str, Any]:
    """Appends the member's index to a log file, then returns it."""
    with open(config["log"], "a", encoding="utf-8") as handle:
        handle.write(f"{config['index']}\n")
    return {"index": config["index"], "square": config["index"] ** 2}


def crash_once(config: dict[str, Any]) -> dict[str, Any]:
    """Kills its process (``os._exit``) the first time member ``crash`` runs."""
    marker = Path(config["marker"])
    if config["index"] == config["crash"] and not marker.exists():
        marker.write_text("crashed")
        os._exit(3)
    return {"index": config["index"]}


def fail_member(config: dict[str, Any]) -> dict[str, Any]:
    """Raises for member ``fail`` every time; the others log themselves and return."""
    if config["index"] == config["fail"]:
        raise RuntimeError(f"member {config['index']} always fails")
    return count_calls(config)


def crash_always(config: dict[str, Any]) -> dict[str, Any]:
    """Kills its process for member ``crash`` every time."""
    if config["index"] == config["crash"]:
        os._exit(5)
    return count_calls(config)


def array_of(config: dict[str, Any]) -> dict[str, Any]:
    return {"values": np.arange(config["n"], dtype=np.float32)}


def read_environment(config: dict[str, Any]) -> dict[str, Any]:
    """The value of the environment variable ``config['name']`` in the member's process."""
    return {"value": os.environ.get(config["name"], "")}


def nested(config: dict[str, Any]) -> dict[str, Any]:
    """A member that runs a sweep of its own on the local executor."""
    from collapselab.experiments.sweeps import run_sweep

    inner = [{"index": i, "log": os.devnull} for i in range(config["n"])]
    result = run_sweep(count_calls, inner, executor="local", workers=2)
    return {"squares": [r["square"] for r in result.results]}


def sleep_for(config: dict[str, Any]) -> dict[str, Any]:
    """Writes its process id to ``config['pid_file']`` (when given), then sleeps."""
    import time

    if config.get("pid_file"):
        Path(config["pid_file"]).write_text(str(os.getpid()))
    time.sleep(config["seconds"])
    return {"slept": config["seconds"]}
