"""``bench.http``'s "beyond the floor": a Trio HTTP/1.1 server on a C parser (llhttp via httptools).

    python bench/peers/http_llhttp.py PORT --floor [--sse]     # the fixed answer
    python bench/peers/http_llhttp.py PORT --app [--json-response]  # trio-mcp's ASGI app

hypercorn parses HTTP in pure Python (h11); node's http and uvicorn parse it
with llhttp, in C. This is the smallest server that runs an ASGI app on Trio
the way uvicorn's ``httptools`` protocol does on asyncio, to measure what such
a server would give: the parser is ``httptools.HttpRequestParser`` (llhttp);
one Trio task per connection reads, parses and runs the app for each request
in turn (no task per request); ``receive()`` after the body reads the socket
itself (a disconnect, or the next request's bytes kept for later); the
response head goes out with the first body chunk, chunked when the app
gives no ``Content-Length``. HTTP/1.1 keep-alive only: no pipelining of
responses, no upgrades, no TLS, no HTTP/2, no limits beyond a 4 MiB body.
A benchmark peer, not a server for trio-mcp (``bench/requirements-bench.txt``).

``--app`` serves ``examples/task_server.py``'s App through
``trio_mcp.StreamableHttpApp`` (SSE answers, as ``task_server.py --http``;
``--json-response``: JSON answers), its background part started first as
``serve_http`` does; ``--floor`` serves ``http_trio.py``'s fixed-answer app.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import httptools  # noqa: E402
import trio  # noqa: E402

App = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]],
                Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]
MAX_BODY = 4 * 1024 * 1024
READ_SIZE = 65536
REASONS = {200: b"OK", 202: b"Accepted", 204: b"No Content", 400: b"Bad Request",
           401: b"Unauthorized", 403: b"Forbidden", 404: b"Not Found",
           405: b"Method Not Allowed", 406: b"Not Acceptable", 409: b"Conflict",
           413: b"Payload Too Large", 415: b"Unsupported Media Type",
           500: b"Internal Server Error", 503: b"Service Unavailable"}


class _Parsed:
    """httptools callbacks: the requests complete so far, in order."""

    def __init__(self) -> None:
        self.done: list[tuple[bytes, list[tuple[bytes, bytes]], bytes, bool, bytes]] = []
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.size = 0
        self.parser = httptools.HttpRequestParser(self)

    def on_message_begin(self) -> None:
        self.url, self.headers, self.body, self.size = b"", [], [], 0

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_body(self, body: bytes) -> None:
        self.size += len(body)
        if self.size > MAX_BODY:
            raise httptools.HttpParserError("body too large")
        self.body.append(body)

    def on_message_complete(self) -> None:
        p = self.parser
        self.done.append((self.url, self.headers, b"".join(self.body),
                          p.should_keep_alive(), p.get_method()))


async def _connection(app: App, stream: trio.SocketStream) -> None:
    parsed = _Parsed()
    sock = stream.socket
    client = sock.getpeername()
    server = sock.getsockname()
    closed = False

    async def read_more() -> bool:
        nonlocal closed
        try:
            data = await stream.receive_some(READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            closed = True
            return False
        parsed.parser.feed_data(data)
        return True

    try:
        while True:
            while not parsed.done:
                if closed or not await read_more():
                    return
            url, headers, body, keep_alive, method = parsed.done.pop(0)
            keep_alive = await _serve_one(app, stream, read_more, lambda: closed, url, headers,
                                          body, method, client, server) and keep_alive
            if not keep_alive:
                return
    except httptools.HttpParserError:
        await stream.send_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n"
                              b"connection: close\r\n\r\n")
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await stream.aclose()


async def _serve_one(app: App, stream: trio.SocketStream, read_more: Callable[[], Awaitable[bool]],
                     is_closed: Callable[[], bool], url: bytes, headers: list[tuple[bytes, bytes]],
                     body: bytes, method: bytes, client: Any, server: Any) -> bool:
    """Run the app for one request; True when the connection may serve another."""
    parts = httptools.parse_url(url)
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
        "method": method.decode("ascii"), "scheme": "http",
        "path": parts.path.decode("utf-8", "replace"), "raw_path": parts.path,
        "query_string": parts.query or b"", "root_path": "", "headers": headers,
        "client": client[:2], "server": server[:2],
    }
    delivered = False
    head: list[bytes] = []
    state = {"chunked": False, "started": False, "done": False}

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        # After the body: wait for the client to go (a next request is kept).
        while not is_closed() and await read_more():
            pass
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            status = message["status"]
            out = [b"HTTP/1.1 %d %s\r\n" % (status, REASONS.get(status, b"Unknown"))]
            has_length = False
            for name, value in message.get("headers", ()):
                if name.lower() == b"content-length":
                    has_length = True
                out.append(name + b": " + value + b"\r\n")
            head.extend(out)
            state["length"] = has_length
            state["started"] = True
            return
        if kind != "http.response.body" or state["done"]:
            return
        data = message.get("body", b"")
        more = message.get("more_body", False)
        out = b""
        if head:
            if not state["length"]:
                if more:
                    state["chunked"] = True
                    head.append(b"transfer-encoding: chunked\r\n")
                else:
                    head.append(b"content-length: %d\r\n" % len(data))
            head.append(b"\r\n")
            out = b"".join(head)
            head.clear()
        if state["chunked"]:
            if data:
                out += b"%x\r\n" % len(data) + data + b"\r\n"
            if not more:
                out += b"0\r\n\r\n"
        else:
            out += data
        if not more:
            state["done"] = True
        if out:
            await stream.send_all(out)

    await app(scope, receive, send)
    if not state["done"]:
        if not state["started"]:
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    return not is_closed()


async def serve(app: App, port: int, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                ) -> None:
    """Serve ``app`` on 127.0.0.1:``port`` until cancelled."""
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1", backlog=1024)
    task_status.started()
    await trio.serve_listeners(lambda s: _connection(app, s), listeners)


async def serve_app(port: int, json_response: bool) -> None:
    import trio_mcp
    from examples.task_server import _tune_gc, build_app

    http_app = trio_mcp.StreamableHttpApp(build_app(), json_response=json_response)
    _tune_gc()
    async with trio.open_nursery() as nursery:
        await nursery.start(http_app.run)
        await serve(http_app, port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--floor", action="store_true")
    mode.add_argument("--app", action="store_true")
    parser.add_argument("--sse", action="store_true", help="the floor answers SSE")
    parser.add_argument("--json-response", action="store_true", help="the app answers JSON")
    args = parser.parse_args()
    if args.floor:
        from bench.peers.http_trio import floor_app

        trio.run(serve, floor_app(args.sse), args.port)
    else:
        trio.run(serve_app, args.port, args.json_response)


if __name__ == "__main__":
    main()
