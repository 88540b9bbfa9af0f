"""Every ```python block of ``docs/*.md`` and of the README runs.

The blocks of one file run in order in one fresh namespace (a page reads top to bottom),
with the working directory a temporary folder, so examples may write run directories and
data files. Tracebacks point at the Markdown file and line of the failing statement.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = (
    "index",
    "catalogue",
    "curvature",
    "data",
    "models",
    "training",
    "monitoring",
    "store",
    "theory",
    "dlufm",
    "sweeps",
)

# A fence opens with ``` plus an info string and closes with a bare ``` line.
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
# Info strings that are not executed; anything else (py, python3, pycon) is rejected so no
# Python example can escape the test under another label.
_NOT_PYTHON = {"", "bash", "console", "text", "sql"}


# A block whose first line is "# needs: <module>" runs where that optional extra is installed.
_NEEDS = re.compile(r"# needs: ([A-Za-z_][\w.]*)")


def python_blocks(text: str) -> list[tuple[int, str]]:
    """``(line of the block's first code line, code)`` of every ```python fence in ``text``."""
    out = []
    for match in _FENCE.finditer(text):
        info = match.group(1).strip()
        if info == "python":
            out.append((text.count("\n", 0, match.start()) + 2, match.group(2)))
    return out


def _doc_files() -> list[Path]:
    return [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]


def test_python_blocks_extractor() -> None:
    text = "intro\n```python\nx = 1\n```\n\n```bash\nls\n```\n```python\ny = x + 1\n```\n"
    assert python_blocks(text) == [(3, "x = 1\n"), (10, "y = x + 1\n")]


def test_every_page_exists_and_fences_are_known() -> None:
    names = {p.stem for p in _doc_files() if p.parent == DOCS}
    assert set(PAGES) <= names, f"missing pages: {sorted(set(PAGES) - names)}"
    for path in _doc_files():
        text = path.read_text(encoding="utf-8")
        assert text.count("```") % 2 == 0, f"{path.name}: unbalanced code fences"
        infos = {m.group(1).strip() for m in _FENCE.finditer(text)}
        unknown = infos - _NOT_PYTHON - {"python"}
        assert not unknown, f"{path.name}: fences {sorted(unknown)}; label Python 'python'"


@pytest.mark.parametrize("path", _doc_files(), ids=lambda p: p.name)
def test_python_examples_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}"}
    for line, code in python_blocks(path.read_text(encoding="utf-8")):
        needs = _NEEDS.match(code)
        if needs and importlib.util.find_spec(needs.group(1)) is None:
            continue  # an optional extra that is not installed here (CI installs it)
        # Leading newlines keep the line numbers of tracebacks equal to the Markdown file's.
        exec(compile("\n" * (line - 1) + code, str(path), "exec"), namespace)
