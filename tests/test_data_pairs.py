"""The most-confused class pair of a least-squares classifier (collapselab.data.pairs), against
numpy's SVD least squares and a brute-force count in float64."""

import numpy as np
import pytest

from collapselab.data.pairs import least_squares_confusion, most_confused_pair


def _classes(n_per_class, means, seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate([m + rng.standard_normal((n_per_class, len(m))) for m in means])
    y = np.repeat(np.arange(len(means)), n_per_class)
    return x, y


def test_confusion_is_the_least_squares_classifiers_on_its_training_rows():
    """C from the normal equations (blocked, eigh pseudo-inverse) equals the counts of
    numpy's lstsq solution of X W = Y, tallied one example at a time."""
    means = np.array([[3.0, 0, 0, 1], [0, 3, 0, 1], [0, 2.5, 0.5, 1], [0, 0, 3, 1]])
    x, y = _classes(200, means)
    w, *_ = np.linalg.lstsq(x, np.eye(4)[y], rcond=None)  # (D, K)
    reference = np.zeros((4, 4), dtype=np.int64)
    for row, label in zip(x @ w, y, strict=True):
        reference[label, int(np.argmax(row))] += 1
    got = least_squares_confusion(x, y, 4)
    np.testing.assert_array_equal(got, reference)
    assert got.sum() == 800 and 0 < got[1, 2] + got[2, 1] < 400  # classes 1, 2 overlap


def test_a_constant_feature_leaves_the_classifier_unchanged():
    """A zero column (a constant border pixel) adds a zero eigenvalue, which the
    pseudo-inverse drops: the counts are those without it."""
    x, y = _classes(100, np.array([[2.0, 0, 1], [0, 2, 1], [1, 1.5, 1]]), seed=1)
    padded = np.concatenate([x, np.zeros((len(x), 1))], axis=1)
    np.testing.assert_array_equal(least_squares_confusion(padded, y, 3),
                                  least_squares_confusion(x, y, 3))  # fmt: skip


def test_the_most_confused_pair_sums_both_directions_and_breaks_ties_low():
    c = np.array([[50, 1, 9], [2, 40, 3], [0, 8, 45]])
    # symmetric sums: (0,1) 3, (0,2) 9, (1,2) 11
    assert most_confused_pair(c) == (1, 2)
    tied = np.array([[9, 4, 0, 1], [1, 9, 0, 0], [5, 0, 9, 0], [0, 0, 5, 9]])
    # (0,1) 5, (0,2) 5, (2,3) 5: the first in row-major order
    assert most_confused_pair(tied) == (0, 1)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="one label per row"):
        least_squares_confusion(np.zeros((4, 2)), np.zeros(3, dtype=int), 2)
    with pytest.raises(ValueError, match="labels must lie"):
        least_squares_confusion(np.ones((2, 2)), np.array([0, 2]), 2)
    with pytest.raises(ValueError, match="square"):
        most_confused_pair(np.zeros((2, 3)))


def test_the_fashion_mnist_pair_of_the_presets_is_the_rules(fashion_mnist_dir):
    """The pair paper 002's standard preset trains as its binary problem is what the rule
    gives on the Debian package's Fashion-MNIST training split (pullover and coat)."""
    from collapselab.data import dataset_confused_pair
    from collapselab.experiments.pcbias.presets import FASHION_PAIR

    pair, confusion = dataset_confused_pair("fashion_mnist")
    assert pair == FASHION_PAIR == (2, 4)
    assert confusion.sum() == 60000 and confusion[2, 4] + confusion[4, 2] == 1427
