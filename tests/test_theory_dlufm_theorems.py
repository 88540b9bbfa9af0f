"""Paper 004's theorems (3.1, 4.1-4.4, E.1-E.3) held against exact and solved optima on the
note's configurations and on random ones; Theorem E.1 published vs corrected."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collapselab.theory.dlufm import (
    DeepLinearUFM,
    DeepReLUUFM,
    closed_form,
    exact_optimum,
    gradient_descent,
)
from collapselab.theory.dlufm_layerwise import descending_eigh, gradient_covariance
from collapselab.theory.dlufm_theorems import (
    predict_dnc,
    predict_extended_errors,
    predict_features,
    predict_gradient,
    predict_gradient_covariance,
    predict_hessian,
    predict_papyan,
    predict_weights,
    verify_dlufm,
)

from .test_theory_dlufm import CONFIG_A, CONFIG_B, RANDOM_CONFIGS

THEOREMS = {"optimum", "3.1", "4.1", "4.2", "4.3", "4.4", "E.1", "E.2", "E.3"}


@pytest.mark.parametrize("config", [CONFIG_A, CONFIG_B, *RANDOM_CONFIGS])
@pytest.mark.parametrize("seed", [0, 7])
def test_every_theorem_holds_at_an_exact_optimum(config, seed):
    model = DeepLinearUFM(**config)
    check = verify_dlufm(model, seed=seed)
    assert check.passed(1e-9), [c for c in check.failures(1e-9) if c.variant != "published"]
    assert set(check.worst()) == THEOREMS | {"E.1 published"}
    assert {c.layer for c in check.checks if c.theorem == "4.1"} == set(
        range(1, model.n_layers + 1)
    )


def test_every_theorem_holds_at_the_gradient_descent_solution_of_configuration_a():
    """The paper's procedure (GD from a normal start) reaches a point where every
    prediction holds to 1e-6 (note §5.2: converged within a few thousand steps)."""
    model = DeepLinearUFM(**CONFIG_A)
    traj = gradient_descent(model, 0.5, 8000, w_scale=0.5, h_scale=0.5, checkpoints=2)
    check = verify_dlufm(model, traj.final, layers=[3])
    assert check.passed(1e-6), [c for c in check.failures(1e-6) if c.variant != "published"]
    worst = check.worst()
    assert worst["4.1"] < 1e-8 and worst["optimum"] < 1e-8


def test_theorem_e1_published_reading_fails_and_the_corrected_one_holds():
    model = DeepLinearUFM(**CONFIG_B)
    point = exact_optimum(model, seed=3)
    k = model.n_classes
    for layer in range(1, model.n_layers + 1):
        moment = descending_eigh(gradient_covariance(model, point, layer, centred=False))[0]
        cov = descending_eigh(gradient_covariance(model, point, layer))[0]
        published = predict_gradient_covariance(model, layer, centred=False, variant="published")
        corrected = predict_gradient_covariance(model, layer, centred=False, variant="corrected")
        assert published.rank == k - 1 and corrected.rank == k
        # the second moment has K equal non-zero eigenvalues: the K-th is not zero
        assert np.allclose(moment[:k], corrected.eigenvalues, rtol=1e-10)
        assert moment[k - 1] > 1e6 * abs(moment[k])
        # the covariance has K − 1; both variants agree on it
        for variant in ("published", "corrected"):
            pred = predict_gradient_covariance(model, layer, variant=variant)
            assert pred.rank == k - 1 and np.allclose(cov[: k - 1], pred.eigenvalues, rtol=1e-10)
        assert abs(cov[k - 1]) < 1e-10 * cov[0]
    check = verify_dlufm(model, point)
    published = [c for c in check.checks if c.variant == "published"]
    assert published and all(c.error == 1.0 and c.measured == k for c in published)


def test_predictions_have_the_theorems_values():
    model = DeepLinearUFM(**CONFIG_A)
    form = closed_form(model)
    k, t = 3, form.t_star
    h = predict_hessian(model, 3)
    assert h.rank == 9 and np.allclose(h.eigenvalues, 0.2022600, rtol=1e-6)
    parts = predict_papyan(model, 3)
    assert (parts["class"].rank, parts["cross"].rank, parts["within"].rank) == (3, 6, 0)
    g = predict_gradient(model, 3)
    assert g.coefficient == pytest.approx(-0.0129330, rel=1e-4) and g.n_nonzero == 3
    assert np.allclose(g.cosines.reshape(3, 3), -np.eye(3) / math.sqrt(3))
    w = predict_weights(model, 2)
    assert w.rank == 3 and np.allclose(w.eigenvalues, 1.569487, rtol=1e-6)
    cov = predict_gradient_covariance(model, 3)
    assert cov.rank == 2 and np.allclose(cov.eigenvalues, 1.17712e-4, rtol=1e-5)
    errors = predict_extended_errors(model, 3)
    assert np.allclose(errors.eigenvalues, [3.064162, 3.064162, 9.134e-4], rtol=1e-4)
    assert errors.eigenvalues[0] / errors.eigenvalues[-1] == pytest.approx(
        (1 + t * t) / (1 - t) ** 2
    )
    feats = [predict_features(model, layer).eigenvalues[0] for layer in range(1, 6)]
    assert np.allclose(feats[:4], [1.569487, 2.46329, 3.866103, 6.067799], rtol=1e-5)
    assert feats[4] == pytest.approx(model.n_per_class * t * t)
    dnc = predict_dnc(model)
    assert np.allclose(dnc["mean_norm_sq"], form.mean_norm_sq) and np.all(dnc["dnc1"] == 0)
    assert dnc["dnc3_scale"][-1] != dnc["dnc3_scale"][-1]  # NaN at the outputs
    assert k == model.n_classes


def test_predictions_refuse_the_relu_model_and_configurations_beyond_the_threshold():
    relu = DeepReLUUFM(3, 4, 5, 1e-3, 1e-3, n_layers=3)
    with pytest.raises(ValueError, match="deep linear UFM"):
        predict_hessian(relu, 1)
    heavy = DeepLinearUFM(3, 10, 6, 0.2, 0.2, n_layers=3)
    with pytest.raises(ValueError, match=r"condition \(2\), which fails: β = "):
        predict_hessian(heavy, 1)
    with pytest.raises(ValueError, match=r"layer must be an integer in \[1, 3\], got 4"):
        predict_hessian(DeepLinearUFM(3, 4, 5, 1e-3, 1e-3, n_layers=3), 4)
