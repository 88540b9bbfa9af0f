"""Issue 35 item 4's readings, each on hand-made results whose verdict is worked out here
(the old reading's verdict beside it, where it differs)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from collapselab.experiments import all_experiments, evaluate_claim
from collapselab.experiments.claims import RunResults
from collapselab.experiments.dlufm import claims as dlufm_claims
from collapselab.experiments.pcbias import claims as pcbias_claims


def _claim(experiment_id: str, name: str):
    """The claim with its premise lifted: these hand-made results test the reading, and the
    premises (the terminal phase, issue 35 item 6) have tests of their own."""
    experiment = next(e for e in all_experiments() if e.id == experiment_id)
    claim = next(c for c in experiment.claims if c.name == name)
    return dataclasses.replace(claim, premise=None)


def _verdict(experiment_id: str, name: str, results: RunResults):
    result = evaluate_claim(_claim(experiment_id, name), results)
    return result.verdict, result


# ------------------------------------------------------------------- curvature networks


def _network(rows: list[tuple[str, str, int, float]], loss: str = "mse", k: int = 3) -> RunResults:
    """A curvature run's results: rows ``(metric, layer, step, value)`` of split train."""
    metrics = pd.DataFrame(
        [{"step": s, "epoch": s, "split": "train", "layer": layer, "metric": m, "value": v}
         for m, layer, s, v in rows]
    )  # fmt: skip
    manifest = {
        "preset": "quick",
        "config": {"loss": loss},
        "curvature": {"n_classes": k, "weight_layers": ["fc", "classifier"]},
    }
    return RunResults(metrics, manifest)


@pytest.mark.parametrize(
    ("count", "verdict"), [(9, "holds"), (6, "does not hold"), (12, "does not hold")]
)
def test_hessian_outlier_count_is_read_exactly(count: int, verdict: str) -> None:
    # K = 3: K² = 9; "within K" admitted 6 = K(K−1), the competing structure
    results = _network([("hessian_outliers", "classifier", 40, float(count))])
    assert _verdict("curvature-mlp-mse", "hessian-k2-outliers", results)[0] == verdict


@pytest.mark.parametrize(
    ("loss", "count", "verdict"),
    [
        ("mse", 3, "holds"),
        ("mse", 2, "does not hold"),
        ("ce", 2, "holds"),
        ("ce", 3, "does not hold"),
    ],
)
def test_class_part_count_is_k_for_mse_and_k_minus_1_for_ce(loss, count, verdict) -> None:
    results = _network([("ggn_outliers_without_cross", "classifier", 40, float(count))], loss)
    got, result = _verdict("curvature-mlp-mse", "class-part-k-outliers", results)
    assert got == verdict
    assert result.values["predicted"] == (2.0 if loss == "ce" else 3.0)


def test_weight_outliers_need_k_not_k_minus_1() -> None:
    for count, verdict in ((3.0, "holds"), (2.0, "does not hold"), (4.0, "does not hold")):
        results = _network([("weight_outliers", "fc", 40, count)])
        assert _verdict("curvature-mlp-mse", "weights-k-outliers", results)[0] == verdict


def test_f_top_is_the_median_over_training_after_initialisation() -> None:
    rows = [("gradient_fraction_top", "fc", s, v) for s, v in ((0, 0.2), (4, 0.97), (40, 0.85))]
    got, result = _verdict("curvature-mlp-mse", "f-top-to-one", _network(rows))
    assert got == "holds"  # median of (0.97, 0.85) = 0.91 >= 0.9; the final 0.85 alone is not
    assert result.values["median"] == pytest.approx(0.91, abs=1e-12)
    assert result.values["final"] == 0.85
    rows[1] = ("gradient_fraction_top", "fc", 4, 0.93)  # median 0.89
    assert _verdict("curvature-mlp-mse", "f-top-to-one", _network(rows))[0] == "does not hold"
    only_start = _network([("gradient_fraction_top", "fc", 0, 0.99)])
    assert _verdict("curvature-mlp-mse", "f-top-to-one", only_start)[0] == "not evaluable"


def _within_rows(ratios: list[float]) -> list[tuple[str, str, int, float]]:
    rows = []
    for step, ratio in zip((0, 4, 40), ratios, strict=True):
        rows += [("papyan_within_top", "classifier", step, ratio * 8.0),
                 ("ggn_top_eigenvalue", "classifier", step, 8.0)]  # fmt: skip
    return rows


def test_within_part_compares_with_its_largest_earlier_value() -> None:
    # 0.02 at initialisation (the features' mean), 0.4 after learning, 0.15 at the end:
    # 0.15 <= 0.5 x 0.4; against the initial value (0.5 x 0.02) it would not hold
    got, result = _verdict(
        "curvature-mlp-mse", "within-part-shrinks", _network(_within_rows([0.02, 0.4, 0.15]))
    )
    assert got == "holds"
    assert result.values["largest_before"] == pytest.approx(0.4, rel=1e-12)
    assert result.threshold == pytest.approx(0.2, rel=1e-12)
    rising = _network(_within_rows([0.02, 0.1, 0.3]))
    assert _verdict("curvature-mlp-mse", "within-part-shrinks", rising)[0] == "does not hold"
    assert dlufm_claims.WITHIN_RATIO_DROP == 0.5


# ------------------------------------------------------------------------ the ReLU UFM


def _relu(top: list[float]) -> RunResults:
    """One symmetric ReLU-active run (K = 2) whose endpoint Hessian's top four are ``top``."""
    sweep = {"width": np.array([4.0]), "seed": np.array([0.0]), "symmetric": np.array([1.0]),
             "masks_constant": np.array([0.0])}  # fmt: skip
    for key in ("weight_rank", "output_frame", "weight_spread", "hessian_spread",
                "hessian_outliers", "objective"):  # fmt: skip
        sweep[key] = np.array([0.0])
    hessian = np.array([*top, 1e-9, 1e-10])
    arrays = {"sweep": sweep, "dynamics": {"n_classes": np.array(2), "layer": np.array(2)},
              "final_d4_s0": {"hessian": hessian}}  # fmt: skip
    return RunResults(pd.DataFrame(), {"preset": "quick"}, arrays)


@pytest.mark.parametrize(
    ("top", "verdict"),
    [
        ([1.0, 0.9, 0.8, 0.7], "holds"),  # spread 0.3: unequal, approaching
        ([1.0, 0.9, 0.8, 0.01], "does not hold"),  # one collapsed: spread 0.99
        ([1.0, 1.0, 1.0, 0.99], "does not hold"),  # equal: spread 0.01
    ],
)
def test_relu_outliers_unequal_yet_approaching(top: list[float], verdict: str) -> None:
    got, result = _verdict("dlufm-relu", "relu-hessian-outliers-unequal", _relu(top))
    assert got == verdict
    expected = (max(top) - min(top)) / max(top)
    assert result.values["d4_s0"] == pytest.approx(expected, rel=1e-12)


# -------------------------------------------------------------------------- paper 002


def _sgd_ensembles(def3_train, glorot_train, def3_test, glorot_test) -> RunResults:
    steps = np.array([1.0, 10.0, 100.0, 1000.0])

    def arrays(train, test, rate):
        return {"steps": steps, "train_accuracy": np.array([train]),
                "test_accuracy": np.array([test]), "chosen": np.float64(rate)}  # fmt: skip

    return RunResults(
        pd.DataFrame(),
        {"preset": "quick"},
        {"sgd_def3": arrays(def3_train, def3_test, 0.1),
         "sgd_glorot_uniform": arrays(glorot_train, glorot_test, 0.01)},
    )  # fmt: skip


def test_def3_faster_reads_train_and_test_under_sgd() -> None:
    # Def. 3 reaches 0.95 x 0.9 = 0.855 on train between steps 1 and 10 at
    # 1 + 9 (0.855 − 0.5)/(0.9 − 0.5) = 8.9875; Glorot at 10 + 90 (0.855 − 0.6)/(0.9 − 0.6) = 86.5
    fast, slow = [0.5, 0.9, 0.9, 0.9], [0.5, 0.6, 0.9, 0.9]
    got, result = _verdict(
        "pcbias-init", "def3-converges-faster", _sgd_ensembles(fast, slow, fast, slow)
    )
    assert got == "holds"
    assert result.values["def3_train_step"] == pytest.approx(8.9875, rel=1e-12)
    assert result.values["glorot_train_step"] == pytest.approx(86.5, rel=1e-12)
    assert result.values["def3_rate"] == 0.1 and result.values["glorot_rate"] == 0.01
    # faster on train only: the paper says train and test
    only_train = _sgd_ensembles(fast, slow, slow, fast)
    assert _verdict("pcbias-init", "def3-converges-faster", only_train)[0] == "does not hold"
    final = _verdict("pcbias-init", "same-final-accuracy", _sgd_ensembles(fast, slow, fast, slow))
    assert final[0] == "holds" and final[1].values["gap"] == 0.0


def test_the_equal_step_controls_read_the_gd_ensembles() -> None:
    steps = np.array([1.0, 10.0, 100.0])
    gd = {
        "def3": {"steps": steps, "train_accuracy": np.array([[0.5, 0.6, 0.9]]),
                 "test_accuracy": np.array([[0.5, 0.6, 0.8]])},
        "glorot_uniform": {"steps": steps, "train_accuracy": np.array([[0.5, 0.9, 0.9]]),
                           "test_accuracy": np.array([[0.5, 0.9, 0.85]])},
    }  # fmt: skip
    results = RunResults(pd.DataFrame(), {"preset": "quick"}, gd)
    control = "def3-converges-faster-equal-step-gd"
    assert _verdict("pcbias-init", control, results)[0] == "does not hold"  # Glorot first
    got, result = _verdict("pcbias-init", "same-final-accuracy-equal-step-gd", results)
    assert got == "does not hold" and result.values["gap"] == pytest.approx(0.05, abs=1e-12)
    # the SGD claims need the SGD ensembles
    assert _verdict("pcbias-init", "def3-converges-faster", results)[0] == "not evaluable"


def _separable(real: list[float], shuffled: list[float]) -> RunResults:
    pcs = np.array([10.0, 50.0, 500.0])
    arrays = {"pcs": pcs}
    for p, a, b in zip(pcs, real, shuffled, strict=True):
        arrays[f"epoch_real_P{int(p)}"] = np.float64(a)
        arrays[f"epoch_shuffled_P{int(p)}"] = np.float64(b)
    return RunResults(pd.DataFrame(), {"preset": "quick"}, {"separable": arrays})


@pytest.mark.parametrize(
    ("real", "shuffled", "opposite"),
    [
        ([2, 3, 5], [2, 8, 20], 0),  # same order, far apart: qualitatively alike
        ([2, 3, 3], [2, 4, 6], 0),  # a tie in one: no contradiction
        ([2, 3, np.nan], [2, 4, 9], 0),  # never reached counts as last
        ([3, 2, 5], [2, 4, 6], 1),  # P = 10 and 50 ordered oppositely
        ([5, 3, 2], [2, 3, 5], 3),
    ],
)
def test_real_and_shuffled_alike_is_the_same_ordering_over_p(real, shuffled, opposite) -> None:
    got, result = _verdict(
        "pcbias-separable", "separable-real-shuffled-alike", _separable(real, shuffled)
    )
    assert result.values["opposite_pairs"] == float(opposite)
    assert got == ("holds" if opposite == 0 else "does not hold")


def test_fig6_bounds_are_the_papers_values_with_the_tolerance() -> None:
    assert pcbias_claims.PAPER_TOLERANCE == 0.1
    assert pcbias_claims.AGREE == pytest.approx(0.75, abs=1e-15)
    assert pcbias_claims.CRITICAL == pytest.approx(-0.83, abs=1e-15)


def test_every_theorem_verified_is_removed_and_recorded() -> None:
    from collapselab.experiments.preregistration import register_for

    linear = next(e for e in all_experiments() if e.id == "dlufm-linear")
    assert "every-theorem-verified" not in {c.name for c in linear.claims}
    history = register_for("004").history("every-theorem-verified")
    assert history[-1]["after"].startswith("removed:") and history[-1]["commit"] == "dd80824"
