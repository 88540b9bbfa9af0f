"""reproduce --executor ray against a local two-CPU Ray instance (one start for the module):
every experiment a Ray task, its sweeps nested Ray tasks; the same runs as the serial
reproduction; a worker killed mid-run loses only its unfinished part, and the run resumes
(on the next reproduction, or at once when retries allow) to the uninterrupted result."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from collapselab.experiments import Final, get_experiment, reproduce, value_above
from collapselab.store import Run
from tests import _fanout_experiments as fan
from tests._experiments import experiment, registered

ray = pytest.importorskip("ray", reason="the ray extra is not installed (CI installs it)")

PAPER = "t-fan-paper"  # papers no real package uses
KILL_PAPER = "t-fan-kill-paper"  # its one experiment is killed


@pytest.fixture(scope="module")
def experiments() -> Iterator[None]:
    claim = value_above("big", "trace is large", "test", Final("trace", "train"), 10.0)
    members = experiment("t-fan-members", fan.members_then_wait, paper=PAPER, claims=[claim])
    toy = get_experiment("pfc-toy")  # a built-in, under a paper of its own
    builtin = dataclasses.replace(toy, id="t-fan-pfc-toy", paper=PAPER)
    killed = dataclasses.replace(members, id="t-fan-kill", paper=KILL_PAPER)
    with registered(members, builtin, killed):
        yield


def _table(root: Path, run_id: str) -> pd.DataFrame:
    frame = Run.open(root / run_id).metrics()
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def _verdicts(root: Path, run_id: str) -> list[tuple[str, str, str]]:
    claims = json.loads((root / run_id / "claims.json").read_text())["claims"]
    return [(c["name"], c["verdict"], c.get("detail", "")) for c in claims]


def _computed(root: Path) -> list[int]:
    return sorted(int(line) for line in (root / fan.COMPUTED).read_text().split())


class _Killer(threading.Thread):
    """Kills (SIGKILL) the process that writes its id to ``root/killed``, once it does;
    ``killed``: that process id, once killed."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        self.root, self.killed = root, 0
        self.start()

    def run(self) -> None:
        deadline = time.monotonic() + 90
        while not (self.root / fan.KILLED).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)  # the id is written
        pid = int((self.root / fan.KILLED).read_text())
        os.kill(pid, signal.SIGKILL)
        self.killed = pid

    def done(self) -> int:
        self.join(timeout=5)
        return self.killed


@pytest.fixture(scope="module")
def serial_root(tmp_path_factory: pytest.TempPathFactory, experiments: None) -> Path:
    root = tmp_path_factory.mktemp("serial")
    for paper in (PAPER, KILL_PAPER):
        result = reproduce(paper, root=root, executor="serial")
        assert result.ok, [o.error for o in result.outcomes]
    return root


def test_ray_runs_the_same_as_serial(local_ray: None, serial_root: Path, tmp_path: Path) -> None:
    done: list[str] = []
    result = reproduce(
        PAPER, root=tmp_path, executor="ray", on_done=lambda o: done.append(o.outcome)
    )
    assert result.ok and done == ["completed", "completed"]
    assert [o.experiment for o in result.outcomes] == ["t-fan-members", "t-fan-pfc-toy"]
    for outcome in result.outcomes:
        pd.testing.assert_frame_equal(_table(tmp_path, outcome.run_id),
                                      _table(serial_root, outcome.run_id))  # fmt: skip
        assert _verdicts(tmp_path, outcome.run_id) == _verdicts(serial_root, outcome.run_id)
    assert ray.is_initialized()  # a running instance is used, not shut down


def test_a_killed_worker_loses_only_its_unfinished_part(
    local_ray: None, serial_root: Path, tmp_path: Path
) -> None:
    # Killed between its two sweeps, with no retry: reported failed, the first sweep kept.
    (tmp_path / fan.KILL_REQUEST).touch()
    killer = _Killer(tmp_path)
    first = reproduce(KILL_PAPER, root=tmp_path, executor="ray", retries=0)
    assert killer.done()
    (lost,) = first.outcomes
    assert lost.outcome == "failed"
    assert "the Ray worker running t-fan-kill died (once)" in lost.error
    assert "run the same command again to resume it" in lost.error
    assert Run.open(tmp_path / lost.run_id).status == "running"  # left by the dead process
    assert _computed(tmp_path) == [0, 1, 2]  # the first sweep finished before the kill

    # Run again, and killed again at the same place: resubmitted at once (one retry), it
    # resumes; the first sweep's members are loaded, not computed again.
    (tmp_path / fan.KILLED).unlink()
    killer = _Killer(tmp_path)
    again = reproduce(KILL_PAPER, root=tmp_path, executor="ray")
    assert killer.done()
    (resumed,) = again.outcomes
    assert resumed.outcome == "completed" and resumed.resumed
    assert _computed(tmp_path) == [0, 1, 2, 3, 4]
    pd.testing.assert_frame_equal(_table(tmp_path, lost.run_id), _table(serial_root, lost.run_id))
    assert _verdicts(tmp_path, lost.run_id) == _verdicts(serial_root, lost.run_id)


def test_a_device_ray_cannot_give_is_refused(local_ray: None, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"device 'cuda:1'.*give cuda"):
        reproduce(KILL_PAPER, root=tmp_path, executor="ray", device="cuda:1")
    with pytest.raises(ValueError, match=r"--device cuda: the Ray cluster has no GPU"):
        reproduce(KILL_PAPER, root=tmp_path, executor="ray", device="cuda")
