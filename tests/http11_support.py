"""Shared pieces of the llhttp server's tests: a recording ASGI app, a raw-socket client."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from trio_mcp import HttpServerSettings
from trio_mcp.transports._http11._server import Http11Server

HOST = b"Host: 127.0.0.1\r\n"


@attrs.define
class EchoApp:
    """An ASGI app that answers each request with what it received.

    The answer's body is ``METHOD PATH?QUERY body-length`` then the body;
    ``/stream`` answers in pieces (SSE-like) until the client goes, and
    records that it saw ``http.disconnect`` (``/flood``: 256 KiB pieces, back to
    back, as fast as the client takes them); ``/slow`` waits for ``release``;
    ``/fail`` raises; ``/silent`` returns without answering; ``/echo-parts``
    answers each body piece as it arrives.
    """

    seen: list[dict[str, Any]] = attrs.field(factory=list)
    disconnected: trio.Event = attrs.field(factory=trio.Event)
    streaming: trio.Event = attrs.field(factory=trio.Event)
    release: trio.Event = attrs.field(factory=trio.Event)
    slow_started: trio.Event = attrs.field(factory=trio.Event)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.seen.append(scope)
        path = scope["path"]
        if path in ("/stream", "/flood"):
            await self._stream(receive, send, flood=path == "/flood")
            return
        if path == "/fail":
            raise ValueError("the app failed")
        if path == "/silent":
            return
        if path == "/echo-parts":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                await send({"type": "http.response.body",
                            "body": b"part %d;" % len(message["body"]),
                            "more_body": message["more_body"]})
                if not message["more_body"]:
                    return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        if path == "/slow":
            self.slow_started.set()
            await self.release.wait()
        query = scope["query_string"]
        head = f"{scope['method']} {path}".encode() + (b"?" + query if query else b"")
        answer = head + b" %d\n" % len(body) + body
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"),
                                (b"content-length", b"%d" % len(answer))]})
        await send({"type": "http.response.body", "body": answer})

    async def _stream(self, receive: Any, send: Any, *, flood: bool = False) -> None:
        while (await receive())["type"] != "http.request":
            pass
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        async with trio.open_nursery() as nursery:

            async def beat() -> None:
                piece = b"data: " + b"x" * (256 * 1024) + b"\n\n" if flood else b"data: beat\n\n"
                while True:
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
                    self.streaming.set()
                    await trio.sleep(0 if flood else 0.05)

            nursery.start_soon(beat)
            assert (await receive())["type"] == "http.disconnect"
            self.disconnected.set()
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def running(
    app: Any, settings: HttpServerSettings | None = None, context: ssl.SSLContext | None = None,
) -> AsyncIterator[tuple[int, Http11Server, trio.CancelScope]]:
    """Serve ``app`` on loopback; yield (port, server, the server's cancel scope)."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    server = Http11Server(app, settings or HttpServerSettings(max_body=1024), context)
    scope = trio.CancelScope()

    async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await server.serve(listeners, task_status=task_status)

    async with trio.open_nursery() as nursery:
        await nursery.start(run)
        yield port, server, scope
        scope.cancel()


async def read_all(stream: trio.abc.Stream) -> bytes:
    """Read until the server closes the connection."""
    data = b""
    while True:
        try:
            chunk = await stream.receive_some(65536)
        except trio.BrokenResourceError:  # reset: the server closed with data unread
            return data
        if not chunk:
            return data
        data += chunk


async def exchange(port: int, data: bytes, *, eof: bool = True) -> bytes:
    """Send ``data`` on a new connection and read until the server closes it."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        if eof:
            await stream.send_eof()
        return await read_all(stream)


@attrs.frozen
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    def header(self, name: bytes) -> bytes | None:
        values = [v for n, v in self.headers if n == name]
        assert len(values) <= 1, self.headers
        return values[0] if values else None


def parse_answers(data: bytes, *, head_only: bool = False) -> tuple[list[Answer], bytes]:
    """Split ``data`` into complete HTTP/1.1 answers; also return what is left over."""
    answers = []
    while b"\r\n\r\n" in data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        version, status, _reason = lines[0].split(b" ", 2)
        assert version == b"HTTP/1.1", lines[0]
        headers = []
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers.append((name.strip().lower(), value.strip()))
        names = dict(headers)
        if int(status) in (100, 204, 304) or head_only:
            body = b""
        elif b"content-length" in names:
            size = int(names[b"content-length"])
            if len(rest) < size:
                break
            body, rest = rest[:size], rest[size:]
        elif names.get(b"transfer-encoding") == b"chunked":
            body = b""
            while True:
                line, _, rest = rest.partition(b"\r\n")
                size = int(line, 16)
                body += rest[:size]
                rest = rest[size + 2:]
                if size == 0:
                    break
        else:
            body, rest = rest, b""
        answers.append(Answer(int(status), headers, body))
        data = rest
    return answers, data


def only_answer(data: bytes) -> Answer:
    """The one answer in ``data`` (the server closed after it)."""
    answers, rest = parse_answers(data)
    assert len(answers) == 1 and rest == b"", (answers, rest)
    return answers[0]
