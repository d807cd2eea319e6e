"""The shape of the package: layers, no import cycle, methods kept with their class.

These pin the split of the peer by responsibility (a JSON-RPC session that
knows no MCP, one module per feature, a task runtime below both).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trio_mcp.peer._features import _catalog
from trio_mcp.peer._peer import Peer

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "trio_mcp"


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_architecture_no_free_function_takes_another_class_self() -> None:
    """Cohesion, not size, decides the layout: what works on a class's state is its method.

    A module-level function whose first parameter is ``self`` is a method moved
    out of its class (to keep a module or class under a size cap, as once done).
    """
    found = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args.posonlyargs + node.args.args
                if args and args[0].arg == "self":
                    found.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert found == []


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the components with more than one module (cycles)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_architecture_no_import_cycle_between_any_two_modules() -> None:
    # Every import counts, TYPE_CHECKING ones and function-level ones too.
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the dev extra)")
    graph = grimp.build_graph("trio_mcp")
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _strongly_connected(edges) == []


def test_architecture_cycle_detector_finds_a_cycle() -> None:
    # The detector above must be able to fail.
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]
    ]


def test_architecture_import_linter_contracts_are_kept() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.skip("lint-imports is not installed (it comes with the dev extra)")
    proc = subprocess.run(
        [lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "BROKEN" not in proc.stdout


def test_architecture_peer_is_the_sum_of_the_catalogued_features() -> None:
    assert Peer.__mro__[1 : 1 + len(_catalog.FEATURES)] == _catalog.FEATURES


def test_architecture_session_names_no_mcp_method() -> None:
    source = (PACKAGE / "peer" / "_session" / "_session.py").read_text(encoding="utf-8")
    methods = {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.count("/") >= 1
        and " " not in node.value
    }
    # Only the JSON-RPC-level notifications the session must own itself.
    assert methods <= {"notifications/cancelled", "notifications/progress"}


def _direct_imports() -> dict[str, set[str]]:
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the dev extra)")
    graph = grimp.build_graph("trio_mcp")
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def test_architecture_features_import_no_dialect() -> None:
    # Issue 31: the 2026-07-28 dialect is its own package, and no feature imports it
    # (TYPE_CHECKING and function-level imports count too). No exception is listed.
    imports = _direct_imports()
    dialects = {m for m in imports if m.startswith("trio_mcp.peer._dialects.")}
    assert {"trio_mcp.peer._dialects._modern", "trio_mcp.peer._dialects._era"} <= dialects
    crossing = sorted(
        f"{m} -> {i}"
        for m, targets in imports.items()
        if m.startswith("trio_mcp.peer._features")
        for i in targets
        if i.startswith("trio_mcp.peer._dialects")
    )
    assert crossing == []


def test_architecture_transports_import_only_the_faces_of_peer_and_dialects() -> None:
    # A transport may import trio_mcp.peer and trio_mcp.peer._dialects (their faces), the
    # messages and the session, but no module inside _features or _dialects.
    imports = _direct_imports()
    crossing = sorted(
        f"{m} -> {i}"
        for m, targets in imports.items()
        if m.startswith("trio_mcp.transports")
        for i in targets
        if i.startswith(("trio_mcp.peer._features", "trio_mcp.peer._dialects."))
    )
    assert crossing == []
