"""CollapseCallback: the Monitor driven by a Lightning Trainer (optional dependency)."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch
import torch.nn.functional as F

from collapselab.data.dataset import LabeledData
from collapselab.models import MLP
from collapselab.store import Run
from collapselab.track import Monitor

HAS_LIGHTNING = importlib.util.find_spec("lightning") is not None


def test_missing_lightning_gives_a_clear_import_error(monkeypatch):
    """Lightning hidden (importing it fails), whether or not it is installed."""
    import sys

    import collapselab.track as track
    import collapselab.track.lightning as lightning_module

    for name in ("lightning", "lightning.pytorch", "lightning.pytorch.callbacks"):
        monkeypatch.setitem(sys.modules, name, None)
    for name in ("pytorch_lightning", "pytorch_lightning.callbacks"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(lightning_module, "_CLASS", None)
    with pytest.raises(ImportError, match=r"pip install 'collapselab\[lightning\]'"):
        track.CollapseCallback  # noqa: B018
    with pytest.raises(AttributeError):
        track.NoSuchThing  # noqa: B018


def _data() -> LabeledData:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(48) % 3
    x = 2.0 * torch.randn(3, 5, generator=g)[y] + torch.randn(48, 5, generator=g)
    return LabeledData(x, y, 3)


def _fit(net, loader, callback, epochs):
    """Lightning fits ``net`` (as the module's ``net``) with SGD at lr 0.1, cross-entropy."""
    import lightning.pytorch as pl

    class Wrapper(pl.LightningModule):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer = pl.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback],
    )
    trainer.fit(Wrapper(net), train_dataloaders=loader)


def test_collapse_callback_records_the_monitor_rows(tmp_path):
    pytest.importorskip("lightning.pytorch")
    from collapselab.track.lightning import CollapseCallback

    data = _data()
    train_loader = data.loader(batch_size=16, shuffle=True, seed=1)
    measure_loader = data.loader(batch_size=20)
    torch.manual_seed(0)
    net = MLP(5, 3, width=8, depth=3, bias=True)
    run = Run.create(tmp_path, "lightning")
    callback = CollapseCallback(
        measure_loader, model_attr="net", schedule="all", run=run, families=["nc", "pfc"]
    )
    _fit(net, train_loader, callback, epochs=3)
    run.flush()
    rows = run.metrics()
    nc1 = rows[(rows.metric == "nc1") & (rows.layer == net.penultimate)]
    # Epoch 0 before training, then epochs 1-3 at their global steps (3 batches each).
    assert list(nc1.epoch) == [0, 1, 2, 3]
    assert list(nc1.step) == [0, 3, 6, 9]
    # The last rows equal a plain Monitor on the trained network.
    final = Monitor(net, measure_loader, families=["nc", "pfc"], schedule=None).measure_now()
    last = rows[rows.epoch == 3]
    for layer, values in final["train"].items():
        for key, value in values.items():
            got = last[(last.layer == layer) & (last.metric == key)].value.item()
            assert math.isclose(got, value, rel_tol=1e-10, abs_tol=1e-12) or (
                math.isnan(got) and math.isnan(value)
            )
    assert callback.state_dict()["zero_error_epoch"] == (
        -1 if callback.monitor.zero_error_epoch is None else callback.monitor.zero_error_epoch
    )


@pytest.mark.skipif(not HAS_LIGHTNING, reason="lightning is not installed (.ci/run installs it)")
def test_lightning_fit_equals_the_plain_training_loop(tmp_path):
    """Same network, same batches, same SGD: every Monitor row of a Lightning fit equals the
    row the plain loop's Monitor records (3 epochs of 3 steps, measured at every epoch)."""
    import copy

    from torch.utils.data import DataLoader, TensorDataset

    from collapselab.data.dataset import DataSplits
    from collapselab.track.lightning import CollapseCallback
    from collapselab.train import TrainConfig, train
    from collapselab.train._rng import epoch_permutation

    data = _data()
    measure_loader = data.loader(batch_size=20)
    torch.manual_seed(0)
    net_plain = MLP(5, 3, width=8, depth=3, bias=True)
    net_lightning = copy.deepcopy(net_plain)
    epochs, batch, seed = 3, 16, 7

    plain_run = Run.create(tmp_path, "plain")
    monitor = Monitor(net_plain, measure_loader, families=["nc", "pfc"], schedule="all")
    config = TrainConfig(epochs=epochs, lr=0.1, batch_size=batch, seed=seed)
    train(net_plain, DataSplits(data), config, [monitor.callback()], run=plain_run)

    class SameBatches:
        """The plain loop's batches: epoch e visits epoch_permutation(n, seed, e)."""

        def __init__(self):
            self.epoch = 0

        def __iter__(self):
            self.epoch += 1
            order = epoch_permutation(len(data), seed, self.epoch)
            return iter([order[i : i + batch].tolist() for i in range(0, len(data), batch)])

        def __len__(self):
            return -(-len(data) // batch)

    loader = DataLoader(TensorDataset(data.x, data.y), batch_sampler=SameBatches())
    lightning_run = Run.create(tmp_path, "lightning")
    callback = CollapseCallback(
        measure_loader, model_attr="net", schedule="all", run=lightning_run, families=["nc", "pfc"]
    )
    _fit(net_lightning, loader, callback, epochs)
    lightning_run.flush()

    def monitor_rows(run):
        rows = run.metrics()
        rows = rows[rows.layer != ""]
        return rows.set_index(["step", "epoch", "split", "layer", "metric"])["value"].sort_index()

    plain, fitted = monitor_rows(plain_run), monitor_rows(lightning_run)
    assert len(plain) > 100 and list(plain.index) == list(fitted.index)
    assert sorted(set(plain.index.get_level_values("epoch"))) == [0, 1, 2, 3]
    for a, b in zip(plain.to_numpy(), fitted.to_numpy(), strict=True):
        assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    for p, q in zip(net_plain.parameters(), net_lightning.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


class _StubTrainer:
    """The attributes of ``lightning.pytorch.Trainer`` that the callback reads."""

    def __init__(self, max_epochs):
        self.max_epochs = max_epochs
        self.global_step = 0
        self.current_epoch = 0
        self.is_global_zero = True
        self.train_dataloader = None
        self.logged = []
        self.logger = self

    def log_metrics(self, metrics, step):
        self.logged.append((step, metrics))


def test_hook_logic_against_a_stub_of_the_lightning_api(tmp_path, monkeypatch):
    """Runs without lightning: a stub ``Callback`` base and trainer with Lightning 2.x's
    names, driving the hooks in the order ``Trainer.fit`` calls them (0-based
    ``current_epoch`` during ``on_train_epoch_end``, two batches per optimiser step)."""
    import sys
    import types

    import collapselab.track.lightning as lightning_module

    stub = types.ModuleType("lightning.pytorch.callbacks")
    stub.Callback = type("Callback", (), {})
    monkeypatch.setitem(sys.modules, "lightning", types.ModuleType("lightning"))
    monkeypatch.setitem(sys.modules, "lightning.pytorch", types.ModuleType("lightning.pytorch"))
    monkeypatch.setitem(sys.modules, "lightning.pytorch.callbacks", stub)
    monkeypatch.setattr(lightning_module, "_CLASS", None)
    callback_cls = lightning_module.CollapseCallback
    assert issubclass(callback_cls, stub.Callback)

    data = _data()
    torch.manual_seed(0)
    net = MLP(5, 3, width=8, depth=3, bias=True)
    run = Run.create(tmp_path, "stub")
    cb = callback_cls(
        every_iterations=2, run=run, families=["nc"], log_to_logger=True, batch_size=24
    )  # schedule "log", budget from max_epochs; trainer's loader
    trainer = _StubTrainer(max_epochs=4)
    trainer.train_dataloader = data.loader(batch_size=24)
    cb.on_train_start(trainer, net)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for epoch in range(4):
        trainer.current_epoch = epoch
        for i, (x, y) in enumerate(data.loader(batch_size=12)):
            F.cross_entropy(net(x), y).backward()
            if i % 2 == 1:  # gradient accumulation over two batches
                opt.step()
                opt.zero_grad()
                trainer.global_step += 1
            cb.on_train_batch_end(trainer, net, None, (x, y), i)
        cb.on_train_epoch_end(trainer, net)
    run.flush()
    rows = run.metrics()
    nc1 = rows[(rows.metric == "nc1") & (rows.layer == net.penultimate)]
    # log_spaced_epochs(4) = 1..4 at steps 2, 4, 6, 8; iteration rows every 2 steps, once
    # per step although two batches share it; epoch 0 at step 0.
    assert list(zip(nc1.step, nc1.epoch, strict=True)) == [
        (0, 0), (2, 1), (2, 1), (4, 2), (4, 2), (6, 3), (6, 3), (8, 4), (8, 4),
    ]  # fmt: skip
    assert [s for s, _ in trainer.logged] == [0, 2, 2, 4, 4, 6, 6, 8, 8]
    key = f"collapse/train/{net.penultimate}/nc1"
    assert trainer.logged[-1][1][key] == nc1.value.iloc[-1]
    assert cb.monitor.schedule.at_epoch(4) and not cb.monitor.schedule.at_epoch(5)
    saved = cb.state_dict()
    fresh = callback_cls(run=run, families=["nc"])
    fresh.load_state_dict(saved)
    assert fresh.state_dict() == saved
