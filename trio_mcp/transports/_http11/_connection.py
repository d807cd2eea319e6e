"""One client connection: the read/answer loop and the ASGI ``receive``/``send`` of a request."""

from __future__ import annotations

import logging
import urllib.parse
from typing import Any, Final, Protocol, final

import attrs
import httptools
import trio

from .._http_policy import Scope
from ._answer import CONTINUE, refusal
from ._request import Request, RequestReader
from ._settings import AsgiApp, HttpServerSettings

log = logging.getLogger("trio_mcp.transports.http11")

_READ_SIZE: Final = 65536
#: Seconds a closing connection goes on reading (and dropping) what the client sends.
_LINGER: Final = 2.0
_LINGER_BYTES: Final = 1024 * 1024
_DISCONNECT: Final = {"type": "http.disconnect"}


class Host(Protocol):
    """What a connection needs of its server (:class:`._server.Http11Server`)."""

    @property
    def app(self) -> AsgiApp:
        """The ASGI application."""
        ...

    @property
    def settings(self) -> HttpServerSettings:
        """Limits and timeouts."""
        ...

    @property
    def closing(self) -> bool:
        """The server is shutting down: no new request is read."""
        ...

    def common_headers(self) -> bytes:
        """The ``Date`` and ``Server`` lines of every answer."""
        ...


@final
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


@final
@attrs.define(eq=False)
class Connection:
    """One client connection: reads, parses, runs the app for each request in turn.

    Attributes:
        scope: The connection's cancel scope, shielded from the server's own
            cancellation (the graceful shutdown sets its deadline instead).
        idle: Waiting for a next request with no byte of it read.
        eof: The client has gone (or the stream broke).
    """

    server: Host
    stream: trio.abc.Stream
    scheme: str
    client: tuple[str, int] | None
    local: tuple[str, int] | None
    scope: trio.CancelScope = attrs.field(factory=lambda: trio.CancelScope(shield=True))
    idle: bool = True
    eof: bool = False
    reader: RequestReader = attrs.field(init=False)
    _reading: _Turn = attrs.field(factory=_Turn)
    _writing: _Turn = attrs.field(factory=_Turn)
    _answered: trio.Event = attrs.field(factory=trio.Event)

    def __attrs_post_init__(self) -> None:
        self.reader = RequestReader(self.server.settings)

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
                        await self._write(refusal(*request.refusal, self.server.common_headers(),
                                                  head_only=request.method == "HEAD"))
                        await self._linger()
                        return
                    keep = await self._serve(request)
                    self.reader.queue.popleft()
                    if not keep:
                        await self._linger()
                        return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(self.stream)

    async def _read(self) -> bool:
        """Read once and feed the parser; False at the end of the stream."""
        await self._reading.acquire()
        try:
            if self.eof or self.reader.stopped:
                return False
            try:
                data = await self.stream.receive_some(_READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self.eof = True
                return False
            self.reader.feed(bytes(data))
            return True
        finally:
            self._reading.release()

    async def _next_request(self, first: bool) -> Request | None:
        """Wait for the next request's head; None when the connection should just close.

        A refusal comes back as a request with ``refusal`` set (408 for a
        head that did not arrive within ``headers_timeout``).
        """
        settings, reader = self.server.settings, self.reader
        in_head = False
        deadline = trio.current_time() + (
            settings.headers_timeout if first else settings.keep_alive_timeout)
        while not reader.queue:
            if self.server.closing or self.eof or reader.stopped:
                return None
            if not in_head and (reader.in_head or reader.raw_head_bytes > 0):
                in_head = True  # a head has begun: it has headers_timeout from now
                deadline = trio.current_time() + settings.headers_timeout
            self.idle = not in_head
            with trio.move_on_at(deadline) as waited:
                received = await self._read()
            self.idle = False
            if waited.cancelled_caught:
                if not in_head:
                    return None  # idle: closed without an answer
                reader.refuse(408, "Request Timeout")
                break
            if not received:
                return None
        return reader.queue[0]

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

    async def _write(self, data: bytes) -> None:
        """Write ``data``; a client that takes none of it for ``write_timeout`` is gone.

        Raises:
            trio.BrokenResourceError: The write failed or timed out (the
                connection is then done: ``eof``).
        """
        await self._writing.acquire()
        try:
            with trio.move_on_after(self.server.settings.write_timeout):
                await self.stream.send_all(data)
                return
            self.eof = True  # part of it may be written: the framing is broken
            log.info("%s: the client took nothing for %.0f s: closed", self.client,
                     self.server.settings.write_timeout)
            # The app's receive() sees the client gone: a read waiting on the
            # socket ends with it, a wait for the answer's end is woken.
            self._answered.set()
            await trio.aclose_forcefully(self.stream)
            raise trio.BrokenResourceError("write timed out")
        finally:
            self._writing.release()

    def _scope(self, request: Request) -> Scope:
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

    async def _serve(self, request: Request) -> bool:
        """Run the app for ``request``; True when the connection may serve another.

        Cancellation: propagates (the connection then closes).
        """
        self._answered = trio.Event()
        body_deadline = trio.current_time() + self.server.settings.body_timeout
        answer, reader = request.answer, self.reader

        async def receive() -> dict[str, Any]:
            while True:
                if request.chunks:
                    chunks = request.chunks
                    body = b"".join(chunks) if len(chunks) > 1 else chunks[0]
                    chunks.clear()
                    request.buffered = 0
                    request.delivered = request.complete
                    return {"type": "http.request", "body": body, "more_body": not request.complete}
                if request.complete and not request.delivered:
                    request.delivered = True
                    return {"type": "http.request", "body": b"", "more_body": False}
                if answer.finished or request.refusal is not None or self.eof:
                    return dict(_DISCONNECT)
                if not request.complete:
                    if reader.stopped:
                        return dict(_DISCONNECT)
                    if request.expect_continue and not answer.continued and not answer.started:
                        answer.continued = True
                        await self._write(CONTINUE)
                    with trio.move_on_at(body_deadline):
                        await self._read()
                        continue
                    request.refusal = (408, "Request Timeout")
                    request.close_after = True
                    return dict(_DISCONNECT)
                # The body is in: wait for the client to go (or for the answer's end).
                if reader.may_read_ahead() and not reader.stopped:
                    await self._read()
                else:
                    await self._answered.wait()

        async def send(message: dict[str, Any]) -> None:
            await self._send(request, message)

        try:
            await self.server.app(self._scope(request), receive, send)
        except Exception:
            log.exception("the ASGI app failed on %s %r", request.method, request.target)
            if answer.started:
                return False
            request.refusal = request.refusal or (500, "Internal Server Error")
        finally:
            self._answered.set()
        if self.eof:
            return False
        if not answer.started:
            status, text = request.refusal or (500, "Internal Server Error: no answer")
            await self._write(refusal(status, text, self.server.common_headers(),
                                      head_only=request.method == "HEAD"))
            return False
        return answer.finished and not answer.close_after  # else its framing is broken

    async def _send(self, request: Request, message: dict[str, Any]) -> None:
        answer = request.answer
        if answer.finished or self.eof:
            return  # the client is gone or the answer is complete: dropped
        kind = message["type"]
        if kind == "http.response.start":
            if answer.started:
                raise RuntimeError("ASGI: http.response.start sent twice")
            close = (request.close_after or not request.keep_alive or self.server.closing
                     or not request.complete or request.upgrade)
            answer.start(int(message["status"]), message.get("headers", ()),
                         self.server.common_headers(), head=request.method == "HEAD",
                         http10=request.version == "1.0", close=close)
        elif kind == "http.response.body":
            if not answer.started:
                raise RuntimeError("ASGI: http.response.body before http.response.start")
            out = answer.body(message.get("body", b""), message.get("more_body", False))
            if out:
                try:
                    await self._write(out)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.eof = True
            if answer.finished:
                self._answered.set()
