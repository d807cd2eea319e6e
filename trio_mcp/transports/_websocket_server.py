"""The WebSocket transport, server side: :func:`serve_websocket`.

Security defaults: bind 127.0.0.1; refuse (HTTP 403) a handshake whose
``Origin`` is not a loopback origin or in the allow-list, which stops
DNS-rebinding pages from reaching a local server; with ``tokens`` or
``authenticate`` (or a ``verifier``), refuse (HTTP 401) a handshake without
a valid ``Authorization: Bearer`` token. The token's identity's owner becomes
the bus context (the :class:`~trio_mcp.auth.Identity` itself is in
``bus.info["identity"]``), so tasks belong to that identity, not to the connection: a client
that reconnects with the same token finds its tasks again, and no other
identity can see them. The frame pumps are in :mod:`._websocket`.
"""

from __future__ import annotations

import logging
import ssl
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, final

import attrs
import trio
import trio_websocket

from .._util import unwrap_group
from ..auth import CallbackVerifier, Identity, InvalidToken, TokenVerifier
from ..peer import IDENTITY_INFO, App, Peer, Role, host_reruns
from ._websocket import (
    DEFAULT_MAX_MESSAGE_SIZE,
    HANDSHAKE_TIMEOUT,
    RECEIVE_BUFFER_SIZE,
    SUBPROTOCOL,
    _endpoint,
    _start_transport,
    _stop_transport,
)

log = logging.getLogger("trio_mcp.transports")
audit = logging.getLogger("trio_mcp.audit")

#: Origin hosts allowed by default: pages served from this machine.
LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})


@final
@attrs.frozen
class WebSocketAddress:
    """Where :func:`serve_websocket` listens; what ``nursery.start`` returns.

    Attributes:
        host: The host the server was bound to, as given.
        port: The bound port (the one the kernel chose, for port 0).
        secure: True when serving TLS (``wss://``).
    """

    host: str
    port: int
    secure: bool = False

    @property
    def url(self) -> str:
        """The server's URL, e.g. ``ws://127.0.0.1:8000/``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'wss' if self.secure else 'ws'}://{host}:{self.port}/"


def origin_allowed(origin: str | None, allowed_origins: Sequence[str] | None = None) -> bool:
    """Apply the ``Origin`` policy of :func:`serve_websocket`.

    Args:
        origin: The handshake's ``Origin`` header, or ``None`` when absent.
        allowed_origins: Exact origins (``"https://app.example"``) allowed
            besides the defaults; ``"*"`` allows every origin.

    Returns:
        True for no ``Origin`` (a non-browser client), for an origin whose
        host is ``localhost``, ``127.0.0.1`` or ``[::1]``, and for an origin
        in ``allowed_origins`` (compared case-insensitively, trailing ``/``
        ignored); else False.
    """
    if origin is None:
        return True
    normalized = origin.strip().rstrip("/").lower()
    allowed = {o.strip().rstrip("/").lower() for o in allowed_origins or ()}
    if "*" in allowed or normalized in allowed:
        return True
    try:
        parts = urllib.parse.urlsplit(normalized)
        hostname = parts.hostname
        parts.port  # noqa: B018 -- raises ValueError for a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and hostname in LOOPBACK_HOSTS


Authenticator = Callable[[str], Any]


@final
@attrs.define(eq=False)
class _Handshake:
    """The handshake policy of one server: origins and the bearer-token verifier."""

    verifier: TokenVerifier | None
    allowed_origins: Sequence[str] | None


def _headers(request: trio_websocket.WebSocketRequest, name: bytes) -> list[str]:
    return [
        value.decode("latin-1") for key, value in request.headers if key.lower() == name
    ]


def _bearer_token(values: list[str]) -> str | None:
    if len(values) != 1:
        return None
    scheme, _, credentials = values[0].strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() != "bearer" or not credentials:
        return None
    return credentials


@final
@attrs.define(eq=False)
class _WebSocketServer:
    """Runs one server :class:`Peer` per accepted connection."""

    app: App
    policy: _Handshake
    max_message_size: int

    async def handle_stream(self, stream: trio.abc.Stream) -> None:
        """Serve one TCP (or TLS) connection until it closes; never raises Exception.

        Cancellation: cancels the peer and the pumps and closes the stream at
            once.
        """
        try:
            async with trio.open_nursery() as nursery:
                try:
                    await self._serve(stream, nursery)
                finally:
                    nursery.cancel_scope.cancel()
        except* (trio_websocket.ConnectionClosed, trio.BrokenResourceError) as group:
            # The client went away mid-handshake.
            log.debug("WebSocket connection lost: %r", group.exceptions)
        except* Exception as group:
            # One broken connection must not take the whole server down.
            log.error("WebSocket connection failed", exc_info=group)
        finally:
            await trio.aclose_forcefully(stream)

    async def _serve(self, stream: trio.abc.Stream, nursery: trio.Nursery) -> None:
        request: trio_websocket.WebSocketRequest | None = None
        with trio.move_on_after(HANDSHAKE_TIMEOUT):
            request = await trio_websocket.wrap_server_stream(
                nursery,
                stream,
                max_message_size=self.max_message_size,
                receive_buffer_size=RECEIVE_BUFFER_SIZE,
            )
        if request is None:
            log.info("WebSocket handshake timed out")
            return
        remote = _endpoint(request.remote)
        origins = _headers(request, b"origin")
        if len(origins) > 1 or not origin_allowed(
            origins[0] if origins else None, self.policy.allowed_origins
        ):
            audit.warning("websocket refused remote=%s origin=%.200r", remote, origins)
            await request.reject(403, body=b"Forbidden: this Origin is not allowed\n")
            return
        identity: Identity | None = None
        if self.policy.verifier is not None:
            token = _bearer_token(_headers(request, b"authorization"))
            reason = "no token"
            try:
                identity = None if token is None else await self.policy.verifier.verify(token)
                reason = "refused token"
                _ = identity and identity.owner  # ValueError: neither subject nor client id
            except InvalidToken as exc:
                reason = f"invalid token: {exc}"
            except Exception:
                log.exception("the token verifier failed")
                await request.reject(500, body=b"Internal error\n")
                return
            if identity is None:
                audit.warning("websocket refused remote=%s reason=%s", remote, reason)
                challenge = b'Bearer realm="mcp"' + (
                    b'' if token is None else b', error="invalid_token"')
                await request.reject(
                    401,
                    extra_headers=[(b"WWW-Authenticate", challenge)],
                    body=b"Unauthorized: a valid bearer token is required\n",
                )
                return
        subprotocol = SUBPROTOCOL if SUBPROTOCOL in request.proposed_subprotocols else None
        connection = await request.accept(subprotocol=subprotocol)
        owner = None if identity is None else identity.owner
        audit.info("websocket accepted remote=%s identity=%s subprotocol=%s", remote,
                   owner, subprotocol)
        bus, done = _start_transport(connection, nursery, owner)
        if identity is not None:
            bus.info[IDENTITY_INFO] = identity
        try:
            await Peer(self.app, bus, Role.SERVER).run()
        finally:
            await _stop_transport(bus, done, nursery)


def _listener_port(listener: trio.abc.Listener[Any]) -> int:
    if isinstance(listener, trio.SSLListener):
        listener = listener.transport_listener
    assert isinstance(listener, trio.SocketListener)
    port: int = listener.socket.getsockname()[1]
    return port


async def serve_websocket(
    app: App,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    tokens: Mapping[str, str | Identity] | None = None,
    authenticate: Authenticator | None = None,
    verifier: TokenVerifier | None = None,
    allowed_origins: Sequence[str] | None = None,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ssl_context: ssl.SSLContext | None = None,
    task_status: trio.TaskStatus[WebSocketAddress] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` over WebSocket, one server :class:`Peer` per connection, until cancelled.

    Start it with ``address = await nursery.start(serve_websocket, app)``;
    ``address.port`` is the bound port. It can also be awaited directly.

    The App's tools and task registry are shared by every connection; each
    connection has its own peer state. The registry runs for as long as the
    server does, so tasks outlive the connection that created them.

    Handshake: the subprotocol ``mcp`` is selected when the client offers
    it; a client that offers no subprotocol (or only others) is still
    accepted, with none. The ``Origin`` header is checked with
    :func:`origin_allowed` (HTTP 403 when refused). With ``tokens`` or
    ``authenticate``, the handshake must carry ``Authorization: Bearer
    <token>`` with a known token (HTTP 401 otherwise), and the token's
    identity owns the tasks of the connection (``Peer.context`` is
    ``"identity:<owner>"``, the owner being the token's subject):
    reconnecting with the same identity (any of its tokens) finds them
    again, other identities get -32602. Without authentication, tasks are
    bound to their connection.

    Args:
        app: The tools and handlers to serve.
        host: The interface to bind: loopback by default. Use ``"0.0.0.0"``
            or ``"::"`` deliberately, with tokens and TLS. With port 0, give
            a numeric address: a name resolving to several addresses binds
            each to a different port, and ``port`` reports the first.
        port: The TCP port; 0 lets the kernel choose.
        tokens: Bearer token -> identity. Tokens are compared in constant
            time.
        authenticate: Called with a bearer token not in ``tokens``; returns
            the identity (a name or a :class:`~trio_mcp.auth.Identity`; may be
            ``async``), or ``None`` to refuse. If it raises, the handshake
            gets HTTP 500.
        verifier: A :class:`~trio_mcp.auth.TokenVerifier` (JWT,
            introspection...) for the handshake's token, instead of
            ``tokens``/``authenticate``: a refused token gets HTTP 401 with
            ``error="invalid_token"``; the identity's scopes decide which
            tools, resources and prompts the connection sees and uses.
        allowed_origins: Origins allowed besides loopback ones (exact
            strings such as ``"https://app.example"``; ``"*"`` for all).
        max_message_size: Largest accepted message (text frame); a larger
            one closes the connection with code 1009.
        ssl_context: Serve ``wss://`` with this TLS context.
        task_status: Given a :class:`WebSocketAddress` once listening.

    Raises:
        OSError: The address could not be bound.

    Cancellation: this is how the server stops. Every connection handler is
        cancelled (each TCP connection closed at once; clients see code
        1006), then every task actor; nothing keeps running after it
        returns, and nothing waits on the network while it stops.
    """
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if verifier is None and (tokens is not None or authenticate is not None):
        verifier = CallbackVerifier(tokens, authenticate)
    server = _WebSocketServer(app, _Handshake(verifier, allowed_origins), max_message_size)
    host_reruns(app)  # claims re-runs before any connection
    with unwrap_group():
        async with app.registry.running():
            listeners: list[trio.abc.Listener[Any]]
            if ssl_context is None:
                listeners = list(await trio.open_tcp_listeners(port, host=host))
            else:
                listeners = list(await trio.open_ssl_over_tcp_listeners(
                    port, ssl_context, host=host, https_compatible=True
                ))
            address = WebSocketAddress(host, _listener_port(listeners[0]), ssl_context is not None)
            async with trio.open_nursery() as nursery:
                await nursery.start(trio.serve_listeners, server.handle_stream, listeners)
                log.info("serving MCP over WebSocket at %s", address.url)
                task_status.started(address)
