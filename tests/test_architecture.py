"""The architecture holds: layers import downwards only, no import cycle, modules stay small.

The layers are import-linter contracts in ``pyproject.toml`` (``[tool.importlinter]``), drawn in
``docs/architecture.md``. Function-local and ``TYPE_CHECKING`` imports count: a cycle hidden in a
function is still a cycle.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
from package_tree import package_dirs, stage

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = tuple(sorted(set(package_dirs().values())))
MAX_LINES = 400
"""Modules stay readable: never more than 400 lines (issue #14: "no module over ~400 lines")."""


_DUMP = """
import json, grimp
g = grimp.build_graph("ptplan", cache_dir=None)
print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in sorted(g.modules)}))
"""


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package in its installed shape (an editable install's import hook is invisible to
    grimp, which walks the file system from the package's folder)."""
    return stage(tmp_path_factory.mktemp("staged"))


def _env(staged: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(staged)}


@pytest.fixture(scope="module")
def graph(staged: Path) -> grimp.ImportGraph:
    out = subprocess.run([sys.executable, "-c", _DUMP], env=_env(staged), cwd=staged,
                         capture_output=True, text=True, check=True).stdout
    edges = json.loads(out)
    g = grimp.ImportGraph()
    for m in edges:
        g.add_module(m)
    for m, imported in edges.items():
        for i in imported:
            g.add_import(importer=m, imported=i)
    return g


def test_graph_is_the_whole_package(graph: grimp.ImportGraph) -> None:
    """The staged tree holds every folder's modules (a missing mapping would hide layers)."""
    for top in ("ptplan.cli.app", "ptplan.providers.registry", "ptplan.policies.model",
                "ptplan.templates"):
        assert top in graph.modules


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            succ = [w for w in edges[v] if w in edges]
            if i < len(succ):
                work.append((v, i + 1))
                w = succ[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def test_no_import_cycle(graph: grimp.ImportGraph) -> None:
    cycles = _cycles(graph)
    assert cycles == [], f"import cycles between modules: {cycles}"


def test_cycle_detector_finds_a_cycle() -> None:
    g = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c"):
        g.add_module(m)
    g.add_import(importer="p.a", imported="p.b")
    g.add_import(importer="p.b", imported="p.a")
    g.add_import(importer="p.c", imported="p.a")
    assert _cycles(g) == [["p.a", "p.b"]]


def test_layer_contracts_kept(staged: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command"
                           " as c; c()", "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                          env=_env(staged), cwd=staged, capture_output=True, text=True)
    assert proc.returncode == 0, f"an import-linter contract is broken:\n{proc.stdout}{proc.stderr}"


def test_catalog_kinds_register_explicitly(graph: grimp.ImportGraph) -> None:
    """Catalog kinds are listed in ptplan.providers.registry; no kind imports the registry."""
    importers = graph.find_modules_that_directly_import("ptplan.providers.registry")
    assert not {m for m in importers if m.startswith("ptplan.providers.")}


def test_modules_stay_small() -> None:
    big = []
    for pkg in FOLDERS:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                big.append(f"{path.relative_to(ROOT)} ({n} lines)")
    assert big == [], f"modules over {MAX_LINES} lines: {big}"
