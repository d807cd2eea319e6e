"""The shape of the package: layers and no import cycle (cohesion, not a line count,
decides how large a module or class is).

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
from trio_mcp.peer._features._peer import Peer

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "trio_mcp"


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


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
