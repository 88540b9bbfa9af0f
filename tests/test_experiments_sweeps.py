"""run_sweep: identical results across executors, resume, retries of dead workers, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from collapselab.experiments.sweeps import (
    LocalExecutor,
    Outcome,
    SerialExecutor,
    SweepError,
    attempt,
    config_hash,
    run_sweep,
)
from tests import _sweep_tasks as tasks

CONFIGS = [{"seed": seed, "lr": lr} for seed in (0, 1) for lr in (0.05, 0.2)]


def _same(a: dict, b: dict) -> None:
    """Bit-identical results: same keys, types, floats and arrays."""
    assert list(a) == list(b)
    for key in a:
        assert type(a[key]) is type(b[key]), key
        if isinstance(a[key], np.ndarray):
            assert a[key].dtype == b[key].dtype
            np.testing.assert_array_equal(a[key], b[key])
        else:
            assert a[key] == b[key], key


@pytest.fixture(scope="module")
def serial_results() -> list[dict]:
    return run_sweep(tasks.train_linear, CONFIGS, executor="serial").results


def test_serial_results_follow_the_configs(serial_results: list[dict]) -> None:
    # Each member equals the task called directly on its config (threads set to 1 by the sweep).
    for config, result in zip(CONFIGS, serial_results, strict=True):
        direct = tasks.train_linear(config)
        assert result["loss"] == direct["loss"]
        np.testing.assert_array_equal(result["weights"], direct["weights"])
        assert result["name"] == f"lr={config['lr']}"
        assert result["threads"] == 1
    losses = [r["loss"] for r in serial_results]
    assert len(set(losses)) == len(losses)  # different configs, different members


def test_local_pool_gives_bit_identical_results(serial_results: list[dict], tmp_path: Path) -> None:
    result = run_sweep(tasks.train_linear, CONFIGS, executor="local", workers=2, threads=1)
    assert result.executor == "local"
    assert result.retries == [] and result.attempts == [1, 1, 1, 1]
    for a, b in zip(serial_results, result.results, strict=True):
        _same(a, b)


def test_global_generators_are_seeded_from_the_config(serial_results: list[dict]) -> None:
    # "noise" draws from torch's global generator: the same config gives the same draw in a
    # fresh sweep, whatever ran before in this process.
    import torch

    torch.rand(17)
    again = run_sweep(tasks.train_linear, CONFIGS[::-1], executor="serial").results[::-1]
    assert [r["noise"] for r in again] == [r["noise"] for r in serial_results]


def test_threads_are_set_inside_members_and_restored() -> None:
    import torch

    before = torch.get_num_threads()
    result = run_sweep(tasks.train_linear, CONFIGS[:1], executor="serial", threads=2)
    assert result.results[0]["threads"] == 2
    assert torch.get_num_threads() == before


def test_store_resumes_finished_members_and_reruns_changed_ones(tmp_path: Path) -> None:
    log = tmp_path / "calls.txt"
    configs = [{"index": i, "log": str(log)} for i in range(3)]
    first = run_sweep(tasks.count_calls, configs, executor="serial", store=tmp_path / "m")
    assert log.read_text().split() == ["0", "1", "2"]
    assert first.loaded == []
    stored = sorted(p.name for p in (tmp_path / "m").iterdir())
    assert stored == [f"member-{i:05d}-{config_hash(c)}.json" for i, c in enumerate(configs)]

    again = run_sweep(tasks.count_calls, configs, executor="serial", store=tmp_path / "m")
    assert log.read_text().split() == ["0", "1", "2"]  # nothing recomputed
    assert again.loaded == [0, 1, 2]
    assert again.results == first.results == [{"index": i, "square": i * i} for i in range(3)]

    changed = [*configs[:2], {"index": 7, "log": str(log)}]
    third = run_sweep(tasks.count_calls, changed, executor="serial", store=tmp_path / "m")
    assert log.read_text().split() == ["0", "1", "2", "7"]  # only the changed member ran
    assert third.loaded == [0, 1]
    assert third.results[2] == {"index": 7, "square": 49}
    # the stale file of index 2 is gone; the new one is there
    assert sorted(p.name for p in (tmp_path / "m").glob("member-00002-*")) == [
        f"member-00002-{config_hash(changed[2])}.json"
    ]


def test_stored_arrays_and_floats_load_back_identically(tmp_path: Path) -> None:
    store = tmp_path / "m"
    computed = run_sweep(tasks.train_linear, CONFIGS[:2], executor="serial", store=store)
    loaded = run_sweep(tasks.train_linear, CONFIGS[:2], executor="serial", store=store)
    assert loaded.loaded == [0, 1]
    for a, b in zip(computed.results, loaded.results, strict=True):
        _same(a, b)
    record = json.loads(next(store.glob("member-00000-*.json")).read_text())
    assert record["config"] == CONFIGS[0] and record["arrays"] == ["weights"]
    float32 = run_sweep(tasks.array_of, [{"n": 3}], executor="serial", store=store / "f")
    again = run_sweep(tasks.array_of, [{"n": 3}], executor="serial", store=store / "f")
    assert again.results[0]["values"].dtype == np.float32
    _same(float32.results[0], again.results[0])


def test_a_worker_killed_with_os_exit_is_retried_once_and_reported(tmp_path: Path) -> None:
    notes: list[str] = []

    class Display:
        def task(self, description: str, total: int, unit: str = ""):
            import contextlib

            return contextlib.nullcontext(lambda done, total: None)

        def note(self, text: str) -> None:
            notes.append(text)

    configs = [{"index": i, "crash": 1, "marker": str(tmp_path / "crashed")} for i in range(3)]
    result = run_sweep(
        tasks.crash_once, configs, workers=2, store=tmp_path / "m", progress=Display()
    )
    assert result.results == [{"index": 0}, {"index": 1}, {"index": 2}]
    assert result.attempts == [1, 2, 1]
    assert len(result.retries) == 1
    retry = result.retries[0]
    assert (retry.index, retry.attempt, retry.crashed) == (1, 1, True)
    assert "exit code 3" in retry.error
    assert len(notes) == 1 and "member 1" in notes[0] and "worker died" in notes[0]
    assert len(list((tmp_path / "m").glob("*.json"))) == 3


@pytest.mark.parametrize("task", [tasks.fail_member, tasks.crash_always])
def test_a_member_failing_twice_raises_after_the_others_are_stored(task, tmp_path: Path) -> None:
    log = tmp_path / "calls.txt"
    configs = [{"index": i, "fail": 1, "crash": 1, "log": str(log)} for i in range(4)]
    with pytest.raises(SweepError) as caught:
        run_sweep(task, configs, workers=2, store=tmp_path / "m")
    error = caught.value
    assert list(error.failures) == [1]
    assert "member 1" in str(error) and '"index": 1' in str(error)
    assert "after 2 attempt(s)" in str(error)
    assert error.result.results[0] == {"index": 0, "square": 0}
    assert error.result.results[1] is None
    assert error.result.attempts[1] == 2
    assert sorted(log.read_text().split()) == ["0", "2", "3"]
    stored = sorted(int(p.name[7:12]) for p in (tmp_path / "m").glob("*.json"))
    assert stored == [0, 2, 3]


def test_an_executor_object_is_used_as_given() -> None:
    ran: list[int] = []

    class Recording:
        name = "recording"
        needs_pickling = False

        def run(self, task, jobs, done) -> None:
            for job in reversed(jobs):  # any order: results still follow the configs
                ran.append(job.index)
                done(attempt(task, job))

    result = run_sweep(tasks.train_linear, CONFIGS, executor=Recording())
    assert ran == [3, 2, 1, 0] and result.executor == "recording"
    assert [r["name"] for r in result.results] == [f"lr={c['lr']}" for c in CONFIGS]


def test_outcome_and_executor_basics() -> None:
    assert Outcome(0, value={}).ok and not Outcome(0, error="x").ok
    assert SerialExecutor().needs_pickling is False
    assert LocalExecutor(3).workers == 3


# ------------------------------------------------------------------ bad input
def test_bad_input_gets_one_clear_error() -> None:
    with pytest.raises(ValueError, match="configs is empty"):
        run_sweep(tasks.train_linear, [], executor="serial")
    with pytest.raises(ValueError, match=r"cannot be pickled.*module level"):
        run_sweep(lambda c: {}, CONFIGS, executor="local", workers=1)
    with pytest.raises(ValueError, match=r"unknown executor 'dask'.*serial, local, ray"):
        run_sweep(tasks.train_linear, CONFIGS, executor="dask")
    with pytest.raises(ValueError, match=r"workers must be an integer >= 1.*got 0"):
        run_sweep(tasks.train_linear, CONFIGS, executor="local", workers=0)
    with pytest.raises(ValueError, match=r"configs\[1\] must be a dict"):
        run_sweep(tasks.train_linear, [CONFIGS[0], 3], executor="serial")
    with pytest.raises(ValueError, match="retries"):
        run_sweep(tasks.train_linear, CONFIGS, executor="serial", retries=-1)
    # a lambda is fine in this process
    assert run_sweep(lambda c: {"x": c["seed"]}, CONFIGS[:1], executor="serial").results == [
        {"x": 0}
    ]


def test_a_result_that_is_not_a_dict_is_a_member_error() -> None:
    with pytest.raises(SweepError, match="must be a dict of name"):
        run_sweep(lambda c: 3.0, CONFIGS[:1], executor="serial", retries=0)


def test_the_ray_executor_without_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(ImportError, match=r"needs Ray.*pip install 'collapselab\[ray\]'"):
        run_sweep(tasks.train_linear, CONFIGS, executor="ray")


def test_pool_workers_see_the_environment_of_the_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    # The forkserver outlives a sweep; its workers must still see the caller's environment.
    run_sweep(tasks.count_calls, [{"index": 0, "log": os.devnull}], workers=1)
    monkeypatch.setenv("COLLAPSELAB_SWEEP_TEST", "seen")
    result = run_sweep(tasks.read_environment, [{"name": "COLLAPSELAB_SWEEP_TEST"}], workers=1)
    assert result.results == [{"value": "seen"}]


def test_a_sweep_inside_a_pool_worker_runs_in_that_worker() -> None:
    result = run_sweep(tasks.nested, [{"n": 3}, {"n": 2}], workers=2, retries=0)
    assert result.results == [{"squares": [0, 1, 4]}, {"squares": [0, 1]}]


def test_an_error_in_the_caller_ends_the_busy_workers_at_once(tmp_path: Path) -> None:
    import time

    from collapselab.experiments.sweeps import Job

    pid_file = tmp_path / "pid"
    jobs = [Job(0, {"seconds": 0.0}), Job(1, {"seconds": 60.0, "pid_file": str(pid_file)})]

    raised: list[float] = []

    def done(outcome: Outcome) -> None:
        while not pid_file.exists():  # member 1 is running
            time.sleep(0.05)
        raised.append(time.perf_counter())
        raise RuntimeError("the store cannot be written")

    with pytest.raises(RuntimeError, match="cannot be written"):
        LocalExecutor(2).run(tasks.sleep_for, jobs, done)
    assert time.perf_counter() - raised[0] < 5  # not the 10 s grace of a normal stop
    pid = int(pid_file.read_text())
    for _ in range(100):  # the forkserver reaps it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"worker {pid} still runs member 1")


def test_an_experiments_sweep_names_its_progress_row_after_its_label(tmp_path: Path) -> None:
    """``run_members`` shows ``label: done/total members`` (``sweep`` without a label) and
    stores under ``members/<label>``."""
    from collapselab.experiments.registry import RunContext
    from collapselab.experiments.sweeps import run_members
    from collapselab.store import Run

    rows: list[tuple[str, int]] = []

    class Display:
        def task(self, description: str, total: int, unit: str = ""):
            import contextlib

            rows.append((description, total))
            return contextlib.nullcontext(lambda done, total: None)

    run = Run.create(tmp_path, "labels", config={})
    context = RunContext("tiny", {}, progress=Display(), executor="serial")
    run_members(tasks.array_of, [{"n": 2}], run, context, label="arms")
    run_members(tasks.array_of, [{"n": 3}, {"n": 4}], run, context)
    assert rows == [("arms", 1), ("sweep", 2)]
    assert len(list((run.path / "members" / "arms").glob("member-*.json"))) == 1
    assert len(list((run.path / "members").glob("member-*.json"))) == 2


def test_ctrl_c_reaches_the_parent_only(tmp_path: Path) -> None:
    """The terminal sends Ctrl-C to every process of its group: a pool worker ignores it
    (no worker traceback), its member finishes, the parent decides."""
    import signal
    import threading
    import time

    from collapselab.experiments.sweeps import Job

    pid_file = tmp_path / "pid"
    jobs = [Job(0, {"seconds": 1.5, "pid_file": str(pid_file)})]
    outcomes: list[Outcome] = []

    def interrupt() -> None:
        while not pid_file.exists():
            time.sleep(0.05)
        os.kill(int(pid_file.read_text()), signal.SIGINT)

    thread = threading.Thread(target=interrupt)
    thread.start()
    LocalExecutor(1).run(tasks.sleep_for, jobs, outcomes.append)
    thread.join()
    assert len(outcomes) == 1 and outcomes[0].error is None and not outcomes[0].crashed


def test_a_resumed_sweep_says_how_many_members_were_done(tmp_path: Path) -> None:
    import contextlib

    class Display:
        def __init__(self) -> None:
            self.notes: list[str] = []

        @contextlib.contextmanager
        def task(self, description, total, unit=""):
            yield lambda done, total: None

        def note(self, text: str) -> None:
            self.notes.append(text)

    log = tmp_path / "calls.txt"
    configs = [{"index": i, "log": str(log)} for i in range(3)]
    run_sweep(tasks.count_calls, configs[:2], executor="serial", store=tmp_path / "m")
    display = Display()
    run_sweep(tasks.count_calls, configs, executor="serial", store=tmp_path / "m",
              progress=display, description="ensembles")  # fmt: skip
    assert display.notes == ["resuming ensembles: 2 of 3 members done"]
    fresh = Display()
    run_sweep(tasks.count_calls, configs, executor="serial", store=tmp_path / "other",
              progress=fresh)  # fmt: skip
    assert fresh.notes == []
