"""Paper 003's experiments end to end at the tiny preset: runs, figures, claims, resume.

The tiny preset: a well-separated Gaussian mixture (4 classes), small MLPs, a few epochs.
The networks interpolate within a few epochs, so every claim can be decided; what is
asserted is the machinery (rows, figures, verdicts, numbers recorded), not the claims'
truth at this size.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from collapselab.experiments import get_experiment, reproduce, run_experiment
from collapselab.experiments.mse_nc import FIGURES, THEORY_FIGURES, StoredArms, table1_rows
from collapselab.experiments.mse_nc.arms import NC_METRICS
from collapselab.experiments.mse_nc.presets import COLLAPSE_TINY, paper_lr_grid
from collapselab.experiments.sweeps import SerialExecutor
from collapselab.store import Run
from tests._experiments import stored_claims


def test_reproduce_end_to_end(tmp_path):
    result = reproduce("mse-nc", preset="tiny", root=tmp_path)
    assert [o.experiment for o in result.outcomes] == ["mse-nc-collapse", "mse-nc-theory"]
    assert result.ok, [o.error for o in result.failed]
    assert (tmp_path / "index.html").is_file()
    runs = {o.experiment: Run.open(o.path) for o in result.outcomes}
    _check_training_run(runs["mse-nc-collapse"])
    _check_theory_run(runs["mse-nc-theory"])


def _check_training_run(run) -> None:
    assert run.status == "completed", run.manifest.get("error")
    figures = {p.stem for p in (run.path / "figures").glob("*.png")}
    assert figures == set(FIGURES)
    stored = StoredArms(run.metrics(), run.manifest)
    keys = ["blobs-mlp-mse", "blobs-mlp-ce", "blobs-wide-mse", "blobs-wide-ce"]
    assert stored.trained() == keys and stored.pairs() == ["blobs-mlp", "blobs-wide"]
    for key in keys:
        s = stored.summary(key)
        zero = stored.zero_error_epoch(key)
        assert zero is not None and zero == s["zero_error_epoch"]
        x, _ = stored.curve(key, "nc1")
        assert x.tolist() == list(range(s["epochs"] + 1))  # log schedule: every epoch <= 14
        for metric in NC_METRICS:
            assert np.isfinite(stored.curve(key, metric)[1]).all()
        xr, rho = stored.curve(key, "deepfool_ratio", "test")
        assert xr[0] == zero and xr[-1] == s["epochs"] and (rho > 0).all()
        assert np.isfinite(stored.curve(key, "nc1", "test")[1]).all()
    # The MSE decomposition closes: L = L_NC1 + L_NC2/3 + L_LS_perp at every epoch.
    parts = sum(stored.curve("blobs-mlp-mse", m)[1] for m in ("mse_nc1_term", "mse_nc23_term"))
    perp = stored.curve("blobs-mlp-mse", "mse_ls_perp")[1]
    np.testing.assert_allclose(
        stored.curve("blobs-mlp-mse", "mse_loss")[1], parts + perp, rtol=1e-9
    )
    assert stored.summary("blobs-mlp-mse")["lam"] == pytest.approx(4 * 5e-4 / 2)  # C wd / 2
    # The swept arm chose one of its two grid rates by final test error.
    sweep = stored.sweep("blobs-wide-mse")
    grid = paper_lr_grid()
    assert set(sweep["points"]) == {"22", "24"}
    assert sweep["selected"] in (grid[22], grid[24])
    assert stored.summary("blobs-wide-mse")["lr"] == sweep["selected"]
    best = min(sweep["points"].values(), key=lambda p: (p["test_error"], -p["lr"]))
    if all(p["train_accuracy"] == 1.0 for p in sweep["points"].values()):
        assert sweep["selected"] == best["lr"]
    # Table 1 reads the test accuracy at the zero-error epoch and at the end.
    rows = {r["arm"]: r for r in table1_rows(stored)}
    r = rows["blobs-mlp-mse"]
    zero = stored.zero_error_epoch("blobs-mlp-mse")
    assert r["acc_zero_error"] == pytest.approx(
        100 * stored.value_at("blobs-mlp-mse", "accuracy", zero, "test")
    )
    assert math.isnan(r["paper_acc_final"])
    assert (run.path / "table1.csv").read_text().startswith("arm,lr,zero_error_epoch")
    claims = stored_claims(run)
    assert len(claims) == len(get_experiment("mse-nc-collapse").claims)
    for entry in claims.values():
        assert entry["verdict"] in ("holds", "does not hold"), (entry["name"], entry["detail"])
        assert entry["values"], entry["name"]
    nc1 = claims["nc1-falls"]["values"]
    x, y = stored.curve("blobs-mlp-mse", "nc1")
    assert nc1["blobs-mlp-mse.final"] == pytest.approx(y[-1])
    assert nc1["blobs-mlp-mse.at_zero_error"] == pytest.approx(y[x == zero][0])


def test_training_run_resumes_arm_by_arm(tmp_path, monkeypatch):
    from collapselab.experiments.mse_nc import arms as arms_module

    calls = []
    real = arms_module.run_arm

    def failing(config, arm, *args, **kwargs):
        calls.append(arm.key)
        if arm.key == "blobs-mlp-ce" and calls.count(arm.key) == 1:
            raise RuntimeError("simulated crash")
        return real(config, arm, *args, **kwargs)

    monkeypatch.setattr("collapselab.experiments.mse_nc.collapse.run_arm", failing)
    config = COLLAPSE_TINY.replace(arms=COLLAPSE_TINY.arms[:1])
    monkeypatch.setitem(get_experiment("mse-nc-collapse").presets, "tiny", config)
    # one arm after the other (a serial executor): the arms train in this process
    run = run_experiment("mse-nc-collapse", preset="tiny", root=tmp_path, raise_on_error=False,
                         executor="serial")  # fmt: skip
    assert run.status == "failed" and "simulated crash" in run.manifest["error"]
    assert set(run.manifest["mse_nc"]["arms"]) == {"blobs-mlp-mse"}
    n_rows = len(run.metrics())
    run = run_experiment("mse-nc-collapse", preset="tiny", root=tmp_path, executor="serial")
    assert run.status == "completed"
    assert calls == ["blobs-mlp-mse", "blobs-mlp-ce", "blobs-mlp-ce"]  # MSE not retrained
    metrics = run.metrics()
    assert len(metrics) > n_rows
    mse_rows = metrics[metrics["split"].str.startswith("blobs-mlp-mse/")]
    assert not mse_rows.duplicated(subset=["epoch", "split", "layer", "metric"]).any()


class _InProcess(SerialExecutor):
    """A serial executor under another name: the arms take the side-by-side path (as
    members of a sweep) but train in this process, where a test can patch them."""

    name = "in-process"


def _rows(run):
    table = run.metrics().sort_values(["split", "layer", "metric", "epoch", "step"])
    return table.reset_index(drop=True)


def _summaries(run):
    arms = run.manifest["mse_nc"]["arms"]
    return {
        key: {k: v for k, v in summary.items() if k != "seconds"} for key, summary in arms.items()
    }


def test_arms_side_by_side_give_the_rows_of_arms_one_after_the_other(tmp_path):
    """The four arms (one with a rate sweep) as members on a pool of two worker processes,
    and one after the other in this process: the same rows to the last bit and the same
    summaries (their wall times apart), each arm stored as a member."""
    serial = run_experiment("mse-nc-collapse", preset="tiny", root=tmp_path / "serial",
                            executor="serial")  # fmt: skip
    pooled = run_experiment("mse-nc-collapse", preset="tiny", root=tmp_path / "pool",
                            executor="local", workers=2)  # fmt: skip
    assert serial.status == pooled.status == "completed"
    assert not (serial.path / "members" / "arms").exists()
    assert len(list((pooled.path / "members" / "arms").glob("member-*.json"))) == 4
    pd.testing.assert_frame_equal(_rows(serial), _rows(pooled), check_exact=True)
    assert _summaries(serial) == _summaries(pooled)


def test_arms_side_by_side_resume_with_the_arms_not_yet_trained(tmp_path, monkeypatch):
    """An arm that fails twice (its try and the sweep's one retry) fails the run; the arm
    that finished is kept as a member and not trained again when the run resumes."""
    from collapselab.experiments.mse_nc import arms as arms_module

    calls = []
    real = arms_module.run_arm

    def failing(config, arm, *args, **kwargs):
        calls.append(arm.key)
        if arm.key == "blobs-mlp-ce" and calls.count(arm.key) <= 2:
            raise RuntimeError("simulated crash")
        return real(config, arm, *args, **kwargs)

    monkeypatch.setattr("collapselab.experiments.mse_nc.collapse.run_arm", failing)
    config = COLLAPSE_TINY.replace(arms=COLLAPSE_TINY.arms[:1])
    monkeypatch.setitem(get_experiment("mse-nc-collapse").presets, "tiny", config)
    options = {"preset": "tiny", "root": tmp_path, "executor": _InProcess(), "workers": 2}
    run = run_experiment("mse-nc-collapse", raise_on_error=False, **options)
    assert run.status == "failed" and "simulated crash" in run.manifest["error"]
    assert len(run.metrics()) == 0 and not run.manifest.get("mse_nc", {}).get("arms")
    run = run_experiment("mse-nc-collapse", **options)
    assert run.status == "completed"
    assert calls == ["blobs-mlp-mse", "blobs-mlp-ce", "blobs-mlp-ce", "blobs-mlp-ce"]
    assert set(run.manifest["mse_nc"]["arms"]) == {"blobs-mlp-mse", "blobs-mlp-ce"}
    rows = run.metrics()
    assert not rows.duplicated(subset=["epoch", "split", "layer", "metric"]).any()


def _check_theory_run(run) -> None:
    figures = {p.stem for p in (run.path / "figures").glob("*.png")}
    assert figures == set(THEORY_FIGURES)
    claims = stored_claims(run)
    for entry in claims.values():
        assert entry["verdict"] in ("holds", "does not hold"), (entry["name"], entry["detail"])
    assert claims["snr-singular-vectors-frozen"]["verdict"] == "holds"
    follows = claims["snr-follows-a-closed-form"]["values"]
    # The simulator follows the corrected closed form, not Prop. 2 (note 003 §3.9).
    assert follows["max_rel_error_corrected"] < 1e-2 < follows["max_rel_error_published"]
    assert claims["snr-follows-published-closed-form"]["verdict"] == "does not hold"
    arrays = run.load_array("snr_dynamics")
    assert arrays["omega_simulated"].shape == (9, 2)
    np.testing.assert_allclose(arrays["omega_simulated"][0], [0.8, 0.3], rtol=1e-12)
    ufm = run.metrics()
    ufm = ufm[ufm["split"] == "ufm"]
    residual = ufm[ufm["metric"] == "decomposition_residual"]["value"]
    assert len(residual) == 13 and float(residual.max()) < 1e-12
