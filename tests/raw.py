"""A raw-wire client: send exact bytes to the example server, read its JSON back.

Used to pin what the peer does with input our own client would never send.
``open_raw(kind)`` works over memory (the server peer on an in-memory bus,
lines decoded exactly as a transport would), stdio (a real subprocess) and
ws (a real WebSocket on loopback) and http (a real Streamable HTTP server on
loopback: each line is one POST; JSON answers, SSE events and the JSON-RPC
error bodies of 4xx answers all arrive as received messages).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from functools import partial
from typing import Any

import trio

import trio_mcp
from trio_mcp.peer._messages._jsonrpc import decode_message, message_to_json
from trio_mcp.peer._session import open_bus
from trio_mcp.transports._framing import LineBuffer, LineTooLong
from trio_mcp.transports._sse import SSEParser

from .helpers import TASK_SERVER, example_app

#: Seconds a raw peer waits for the server's next message before the test fails: room for a
#: server subprocess to start on a loaded machine (4 test workers on 2 busy cores took
#: over 10 s); a test that passes never waits for it.
READ_TIMEOUT = 30.0
INIT = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {"form": {}}, "sampling": {}},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class RawConnection:
    """Send raw lines, receive parsed JSON objects."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    async def send_line(self, data: bytes) -> None:
        raise NotImplementedError

    async def _receive(self) -> dict[str, Any]:
        raise NotImplementedError

    async def send(self, obj: Any) -> None:
        """Send one JSON value as one message."""
        await self.send_line(json.dumps(obj).encode())

    async def recv(self, timeout: float = READ_TIMEOUT) -> dict[str, Any]:
        """The next message from the server (``timeout`` bounds a failure, not a pass)."""
        with trio.fail_after(timeout):
            msg = await self._receive()
        self.received.append(msg)
        return msg

    async def recv_response(
        self, request_id: Any, timeout: float = READ_TIMEOUT
    ) -> dict[str, Any]:
        """Skip notifications and other traffic until the answer to ``request_id``."""
        while True:
            msg = await self.recv(timeout)
            if "method" not in msg and msg.get("id") == request_id:
                return msg

    async def request(self, request_id: Any, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request and wait for its response."""
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)
        return await self.recv_response(request_id)

    async def initialize(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        """Do the handshake by hand; return the InitializeResult."""
        init = json.loads(json.dumps(INIT))
        if capabilities is not None:
            init["params"]["capabilities"] = capabilities
        await self.send(init)
        response = await self.recv_response("init")
        await self.send(INITIALIZED)
        result: dict[str, Any] = response["result"]
        return result

    async def ping_ok(self, request_id: Any = "ping") -> bool:
        """True when a ping is answered with an empty result."""
        response = await self.request(request_id, "ping")
        return response.get("result") == {}


class _MemoryRaw(RawConnection):
    def __init__(self, ends: Any) -> None:
        super().__init__()
        self.ends = ends
        self.buffer = LineBuffer(1024 * 1024)

    async def send_line(self, data: bytes) -> None:
        for item in self.buffer.feed(data + b"\n"):
            if isinstance(item, LineTooLong):
                await self.ends.to_peer.send(trio_mcp.Undecodable(
                    trio_mcp.INVALID_REQUEST, "Invalid request: message too long"))
            else:
                await self.ends.to_peer.send(decode_message(item))

    async def _receive(self) -> dict[str, Any]:
        msg = await self.ends.from_peer.receive()
        out: dict[str, Any] = json.loads(json.dumps(message_to_json(msg)))
        return out


class _StdioRaw(RawConnection):
    def __init__(self, proc: trio.Process) -> None:
        super().__init__()
        self.proc = proc
        self.buffer = LineBuffer(64 * 1024 * 1024)
        self.pending: list[bytes] = []

    async def send_line(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(data + b"\n")

    async def _receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while not self.pending:
            data = await self.proc.stdout.receive_some(65536)
            if not data:
                raise EOFError("server closed stdout")
            self.pending.extend(x for x in self.buffer.feed(bytes(data))
                                if isinstance(x, bytes))
        out: dict[str, Any] = json.loads(self.pending.pop(0))
        return out


class _WsRaw(RawConnection):
    def __init__(self, ws: Any) -> None:
        super().__init__()
        self.ws = ws

    async def send_line(self, data: bytes) -> None:
        await self.ws.send_message(data.decode("utf-8", errors="surrogateescape")
                                   if b"\xff" not in data else data)

    async def _receive(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(await self.ws.get_message())
        return out


class _HttpRaw(RawConnection):
    """Each line is one POST; answers (and the session's GET stream) feed one inbox."""

    def __init__(self, url: str, client: Any, nursery: trio.Nursery) -> None:
        super().__init__()
        self.url = url
        self.client = client
        self.nursery = nursery
        self.session_id: str | None = None
        self.inbox_send, self.inbox = trio.open_memory_channel[dict[str, Any]](1000)

    def _headers(self, accept: str) -> dict[str, str]:
        headers = {"Accept": accept, "Content-Type": "application/json"}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        return headers

    async def send_line(self, data: bytes) -> None:
        # Wait for the answer's headers: lines reach the server in order.
        await self.nursery.start(self._post, data)

    async def _post(self, data: bytes, task_status: Any) -> None:
        request = self.client.build_request("POST", self.url, content=data,
                                            headers=self._headers(_ACCEPT_BOTH))
        response = await self.client.send(request, stream=True)
        try:
            if "mcp-session-id" in response.headers and self.session_id is None:
                self.session_id = response.headers["mcp-session-id"]
                self.nursery.start_soon(self._listen)
            task_status.started()
            await self._read(response)
        finally:
            await response.aclose()

    async def _read(self, response: Any) -> None:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            parser = SSEParser()
            async with aclosing(response.aiter_bytes()) as chunks:
                async for chunk in chunks:
                    for event in parser.feed(chunk):
                        if event.data:
                            await self.inbox_send.send(json.loads(event.data))
        else:
            body = await response.aread()
            if body:
                await self.inbox_send.send(json.loads(body))

    async def _listen(self) -> None:
        async with self.client.stream("GET", self.url,
                                      headers=self._headers("text/event-stream")) as response:
            if response.status_code == 200:
                await self._read(response)

    async def _receive(self) -> dict[str, Any]:
        return await self.inbox.receive()


_ACCEPT_BOTH = "application/json, text/event-stream"


@asynccontextmanager
async def stdio_server(argv: list[str]) -> AsyncIterator[_StdioRaw]:
    """A server subprocess spoken to over raw stdio; closed (stdin, then a kill) at the end."""
    import subprocess

    proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        yield _StdioRaw(proc)
    finally:
        with trio.CancelScope(shield=True):
            assert proc.stdin is not None
            await proc.stdin.aclose()
            with trio.move_on_after(5):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


@asynccontextmanager
async def open_raw(kind: str, app: trio_mcp.App | None = None) -> AsyncIterator[RawConnection]:
    """A raw connection to the example server (or ``app``) over ``kind``."""
    app = app or example_app()
    if kind == "memory":
        bus, ends = open_bus(info={"transport": "memory"})
        async with trio.open_nursery() as nursery:
            peer = trio_mcp.Peer(app, bus, trio_mcp.Role.SERVER)
            await nursery.start(peer.run)
            yield _MemoryRaw(ends)
            nursery.cancel_scope.cancel()
    elif kind == "stdio":
        async with stdio_server([sys.executable, str(TASK_SERVER)]) as raw:
            yield raw
    elif kind == "ws":
        from trio_websocket import open_websocket_url

        async with trio.open_nursery() as nursery:
            listener = await nursery.start(partial(trio_mcp.serve_websocket, app, "127.0.0.1", 0))
            async with open_websocket_url(f"ws://127.0.0.1:{listener.port}/",
                                          subprotocols=["mcp"]) as ws:
                yield _WsRaw(ws)
            nursery.cancel_scope.cancel()
    elif kind == "http":
        import httpx

        async with httpx.AsyncClient(trust_env=False, timeout=None) as client:
            async with trio.open_nursery() as nursery:
                address = await nursery.start(partial(trio_mcp.serve_http, app, "127.0.0.1", 0))
                yield _HttpRaw(address.url, client, nursery)
                nursery.cancel_scope.cancel()
    else:  # pragma: no cover
        raise ValueError(kind)
