"""Overhead of paper 000's per-iteration measurement against plain training (issue 15).

Target: training with the measurement at a 10-iteration schedule costs at most 1.5x plain
training of the same model on the same batches. Both are timed in the same run,
interleaved, on one torch thread, minima over ``--repeats``:

* plain: :func:`collapselab.train.train` of the quick preset's baseline (9-layer, 128-wide
  bias-free ReLU MLP, clustered data, 5,000 samples, SGD 0.1, batch 100; ``--width 512
  --dataset fashion_mnist``: the paper's width on 784-pixel images) for ``--iterations``
  steps (a callback only stops it at the budget);
* measured: the same with :class:`~collapselab.experiments.fd.DiversityRecorder` every 10
  iterations (the Monitor's diversity family with gradients and M4 on a 200-sample probe
  set, every hidden layer; the actual-update M4; the loss on the probe set from the
  Monitor's forward pass, as the presets take it, or with ``--loss-per-class 100`` on a
  separate 1,000-sample subset, as the presets did before).

Checks: the two runs end with identical weights (the measurement does not change
training), and every recorded value of the phase layer is finite.

Both the wall time and the process's CPU time are reported: on a machine shared with other
jobs the wall time of a one-thread run includes the time it waited for a core, which the
CPU time leaves out (it still includes the slowdown of a shared cache and memory bus).

    nice -n 10 python benchmarks/bench_diversity_overhead.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch

from collapselab._threads import serial_threads
from collapselab.data import load_data
from collapselab.experiments.fd import BoundarySchedule, DiversityRecorder
from collapselab.experiments.fd.measurement import class_stratified
from collapselab.experiments.fd.presets import FASHION_MNIST, TWO_PHASE, Member
from collapselab.experiments.fd.training import build_model, probe_set, subset, train_config
from collapselab.train import train


class _Stop:
    def __init__(self, at: int) -> None:
        self.at = at

    def on_iteration_end(self, state) -> None:
        if state.iteration >= self.at:
            state.request_stop("budget")


def _once(
    config: Member, measured: bool, every: int
) -> tuple[tuple[float, float], torch.nn.Module, list]:
    data = load_data(config.data, None, 0)
    train_split = data.train
    probe = probe_set(train_split, config, 0)
    per_class = config.measurement.loss_per_class
    loss_set = (
        subset(train_split, class_stratified(train_split.y, per_class, 2), "loss")
        if per_class
        else None  # the probe's loss, from the Monitor's forward pass
    )
    model = build_model(config.model, int(train_split.x.shape[1]), train_split.n_classes, 0)
    cfg = train_config(config.training, int(train_split.y.numel()), 0, "cpu")
    callbacks: list = [_Stop(config.training.iterations)]
    recorder = None
    if measured:
        recorder = DiversityRecorder(model, probe, loss_set, BoundarySchedule(every), cfg.lr)
        callbacks.append(recorder)
    t0, c0 = time.perf_counter(), time.process_time()
    train(model, data, cfg, callbacks, None)
    times = (time.perf_counter() - t0, time.process_time() - c0)
    return times, model, recorder.rows if recorder else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--width", type=int, default=128, help="hidden width (paper: 512)")
    parser.add_argument(
        "--dataset",
        default="clustered",
        choices=("clustered", "fashion_mnist"),
        help="clustered (64 inputs) or fashion_mnist (784, 500 per class, local files)",
    )
    parser.add_argument(
        "--loss-per-class",
        type=int,
        default=None,
        help="size of the loss subset per class (default: the preset's, 0: the loss of "
        "the probe set, from the Monitor's forward pass; 100: the earlier presets' subset)",
    )
    args = parser.parse_args()
    config = TWO_PHASE["quick"].base.replace(iterations=args.iterations, width=args.width)
    if args.loss_per_class is not None:
        config = config.replace(loss_per_class=args.loss_per_class)
    if args.dataset != "clustered":
        config = config.replace(data=FASHION_MNIST)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"load average before {os.getloadavg()}"
    )
    plain, measured = [], []
    with serial_threads():
        for _ in range(args.repeats):
            t_plain, model_plain, _ = _once(config, False, args.every)
            t_meas, model_meas, rows = _once(config, True, args.every)
            plain.append(t_plain)
            measured.append(t_meas)
            for a, b in zip(model_plain.parameters(), model_meas.parameters(), strict=True):
                assert torch.equal(a, b), "the measurement changed the training trajectory"
            layer = "layers.2.act"
            assert all(
                torch.isfinite(torch.tensor(r[f"feature_cosine_cross_class/{layer}"])) for r in rows
            )
    n_measurements = len(rows)
    loss = config.measurement.loss_per_class
    print(
        f"{args.dataset}, 9 x {args.width} MLP, batch 100, probe "
        f"{10 * config.measurement.probe_per_class}, "
        f"{f'loss subset {10 * loss}' if loss else 'loss on the probe'}; "
        f"{args.iterations} iterations measured every {args.every} ({n_measurements} "
        f"measurements incl. step 0), {args.repeats} repeats"
    )
    for i, clock in enumerate(("wall time", "CPU time")):
        p, m = [t[i] for t in plain], [t[i] for t in measured]
        print(f"{clock}: plain training: min {min(p):.3f} s  (all: {[round(t, 3) for t in p]})")
        print(f"{clock}: with measurement: min {min(m):.3f} s  (all: {[round(t, 3) for t in m]})")
        print(f"{clock}: overhead ratio (min/min): {min(m) / min(p):.2f}x (target <= 1.5x)")
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
