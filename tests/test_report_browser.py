"""Reports and the index rendered by a real browser (headless Chromium).

Checks, at a desktop width (1440 px) and a narrow one (800 px): every image decodes, no
element reaches beyond the page width and no element clips its content (an error box cut
off on the right); at the desktop width, no figure is shown scaled below its own size.

Chromium is driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``:
JSON messages separated by NUL bytes on file descriptors 3 and 4), so nothing but
Debian's ``chromium`` package is needed; ``.ci/run`` installs it where ``apt-get`` exists.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from collapselab.experiments import (
    Claim,
    ClaimResult,
    Final,
    RunContext,
    RunResults,
    run_experiment,
    value_above,
)
from collapselab.report import plot_panels, plot_vs_depth, write_index
from collapselab.store import Run
from tests._experiments import experiment, registered

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Debian's chromium is not installed (.ci/run installs it where apt-get exists)",
)

_CHECK = """
(async () => {
  const images = Array.from(document.images);
  const failed = [];
  for (const image of images) {
    try { await image.decode(); } catch (error) { failed.push(image.alt); }
    if (!(image.complete && image.naturalWidth > 0)) failed.push(image.alt);
  }
  const width = document.documentElement.clientWidth;
  const overflow = [];
  for (const element of document.body.querySelectorAll('*')) {
    const box = element.getBoundingClientRect();
    const name = element.tagName + (element.className ? '.' + element.className : '');
    if (box.width > 0 && (box.right > width + 0.5 || box.left < -0.5)) {
      overflow.push(name + ' right=' + Math.round(box.right));
    }
    const style = getComputedStyle(element);
    if (element.scrollWidth > element.clientWidth + 1 && style.overflowX !== 'visible') {
      overflow.push(name + ' clips ' + element.scrollWidth + '>' + element.clientWidth);
    }
  }
  const scaled = images.filter(i => i.width < 0.97 * i.naturalWidth)
                       .map(i => i.alt + ' ' + i.width + '/' + i.naturalWidth);
  return {images: images.length, failed, overflow, scaled, width,
          pageWidth: document.documentElement.scrollWidth};
})()
"""


def _high(fd: int) -> int:
    """``fd`` moved to a number >= 10, so that dup2 onto 3 and 4 in the child never meets
    one of the pipe's own descriptors (a dup2 onto itself would keep close-on-exec)."""
    import fcntl

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Browser:
    """A headless Chromium driven over the DevTools pipe."""

    def __init__(self) -> None:
        self._profile = tempfile.mkdtemp(prefix="collapselab-chromium-")
        to_child_r, self._to_child = (_high(fd) for fd in os.pipe())
        self._from_child, from_child_w = (_high(fd) for fd in os.pipe())

        def wire() -> None:  # in the child: the protocol's fds 3 (in) and 4 (out)
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        args = [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--allow-file-access-from-files",
            f"--user-data-dir={self._profile}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        # close_fds=False: the fds 3 and 4 made by ``wire`` must survive into chromium.
        self._process = subprocess.Popen(
            args,
            preexec_fn=wire,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call("Page.enable", session=True)

    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._to_child, json.dumps(message).encode() + b"\0")

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        self._send(message)
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def wait_for(self, event: str) -> None:
        while self._receive().get("method") != event:
            pass

    def check(self, path: Path, width: int) -> dict[str, Any]:
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.call("Page.navigate", session=True, url=path.resolve().as_uri())
        self.wait_for("Page.loadEventFired")
        result = self.call(
            "Runtime.evaluate",
            session=True,
            expression=_CHECK,
            awaitPromise=True,
            returnByValue=True,
        )
        return result["result"]["value"]

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self._profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    opened = Browser()
    yield opened
    opened.close()


_LAYERS = [f"blocks.{i}" for i in range(8)]
_METRICS = ("nc1_trace_ratio", "nc2_etf_distance", "ncc_accuracy", "nc1")


def _train_like(run: Run, context: RunContext) -> None:
    rng = np.random.default_rng(0)
    for epoch in range(0, 40):
        run.log(epoch * 10, "accuracy", min(1.0, 0.5 + epoch / 30), epoch=epoch)
        run.log(epoch * 10, "accuracy", 0.9, epoch=epoch, split="test")
        for depth, layer in enumerate(_LAYERS):
            for metric in _METRICS:
                value = np.exp(-epoch * (depth + 1) / 40) + 0.01 * rng.random()
                run.log(epoch * 10, metric, value, epoch=epoch, layer=layer)
    run.record_zero_error_epoch(15)


def _draw(run: Run) -> None:
    metrics = run.metrics()
    rows = metrics[metrics["layer"] != ""]
    plot_panels(
        rows,
        run.figure_path("over_epochs"),
        panel="metric",
        logy=True,
        zero_error_epoch=15,
        suptitle="four panels of eight layers each, with a long title that must still fit",
    )
    plot_vs_depth(rows, run.figure_path("vs_depth"), list(_METRICS), epoch="last")


def _fail(run: Run, context: RunContext) -> None:
    long_word = "x" * 400
    raise RuntimeError(f"a failure with a very long unbroken word {long_word} and more text")


def _theory(run: Run, context: RunContext) -> None:
    run.log_dict(0, {"objective": 1.0, "pfc1": 0.5}, layer="solution")
    frame = pd.DataFrame({"x": np.arange(5), "y": np.arange(5.0)})  # a plain figure from arrays
    plot_panels(
        {"only": {"line": (frame["x"], frame["y"] + 1)}},
        run.figure_path("theory"),
        logy=True,
    )


def _long_names(results: RunResults) -> ClaimResult:
    values = {"zero_error_epoch": 15.0, "final_train_accuracy_of_the_penultimate_layer": 0.97}
    return ClaimResult("holds", values, 1.0, "names with underscores in a narrow cell")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    claim = value_above("acc", "accurate", "Tab. 1", Final("accuracy", "test"), 0.8)
    names = Claim("long-value-names", "values with long names", "Tab. 1", "= 1", _long_names)
    experiments = [
        experiment(
            "t-browser-train",
            _train_like,
            paper="t-browser",
            title="a training run with wide multi-panel figures",
            presets={"quick": {"long_setting": "y" * 300}},
            draw=_draw,
            figures=["over_epochs", "vs_depth"],
            captions={"over_epochs": "Four metrics of eight layers over epochs."},
            claims=[claim, names],
        ),
        experiment("t-browser-fail", _fail, paper="t-browser", claims=[claim]),
        experiment("t-browser-theory", _theory, paper="t-browser", uses_device=False),
    ]
    where = tmp_path_factory.mktemp("browser-runs")
    with registered(*experiments):
        for spec in experiments:
            run_experiment(spec.id, root=where, raise_on_error=False)
        write_index(where)
        yield where


@pytest.mark.parametrize("width", [1440, 1280, 800])
@pytest.mark.parametrize(
    "page",
    [
        "t-browser-train-quick-seed0/report.html",
        "t-browser-fail-quick-seed0/report.html",
        "t-browser-theory-quick-seed0/report.html",
        "index.html",
    ],
)
def test_pages_render_without_overflow(browser: Browser, root: Path, page: str, width: int):
    seen = browser.check(root / page, width)
    assert seen["failed"] == [], seen
    assert seen["overflow"] == [], seen
    assert seen["pageWidth"] <= seen["width"], seen
    if page.startswith("t-browser-train"):
        assert seen["images"] == 2
    if width == 1440:
        assert seen["scaled"] == [], "figures are shown below their own size: " + str(seen)


def test_report_contents_seen_by_the_browser(root: Path) -> None:
    train = (root / "t-browser-train-quick-seed0" / "report.html").read_text()
    assert "Four metrics of eight layers over epochs." in train
    assert 'href="figures/over_epochs.png"' in train  # opens the figure full size
    theory = (root / "t-browser-theory-quick-seed0" / "report.html").read_text()
    assert "zero-error epoch" not in theory.lower()
    assert "zero-error epoch" in train.lower()
    for path in [root / "index.html", root / "index.json", *root.glob("*/report.html")]:
        assert path.stat().st_mode & 0o777 == 0o644 & ~_umask(), path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_WORDS_WHOLE = """
(() => {
  const broken = [];
  for (const cell of document.querySelectorAll('td.words')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const re = /\\S+/g;
      let match;
      while ((match = re.exec(node.textContent)) !== null) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        if (range.getClientRects().length > 1) broken.push(match[0]);
      }
    }
  }
  const top = document.querySelector('p.verdicts');
  const overview = Array.from(document.querySelectorAll('h2'))
                        .find(h => h.textContent === 'Overview');
  return {broken, verdictsTop: top ? top.getBoundingClientRect().top : null,
          overviewTop: overview ? overview.getBoundingClientRect().top : null,
          cells: document.querySelectorAll('td.words').length};
})()
"""


@pytest.mark.parametrize("width", [1280, 800])
def test_claims_are_summed_up_at_the_top_and_names_never_break_inside_a_word(
    browser: Browser, root: Path, width: int
) -> None:
    browser.check(root / "t-browser-train-quick-seed0" / "report.html", width)
    result = browser.call("Runtime.evaluate", session=True, expression=_WORDS_WHOLE,
                          returnByValue=True)["result"]["value"]  # fmt: skip
    assert result["cells"] == 2 and result["broken"] == [], result
    assert result["verdictsTop"] is not None and result["verdictsTop"] < result["overviewTop"]
