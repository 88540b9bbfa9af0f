"""The Ray options of ``reproduce`` are one line each when mistaken (no Ray to start or
join: every error is found before): --address without --executor ray, an address where
nothing answers or that is no address, Ray not installed."""

from __future__ import annotations

import sys
import time

import pytest
from typer.testing import CliRunner

from collapselab.cli.main import app
from collapselab.experiments.sweeps.ray_executor import check_address

runner = CliRunner()


def _one_line_error(args: list[str], *expected: str) -> None:
    result = runner.invoke(app, ["reproduce", "001", *args, "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for text in expected:
        assert text in lines[0], result.output


def test_address_needs_the_ray_executor(tmp_path) -> None:
    _one_line_error(["--executor", "serial", "--address", "10.0.0.1:6379", "--out",
                     str(tmp_path)], "--address 10.0.0.1:6379", "needs --executor ray")  # fmt: skip


def test_an_address_where_nothing_answers_is_one_line_at_once() -> None:
    t0 = time.perf_counter()
    with pytest.raises(ConnectionError, match=r"no Ray cluster answers at 127\.0\.0\.1:1 "):
        check_address("127.0.0.1:1")
    assert time.perf_counter() - t0 < 5  # refused at once, not Ray's minutes of retries
    with pytest.raises(ConnectionError, match=r"expected host:port"):
        check_address("head-node")


def test_a_bad_address_on_the_command_line(tmp_path) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed (CI installs it)")
    _one_line_error(["--executor", "ray", "--address", "127.0.0.1:1", "--out", str(tmp_path)],
                    "--address 127.0.0.1:1", "no Ray cluster answers")  # fmt: skip


def test_ray_not_installed(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    _one_line_error(["--executor", "ray", "--out", str(tmp_path)],
                    "--executor ray", "pip install 'collapselab[ray]'")  # fmt: skip
