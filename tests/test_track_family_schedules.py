"""Each family on its own schedule: the Monitor measures at an event exactly the families
due then, in one pass that collects only what they need (Cockpit-style)."""

from __future__ import annotations

import pytest
import torch

from collapselab.data.dataset import LabeledData
from collapselab.families import NC, PFC, Curvature, Diversity
from collapselab.models import MLP
from collapselab.store import Run
from collapselab.track import Monitor, Schedule, dense_window


def _setup():
    g = torch.Generator().manual_seed(3)
    y = torch.arange(3).repeat_interleave(8)
    x = 2.0 * torch.randn(3, 5, generator=g, dtype=torch.float64)[y]
    x = x + torch.randn(len(y), 5, generator=g, dtype=torch.float64)
    torch.manual_seed(0)
    return MLP(5, 3, width=6, depth=3, bias=True).double(), LabeledData(x, y, 3)


def _families():
    return [
        NC(["nc1"]),  # the Monitor's schedule
        Diversity(["feature_cosine_all"], schedule=Schedule.build([3], initial=False)),
        Curvature(["weight_top_eigenvalue"], schedule=Schedule.build(None, iterations=[7])),
    ]


def test_each_family_is_measured_on_its_own_schedule(tmp_path):
    model, data = _setup()
    run = Run.create(tmp_path, "schedules")
    monitor = Monitor(model, data, families=_families(), schedule=[2, 4], run=run, batch_size=8)
    returned = {"epoch 0": monitor.before_training()}  # NC and the curvature family (initial)
    for epoch in range(1, 5):
        for step in range(3 * epoch - 2, 3 * epoch + 1):  # three steps per epoch
            returned[f"step {step}"] = monitor.after_iteration(step, epoch=epoch)
        returned[f"epoch {epoch}"] = monitor.after_epoch(epoch, step=3 * epoch)
    run.flush()
    measured = sorted(k for k, v in returned.items() if v is not None)
    assert measured == ["epoch 0", "epoch 2", "epoch 3", "epoch 4", "step 7"]
    rows = run.metrics()

    def steps(metric):
        return sorted(set(rows[rows["metric"] == metric]["step"]))

    assert steps("nc1") == [0, 6, 12]
    assert steps("feature_cosine_all") == [9]
    assert steps("weight_top_eigenvalue") == [0, 7]
    assert steps("accuracy") == [0, 6, 7, 9, 12]  # the model's accuracy at every measurement
    assert run.array_names() == ["curvature_step00000000", "curvature_step00000007"]


def test_a_measurement_collects_only_what_the_due_families_need():
    """NC's nc1 needs pass 2 (a second forward pass with cache_bytes=0), the diversity
    family's cosines one pass: at an event where only the latter is due, one pass; its
    values and NC's are those of a Monitor measuring that family alone."""
    model, data = _setup()
    passes = []
    model.register_forward_pre_hook(lambda module, args: passes.append(1))
    families = _families()[:2]
    monitor = Monitor(model, data, families=families, schedule=[2], cache_bytes=0, batch_size=8)

    def forwards(fn):
        passes.clear()
        out = fn()
        return len(passes), out

    n_nc, at_nc = forwards(lambda: monitor.after_epoch(2))
    n_div, at_div = forwards(lambda: monitor.after_epoch(3))
    assert (n_nc, n_div) == (6, 3)  # 3 batches: twice for NC alone, once for diversity alone
    alone_nc = Monitor(model, data, families=[NC(["nc1"])], schedule=None, cache_bytes=0)
    alone_div = Monitor(model, data, families=[Diversity(["feature_cosine_all"])], schedule=None)
    for got, alone, key, absent in (
        (at_nc, alone_nc, "nc1", "feature_cosine_all"),
        (at_div, alone_div, "feature_cosine_all", "nc1"),
    ):
        ref = alone.measure_now(epoch=2)["train"]
        for layer in monitor.layers:
            assert got["train"][layer][key] == pytest.approx(ref[layer][key], rel=1e-12)
            assert absent not in got["train"][layer]
        assert got["train"][""]["accuracy"] == ref[""]["accuracy"]


def test_measure_now_measures_the_families_due_at_its_event():
    model, data = _setup()
    monitor = Monitor(model, data, families=_families(), schedule=None, batch_size=8)
    layer = monitor.layers[0]

    def keys(**event):
        res = monitor.measure_now(**event)["train"]
        return {k for values in res.values() for k in values} - {"accuracy"}

    # NC follows the Monitor's schedule, which measure_now overrides: always measured
    assert keys(epoch=1) == {"nc1"}
    assert keys(epoch=3) == {"nc1", "feature_cosine_all"}
    assert keys(epoch=0) == {"nc1", "weight_top_eigenvalue"}  # the curvature family's initial
    assert keys(step=7, epoch=2, epoch_end=False) == {"nc1", "weight_top_eigenvalue"}
    assert keys(step=8, epoch=3, epoch_end=False) == {"nc1"}  # an iteration, not epoch 3's end
    assert keys() == {"nc1", "feature_cosine_all", "weight_top_eigenvalue"}  # no event: all
    assert "nc1" in monitor.measure_now()["train"][layer]


def test_a_scheduled_family_gets_the_keys_it_requests_of_another():
    """PFC requests PFC1-3 of the NC family: on PFC's schedule they are computed (by the NC
    object, with its options), while NC's own keys keep to the Monitor's schedule."""
    model, data = _setup()
    nc = NC(["nc1"], ddof=0)
    pfc = PFC(["nc1_trace_ratio", "ncc_accuracy"], path_layers=None, schedule=Schedule.build([5]))
    monitor = Monitor(model, data, families=[nc, pfc], schedule=[1], batch_size=8)
    at_one = monitor.after_epoch(1)["train"][monitor.layers[0]]
    at_five = monitor.after_epoch(5)["train"][monitor.layers[0]]
    assert set(at_one) == {"nc1"}
    assert set(at_five) == {"nc1_trace_ratio", "ncc_accuracy"}
    alone = Monitor(model, data, families=["pfc"], schedule=None, batch_size=8)
    ref = alone.measure_now(epoch=5)["train"][monitor.layers[0]]
    assert at_five["nc1_trace_ratio"] == pytest.approx(ref["nc1_trace_ratio"], rel=1e-12)
    assert at_five["ncc_accuracy"] == ref["ncc_accuracy"]
    assert monitor.after_epoch(2) is None


def test_a_family_schedule_must_be_a_schedule():
    model, data = _setup()
    with pytest.raises(TypeError, match=r"'nc' family's schedule must be a collapselab\.track"):
        Monitor(model, data, families=[NC(schedule=[1, 2])])


def test_iteration_lists_and_dense_windows():
    assert dense_window(0, 9, 3) == [3, 6, 9]  # step 0 is the initial model
    assert dense_window(34, 42, 2) == [34, 36, 38, 40, 42]
    s = Schedule.build(None, every_iterations=10, iterations=dense_window(34, 42, 4))
    assert [t for t in range(51) if s.at_step(t)] == [0, 10, 20, 30, 34, 38, 40, 42, 50]
    assert [t for t in range(51) if s.at_iteration(t)][:2] == [10, 20]
    with pytest.raises(ValueError, match="each scheduled iteration"):
        Schedule.build(None, iterations=[0])
    with pytest.raises(ValueError, match="high"):
        dense_window(5, 4)
