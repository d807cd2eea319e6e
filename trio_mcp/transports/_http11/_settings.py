"""The llhttp server's limits and timeouts, and whether it can run (``httptools``)."""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from typing import final

import attrs

from .._http_policy import Receive, Scope, Send

#: Whether ``httptools`` (the ``fast`` extra) is installed: ``serve_http``'s default server.
LLHTTP_AVAILABLE: bool = importlib.util.find_spec("httptools") is not None

#: Seconds an idle keep-alive connection stays open, on both servers. Longer than clients
#: keep an idle connection for reuse (httpx and so the Python SDK: 5 s; Node's undici:
#: 4 s): with 5 s (hypercorn's default), a request sent on a connection idle for about
#: 5 s crossed the server's close and failed with "connection reset" (seen on a loaded
#: machine: the Python SDK's OAuth flow leaves its connection idle while it gets a token).
KEEP_ALIVE_TIMEOUT: float = 30.0

#: An ASGI 3 application.
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@final
@attrs.frozen
class HttpServerSettings:
    """Limits and timeouts of the llhttp server (``serve_http(..., server="llhttp")``).

    Sizes are in bytes, times in seconds. Each refusal answers with its
    status and closes the connection.

    Attributes:
        max_request_target: Longest request target (the URL in the request
            line): 414 beyond.
        max_header_bytes: Largest request head (request line and header
            lines): 431 beyond. A head that never ends is refused once this
            many bytes (and at most one read more) have come.
        max_headers: Most header fields in a request: 431 beyond.
        max_body: Largest request body: 413, at once from its
            ``Content-Length`` (no ``100 Continue`` is sent), or as soon as a
            chunked body passes it. ``None`` (what
            :func:`~trio_mcp.serve_http` uses): the ASGI app's own limit only
            (``StreamableHttpApp.max_body``: 413 with a JSON-RPC error body, after
            reading at most that much; the connection then closes).
        max_connections: Connections served at once; a connection beyond
            gets 503 and is closed.
        headers_timeout: Seconds from a request's first byte (or a new
            connection) to the end of its head: 408 beyond (slowloris).
        keep_alive_timeout: Seconds an idle keep-alive connection waits for
            its next request before it is closed (no answer); by default
            :data:`KEEP_ALIVE_TIMEOUT`, longer than clients keep one for reuse.
        body_timeout: Seconds from the end of the head to the end of the
            body while the app reads it: 408 beyond (or, once an answer has
            started, the connection is closed).
        write_timeout: Seconds one write may wait for the client to take its
            bytes (a client that stopped reading, e.g. an SSE stream it never
            reads, fills the socket's buffers): the connection is closed
            beyond, and the app sees the client gone.
        shutdown_timeout: When the server is cancelled: seconds requests in
            progress (an SSE stream too) have to finish before they are
            cancelled. Idle connections close at once.
        server_header: The ``Server`` header's value on every answer;
            ``None`` sends none.
        date_header: Send a ``Date`` header on every answer.
        backlog: The listening socket's backlog.
    """

    max_request_target: int = 8 * 1024
    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    max_body: int | None = None
    max_connections: int = 1000
    headers_timeout: float = 10.0
    keep_alive_timeout: float = KEEP_ALIVE_TIMEOUT
    body_timeout: float = 30.0
    write_timeout: float = 30.0
    shutdown_timeout: float = 5.0
    server_header: str | None = None
    date_header: bool = True
    backlog: int = 1024
