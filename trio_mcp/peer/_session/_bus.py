"""The message bus: the only thing a peer knows about its transport.

A transport gives the peer a :class:`MessageBus`: a bounded channel of parsed
incoming messages (:class:`~._jsonrpc.Undecodable` marks input that did not
parse) and a bounded channel for outgoing messages. The bounds give
backpressure in both directions: a slow reader makes the writer wait, so no
queue grows without bound.
"""

from __future__ import annotations

import logging
from typing import Any, Final, final

import attrs
import trio

from .._messages import Incoming, Message, decode_message, encode_for_wire

log = logging.getLogger("trio_mcp.transports")

#: Default capacity of each direction of a bus, in messages.
DEFAULT_BUS_CAPACITY: Final = 64


@final
@attrs.define(eq=False)
class MessageBus:
    """The peer's end of a transport.

    Attributes:
        incoming: Messages from the other side, in arrival order. End of
            stream (``EndOfChannel``) means the connection closed.
        outgoing: Messages to send; closing it asks the transport to close.
        context: Who is on the other end, as far as the transport knows: an
            authenticated identity for WebSocket with tokens, else ``None``.
            Tasks are bound to it (see :class:`trio_mcp.TaskRegistry`).
        info: Free-form transport facts (``{"transport": "stdio"}``, the
            WebSocket path, the peer address...), for logs and applications.
    """

    incoming: trio.MemoryReceiveChannel[Incoming]
    outgoing: trio.MemorySendChannel[Message]
    context: str | None = None
    info: dict[str, Any] = attrs.field(factory=dict)


@final
@attrs.define(eq=False)
class BusEnds:
    """The transport's ends of a bus: where it puts what it read, and takes what to write."""

    to_peer: trio.MemorySendChannel[Incoming]
    from_peer: trio.MemoryReceiveChannel[Message]


def open_bus(
    capacity: int = DEFAULT_BUS_CAPACITY,
    *,
    context: str | None = None,
    info: dict[str, Any] | None = None,
) -> tuple[MessageBus, BusEnds]:
    """Create the channels of one bus.

    Args:
        capacity: Bound of each direction, in messages.
        context: The authenticated identity of the remote side, if any.
        info: Transport facts to expose on :attr:`MessageBus.info`.

    Returns:
        The peer's end and the transport's end.
    """
    in_send, in_recv = trio.open_memory_channel[Incoming](capacity)
    out_send, out_recv = trio.open_memory_channel[Message](capacity)
    bus = MessageBus(in_recv, out_send, context=context, info=dict(info or {}))
    return bus, BusEnds(in_send, out_recv)


async def _pump(
    source: trio.MemoryReceiveChannel[Message], sink: trio.MemorySendChannel[Incoming]
) -> None:
    # Messages cross as JSON, as they would on a real wire: the other side
    # sees exactly the bytes a real transport would carry.
    async with source, sink:
        async for msg in source:
            # As every transport does: a response that is not JSON becomes a
            # -32603 error for its id; anything else unencodable is dropped.
            data = encode_for_wire(msg)
            if data is None:
                log.error("dropped a message that cannot be encoded as JSON: %.200r", msg)
                continue
            try:
                await sink.send(decode_message(data))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return


async def run_memory_link(a: BusEnds, b: BusEnds) -> None:
    """Join two buses' transport ends in memory until both sides close.

    Each message is encoded to JSON and decoded again on the way, so two peers
    in one process exchange exactly what a real transport would carry.

    Cancelling this closes both buses.
    """
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_pump, a.from_peer, b.to_peer)
        nursery.start_soon(_pump, b.from_peer, a.to_peer)


def memory_bus_pair(
    capacity: int = DEFAULT_BUS_CAPACITY,
    *,
    context_a: str | None = None,
    context_b: str | None = None,
) -> tuple[MessageBus, MessageBus, BusEnds, BusEnds]:
    """Create two buses whose transport ends :func:`run_memory_link` can join.

    Most programs want :func:`trio_mcp.open_memory_pair` instead.
    """
    bus_a, ends_a = open_bus(capacity, context=context_a, info={"transport": "memory"})
    bus_b, ends_b = open_bus(capacity, context=context_b, info={"transport": "memory"})
    return bus_a, bus_b, ends_a, ends_b
