"""The package's layers point down only (pyproject.toml ``[tool.importlinter]``): cli/demo ->
cluster supervisor/chaos -> broker/controller/spark/sim -> client/storage/replication ->
records/wire/metadata -> errors; and no import cycles (import-linter's ``acyclic_siblings`` in
``./dev lint``, and below over grimp's graph of every module). import-linter and grimp read the
real import graph, imports inside functions and under ``TYPE_CHECKING`` included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]


def test_layers_point_down_only() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "KEPT" in proc.stdout and "BROKEN" not in proc.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(
                        child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph("floodmark")
    assert "floodmark.broker.broker" in graph.modules
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.c")
    assert _cycles(graph) == []
    graph.add_import(importer="p.c", imported="p.a")  # a lazy import inside a function, say
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_lint_checks_for_cycles() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert 'type = "acyclic_siblings"' in text and 'ancestors = ["floodmark"]' in text


def test_unit_tests_mirror_the_source_tree() -> None:
    """``tests/unit/<package>/`` for the tests of ``floodmark.<package>``; only the tests of the
    top-level modules (``records.py``, ``errors.py``, ...) sit in ``tests/unit/`` itself."""
    src, unit = REPO / "src" / "floodmark", REPO / "tests" / "unit"
    packages = {p.name for p in src.iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in unit.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= packages, f"tests/unit folders without a package: {folders - packages}"
    modules = {p.stem for p in src.glob("*.py")}
    loose = [p.name for p in unit.glob("test_*.py")
             if not any(p.stem.startswith(f"test_{m}") for m in modules)
             and p.stem not in ("test_layers", "test_package_start", "test_error_hierarchy",
                                "test_constants_once")]
    assert loose == [], f"move these into tests/unit/<package>/: {loose}"
