"""The WebSocket transport: one JSON-RPC message per text frame, on trio-websocket.

WebSocket is not one of the two standard MCP transports; it is the custom
transport the reference SDKs shipped, and this module speaks it the same way
so their clients can connect: the client offers the subprotocol ``mcp``, and
each text frame carries exactly one JSON-RPC message.

The API follows trio-websocket's tiers:

* :func:`open_websocket_client`: an async context manager yielding a client
  :class:`Peer` after the ``initialize`` handshake;
* :func:`serve_websocket`: started with ``nursery.start``, runs one server
  :class:`Peer` per connection over a shared :class:`App` (tools and task
  registry), until cancelled;
* :func:`wrap_websocket`: low level, carries a bus over an existing
  :class:`trio_websocket.WebSocketConnection` in a nursery of your choice.

Security defaults of :func:`serve_websocket`: bind 127.0.0.1; refuse (HTTP
403) a handshake whose ``Origin`` is not a loopback origin or in the
allow-list, which stops DNS-rebinding pages from reaching a local server;
with ``tokens`` or ``authenticate``, refuse (HTTP 401) a handshake without a
known ``Authorization: Bearer`` token. The token's identity becomes the bus
context, so tasks belong to that identity, not to the connection: a client
that reconnects with the same token finds its tasks again, and no other
identity can see them.

Limits: a frame over ``max_message_size`` closes the connection with code
1009; binary frames and frames that do not decode are answered with a
JSON-RPC error and the connection carries on.
"""

from __future__ import annotations

import hmac
import logging
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, final

import attrs
import trio
import trio_websocket

from .._errors import INVALID_REQUEST
from .._util import unwrap_group
from ..peer import (
    App,
    BusEnds,
    Implementation,
    Incoming,
    MessageBus,
    Peer,
    Role,
    Undecodable,
    decode_message,
    encode_for_wire,
    open_bus,
    open_peer,
)

log = logging.getLogger("trio_mcp.transports")
audit = logging.getLogger("trio_mcp.audit")

#: The WebSocket subprotocol of MCP, offered by clients and selected by servers.
SUBPROTOCOL: Final = "mcp"
#: Default largest accepted message (one frame): 4 Mi, counted as trio-websocket
#: does, with ``len()`` (characters of a text frame).
DEFAULT_MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
#: Seconds a client has to complete the opening handshake.
HANDSHAKE_TIMEOUT: Final = 10.0
#: Seconds to wait for the other side to answer a close frame.
CLOSE_TIMEOUT: Final = 2.0
#: Bytes read from the socket at a time.
RECEIVE_BUFFER_SIZE: Final = 65_536
#: Origin hosts allowed by default: pages served from this machine.
LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})

_BINARY_FRAME: Final = (
    "Invalid request: binary frames are not supported; "
    "send each JSON-RPC message as one UTF-8 text frame"
)
_CLOSE_NORMAL: Final = 1000
_CLOSE_TOO_BIG: Final = 1009


# --- the frame <-> bus pumps -------------------------------------------------------------


async def run_websocket_transport(
    connection: trio_websocket.WebSocketConnection,
    ends: BusEnds,
    *,
    close_timeout: float = CLOSE_TIMEOUT,
) -> None:
    """Carry a bus over an open WebSocket connection, one message per text frame.

    Reads frames into ``ends.to_peer`` until the connection closes (end of
    stream for the peer); writes ``ends.from_peer`` as text frames until the
    peer closes it, then closes the connection (code 1000). A binary frame
    becomes :class:`Undecodable` (-32600) and invalid JSON becomes
    :class:`Undecodable` (-32700), which the peer answers; neither ends the
    connection.

    Args:
        connection: An open trio-websocket connection, client or server side.
        ends: The transport's ends of a bus from :func:`open_bus`.
        close_timeout: Seconds to wait for the other side's close frame.

    Cancellation: stops both directions and closes the TCP connection at
        once, without a closing handshake (the other side sees code 1006).
    """
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_read_frames, connection, ends)
        await _write_frames(connection, ends, close_timeout)
        # The peer is done sending and the connection is closed: stop reading.
        nursery.cancel_scope.cancel()


def _frame_to_incoming(frame: str | bytes) -> Incoming:
    if isinstance(frame, bytes):
        return Undecodable(INVALID_REQUEST, _BINARY_FRAME)
    return decode_message(frame)


async def _read_frames(connection: trio_websocket.WebSocketConnection, ends: BusEnds) -> None:
    async with ends.to_peer as to_peer:
        try:
            while True:
                frame = await connection.get_message()
                item = _frame_to_incoming(frame)
                if isinstance(item, Undecodable):
                    log.info("%s: undecodable frame (%d): %s", connection, item.code, item.reason)
                await to_peer.send(item)
        except trio_websocket.ConnectionClosed as exc:
            reason = exc.reason
            if reason is not None and reason.code == _CLOSE_TOO_BIG:
                log.warning("%s closed: %s", connection, reason.reason)
            else:
                log.debug("%s closed: %r", connection, reason)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The peer stopped reading: it is shutting down.
            return


async def _write_frames(
    connection: trio_websocket.WebSocketConnection, ends: BusEnds, close_timeout: float
) -> None:
    finished = False
    try:
        async with ends.from_peer as from_peer:
            async for msg in from_peer:
                data = encode_for_wire(msg)
                if data is None:
                    log.error("dropped a message that cannot be encoded as JSON: %r", msg)
                    continue
                await connection.send_message(data.decode("utf-8"))
        finished = True
    except trio_websocket.ConnectionClosed:
        finished = True
    finally:
        if finished:
            # The reader still runs, so the other side's close frame can
            # complete the closing handshake.
            with trio.move_on_after(close_timeout):
                await connection.aclose(_CLOSE_NORMAL)
        else:
            # Cancelled (or failed): the reader is stopping too, so no closing
            # handshake can complete; close the TCP connection at once, as
            # trio-websocket does on cancellation (the other side sees 1006).
            await trio.aclose_forcefully(connection)


def _endpoint(endpoint: trio_websocket.Endpoint | str) -> str:
    if isinstance(endpoint, trio_websocket.Endpoint):
        address = endpoint.address
        host = f"[{address}]" if address.version == 6 else str(address)
        return f"{host}:{endpoint.port}"
    return endpoint


def _connection_info(connection: trio_websocket.WebSocketConnection) -> dict[str, Any]:
    return {
        "transport": "websocket",
        "path": connection.path,
        "subprotocol": connection.subprotocol,
        "local": _endpoint(connection.local),
        "remote": _endpoint(connection.remote),
    }


def wrap_websocket(
    connection: trio_websocket.WebSocketConnection,
    nursery: trio.Nursery,
    *,
    context: str | None = None,
) -> MessageBus:
    """Low level: run the frame/bus pumps of an open WebSocket connection in ``nursery``.

    One text frame is one JSON-RPC message, in both directions. When the
    peer closes the bus's ``outgoing`` channel, the pumps close the
    connection; when the other side closes the connection, the bus's
    ``incoming`` channel ends.

    Args:
        connection: An open trio-websocket connection (client or server side;
            a server connection must already be accepted).
        nursery: Where the pumps run; cancelling it stops them and closes the
            connection at once.
        context: The authenticated identity of the other side, if any; the
            tasks its peer creates are bound to it.

    Returns:
        The bus to hand to a :class:`Peer`. Its ``info`` holds
        ``{"transport": "websocket", "path", "subprotocol", "local", "remote"}``.
    """
    bus, _ = _start_transport(connection, nursery, context)
    return bus


def _start_transport(
    connection: trio_websocket.WebSocketConnection, nursery: trio.Nursery, context: str | None
) -> tuple[MessageBus, trio.Event]:
    """Start the pumps in ``nursery``; the event is set once they are done."""
    bus, ends = open_bus(context=context, info=_connection_info(connection))
    done = trio.Event()

    async def transport() -> None:
        try:
            await run_websocket_transport(connection, ends)
        finally:
            done.set()

    nursery.start_soon(transport)
    return bus, done


async def _stop_transport(bus: MessageBus, done: trio.Event, nursery: trio.Nursery) -> None:
    """After the peer: let the pumps send what is queued and close, then stop the nursery.

    The wait is bounded by :data:`CLOSE_TIMEOUT`; cancelling the nursery
    then also stops trio-websocket's reader task, which would otherwise wait
    for the other side to close the TCP connection.
    """
    bus.outgoing.close()
    try:
        with trio.move_on_after(CLOSE_TIMEOUT):
            await done.wait()
    finally:
        nursery.cancel_scope.cancel()


# --- client -------------------------------------------------------------------------------


def _header_value(name: str, value: str) -> bytes:
    if not value.isascii() or not value.isprintable():
        raise ValueError(f"{name} must be printable ASCII text")
    return value.encode("ascii")


def _parse_url(url: str) -> tuple[str, int, str, bool]:
    """Split a ``ws://``/``wss://`` URL into host, port, resource and "secure"."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("ws", "wss"):
        raise ValueError(f"not a WebSocket URL (ws:// or wss://): {url!r}")
    if not parts.hostname:
        raise ValueError(f"the URL has no host: {url!r}")
    secure = parts.scheme == "wss"
    port = parts.port if parts.port is not None else (443 if secure else 80)
    resource = parts.path or "/"
    if parts.query:
        resource += "?" + parts.query
    return parts.hostname, port, resource, secure


@asynccontextmanager
async def open_websocket_client(
    url: str,
    app: App | None = None,
    *,
    token: str | None = None,
    origin: str | None = None,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    client_info: Implementation | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[Peer]:
    """Connect to an MCP WebSocket server and yield the client :class:`Peer`.

    Offers the subprotocol ``mcp``. The block starts after the
    ``initialize`` handshake; leaving it closes the connection (code 1000).

    Args:
        url: A ``ws://`` or ``wss://`` URL.
        app: What this client offers (sampling/elicitation handlers, tasks).
            A bare App is used when omitted.
        token: Sent as ``Authorization: Bearer <token>`` on the handshake.
        origin: Sent as the ``Origin`` header (browsers always send one;
            other clients usually do not).
        max_message_size: Largest accepted incoming message; a larger frame
            closes the connection with code 1009.
        client_info: ``clientInfo`` to send instead of the App's.
        ssl_context: For ``wss://`` URLs; the default context when omitted.

    Raises:
        ValueError: A bad URL, or a token/origin that cannot be a header.
        trio_websocket.ConnectionRejected: The server refused the handshake
            (``status_code`` 401 for a missing or unknown token, 403 for a
            refused origin).
        trio_websocket.HandshakeError: The connection could not be opened
            (``ConnectionTimeout`` after :data:`HANDSHAKE_TIMEOUT` seconds).
        RemoteError, ConnectionClosed: The MCP handshake failed.

    Cancellation: cancelling the block closes the TCP connection at once,
        without a closing handshake.
    """
    host, port, resource, secure = _parse_url(url)
    headers: list[tuple[bytes, bytes]] = []
    if token is not None:
        headers.append((b"Authorization", b"Bearer " + _header_value("token", token)))
    if origin is not None:
        headers.append((b"Origin", _header_value("origin", origin)))
    host_header = f"[{host}]" if ":" in host else host
    if port != (443 if secure else 80):
        host_header += f":{port}"
    app = app if app is not None else App("trio-mcp-client")
    stream: trio.SocketStream | trio.SSLStream[trio.SocketStream]
    # The stream is opened and closed here rather than by trio-websocket, so
    # that it is closed on every path (trio-websocket leaves it open when the
    # server rejects the handshake).
    with trio.move_on_after(HANDSHAKE_TIMEOUT) as connect_scope:
        try:
            if secure:
                stream = await trio.open_ssl_over_tcp_stream(
                    host, port, ssl_context=ssl_context, https_compatible=True
                )
            else:
                stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            raise trio_websocket.HandshakeError(f"cannot connect to {url}: {exc}") from exc
    if connect_scope.cancelled_caught:
        raise trio_websocket.ConnectionTimeout(f"cannot connect to {url}: timed out")
    try:
        with unwrap_group():
            async with trio.open_nursery() as nursery:
                connection: trio_websocket.WebSocketConnection | None = None
                with trio.move_on_after(HANDSHAKE_TIMEOUT):
                    connection = await trio_websocket.wrap_client_stream(
                        nursery,
                        stream,
                        host_header,
                        resource,
                        subprotocols=[SUBPROTOCOL],
                        extra_headers=headers,
                        max_message_size=max_message_size,
                        receive_buffer_size=RECEIVE_BUFFER_SIZE,
                    )
                if connection is None:
                    raise trio_websocket.ConnectionTimeout(
                        f"{url} did not complete the WebSocket handshake"
                    )
                bus, done = _start_transport(connection, nursery, None)
                try:
                    async with open_peer(app, bus, Role.CLIENT, client_info=client_info) as peer:
                        yield peer
                finally:
                    await _stop_transport(bus, done, nursery)
    finally:
        await trio.aclose_forcefully(stream)


# --- server -------------------------------------------------------------------------------


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


Authenticator = Callable[[str], str | None]


@final
@attrs.define(eq=False)
class _Handshake:
    """The handshake policy of one server: origins and bearer tokens."""

    tokens: Mapping[str, str] | None
    authenticate: Authenticator | None
    allowed_origins: Sequence[str] | None

    @property
    def requires_token(self) -> bool:
        return self.tokens is not None or self.authenticate is not None

    def identity(self, token: str) -> str | None:
        """The identity of ``token``, or None when it is unknown."""
        if self.tokens is not None:
            found: str | None = None
            presented = token.encode()
            # Compare every token in constant time: no early exit to time.
            for known, identity in self.tokens.items():
                if hmac.compare_digest(known.encode(), presented):
                    found = identity
            if found is not None:
                return found
        if self.authenticate is not None:
            return self.authenticate(token)
        return None


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
        identity: str | None = None
        if self.policy.requires_token:
            token = _bearer_token(_headers(request, b"authorization"))
            try:
                identity = None if token is None else self.policy.identity(token)
            except Exception:
                log.exception("the authenticate callback failed")
                await request.reject(500, body=b"Internal error\n")
                return
            if not identity:
                audit.warning("websocket refused remote=%s reason=%s", remote,
                              "no token" if token is None else "unknown token")
                await request.reject(
                    401,
                    extra_headers=[(b"WWW-Authenticate", b'Bearer realm="mcp"')],
                    body=b"Unauthorized: a valid bearer token is required\n",
                )
                return
        subprotocol = SUBPROTOCOL if SUBPROTOCOL in request.proposed_subprotocols else None
        connection = await request.accept(subprotocol=subprotocol)
        audit.info("websocket accepted remote=%s identity=%s subprotocol=%s", remote,
                   identity, subprotocol)
        bus, done = _start_transport(connection, nursery, identity)
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
    tokens: Mapping[str, str] | None = None,
    authenticate: Callable[[str], str | None] | None = None,
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
    ``"identity:<identity>"``): reconnecting with the same token finds them
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
            the identity (a non-empty string), or ``None`` to refuse. If it
            raises, the handshake gets HTTP 500.
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
    server = _WebSocketServer(
        app, _Handshake(tokens, authenticate, allowed_origins), max_message_size
    )
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
