"""The Streamable HTTP server transport (MCP 2025-11-25 and 2026-07-28): an ASGI app on hypercorn.

:class:`StreamableHttpApp` is a plain ASGI application, so it can be mounted in
any ASGI server that runs on Trio; :func:`serve_http` serves it with
hypercorn's Trio worker, started with ``nursery.start`` like
:func:`~trio_mcp.serve_websocket`.

One endpoint (``/mcp`` by default) takes ``POST`` (one JSON-RPC message),
``GET`` (the session's stream of server-initiated messages, or the resumption
of any stream with ``Last-Event-ID``) and ``DELETE`` (end the session). Each
session (``Mcp-Session-Id``) is one :class:`MessageBus` and one server
:class:`Peer` for its whole life; see :mod:`._http_session` for how messages
are routed to streams.

Answers: a request gets ``text/event-stream`` (a priming event with an id and
empty data, ``retry``, related requests and notifications, then the response,
then the stream ends), except ``initialize``, ``ping`` and ``tasks/get|list|
cancel``, which answer at once and get ``application/json``
(``json_response=True`` makes every answer JSON).

MCP 2026-07-28 on the same endpoint: a POST whose ``MCP-Protocol-Version``
is 2026-07-28 (or, with no such header and no ``Mcp-Session-Id``, whose body
carries the modern ``_meta``) is served on its own: its headers are checked
against its body (400, -32020), then a fresh peer in that dialect answers it
and ends with it; no session id is minted. The answer is JSON with a status
for its error code (-32602, -32021, -32022, -32020: 400; -32601: 404) unless
the handler sends a notification first (then SSE, 200, no event ids);
``subscriptions/listen`` is an SSE stream that stays open. Closing the
connection cancels the request. ``GET`` and ``DELETE`` with a 2026-07-28
version, or with neither a version nor a session id, get 405.

Security defaults: bind 127.0.0.1; refuse (403) a ``Host`` that is not a
loopback name (DNS rebinding) and an ``Origin`` that is not loopback or
allowed; with a verifier (or ``tokens``/``authenticate``), every request needs
a valid bearer token (401 with ``WWW-Authenticate`` otherwise; see
:mod:`._http_auth` for the OAuth resource server: metadata, challenges,
scopes). A session is bound to the identity (its owner) that created it:
another identity gets 404, as an unknown session does. Sessions are never
authentication.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final, final

import attrs
import trio

from .._util import unwrap_group
from ..auth import Identity, TokenVerifier
from ..peer import IDENTITY_INFO, App, RequestServer, required_scopes
from ..peer._messages import MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS, Request
from ._http11 import LLHTTP_AVAILABLE, HttpServerSettings
from ._http_auth import (
    IDENTITY_KEY,
    WELL_KNOWN,
    authenticate,
    configured_resource,
    insufficient_scope,
    metadata_paths,
    request_facts,
    serve_metadata,
    serves_metadata,
)
from ._http_handlers import SESSION_HEADER, delete, get, post
from ._http_policy import (
    Authenticator,
    HttpPolicy,
    OncePerClient,
    Receive,
    Scope,
    Send,
    fail,
    header,
    header_values,
    respond,
)
from ._http_servers import HttpAddress, HttpServerName, default_http_server, run_server
from ._http_session import HttpSession
from ._http_store import EventStore, MemoryEventStore

log = logging.getLogger("trio_mcp.transports")
audit = logging.getLogger("trio_mcp.audit")

#: Default largest accepted POST body.
DEFAULT_MAX_BODY: Final = 4 * 1024 * 1024
#: Default seconds a session may stay idle (no request, no open stream).
DEFAULT_SESSION_IDLE_TIMEOUT: Final = 1800.0
#: Default live sessions at once; past it, ``initialize`` gets 503.
DEFAULT_MAX_SESSIONS: Final = 1_000


@final
@attrs.define(eq=False)
class StreamableHttpApp:
    """The MCP endpoint as an ASGI application, over one :class:`App`.

    Run its background part (sessions, the App's task registry, idle
    expiry) with ``await nursery.start(http_app.run)`` before serving, or
    let an ASGI server that runs the ``lifespan`` protocol on Trio start it.
    :func:`serve_http` does both for you.

    Attributes:
        app: The tools and handlers to serve; its task registry is shared by
            every session, and tasks belong to the authenticated identity.
        path: The endpoint's path; ``None`` serves every path.
        policy: Host, Origin and bearer-token checks (:class:`HttpPolicy`).
        stateless: No sessions: every POST gets a fresh, pre-initialized
            peer; ``GET`` gets 405; a server-to-client request fails with
            -32600 (no stream could carry it back).
        json_response: Answer every request with ``application/json``
            (related server messages then go to the ``GET`` stream).
        session_idle_timeout: Seconds a session with no request in progress
            and no open stream lives on; ``None``: until ``DELETE``.
        retry_ms: The ``retry`` sent to clients, in milliseconds.
        keepalive: Seconds of silence after which an open stream gets a
            comment line; ``None`` disables.
        sse_close_after: Close each SSE connection after this many seconds
            (the stream goes on; the client reconnects after ``retry_ms``
            with ``Last-Event-ID``); ``None``: keep it open.
        event_store: Makes the event store of a new session, given its id
            (``""`` in stateless mode); a bounded :class:`MemoryEventStore`
            by default.
        max_body: Largest POST body (413 beyond).
        max_sessions: Live sessions at once (503 beyond).
    """

    app: App
    path: str | None = "/mcp"
    policy: HttpPolicy = attrs.field(factory=HttpPolicy)
    stateless: bool = False
    json_response: bool = False
    session_idle_timeout: float | None = DEFAULT_SESSION_IDLE_TIMEOUT
    retry_ms: int = 1_000
    keepalive: float | None = 15.0
    sse_close_after: float | None = None
    event_store: Callable[[str], EventStore] = lambda _: MemoryEventStore()
    max_body: int = DEFAULT_MAX_BODY
    max_sessions: int = DEFAULT_MAX_SESSIONS
    sessions: dict[str, HttpSession] = attrs.field(factory=dict, init=False)
    #: What the POST handler asks before a request reaches its peer (OAuth scopes).
    refuse_unscoped: Callable[[Scope, Send, Request], Awaitable[bool]] = attrs.field(
        init=False, repr=False,
        default=attrs.Factory(lambda self: self._refuse_unscoped, takes_self=True),
    )
    #: Serves 2026-07-28 POSTs, each in its own HTTP request's task (no session).
    requests: RequestServer = attrs.field(init=False, default=attrs.Factory(
        lambda self: RequestServer(self.app), takes_self=True))
    #: Clients whose ``tasks/*`` without ``Mcp-Name`` were logged (once each).
    unnamed: OncePerClient = attrs.field(factory=OncePerClient, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)

    # --- background ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the sessions, the App's task registry and idle expiry until cancelled.

        Cancellation: this is how it stops: every session ends (its peer's
            handlers cancelled, its streams ended), then every task actor.
        """
        with unwrap_group():
            async with self.app.registry.running(), trio.open_nursery() as nursery:
                await nursery.start(self.requests.run)
                self._nursery = nursery
                try:
                    if self.session_idle_timeout is not None:
                        nursery.start_soon(self._expire_idle, self.session_idle_timeout)
                    task_status.started()
                    await trio.sleep_forever()
                finally:
                    self._nursery = None
                    self.sessions.clear()

    async def _expire_idle(self, idle: float) -> None:
        while True:
            await trio.sleep(max(idle / 4, 0.05))
            now = trio.current_time()
            for session in list(self.sessions.values()):
                attached = any(s.attached is not None for s in session.streams.values())
                if session.busy == 0 and not attached and now - session.last_active > idle:
                    log.info("HTTP session %s expired", session.session_id)
                    await self.end_session(session)

    def close_sse_stream(self, session_id: str, request_id: str | int) -> bool:
        """Close the connection of a request's SSE stream, to make the client poll.

        The stream goes on: the server sends ``retry`` and closes the HTTP
        response; the client reconnects with ``Last-Event-ID`` after
        ``retry_ms`` and gets every event after it, the response included.
        A tool reaches its ids as ``ctx.info["session_id"]`` and
        ``ctx.request_id``.

        Returns:
            False when the session or the request's SSE stream is not open.
        """
        session = self.sessions.get(session_id)
        return session is not None and session.close_connection(request_id)

    async def end_session(self, session: HttpSession) -> None:
        """End ``session`` now (as ``DELETE`` does): later requests for it get 404.

        Cancellation: the session still ends; the wait for it may be cut short.
        """
        if session.session_id is not None:
            self.sessions.pop(session.session_id, None)
        await session.close()

    async def start_session(
        self, identity: str | None, scope: Scope, *, pre_initialize: bool = False,
        protocol_version: str | None = None,
    ) -> HttpSession:
        """Create and start a 2025-11-25 session; registered in ``sessions`` unless stateless."""
        assert self._nursery is not None
        session_id = None if self.stateless else secrets.token_urlsafe(32)
        info = request_facts(scope, session_id)
        store = self.event_store(session_id or "")
        session = HttpSession(
            session_id, identity, store, info,
            stateless=self.stateless, retry_ms=self.retry_ms,
            keepalive=self.keepalive, last_active=trio.current_time(),
            protocol_version=protocol_version, pre_initialize=pre_initialize,
        )
        await self._nursery.start(session.run, self.app)
        if session_id is not None:
            self.sessions[session_id] = session
        return session

    def _update_identity(self, scope: Scope, verified: Identity) -> None:
        """A 2025 session's requests see the identity of its latest token (same owner)."""
        values = header_values(scope, SESSION_HEADER)
        session = self.sessions.get(values[0]) if len(values) == 1 else None
        if session is not None and session.identity == verified.owner:
            session.bus.info[IDENTITY_INFO] = verified

    async def _refuse_unscoped(self, scope: Scope, send: Send, item: Request) -> bool:
        """Answer 403 ``insufficient_scope`` to a request whose scopes the token lacks.

        Returns:
            True when refused (and answered). Without a verified identity
            nothing is refused here (the peer refuses scoped names itself).
        """
        identity = scope.get(IDENTITY_KEY)
        if not isinstance(identity, Identity):
            return False
        params = item.params if isinstance(item.params, dict) else None
        required = required_scopes(self.app, item.method, params)
        if identity.has_scopes(required):
            return False
        await insufficient_scope(self.policy, scope, send, self.path, required, item.id)
        return True

    # --- ASGI -------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry point (HTTP and lifespan scopes; a WebSocket one is refused)."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            await self._refuse_websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] == "GET" and _asks_websocket(scope):
            # A server that leaves Upgrade to the app (ours on llhttp) hands the
            # handshake over as a plain GET: the same refusal as a websocket scope.
            await send({"type": "http.response.start", "status": 400,
                        "headers": _plain_text_headers(self._websocket_refusal())})
            await send({"type": "http.response.body", "body": self._websocket_refusal()})
            return
        try:
            await self._http(scope, receive, send)
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as group:
            log.debug("HTTP client went away: %r", group.exceptions)

    async def _refuse_websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket handshake (a client given the wrong transport): HTTP 400 saying so
        (the ASGI denial response where the server has it, else a close: 403)."""
        await receive()  # websocket.connect
        if "websocket.http.response" not in scope.get("extensions", {}):
            await send({"type": "websocket.close", "code": 1008})
            return
        body = self._websocket_refusal()
        await send({"type": "websocket.http.response.start", "status": 400,
                    "headers": _plain_text_headers(body)})
        await send({"type": "websocket.http.response.body", "body": body})

    def _websocket_refusal(self) -> bytes:
        """What a WebSocket client that reached this HTTP endpoint is told."""
        return (f"this is a Streamable HTTP MCP endpoint, not a WebSocket one: POST to "
                f"{self.path or '/'} over HTTP\n").encode()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    if self._nursery is None:
                        await nursery.start(self.run)
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    nursery.cancel_scope.cancel()
                    await send({"type": "lifespan.shutdown.complete"})
                    return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["method"] == "GET" and path.startswith(WELL_KNOWN) and serves_metadata(
            self.policy
        ) and path in metadata_paths(self.path, configured_resource(self.policy)):
            await serve_metadata(self.policy, scope, send, self.path)
            return
        if self.path is not None and path != self.path:
            await respond(send, 404, b"Not Found\n", [(b"content-type", b"text/plain")])
            return
        refused = self.policy.refusal(scope)
        if refused is not None:
            audit.warning("http refused remote=%s reason=%s", scope.get("client"), refused[1])
            await fail(send, 403, f"Forbidden: {refused[1]}")
            return
        verified = await authenticate(self.policy, scope, send, self.path)
        if verified is False:
            return
        identity = None if verified is None else verified.owner
        if verified is not None:
            self._update_identity(scope, verified)
        if self._nursery is None:
            await fail(send, 503, "Service unavailable: the MCP endpoint is not running")
            return
        version = header(scope, "mcp-protocol-version")
        method = scope["method"]
        if method == "POST":
            # The body decides for a version neither era has (see post).
            await post(self, scope, receive, send, identity, version)
            return
        if method in ("GET", "DELETE") and (version in MODERN_PROTOCOL_VERSIONS or (
            version is None and not header_values(scope, SESSION_HEADER)
        )):
            # 2026-07-28 has no GET stream and no sessions to delete.
            await fail(send, 405, "Method not allowed: only POST (MCP 2026-07-28 has no "
                       "sessions and no GET stream)", headers=[(b"allow", b"POST")])
            return
        if version is not None and version not in SUPPORTED_PROTOCOL_VERSIONS:
            await fail(send, 400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")
            return
        if method == "GET":
            await get(self, scope, receive, send, identity)
        elif method == "DELETE":
            await delete(self, scope, send, identity)
        else:
            allow = b"POST, DELETE" if self.stateless else b"GET, POST, DELETE"
            await fail(send, 405, "Method not allowed", headers=[(b"allow", allow)])



async def serve_http(
    app: App | StreamableHttpApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    path: str = "/mcp",
    tokens: Mapping[str, str] | None = None,
    authenticate: Authenticator | None = None,
    allowed_origins: Sequence[str] | None = None,
    allowed_hosts: Sequence[str] | None = None,
    stateless: bool = False,
    json_response: bool = False,
    verifier: TokenVerifier | None = None,
    resource: str | None = None,
    authorization_servers: Sequence[str] | None = None,
    scopes_supported: Sequence[str] | None = None,
    required_scopes: Sequence[str] = (),
    server: HttpServerName | None = None,
    settings: HttpServerSettings | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    task_status: trio.TaskStatus[HttpAddress] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` over Streamable HTTP, until cancelled.

    Start it with ``address = await nursery.start(serve_http, app)``;
    ``address.url`` is the endpoint. Pass a configured
    :class:`StreamableHttpApp` for the options not listed here (then leave
    the keyword options at their defaults; they are ignored).

    Two HTTP/1.1 servers can run it: ``"llhttp"``, this package's own server
    on ``httptools`` (the ``fast`` extra; the default when installed), with
    the limits, timeouts and framing defenses of :class:`HttpServerSettings`;
    and ``"hypercorn"``, hypercorn's Trio worker (h11; the default without
    ``httptools``), which refuses none of the request-smuggling framings
    (e.g. ``Content-Length`` with ``Transfer-Encoding``) and belongs behind
    a proxy that normalizes requests.

    Args:
        app: The App to serve, or a :class:`StreamableHttpApp` wrapping one.
        host: The interface to bind: loopback by default. Beyond loopback,
            set ``allowed_hosts`` (the names clients use) and use tokens.
        port: The TCP port; 0 lets the kernel choose.
        path: The endpoint's path.
        tokens: Bearer token -> identity (see :class:`HttpPolicy`).
        authenticate: Token -> identity callback for tokens not in ``tokens``
            (sync or ``async``; a name or an :class:`~trio_mcp.auth.Identity`).
        allowed_origins: Origins allowed besides loopback ones.
        allowed_hosts: ``Host`` names allowed (loopback names by default).
        stateless: No sessions (see :class:`StreamableHttpApp`).
        json_response: Answer every request with ``application/json``.
        verifier: Verify bearer tokens with it (a
            :class:`~trio_mcp.auth.JWTVerifier`,
            :class:`~trio_mcp.auth.IntrospectionVerifier`...); the
            protected-resource metadata is then served (see :class:`HttpPolicy`).
        resource: This server's canonical URI (default: the verifier's audience).
        authorization_servers: Named in the metadata (default: the verifier's issuer).
        scopes_supported: Named in the metadata.
        required_scopes: Scopes every request needs (named in 401 challenges).
        server: ``"llhttp"`` or ``"hypercorn"``; ``None``:
            :func:`default_http_server`.
        settings: The llhttp server's limits and timeouts (by default none on
            the body: the app's ``max_body`` answers 413 with a JSON-RPC error);
            hypercorn runs with its own.
        certfile: Serve HTTPS with this PEM certificate chain (both servers).
        keyfile: The certificate's private key (PEM), when not in ``certfile``.
        task_status: Given an :class:`HttpAddress` once listening.

    Raises:
        OSError: The address could not be bound.
        RuntimeError: ``server="llhttp"`` without ``httptools`` installed.
        ValueError: An unknown ``server``, or ``keyfile`` without ``certfile``.

    Cancellation: this is how the server stops. On llhttp: it stops
        accepting, closes idle connections, gives requests in progress
        ``settings.shutdown_timeout`` seconds, then every session ends and
        every task actor is cancelled. On hypercorn: open connections are
        closed after its half-second grace, then the same.
    """
    chosen = default_http_server() if server is None else server
    if chosen not in ("llhttp", "hypercorn"):
        raise ValueError(f"server must be 'llhttp' or 'hypercorn', not {server!r}")
    if chosen == "llhttp" and not LLHTTP_AVAILABLE:
        raise RuntimeError("server='llhttp' needs httptools: pip install 'trio-mcp[fast]'")
    if keyfile is not None and certfile is None:
        raise ValueError("keyfile needs certfile")
    if isinstance(app, App):
        app = StreamableHttpApp(
            app, path, HttpPolicy(
                tokens, authenticate, allowed_origins, allowed_hosts, verifier=verifier,
                resource=resource, authorization_servers=authorization_servers,
                scopes_supported=scopes_supported, required_scopes=required_scopes,
            ),
            stateless=stateless, json_response=json_response,
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if settings is None:
        # No server-level body limit: the app answers 413 itself, with a JSON-RPC
        # error body, after reading at most its max_body.
        settings = HttpServerSettings()
    with unwrap_group():
        await run_server(app, app.run, host, port, app.path or "/", server=chosen,
                         settings=settings, certfile=certfile, keyfile=keyfile,
                         task_status=task_status)


def _asks_websocket(scope: Scope) -> bool:
    """Whether an HTTP request is a WebSocket handshake (``Upgrade: websocket``)."""
    return any(name == b"upgrade" and value.lower() == b"websocket"
               for name, value in scope["headers"])


def _plain_text_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode())]
