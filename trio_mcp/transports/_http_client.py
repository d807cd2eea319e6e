"""The Streamable HTTP client transport (MCP 2025-11-25 and 2026-07-28), on httpx.

:func:`open_http_client` yields a client :class:`Peer` whose bus is carried
over HTTP: each outgoing message is one ``POST``; a request's answer comes
back as ``application/json`` or as an SSE stream (read with the sans-IO
parser of :mod:`._sse`). A stream that drops before its response is resumed
with ``GET`` + ``Last-Event-ID`` after the server's ``retry`` delay. After
the handshake a ``GET`` stream listens for server-initiated requests and
notifications (a 405 means the server offers none). When the server answers
404 for the session, a new session is initialized (with the first
``initialize``'s params) and the message is sent again, once. Leaving the
block sends ``DELETE`` for the session.

In 2026-07-28 (a request whose ``params._meta`` names a modern
``io.modelcontextprotocol/protocolVersion``; ``era=``) there is no session:
no ``Mcp-Session-Id``, no ``GET`` stream, no ``DELETE``. Every POST carries
``MCP-Protocol-Version`` (the body's), ``Mcp-Method``, ``Mcp-Name`` and the
``Mcp-Param-*`` headers of the tool's ``x-mcp-header`` annotations
(:mod:`._mcp_headers`; tools with invalid annotations are left out of
``tools/list`` results). Cancelling a request closes its response stream
(``subscriptions/listen`` is one long-lived POST whose stream carries the
notifications). A 4xx whose body is a JSON-RPC error is that error.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final, final

import attrs
import httpx
import trio

from .._errors import INTERNAL_ERROR, ConnectionClosed, ConnectionFailed, RemoteError
from .._util import unwrap_group
from ..peer import (
    App,
    BusEnds,
    Implementation,
    Incoming,
    Message,
    Peer,
    decode_message,
    open_bus,
)
from ..peer._messages import (
    META_PROTOCOL_VERSION,
    ErrorData,
    ErrorResponse,
    Notification,
    Request,
    RequestId,
    Response,
)
from ._client import DEFAULT_ERA, INIT_TIMEOUT, check_era, open_client_peer, server_key
from ._failures import DEFAULT_PATH, POST_FAILED, endpoint_hint
from ._http_posts import DEFAULT_RETRY_MS, MAX_RECONNECTS, HttpPosts, encode
from ._mcp_headers import filter_tools
from ._sse import SSEParser

log = logging.getLogger("trio_mcp.transports")

#: Seconds to connect, and to send a request body.
DEFAULT_TIMEOUT: Final = 30.0
#: Seconds the first requests after the handshake wait for the GET stream to open.
STREAM_READY_TIMEOUT: Final = 5.0
#: Seconds given to the ``DELETE`` that ends the session on close.
CLOSE_TIMEOUT: Final = 2.0
_ACCEPT_BOTH: Final = "application/json, text/event-stream"


@final
class HttpRefused(ConnectionFailed, httpx.HTTPStatusError):
    """The HTTP server refused the connection: a :class:`ConnectionFailed` and an
    ``httpx.HTTPStatusError`` (``.response``) at once."""

    def __init__(self, message: str, *, url: str, response: httpx.Response) -> None:
        httpx.HTTPStatusError.__init__(self, message, request=response.request, response=response)
        self.url = url
        self.status_code = response.status_code


@final
class HttpUnreachable(ConnectionFailed, httpx.TransportError):
    """The HTTP server could not be reached: a :class:`ConnectionFailed` and an
    ``httpx.TransportError`` at once (the original as ``__cause__``)."""

    def __init__(self, message: str, *, url: str) -> None:
        httpx.TransportError.__init__(self, message)
        self.url = url
        self.status_code = None


def http_failure(url: str, error: BaseException) -> BaseException:
    """What ``open_http_client`` raises for the transport's fatal ``error`` (from it)."""
    if isinstance(error, httpx.HTTPStatusError):
        status = error.response.status_code
        message = str(error)
        hint = endpoint_hint(url)
        if status == 404 and hint is not None:
            message += f" (is the path right? trio-mcp serves {DEFAULT_PATH}: {hint})"
        return HttpRefused(message, url=url, response=error.response)
    if isinstance(error, httpx.TransportError):
        return HttpUnreachable(f"cannot connect to {url}: {error or type(error).__name__}",
                               url=url)
    return error


@final
@attrs.define(eq=False)
class _HttpClientTransport(HttpPosts):
    """Carries one client bus over Streamable HTTP."""

    client: httpx.AsyncClient
    url: str
    ends: BusEnds
    extra_headers: dict[str, str]
    session_id: str | None = None
    protocol_version: str | None = None
    fatal: BaseException | None = None
    _init: Request | None = None
    _cancelled: set[RequestId] = attrs.field(factory=set)
    _nursery: trio.Nursery | None = None
    _listening: trio.CancelScope | None = None
    #: Set once the GET stream started by the handshake got its answer (or failed).
    _stream_ready: trio.Event | None = None
    _closing: bool = False
    _reinits: int = 0
    _reinit_lock: trio.Lock = attrs.field(factory=trio.Lock)
    #: The modern protocol version the peer speaks (None: 2025-11-25, or not yet known).
    modern: str | None = None
    #: Modern requests in flight -> the scope that closes their response stream.
    _inflight: dict[RequestId, trio.CancelScope] = attrs.field(factory=dict)
    #: Modern ``tools/list`` requests whose answer is to be checked.
    _tool_lists: set[RequestId] = attrs.field(factory=set)
    #: Tool name -> its ``Mcp-Param-*`` header map, from the last ``tools/list`` seen.
    _tool_headers: dict[str, dict[str, tuple[str, ...]]] = attrs.field(factory=dict)
    #: Applied to every request (e.g. :class:`~trio_mcp.auth.ClientCredentials`).
    auth: httpx.Auth | None = None

    # --- plumbing --------------------------------------------------------------------

    def _headers(self, accept: str) -> dict[str, str]:
        headers = {**self.extra_headers, "Accept": accept}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    async def _deliver(self, item: Incoming) -> None:
        if isinstance(item, Response) and self._init is not None and item.id == self._init.id:
            version = item.result.get("protocolVersion")
            self.protocol_version = version if isinstance(version, str) else None
        if isinstance(item, Response) and item.id in self._tool_lists:
            self._tool_lists.discard(item.id)
            kept = filter_tools(item.result)  # invalid x-mcp-header tools are dropped
            self._tool_headers.update(kept)
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            await self.ends.to_peer.send(item)

    async def _fail(self, request_id: RequestId, message: str, data: Any = None) -> None:
        """Fail one request of the peer with a local -32603 error."""
        await self._deliver(ErrorResponse(request_id, ErrorData(INTERNAL_ERROR, message, data)))

    async def _open(self, method: str, *, body: bytes | None = None,
                    last_event_id: str | None = None,
                    modern: tuple[Message, str] | None = None) -> httpx.Response:
        if modern is not None:
            headers = self._modern_headers(*modern, _ACCEPT_BOTH)
            headers["Content-Type"] = "application/json"
        elif body is not None:
            headers = self._headers(_ACCEPT_BOTH)
            headers["Content-Type"] = "application/json"
        else:
            headers = self._headers("text/event-stream")
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        request = self.client.build_request(method, self.url, headers=headers, content=body)
        request.stream = _Body(body or b"")
        if self.auth is not None:
            return await self.client.send(request, stream=True, auth=self.auth)
        return await self.client.send(request, stream=True)

    # --- sending ---------------------------------------------------------------------

    async def run(self, nursery: trio.Nursery) -> None:
        """Send what the peer writes until it closes its side.

        Cancellation: stops at once; streams being read stop too.
        """
        self._nursery = nursery
        async with self.ends.from_peer:
            async for msg in self.ends.from_peer:
                if isinstance(msg, Request):
                    version = _modern_version(msg)
                    if version is not None:
                        self.modern = version
                        if msg.method == "tools/list":
                            self._tool_lists.add(msg.id)
                        nursery.start_soon(self._send_modern, msg, version)
                    elif msg.method == "initialize":
                        self.modern = None
                        self.fatal = None  # a refused probe before it is no reason
                        self._init = msg
                        await self._send(msg)
                    else:
                        nursery.start_soon(self._send, msg)
                elif self.modern is not None:
                    if isinstance(msg, Notification) and msg.method == "notifications/cancelled":
                        # 2026-07-28: a request is withdrawn by closing its stream.
                        request_id = (msg.params or {}).get("requestId")
                        scope = self._inflight.get(request_id) if isinstance(
                            request_id, str | int) else None
                        if scope is not None:
                            scope.cancel()
                    else:
                        nursery.start_soon(self._send_modern, msg, self.modern)
                else:
                    if isinstance(msg, Notification) and msg.method == "notifications/cancelled":
                        request_id = (msg.params or {}).get("requestId")
                        if isinstance(request_id, str | int):
                            self._cancelled.add(request_id)
                    await self._send(msg)
                    if isinstance(msg, Notification) and msg.method == "notifications/initialized":
                        await _stream_opened(self._stream_ready)

    async def _send(self, msg: Message, *, retried: bool = False) -> None:
        request_id = msg.id if isinstance(msg, Request) else None
        session_id = self.session_id
        try:
            response = await self._open("POST", body=encode(msg))
        except httpx.HTTPError as exc:
            # The request's caller gets the error (below); nothing on stderr.
            log.debug("POST to %s failed: %s", self.url, exc)
            if request_id is not None:
                if msg is self._init:
                    self.fatal = exc
                await self._fail(request_id, f"{POST_FAILED}: {exc}")
            return
        try:
            await self._answered(msg, response, retried, session_id)
        finally:
            await response.aclose()
            if request_id is not None and not retried:
                self._cancelled.discard(request_id)

    async def _handle(
        self, msg: Message, response: httpx.Response, retried: bool, session_id: str | None
    ) -> None:
        status = response.status_code
        request_id = msg.id if isinstance(msg, Request) else None
        if status == 404 and session_id is not None and msg is not self._init and not retried:
            await response.aclose()
            if await self._reinitialize(session_id):
                await self._send(msg, retried=True)
            elif request_id is not None:
                await self._fail(request_id, "Streamable HTTP: the session ended (HTTP 404) "
                                             "and a new one could not be started",
                                 {"httpStatus": 404})
            return
        if status >= 400 or (request_id is None and status not in (200, 202)):
            await self._refused(msg, response)
            return
        if msg is self._init:
            self.session_id = response.headers.get("mcp-session-id")
        if isinstance(msg, Notification) and msg.method == "notifications/initialized" and (
            self.modern is None
        ):
            self._listen()
        if request_id is None:
            return
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type == "text/event-stream":
            await self._read_stream(response, request_id)
        elif content_type == "application/json":
            item = decode_message(await response.aread())
            await self._deliver(item)
        elif request_id not in self._cancelled:
            await self._fail(request_id, f"Streamable HTTP: unexpected answer (HTTP {status}, "
                                         f"Content-Type {content_type!r})")

    async def _reinitialize(self, lost: str) -> bool:
        """Start a new session after a 404 for session ``lost``, as the first ``initialize`` did.

        Several requests may meet the 404 at once: the first starts the new
        session, the others find it started and just send again.
        """
        async with self._reinit_lock:
            if self.session_id != lost:
                return self.session_id is not None
            return await self._start_new_session()

    async def _start_new_session(self) -> bool:
        if self._init is None or self._closing:
            return False
        self._reinits += 1
        log.info("session %s is gone; initializing a new one", self.session_id)
        self.session_id = None
        if self._listening is not None:
            self._listening.cancel()
        init = Request(f"trio-mcp-reinitialize-{self._reinits}", "initialize", self._init.params)
        try:
            response = await self._open("POST", body=encode(init))
            try:
                if response.status_code != 200:
                    return False
                self.session_id = response.headers.get("mcp-session-id")
                await response.aread()
            finally:
                await response.aclose()
            note = Notification("notifications/initialized")
            response = await self._open("POST", body=encode(note))
            await response.aclose()
        except httpx.HTTPError as exc:
            log.warning("re-initializing failed: %s", exc)
            return False
        self._listen()
        return True

    # --- receiving -------------------------------------------------------------------

    async def _consume(self, response: httpx.Response, parser: SSEParser,
                       request_id: RequestId | None) -> bool:
        """Deliver a stream's messages until it ends; True once ``request_id`` is answered."""
        answered = False
        # Stop reading once the answer is in (the server should end the
        # stream then; a resumed GET stream may stay open). Cancelling, not
        # breaking, unwinds httpx's nested generators cleanly.
        chunks = response.aiter_bytes()
        with trio.CancelScope() as stop:
            try:
                async for chunk in chunks:
                    for event in parser.feed(chunk):
                        if not event.data or event.event != "message":
                            continue  # a priming event, or not ours
                        item = decode_message(event.data)
                        await self._deliver(item)
                        if isinstance(item, Response | ErrorResponse) and (
                            request_id is not None and item.id == request_id
                        ):
                            answered = True
                    if answered:
                        stop.cancel()
            except httpx.HTTPError as exc:
                log.debug("SSE stream from %s dropped: %s", self.url, exc)
            finally:
                await _unwind(chunks)
        return answered

    async def _read_stream(self, response: httpx.Response, request_id: RequestId) -> None:
        """Read a POST's SSE stream to its response, resuming it as often as needed."""
        parser = SSEParser()
        answered = await self._consume(response, parser, request_id)
        if not answered and self.modern is not None and request_id in self._inflight:
            # 2026-07-28: no session, so no stream to resume.
            await self._fail(request_id, "Streamable HTTP: the stream ended before the response")
            return
        failures = 0
        while not answered and request_id not in self._cancelled and not self._closing:
            if not parser.last_event_id or failures >= MAX_RECONNECTS:
                await self._fail(request_id, "Streamable HTTP: the stream ended before the "
                                             "response and cannot be resumed")
                return
            await trio.sleep((parser.retry if parser.retry is not None else DEFAULT_RETRY_MS)
                             / 1000)
            seen = parser.last_event_id
            try:
                response = await self._open("GET", last_event_id=seen)
            except httpx.HTTPError as exc:
                log.debug("resuming failed: %s", exc)
                failures += 1
                continue
            try:
                if response.status_code != 200:
                    failures += 1
                    if response.status_code in (400, 404, 405):
                        failures = MAX_RECONNECTS
                    continue
                answered = await self._consume(response, parser, request_id)
                failures = 0 if parser.last_event_id != seen else failures + 1
            finally:
                await response.aclose()

    async def close(self) -> None:
        """End the session with ``DELETE`` (bounded by :data:`CLOSE_TIMEOUT`).

        Cancellation: the DELETE is abandoned.
        """
        self._closing = True
        if self._listening is not None:
            self._listening.cancel()
        if self.session_id is None:
            return
        with trio.move_on_after(CLOSE_TIMEOUT):
            try:
                request = self.client.build_request("DELETE", self.url,
                                                    headers=self._headers("*/*"))
                request.stream = _Body(b"")
                response = await (self.client.send(request) if self.auth is None else
                                  self.client.send(request, auth=self.auth))
                log.debug("DELETE session: HTTP %d", response.status_code)
            except Exception as exc:  # best effort: e.g. a Ctrl-C broke the pool's state
                log.debug("DELETE session failed: %r", exc)


@final
class _Body(httpx.AsyncByteStream):
    """A request's body for httpx, iterated without an async generator.

    httpx's own (``content=bytes``) is an async generator that httpcore leaves
    suspended when a request is cancelled while it is being sent; the garbage
    collector then finds it, and Trio warns ("was garbage collected before it
    had been exhausted"). An iterator object has nothing to leave open.
    """

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __aiter__(self) -> _Once:
        return _Once(self._data)


@final
class _Once:
    """Yields one chunk of bytes (none when empty), then stops."""

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data or None

    def __aiter__(self) -> _Once:
        return self

    async def __anext__(self) -> bytes:
        data, self._data = self._data, None
        if data is None:
            raise StopAsyncIteration
        return data


def _modern_version(msg: Request) -> str | None:
    """The modern protocol version a request's ``_meta`` names, if any."""
    params = msg.params
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def _client_headers(token: str | None, headers: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(headers or {})
    if token is not None:
        if not token.isascii() or not token.isprintable():
            raise ValueError("token must be printable ASCII text")
        out["Authorization"] = f"Bearer {token}"
    return out


@asynccontextmanager
async def open_http_client(
    url: str,
    app: App | None = None,
    *,
    token: str | None = None,
    auth: str | httpx.Auth | None = None,
    headers: Mapping[str, str] | None = None,
    client_info: Implementation | None = None,
    http_client: httpx.AsyncClient | None = None,
    connect_timeout: float = DEFAULT_TIMEOUT,
    init_timeout: float | None = INIT_TIMEOUT,
    era: str = DEFAULT_ERA,
) -> AsyncIterator[Peer]:
    """Connect to a Streamable HTTP MCP endpoint and yield the client :class:`Peer`.

    The block starts after the ``initialize`` handshake (2026-07-28: after
    ``server/discover``); leaving it ends the session (``DELETE``; none in
    2026-07-28) and closes the connections.

    Args:
        url: The endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        app: What this client offers (sampling/elicitation handlers, tasks).
        token: Sent as ``Authorization: Bearer <token>`` on every request.
        auth: A static bearer token (as ``token``), or an :class:`httpx.Auth`
            applied to every request, e.g. :class:`trio_mcp.auth.ClientCredentials`
            (OAuth ``client_credentials``: the token endpoint found from the
            server's metadata, the ``resource`` sent, the token renewed before
            it expires and once on a 401).
        headers: More headers for every request (e.g. ``Origin``).
        client_info: ``clientInfo`` to send instead of the App's.
        http_client: An httpx client to use (not closed here); give it no
            read timeout (``httpx.Timeout(30, read=None)``): SSE streams may
            be silent for long. By default one is made that ignores proxy
            settings from the environment.
        connect_timeout: Seconds to connect and to send a request; answers
            may take any time.
        init_timeout: Seconds the server has to answer ``initialize``
            (default 30, as for stdio and WebSocket); ``None`` waits forever.
        era: The protocol revision: ``"2025-11-25"`` (default, the
            ``initialize`` handshake and a session), ``"2026-07-28"``
            (``server/discover``, per-request ``_meta`` and the
            ``Mcp-Method``/``Mcp-Name``/``Mcp-Param-*`` headers, no session)
            or ``"auto"`` (probe with ``server/discover``; a 4xx that is not
            a modern error falls back to ``initialize``; the choice is
            remembered per ``scheme://host:port/path``).
            ``peer.protocol_version`` tells which one is spoken. ``auto`` is
            opt-in: a 2026-07-28 connection has no 2025-11-25 tasks.

    Raises:
        ValueError: A token that cannot be a header, both ``token`` and
            ``auth``, or an unknown ``era``.
        trio_mcp.auth.OAuthError: OAuth discovery or the token request failed.
        ConnectionFailed: The server could not be reached (the
            ``httpx.TransportError`` as ``__cause__``), or refused the
            ``initialize`` or the ``server/discover`` without a JSON-RPC error
            (``status_code`` 401 without a valid token, 403 for a refused
            Origin or Host, 404 on a wrong path...; also an
            ``httpx.HTTPStatusError``), or did not answer ``initialize``
            within ``init_timeout`` (:class:`~trio_mcp.HandshakeTimeout`).
        RemoteError, ConnectionClosed: The MCP handshake failed
            (:class:`~trio_mcp.UnsupportedProtocolVersion` and the other typed
            errors for the modern codes).

    Cancellation: cancelling the block still sends the ``DELETE`` (for at
        most :data:`CLOSE_TIMEOUT` seconds), then closes every connection.
    """
    check_era(era)
    app = app if app is not None else App("trio-mcp-client")
    if auth is not None and token is not None:
        raise ValueError("give token or auth, not both")
    extra = _client_headers(auth if isinstance(auth, str) else token, headers)
    bus, ends = open_bus(info={"transport": "http", "url": url, "server_key": server_key(url)})
    own = http_client is None
    client = http_client if http_client is not None else httpx.AsyncClient(
        timeout=httpx.Timeout(connect_timeout, read=None),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
        trust_env=False,
    )
    transport = _HttpClientTransport(client, url, ends, extra)
    transport.auth = auth if isinstance(auth, httpx.Auth) else None
    try:
        with unwrap_group():
            async with ends.to_peer, trio.open_nursery() as nursery:
                nursery.start_soon(transport.run, nursery)
                try:
                    async with open_client_peer(
                        app, bus, client_info=client_info, init_timeout=init_timeout, era=era
                    ) as peer:
                        yield peer
                except (ConnectionClosed, RemoteError):
                    if transport.fatal is not None:
                        raise http_failure(url, transport.fatal) from transport.fatal
                    raise
                finally:
                    with trio.CancelScope(shield=True):
                        await transport.close()
                    nursery.cancel_scope.cancel()
    finally:
        if own:
            with trio.CancelScope(shield=True):
                await client.aclose()


async def _stream_opened(ready: trio.Event | None) -> None:
    """Send nothing more until the session's GET stream is open (or refused), so what
    the server sends on it from the start is heard and answers to our next requests
    come on their own streams. Bounded: a server slow to answer the GET costs at most
    :data:`STREAM_READY_TIMEOUT` seconds, once."""
    if ready is not None:
        with trio.move_on_after(STREAM_READY_TIMEOUT):
            await ready.wait()


async def _unwind(chunks: AsyncIterator[bytes]) -> None:
    """Finish httpx's nested stream generators from the inside.

    Closing the outer ``aiter_bytes`` generator leaves the four httpx and
    httpcore generators under it suspended (none closes the one it iterates),
    and Trio warns when they are collected. A stream left while our own code
    awaited (a cancelled delivery: the peer closing) is in that state; reading
    on in a cancelled scope raises Cancelled at the innermost read, which ends
    every one of them. A stream already ended or cancelled there stops at once.
    """
    with trio.CancelScope(shield=True) as unwind:
        unwind.cancel()
        with contextlib.suppress(httpx.HTTPError):
            async for _ in chunks:
                pass

