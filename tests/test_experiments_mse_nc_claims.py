"""Paper 003's training claims decided on hand-written metric tables (exact fixtures)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from collapselab.data import DataSpec
from collapselab.experiments import RunResults, evaluate_claims
from collapselab.experiments.mse_nc import (
    CollapsePreset,
    Combination,
    Net,
    RateSweep,
    StoredArms,
    select_rate,
    sweep_rates,
)
from collapselab.experiments.mse_nc.arms import arms_of
from collapselab.experiments.mse_nc.claims import TRAINING_CLAIMS

EPOCHS = list(range(10))
PRESET = CollapsePreset(
    datasets={"d": DataSpec("digits")},
    nets={"m": Net(name="mlp")},
    arms=(Combination(dataset="d", net="m", lr=0.1),),
    epochs=9,
)
CONFIG = PRESET.to_dict()
PLAN = [arm.to_dict() for arm in arms_of(PRESET)]


def _series(key, split, layer, metric, values):
    return [
        {"step": e, "epoch": e, "split": f"{key}/{split}", "layer": layer, "metric": metric,
         "value": float(v)}
        for e, v in zip(EPOCHS, values, strict=True)
    ]  # fmt: skip


def _geometric(start, end):
    return np.geomspace(start, end, len(EPOCHS))


def _arm_rows(key, nc1_end, robustness_end, test_acc_end):
    train_acc = [0.1, 0.5, 0.9, 1, 1, 1, 1, 1, 1, 1]  # zero error at epoch 3
    rows = _series(key, "train", "", "accuracy", train_acc)
    rows += _series(
        key, "test", "", "accuracy", [0.1, 0.5, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, test_acc_end]
    )
    nc1 = [2.0, 1.0, 0.6, 0.4, 0.35, 0.3, 0.28, 0.25, 0.22, nc1_end]
    rows += _series(key, "train", "pen", "nc1", nc1)
    rows += _series(key, "test", "pen", "nc1", [3.0] * 9 + [2.0])
    rows += _series(
        key,
        "train",
        "pen",
        "nc2_equinorm_means",
        [0.5, 0.4, 0.35, 0.3, 0.25, 0.2, 0.15, 0.12, 0.11, 0.1],
    )
    rows += _series(
        key,
        "train",
        "pen",
        "nc2_equinorm_classifiers",
        [0.3, 0.2, 0.2, 0.2, 0.19, 0.18, 0.17, 0.16, 0.15, 0.15],
    )
    rows += _series(
        key,
        "train",
        "pen",
        "nc4_ncc_mismatch",
        [0.5, 0.3, 0.2, 0.1, 0.05, 0.02, 0.0, 0.0, 0.0, 0.0],
    )
    rows += _series(
        key, "test", "", "deepfool_ratio", [math.nan] * 3 + [0.1] * 6 + [robustness_end]
    )
    if key.endswith("-mse"):
        nc1_term, nc23 = _geometric(0.1, 0.01), _geometric(0.1, 1e-5)
        ratio = [2.0, 1.0, 0.5, 0.08, 0.05, 0.05, 0.04, 0.03, 0.02, 0.02]  # <= 0.1 from epoch 3
        ls = nc1_term + nc23
        rows += _series(key, "train", "pen", "mse_nc1_term", nc1_term)
        rows += _series(key, "train", "pen", "mse_nc23_term", nc23)
        rows += _series(key, "train", "pen", "mse_ls_perp_ratio", ratio)
        rows += _series(key, "train", "pen", "mse_ls_perp", np.asarray(ratio) * ls)
        rows += _series(key, "train", "pen", "mse_loss", (1 + np.asarray(ratio)) * ls)
    rows = [r for r in rows if not math.isnan(r["value"])]
    return rows


def _manifest(keys):
    arms = {k: {"dataset": "d", "net": "m", "loss": k.rsplit("-", 1)[1], "lr": 0.1, "epochs": 9,
                "layer": "pen", "zero_error_epoch": 3} for k in keys}  # fmt: skip
    return {
        "config": CONFIG,
        "preset": "quick",
        "mse_nc": {"plan": PLAN, "arms": arms, "sweeps": {}},
    }


def _results(with_ce=True):
    rows = _arm_rows("d-m-mse", nc1_end=0.2, robustness_end=0.3, test_acc_end=0.92)
    keys = ["d-m-mse"]
    if with_ce:
        rows += _arm_rows("d-m-ce", nc1_end=0.25, robustness_end=0.1, test_acc_end=0.9)
        keys.append("d-m-ce")
    return RunResults(pd.DataFrame(rows), _manifest(keys))


def _by_name(results):
    document = evaluate_claims(TRAINING_CLAIMS, results)
    return {c["name"]: c for c in document["claims"]}


def test_verdicts_and_numbers_on_a_known_table():
    claims = _by_name(_results())
    assert claims["reaches-terminal-phase"]["verdict"] == "holds"  # epoch 3 <= 9 // 3
    assert claims["reaches-terminal-phase"]["values"]["d-m-ce.first_rate_drop"] == 3
    cp = claims["central-path-negligible"]
    assert cp["verdict"] == "holds"
    assert cp["values"]["d-m-mse.max_ratio_tpt"] == pytest.approx(0.08)
    assert cp["values"]["d-m-mse.negligible_from_epoch"] == 3
    # NC1 0.4 at the zero-error epoch -> 0.2 at the end: exactly the factor 2 (holds).
    nc1 = claims["nc1-falls"]
    assert nc1["verdict"] == "holds"
    assert nc1["values"]["d-m-mse.final/at_zero_error"] == pytest.approx(0.5)
    # Equinorm: means 0.3 -> 0.1 hold, classifiers 0.2 -> 0.15 do not.
    eq = claims["equinorm-falls"]
    assert eq["verdict"] == "does not hold"
    assert eq["values"]["d-m-mse.1.final/at_zero_error"] == pytest.approx(0.75)
    assert claims["ncc-mismatch-falls"]["verdict"] == "holds"  # 0.1 -> exactly 0
    # The decomposition: L_NC2/3 falls 1e4-fold, L_NC1 10-fold over the same epochs.
    assert claims["nc23-falls-faster-than-nc1"]["verdict"] == "holds"
    assert claims["nc1-term-dominant"]["verdict"] == "holds"
    acc = claims["test-accuracy-improves"]
    assert acc["verdict"] == "holds" and acc["values"]["median"] == pytest.approx(2.0)
    rob = claims["robustness-improves"]
    assert rob["verdict"] == "holds" and rob["values"]["median"] == pytest.approx(0.2)
    faster = claims["mse-collapses-faster-than-ce"]
    assert faster["verdict"] == "holds" and faster["values"]["d-m.mse/ce"] == pytest.approx(0.8)
    robust = claims["mse-more-robust-than-ce"]
    assert robust["values"]["median"] == pytest.approx(math.log10(3.0))
    test = claims["test-nc1-above-train"]
    assert test["verdict"] == "holds" and test["values"]["d-m-mse.test/train"] == pytest.approx(
        10.0
    )
    slower = claims["test-nc1-decreases-slower"]
    assert slower["verdict"] == "holds"
    assert slower["values"]["d-m-mse.test_end/zero"] == pytest.approx(2 / 3)
    # Claims not shown by this table (equiangularity rows absent) are not evaluable.
    assert claims["equiangularity-falls"]["verdict"] == "not evaluable"


def test_missing_arms_are_not_evaluable_rather_than_holding():
    claims = _by_name(_results(with_ce=False))
    for name in ("mse-collapses-faster-than-ce", "mse-more-robust-than-ce"):
        assert claims[name]["verdict"] == "not evaluable"
        assert "d-m" in claims[name]["detail"]
    assert claims["reaches-terminal-phase"]["verdict"] == "not evaluable"  # CE arm absent
    assert claims["nc1-falls"]["verdict"] == "holds"  # MSE arm complete


def test_an_arm_without_terminal_phase():
    table = _results().metrics
    mask = (table["split"] == "d-m-mse/train") & (table["metric"] == "accuracy")
    table.loc[mask, "value"] = 0.99
    claims = _by_name(RunResults(table, _manifest(["d-m-mse", "d-m-ce"])))
    assert claims["reaches-terminal-phase"]["verdict"] == "does not hold"
    assert claims["nc1-falls"]["verdict"] == "not evaluable"
    assert "never reached zero training error" in claims["nc1-falls"]["detail"]
    assert StoredArms(table, _manifest(["d-m-mse"])).zero_error_epoch("d-m-mse") is None


def test_sweep_grid_and_selection():
    spec = RateSweep(indices=(16, 20))
    (i16, lr16), (i20, lr20) = sweep_rates(spec)
    assert (i16, i20) == (16, 20)
    assert lr16 == pytest.approx(0.0184, rel=2e-3) and lr20 == pytest.approx(0.0679, rel=1e-3)
    assert len(sweep_rates(RateSweep())) == 25
    points = [
        {"lr": 0.01, "test_error": 0.10, "train_accuracy": 1.0},
        {"lr": 0.03, "test_error": 0.05, "train_accuracy": 0.99},  # best, but never interpolates
        {"lr": 0.10, "test_error": 0.08, "train_accuracy": 1.0},
        {"lr": 0.30, "test_error": math.nan, "train_accuracy": math.nan},  # diverged
    ]
    lr, why = select_rate(points, RateSweep(require_zero_error=True))
    assert lr == 0.10 and "zero training error" in why
    assert select_rate(points, RateSweep(require_zero_error=False))[0] == 0.03
    tie = [dict(p, test_error=0.1) for p in points[:3]]
    assert select_rate(tie, RateSweep(require_zero_error=False))[0] == 0.10  # ties: larger rate
    with pytest.raises(ValueError, match="diverged"):
        select_rate(points[3:], RateSweep())
    with pytest.raises(ValueError, match="indices"):
        sweep_rates(RateSweep(indices=(25,)))
    with pytest.raises(ValueError, match="select"):
        select_rate(points, RateSweep(select="train_loss"))
