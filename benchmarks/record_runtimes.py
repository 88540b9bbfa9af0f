"""Record the wall times of a measured reproduction in collapselab's ``runtimes.json``.

    collapselab reproduce all --preset standard --root RUNS      # the measurement
    python benchmarks/record_runtimes.py RUNS --campaign standard-2026-11-27 \
        --note "nothing else running"

reads ``RUNS/index.json`` (the ``reproduce`` record: each experiment's wall time, the load
average when it started and ended, the machine and the commit of the code that ran) and
writes one measurement per experiment
that *ran* in that reproduction (a skipped, failed or not-run experiment measured nothing,
and one that resumed an interrupted run measured only its last part) under the named
campaign, replacing that experiment's earlier time for the preset.
Campaigns no measurement refers to any more are dropped. ``collapselab list`` and the
progress estimates read the file (``collapselab.experiments.runtimes``).

A command a user types as it stands, such as the demo, is timed whole instead (start-up,
training, report and printed claims), into a fresh root each time:

    python benchmarks/record_runtimes.py --time "collapselab demo" --experiment demo \
        --runs 3 --campaign demo-2026-11-28 --note "machine shared with other work"

writes the median of the runs as that experiment's quick time, the load before and after
the runs, and every run's time in the campaign's note.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from collapselab.experiments.runtimes import RUNTIMES_FILE, measurements
from collapselab.report import machine_text


def campaign_of(record: dict[str, Any], repo: Path | None, note: str) -> dict[str, Any]:
    """The campaign entry of a ``reproduce`` record: command, date, commit, machine.

    The commit is the one the record names (written when the reproduction started); ``repo``
    serves records from before that was written, or from code outside a git checkout."""
    machine = record.get("machine") or {}
    if not machine:
        raise SystemExit("the index's reproduce record has no machine facts (an older index)")
    commit = machine.get("commit") or ""
    if not commit and repo is not None:
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    return {
        "command": f"collapselab reproduce {record['paper']} --preset {record['preset']}",
        "date": str(record["started"])[:10],
        "commit": commit,
        "cpus": int(machine["cpus"]),
        "machine": machine_text(machine),
        "note": note,
    }


def record(root: Path, campaign: str, repo: Path | None, note: str, target: Path) -> int:
    """Write the measurements of ``root``'s last reproduction into ``target``; returns how
    many were written."""
    index = json.loads((root / "index.json").read_text(encoding="utf-8"))
    reproduced = index.get("reproduce")
    if not reproduced:
        raise SystemExit(f"{root}/index.json records no reproduction")
    document = json.loads(target.read_text(encoding="utf-8"))
    document["campaigns"][campaign] = campaign_of(reproduced, repo, note)
    preset, written = reproduced["preset"], 0
    for outcome in reproduced["experiments"]:
        if outcome["outcome"] != "completed":
            continue
        if outcome.get("resumed"):
            print(f"{outcome['experiment']}: resumed an interrupted run; its time is not recorded")
            continue
        entry = {"seconds": round(float(outcome["seconds"]), 1), "campaign": campaign}
        if outcome.get("load") and None not in outcome["load"]:
            entry["load"] = [round(float(x), 2) for x in outcome["load"]]
        document["runtimes"].setdefault(outcome["experiment"], {})[preset] = entry
        written += 1
    _write(document, target)
    return written


def _write(document: dict[str, Any], target: Path) -> None:
    """Write ``document`` to ``target`` without the campaigns no measurement refers to."""
    used = {e["campaign"] for presets in document["runtimes"].values() for e in presets.values()}
    document["campaigns"] = {k: v for k, v in document["campaigns"].items() if k in used}
    target.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    measurements.cache_clear()
    measurements(target)  # the file must still read


def time_command(
    command: list[str],
    experiment: str,
    runs: int,
    campaign: str,
    note: str,
    target: Path,
    preset: str = "quick",
) -> list[float]:
    """Run ``command --root <fresh folder>`` ``runs`` times, each timed whole (the wall time
    a user waits: start-up included), and write the median as ``experiment``'s time at
    ``preset``, with the 1-minute load average before the first run and after the last.
    Returns the times of the runs, in order."""
    from collapselab.experiments.reproduce import load_average, machine_facts

    if runs < 1:
        raise SystemExit("--runs must be at least 1")
    seconds, load_before = [], load_average()
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="collapselab-timed-") as root:
            start = time.perf_counter()
            subprocess.run([*command, "--root", root], check=True, stdout=subprocess.DEVNULL)
            seconds.append(time.perf_counter() - start)
    load_after = load_average()
    facts = machine_facts()
    shown = ", ".join(f"{s:.1f}" for s in seconds)
    timing = f"the whole command, median of {runs} runs into fresh roots ({shown} s)"
    document = json.loads(target.read_text(encoding="utf-8"))
    document["campaigns"][campaign] = {
        "command": shlex.join(command),
        "date": datetime.date.today().isoformat(),
        "commit": facts.get("commit") or "",
        "cpus": int(facts["cpus"]),
        "machine": machine_text(facts),
        "note": f"{timing}; {note}" if note else timing,
    }
    entry: dict[str, Any] = {"seconds": round(statistics.median(seconds), 1), "campaign": campaign}
    if None not in (load_before, load_after):
        entry["load"] = [round(float(x), 2) for x in (load_before, load_after)]
    document["runtimes"].setdefault(experiment, {})[preset] = entry
    _write(document, target)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "root", type=Path, nargs="?", help="the --root of the measured reproduction"
    )
    parser.add_argument("--campaign", required=True, help="a name for this measurement")
    parser.add_argument("--time", help="a command to time whole instead (given --root each run)")
    parser.add_argument("--experiment", help="the experiment whose time --time measures")
    parser.add_argument("--runs", type=int, default=3, help="how many times --time runs")
    parser.add_argument(
        "--repo",
        type=Path,
        help="the checkout that was measured, for records that name no commit",
    )
    parser.add_argument("--note", default="", help="what else ran beside it, if anything")
    parser.add_argument("--file", type=Path, default=RUNTIMES_FILE, help="the runtimes file")
    args = parser.parse_args(argv)
    if args.time is not None:
        if args.root is not None or args.experiment is None:
            parser.error("--time takes --experiment and no root")
        times = time_command(
            shlex.split(args.time), args.experiment, args.runs, args.campaign, args.note, args.file
        )
        shown = ", ".join(f"{s:.1f}" for s in times)
        print(f"{args.experiment}: {shown} s; median written to {args.file} ({args.campaign!r})")
        return 0
    if args.root is None:
        parser.error("give the root of a reproduction, or --time")
    written = record(args.root, args.campaign, args.repo, args.note, args.file)
    print(f"{written} runtimes written to {args.file} under campaign {args.campaign!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
