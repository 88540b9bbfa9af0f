"""What paper 002's ensemble members record (note 002 R15, R16): the per-example
correctness on the test split, recomputed from an independently trained or stored model,
and the evaluation on transformed copies of the test set (experiments.pcb.evaluation)
against numpy references; ``projections.sgd_member`` bit-identical to its output before
the evaluation was factored out."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapselab._threads import serial_threads
from collapselab.experiments.pcbias.evaluation import (
    eval_transform,
    set_accuracies,
    transformed_sets,
)
from collapselab.experiments.pcbias.presets import INIT, PROJECTIONS
from collapselab.experiments.pcbias.projections import MLPMember, sgd_member
from collapselab.experiments.pcbias.training import GDMember, deep_linear_member, sgd_epoch
from collapselab.models import MLP, DeepLinear

# Fig. 5's projected accuracies (fractions of the 80 test images) sgd_member returned on
# the tiny preset before the per-epoch evaluation on P-projections was factored out (commit
# 85faf02, captured with that commit's code; at the merge every returned array was also
# checked byte for byte against that commit's).
BEFORE_PROJECTED_NONLINEAR = [[0.1, 0.0625, 0.1], [0.1625, 0.0875, 0.15],
                              [0.175, 0.1875, 0.2125], [0.2, 0.2, 0.3],
                              [0.175, 0.2625, 0.325]]  # fmt: skip


def _tiny_projections(**extra):
    # not the tiny preset's eval_transforms: the test says what it evaluates
    return MLPMember.of(PROJECTIONS["tiny"], pcs=PROJECTIONS["tiny"].pcs, **extra)


def test_sgd_member_returns_the_projected_accuracies_it_returned_before_the_refactoring():
    with serial_threads():
        out = sgd_member(_tiny_projections(kind="nonlinear", member=0))
    assert out["projected"].tolist() == BEFORE_PROJECTED_NONLINEAR
    assert "eval_accuracy" not in out  # nothing configured, nothing added


def _centred_eigh(x: np.ndarray):
    mean = x.mean(0)
    values, vectors = np.linalg.eigh((x - mean).T @ (x - mean) / len(x))
    return mean, values[::-1], vectors[:, ::-1]


def test_transformed_sets_are_the_numpy_projection_and_whitening():
    """pca:P is m + U_P U_Pᵀ (x − m) and zca:eps is V (Λ + eps)^(-1/2) Vᵀ (x − m), both
    fitted on the training rows (numpy eigh); the accuracy of a fixed linear model on each
    copy equals an explicit count."""
    rng = np.random.default_rng(0)
    fit = rng.normal(size=(200, 6)) * np.arange(1, 7) + 0.5
    x, y = rng.normal(size=(30, 6)) * 3, rng.integers(0, 3, 30)
    mean, values, vectors = _centred_eigh(fit)
    top = vectors[:, :2]
    projected = mean + (x - mean) @ top @ top.T
    whitened = (x - mean) @ vectors / np.sqrt(values + 0.01) @ vectors.T
    sets = transformed_sets(["pca:2", "zca:0.01"], torch.from_numpy(fit),
                            torch.from_numpy(x), torch.from_numpy(y))  # fmt: skip
    assert [s.name for s in sets] == ["pca:2", "zca:0.01"]
    np.testing.assert_allclose(sets[0].x.numpy(), projected, atol=1e-12)
    np.testing.assert_allclose(sets[1].x.numpy(), whitened, atol=1e-12)
    w = rng.normal(size=(3, 6))
    expected = []
    for copy in (projected, whitened):
        hits = sum(int(np.argmax(w @ copy[i]) == y[i]) for i in range(len(y)))
        expected.append(hits / len(y))
    got = set_accuracies(lambda t: t @ torch.from_numpy(w).T, sets)
    assert got == pytest.approx(expected, abs=1e-15)
    assert eval_transform("zca").eps == 1e-5


@pytest.mark.parametrize("name", ["pca", "pca:0", "pca:two", "zca:-1", "whiten", 7])
def test_a_bad_transform_name_is_refused_with_what_was_expected(name):
    with pytest.raises(ValueError, match=r"eval_transforms entry .* expected 'pca:<P>'"):
        eval_transform(name)


def _logits(net: MLP, x: np.ndarray) -> np.ndarray:
    """The MLP's forward pass in float64 numpy from its parameters (ReLU hidden layers)."""
    h = x
    for layer in net.layers:
        lin = layer.linear
        h = np.maximum(h @ lin.weight.detach().double().numpy().T
                       + lin.bias.detach().double().numpy(), 0.0)  # fmt: skip
    head = net.classifier
    return h @ head.weight.detach().double().numpy().T + head.bias.detach().double().numpy()


def _agree_off_ties(logits: np.ndarray, y: np.ndarray, recorded: np.ndarray) -> int:
    """Assert ``recorded`` equals ``argmax logits == y`` wherever the top two logits differ
    by more than 1e-4 (float32 training, float64 recomputation); returns how many do."""
    top2 = np.sort(logits, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-4
    np.testing.assert_array_equal(recorded[clear], (logits.argmax(1) == y)[clear])
    return int(clear.sum())


def test_sgd_member_test_correctness_and_whitened_accuracy_of_a_retrained_network():
    """The tiny preset's ReLU MLP is trained again here (same seeds, the library's SGD
    epoch); after every epoch its float64 numpy forward pass gives which test images it
    classifies correctly (equal to the recorded ``test_correct``) and its accuracy on the
    numpy-whitened test set (the recorded ``zca`` column); the ``pca:8`` column equals the
    ``P = 8`` column of ``projected``."""
    config = _tiny_projections(kind="nonlinear", member=1,
                               eval_transforms=("pca:8", "zca"))  # fmt: skip
    with serial_threads():
        out = sgd_member(config)
    data = config.inputs()
    x = torch.from_numpy(data.x).float()
    torch.manual_seed(1)  # 1000 * seed + member
    net = MLP(x.shape[1], 10, width=32, depth=3, bias=True, activation="relu")
    optimiser = torch.optim.SGD(net.parameters(), lr=config.lr)
    order = torch.Generator().manual_seed(1)
    x_test = data.x_test.astype(np.float32).astype(np.float64)
    mean, values, vectors = _centred_eigh(data.x.astype(np.float32).astype(np.float64))
    keep = values > 1e-9 * values[0]  # the library projects out null directions
    v = vectors[:, keep]
    whitened = ((x_test - mean) @ v / np.sqrt(values[keep] + 1e-5) @ v.T).astype(np.float32)
    checked = 0
    assert out["test_correct"].shape == (config.epochs + 1, len(data.y_test))
    for epoch in range(config.epochs + 1):
        if epoch:
            sgd_epoch(net, x, torch.from_numpy(data.y).long(), optimiser, 100, order)
        checked += _agree_off_ties(_logits(net, x_test), data.y_test, out["test_correct"][epoch])
        hits = _logits(net, whitened.astype(np.float64)).argmax(1) == data.y_test
        assert out["eval_accuracy"][epoch, 1] == pytest.approx(hits.mean(), abs=1.01 / len(hits))
    assert checked >= 0.95 * out["test_correct"].size
    np.testing.assert_array_equal(out["test_correct"].mean(1), out["test_accuracy"])
    np.testing.assert_array_equal(out["eval_accuracy"][:, 0], out["projected"][:, 1])


def test_deep_linear_member_test_correctness_from_an_input_space_gd_loop():
    """The tiny ``pcbias-init`` net (Def. 3, one hidden layer of 256) is trained again by
    full-batch GD on ½‖W X − Y‖² in input coordinates (numpy, float64, the member's μ); at
    every checkpoint an explicit loop over the test images gives the recorded
    ``test_correct``, and the stored compact matrix rotated back gives the same network."""
    config = GDMember.of(INIT["tiny"], init="def3", member=1, record_correct=True,
                         eval_transforms=("pca:5",))  # fmt: skip
    out = deep_linear_member(config)
    data = config.inputs()
    torch.manual_seed(1)
    ws = [layer.weight.detach().double().numpy() for layer in
          DeepLinear([64, 256, 10], init="def3").layers]  # fmt: skip
    targets = np.eye(10)[data.y]
    step = 0
    for s, mark in enumerate(out["steps"]):
        while step < mark:
            err = (ws[1] @ ws[0] @ data.x.T).T - targets  # (n, K)
            grads = [ws[1].T @ err.T @ data.x, err.T @ data.x @ ws[0].T]
            ws = [w - out["mu"] * g for w, g in zip(ws, grads, strict=True)]
            step += 1
        w = ws[1] @ ws[0]
        expected = [int(np.argmax(w @ data.x_test[i])) == data.y_test[i]
                    for i in range(len(data.y_test))]  # fmt: skip
        np.testing.assert_array_equal(out["test_correct"][s], expected)
        assert out["test_accuracy"][s] == pytest.approx(np.mean(expected), abs=1e-15)
    assert out["test_correct"].shape == (len(out["steps"]), len(data.y_test))
    assert out["eval_accuracy"].shape == (len(out["steps"]), 1)
    assert 0.0 <= out["eval_accuracy"].min() and out["eval_accuracy"].max() <= 1.0


def test_a_diverging_deep_linear_member_says_so():
    """At a rate far beyond the stable one the layers overflow to NaN within a few GD steps:
    the member stops with the divergence and the step, not with compact_matrix's input
    check on the non-finite layer (which is what it raised before)."""
    config = GDMember.of(INIT["tiny"], lr=100.0, init="glorot_uniform", member=1)
    with pytest.raises(FloatingPointError, match=r"diverged by step \d+ \(lr too large\)"):
        deep_linear_member(config)


def test_sgd_epoch_stops_on_parameters_its_last_step_left_non_finite():
    """Both batch losses are finite, but the epoch's last step leaves a NaN weight: the
    epoch stops with the cause instead of handing a NaN network to the measurements."""
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 3)
    x, y = torch.randn(10, 4), torch.arange(10) % 3
    optimiser = torch.optim.SGD(net.parameters(), lr=0.1)
    steps = []

    def poison_second_step(opt, args, kwargs) -> None:
        steps.append(1)
        if len(steps) == 2:
            with torch.no_grad():
                net.weight[0, 0] = float("nan")

    optimiser.register_step_post_hook(poison_second_step)
    order = torch.Generator().manual_seed(0)
    with pytest.raises(FloatingPointError, match="non-finite in the epoch's last step"):
        sgd_epoch(net, x, y, optimiser, 5, order)
    assert len(steps) == 2
