"""The learning_order family through the Monitor, and accessibility from the stored runs,
against explicit per-example loops in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from collapselab.data import LabeledData
from collapselab.families import accessibility_from_runs, array_name, correctness_from_run
from collapselab.families.builtin import LearningOrder
from collapselab.families.catalogue import catalogue
from collapselab.families.learning_order import example_correctness
from collapselab.store import Run
from collapselab.track import Monitor

Q, K, N, N_TEST = 5, 3, 30, 12


def _data(seed: int) -> tuple[LabeledData, LabeledData]:
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(N + N_TEST) % K
    x = torch.randn(N + N_TEST, Q, generator=g) + 1.5 * torch.randn(K, Q, generator=g)[y]
    x = x.double()
    return LabeledData(x[:N], y[:N], K), LabeledData(x[N:], y[N:], K)


def _loop_correct(model: torch.nn.Module, data: LabeledData) -> np.ndarray:
    """One example at a time, the argmax compared with the label by hand."""
    out = []
    with torch.no_grad():
        for i in range(len(data.y)):
            logits = model(data.x[i : i + 1])[0].tolist()
            out.append(int(max(range(K), key=lambda c: logits[c]) == int(data.y[i])))
    return np.array(out)


def _tracked_run(tmp_path, seed: int, steps: int = 4) -> tuple[Run, list[np.ndarray]]:
    """A linear classifier trained by SGD, measured after every step; the loop reference of
    every measurement's training-set correctness."""
    torch.manual_seed(seed)
    train, test = _data(0)
    model = torch.nn.Sequential(torch.nn.Linear(Q, 8), torch.nn.ReLU(), torch.nn.Linear(8, K))
    model = model.double()
    run = Run.create(tmp_path, "learning-order-test", seed=seed)
    monitor = Monitor(model, train, test, families=["learning_order"], layers=["1"],
                      schedule=None, run=run, n_classes=K)  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    reference = []
    for step in range(steps):
        got = monitor.measure_now(epoch=step, step=step)
        loop = _loop_correct(model, train)
        reference.append(loop)
        arrays = monitor.last_arrays["learning_order"]
        np.testing.assert_array_equal(arrays["correct_train"], loop)
        np.testing.assert_array_equal(arrays["correct_test"], _loop_correct(model, test))
        np.testing.assert_array_equal(arrays["labels_train"], train.y.numpy())
        assert got["train"][""]["correct_fraction"] == pytest.approx(loop.mean(), abs=1e-15)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(train.x), train.y).backward()
        opt.step()
    run.flush()
    return run, reference


def test_the_family_is_in_the_catalogue():
    assert ("learning_order", "correct_fraction") in [(f, k.name) for f, k in catalogue()]
    assert LearningOrder().requested == ("correct_fraction",)


def test_monitor_stores_every_examples_correctness_and_accessibility_reads_it(tmp_path):
    run_a, ref_a = _tracked_run(tmp_path, 1)
    run_b, ref_b = _tracked_run(tmp_path, 2)
    steps, correct, _ = correctness_from_run(run_a.path)
    np.testing.assert_array_equal(steps, np.arange(4))
    np.testing.assert_array_equal(correct, np.stack(ref_a))
    assert not np.all(correct == correct[0])  # training changed which examples are right
    acc = accessibility_from_runs([run_a, run_b.path])
    loop = np.array([np.mean([r[e][i] for r in (ref_a, ref_b) for e in range(4)])
                     for i in range(N)])  # fmt: skip
    np.testing.assert_allclose(acc, loop, rtol=0, atol=1e-15)
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    weighted = accessibility_from_runs([run_a, run_b], weights=weights)
    loop_w = sum(w * (ref_a[e] + ref_b[e]) for e, w in enumerate(weights)) / (2 * weights.sum())
    np.testing.assert_allclose(weighted, loop_w, rtol=0, atol=1e-15)
    test_acc = accessibility_from_runs([run_a], split="test")
    assert test_acc.shape == (N_TEST,)


def test_a_shuffled_order_between_measurements_is_a_clear_error(tmp_path):
    train, _ = _data(0)
    model = torch.nn.Linear(Q, K).double()
    run = Run.create(tmp_path, "learning-order-shuffled")
    family = LearningOrder()
    for step, seed in enumerate((0, 1)):
        loader = DataLoader(TensorDataset(train.x, train.y), batch_size=7, shuffle=True,
                            generator=torch.Generator().manual_seed(seed))  # fmt: skip
        correct, labels = example_correctness(model, loader)
        run.save_array(array_name("learning_order", step), step=step, correct_train=correct,
                       labels_train=labels)  # fmt: skip
    with pytest.raises(ValueError, match=r"different order at step 1.*shuffle=False"):
        correctness_from_run(run)
    assert family.take_arrays() == {}


def test_bad_input_is_named(tmp_path):
    run = Run.create(tmp_path, "learning-order-empty")
    with pytest.raises(ValueError, match="no learning_order measurement of split 'train'"):
        correctness_from_run(run)
    with pytest.raises(ValueError, match="non-empty list of runs"):
        accessibility_from_runs([])
    with pytest.raises(ValueError, match="non-empty list of runs"):
        accessibility_from_runs(run)
    x, y = torch.randn(4, Q), torch.arange(4) % K
    with pytest.raises(ValueError, match=r"\(batch, K\) logits for a batch of 4, got \(4, 3, 1\)"):
        example_correctness(lambda t: torch.zeros(t.shape[0], K, 1), [(x, y)])
    with pytest.raises(ValueError, match="yielded no batch"):
        example_correctness(torch.nn.Linear(Q, K), [])


def test_runs_of_an_ensemble_must_match(tmp_path):
    run_a, _ = _tracked_run(tmp_path, 1, steps=3)
    run_b, _ = _tracked_run(tmp_path, 2, steps=2)
    with pytest.raises(ValueError, match="same steps on the same examples"):
        accessibility_from_runs([run_a, run_b])
