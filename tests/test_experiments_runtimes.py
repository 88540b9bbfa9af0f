"""Measured runtimes: one file (``runtimes.json``) behind every time that ``list``, the
progress estimates and the README state, written from a reproduction's index by
``benchmarks/record_runtimes.py``."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import collapselab
from collapselab.experiments import all_experiments, estimated_seconds, reproduce
from collapselab.experiments.reproduce import source_commit
from collapselab.experiments.runtimes import (
    format_duration,
    measured,
    measurements,
    stated_runtimes,
)
from collapselab.report import machine_text
from tests._experiments import experiment, registered

ROOT = Path(__file__).resolve().parents[1]


def _record_script():
    path = ROOT / "benchmarks" / "record_runtimes.py"
    spec = importlib.util.spec_from_file_location("record_runtimes", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.4, "<1 s"),
        (6.2, "6 s"),
        (85.4, "85 s"),
        (102.0, "1.7 min"),
        (1390.0, "23 min"),
        (3600.0, "1 h"),
        (5940.0, "1 h 39 min"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def _write(path: Path, runtimes: dict, campaigns: dict | None = None) -> Path:
    campaigns = campaigns or {
        "c1": {"command": "collapselab reproduce all --preset quick", "date": "2026-11-27",
               "commit": "abc1234", "cpus": 2, "machine": "2 CPU cores (x86_64)", "note": ""}
    }  # fmt: skip
    path.write_text(json.dumps({"about": "", "campaigns": campaigns, "runtimes": runtimes}))
    return path


def test_measurements_read_the_file_and_say_cores_and_load(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "r.json",
        {"x": {"quick": {"seconds": 6.2, "campaign": "c1", "load": [1.04, 1.43]},
               "standard": {"seconds": 102.0, "campaign": "c1", "load": [1.0, 1.04]},
               "paper": {"seconds": 7200.0, "campaign": "c1"}}},
    )  # fmt: skip
    found = measurements(path)["x"]
    assert found["quick"].text(with_load=False) == "~6 s"
    assert found["quick"].text() == "~6 s (2 cores, load 1.0-1.4)"
    assert found["standard"].text() == "~1.7 min (2 cores, load 1.0)"
    assert found["paper"].text() == "~2 h (2 cores)"
    assert found["quick"].campaign.commit == "abc1234"


def test_a_measurement_must_name_a_described_campaign(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.json", {"x": {"quick": {"seconds": 1.0, "campaign": "nope"}}})
    with pytest.raises(ValueError, match="names campaign 'nope'"):
        measurements(path)


def test_every_builtin_experiment_states_measured_times() -> None:
    """What list shows is what the file says, for every built-in experiment: the quick time
    and, where the experiment has one, the standard preset's."""
    for exp in all_experiments():
        quick = measured(exp.id, "quick")
        assert quick is not None, exp.id
        assert (
            exp.runtime("quick")
            == quick.text(with_load=False)
            == stated_runtimes(exp.id)["runtime_quick"]
        )
        if "standard" in exp.presets:
            standard = measured(exp.id, "standard")
            assert standard is not None, exp.id
            assert exp.runtime("standard") == standard.text()
        for preset in exp.runtimes:
            assert preset in exp.presets, (exp.id, preset)


def test_estimates_of_a_builtin_come_from_its_measurement(tmp_path: Path) -> None:
    exp = next(e for e in all_experiments() if e.id == "dlufm-linear")
    assert (
        estimated_seconds(exp, "standard", tmp_path, seed=0)
        == measured("dlufm-linear", "standard").seconds
    )


def test_reproduce_records_load_and_machine(tmp_path: Path) -> None:
    with registered(experiment("t-rt-a", lambda run, ctx: None, paper="t-paper-rt")):
        result = reproduce("t-paper-rt", root=tmp_path)
    record = json.loads(result.index_json.read_text())["reproduce"]
    (outcome,) = record["experiments"]
    assert len(outcome["load"]) == 2 and all(x >= 0 for x in outcome["load"])
    machine = record["machine"]
    assert machine["cpus"] >= 1 and machine["torch_threads"] >= 1
    assert machine["commit"] == source_commit()
    html = result.index_html.read_text()
    assert "load (start, end)" in html and "torch threads" not in html
    assert f"on {machine_text(machine)}" in html and " threads)" in html


def test_the_source_commit_is_the_checkouts_head() -> None:
    """The code under test sits in a git checkout (the README's install is editable from a
    clone): its commit is HEAD, marked when tracked files differ."""
    package = Path(collapselab.__file__).parent
    head = subprocess.run(["git", "-C", str(package), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)  # fmt: skip
    if head.returncode != 0:
        pytest.skip("collapselab is not installed from a git checkout here")
    commit = source_commit()
    assert commit is not None and commit.split("+")[0] == head.stdout.strip()
    assert commit.endswith("+changes") == bool(
        subprocess.run(["git", "-C", str(package), "status", "--porcelain",
                        "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
    )  # fmt: skip


def test_the_source_commit_of_a_file_in_a_repository(tmp_path: Path) -> None:
    """Committed: the hash; tracked and edited: marked; an untracked copy inside some other
    repository (an installed package in a project's venv): none, not that repository's."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True,
                              capture_output=True, text=True).stdout.strip()  # fmt: skip

    git("init", "-q")
    code = tmp_path / "code.py"
    code.write_text("x = 1\n")
    git("add", "code.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    head = git("rev-parse", "--short", "HEAD")
    assert source_commit(code) == head
    code.write_text("x = 2\n")
    assert source_commit(code) == head + "+changes"
    copy = tmp_path / "venv" / "copy.py"
    copy.parent.mkdir()
    copy.write_text("x = 1\n")
    assert source_commit(copy) is None
    assert source_commit(tmp_path.parent / "nowhere" / "x.py") is None


def test_the_machine_in_words() -> None:
    facts = {"cpus": 2, "processor": "x86_64", "python": "3.11.7", "torch": "2.13.0+cpu",
             "torch_threads": 2}  # fmt: skip
    assert machine_text(facts) == "2 CPU cores (x86_64, Python 3.11.7, torch 2.13.0+cpu, 2 threads)"


def test_a_resumed_experiment_is_flagged_and_its_partial_time_not_recorded(tmp_path: Path) -> None:
    attempts = []

    def fails_once(run, ctx):  # interrupted the first time, as a killed or failed run
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("interrupted")

    with registered(experiment("t-rt-b", fails_once, paper="t-paper-rt-b")):
        first = reproduce("t-paper-rt-b", root=tmp_path)
        second = reproduce("t-paper-rt-b", root=tmp_path)
    assert [o.outcome for o in first.outcomes] == ["failed"]
    (outcome,) = second.outcomes
    assert outcome.outcome == "completed" and outcome.resumed
    assert "(resumed: time of this part)" in second.index_html.read_text()
    target = _write(tmp_path / "runtimes.json", {}, {})
    assert _record_script().record(tmp_path, "c", None, "", target) == 0
    assert "t-rt-b" not in json.loads(target.read_text())["runtimes"]


def test_record_script_writes_what_ran_and_drops_unused_campaigns(tmp_path: Path) -> None:
    record_runtimes = _record_script()
    target = _write(
        tmp_path / "runtimes.json",
        {"a": {"quick": {"seconds": 9.0, "campaign": "old"},
               "standard": {"seconds": 99.0, "campaign": "old"}},
         "b": {"quick": {"seconds": 5.0, "campaign": "old"}}},
        {"old": {"command": "c", "date": "2026-11-24", "commit": "", "cpus": 2, "machine": "m",
                 "note": ""}},
    )  # fmt: skip
    root = tmp_path / "runs"
    root.mkdir()
    machine = {"cpus": 2, "processor": "x86_64", "python": "3.11.7", "torch": "2.13.0+cpu",
               "torch_threads": 2}  # fmt: skip
    outcomes = [
        {"experiment": "a", "outcome": "completed", "seconds": 11.26, "load": [1.0, 1.5]},
        {"experiment": "b", "outcome": "completed", "seconds": 4.0, "load": [1.5, 1.2]},
        {"experiment": "c", "outcome": "skipped", "seconds": 0.01, "load": [1.2, 1.2]},
        {"experiment": "d", "outcome": "failed", "seconds": 3.0, "load": [1.2, 1.2]},
    ]
    reproduced = {"paper": "all", "preset": "quick", "started": "2026-11-27T10:00:00+00:00",
                  "machine": machine, "experiments": outcomes}  # fmt: skip
    (root / "index.json").write_text(json.dumps({"reproduce": reproduced}))
    assert record_runtimes.record(root, "quick-1", None, "quiet", target) == 2
    written = measurements(target)
    assert written["a"]["quick"].seconds == 11.3 and written["a"]["quick"].load == (1.0, 1.5)
    assert written["a"]["standard"].campaign.name == "old"  # other presets kept
    assert written["b"]["quick"].campaign.name == "quick-1" and "c" not in written
    quick = written["a"]["quick"].campaign
    assert quick.command == "collapselab reproduce all --preset quick"
    assert quick.machine == "2 CPU cores (x86_64, Python 3.11.7, torch 2.13.0+cpu, 2 threads)"
    assert quick.date == "2026-11-27" and quick.note == "quiet"
    assert quick.commit == ""  # the record names none and no --repo was given
    # once nothing refers to it, the old campaign goes
    (root / "index.json").write_text(
        json.dumps({"reproduce": {**reproduced, "preset": "standard"}})
    )
    record_runtimes.record(root, "std-1", None, "", target)
    assert set(json.loads(target.read_text())["campaigns"]) == {"quick-1", "std-1"}
    # a record that names its commit is recorded with it, whatever --repo says
    named = {**reproduced, "machine": {**machine, "commit": "1234abc"}}
    (root / "index.json").write_text(json.dumps({"reproduce": named}))
    record_runtimes.record(root, "quick-2", tmp_path, "", target)
    assert measurements(target)["a"]["quick"].campaign.commit == "1234abc"


def test_a_command_timed_whole_records_its_median_into_fresh_roots(tmp_path: Path) -> None:
    """``--time``: each run gets a fresh, empty root; the median of the runs' wall times is
    the experiment's quick time; the campaign names the command, every run's time and the
    machine; other experiments' times stay."""
    record_runtimes = _record_script()
    earlier = {"a": {"quick": {"seconds": 5.0, "campaign": "c1"}}}
    target = _write(tmp_path / "runtimes.json", earlier)
    marker = tmp_path / "roots.txt"
    # the stand-in command: refuses a root with anything in it, notes the root, and waits
    script = (
        "import sys, pathlib, time; root = pathlib.Path(sys.argv[2]); "
        "assert sys.argv[1] == '--root' and root.is_dir() and not any(root.iterdir()); "
        f"open({str(marker)!r}, 'a').write(str(root) + '\\n'); time.sleep(0.05)"
    )
    command = [sys.executable, "-c", script]
    times = record_runtimes.time_command(command, "demo", 3, "demo-1", "shared", target)
    assert len(times) == 3 and all(t >= 0.05 for t in times)
    roots = marker.read_text().split()
    assert len(set(roots)) == 3 and not any(Path(r).exists() for r in roots)
    written = measurements(target)
    demo = written["demo"]["quick"]
    assert demo.seconds == round(sorted(times)[1], 1)
    assert demo.load is not None and len(demo.load) == 2
    assert written["a"]["quick"].campaign.name == "c1"
    campaign = demo.campaign
    assert campaign.command.startswith(sys.executable) and campaign.cpus >= 1
    assert campaign.note.startswith("the whole command, median of 3 runs into fresh roots (")
    assert campaign.note.endswith("; shared")
    assert all(f"{t:.1f}" in campaign.note for t in times)
    assert campaign.machine.endswith(" threads)")


def test_the_demo_states_one_measured_time_everywhere() -> None:
    """README, ``collapselab list`` and ``collapselab demo --help`` give the demo's time as
    the one measured in runtimes.json (the whole command, timed by
    ``benchmarks/record_runtimes.py --time``)."""
    demo = measured("demo", "quick")
    assert demo is not None and demo.campaign.command.endswith("collapselab demo")
    shown = format_duration(demo.seconds)
    cli = [sys.executable, "-c", "from collapselab.cli.main import main; main()"]
    env = {**os.environ, "COLUMNS": "200"}
    help_text = subprocess.run([*cli, "demo", "--help"], capture_output=True, text=True,
                               env=env, check=True, timeout=120).stdout  # fmt: skip
    help_text = " ".join(help_text.replace("│", " ").split())
    assert f"about {shown} on " in help_text, help_text
    listed = subprocess.run([*cli, "list"], capture_output=True, text=True, env=env,
                            check=True, timeout=300).stdout  # fmt: skip
    (line,) = [row for row in listed.splitlines() if row.strip().startswith("demo ")]
    assert f" ~{shown} " in line, line
    readme = (ROOT / "README.md").read_text(encoding="utf-8").split("\n\n")
    paragraph = " ".join(next(p for p in readme if "`collapselab demo`" in p).split())
    times = re.findall(r"\b\d+(?:\.\d+)? (?:s|min)\b", paragraph)
    assert times == [shown], paragraph
