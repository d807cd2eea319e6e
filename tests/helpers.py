"""Test helpers: connect a trio_mcp client to the example server over any transport.

``connect(kind, client_app)`` yields a client :class:`trio_mcp.Peer` talking to
``examples/task_server.py``'s tools:

* ``memory``: both peers in this process, joined by the in-memory bus pair;
* ``stdio``: the example server as a real subprocess over its stdin/stdout;
* ``ws``: a real WebSocket server on 127.0.0.1 in this process;
* ``http``: a real Streamable HTTP server (``serve_http``'s default: llhttp when
  ``httptools`` is installed, else hypercorn) on 127.0.0.1 in this process.
"""

from __future__ import annotations

import importlib.util
import random
import socket
import subprocess
import sys
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TASK_SERVER = EXAMPLES / "task_server.py"
#: The official JSON Schemas the tests validate against, copied into the repository
#: (``spec/README.md`` names their source commits and licences).
SPEC = ROOT / "spec"
#: MCP 2025-11-25.
SCHEMA_PATH = SPEC / "schema-2025-11-25.json"
#: MCP 2026-07-28 (the tasks extension is not in it).
SCHEMA_2026_PATH = SPEC / "schema-2026-07-28.json"
#: The tasks extension ``io.modelcontextprotocol/tasks`` (ext-tasks at e434597).
SCHEMA_EXT_TASKS_PATH = SPEC / "schema-ext-tasks-draft.json"
TRANSPORTS = ("memory", "stdio", "ws", "http")
#: ``httptools`` (the ``fast`` extra) is installed: serve_http's llhttp server can run.
LLHTTP = importlib.util.find_spec("httptools") is not None
#: For a parameter that runs the llhttp server.
needs_llhttp = pytest.mark.skipif(not LLHTTP, reason="httptools (the fast extra) not installed")
#: Each HTTP/1.1 server serve_http can run, as parameters (llhttp skipped without httptools).
HTTP_SERVERS = (pytest.param("llhttp", marks=needs_llhttp), "hypercorn")
_SEEN: weakref.WeakKeyDictionary[trio_mcp.App, list[Any]] = weakref.WeakKeyDictionary()


def load_example(name: str) -> Any:
    """Import ``examples/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example_app(limits: trio_mcp.TaskLimits | None = None) -> trio_mcp.App:
    """A fresh App with the example server's tools."""
    app: trio_mcp.App = load_example("task_server").build_app(limits)
    return app


def client_app(
    *,
    sampling_text: str = "sampled text",
    elicit_content: dict[str, Any] | None = None,
    host_tasks: bool = True,
) -> trio_mcp.App:
    """A client App that answers sampling and elicitation automatically."""
    app = trio_mcp.App("test-client", "1.0", host_tasks=host_tasks)
    seen: list[Any] = []

    @app.on_sampling
    async def sample(
        ctx: trio_mcp.RequestContext, params: trio_mcp.CreateMessageParams
    ) -> trio_mcp.CreateMessageResult:
        seen.append(("sampling", ctx.task_id, params))
        return trio_mcp.CreateMessageResult(
            role="assistant", content={"type": "text", "text": sampling_text}, model="test-model"
        )

    @app.on_elicitation
    async def elicit(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        seen.append(("elicitation", ctx.task_id, params))
        return trio_mcp.ElicitResult(
            action="accept", content=elicit_content if elicit_content is not None else {"approve": True}
        )

    _SEEN[app] = seen
    return app


def seen_by(app: trio_mcp.App) -> list[Any]:
    """What the handlers of a :func:`client_app` were asked: (kind, task_id, params)."""
    return _SEEN[app]


@asynccontextmanager
async def connect(
    kind: str,
    client: trio_mcp.App | None = None,
    *,
    server: trio_mcp.App | None = None,
) -> AsyncIterator[trio_mcp.Peer]:
    """Yield a client peer connected to the example server over ``kind``."""
    client = client if client is not None else client_app()
    if kind == "memory":
        async with trio_mcp.open_memory_pair(server or example_app(), client) as (peer, _):
            yield peer
    elif kind == "stdio":
        async with trio_mcp.open_stdio_client([sys.executable, str(TASK_SERVER)], client) as peer:
            yield peer
    elif kind == "ws":
        app = server or example_app()
        async with trio.open_nursery() as nursery:
            listener = await nursery.start(partial(trio_mcp.serve_websocket, app, "127.0.0.1", 0))
            url = f"ws://127.0.0.1:{listener.port}/"
            async with trio_mcp.open_websocket_client(url, client) as peer:
                yield peer
            nursery.cancel_scope.cancel()
    elif kind == "http":
        app = server or example_app()
        async with trio.open_nursery() as nursery:
            address = await nursery.start(partial(trio_mcp.serve_http, app, "127.0.0.1", 0))
            async with trio_mcp.open_http_client(address.url, client) as peer:
                yield peer
            nursery.cancel_scope.cancel()
    else:  # pragma: no cover
        raise ValueError(kind)


@asynccontextmanager
async def serving(
    argv: list[str], env: dict[str, str] | None = None
) -> AsyncIterator[tuple[trio.Process, list[str]]]:
    """Start a server process that prints ``serving on URL ...`` on stderr.

    Yields the process and the words after ``serving on`` (the URL first); kills
    it at the end.
    """
    proc = await trio.lowlevel.open_process(argv, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stderr is not None
        seen = b""
        with trio.fail_after(30):
            while b"serving on " not in seen or not seen.split(b"serving on ", 1)[1].count(b"\n"):
                chunk = await proc.stderr.receive_some(4096)
                assert chunk, f"the server exited before serving: {seen!r}"
                seen += chunk
        yield proc, seen.decode().split("serving on ", 1)[1].split("\n", 1)[0].split()
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        if proc.stderr is not None:
            await proc.stderr.aclose()


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (what a bind to port 0 gets)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, for a server a test starts on a fixed port.

    Picked at random below the kernel's ephemeral range: a socket bound to
    port 0 (another test's server under xdist, any outgoing connection) never
    gets it, so it stays free until the server binds it (a port that was
    merely free a moment ago could be taken meanwhile, and the test would
    then talk to someone else's server).
    """
    high = _ephemeral_low()
    low = max(1_024, high - 12_000)
    for _ in range(500):
        port = random.randrange(low, high)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {low}..{high - 1}")
