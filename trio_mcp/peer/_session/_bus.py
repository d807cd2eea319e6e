"""The message bus: the only thing a peer knows about its transport.

A transport gives the peer a :class:`MessageBus`: a bounded channel of parsed
incoming messages (:class:`~._jsonrpc.Undecodable` marks input that did not
parse) and a bounded channel for outgoing messages. The bounds give
backpressure in both directions: a slow reader makes the writer wait, so no
queue grows without bound.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, Final, final

import attrs
import trio

from ..._inline import ReaderTask
from .._messages import Incoming, Message, Notification, decode_message, encode_for_wire

log = logging.getLogger("trio_mcp.transports")

#: Default capacity of each direction of a bus, in messages.
DEFAULT_BUS_CAPACITY: Final = 256

#: Not a message: put on ``outgoing`` only to wake a transport's writer
#: (:attr:`Shortcuts.wake_writer`); a writer sends nothing for it.
WAKE_WRITER: Final[Message] = Notification("")


@final
@attrs.define(eq=False)
class Shortcuts:
    """Optional direct paths between a transport and its peer, skipping a channel hop.

    Both are plain callables set (and cleared) by the side that owns them and
    called by the other; each returns ``False`` when it cannot take the
    message now, and the caller then uses the bus's channel as usual. They
    only ever take a message when nothing is queued in the channel they
    stand for, so order and backpressure are those of the channels.

    Attributes:
        deliver: Set by the peer's session while its receive loop waits on
            an empty ``incoming``: dispatches one incoming message at once,
            in the transport's task (the dispatch never blocks). A transport
            that can go on reading in a new task passes a
            :class:`~trio_mcp._inline.ReaderTask`, which a request may keep
            (the transport then awaits ``kept`` there); others pass ``None``.
        write_now: Set by a transport while its writer waits on an empty
            ``outgoing``: encodes and writes one message from the sender's
            task (what is not written at once is handed to the writer).
    """

    deliver: Callable[[Incoming, ReaderTask | None], bool] | None = None
    write_now: Callable[[Message], bool] | None = None
    #: Like ``write_now``, for a sender that expects more messages in the
    #: same scheduler pass (answers to pipelined requests): collects the
    #: message, and the writer's next pass writes all collected at once.
    write_soon: Callable[[Message], bool] | None = None
    #: Put :data:`WAKE_WRITER` on ``outgoing`` (for a ``write_now`` that left
    #: part of a message unwritten); set by :func:`open_bus`.
    wake_writer: Callable[[], None] = lambda: None


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
        shortcuts: Direct paths shared with the transport's :class:`BusEnds`.
    """

    incoming: trio.MemoryReceiveChannel[Incoming]
    outgoing: trio.MemorySendChannel[Message]
    context: str | None = None
    info: dict[str, Any] = attrs.field(factory=dict)
    shortcuts: Shortcuts = attrs.field(factory=Shortcuts)


@final
@attrs.define(eq=False)
class BusEnds:
    """The transport's ends of a bus: where it puts what it read, and takes what to write."""

    to_peer: trio.MemorySendChannel[Incoming]
    from_peer: trio.MemoryReceiveChannel[Message]
    shortcuts: Shortcuts = attrs.field(factory=Shortcuts)


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

    def wake_writer() -> None:
        # Full: the writer is awake anyway; closed: nothing to write.
        with contextlib.suppress(trio.WouldBlock, trio.ClosedResourceError):
            out_send.send_nowait(WAKE_WRITER)

    shortcuts = Shortcuts(wake_writer=wake_writer)
    bus = MessageBus(in_recv, out_send, context=context, info=dict(info or {}), shortcuts=shortcuts)
    return bus, BusEnds(in_send, out_recv, shortcuts)


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
