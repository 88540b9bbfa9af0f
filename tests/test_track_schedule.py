"""Measurement schedules: paper 003's epoch list, its scaling, iteration periods."""

from __future__ import annotations

import pytest

from collapselab.track import PAPER_003_EPOCHS, Schedule, log_spaced_epochs


def test_paper_list_is_exact_for_350_epochs():
    expected = [*range(1, 15), 16, 17, 19, 20, 22, 24, 27, 29, 32, 35, 38, 42, 45, 50, 54, 59]
    expected += [65, 71, 77, 85, 92, 101, 110, 121, 132, 144, 158, 172, 188, 206, 225, 245]
    expected += [268, 293, 320, 350]
    assert list(PAPER_003_EPOCHS) == expected and len(expected) == 50
    assert log_spaced_epochs(350) == expected


@pytest.mark.parametrize("total", [1, 2, 7, 14, 15, 30, 100, 175, 351, 700, 1000])
def test_scaled_list_properties(total):
    epochs = log_spaced_epochs(total)
    assert epochs == sorted(set(epochs))
    assert epochs[0] == 1 and epochs[-1] == total
    assert all(1 <= e <= total for e in epochs)
    assert len(epochs) <= 51
    # Every scaled paper epoch, rounded half up, is present.
    for e in PAPER_003_EPOCHS:
        assert max(1, int(e * total / 350 + 0.5)) in epochs
    if total <= 14:
        assert epochs == list(range(1, total + 1))


def test_scaled_list_examples():
    assert log_spaced_epochs(700)[:6] == [1, 2, 4, 6, 8, 10]
    # e / 10 rounded half up, worked out by hand from the paper list.
    assert log_spaced_epochs(35) == [*range(1, 15), 16, 17, 19, 21, 23, 25, 27, 29, 32, 35]


def test_schedule_build_variants():
    s = Schedule.build("log", total_epochs=350)
    assert s.at_epoch(0) and s.at_epoch(14) and not s.at_epoch(15) and s.at_epoch(350)
    assert not s.at_iteration(10)
    s = Schedule.build("all", every_iterations=5, initial=False)
    assert not s.at_epoch(0) and s.at_epoch(1) and s.at_epoch(12345)
    assert s.at_iteration(10) and not s.at_iteration(11) and not s.at_iteration(0)
    s = Schedule.build([3, 1], initial=True)
    assert [e for e in range(5) if s.at_epoch(e)] == [0, 1, 3]
    s = Schedule.build(None, every_iterations=1)
    assert not s.at_epoch(3) and s.at_iteration(1)


def test_schedule_errors():
    with pytest.raises(ValueError, match="pass epochs="):
        Schedule.build("log")
    with pytest.raises(ValueError, match="schedule must be"):
        Schedule.build("sometimes")
    with pytest.raises(ValueError, match="each scheduled epoch"):
        Schedule.build([1, 0])
    with pytest.raises(ValueError, match="every_iterations"):
        Schedule.build(None, every_iterations=0)
    with pytest.raises(ValueError, match="total_epochs"):
        log_spaced_epochs(0)
