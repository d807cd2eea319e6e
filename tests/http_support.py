"""Shared pieces of the Streamable HTTP tests: a loopback server and a hand-driven client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio

import trio_mcp
from trio_mcp.transports._sse import ServerSentEvent, SSEParser

from .helpers import example_app

TOKENS = {"token-alice": "alice", "token-bob": "bob"}
ACCEPT_BOTH = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-http-test", "version": "1.0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(request_id: Any, name: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, **params}}


@asynccontextmanager
async def serving(
    app: trio_mcp.App | None = None, **options: Any
) -> AsyncIterator[tuple[str, trio_mcp.StreamableHttpApp]]:
    """Serve a StreamableHttpApp(app, **options) on loopback; yield (url, http_app)."""
    http_app = trio_mcp.StreamableHttpApp(app or example_app(), **options)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(trio_mcp.serve_http, http_app)
        yield address.url, http_app
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(10, read=None)) as c:
        yield c


class Raw:
    """A hand-driven HTTP client of one endpoint."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self.client, self.url = client, url
        self.session_id: str | None = None
        self.headers: dict[str, str] = {}

    def h(self, accept: str = ACCEPT_BOTH, **more: str) -> dict[str, str]:
        out = {"Accept": accept, "Content-Type": "application/json", **self.headers}
        if self.session_id is not None:
            out["Mcp-Session-Id"] = self.session_id
        out.update({k.replace("_", "-"): v for k, v in more.items()})
        return out

    async def post(self, body: Any, **headers: str) -> httpx.Response:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.client.post(self.url, content=data, headers=self.h(**headers))

    async def initialize(self) -> dict[str, Any]:
        response = await self.post(INITIALIZE)
        assert response.status_code == 200, response.text
        self.session_id = response.headers["mcp-session-id"]
        assert (await self.post(INITIALIZED)).status_code == 202
        result: dict[str, Any] = response.json()["result"]
        return result


def events_of(body: bytes) -> list[ServerSentEvent]:
    parser = SSEParser()
    return parser.feed(body)


def messages_of(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in events_of(body) if e.data]


@asynccontextmanager
async def raw_session(**options: Any) -> AsyncIterator[tuple[Raw, trio_mcp.StreamableHttpApp]]:
    async with serving(**options) as (url, http_app), http_client() as client:
        raw = Raw(client, url)
        await raw.initialize()
        yield raw, http_app
