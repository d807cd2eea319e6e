"""Session fixtures of the interop tests: the other implementations, installed on first use.

* ``node``: the path of ``node``; every test that needs Node.js is SKIPPED, with the reason
  shown, when it is not installed. Otherwise ``npm ci`` runs in ``tests/interop/node`` if
  the pinned packages are not installed yet.
* ``mcp130``: the interpreter of ``.interop/mcp130``, a venv with the Python SDK ``mcp``
  1.30.0, created with pip if missing. Those tests never skip.

The installs run once, right after collection when interop tests are selected, so their
time (a clean machine downloads ~100 npm packages and ~30 wheels) is not charged to the
per-test timeout. An install that fails fails the tests that need it, not the session.
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
    installs = {"mcp130": _support.ensure_mcp130}
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
