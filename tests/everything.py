"""Connect a trio_mcp client to ``examples/everything_server.py`` over any transport.

Like :func:`tests.helpers.connect` (which serves ``task_server.py``), for the
server with every feature: ``memory`` (both peers in this process), ``stdio``
(a real subprocess), ``ws`` (a real WebSocket on loopback) and ``http`` (a real
Streamable HTTP server on loopback).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio

import trio_mcp

from .helpers import EXAMPLES, load_example

EVERYTHING_SERVER = EXAMPLES / "everything_server.py"


def everything_app() -> trio_mcp.App:
    """A fresh App of the everything server."""
    app: trio_mcp.App = load_example("everything_server").build_app()
    return app


class Seen:
    """What a :func:`feature_client` App received, in order of arrival."""

    def __init__(self) -> None:
        self.logs: list[trio_mcp.LoggingMessageParams] = []
        self.updated: list[str] = []
        self.list_changed: list[str] = []
        self.elicitations: list[trio_mcp.ElicitParams] = []
        self.completed: list[str] = []
        self.changed = trio.Event()

    def _note(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def wait_for(self, predicate: Any) -> None:
        """Wait until ``predicate()`` is true (a test's own timeout bounds it)."""
        while not predicate():
            await self.changed.wait()


def feature_client(
    *,
    roots: list[str] | None = None,
    modes: tuple[str, ...] = ("form", "url"),
    answer: dict[str, Any] | None = None,
) -> tuple[trio_mcp.App, Seen]:
    """A client App recording log messages, updates, list changes and elicitations."""
    app = trio_mcp.App("feature-client", "1.0", elicitation_modes=modes)
    seen = Seen()

    @app.on_log_message
    def on_log(peer: trio_mcp.Peer, params: trio_mcp.LoggingMessageParams) -> None:
        seen.logs.append(params)
        seen._note()

    @app.on_resource_updated
    def on_updated(peer: trio_mcp.Peer, uri: str) -> None:
        seen.updated.append(uri)
        seen._note()

    @app.on_list_changed
    def on_changed(peer: trio_mcp.Peer, kind: str) -> None:
        seen.list_changed.append(kind)
        seen._note()

    @app.on_elicitation_complete
    def on_complete(peer: trio_mcp.Peer, elicitation_id: str) -> None:
        seen.completed.append(elicitation_id)
        seen._note()

    @app.on_elicitation
    async def elicit(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        seen.elicitations.append(params)
        if params.mode == "url":
            return trio_mcp.ElicitResult(action="accept")
        return trio_mcp.ElicitResult(action="accept", content=answer or {"response": "yes"})

    if roots is not None:
        app.set_roots(roots)
    return app, seen


@asynccontextmanager
async def connect_everything(
    kind: str, client: trio_mcp.App, *, server: trio_mcp.App | None = None
) -> AsyncIterator[trio_mcp.Peer]:
    """Yield a client peer connected to the everything server over ``kind``."""
    if kind == "memory":
        async with trio_mcp.open_memory_pair(server or everything_app(), client) as (peer, _):
            yield peer
    elif kind == "stdio":
        command = [sys.executable, str(EVERYTHING_SERVER)]
        async with trio_mcp.open_stdio_client(command, client) as peer:
            yield peer
    elif kind == "ws":
        app = server or everything_app()
        async with trio.open_nursery() as nursery:
            listener = await nursery.start(partial(trio_mcp.serve_websocket, app, "127.0.0.1", 0))
            async with trio_mcp.open_websocket_client(
                f"ws://127.0.0.1:{listener.port}/", client
            ) as peer:
                yield peer
            nursery.cancel_scope.cancel()
    elif kind == "http":
        app = server or everything_app()
        async with trio.open_nursery() as nursery:
            address = await nursery.start(partial(trio_mcp.serve_http, app, "127.0.0.1", 0))
            async with trio_mcp.open_http_client(address.url, client) as peer:
                yield peer
            nursery.cancel_scope.cancel()
    else:  # pragma: no cover
        raise ValueError(kind)
