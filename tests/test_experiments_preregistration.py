"""The pre-registration (issue 35 items 1-2): every claim has a tier and a registered reading,
and a changed bound, reading or regime rule needs an entry in its paper's register."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from collapselab.experiments import all_experiments
from collapselab.experiments.claims import Claim, ClaimResult, claim_entry
from collapselab.experiments.preregistration import (
    AMBIGUITY,
    APART,
    BEYOND,
    COUNTED,
    ERRATUM,
    PAPER,
    REGISTERS,
    SUBSTITUTED,
    TIERS,
    annotate,
    reading_problems,
    register_for,
    tier_counts,
)

FIRST_READINGS = {
    "000/primary-direction-dominates-average-change": "c514b2ac623f61c7",
    "000/s-primary-order-of-magnitude-above-s-k": "6bd3b45e95f8cf13",
    "000/feature-similar-to-delta-v": "d0d5af1c963ff374",
    "000/o-positive": "36e4d3ba974e0d55",
    "000/lemma3-primary-term-dominates": "f5de9205683e796a",
    "000/one-or-two-classes-learnt-in-phase-1": "838e00a234b32e4f",
    "000/theorem2-sign-consistency": "ff5a3c0bb1bb1222",
    "000/normalisation-breaks-the-trap": "898fb8a21aad381e",
    "000/momentum-shortens-phase-1": "9ec0f9022f6265ad",
    "000/momentum-shortens-phase-1-at-equal-effective-lr": "25c361e5fcd38656",
    "000/larger-init-variance-shortens-phase-1": "e16403d48358ecd8",
    "000/smaller-l2-shortens-phase-1": "5031df1b93ac6d06",
    "000/small-gamma-gets-stuck": "e8043187ad91aa1f",
    "000/two-phases-across-depth": "6750dd34a98959d5",
    "000/two-phases-across-width": "824719a96623f7a1",
    "000/two-phases-across-learning-rate": "7e326f630341850e",
    "000/two-phases-across-batch-size": "ade07e5d746be953",
    "000/two-phases-across-activation": "860bfbaf95e36f87",
    "000/m2-rises-before-loss-drops": "88da76e7a401b9f2",
    "000/m3-rises-in-phase-1": "a922c06e896dceba",
    "000/m4-rises-in-phase-1": "9d1e30a6161f31b6",
    "001/sweep-pfc1-increases-with-lambda": "013e27763309790e",
    "001/sweep-pfc2-increases-with-lambda": "c3ac7e1f0c665314",
    "001/sweep-alignment-decreases-with-lambda": "ac8c446f65c46930",
    "001/sweep-more-collapsed-than-data": "cb9766779ce97501",
    "001/sweep-converged-below-literal": "fa2ab0197695b7db",
    "001/ufm-exact-collapse": "bf0cfb04f1b6a3bb",
    "001/ufm-exact-collapse-literal-solver": "2a72d1e63febbd42",
    "001/mufm-more-collapsed-than-data": "f7c95c323732a9c3",
    "001/mufm-more-collapsed-than-data-literal-solver": "934110b09c31a10e",
    "001/mufm-not-exact-collapse": "7acda14c4f169422",
    "001/converged-below-literal": "b2cd21c634e5b2be",
    "001/theorem1-monotone-when-s-nonnegative": "22e6562026e71cb7",
    "001/theorem2-monotone-for-small-transport-cost": "1bd6df7a676a6fb1",
    "001/theorem2-local-near-end": "0db7e1df490bd334",
    "001/theorem3-reduction-as-published": "c8bc53ac5fc70fba",
    "001/theorem3-reduction-corrected": "72d8243768ef40a6",
    "001/theorem4-lemma1-flow": "c3d87cbefefb961a",
    "001/theorem4-large-lambda": "8b12de78b0314703",
    "001/toy-pfc1-decreases-along-the-line": "871986255bed191e",
    "001/toy-collapses-at-the-end": "b7885bfeb26f27f0",
    "001/last-layer-ncc-separable": "19c802a70b623e47",
    "001/pfc1-decreases-with-depth": "96f5ada0af5e0e50",
    "001/pfc2-decreases-with-depth": "9fa1adba6ac83fb8",
    "001/pfc3-increases-with-depth": "ed8803a5eb20cc21",
    "001/order-not-established-at-initialization": "cfd7923bb0478ea8",
    "001/order-not-established-after-first-epoch": "653980e0d69d07b2",
    "001/theorem1-s-nonnegative": "d5c9a6fdca12b214",
    "001/geodesic-within-band": "d20b88ac4c423acd",
    "001/geodesic-prediction-monotone": "c2efeb2fc900bb3e",
    "002/early-stopping-bottom-amplified-nonlinear": "dd027975e3650c98",
    "002/early-stopping-bottom-amplified-linear": "328a5828bd980b94",
    "002/closed-form-follows-gd": "2ab309a1c0d04819",
    "002/closed-form-follows-gd-whitened": "0aa90043bc35c863",
    "002/top-pcs-converge-first": "2e5c3a02a4550d2d",
    "002/whitening-flattens-convergence": "da34c382a088dbdf",
    "002/whitening-drops-the-spread": "df101415c376b1be",
    "002/printed-eq10-at-step-one": "9f80fdcb48a0f40a",
    "002/critical-frequency-vs-accessibility": "fd34cc4a2e1b9712",
    "002/critical-frequency-vs-discriminability": "bbd58310f222bf29",
    "002/boundary-adds-frequencies": "8e13d4aec5071024",
    "002/def3-converges-faster": "a27deb4f6c39bf55",
    "002/same-final-accuracy": "ca9674f1d3d2fbd5",
    "002/def3-converges-faster-equal-step-gd": "a27deb4f6c39bf55",
    "002/same-final-accuracy-equal-step-gd": "01accd3bee6596e9",
    "002/closed-form-def3": "af371538dcfc2a4b",
    "002/closed-form-glorot-effective-factor": "8e79208e9230f96d",
    "002/closed-form-glorot-paper-factor": "de8458771f1137a3",
    "002/loc-natural-high": "05d5b4ceed99d7a5",
    "002/whitening-drops-loc": "3a44a03f4aa2c547",
    "002/whitening-drops-loc-fastest": "f591236814eeace9",
    "002/nonlinear-whitening-drops-loc-less": "a203ba693a362df0",
    "002/nonlinear-whitening-halves-loc-fastest": "a01821cc91a4168e",
    "002/shuffled-labels-slower": "b00d043f72dcf285",
    "002/whitening-removes-label-gap": "c393f50ee419148f",
    "002/small-p-peaks-first": "d073e9c4383da290",
    "002/small-p-declines": "e5551d4c7bc00a0a",
    "002/linear-nonlinear-accessibility": "89a5a38f480f2c71",
    "002/critical-pc-vs-accessibility": "f046c5b5b6c646dc",
    "002/discriminability-vs-accessibility": "726703e83173df8f",
    "002/relu-top-pcs-first": "3dc9b7098d0b0265",
    "002/relu-approximate-dynamics": "6d7896f0b90ecc32",
    "002/relu-printed-constant": "a2db3a94129aa218",
    "002/scales-near-identity-early": "304aa4f013ee8773",
    "002/a-drifts-b-stays": "9ef0519aa2818d58",
    "002/separable-smaller-p-faster": "316e689a9f66a6d6",
    "002/separable-smaller-p-faster-shuffled": "120d8234436c8e80",
    "002/separable-real-shuffled-alike": "8face9addd96fd86",
    "002/stvgg-linearised-pc-bias-early": "b4e078f3b5e17a8c",
    "002/stvgg-small-p-peaks-first": "11dda03654768cb7",
    "002/stvgg-small-p-declines": "f1bdf880862eb777",
    "003/reaches-terminal-phase": "5481b6aeb7334bf6",
    "003/central-path-negligible": "d81b9d6528de6d88",
    "003/nc1-term-dominant": "94aba3be13428a09",
    "003/nc23-falls-faster-than-nc1": "cbb7079a887442c1",
    "003/equinorm-falls": "2ebec96c84d03b3b",
    "003/equiangularity-falls": "1d2467c55ab8a253",
    "003/max-equiangularity-falls": "1798bccb14754574",
    "003/self-duality-falls": "1ab00f7222e46d8a",
    "003/nc1-falls": "392940a80c64da48",
    "003/ncc-mismatch-falls": "ec3753b874f848dd",
    "003/test-accuracy-improves": "80fd49d094c45435",
    "003/robustness-improves": "2ae51a17bae2fe9d",
    "003/mse-collapses-faster-than-ce": "695734f4a1f9a4a1",
    "003/mse-more-robust-than-ce": "c5deb4c7db36ba55",
    "003/test-nc1-above-train": "fe8e1555d278567e",
    "003/test-nc1-decreases-slower": "3e8f103d052fc75c",
    "003/snr-singular-vectors-frozen": "dedd79f81334d799",
    "003/snr-follows-a-closed-form": "9db4722861cd188e",
    "003/snr-follows-published-closed-form": "fa8fc2e24e0ac98b",
    "003/snr-values-grow-and-equalise": "8d92ecdc17921799",
    "003/ufm-central-path-negligible": "7742d34b8a65ba09",
    "003/ufm-nc23-falls-faster-than-nc1": "d7405adc701d3bf4",
    "003/ufm-nc1-falls": "9d97e855d01bf115",
    "004/hessian-k2-outliers": "aafc9aa7a0c2092c",
    "004/class-part-k-outliers": "2d405e1d07442ff2",
    "004/cross-part-k2-outliers": "19f08a09ef3014cd",
    "004/ggn-k2-outliers": "12a07f98eebbb900",
    "004/within-part-shrinks": "edfe3ae3adfdc7b3",
    "004/class-cross-orthogonal": "1ea35e64c637c9ca",
    "004/f-top-to-one": "90a383c023ad077e",
    "004/kronecker-eigenvectors": "8a03ffcce894cc50",
    "004/weights-k-outliers": "ba7e54cf2f945737",
    "004/outliers-proportional-to-lambda": "004029b1f267f482",
    "004/outliers-match-closed-form": "fe370f8f04eef666",
    "004/every-theorem-every-configuration": "bb30586e8d988519",
    "004/closed-form-objective": "5ef9525169ee02a5",
    "004/dnc-at-the-solution": "90027a114f6df356",
    "004/hessian-k2-equal-outliers": "a0635260d921e832",
    "004/hessian-outliers-separate-then-equalise": "82f7446e24f38cce",
    "004/predicted-eigenvectors-align": "21b88b77d33c0686",
    "004/papyan-knockouts": "205f4aa328637d9c",
    "004/gradient-k-equal-coefficients": "811976c4f9abd0f9",
    "004/weights-k-equal-outliers": "88e52e68ecb00ced",
    "004/weights-equalise-before-hessian": "770c5de515a59ebb",
    "004/gradient-covariance-k-minus-1": "6e32d1937a9bb549",
    "004/gradient-second-moment-as-published": "634d662d3d4517b8",
    "004/extended-errors-spectrum": "50d125425e2fef71",
    "004/features-k-equal": "ddbe87a2070eb5fa",
    "004/every-theorem-verified": "f56ab52f47c66782",
    "004/mlp-zero-training-error": "02f5d9298b586954",
    "004/mlp-hessian-k2-outliers": "992f2641aa6575ea",
    "004/mlp-kronecker-eigenvectors-align": "17ddeca1c04f7072",
    "004/mlp-gradient-in-top-space": "c23a28d006c561d8",
    "004/mlp-papyan-knockouts": "6edc4321723f78c9",
    "004/zero-beyond-threshold": "8692bba1a42888d3",
    "004/closed-form-below-threshold": "98cb511025e0d35c",
    "004/dnc1-below-threshold": "23937e41f4b03c44",
    "004/relu-symmetric-at-widest": "866fb0de70a769af",
    "004/relu-hessian-k2-outliers": "3232e5d9b0d6a564",
    "004/relu-hessian-outliers-unequal": "e6c582699834cc39",
    "004/relu-knockouts": "e154ed22061b2634",
    "004/relu-weight-outliers-equal": "a94b098e647ce2e3",
    "004/relu-alignment-close-to-one": "7d1e3f604a023a7a",
    "004/relu-gradient-k-unequal-true-coefficients": "907b7719ca8afb0e",
    "004/relu-table3-constant-diagonal": "f8faeba06391ceb3",
    "004/relu-table4-diagonal-not-constant": "b56d924525b5c08b",
    "004/relu-constant-masks-follow-the-linear-model": "dd0a48be2fa04e0f",
}
"""sha256 (first 16 hex digits) of every reading as registered first. A registered reading is
never edited: a change is a Change entry of the register. A new claim adds its line here."""


def _paper_experiments(paper: str) -> list:
    return [e for e in all_experiments() if e.paper == paper]


@pytest.mark.parametrize("paper", sorted(REGISTERS))
def test_every_claim_reads_as_registered(paper: str) -> None:
    # Fails when a claim's bound, reading or regime rule changed without a Change entry.
    assert reading_problems(register_for(paper), _paper_experiments(paper)) == []


@pytest.mark.parametrize("paper", sorted(REGISTERS))
def test_registered_readings_are_never_edited(paper: str) -> None:
    register = register_for(paper)
    digests = {
        f"{paper}/{name}": hashlib.sha256(entry.reading.encode()).hexdigest()[:16]
        for name, entry in register.claims.items()
    }
    frozen = {k: v for k, v in FIRST_READINGS.items() if k.startswith(f"{paper}/")}
    assert digests == frozen
    assert register.chain_problems() == []


def test_a_changed_bound_without_an_entry_is_caught() -> None:
    experiment = next(e for e in all_experiments() if e.id == "dlufm-relu")
    claim = next(c for c in experiment.claims if c.name.startswith("relu-constant-masks"))
    loosened = dataclasses.replace(claim, threshold=claim.threshold.replace("0.99967", "0.999"))
    moved = dataclasses.replace(experiment, claims=[loosened])
    problems = reading_problems(register_for("004"), [moved])
    assert len(problems) == 1
    assert "dlufm-relu: claim 'relu-constant-masks-follow-the-linear-model'" in problems[0]
    assert "needs a Change in paper 004's register" in problems[0]


def test_tiers_apart_are_exactly_the_demonstrations() -> None:
    for experiment in all_experiments():
        register = register_for(experiment.paper)
        if register is None:
            continue
        for claim in experiment.claims:
            for preset in ("quick", "standard", "paper"):
                tier = register.tier(experiment.id, claim.name, preset)
                assert tier in TIERS
                assert (tier in APART) == (claim.kind == "erratum"), (experiment.id, claim.name)


def _counts(paper: str, preset: str) -> dict[str, int]:
    register = register_for(paper)
    counts: dict[str, int] = {}
    for experiment in _paper_experiments(paper):
        for claim in experiment.claims:
            tier = register.tier(experiment.id, claim.name, preset)
            counts[tier] = counts.get(tier, 0) + 1
    return counts


def test_tier_counts_per_paper_and_preset() -> None:
    assert _counts("000", "quick") == {SUBSTITUTED: 20, ERRATUM: 1}
    assert _counts("000", "paper") == {PAPER: 20, ERRATUM: 1}
    assert _counts("001", "quick") == {PAPER: 15, SUBSTITUTED: 18, ERRATUM: 5}
    assert _counts("001", "standard") == {PAPER: 24, SUBSTITUTED: 9, ERRATUM: 5}
    # issue 35 item 4: Fig. 12's two claims run the paper's protocol (paper at the paper
    # preset) beside two equal-step GD controls (substituted protocol)
    assert _counts("002", "quick") == {
        PAPER: 2, SUBSTITUTED: 35, BEYOND: 1, ERRATUM: 2, AMBIGUITY: 1
    }  # fmt: skip
    assert _counts("002", "paper") == {  # issue 35 item 5: Figs 5a, 9, 11, 7b's own networks
        PAPER: 26, SUBSTITUTED: 11, BEYOND: 1, ERRATUM: 2, AMBIGUITY: 1
    }  # fmt: skip
    assert _counts("003", "quick") == {PAPER: 6, SUBSTITUTED: 16, ERRATUM: 1}
    assert _counts("003", "standard") == {PAPER: 22, ERRATUM: 1}
    for preset in ("quick", "paper"):  # every-theorem-verified removed (issue 35)
        assert _counts("004", preset) == {PAPER: 27, BEYOND: 42, AMBIGUITY: 1}


def test_004_real_networks_are_beyond_with_premise_and_prediction() -> None:
    register = register_for("004")
    for experiment in _paper_experiments("004"):
        if not experiment.id.startswith(("curvature-", "dlufm-mlp")):
            continue
        for claim in experiment.claims:
            assert register.tier(experiment.id, claim.name, "quick") == BEYOND
            tiering = register.tiering(experiment.id, claim.name)
            assert tiering.premise and tiering.prediction.startswith(("004", "the premise"))
            # the source cites what says it; 004 only as the theorem tested
            assert not claim.source.startswith("004"), claim.source
    hessian = register.tiering("curvature-mlp-ce", "hessian-k2-outliers")
    assert hessian.prediction == "004 Thm 4.1, Fig. 3 (deep linear UFM, MSE)"
    assert register.tier("dlufm-linear", "gradient-second-moment-as-published", None) == AMBIGUITY
    assert register_for("002").tier("pcbias-init", "closed-form-glorot-paper-factor", None) == (
        AMBIGUITY
    )


def test_002_substitutions_say_what_and_why() -> None:
    register = register_for("002")
    stvgg = register.tiering("pcbias-projections", "small-p-declines").substitution
    assert stvgg.what.startswith("ReLU MLPs (and their linear twins) for st-VGG / VGG-19")
    assert stvgg.faithful == ("paper",)  # issue 35 item 5: the paper preset trains st-VGGs
    assert register.tier("pcbias-projections", "small-p-declines", "paper") == PAPER
    assert register.tier("pcbias-projections", "small-p-declines", "quick") == SUBSTITUTED
    fig6 = register.tiering("pcbias-projections", "critical-pc-vs-accessibility").substitution
    assert fig6.faithful == () and "cats and dogs" in fig6.what
    fig7b = register.tiering("pcbias-loc", "nonlinear-whitening-drops-loc-less").substitution
    assert fig7b.faithful == ("paper",) and "VGG-19" in fig7b.what
    linear = register.tiering("pcbias-convergence", "top-pcs-converge-first").substitution
    assert linear.faithful == ("paper",)
    assert register.tier("pcbias-convergence", "top-pcs-converge-first", "quick") == SUBSTITUTED
    assert register.tier("pcbias-convergence", "top-pcs-converge-first", "paper") == PAPER
    assert register.tier("pcbias-convergence", "top-pcs-converge-first", "quick-bundled") == (
        SUBSTITUTED
    )
    # the equal-step GD protocol is the labelled control's; the claim runs the paper's
    control = "def3-converges-faster-equal-step-gd"
    protocol = register.tiering("pcbias-init", control).substitution
    assert "grid-searched the rate per initialisation" in protocol.what
    assert register.tier("pcbias-init", control, "paper") == SUBSTITUTED
    assert register.tier("pcbias-init", "def3-converges-faster", "paper") == PAPER
    assert register.tier("pcbias-init", "def3-converges-faster", "quick") == SUBSTITUTED


def test_relu_history_records_the_two_post_hoc_changes() -> None:
    register = register_for("004")
    history = register.history("relu-constant-masks-follow-the-linear-model")
    assert [(h["commit"], h["kind"], h["results_seen"]) for h in history] == [
        ("9c7ac41", "bound", True)
    ]
    assert "min a(v) >= 1 − 1e-09" in history[0]["before"]
    assert "min a(v) >= 0.99967" in history[0]["after"]
    assert history[0]["renamed_from"] == "relu-inactive-runs-follow-the-linear-model"
    split = register.history("relu-alignment-close-to-one")
    assert [(h["date"], h["commit"], h["kind"]) for h in split] == [
        ("2026-11-25", "3df1920", "regime rule"),
        ("2026-11-27", "9c7ac41", "regime rule"),
    ]
    assert split[0]["before"] == "in every symmetric run, 0.9 <= min a(v) < 1 − 1e-9"
    assert "a mixed unit after W_l..W_{L−1}" in split[1]["after"]
    assert register.history("relu-knockouts") == []


def _entry(name: str, verdict: str, threshold: str, erratum: bool = False) -> dict:
    from collapselab.experiments.claims import Erratum

    claim = Claim(
        name, "statement", "source", threshold, lambda r: None,
        erratum=Erratum() if erratum else None,
    )  # fmt: skip
    return claim_entry(claim, ClaimResult(verdict))


def test_annotate_counts_tiers_and_flags_unregistered_readings() -> None:
    register = register_for("004")
    reading = register.reading("relu-alignment-close-to-one")
    document = {
        "claims": [
            _entry("relu-alignment-close-to-one", "holds", reading),
            _entry("relu-knockouts", "does not hold", "a reading nobody registered"),
            _entry("relu-constant-masks-follow-the-linear-model", "not evaluable", "x"),
        ]
    }
    out = annotate(document, "dlufm-relu", "004", "quick")
    tiers = [e["tier"] for e in out["claims"]]
    assert tiers == [PAPER, PAPER, BEYOND]
    assert [e["reading_registered"] for e in out["claims"]] == [True, False, False]
    assert out["tiers"][PAPER] == {"holds": 1, "does not hold": 1, "not evaluable": 0}
    assert out["tiers"][BEYOND] == {"holds": 0, "does not hold": 0, "not evaluable": 1}
    assert out["tiers_apart"] == [ERRATUM, AMBIGUITY]
    assert out["post_hoc"] == [
        "relu-alignment-close-to-one", "relu-constant-masks-follow-the-linear-model"
    ]  # fmt: skip
    beyond = out["claims"][2]["tier_record"]
    assert beyond["prediction"] == "004 Thm 4.1, App. A (the linear model's predictions)"
    # the demo has no register: the document comes back as it was
    assert annotate(document, "demo", "demo", "quick") == document


def test_tier_counts_read_demonstrations_by_outcome() -> None:
    entries = [
        {"tier": ERRATUM, "verdict": "does not hold", "erratum": {"outcome": "confirmed"}},
        {"tier": AMBIGUITY, "verdict": "holds", "erratum": {"outcome": "not confirmed"}},
        {"tier": SUBSTITUTED, "verdict": "holds"},
        {"tier": None, "verdict": "holds"},
    ]
    counts = tier_counts(entries)
    assert list(counts) == list(TIERS)
    assert counts[ERRATUM] == {"confirmed": 1, "not confirmed": 0, "not evaluable": 0}
    assert counts[AMBIGUITY] == {"confirmed": 0, "not confirmed": 1, "not evaluable": 0}
    assert counts[SUBSTITUTED]["holds"] == 1
    assert sum(counts[t]["holds"] for t in COUNTED) == 1


def test_tier_summary_and_list_show_each_experiments_tiers() -> None:
    from typer.testing import CliRunner

    from collapselab.cli.main import app
    from collapselab.experiments.preregistration import tier_summary

    by_id = {e.id: e for e in all_experiments()}
    assert tier_summary(by_id["fd-operations"], "quick") == (
        "5 paper, substituted, 1 erratum (the paper's own at: paper)"
    )
    assert tier_summary(by_id["fd-operations"], "paper") == "5 paper, 1 erratum"
    assert tier_summary(by_id["dlufm-relu"], "quick") == "9 paper, 1 beyond"
    assert tier_summary(by_id["pcbias-init"], "paper") == (
        "3 paper, 2 paper, substituted, 1 beyond, 1 ambiguity (the paper's own at: paper)"
    )
    assert tier_summary(by_id["demo"], "quick") == ""
    result = CliRunner().invoke(app, ["list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "[tiers at quick: 4 paper, 1 erratum]" in text  # pfc-lambda-sweep
    assert "[tiers at quick: 12 paper, 1 ambiguity]" in text  # dlufm-linear (E.1 apart)
    assert "erratum and ambiguity apart from every fraction." in text


def test_reports_show_tiers_and_history() -> None:
    from collapselab.report.html import verdict_line
    from collapselab.report.tiers import history_cell, tier_cell, tier_text, tiers_table

    register = register_for("004")
    name = "relu-constant-masks-follow-the-linear-model"
    document = annotate(
        {"summary": {"holds": 1}, "claims": [
            _entry(name, "does not hold", register.reading(name)),
            _entry("relu-knockouts", "holds", register.reading("relu-knockouts")),
        ]},
        "dlufm-relu", "004", "quick",
    )  # fmt: skip
    table = tiers_table(document["tiers"], document["tiers_apart"], document["post_hoc"])
    assert "<td>paper</td><td>1 / 1 hold (100%)</td>" in table
    assert "<td>beyond</td><td>0 / 1 hold (0%)</td>" in table
    assert 'erratum <span class="small">(apart from every fraction)</span></td><td>none' in table
    assert f"post hoc; see each claim's history): {name}." in table
    entry = document["claims"][0]
    assert tier_cell(entry).startswith('<br><span class="badge na">beyond</span>')
    assert "prediction tested: 004 Thm 4.1, App. A" in tier_cell(entry)
    history = history_cell(entry)
    assert "changed 2026-11-27 (9c7ac41, bound, results seen: post hoc)" in history
    assert "was: in every symmetric ReLU-inactive run" in history
    assert "reading not registered" not in history
    moved = {**entry, "reading_registered": False}
    assert "reading not registered" in history_cell(moved)
    assert "by tier: paper 1 / 1 hold (100%); beyond 0 / 1 hold (0%)" in verdict_line(document)
    assert tier_text("erratum", {"confirmed": 2, "not evaluable": 1}, APART) == (
        "2 / 3 confirmed, 1 not evaluable"
    )
