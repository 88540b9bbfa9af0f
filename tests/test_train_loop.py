"""Tests of collapselab.train.train: determinism, schedule, full-batch GD, NaN handling, hooks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from collapselab.data.dataset import DataSplits, LabeledData
from collapselab.store import Run
from collapselab.train import NON_FINITE_LOSS, Callback, LambdaCallback, TrainConfig, train


def _data(n: int = 60, d: int = 5, c: int = 3, seed: int = 0, spread: float = 1.0) -> DataSplits:
    g = torch.Generator().manual_seed(seed)
    centers = spread * torch.randn(c, d, generator=g)
    y = torch.arange(n) % c
    x = centers[y] + torch.randn(n, d, generator=g)
    test_y = torch.arange(15) % c
    test_x = centers[test_y] + torch.randn(15, d, generator=g)
    return DataSplits(LabeledData(x, y, c, "toy"), LabeledData(test_x, test_y, c, "toy-test"))


def _mlp(seed: int, d: int = 5, c: int = 3, dropout: float = 0.2) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, c))


def _weights(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


# ----------------------------------------------------------------------- determinism
def test_seeded_training_is_bit_for_bit_repeatable() -> None:
    data = _data()
    cfg = TrainConfig(epochs=3, lr=0.1, batch_size=16, momentum=0.9, weight_decay=1e-3, seed=5)
    a = train(_mlp(0), data, cfg)
    b = train(_mlp(0), data, cfg)
    assert all(torch.equal(p, q) for p, q in zip(_weights(a.model), _weights(b.model), strict=True))
    assert a.history == b.history and a.iterations == 3 * 4 and a.epochs_completed == 3
    other = train(_mlp(0), data, TrainConfig(**{**cfg.to_dict(), "seed": 6}))
    assert not torch.equal(_weights(other.model)[0], _weights(a.model)[0])  # the seed matters


def test_metric_rows_manifest_and_status(tmp_path: Path) -> None:
    data = _data()
    run = Run.create(tmp_path, "toy", config={"k": 1})
    cfg = TrainConfig(epochs=2, lr=0.1, batch_size=16, log_batch_loss_every=3)
    res = train(_mlp(0), data, cfg, run=run)
    rows = Run.open(run.path).metrics()
    epoch_rows = rows[rows.metric != "batch_loss"]
    # initial model: lr + train/test loss/accuracy; then per epoch also running_*
    assert len(epoch_rows) == 5 + 2 * 7
    assert rows[rows.metric == "batch_loss"]["step"].tolist() == [3, 6]
    last = rows[(rows.epoch == 2) & (rows.split == "test") & (rows.metric == "accuracy")]
    assert last["step"].tolist() == [8] and last["value"].item() == res.final["test_accuracy"]
    manifest = Run.open(run.path).manifest
    assert manifest["status"] == "completed" and manifest["epochs_completed"] == 2
    assert manifest["train_config"]["lr"] == 0.1 and manifest["iterations"] == 8
    assert manifest["durations"]["train_seconds"] > 0


# -------------------------------------------------------------------------- schedule
def test_step_schedule_matches_multisteplr() -> None:
    cfg = TrainConfig(epochs=350, lr=0.0184, schedule="step")
    assert cfg.step_milestones() == (116, 233)
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0184)
    sched = torch.optim.lr_scheduler.MultiStepLR(
        opt, milestones=[350 // 3, 2 * 350 // 3], gamma=0.1
    )
    for epoch in range(1, 351):
        assert cfg.lr_at_epoch(epoch) == opt.param_groups[0]["lr"], epoch
        opt.step()
        sched.step()
    assert cfg.lr_at_epoch(116) == 0.0184 and cfg.lr_at_epoch(117) == pytest.approx(0.00184)
    assert cfg.lr_at_epoch(233) == pytest.approx(0.00184)
    assert cfg.lr_at_epoch(234) == pytest.approx(0.000184)
    assert TrainConfig(epochs=10, lr=0.5).lr_at_epoch(10) == 0.5  # constant


def test_step_schedule_is_the_rate_the_optimizer_uses(tmp_path: Path) -> None:
    used: dict[int, float] = {}
    hook = LambdaCallback(on_iteration_end=lambda s: used.setdefault(s.epoch, s.lr))
    cfg = TrainConfig(epochs=9, lr=0.3, schedule="step", full_batch=True)
    run = Run.create(tmp_path, "sched")
    train(_mlp(0), _data(), cfg, [hook], run=run)
    rows = run.metrics()
    logged = rows[(rows.metric == "lr") & (rows.epoch > 0)].sort_values("epoch")["value"].tolist()
    want = [0.3] * 3 + [0.3 * 0.1] * 3 + [0.3 * 0.1 * 0.1] * 3
    assert logged == want and [used[e] for e in range(1, 10)] == want


# ------------------------------------------------------------------------ full batch
def _manual_gd(x, y, w, b, cfg: TrainConfig, c: int):
    """Heavy-ball GD with PyTorch's momentum convention and explicit gradient formulas."""
    n = x.shape[0]
    onehot = np.eye(c)[y]
    vw = vb = None
    for _ in range(cfg.epochs):
        z = x @ w.T + b
        if cfg.loss == "mse":
            r = 2.0 * (z - onehot) / (n * c)  # d/dz of (1/(nC)) sum (z - y)^2
        else:
            p = np.exp(z - z.max(1, keepdims=True))
            r = (p / p.sum(1, keepdims=True) - onehot) / n
        gw = r.T @ x + cfg.weight_decay * w
        gb = r.sum(0) + cfg.weight_decay * b
        vw = gw if vw is None else cfg.momentum * vw + gw
        vb = gb if vb is None else cfg.momentum * vb + gb
        w, b = w - cfg.lr * vw, b - cfg.lr * vb
    return w, b


@pytest.mark.parametrize("loss", ["mse", "ce"])
@pytest.mark.parametrize("chunk", [None, 7])
def test_full_batch_is_gradient_descent_by_hand(loss: str, chunk: int | None) -> None:
    data = _data(n=30)
    torch.manual_seed(0)
    model = nn.Linear(5, 3).double()
    w0, b0 = model.weight.detach().numpy().copy(), model.bias.detach().numpy().copy()
    cfg = TrainConfig(
        epochs=3, lr=0.2, momentum=0.9, weight_decay=0.01, loss=loss,
        full_batch=True, full_batch_chunk=chunk,
    )  # fmt: skip
    res = train(model, data, cfg)
    x = data.train.x.double().numpy()
    w, b = _manual_gd(x, data.train.y.numpy(), w0, b0, cfg, 3)
    assert res.iterations == 3
    np.testing.assert_allclose(model.weight.detach().numpy(), w, rtol=0, atol=1e-13)
    np.testing.assert_allclose(model.bias.detach().numpy(), b, rtol=0, atol=1e-13)


def test_drop_last_and_iteration_counts() -> None:
    data = _data(n=60)
    res = train(_mlp(0), data, TrainConfig(epochs=2, lr=0.1, batch_size=16, drop_last=True))
    assert res.iterations == 2 * 3
    res = train(_mlp(0), data, TrainConfig(epochs=2, lr=0.1, batch_size=16))
    assert res.iterations == 2 * 4
    with pytest.raises(ValueError, match="drop_last"):
        train(_mlp(0), data, TrainConfig(epochs=1, lr=0.1, batch_size=100, drop_last=True))


# ------------------------------------------------------------------------- NaN / Inf
class _NaNAfter(nn.Module):
    """Identity, except that its ``k``-th forward call in training mode returns NaN."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k, self.calls = k, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.calls += 1
            if self.calls == self.k:
                return x * float("nan")
        return x


def test_nan_loss_stops_cleanly_and_keeps_earlier_rows(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 3), _NaNAfter(7))
    ended: list[str | None] = []
    run = Run.create(tmp_path, "nan")
    cfg = TrainConfig(epochs=4, lr=0.1, batch_size=16, log_batch_loss_every=1)
    res = train(
        model,
        _data(),
        cfg,
        [LambdaCallback(on_train_end=lambda s: ended.append(s.stop_reason))],
        run,
    )
    assert res.stopped_reason == NON_FINITE_LOSS and res.failed and ended == [NON_FINITE_LOSS]
    assert res.error == "non-finite training loss nan at step 7 (epoch 2, batch 3 of 4)"
    assert res.iterations == 6 and res.epochs_completed == 1
    assert all(torch.isfinite(p).all() for p in model.parameters())  # the NaN step was not applied
    reopened = Run.open(run.path)
    assert reopened.status == "failed" and "step 7" in reopened.manifest["error"]
    rows = reopened.metrics()
    assert rows["step"].max() == 6
    assert sorted(rows[rows.metric == "loss"]["epoch"].unique()) == [0, 1]
    assert rows[rows.metric == "batch_loss"]["step"].tolist() == [1, 2, 3, 4, 5, 6]


class _NaNInEval(nn.Module):
    """Identity in training mode; NaN in evaluation mode once ``broken`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * float("nan") if self.broken and not self.training else x


def test_nan_in_an_epochs_evaluation_stops_before_the_epoch_callbacks(tmp_path: Path) -> None:
    """Every batch loss finite, but the network is non-finite after an epoch's last update
    (here: from step 6 on, in evaluation mode): the run stops cleanly on the evaluated loss,
    keeps its rows (the NaN ones too), and no epoch-end callback (a Monitor measuring the
    features) sees the non-finite network."""
    torch.manual_seed(0)
    nan = _NaNInEval()
    model = nn.Sequential(nn.Linear(5, 3), nan)

    def break_at_step_6(state) -> None:
        nan.broken = nan.broken or state.iteration == 6

    epochs: list[int] = []
    run = Run.create(tmp_path, "nan-eval")
    hooks = LambdaCallback(on_iteration_end=break_at_step_6,
                           on_epoch_end=lambda s: epochs.append(s.epoch))  # fmt: skip
    res = train(model, _data(), TrainConfig(epochs=4, lr=0.1, batch_size=16), [hooks], run)
    assert res.stopped_reason == NON_FINITE_LOSS and res.failed and epochs == [1]
    assert res.error == (
        "non-finite training loss nan in the evaluation after epoch 2 (step 8): the last "
        "update left the outputs non-finite"
    )
    assert res.iterations == 8 and res.epochs_completed == 2
    reopened = Run.open(run.path)
    assert reopened.status == "failed" and "after epoch 2" in reopened.manifest["error"]
    loss = reopened.metrics().query("metric == 'loss' and split == 'train'")
    assert loss["epoch"].tolist() == [0, 1, 2] and math.isnan(loss["value"].iloc[-1])


def test_divergence_with_huge_lr_fails_the_run(tmp_path: Path) -> None:
    run = Run.create(tmp_path, "diverge")
    cfg = TrainConfig(epochs=50, lr=1e6, loss="mse", batch_size=16)
    res = train(_mlp(0, dropout=0.0), _data(), cfg, run=run)
    assert res.failed and res.error is not None and res.error.startswith("non-finite training loss")
    assert Run.open(run.path).status == "failed" and res.epochs_completed < 50


# ------------------------------------------------------------------ hooks and results
def test_callback_order_state_and_stop_request(tmp_path: Path) -> None:
    events: list[tuple[str, int, int]] = []

    class Recorder(Callback):
        def on_train_start(self, state):
            assert "train_loss" in state.last_eval and not state.resumed
            events.append(("start", state.epoch, state.iteration))

        def on_iteration_end(self, state):
            assert state.loss is not None and state.iterations_per_epoch == 4
            events.append(("iter", state.epoch, state.iteration))

        def on_epoch_end(self, state):
            state.run.log(state.iteration, "custom", 1.0, epoch=state.epoch)
            events.append(("epoch", state.epoch, state.iteration))
            if state.epoch == 2:
                state.request_stop("enough")

        def on_train_end(self, state):
            events.append(("end", state.epoch, state.iteration))

    run = Run.create(tmp_path, "hooks")
    res = train(_mlp(0), _data(), TrainConfig(epochs=5, lr=0.1, batch_size=16), [Recorder()], run)
    want = [("start", 0, 0)]
    for e in (1, 2):
        want += [("iter", e, i) for i in range(4 * e - 3, 4 * e + 1)] + [("epoch", e, 4 * e)]
    assert events == [*want, ("end", 2, 8)]
    assert res.stopped_reason == "stop_requested: enough" and res.epochs_completed == 2
    assert Run.open(run.path).status == "completed"
    assert run.latest_checkpoint().step == 8
    assert run.metrics().query("metric == 'custom'")["step"].tolist() == [4, 8]


def test_zero_error_epoch_is_recorded(tmp_path: Path) -> None:
    data = _data(spread=6.0)
    run = Run.create(tmp_path, "zero")
    res = train(_mlp(1, dropout=0.0), data, TrainConfig(epochs=8, lr=0.2, batch_size=10), run=run)
    perfect = [h["epoch"] for h in res.history if h["train_accuracy"] == 1.0]
    assert perfect and res.zero_error_epoch == perfect[0] > 0
    assert Run.open(run.path).manifest["zero_error_epoch"] == res.zero_error_epoch


def test_eval_every_and_no_initial_eval() -> None:
    cfg = TrainConfig(epochs=5, lr=0.1, batch_size=16, eval_every=2, log_initial=False)
    res = train(_mlp(0), _data(), cfg)
    assert [h["epoch"] for h in res.history] == [1, 2, 3, 4, 5]
    assert [h["epoch"] for h in res.history if "train_loss" in h] == [2, 4, 5]


def test_exception_in_callback_fails_run_and_propagates(tmp_path: Path) -> None:
    def boom(state):
        if state.iteration == 5:
            raise RuntimeError("probe exploded")

    run = Run.create(tmp_path, "boom")
    with pytest.raises(RuntimeError, match="probe exploded"):
        train(
            _mlp(0),
            _data(),
            TrainConfig(epochs=3, lr=0.1, batch_size=16),
            [LambdaCallback(on_iteration_end=boom)],
            run,
        )
    reopened = Run.open(run.path)
    assert reopened.status == "failed" and "probe exploded" in reopened.manifest["error"]
    assert reopened.metrics()["step"].max() == 4  # epoch-1 rows were flushed


# ------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"epochs": -1}, ValueError, "epochs"),
        ({"lr": 0.0}, ValueError, "lr"),
        ({"lr": float("nan")}, ValueError, "lr"),
        ({"batch_size": 2.0}, TypeError, "batch_size"),
        ({"loss": "hinge"}, ValueError, "loss"),
        ({"mse_reduction": "sum"}, ValueError, "mse_reduction"),
        ({"label_scale": 2.0}, ValueError, "label_scale"),
        ({"nesterov": True}, ValueError, "nesterov"),
        ({"schedule": "cosine"}, ValueError, "schedule"),
        ({"milestones": (5, 2)}, ValueError, "milestones"),
        ({"checkpoint_every": -1}, ValueError, "checkpoint_every"),
    ],
)
def test_config_validation(fields: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        TrainConfig(**{"epochs": 1, "lr": 0.1, **fields})


def test_train_rejects_bad_arguments() -> None:
    data, cfg = _data(), TrainConfig(epochs=1, lr=0.1)
    with pytest.raises(TypeError, match=r"nn\.Module"):
        train(lambda x: x, data, cfg)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="DataSplits"):
        train(_mlp(0), data.train, cfg)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequence of callbacks"):
        train(_mlp(0), data, cfg, Callback())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"expected \(batch, 3\)"):
        train(nn.Linear(5, 4), data, cfg)
    with pytest.raises(ValueError, match="device"):
        train(_mlp(0), data, TrainConfig(epochs=1, lr=0.1, device="tpu-ish"))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            train(_mlp(0), data, TrainConfig(epochs=1, lr=0.1, device="cuda"))
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown TrainConfig fields"):
        TrainConfig.from_dict({**cfg.to_dict(), "lr_decay": 1})
