"""Shared fixtures: the transport parameter, and the schema check of every test's messages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from trio_mcp.peer._session import _outbound

from .helpers import HTTP_SERVERS, LLHTTP, SCHEMA_PATH, TRANSPORTS
from .postgres_server import (
    postgres_available,
    postgres_server,
    postgres_shared,
    postgres_template,
    postgres_url,
)
from .redis_cluster import redis_cluster
from .redis_server import redis_available, redis_server, redis_url
from .wire_schema import check_sent

__all__ = [  # fixtures for every test module
    "postgres_available", "postgres_server", "postgres_shared", "postgres_template",
    "postgres_url", "redis_available", "redis_cluster", "redis_server", "redis_url",
]  # fmt: skip

#: Input generation and examples run beside the other xdist workers: how slow they are
#: says nothing of the code under test (a loaded CI machine met ``too_slow`` there).
settings.register_profile(
    "trio-mcp", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("trio-mcp")

#: The llhttp server's own tests need httptools (the ``fast`` extra); CI's run with the
#: ``test`` extra alone has none (serve_http then runs hypercorn).
collect_ignore = [] if LLHTTP else ["transports/http11"]

#: Every message a trio_mcp peer sent or received during the running test, as
#: (direction, json, method); what was sent is checked against the official schema of its
#: era when the test ends (``schema_check``).
RECORDED: list[tuple[str, dict[str, Any], str | None]] = []


def _record(direction: str, wire: dict[str, Any], method: str | None) -> None:
    # Copy now: dicts may be reused by the caller later.
    RECORDED.append((direction, json.loads(json.dumps(wire)), method))


@pytest.fixture(autouse=True)
def schema_check() -> Iterator[None]:
    """When the test ends, every message its in-process peers sent (``RECORDED``) must
    validate against the official schema of its era (``tests/wire_schema.py``); a violation
    fails the test at teardown. Each test is checked on its own: no order, any worker."""
    RECORDED.clear()
    try:
        yield
        check_sent(RECORDED)
    finally:
        RECORDED.clear()


@pytest.fixture(autouse=True)
def record_messages(schema_check: None) -> Iterator[None]:
    """Record every message of the test, for ``schema_check``."""
    _outbound.message_observers.append(_record)
    try:
        yield
    finally:
        _outbound.message_observers.remove(_record)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (load runs, large fuzz budgets, the benchmark smoke runs) are
    skipped unless the ``-m`` expression names them: ``python -m pytest -q -m slow`` runs
    them (``.ci/run`` does, after the README's test command)."""
    if "slow" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow (.ci/run does)")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


@pytest.fixture(params=HTTP_SERVERS)
def both_http_servers(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Each HTTP/1.1 server in turn: ``trio_mcp.serve_http`` runs it for this test.

    A module opts in with ``pytestmark = pytest.mark.usefixtures("both_http_servers")``;
    every ``trio_mcp.serve_http`` its tests start (``http_support.serving`` too) then
    runs on llhttp, then on hypercorn.
    """
    import functools

    import trio_mcp

    monkeypatch.setattr(trio_mcp, "serve_http",
                        functools.partial(trio_mcp.serve_http, server=request.param))
    yield request.param


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    """Each transport in turn: memory, stdio, ws, http."""
    return str(request.param)


@pytest.fixture(scope="session")
def schema() -> dict[str, Any]:
    """The official MCP 2025-11-25 JSON Schema."""
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data
