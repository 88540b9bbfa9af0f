"""DiversityRecorder's cheap paths (issue 15's overhead): the loss of the probe set taken
from the Monitor's own forward pass equals a separate forward pass over the probe."""

from __future__ import annotations

import math

import torch

from collapselab.data import LabeledData, gaussian_mixture
from collapselab.experiments.fd import presets
from collapselab.experiments.fd.measurement import DiversityRecorder, boundary_schedule
from collapselab.experiments.fd.presets import TwoPhase
from collapselab.experiments.fd.training import Job, build_model, train_config
from collapselab.train import train

CONFIG = presets.TWO_PHASE["tiny"].base.replace(iterations=12, batch_size=20)


def _record(loss_from_probe: bool) -> tuple[list[dict[str, float]], torch.nn.Module]:
    data = gaussian_mixture(3, 6, 20, clusters_per_class=2, mean_scale=2.0, seed=0)
    probe = LabeledData(data.train.x[::3], data.train.y[::3], 3, "p", {})
    cfg = train_config(CONFIG.training, 60, seed=0, device="cpu")
    model = build_model(CONFIG.model.replace(depth=4, width=7), 6, 3, seed=0)
    # loss_set=probe: a separate no-grad forward pass over the probe at every measurement
    loss_set = None if loss_from_probe else probe
    rec = DiversityRecorder(model, probe, loss_set, boundary_schedule(4), cfg.lr, stop=12)
    train(model, data, cfg, [rec], None)
    return rec.rows, model


def test_loss_of_the_probe_from_the_monitors_pass_equals_its_own_forward_pass():
    reused, model_a = _record(True)
    separate, model_b = _record(False)
    assert [r["step"] for r in reused] == [0.0, 4.0, 8.0, 12.0]
    for a, b in zip(reused, separate, strict=True):
        assert a.keys() == b.keys()
        for key in a:  # every column bit for bit, loss and accuracy included
            assert a[key] == b[key] or (math.isnan(a[key]) and math.isnan(b[key])), key
    assert reused[-1]["loss"] < reused[0]["loss"]  # the run trained
    for p, q in zip(model_a.parameters(), model_b.parameters(), strict=True):
        assert torch.equal(p, q)


def test_loss_per_class_zero_measures_the_loss_of_the_probe_set():
    from collapselab.data import load_data
    from collapselab.experiments.fd.measurement import probe_indices
    from collapselab.experiments.fd.training import dry_run, run_member

    config = CONFIG.replace(iterations=10, every=5, loss_per_class=0)
    out = run_member(Job(config).config())
    # step 0: the initial model's mean cross-entropy on the probe set, computed here
    data = load_data(config.data, None, 0)
    probe = probe_indices(data.train, config.measurement.probe_per_class, 1)
    model = build_model(config.model, int(data.train.x.shape[1]), data.train.n_classes, 0)
    with torch.no_grad():
        logits = model(data.train.x[probe]).double()
    expected = torch.nn.functional.cross_entropy(logits, data.train.y[probe])
    assert list(out["steps"]) == [0, 5, 10]
    assert out["loss"][0] == float(expected)
    summary = dry_run(TwoPhase(base=config, arms={"clustered": {}}))
    assert summary["clustered"]["loss_set_size"] == summary["clustered"]["probe_size"] == 60
