"""A hardened HTTP/1.1 server for an ASGI app on Trio, parsing with llhttp (``httptools``).

:func:`~trio_mcp.serve_http` runs :class:`StreamableHttpApp` on it when
``httptools`` is installed (the ``fast`` extra); hypercorn's Trio worker is the
other choice (``server="hypercorn"``). The parser is llhttp in its strict
mode (what node's ``http`` runs); this module adds what a public server needs
around it:

- one Trio task per connection, which reads, parses and runs the app for
  each request in turn; the app's ``receive()`` reads the socket itself for
  the rest of a body and, once the body is in, to see the client go
  (``http.disconnect``) while a long answer (SSE) is written;
- limits: request target (414), request line and header bytes and header
  count (431), body (413, counted as it streams in, refused at once by its
  ``Content-Length``), connections at once (503);
- timeouts: the request head must arrive within ``headers_timeout`` (408:
  slowloris), an idle keep-alive connection closes after
  ``keep_alive_timeout``, a body must arrive within ``body_timeout`` (408);
- HTTP/1.0 and 1.1 keep-alive and ``Connection: close``, ``Expect:
  100-continue`` (417 for another expectation), chunked bodies, pipelined
  requests answered in order (reading paused while a few wait), ``HEAD``
  (no body written), ``Date`` and ``Server`` headers as configured;
- framing it refuses with 400 and a closed connection (RFC 9112 §6.1, §6.3,
  §5.2, §3.2): ``Content-Length`` with ``Transfer-Encoding``, duplicate or
  malformed ``Content-Length``, a ``Transfer-Encoding`` other than
  ``chunked`` last, ``Transfer-Encoding`` on HTTP/1.0, bad chunk sizes or
  extensions, obsolete line folding, bare CR or LF, invalid header names or
  values, a missing (HTTP/1.1) or repeated or malformed ``Host``; a version
  other than 1.0 and 1.1 gets 505; ``CONNECT`` gets 501 and the connection
  closed; an ``Upgrade`` is ignored (RFC 9110 §7.8): the request is served
  as plain HTTP and the connection closed after it;
- TLS through :class:`trio.SSLStream`; a graceful shutdown: cancelling the
  server stops accepting, closes idle connections at once and lets requests
  in progress finish within ``shutdown_timeout``.

Every error answer, every timeout and every refusal closes the connection
after it (a lingering close: the write side is shut and what the client
still sends is read and dropped for a moment, so that it sees the answer).
"""

from __future__ import annotations

import collections
import contextlib
import email.utils
import errno
import logging
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, Final, final

import attrs
import trio

from ._http_policy import Receive, Scope, Send

#: Whether ``httptools`` (the ``fast`` extra) is installed: ``serve_http``'s default server.
LLHTTP_AVAILABLE: bool
try:
    import httptools
except ImportError:  # without the `fast` extra: serve_http runs hypercorn
    LLHTTP_AVAILABLE = False
else:
    LLHTTP_AVAILABLE = True

log = logging.getLogger("trio_mcp.transports.http11")

#: An ASGI 3 application.
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_READ_SIZE: Final = 65536
#: Requests parsed ahead of the one being answered (pipelining) before reading pauses.
_MAX_AHEAD: Final = 8
#: Bytes of pipelined requests kept ahead before reading pauses.
_MAX_AHEAD_BYTES: Final = 256 * 1024
#: Seconds a closing connection goes on reading (and dropping) what the client sends.
_LINGER: Final = 2.0
_LINGER_BYTES: Final = 1024 * 1024
#: A ``Host`` value: a reg-name, IPv4 or IP-literal, and an optional port (RFC 3986 §3.2.2).
_HOST: Final = re.compile(rb"(\[[0-9A-Fa-f:.vV]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(:[0-9]*)?")
_REASONS: Final = {
    100: b"Continue", 200: b"OK", 201: b"Created", 202: b"Accepted", 204: b"No Content",
    301: b"Moved Permanently", 302: b"Found", 304: b"Not Modified",
    307: b"Temporary Redirect", 308: b"Permanent Redirect", 400: b"Bad Request",
    401: b"Unauthorized", 403: b"Forbidden", 404: b"Not Found", 405: b"Method Not Allowed",
    406: b"Not Acceptable", 408: b"Request Timeout", 409: b"Conflict", 410: b"Gone",
    411: b"Length Required", 413: b"Content Too Large", 414: b"URI Too Long",
    415: b"Unsupported Media Type", 417: b"Expectation Failed", 421: b"Misdirected Request",
    422: b"Unprocessable Content", 429: b"Too Many Requests",
    431: b"Request Header Fields Too Large", 500: b"Internal Server Error",
    501: b"Not Implemented", 502: b"Bad Gateway", 503: b"Service Unavailable",
    504: b"Gateway Timeout", 505: b"HTTP Version Not Supported",
}
_NO_BODY_STATUS: Final = frozenset({204, 304})


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
            chunked body passes it. ``None``: the ASGI app's own limit only
            (:func:`~trio_mcp.serve_http` passes the app's ``max_body``).
        max_connections: Connections served at once; a connection beyond
            gets 503 and is closed.
        headers_timeout: Seconds from a request's first byte (or a new
            connection) to the end of its head: 408 beyond (slowloris).
        keep_alive_timeout: Seconds an idle keep-alive connection waits for
            its next request before it is closed (no answer).
        body_timeout: Seconds from the end of the head to the end of the
            body while the app reads it: 408 beyond (or, once an answer has
            started, the connection is closed).
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
    keep_alive_timeout: float = 5.0
    body_timeout: float = 30.0
    shutdown_timeout: float = 5.0
    server_header: str | None = None
    date_header: bool = True
    backlog: int = 1024


class _Refusal(Exception):
    """Raised inside a parser callback: answer ``status`` and close."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@attrs.define(eq=False, slots=True)
class _Request:
    """One request as parsed so far; the app reads its body through ``receive``."""

    method: str
    target: bytes
    headers: list[tuple[bytes, bytes]]
    version: str
    keep_alive: bool
    expect_continue: bool = False
    chunks: collections.deque[bytes] = attrs.field(factory=collections.deque)
    buffered: int = 0
    size: int = 0
    complete: bool = False
    #: A status to answer (and close) instead of running the app, or after a body failed.
    refusal: tuple[int, str] | None = None
    upgrade: bool = False
    # The answer
    continued: bool = False
    started: bool = False
    finished: bool = False
    final_body_sent: bool = False
    status: int = 0
    chunked: bool = False
    head_only: bool = False
    remaining: int | None = None
    close_after: bool = False
    pending_head: bytes = b""


@attrs.define(eq=False, slots=True)
class _Turn:
    """One task at a time on a stream direction, with no scheduler pass when it is free.

    ``trio.Lock`` yields on every acquire; here the read or write that follows
    is the checkpoint. Waiting for a turn is cancellable and changes nothing.
    """

    busy: bool = False
    freed: trio.Event | None = None

    async def acquire(self) -> None:
        while self.busy:
            if self.freed is None:
                self.freed = trio.Event()
            await self.freed.wait()
        self.busy = True

    def release(self) -> None:
        self.busy = False
        if self.freed is not None:
            self.freed.set()
            self.freed = None


def _reason(status: int) -> bytes:
    return _REASONS.get(status, b"Unknown")


@attrs.define(eq=False)
class _DateHeader:
    """The ``Date`` header line, formatted once a second."""

    second: int = -1
    line: bytes = b""

    def get(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.line = b"date: " + email.utils.formatdate(now, usegmt=True).encode() + b"\r\n"
        return self.line


@final
@attrs.define(eq=False)
class _Connection:
    """One client connection: the parser's callbacks and the request/answer loop."""

    server: Http11Server
    stream: trio.abc.Stream
    scheme: str
    client: tuple[str, int] | None
    local: tuple[str, int] | None
    scope: trio.CancelScope = attrs.field(factory=lambda: trio.CancelScope(shield=True))
    queue: collections.deque[_Request] = attrs.field(factory=collections.deque)
    parser: httptools.HttpRequestParser = attrs.field(init=False)
    idle: bool = True
    eof: bool = False
    #: The parser has failed or switched protocols: nothing more is read.
    stopped: bool = False
    _reading: _Turn = attrs.field(factory=_Turn)
    _writing: _Turn = attrs.field(factory=_Turn)
    _response_done: trio.Event = attrs.field(factory=trio.Event)
    # What the parser has seen of the request being parsed.
    _parsing: _Request | None = None
    _in_head: bool = False
    _head_bytes: int = 0
    #: Bytes read between messages or in a head, since a head or message last ended.
    _raw_head_bytes: int = 0
    #: Counts heads and messages ended: tells ``_feed`` that one ended inside its data.
    _epoch: int = 0
    _target: bytearray = attrs.field(factory=bytearray)
    _headers: list[tuple[bytes, bytes]] = attrs.field(factory=list)

    _max_headers: int = attrs.field(init=False)
    _max_head: int = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        settings = self.server.settings
        self._max_headers = settings.max_headers
        self._max_head = settings.max_header_bytes

    # --- parser callbacks (run inside feed_data) -------------------------------------------

    def on_message_begin(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        self._target = bytearray()
        self._headers = []

    def on_url(self, url: bytes) -> None:
        self._target += url
        if len(self._target) > self.server.settings.max_request_target:
            raise _Refusal(414, "URI Too Long")

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._in_head:
            return  # a trailer field of a chunked body: dropped
        headers = self._headers
        headers.append((name.lower(), value))
        self._head_bytes += len(name) + len(value) + 4
        if len(headers) > self._max_headers:
            raise _Refusal(431, "Request Header Fields Too Large: too many fields")
        if self._head_bytes + len(self._target) > self._max_head:
            raise _Refusal(431, "Request Header Fields Too Large")

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._epoch += 1
        parser = self.parser
        version = parser.get_http_version()
        if version not in ("1.1", "1.0"):
            raise _Refusal(505, "HTTP Version Not Supported")
        method = parser.get_method().decode("ascii")
        request = _Request(method, bytes(self._target), self._headers, version,
                           parser.should_keep_alive())
        self._parsing = request
        self.queue.append(request)
        hosts = 0
        length: int | None = None
        chunked = False
        for name, value in self._headers:
            if name == b"host":
                hosts += 1
                if _HOST.fullmatch(value) is None:
                    raise _Refusal(400, "Bad Request: invalid Host")
            elif name == b"content-length":
                length = int(value)  # llhttp has checked its digits and that it is alone
            elif name == b"transfer-encoding":
                chunked = True
                if version == "1.0":
                    # RFC 9112 §6.1: the framing is faulty.
                    raise _Refusal(400, "Bad Request: Transfer-Encoding in HTTP/1.0")
            elif name == b"expect":
                if value.strip().lower() != b"100-continue":
                    raise _Refusal(417, "Expectation Failed")
                request.expect_continue = version == "1.1"
            elif name == b"upgrade":
                request.upgrade = True
        if hosts > 1 or (hosts == 0 and version == "1.1"):
            raise _Refusal(400, "Bad Request: exactly one Host header is required")
        if method == "CONNECT":
            raise _Refusal(501, "Not Implemented: CONNECT")
        limit = self.server.max_body
        if limit is not None and length is not None and length > limit:
            raise _Refusal(413, "Content Too Large")
        if not (chunked or length):
            request.expect_continue = False

    def on_body(self, body: bytes) -> None:
        request = self._parsing
        assert request is not None
        request.size += len(body)
        limit = self.server.max_body
        if limit is not None and request.size > limit:
            raise _Refusal(413, "Content Too Large")
        request.chunks.append(body)
        request.buffered += len(body)

    def on_message_complete(self) -> None:
        request = self._parsing
        assert request is not None
        request.complete = True
        self._parsing = None
        self._epoch += 1

    # --- reading ----------------------------------------------------------------------------

    def _feed(self, data: bytes) -> None:
        """Feed ``data`` to the parser; a framing error becomes the refusal of its request."""
        if self.stopped:
            return
        epoch = self._epoch
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # CONNECT was refused above; an Upgrade is ignored: what follows it is
            # not HTTP/1.1, so the connection closes after that request's answer.
            self.stopped = True
            if self.queue:
                self.queue[-1].close_after = True
        except httptools.HttpParserCallbackError as error:
            refused = error.__context__
            if not isinstance(refused, _Refusal):
                raise
            self._refuse(refused.status, refused.reason)
        except httptools.HttpParserError as error:
            # llhttp refuses versions other than 0.9, 1.x and 2.0 ("Invalid HTTP
            # version"); it stops at an HTTP/2 preface ("PRI * HTTP/2.0").
            version = self.parser.get_http_version()
            status = 505 if str(error) == "Invalid HTTP version" or version == "2.0" else 400
            self._refuse(status, f"{_reason(status).decode()}: {error}")
        else:
            if epoch != self._epoch:
                self._raw_head_bytes = 0  # a head or message ended inside ``data``
            elif self._in_head or self._parsing is None:
                self._raw_head_bytes += len(data)
                if self._raw_head_bytes > self.server.settings.max_header_bytes:
                    self._refuse(431, "Request Header Fields Too Large")

    def _refuse(self, status: int, reason: str) -> None:
        """The request being parsed gets ``status``; nothing more is read."""
        self.stopped = True
        request = self._parsing
        if request is None or request.complete:
            request = _Request("GET", b"/", [], "1.1", False)
            self.queue.append(request)
        request.refusal = (status, reason)
        request.close_after = True
        self._parsing = None

    async def _read(self) -> bool:
        """Read once and feed the parser; False at the end of the stream."""
        await self._reading.acquire()
        try:
            if self.eof or self.stopped:
                return False
            try:
                data = await self.stream.receive_some(_READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self.eof = True
                return False
            self._feed(bytes(data))
            return True
        finally:
            self._reading.release()

    def _may_read_ahead(self) -> bool:
        """Whether reading on for pipelined requests stays within bounds."""
        if len(self.queue) > _MAX_AHEAD:
            return False
        return sum(r.buffered for r in self.queue) <= _MAX_AHEAD_BYTES

    async def _next_request(self, first: bool) -> _Request | None:
        """Wait for the next request's head; None when the connection should just close.

        A refusal comes back as a request with ``refusal`` set (408 for a
        head that did not arrive within ``headers_timeout``).
        """
        settings = self.server.settings
        in_head = False
        deadline = trio.current_time() + (
            settings.headers_timeout if first else settings.keep_alive_timeout)
        while not self.queue:
            if self.server.closing or self.eof or self.stopped:
                return None
            if not in_head and (self._in_head or self._raw_head_bytes > 0):
                in_head = True  # a head has begun: it has headers_timeout from now
                deadline = trio.current_time() + settings.headers_timeout
            self.idle = not in_head
            with trio.move_on_at(deadline) as waited:
                received = await self._read()
            self.idle = False
            if waited.cancelled_caught:
                if not in_head:
                    return None  # idle: closed without an answer
                self._refuse(408, "Request Timeout")
                break
            if not received:
                return None
        return self.queue[0]

    # --- the request loop -------------------------------------------------------------------

    async def run(self) -> None:
        """Serve requests until the client goes, an answer closes, or a timeout.

        Cancellation: the connection is closed at once.
        """
        try:
            with self.scope:
                first = True
                while True:
                    request = await self._next_request(first)
                    first = False
                    if request is None:
                        return
                    if request.refusal is not None:
                        await self._send_refusal(request, *request.refusal)
                        await self._linger()
                        return
                    keep = await self._serve(request)
                    self.queue.popleft()
                    if not keep:
                        await self._linger()
                        return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(self.stream)

    async def _linger(self) -> None:
        """Shut the write side, then read and drop what the client still sends, briefly."""
        if self.eof:
            return
        with trio.move_on_after(_LINGER):
            stream = self.stream
            if isinstance(stream, trio.SocketStream):
                try:
                    await stream.send_eof()
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    return
            dropped = 0
            while dropped < _LINGER_BYTES:
                try:
                    data = await stream.receive_some(_READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    return
                if not data:
                    return
                dropped += len(data)

    async def _send_refusal(self, request: _Request, status: int, reason: str) -> None:
        body = reason.encode("utf-8", "replace") + b"\n"
        await self._write(b"".join((
            b"HTTP/1.1 %d %s\r\n" % (status, _reason(status)), self.server.common_headers(),
            b"content-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n" % len(body), b"" if request.method == "HEAD" else body,
        )))

    async def _write(self, data: bytes) -> None:
        await self._writing.acquire()
        try:
            await self.stream.send_all(data)
        finally:
            self._writing.release()

    def _scope(self, request: _Request) -> Scope:
        target = request.target
        if target.startswith(b"/") or target == b"*":
            raw_path, _, query = target.partition(b"?")
        else:
            url = httptools.parse_url(target)  # absolute-form (RFC 9112 §3.2.2)
            raw_path, query = url.path or b"/", url.query or b""
        raw_path = raw_path.partition(b"#")[0]
        if b"%" in raw_path:
            path = urllib.parse.unquote_to_bytes(raw_path).decode("utf-8", "replace")
        else:
            path = raw_path.decode("utf-8", "replace")
        return {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.version, "method": request.method, "scheme": self.scheme,
            "path": path, "raw_path": raw_path, "query_string": query, "root_path": "",
            "headers": request.headers, "client": self.client, "server": self.local,
        }

    async def _serve(self, request: _Request) -> bool:
        """Run the app for ``request``; True when the connection may serve another.

        Cancellation: propagates (the connection then closes).
        """
        self._response_done = trio.Event()
        body_deadline = trio.current_time() + self.server.settings.body_timeout
        connection = self

        async def receive() -> dict[str, Any]:
            while True:
                if request.chunks:
                    body = b"".join(request.chunks) if len(request.chunks) > 1 else (
                        request.chunks[0])
                    request.chunks.clear()
                    request.buffered = 0
                    done = request.complete
                    request.final_body_sent = done
                    return {"type": "http.request", "body": body, "more_body": not done}
                if request.complete and not request.final_body_sent:
                    request.final_body_sent = True
                    return {"type": "http.request", "body": b"", "more_body": False}
                if request.finished or request.refusal is not None or connection.eof:
                    return {"type": "http.disconnect"}
                if not request.complete:
                    if connection.stopped:
                        return {"type": "http.disconnect"}
                    if request.expect_continue and not request.continued and not request.started:
                        request.continued = True
                        await connection._write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    with trio.move_on_at(body_deadline):
                        await connection._read()
                        continue
                    request.refusal = (408, "Request Timeout")
                    request.close_after = True
                    return {"type": "http.disconnect"}
                # The body is in: wait for the client to go (or for the answer's end).
                if connection._may_read_ahead() and not connection.stopped:
                    await connection._read()
                else:
                    await connection._response_done.wait()

        async def send(message: dict[str, Any]) -> None:
            await connection._send(request, message)

        try:
            await self.server.app(self._scope(request), receive, send)
        except Exception:
            log.exception("the ASGI app failed on %s %r", request.method, request.target)
            if request.started:
                return False
            request.refusal = request.refusal or (500, "Internal Server Error")
        finally:
            self._response_done.set()
        if self.eof:
            return False
        if not request.started:
            refusal = request.refusal or (500, "Internal Server Error: no answer")
            await self._send_refusal(request, *refusal)
            return False
        if not request.finished:
            return False  # an answer cut short: its framing is broken
        return not request.close_after

    async def _send(self, request: _Request, message: dict[str, Any]) -> None:
        kind = message["type"]
        if request.finished or self.eof:
            return  # the client is gone or the answer is complete: dropped
        if kind == "http.response.start":
            if request.started:
                raise RuntimeError("ASGI: http.response.start sent twice")
            request.started = True
            self._start(request, message)
        elif kind == "http.response.body":
            if not request.started:
                raise RuntimeError("ASGI: http.response.body before http.response.start")
            await self._body(request, message.get("body", b""), message.get("more_body", False))

    def _start(self, request: _Request, message: dict[str, Any]) -> None:
        status = int(message["status"])
        request.status = status
        request.head_only = request.method == "HEAD" or status in _NO_BODY_STATUS or status < 200
        out = [b"HTTP/1.1 %d %s\r\n" % (status, _reason(status)), self.server.common_headers()]
        length: int | None = None
        for name, value in message.get("headers", ()):
            lowered = name.lower()
            if lowered == b"content-length":
                length = int(value)
                continue
            if lowered in (b"connection", b"transfer-encoding", b"keep-alive"):
                continue  # this server frames the answer and decides the connection's fate
            out.append(b"%s: %s\r\n" % (name, value))
        close = (request.close_after or not request.keep_alive or self.server.closing
                 or not request.complete or request.upgrade)
        if length is not None:
            out.append(b"content-length: %d\r\n" % length)
            request.remaining = length
        request.close_after = close
        request.pending_head = b"".join(out)

    async def _body(self, request: _Request, data: bytes, more: bool) -> None:
        out: list[bytes] = []
        if request.pending_head:
            head = request.pending_head
            request.pending_head = b""
            if request.remaining is None and not request.head_only:
                if not more:
                    head += b"content-length: %d\r\n" % len(data)
                    request.remaining = len(data)
                elif request.version == "1.1":
                    request.chunked = True
                    head += b"transfer-encoding: chunked\r\n"
                else:
                    request.close_after = True  # HTTP/1.0: the end of the answer is the close
            if request.close_after:
                head += b"connection: close\r\n"
            elif request.version == "1.0":
                head += b"connection: keep-alive\r\n"
            out.append(head + b"\r\n")
        if data and not request.head_only:
            if request.chunked:
                out.append(b"%x\r\n%s\r\n" % (len(data), data))
            elif request.remaining is not None:
                if len(data) > request.remaining:
                    raise RuntimeError("ASGI: response body longer than its Content-Length")
                request.remaining -= len(data)
                out.append(data)
            else:
                out.append(data)
        if not more:
            if request.chunked:
                out.append(b"0\r\n\r\n")
            if request.remaining and not request.head_only:
                request.close_after = True  # shorter than announced: only a close can tell
        if out:
            try:
                await self._write(b"".join(out))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.eof = True
        if not more:
            request.finished = True
            self._response_done.set()


@final
@attrs.define(eq=False)
class Http11Server:
    """The llhttp HTTP/1.1 server: serves an ASGI app on listeners until cancelled.

    Attributes:
        app: The ASGI application (``http`` scopes only; no ``lifespan``).
        settings: Limits and timeouts.
        ssl_context: Serve HTTPS with it (``None``: plain HTTP).
        closing: True once the server is shutting down.
    """

    app: AsgiApp
    settings: HttpServerSettings = attrs.field(factory=HttpServerSettings)
    ssl_context: Any = None
    closing: bool = attrs.field(default=False, init=False)
    connections: set[_Connection] = attrs.field(factory=set, init=False)
    _date: _DateHeader = attrs.field(factory=_DateHeader, init=False)
    _server_line: bytes = attrs.field(default=b"", init=False)

    def __attrs_post_init__(self) -> None:
        if self.settings.server_header is not None:
            value = self.settings.server_header.encode("latin-1")
            self._server_line = b"server: " + value + b"\r\n"

    @property
    def max_body(self) -> int | None:
        """The body limit this server enforces."""
        return self.settings.max_body

    def common_headers(self) -> bytes:
        """The ``Date`` and ``Server`` lines of every answer."""
        date = self._date.get() if self.settings.date_header else b""
        return date + self._server_line

    async def serve(
        self, listeners: list[trio.SocketListener], *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept and serve connections on ``listeners`` until cancelled.

        Cancellation: the graceful shutdown: the listeners close, idle
        connections close at once, requests in progress get
        ``shutdown_timeout`` seconds to finish (no new request is read on
        their connection), then are cancelled; this returns (raising
        ``Cancelled``) once every connection is closed.
        """
        async with trio.open_nursery() as connections:
            try:
                async with trio.open_nursery() as accepting:
                    for listener in listeners:
                        accepting.start_soon(self._accept, listener, connections)
                    task_status.started()
            finally:
                self._shut_down()
                with trio.CancelScope(shield=True):
                    for listener in listeners:
                        await listener.aclose()

    def _shut_down(self) -> None:
        self.closing = True
        deadline = trio.current_time() + self.settings.shutdown_timeout
        for connection in self.connections:
            if connection.idle:
                connection.scope.cancel()
            else:
                connection.scope.deadline = min(connection.scope.deadline, deadline)

    async def _accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as error:
                if error.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS):
                    log.error("accept failed (%s); retrying in 100 ms", error)
                    await trio.sleep(0.1)
                    continue
                raise
            nursery.start_soon(self._handle, stream)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            client = _address(stream.socket.getpeername())
            local = _address(stream.socket.getsockname())
        except OSError:
            await trio.aclose_forcefully(stream)
            return
        if len(self.connections) >= self.settings.max_connections:
            with trio.move_on_after(1.0):
                body = b"Service Unavailable: too many connections\n"
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await stream.send_all(
                        b"HTTP/1.1 503 Service Unavailable\r\n" + self.common_headers()
                        + b"content-type: text/plain; charset=utf-8\r\n"
                        b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body)
            await trio.aclose_forcefully(stream)
            return
        wrapped: trio.abc.Stream = stream
        if self.ssl_context is not None:
            wrapped = trio.SSLStream(stream, self.ssl_context, server_side=True,
                                     https_compatible=True)
        connection = _Connection(
            self, wrapped, "https" if self.ssl_context is not None else "http", client, local,
        )
        if self.closing:
            await trio.aclose_forcefully(stream)
            return
        self.connections.add(connection)
        try:
            await connection.run()
        except trio.BrokenResourceError as error:  # a failed TLS handshake, mostly
            log.debug("connection from %s failed: %r", client, error)
        finally:
            self.connections.discard(connection)


def _address(value: Any) -> tuple[str, int] | None:
    if isinstance(value, tuple) and len(value) >= 2:
        return str(value[0]), int(value[1])
    return None


async def open_listeners(host: str, port: int, backlog: int) -> list[trio.SocketListener]:
    """Listening sockets on ``host:port`` (``port`` 0: one the kernel picks)."""
    return await trio.open_tcp_listeners(port, host=host, backlog=backlog)


