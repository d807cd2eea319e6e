"""The WebSocket transport's shared part: one JSON-RPC message per text frame.

WebSocket is not one of the two standard MCP transports; it is the custom
transport the reference SDKs shipped, and trio-mcp speaks it the same way so
their clients can connect: the client offers the subprotocol ``mcp``, and
each text frame carries exactly one JSON-RPC message.

The API follows trio-websocket's tiers, one module each:

* :func:`~trio_mcp.open_websocket_client` (``_websocket_client``): an async
  context manager yielding a client :class:`Peer` after the ``initialize``
  handshake;
* :func:`~trio_mcp.serve_websocket` (``_websocket_server``): started with
  ``nursery.start``, runs one server :class:`Peer` per connection over a
  shared :class:`App` (tools and task registry), until cancelled; its
  security defaults (loopback bind, ``Origin`` check, bearer tokens) are
  described there;
* :func:`wrap_websocket` (here): low level, carries a bus over an existing
  :class:`trio_websocket.WebSocketConnection` in a nursery of your choice.

This module holds what both sides share: the frame <-> bus pumps and the
limits. A frame over ``max_message_size`` closes the connection with code
1009; binary frames and frames that do not decode are answered with a
JSON-RPC error and the connection carries on.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import trio
import trio_websocket

from .._errors import INVALID_REQUEST
from ..peer import (
    BusEnds,
    Incoming,
    MessageBus,
    Undecodable,
    decode_message,
    encode_for_wire,
    open_bus,
)

log = logging.getLogger("trio_mcp.transports")

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
