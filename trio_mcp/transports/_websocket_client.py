"""The WebSocket transport, client side: :func:`open_websocket_client`.

The client offers the subprotocol ``mcp``, sends an optional bearer token
and ``Origin``, and yields a client :class:`Peer` once the MCP ``initialize``
handshake is done. The frame pumps are in :mod:`._websocket`.
"""

from __future__ import annotations

import ssl
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import final

import trio
import trio_websocket

from .._errors import ConnectionFailed
from .._util import unwrap_group
from ..peer import App, Implementation, Peer
from ._client import (
    DEFAULT_ERA,
    INIT_TIMEOUT,
    check_era,
    interrupt_wins,
    open_client_peer,
    server_key,
)
from ._failures import body_text
from ._websocket import (
    DEFAULT_MAX_MESSAGE_SIZE,
    HANDSHAKE_TIMEOUT,
    RECEIVE_BUFFER_SIZE,
    SUBPROTOCOL,
    _start_transport,
    _stop_transport,
)


@final
class WebSocketRefused(ConnectionFailed, trio_websocket.ConnectionRejected):  # type: ignore[misc]
    """The WebSocket server refused the handshake: a :class:`ConnectionFailed` and a
    ``trio_websocket.ConnectionRejected`` (``.status_code``, ``.headers``, ``.body``)."""

    def __init__(self, message: str, *, url: str, rejected: trio_websocket.ConnectionRejected):
        trio_websocket.ConnectionRejected.__init__(
            self, rejected.status_code, rejected.headers, rejected.body
        )
        self.args = (message,)
        self.url = url

    def __str__(self) -> str:
        return str(self.args[0])


@final
class WebSocketUnreachable(ConnectionFailed, trio_websocket.HandshakeError):
    """The WebSocket server could not be reached or did not complete the handshake: a
    :class:`ConnectionFailed` and a ``trio_websocket.HandshakeError`` at once."""

    def __init__(self, message: str, *, url: str) -> None:
        trio_websocket.HandshakeError.__init__(self, message)
        self.url = url
        self.status_code = None


def websocket_failure(url: str, error: BaseException) -> ConnectionFailed:
    """What ``open_websocket_client`` raises for a handshake that failed (from ``error``)."""
    if isinstance(error, trio_websocket.ConnectionRejected):
        return WebSocketRefused(
            f"the server refused the WebSocket connection to {url}: HTTP {error.status_code}"
            f"{body_text(error.body)}",
            url=url, rejected=error,
        )
    return WebSocketUnreachable(
        f"cannot connect to {url}: {error or type(error).__name__}", url=url
    )


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
    init_timeout: float | None = INIT_TIMEOUT,
    era: str = DEFAULT_ERA,
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
        init_timeout: Seconds the server has to answer ``initialize`` once
            the WebSocket is open (30 by default); ``None`` waits forever.
        era: The protocol revision: ``"2025-11-25"`` (default, the
            ``initialize`` handshake), ``"2026-07-28"`` (``server/discover``
            and per-request ``_meta``) or ``"auto"`` (probe with
            ``server/discover``, fall back to ``initialize``; the choice is
            remembered per ``scheme://host:port/path``).
            ``peer.protocol_version`` tells which one is spoken. ``auto`` is
            opt-in: a 2026-07-28 connection has no 2025-11-25 tasks.

    Raises:
        ValueError: A bad URL or ``era``, or a token/origin that cannot be a header.
        ConnectionFailed: The connection could not be opened (the
            ``OSError`` or ``trio_websocket.HandshakeError`` as ``__cause__``;
            a ``ConnectionTimeout`` after :data:`HANDSHAKE_TIMEOUT` seconds),
            the server refused the handshake (``status_code`` 401 for a
            missing or unknown token, 403 for a refused origin; also a
            ``trio_websocket.ConnectionRejected``), or the server did not
            answer ``initialize`` within ``init_timeout`` seconds
            (:class:`~trio_mcp.HandshakeTimeout`).
        RemoteError, ConnectionClosed: The MCP handshake failed.

    Cancellation: cancelling the block closes the TCP connection at once,
        without a closing handshake. A Ctrl-C arrives as a plain
        ``KeyboardInterrupt``, never wrapped in a group.
    """
    check_era(era)
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
            raise websocket_failure(url, exc) from exc
    if connect_scope.cancelled_caught:
        timeout = trio_websocket.ConnectionTimeout(f"cannot connect to {url}: timed out")
        raise websocket_failure(url, timeout) from timeout
    try:
        with interrupt_wins(), unwrap_group():
            async with trio.open_nursery() as nursery:
                connection: trio_websocket.WebSocketConnection | None = None
                with trio.move_on_after(HANDSHAKE_TIMEOUT):
                    try:
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
                    except trio_websocket.HandshakeError as exc:
                        raise websocket_failure(url, exc) from exc
                if connection is None:
                    timeout = trio_websocket.ConnectionTimeout(
                        f"{url} did not complete the WebSocket handshake"
                    )
                    raise websocket_failure(url, timeout) from timeout
                bus, done = _start_transport(connection, nursery, None)
                bus.info["server_key"] = server_key(url)
                try:
                    async with open_client_peer(
                        app, bus, client_info=client_info, init_timeout=init_timeout,
                        era=era,
                    ) as peer:
                        yield peer
                finally:
                    await _stop_transport(bus, done, nursery)
    except trio_websocket.HandshakeError as exc:
        if isinstance(exc, ConnectionFailed):
            raise
        # A refusal comes from trio-websocket's reader task, out of the nursery.
        raise websocket_failure(url, exc) from exc
    finally:
        await trio.aclose_forcefully(stream)
