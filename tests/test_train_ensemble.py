"""Batched ensembles (collapselab.train.train_ensemble) against one-by-one training.

Every member is trained twice: batched with the others, and alone by ``train`` from the same
initialisation and config. Every recorded value (history, metric rows, weights, checkpoints)
is compared: float64 to 1e-10, float32 to the accumulated rounding measured and stated in
docs/training.md; final accuracies exactly.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from collapselab.data.dataset import DataSplits, LabeledData
from collapselab.models import MLP, DeepLinear, StVGG
from collapselab.store import Run
from collapselab.theory.pcbias import gd_step
from collapselab.track import Monitor
from collapselab.train import (
    NON_FINITE_LOSS,
    ArchitectureError,
    Callback,
    TrainConfig,
    TrainResult,
    linear_gd_step,
    train,
    train_ensemble,
)
from collapselab.train.batched import BatchedModel

F64_TOL = 1e-10
F32_TOL = 2e-6
"""float32: twice the largest gap measured between batched and one-by-one training in
:func:`test_float32_members_equal_one_by_one_to_rounding` (15-20 steps; recorded values
at most 7.5e-8, weights at most 9.5e-7, the latter for Adam with batch norm, whose
normalised steps amplify rounding; SGD weights at most 6e-8); stated in docs/training.md.
In float64 the same runs agree to 4.5e-16 (recorded values) and 1.8e-15 (weights)."""


# ------------------------------------------------------------------------ fixtures
def _data(n: int = 48, d: int = 6, c: int = 3) -> DataSplits:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(n) % c
    x = 2.0 * torch.randn(c, d, generator=g)[y] + torch.randn(n, d, generator=g)
    ty = torch.arange(12) % c
    tx = 2.0 * torch.randn(c, d, generator=torch.Generator().manual_seed(0))[ty]
    return DataSplits(
        LabeledData(x, y, c), LabeledData(tx + torch.randn(12, d, generator=g), ty, c)
    )


def _images(n: int = 24) -> DataSplits:
    g = torch.Generator().manual_seed(1)
    y = torch.arange(n) % 2
    x = torch.randn(2, 1, 16, 16, generator=g)[y] + torch.randn(n, 1, 16, 16, generator=g)
    return DataSplits(LabeledData(x, y, 2), LabeledData(x[:8] + 0.1, y[:8], 2))


def _dropout_mlp(seed: int, dtype: torch.dtype = torch.float64) -> nn.Module:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
    return net.to(dtype)


def _bn_mlp(seed: int, dtype: torch.dtype = torch.float64) -> nn.Module:
    torch.manual_seed(seed)
    return MLP(6, 3, width=12, depth=3, norm="batchnorm").to(dtype)


def _st_vgg(seed: int, dtype: torch.dtype = torch.float64) -> nn.Module:
    torch.manual_seed(seed)
    return StVGG(2, 1, input_size=16, width_multiplier=0.125).to(dtype)


def _bn_convnet(seed: int, dtype: torch.dtype = torch.float64) -> nn.Module:
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3, stride=2, groups=2),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(6 * 3 * 3, 2),
    )
    return net.to(dtype)


def _sgd_configs(epochs: int = 3, **shared) -> list[TrainConfig]:
    """Three members differing in seed, lr, momentum, Nesterov, weight decay, schedule and
    clipping."""
    base = {"epochs": epochs, "batch_size": 10, "log_batch_loss_every": 1, **shared}
    return [
        TrainConfig(lr=0.05, seed=1, **base),
        TrainConfig(
            lr=0.1, momentum=0.9, weight_decay=1e-3, seed=2, schedule="step", grad_clip_norm=0.5,
            **base,
        ),
        TrainConfig(
            lr=0.02, momentum=0.5, nesterov=True, weight_decay=5e-4, seed=3, schedule="step",
            milestones=(1,), gamma=0.5, **base,
        ),
    ]  # fmt: skip


def _adam_configs(epochs: int = 3) -> list[TrainConfig]:
    base = {"epochs": epochs, "batch_size": 10, "optimizer": "adam"}
    return [
        TrainConfig(lr=1e-3, seed=1, **base),
        TrainConfig(lr=3e-3, betas=(0.8, 0.99), weight_decay=1e-3, seed=2, **base),
        TrainConfig(lr=2e-3, eps=1e-6, seed=3, schedule="step", grad_clip_norm=0.3, **base),
    ]


def _pair(
    build: Callable[[int], nn.Module],
    data: DataSplits,
    configs: list[TrainConfig],
    root: Path | None = None,
) -> tuple[list[TrainResult], list[TrainResult]]:
    """Train each member alone and the members batched, from the same initialisations."""
    runs: list[Run | None] = [None] * len(configs)
    solo_runs = list(runs)
    if root is not None:
        runs = [Run.create(root, "ens", run_id=f"member-{i}") for i in range(len(configs))]
        solo_runs = [Run.create(root, "one", run_id=f"alone-{i}") for i in range(len(configs))]
    alone = [train(build(10 + i), data, cfg, run=solo_runs[i]) for i, cfg in enumerate(configs)]
    members = [build(10 + i) for i in range(len(configs))]
    batched = train_ensemble(members, data, configs, runs=None if root is None else runs)
    return alone, batched


def _history_gap(a: TrainResult, b: TrainResult) -> float:
    """Largest gap between two histories; they must hold the same entries and accuracies."""
    assert len(a.history) == len(b.history)
    gap = 0.0
    for ha, hb in zip(a.history, b.history, strict=True):
        assert ha.keys() == hb.keys()
        for key in ha:
            if "accuracy" in key or key in ("epoch", "step"):
                assert ha[key] == hb[key], key
            else:
                gap = max(gap, abs(ha[key] - hb[key]))
    return gap


def _weight_gap(a: nn.Module, b: nn.Module) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    return max(float((sa[k].double() - sb[k].double()).abs().max()) for k in sa)


def _rows(run: Run) -> pd.DataFrame:
    rows = run.metrics().sort_values(["step", "split", "layer", "metric"])
    return rows.reset_index(drop=True)


def _rows_gap(a: Run, b: Run) -> float:
    ra, rb = _rows(a), _rows(b)
    keys = ["step", "epoch", "split", "layer", "metric"]
    pd.testing.assert_frame_equal(ra[keys], rb[keys])
    accuracy = ra.metric.str.contains("accuracy")
    assert (ra.value[accuracy] == rb.value[accuracy]).all()
    return float((ra.value - rb.value).abs().max())


# ------------------------------------------------------------------ equal to alone
def test_sgd_members_equal_one_by_one_in_float64(tmp_path: Path) -> None:
    alone, batched = _pair(_dropout_mlp, _data(), _sgd_configs(), tmp_path)
    for a, b in zip(alone, batched, strict=True):
        assert b.iterations == a.iterations == 15 and b.epochs_completed == 3
        assert _history_gap(a, b) <= F64_TOL
        assert _weight_gap(a.model, b.model) <= F64_TOL
        assert _rows_gap(a.run, b.run) <= F64_TOL
        assert b.final["train_accuracy"] == a.final["train_accuracy"]
        assert b.run.status == "completed"
        assert b.run.manifest["batched_ensemble"]["size"] == 3
    # the members really differ: other seeds, rates and decays give other trajectories
    assert batched[0].final["train_loss"] != batched[1].final["train_loss"]


def test_adam_members_equal_one_by_one_in_float64() -> None:
    alone, batched = _pair(_bn_mlp, _data(), _adam_configs())
    for a, b in zip(alone, batched, strict=True):
        assert _history_gap(a, b) <= F64_TOL
        assert _weight_gap(a.model, b.model) <= F64_TOL  # running statistics included
    steps = batched[1].model.layers[0].norm.num_batches_tracked
    assert int(steps) == 15


@pytest.mark.parametrize("build", [_st_vgg, _bn_convnet], ids=["st_vgg", "bn_grouped_conv"])
def test_conv_members_equal_one_by_one_in_float64(build: Callable[[int], nn.Module]) -> None:
    configs = _sgd_configs(epochs=2, batch_size=6)
    alone, batched = _pair(build, _images(), configs)
    for a, b in zip(alone, batched, strict=True):
        assert _history_gap(a, b) <= F64_TOL
        assert _weight_gap(a.model, b.model) <= F64_TOL


def test_full_batch_deep_linear_gd_equals_one_by_one() -> None:
    def build(seed: int) -> nn.Module:
        torch.manual_seed(seed)
        return DeepLinear([6, 10, 10, 3], init="def3").double()

    base = {"epochs": 25, "full_batch": True, "loss": "mse", "mse_reduction": "sum_classes"}
    configs = [TrainConfig(lr=lr, seed=i, **base) for i, lr in enumerate([0.01, 0.02, 0.04])]
    alone, batched = _pair(build, _data(), configs)
    for a, b in zip(alone, batched, strict=True):
        assert b.iterations == 25
        assert _history_gap(a, b) <= F64_TOL
        assert _weight_gap(a.model, b.model) <= F64_TOL
    assert batched[2].final["train_loss"] < batched[0].final["train_loss"] < 1.0


@pytest.mark.parametrize(
    ("build", "data", "configs", "bound"),
    [
        (_dropout_mlp, _data(), _sgd_configs(epochs=4), F32_TOL),
        (_bn_mlp, _data(), _adam_configs(), F32_TOL),
        (_st_vgg, _images(), _sgd_configs(epochs=2, batch_size=6), F32_TOL),
        (_bn_convnet, _images(), _sgd_configs(epochs=2, batch_size=6), F32_TOL),
    ],
    ids=["mlp", "bn_mlp_adam", "st_vgg", "bn_grouped_conv"],
)
def test_float32_members_equal_one_by_one_to_rounding(build, data, configs, bound) -> None:
    alone, batched = _pair(lambda s: build(s, torch.float32), data, configs)
    for a, b in zip(alone, batched, strict=True):
        assert _history_gap(a, b) <= bound
        assert _weight_gap(a.model, b.model) <= bound
        assert b.final["train_accuracy"] == a.final["train_accuracy"]


class _TwoBranch(nn.Module):
    """Uses its input twice: the shared-input shortcut cannot apply (checked, then off)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(6, 3), nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x) + torch.tanh(self.b(x))


def test_shared_inputs_are_taken_once_where_the_architecture_allows() -> None:
    members = [_dropout_mlp(i) for i in range(3)]
    batched = BatchedModel(members, [torch.Generator() for _ in members])
    x = _data().train.x.double()
    batched.check_equivalent(x[:2])
    assert batched.shares_inputs
    batched.module.eval()  # no dropout
    with torch.no_grad():
        shared = batched.forward_shared(x).reshape(len(x), 3, -1)
        for i, member in enumerate(members):
            member.eval()
            assert float((shared[:, i] - member(x)).abs().max()) <= 1e-14
    torch.manual_seed(0)
    two = [_TwoBranch().double() for _ in range(2)]
    batched = BatchedModel(two, [torch.Generator() for _ in two])
    batched.check_equivalent(x[:2])
    assert not batched.shares_inputs
    configs = [TrainConfig(epochs=2, lr=0.1, batch_size=10, seed=i) for i in range(2)]
    alone = [train(copy.deepcopy(m), _data(), c) for m, c in zip(two, configs, strict=True)]
    for a, b in zip(alone, train_ensemble(two, _data(), configs), strict=True):
        assert _history_gap(a, b) <= F64_TOL


# --------------------------------------------------------- checkpoints and resume
def _checkpoint_gap(a: dict, b: dict) -> float:
    """Compare two checkpoints: everything equal, tensors to rounding; the largest gap."""
    assert a.keys() == b.keys() and a["format"] == b["format"] == 1
    assert (a["epoch"], a["iteration"], a["config"]) == (b["epoch"], b["iteration"], b["config"])
    assert a["rng"]["python"] == b["rng"]["python"]
    assert torch.equal(a["rng"]["torch"], b["rng"]["torch"])
    assert torch.equal(a["rng"]["numpy"]["key"], b["rng"]["numpy"]["key"])
    assert a["optimizer"]["param_groups"] == b["optimizer"]["param_groups"]
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    gaps = [float((sa[j][k] - sb[j][k]).abs().max()) for j in sa for k in sa[j]]
    gaps += [float((a["model"][k] - b["model"][k]).abs().max()) for k in a["model"]]
    for ha, hb in zip(a["history"], b["history"], strict=True):
        gaps += [abs(ha[k] - hb[k]) for k in ha]
    assert a["model"].keys() == b["model"].keys()
    return max(gaps)


@pytest.mark.parametrize("adam", [False, True], ids=["sgd", "adam"])
def test_member_checkpoints_are_single_run_checkpoints(tmp_path: Path, adam: bool) -> None:
    configs = _adam_configs() if adam else _sgd_configs()
    alone, batched = _pair(_dropout_mlp, _data(), configs, tmp_path)
    for a, b in zip(alone, batched, strict=True):
        steps = [c.step for c in b.run.checkpoints()]
        assert steps == [c.step for c in a.run.checkpoints()] == [10, 15]  # keep 2
        for ca, cb in zip(a.run.checkpoints(), b.run.checkpoints(), strict=True):
            assert _checkpoint_gap(ca.load(), cb.load()) <= F64_TOL


class _Interrupt(Callback):
    """Interrupts the process (as Ctrl-C would) after step ``at``."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_iteration_end(self, state) -> None:
        if state.iteration == self.at:
            raise KeyboardInterrupt


def test_batched_resume_equals_uninterrupted(tmp_path: Path) -> None:
    data = _data()
    configs = _sgd_configs(epochs=4, checkpoint_every=1)
    reference = train_ensemble([_dropout_mlp(10 + i) for i in range(3)], data, configs)
    runs = [Run.create(tmp_path, "ens", run_id=f"m{i}") for i in range(3)]
    with pytest.raises(KeyboardInterrupt):  # mid-epoch 3: resumes from the step-10 checkpoint
        train_ensemble(
            [_dropout_mlp(10 + i) for i in range(3)], data, configs, [[], [_Interrupt(13)], []],
            [Run.open(r.path) for r in runs],
        )  # fmt: skip
    assert [Run.open(r.path).status for r in runs] == ["interrupted"] * 3
    # fresh (untrained) modules: the weights come from the checkpoints
    resumed = train_ensemble(
        [_dropout_mlp(99) for _ in range(3)], data, configs, runs=[Run.open(r.path) for r in runs]
    )
    for ref, res, run in zip(reference, resumed, runs, strict=True):
        assert res.resumed_from_step == 10 and res.iterations == 20
        assert res.history == ref.history  # bit for bit
        assert _weight_gap(ref.model, res.model) == 0.0
        rows = _rows(Run.open(run.path))
        assert len(rows[rows.metric == "batch_loss"]) == 20  # rows after step 10 redone once
        assert Run.open(run.path).status == "completed"


def test_member_run_resumes_alone(tmp_path: Path) -> None:
    """A member's run continues with train() alone: its checkpoints are a single run's."""
    data = _data()
    short = [
        TrainConfig(**{**c.to_dict(), "schedule": "constant", "milestones": None})
        for c in _sgd_configs(epochs=2)
    ]
    runs = [Run.create(tmp_path, "ens", run_id=f"m{i}") for i in range(3)]
    train_ensemble([_dropout_mlp(10 + i) for i in range(3)], data, short, runs=runs)
    longer = TrainConfig(**{**short[1].to_dict(), "epochs": 4})
    continued = train(_dropout_mlp(0), data, longer, run=Run.open(runs[1].path))
    alone = train(_dropout_mlp(11), data, longer)
    assert continued.resumed_from_step == 10
    assert _history_gap(alone, continued) <= F64_TOL
    assert _weight_gap(alone.model, continued.model) <= F64_TOL


def test_a_diverging_member_stops_alone_and_stays_stopped(tmp_path: Path) -> None:
    data = _data()
    base = {"epochs": 3, "batch_size": 10, "loss": "mse"}
    configs = [TrainConfig(lr=0.05, seed=1, **base), TrainConfig(lr=1e4, seed=2, **base)]
    runs = [Run.create(tmp_path, "ens", run_id=f"m{i}") for i in range(2)]
    alone, batched = _pair(_dropout_mlp, data, configs)
    result = train_ensemble([_dropout_mlp(10 + i) for i in range(2)], data, configs, runs=runs)
    assert batched[1].failed and alone[1].failed and result[1].failed
    assert batched[1].error == alone[1].error and "non-finite training loss" in alone[1].error
    assert batched[1].iterations == alone[1].iterations
    assert _weight_gap(alone[1].model, batched[1].model) == 0.0  # the weights it stopped with
    assert _history_gap(alone[0], batched[0]) <= F64_TOL  # the other went on
    assert [Run.open(r.path).status for r in runs] == ["completed", "failed"]
    # Resume with more epochs: the failed member stays stopped, the other trains on.
    more = [TrainConfig(**{**c.to_dict(), "epochs": 5}) for c in configs]
    again = train_ensemble([_dropout_mlp(0) for _ in range(2)], data, more, runs=runs)
    assert again[0].iterations == 25 and again[0].resumed_from_step == 15
    assert again[1].stopped_reason == NON_FINITE_LOSS
    assert again[1].iterations == alone[1].iterations
    assert Run.open(runs[1].path).status == "failed"


# ------------------------------------------------------------------- refusals
class _LayerNormNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.norm = nn.LayerNorm(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.fc(x))


class _FunctionalDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(self.fc(x), 0.5, self.training)


class _MixesSamples(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x - x.mean(0))  # centres over the batch: members would mix


def test_members_that_cannot_be_batched_are_refused(tmp_path: Path) -> None:
    data, cfg = _data(), [TrainConfig(epochs=1, lr=0.1, seed=i) for i in range(2)]
    torch.manual_seed(0)
    wide, narrow = MLP(6, 3, width=8, depth=2), MLP(6, 3, width=9, depth=2)
    with pytest.raises(ArchitectureError, match=r"differ in architecture.*layers\.0\.linear"):
        train_ensemble([wide, narrow], data, cfg)
    with pytest.raises(ArchitectureError, match="MLP and a DeepLinear"):
        train_ensemble([wide, DeepLinear([6, 3])], data, cfg)
    leaky = MLP(6, 3, width=8, depth=2, activation="leaky_relu")
    with pytest.raises(ArchitectureError, match="LeakyReLU"):
        train_ensemble([wide, leaky], data, cfg)
    with pytest.raises(ArchitectureError, match=r"norm \(LayerNorm\) holds parameters"):
        train_ensemble([_LayerNormNet(), _LayerNormNet()], data, cfg)
    with pytest.raises(ArchitectureError, match="draws from the global random generator"):
        train_ensemble([_FunctionalDropout(), _FunctionalDropout()], data, cfg)
    with pytest.raises(ArchitectureError, match="differs from member 0's own forward"):
        train_ensemble([_MixesSamples(), _MixesSamples()], data, cfg)
    with pytest.raises(ArchitectureError, match="same module object"):
        train_ensemble([wide, wide], data, cfg)
    other = [cfg[0], TrainConfig(epochs=1, lr=0.1, batch_size=64)]
    with pytest.raises(ValueError, match="share 'batch_size'"):
        train_ensemble([wide, MLP(6, 3, width=8, depth=2)], data, other)
    run = Run.create(tmp_path, "x")
    with pytest.raises(ValueError, match="two members share a run"):
        train_ensemble([wide, MLP(6, 3, width=8, depth=2)], data, cfg, runs=[run, run])
    # refused before anything changed: the member keeps its own tensors and the run is new
    assert wide.classifier.weight.data_ptr() != narrow.classifier.weight.data_ptr()
    assert run.status == "created" and not run.checkpoints()


# ------------------------------------------------------------ families per member
def test_nc_of_each_member_equals_nc_of_the_member_trained_alone(tmp_path: Path) -> None:
    """A Monitor built on a member module measures that member live during batched training."""
    data = _data()
    configs = _sgd_configs(epochs=3)

    def build(seed: int) -> MLP:
        torch.manual_seed(seed)
        return MLP(6, 3, width=8, depth=3, bias=True).double()

    def monitor(model: MLP) -> Monitor:
        return Monitor(model, data.train, data.test, families=["nc"], schedule="all",
                       batch_size=16)  # fmt: skip

    alone_runs, member_runs, callbacks, members = [], [], [], []
    for i, cfg in enumerate(configs):
        model = build(10 + i)
        alone_runs.append(Run.create(tmp_path, "one", run_id=f"alone-{i}"))
        train(model, data, cfg, [monitor(model).callback()], alone_runs[-1])
        members.append(build(10 + i))
        member_runs.append(Run.create(tmp_path, "ens", run_id=f"member-{i}"))
        callbacks.append([monitor(members[-1]).callback()])
    train_ensemble(members, data, configs, callbacks, member_runs)
    for a, b in zip(alone_runs, member_runs, strict=True):
        ra = _rows(a)
        nc = ra[ra.metric == "nc1"]
        assert len(nc) == 2 * 2 * 4  # 2 layers, 2 splits, epochs 0..3
        assert np.isfinite(nc.value).all() and (nc.value > 0).all()
        assert _rows_gap(a, b) <= 1e-8  # nc1 needs a pseudo-inverse: rounding grows


# ------------------------------------------------------------ deep linear GD
def test_linear_gd_step_matches_the_single_network_step() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((30, 5)), np.eye(3)[rng.integers(0, 3, 30)]
    members = [[rng.standard_normal((4, 5)), rng.standard_normal((4, 4)),
                rng.standard_normal((3, 4))] for _ in range(3)]  # fmt: skip
    mus = [1e-3, 2e-3, 5e-4]
    stacked = [torch.from_numpy(np.stack(layer)) for layer in zip(*members, strict=True)]
    sxx, syx = torch.from_numpy(x.T @ x), torch.from_numpy(y.T @ x)
    stepped = linear_gd_step(stacked, sxx, syx, mus)
    for e, (ws, mu) in enumerate(zip(members, mus, strict=True)):
        expected = gd_step(ws, x, y, mu)
        for got, want in zip(stepped, expected, strict=True):
            np.testing.assert_allclose(got[e].numpy(), want, rtol=0, atol=1e-12)
    # the principal frame: Σ_XX diagonal, the first layer rotated, the same compact steps
    eigenvalues, basis = np.linalg.eigh(x.T @ x)
    rotated = [torch.from_numpy(np.stack([ws[0] @ basis for ws in members])), *stacked[1:]]
    pc = linear_gd_step(rotated, torch.from_numpy(eigenvalues), syx @ torch.from_numpy(basis), 1e-3)
    full = linear_gd_step(stacked, sxx, syx, 1e-3)
    np.testing.assert_allclose(pc[0].numpy(), full[0].numpy() @ basis, atol=1e-12)
    np.testing.assert_allclose(pc[2].numpy(), full[2].numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="one step size per member"):
        linear_gd_step(stacked, sxx, syx, [1e-3, 1e-3])
    assert math.isfinite(float(pc[1].sum()))
