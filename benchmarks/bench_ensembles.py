"""Batched ensembles against one-by-one training (issue 34's targets), side by side in one run.

Sections (``--sections``, all by default):

* ``mlp``: E MLPs 784-100-10 (one hidden layer of 100, biases), one epoch of Fashion-MNIST
  (scikit-learn's digits, 64-100-10, when the files are absent; the output says which),
  SGD with momentum, batch 128, one seed each: ``train_ensemble`` against ``train`` member
  by member, the same samples per member (one epoch each), both ending with the evaluation
  of the whole train and test splits. Throughput: member-samples per second.
* ``linear``: E deep linear networks (paper 002's ``pcbias-scales`` shape, widths
  ``[q, 256, 256, 256, 256, K]``), exact full-batch GD in the principal frame, 500 steps:
  :func:`collapselab.train.linear_gd_step` on all members at once against the same step
  member by member (and against paper 002's NumPy step, :func:`pc_gd_step` of the
  experiment, when it can be imported).
* ``pcbias-mlp``: what paper 002's experiments now run: E MLPs of their shape (``q``-256-
  256-256-10, biases, ReLU; Fashion-MNIST pooled to 14 x 14, ``q = 196``, all 60000
  images), one epoch of plain SGD, batch 100, through the experiment's own trainers
  (``projections._sgd_batched`` against ``_sgd_alone`` member by member): once training
  only (the per-epoch scoring switched off in both) and, with ``--pcbias-scoring``, once
  as the experiment runs it (scoring every member on the train and test splits before and
  after the epoch, member by member in both). Reports the weight gap and, with scoring,
  whether the scores are equal.
* ``pcbias-linear``: E deep linear nets of ``pcbias-scales``' quick shape
  (``[q, 256, 256, 256, 256, K]``), 500 exact GD steps in the principal frame through the
  experiment's step (:func:`pc_gd_step` on stacked layers against member by member).
  Checks: bit-identical weights.
* ``engine-linear``: the same kind of network through the training engine (full-batch GD
  on the data, ``train_ensemble`` against ``train``), a smaller shape.
* ``stvgg``: E st-VGGs (paper 002's full width unless ``--stvgg-width``), a few batches of
  50 images of Fashion-MNIST (28 x 28; digits padded to 16 x 16 without the files), SGD.
* ``conv``: the options for batching convolutions, at st-VGG's layer shapes, forward and
  backward: a loop over members (what one-by-one training does), one grouped convolution
  (what the engine does), the same in channels-last memory format, ``torch.func.vmap``,
  batched ``unfold`` + ``bmm``, and one wide convolution with a block-diagonal mask (only
  for small ``E C``: it does ``E`` times the arithmetic). Each with its largest deviation
  from the loop's result.

Every section verifies its values (the batched members' final accuracies equal the members
trained alone, losses and weights to float32 rounding) besides timing them. The machine's
load (``uptime``) is printed before and after every section: on a shared machine a
speed-up measured under load is not the speed-up on quiet cores.

Usage::

    python benchmarks/bench_ensembles.py --threads 2 [--sections mlp,linear]
        [--members 100] [--solo-members 100] [--stvgg-members 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from collapselab.data import DataSplits, LabeledData, digits, load_dataset
from collapselab.data.errors import DatasetFileError
from collapselab.models import MLP, DeepLinear, StVGG
from collapselab.theory.pcbias import principal_frame
from collapselab.train import TrainConfig, linear_gd_step, train, train_ensemble

RESULTS: dict[str, Any] = {}


# ------------------------------------------------------------------------ helpers
def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())


def machine() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    return {
        "cpu": model or platform.processor(),
        "cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """``fn()``, its wall time and its process CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def section(name: str) -> None:
    print(f"\n== {name}   [{uptime()}]", flush=True)


def report(name: str, row: dict[str, Any]) -> None:
    RESULTS.setdefault(name, []).append(row)
    print("   " + ", ".join(f"{k}={v}" for k, v in row.items()), flush=True)


def fashion_or_digits(flatten: bool, pad: int | None = None) -> tuple[DataSplits, str]:
    try:
        data = load_dataset("fashion_mnist")
        name = "Fashion-MNIST (60000/10000 images)"
    except DatasetFileError:
        data = digits(flatten=False)
        name = "scikit-learn digits (Fashion-MNIST files absent)"
        if pad:
            x = F.pad(data.train.x, [(pad - 8) // 2] * 4)
            tx = F.pad(data.test.x, [(pad - 8) // 2] * 4)
            data = DataSplits(
                LabeledData(x, data.train.y, data.n_classes),
                LabeledData(tx, data.test.y, data.n_classes),
            )
    if flatten:
        data = DataSplits(
            LabeledData(data.train.x.flatten(1), data.train.y, data.n_classes),
            LabeledData(data.test.x.flatten(1), data.test.y, data.n_classes),
        )
    return data, name


def compare(solo: list[Any], batched: list[Any]) -> dict[str, Any]:
    """Final accuracies equal, losses and weights to float32 rounding."""
    same_acc = all(
        a.final.get(k) == b.final.get(k)
        for a, b in zip(solo, batched, strict=False)
        for k in ("train_accuracy", "test_accuracy")
    )
    loss = max(
        abs(a.final["train_loss"] - b.final["train_loss"])
        for a, b in zip(solo, batched, strict=False)
    )
    weights = max(
        float((p - q).abs().max())
        for a, b in zip(solo, batched, strict=False)
        for p, q in zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True)
    )
    return {"same_accuracies": same_acc, "loss_gap": f"{loss:.1e}", "weight_gap": f"{weights:.1e}"}


def ensemble_vs_solo(
    name: str,
    build: Callable[[int], torch.nn.Module],
    data: DataSplits,
    configs: list[TrainConfig],
    solo_members: int,
    samples_per_member: int,
) -> None:
    """Time ``train`` on the first ``solo_members`` members one by one, then all members
    batched; report throughputs (member-samples per second) and their ratio."""
    size = len(configs)
    solo, solo_wall, solo_cpu = timed(
        lambda: [train(build(i), data, configs[i]) for i in range(solo_members)]
    )
    models = [build(i) for i in range(size)]
    batched, wall, cpu = timed(lambda: train_ensemble(models, data, configs))
    solo_rate = solo_members * samples_per_member / solo_wall
    rate = size * samples_per_member / wall
    report(
        name,
        {
            "members": size,
            "solo_members": solo_members,
            "solo_s": round(solo_wall, 2),
            "solo_cpu_s": round(solo_cpu, 2),
            "batched_s": round(wall, 2),
            "batched_cpu_s": round(cpu, 2),
            "solo_samples_per_s": round(solo_rate),
            "batched_samples_per_s": round(rate),
            "ratio": round(rate / solo_rate, 2),
            **compare(solo, batched[:solo_members]),
        },
    )


# ----------------------------------------------------------------------- sections
def bench_mlp(args: argparse.Namespace) -> None:
    data, name = fashion_or_digits(flatten=True)
    section(f"mlp: {args.members} MLPs {data.train.x.shape[1]}-100-10, one epoch of {name}")

    def build(i: int) -> torch.nn.Module:
        torch.manual_seed(i)
        return MLP(data.train.x.shape[1], data.n_classes, width=100, depth=2, bias=True)

    configs = [
        TrainConfig(
            epochs=1, lr=0.05, momentum=0.9, batch_size=128, seed=i, log_initial=False,
            checkpoint_every=0,
        )
        for i in range(args.members)
    ]  # fmt: skip
    solo = min(args.solo_members, args.members)
    ensemble_vs_solo("mlp", build, data, configs, solo, len(data.train))


def _pooled_frame(q_side: int = 7) -> tuple[Any, str]:
    data, name = fashion_or_digits(flatten=False)
    x = data.train.x[:2000].float()
    side = x.shape[-1]
    if side > q_side:
        x = F.adaptive_avg_pool2d(x, q_side)
    x = x.flatten(1).double().numpy()
    x = (x - x.mean(0)) / (x.std(0) + 1e-8)
    y = np.eye(data.n_classes)[data.train.y[:2000].numpy()]
    return principal_frame(x, y), f"{name}, 2000 images pooled to q = {x.shape[1]}"


def bench_linear(args: argparse.Namespace) -> None:
    frame, name = _pooled_frame()
    widths = [frame.n_pcs, 256, 256, 256, 256, frame.n_outputs]
    size, steps = args.members, args.linear_steps
    section(f"linear: {size} deep linear nets {widths}, {steps} GD steps, principal frame ({name})")
    ws = []
    for i in range(size):
        torch.manual_seed(i)
        layers = [w.weight.detach().double() for w in DeepLinear(widths, init="def3").layers]
        layers[0] = layers[0] @ torch.from_numpy(frame.basis)
        ws.append(layers)
    eig = torch.from_numpy(np.asarray(frame.eigenvalues, dtype=np.float64))
    sums = torch.from_numpy(np.asarray(frame.class_sums, dtype=np.float64))
    mu = 0.5 / (len(widths) - 1) / float(eig[0])
    stacked = [torch.stack([m[j] for m in ws]) for j in range(len(widths) - 1)]

    def batched() -> list[torch.Tensor]:
        out = stacked
        for _ in range(steps):
            out = linear_gd_step(out, eig, sums, mu)
        return out

    def one_by_one() -> list[list[torch.Tensor]]:
        done = []
        for member in ws:
            out = [w.unsqueeze(0) for w in member]
            for _ in range(steps):
                out = linear_gd_step(out, eig, sums, mu)
            done.append(out)
        return done

    res, wall, cpu = timed(batched)
    solo, solo_wall, solo_cpu = timed(one_by_one)
    gap = max(
        float((res[j][e] - solo[e][j][0]).abs().max()) for e in range(size) for j in range(len(res))
    )
    row = {
        "members": size, "steps": steps, "solo_s": round(solo_wall, 2),
        "solo_cpu_s": round(solo_cpu, 2), "batched_s": round(wall, 2),
        "batched_cpu_s": round(cpu, 2), "ratio": round(solo_wall / wall, 2),
        "max_weight_gap": f"{gap:.1e}",
    }  # fmt: skip
    try:  # the experiment's own NumPy step, member by member
        from collapselab.experiments.pcbias.training import pc_gd_step

        def numpy_loop() -> None:
            for member in ws:
                out = [w.numpy() for w in member]
                for _ in range(steps):
                    out = pc_gd_step(out, frame, mu)

        _, np_wall, _ = timed(numpy_loop)
        row.update(numpy_solo_s=round(np_wall, 2), ratio_vs_numpy=round(np_wall / wall, 2))
    except ImportError:
        row.update(numpy_solo_s="pc_gd_step not importable")
    report("linear", row)


def bench_engine_linear(args: argparse.Namespace) -> None:
    data, _ = fashion_or_digits(flatten=False)
    x = F.adaptive_avg_pool2d(data.train.x[:1000].float(), 7).flatten(1)
    data = DataSplits(LabeledData(x, data.train.y[:1000], data.n_classes))
    widths = [49, 64, 64, data.n_classes]
    section(f"engine-linear: {args.members} DeepLinear {widths}, full-batch GD on 1000 images")

    def build(i: int) -> torch.nn.Module:
        torch.manual_seed(i)
        return DeepLinear(widths, init="def3")

    configs = [
        TrainConfig(
            epochs=args.engine_steps, lr=0.01, full_batch=True, loss="mse",
            mse_reduction="sum_classes", seed=i, log_initial=False, checkpoint_every=0,
            eval_every=args.engine_steps,
        )
        for i in range(args.members)
    ]  # fmt: skip
    solo = min(args.solo_members, args.members)
    ensemble_vs_solo("engine-linear", build, data, configs, solo, 1000 * args.engine_steps)


def bench_stvgg(args: argparse.Namespace) -> None:
    data, name = fashion_or_digits(flatten=False, pad=16)
    n = args.stvgg_steps * 50
    side = data.train.x.shape[-1]
    data = DataSplits(LabeledData(data.train.x[:n], data.train.y[:n], data.n_classes))
    size = args.stvgg_members
    section(
        f"stvgg: {size} st-VGGs (width x{args.stvgg_width}) on {name}: {args.stvgg_steps} "
        f"batches of 50 ({side} x {side})"
    )

    def build(i: int) -> torch.nn.Module:
        torch.manual_seed(i)
        return StVGG(data.n_classes, 1, input_size=side, width_multiplier=args.stvgg_width)

    configs = [
        TrainConfig(epochs=1, lr=0.1, batch_size=50, seed=i, log_initial=False, checkpoint_every=0)
        for i in range(size)
    ]
    solo = min(args.solo_members, size)
    ensemble_vs_solo("stvgg", build, data, configs, solo, n)


def _conv_layers(width: float, side: int) -> list[tuple[int, int, int, int]]:
    """(in, out, kernel, size) of st-VGG's convolutions."""
    chans = [max(1, round(c * width)) for c in (32, 64, 128, 256)]
    out, prev = [], 1
    for stage, (c, k) in enumerate(zip(chans, (3, 3, 3, 2), strict=True)):
        out += [(prev, c, k, side), (c, c, k, side)]
        prev, side = c, side // 2
        del stage
    return out


def bench_conv(args: argparse.Namespace) -> None:
    size, batch = args.conv_members, 50
    section(f"conv: batching options, {size} members, batch {batch}, st-VGG x{args.stvgg_width}")
    for cin, cout, k, side in _conv_layers(args.stvgg_width, 28):
        x = torch.randn(batch, size, cin, side, side)  # folded layout (B, E, C, H, W)
        w = torch.randn(size, cout, cin, k, k, requires_grad=True)
        b = torch.randn(size, cout, requires_grad=True)
        pad = (k - 1) // 2, k - 1 - (k - 1) // 2
        xp = F.pad(x.reshape(batch * size, cin, side, side), (pad[0], pad[1], pad[0], pad[1]))
        xp = xp.reshape(batch, size, cin, side + k - 1, side + k - 1)
        options = _conv_options(xp, w, b, size, batch)
        reference = options["loop"]().detach()
        grad = torch.randn_like(reference)
        row: dict[str, Any] = {"layer": f"{cin}->{cout} k{k} {side}x{side}"}
        for name, fn in options.items():
            out = fn()
            gap = float((out.detach() - reference).abs().max())
            best = float("inf")
            for _ in range(args.repeats):
                _, wall, _ = timed(lambda fn=fn, grad=grad: fn().backward(grad))
                best = min(best, wall)
                w.grad = b.grad = None
            row[name] = f"{best * 1e3:.0f}ms/{gap:.0e}"
        report("conv", row)


def _conv_options(xp, w, b, size, batch) -> dict[str, Callable[[], torch.Tensor]]:
    cin, side = xp.shape[2], xp.shape[-1]
    cout, k = w.shape[1], w.shape[-1]

    def loop() -> torch.Tensor:
        return torch.stack([F.conv2d(xp[:, e], w[e], b[e]) for e in range(size)], dim=1)

    def grouped(channels_last: bool = False) -> torch.Tensor:
        xg = xp.reshape(batch, size * cin, side, side)
        if channels_last:
            xg = xg.contiguous(memory_format=torch.channels_last)
        out = F.conv2d(xg, w.reshape(size * cout, cin, k, k), b.reshape(-1), groups=size)
        return out.reshape(batch, size, cout, *out.shape[2:])

    def vmapped() -> torch.Tensor:
        fn = torch.func.vmap(F.conv2d, in_dims=(1, 0, 0), out_dims=1)
        return fn(xp, w, b)

    def unfold_bmm() -> torch.Tensor:
        cols = F.unfold(xp.reshape(batch * size, cin, side, side), k)
        length = cols.shape[-1]
        cols = cols.reshape(batch, size, cin * k * k, length).permute(1, 2, 0, 3)
        out = torch.baddbmm(
            b.unsqueeze(-1), w.reshape(size, cout, -1), cols.reshape(size, -1, batch * length)
        )
        h = side - k + 1
        return out.reshape(size, cout, batch, h, h).permute(2, 0, 1, 3, 4)

    def block_diagonal() -> torch.Tensor:
        mask = torch.block_diag(*[torch.ones(cout, cin)] * size)[:, :, None, None]
        wide = mask * w.reshape(size * cout, cin, k, k).repeat(1, size, 1, 1)
        out = F.conv2d(xp.reshape(batch, size * cin, side, side), wide, b.reshape(-1))
        return out.reshape(batch, size, cout, *out.shape[2:])

    options = {"loop": loop, "grouped": grouped, "grouped_channels_last": lambda: grouped(True),
               "vmap": vmapped, "unfold_bmm": unfold_bmm}  # fmt: skip
    if size * cin * size * cout * k * k <= 2**24:
        options["block_diagonal"] = block_diagonal
    return options


def bench_pcbias_mlp(args: argparse.Namespace) -> None:
    from collapselab.experiments.pcbias import projections
    from collapselab.experiments.pcbias._common import pcb_data

    data = pcb_data("fashion_mnist", {}, pool=2)
    first = projections.MLPMember(data=data, kind="nonlinear", width=256, depth=3, lr=0.05,
                                  batch_size=100, epochs=1, discriminability=False)  # fmt: skip
    try:
        inputs = first.inputs()
    except DatasetFileError:
        fallback = pcb_data("digits", {"n_per_class": 160, "test_fraction": 0.25})
        first = dataclasses.replace(first, data=fallback)
        inputs = first.inputs()
    n, q = inputs.x.shape
    size, solo = args.members, min(args.solo_members, args.members)
    section(f"pcbias-mlp: {size} MLPs {q}-256-256-256-{inputs.n_classes} of paper 002, one "
            f"epoch of {inputs.name} ({n} training images), plain SGD, batch 100")  # fmt: skip
    members = first.ensemble(size)
    score = projections._Scores.score
    for scoring in (False, True) if args.pcbias_scoring else (False,):
        if not scoring:
            projections._Scores.score = lambda self, epoch: None  # training only
        try:
            alone, solo_wall, solo_cpu = timed(
                lambda: [projections._sgd_alone(m) for m in members[:solo]]
            )
            batch, wall, cpu = timed(lambda: projections._sgd_batched(members))
        finally:
            projections._Scores.score = score
        gap = max(
            float((p - r).detach().abs().max())
            for a, b in zip(alone, batch, strict=False)
            for p, r in zip(a.net.parameters(), b.net.parameters(), strict=True)
        )
        same = _same_scores(alone, batch) if scoring else None
        solo_rate, rate = solo * n / solo_wall, size * n / wall
        report("pcbias-mlp", {
            "scoring": scoring, "members": size, "solo_members": solo,
            "solo_s": round(solo_wall, 2), "solo_cpu_s": round(solo_cpu, 2),
            "batched_s": round(wall, 2), "batched_cpu_s": round(cpu, 2),
            "solo_samples_per_s": round(solo_rate), "batched_samples_per_s": round(rate),
            "ratio": round(rate / solo_rate, 2), "max_weight_gap": f"{gap:.1e}",
            "same_scores": same,
        })  # fmt: skip


def _same_scores(alone: list[Any], batch: list[Any]) -> bool:
    """Whether the lone members' recorded scores equal their batched twins' exactly."""
    return all(
        np.array_equal(np.asarray(a.lists[k]), np.asarray(b.lists[k]))
        for x, y in zip(alone, batch, strict=False)
        for a, b, k in ((x, y, key) for key in x.lists)
    )


def bench_pcbias_linear(args: argparse.Namespace) -> None:
    from collapselab.experiments.pcbias.training import pc_gd_step

    frame, name = _pooled_frame()
    widths = [frame.n_pcs, 256, 256, 256, 256, frame.n_outputs]
    size, steps = args.members, args.linear_steps
    solo = min(args.solo_members, size)
    section(f"pcbias-linear: {size} deep linear nets {widths}, {steps} GD steps of the "
            f"experiment's pc_gd_step ({name})")  # fmt: skip
    ws = []
    for i in range(size):
        torch.manual_seed(i)
        layers = [
            w.weight.detach().double().numpy() for w in DeepLinear(widths, init="def3").layers
        ]
        layers[0] = layers[0] @ frame.basis
        ws.append(layers)
    mu = 0.5 / (len(widths) - 1) / float(frame.eigenvalues[0])

    def run(layers: list[np.ndarray]) -> list[np.ndarray]:
        for _ in range(steps):
            layers = pc_gd_step(layers, frame, mu)
        return layers

    stacked = [np.stack([m[j] for m in ws]) for j in range(len(widths) - 1)]
    batch, wall, cpu = timed(lambda: run(stacked))
    alone, solo_wall, solo_cpu = timed(lambda: [run(m) for m in ws[:solo]])
    gap = max(float(np.abs(batch[j][e] - alone[e][j]).max())
              for e in range(solo) for j in range(len(widths) - 1))  # fmt: skip
    solo_per_member, per_member = solo_wall / solo, wall / size
    report("pcbias-linear", {
        "members": size, "solo_members": solo, "steps": steps, "solo_s": round(solo_wall, 2),
        "solo_cpu_s": round(solo_cpu, 2), "batched_s": round(wall, 2),
        "batched_cpu_s": round(cpu, 2), "ratio": round(solo_per_member / per_member, 2),
        "max_weight_gap": f"{gap:.1e}",
    })  # fmt: skip


SECTIONS = {
    "pcbias-mlp": bench_pcbias_mlp,
    "pcbias-linear": bench_pcbias_linear,
    "mlp": bench_mlp,
    "linear": bench_linear,
    "engine-linear": bench_engine_linear,
    "stvgg": bench_stvgg,
    "conv": bench_conv,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument(
        "--solo-members", type=int, default=100, help="members trained one by one (throughput)"
    )
    parser.add_argument("--linear-steps", type=int, default=500)
    parser.add_argument(
        "--pcbias-scoring", action="store_true", help="pcbias-mlp: also time it with scoring"
    )
    parser.add_argument("--engine-steps", type=int, default=100)
    parser.add_argument("--stvgg-members", type=int, default=100)
    parser.add_argument("--stvgg-width", type=float, default=1.0)
    parser.add_argument("--stvgg-steps", type=int, default=4)
    parser.add_argument("--conv-members", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    info = machine()
    print("machine:", json.dumps(info), "\nstart:", uptime(), flush=True)
    RESULTS["machine"] = info
    RESULTS["start"] = uptime()
    for name in args.sections.split(","):
        SECTIONS[name](args)
    RESULTS["end"] = uptime()
    print("\nend:", RESULTS["end"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(RESULTS, f, indent=1)


if __name__ == "__main__":
    main()
