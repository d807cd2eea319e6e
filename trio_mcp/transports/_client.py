"""What the stdio and WebSocket clients share: the bounded handshake, and Ctrl-C.

:func:`open_client_peer` runs the client :class:`Peer` with a time limit on
the ``initialize`` handshake.

:func:`interrupt_wins`: a Ctrl-C that meets a failing connection ends as a
plain ``KeyboardInterrupt``. When the user presses Ctrl-C while a client is
still in its ``initialize`` handshake, two things can happen in the same
scheduler step: Trio delivers ``KeyboardInterrupt`` to the task waiting in
``nursery.start(peer.run)``, and the connection ends (e.g. the server, in
the terminal's process group, got SIGINT too), so ``peer.run`` raises
:class:`ConnectionClosed` before it reports started. ``Nursery.start`` then
finds two exceptions in its private nursery and raises
``TrioInternalError("Internal nursery should not have multiple tasks")``;
elsewhere the two come out as an ExceptionGroup. Neither is what the caller
asked for: they pressed Ctrl-C.

The stdio client starts its server in a session of its own, so a terminal's
Ctrl-C no longer reaches the server; :func:`interrupt_wins` covers what is
left (e.g. a server that exits by itself at that moment), for every public
client context manager.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Final

import trio
import trio_websocket

from .._errors import ConnectionClosed
from ..peer import App, Implementation, MessageBus, Peer, Role, open_peer

#: Seconds a server has to answer ``initialize``, by default.
INIT_TIMEOUT: Final = 30.0


class InitializeTimeout(ConnectionClosed):
    """The server did not answer ``initialize`` in time; the connection is closed.

    A :class:`ConnectionClosed`, so callers need not know it; the CLI tells
    it apart to suggest ``--timeout``.
    """

#: What a connection ending because of the interrupt can raise besides it.
_CONSEQUENCES = (
    KeyboardInterrupt,
    trio.Cancelled,
    ConnectionClosed,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio_websocket.ConnectionClosed,
)


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside groups, and inside a ``TrioInternalError``'s cause."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    elif isinstance(exc, trio.TrioInternalError) and isinstance(exc.__cause__, BaseException):
        yield from _leaves(exc.__cause__)
    else:
        yield exc


def is_interrupt(exc: BaseException) -> bool:
    """True when ``exc`` is, or holds, a KeyboardInterrupt and only its consequences."""
    leaves = list(_leaves(exc))
    return any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves) and all(
        isinstance(leaf, _CONSEQUENCES) for leaf in leaves
    )


@contextmanager
def interrupt_wins() -> Iterator[None]:
    """Re-raise a KeyboardInterrupt that met a closing connection as itself.

    Turns ``TrioInternalError`` from ``Nursery.start`` whose cause holds a
    ``KeyboardInterrupt``, and an ExceptionGroup of a ``KeyboardInterrupt``
    with connection errors (:class:`ConnectionClosed`, broken or closed
    streams, ``Cancelled``), into a plain ``KeyboardInterrupt`` chained to
    the original. Any other exception, or a group holding anything else,
    passes through unchanged.
    """
    try:
        yield
    except (trio.TrioInternalError, BaseExceptionGroup) as exc:
        if is_interrupt(exc):
            raise KeyboardInterrupt from exc
        raise


@asynccontextmanager
async def open_client_peer(
    app: App,
    bus: MessageBus,
    *,
    client_info: Implementation | None,
    init_timeout: float | None,
) -> AsyncIterator[Peer]:
    """Run a client :class:`Peer` over ``bus``; the block starts after ``initialize``.

    Args:
        app: What this client offers.
        bus: The transport's bus.
        client_info: ``clientInfo`` to send instead of the App's.
        init_timeout: Seconds the server has to answer ``initialize``;
            ``None`` waits forever.

    Raises:
        ConnectionClosed: The server did not answer ``initialize`` in time
            (the message says so), or the connection ended first.
        RemoteError, RemoteProtocolError: The server refused the handshake.

    Cancellation: cancelling the handshake or the block closes the
        connection (the peer stops; the caller closes the transport).
    """
    deadline = math.inf if init_timeout is None else trio.current_time() + init_timeout
    timed_out = f"the server did not answer initialize within {init_timeout or 0:g} s"
    started = False
    with trio.CancelScope(deadline=deadline) as scope:
        async with open_peer(app, bus, Role.CLIENT, client_info=client_info) as peer:
            if scope.cancel_called:  # the deadline passed as the handshake ended
                raise InitializeTimeout(timed_out)
            scope.deadline = math.inf
            started = True
            yield peer
    if not started:  # this scope cancelled the handshake
        raise InitializeTimeout(timed_out)
