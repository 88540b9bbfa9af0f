"""The layer order of ``src/collapselab``, read from docs/architecture.md and held here.

Every module is parsed (``ast``; nothing is imported). The rules, as the "Layers" section
of docs/architecture.md states them, with no list of exceptions:

(a) a package imports only packages of strictly lower rank (module level, under
    ``if TYPE_CHECKING:`` and inside functions alike), and no module imports the facade
    ``collapselab/__init__.py``;
(b) the graph of imports between packages has no cycle;
(c) no function imports another collapselab package, except in ``cli`` (its commands load
    the library when they run, for start-up time).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "src" / "collapselab"
ARCHITECTURE = REPO / "docs" / "architecture.md"
FACADE = "collapselab/__init__.py"
# Rule (c)'s exceptions, for the command line's start-up time: cli itself, and the facade
# ("", collapselab/__init__.py), whose `collapselab.measure` is imported on first use because
# every command imports the package before printing its first line.
LAZY_ALLOWED = {"cli", ""}


@dataclass(frozen=True)
class Import:
    """One import statement (or ``importlib.import_module("collapselab...")`` call)."""

    path: str  # relative to src/, e.g. "collapselab/metrics/pcbias.py"
    line: int
    text: str  # the statement as written
    source: str  # the importing package (or top-level module), "" for the facade
    target: str  # the imported package (or top-level module), "" for the facade
    in_function: bool

    def where(self) -> str:
        return f"src/{self.path}:{self.line}: `{self.text}`"


def layer_table(markdown: str) -> dict[str, int]:
    """``{package: rank}`` from the table of the ``## Layers`` section."""
    match = re.search(r"^## Layers\n(.*?)(?=^## |\Z)", markdown, flags=re.S | re.M)
    if match is None:
        raise AssertionError("docs/architecture.md has no '## Layers' section")
    ranks: dict[str, int] = {}
    for rank, name in re.findall(r"^\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|", match.group(1), re.M):
        if name in ranks:
            raise AssertionError(f"docs/architecture.md lists {name!r} twice")
        ranks[name] = int(rank)
    if not ranks:
        raise AssertionError("the '## Layers' section of docs/architecture.md has no table rows")
    return ranks


def units(root: Path) -> set[str]:
    """The packages (directories) and top-level modules of the package at ``root``."""
    packages = {p.parent.name for p in root.glob("*/__init__.py")}
    modules = {p.stem for p in root.glob("*.py") if p.name != "__init__.py"}
    return packages | modules


def _module_name(relative: Path) -> tuple[str, bool]:
    """The dotted name of a module file and whether it is a package's ``__init__``."""
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module of a ``from ... import`` (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _unit(module: str, known: set[str]) -> str | None:
    """The package or top-level module a dotted name belongs to; "" for the facade (the
    ``collapselab`` package itself, or a name it defines); None outside collapselab."""
    parts = module.split(".")
    if parts[0] != "collapselab":
        return None
    if len(parts) > 1 and parts[1] in known:
        return parts[1]
    return ""


def _imported_modules(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = _resolve(node, module, is_package)
        if base == "collapselab":  # from collapselab import curvature / __version__
            return [f"collapselab.{alias.name}" for alias in node.names]
        return [base]
    if isinstance(node, ast.Call) and node.args:  # importlib.import_module("collapselab.x")
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0]
        if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
            if isinstance(first.value, str):
                return [first.value]
    return []


def imports(root: Path) -> Iterator[Import]:
    """Every import of a collapselab module by a module under ``root``."""
    known = units(root)
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent)
        source = "" if relative.as_posix() == FACADE else Path(relative.parts[1]).stem
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        yield from _walk(tree, False, relative, source, text, known)


def _walk(
    node: ast.AST, in_function: bool, relative: Path, source: str, text: str, known: set[str]
) -> Iterator[Import]:
    """The imports under ``node``, each marked as inside a function or not."""
    module, is_package = _module_name(relative)
    for child in ast.iter_child_nodes(node):
        for name in _imported_modules(child, module, is_package):
            target = _unit(name, known)
            if target is not None:
                statement = ast.get_source_segment(text, child) or name
                statement = " ".join(statement.split())
                if len(statement) > 100:
                    statement = statement[:97] + "..."
                where = (relative.as_posix(), child.lineno, statement)
                yield Import(*where, source, target, in_function)
        inside = in_function or isinstance(
            child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
        )
        yield from _walk(child, inside, relative, source, text, known)


def _label(unit: str, ranks: dict[str, int]) -> str:
    if unit == "":
        return "the facade collapselab/__init__.py"
    return f"{unit} (rank {ranks[unit]})" if unit in ranks else f"{unit} (not in the table)"


def upward_imports(found: list[Import], ranks: dict[str, int]) -> list[str]:
    """Rule (a): imports of a package of equal or higher rank, or of the facade."""
    out = []
    for imp in found:
        if imp.source == "" or imp.target == imp.source:
            continue  # the facade may import anything; a package may import itself
        if imp.target == "":
            out.append(f"{imp.where()} imports the facade (import the package it needs)")
        elif imp.source in ranks and imp.target in ranks:
            if ranks[imp.target] >= ranks[imp.source]:
                out.append(
                    f"{imp.where()}: {_label(imp.source, ranks)} imports "
                    f"{_label(imp.target, ranks)}, which is not below it"
                )
        else:
            missing = imp.source if imp.source not in ranks else imp.target
            out.append(f"{imp.where()}: {missing!r} is not in the layer table")
    return out


def package_cycles(found: list[Import]) -> list[str]:
    """Rule (b): the cycles of the graph of imports between packages (one per strongly
    connected component), each edge with one import that makes it."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in found:
        if imp.target != imp.source:
            edges.setdefault(imp.source, {}).setdefault(imp.target, imp)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, {}):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(edges):
        if node not in index:
            connect(node)
    out = []
    for component in components:
        members = set(component)
        names = ", ".join(sorted(m or "the facade" for m in members))
        lines = [
            f"    {imp.where()}"
            for src in sorted(members)
            for dst, imp in sorted(edges.get(src, {}).items())
            if dst in members
        ]
        out.append(f"cycle among {names}; the imports between them:\n" + "\n".join(lines))
    return out


def lazy_imports(found: list[Import]) -> list[str]:
    """Rule (c): imports of another collapselab package inside a function, outside cli."""
    return [
        f"{imp.where()}: {imp.source or 'the facade'} imports {imp.target or 'the facade'} "
        "inside a function (import it at module level)"
        for imp in found
        if imp.in_function and imp.target != imp.source and imp.source not in LAZY_ALLOWED
    ]


@pytest.fixture(scope="module")
def ranks() -> dict[str, int]:
    return layer_table(ARCHITECTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def found() -> list[Import]:
    return list(imports(SOURCE))


def _report(problems: list[str]) -> str:
    return f"{len(problems)} problem(s):\n" + "\n".join(problems)


def test_the_table_names_every_package_that_exists(ranks: dict[str, int]) -> None:
    existing = units(SOURCE)
    assert not existing - set(ranks), (
        f"not in docs/architecture.md: {sorted(existing - set(ranks))}"
    )
    assert not set(ranks) - existing, f"in the table but absent: {sorted(set(ranks) - existing)}"
    base = [name for name, rank in ranks.items() if rank == 0]
    assert {"checks", "_threads"} <= set(base)


def test_no_import_of_an_equal_or_higher_layer(found: list[Import], ranks: dict[str, int]) -> None:
    problems = upward_imports(found, ranks)
    assert not problems, _report(problems)


def test_no_cycle_between_packages(found: list[Import]) -> None:
    problems = package_cycles(found)
    assert not problems, _report(problems)


def test_no_function_level_import_of_another_package(found: list[Import]) -> None:
    problems = lazy_imports(found)
    assert not problems, _report(problems)


def test_start_up_loads_no_heavy_library() -> None:
    """Imports at module level keep the layers visible; the heavy libraries that only some
    functions need (scipy, POT, scikit-learn, matplotlib) are imported where they are used,
    so that the command line and the experiment registry start without them."""
    code = (
        "import sys\n"
        "import collapselab.cli.main, collapselab.experiments, collapselab.report.html\n"
        "heavy = {'scipy', 'ot', 'sklearn', 'matplotlib'}\n"
        "print(sorted(heavy & {name.split('.')[0] for name in sys.modules}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    """The three rules on a small package built to break each of them once."""
    root = tmp_path / "collapselab"
    files = {
        "__init__.py": "from collapselab.high import thing\n",
        "checks.py": "",
        "low/__init__.py": "from collapselab import checks\n",
        "low/a.py": "def f():\n    from collapselab.mid import g\n",
        "mid/__init__.py": "import collapselab.low\n",
        "mid/b.py": "from collapselab import __version__\n",
        "high/__init__.py": "from ..mid import b\nimport importlib\n"
        "importlib.import_module('collapselab.low')\n",
        "cli/__init__.py": "def main():\n    from collapselab.high import thing\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    ranks = {"checks": 0, "low": 1, "mid": 2, "high": 3, "cli": 4}
    found = list(imports(root))
    assert sorted((i.source, i.target, i.in_function) for i in found) == sorted(
        [
            ("", "high", False),
            ("low", "checks", False),
            ("low", "mid", True),
            ("mid", "low", False),
            ("mid", "", False),
            ("high", "mid", False),
            ("high", "low", False),
            ("cli", "high", True),
        ]
    )
    upward = upward_imports(found, ranks)
    assert len(upward) == 2
    assert "low/a.py:2" in upward[0] and "low (rank 1) imports mid (rank 2)" in upward[0]
    assert "mid/b.py:1" in upward[1] and "imports the facade" in upward[1]
    cycles = package_cycles(found)
    # low -> mid -> low, and mid -> facade -> high -> mid: one strongly connected component
    assert len(cycles) == 1
    assert cycles[0].startswith("cycle among high, low, mid, the facade;")
    lazy = lazy_imports(found)
    assert len(lazy) == 1 and "low/a.py:2" in lazy[0]
    with pytest.raises(AssertionError, match="Layers"):
        layer_table("# Architecture\n")
