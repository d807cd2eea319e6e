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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import trio

from .._errors import HandshakeTimeout
from .._util import interrupt_wins as interrupt_wins
from .._util import is_interrupt as is_interrupt
from ..peer import App, Implementation, MessageBus, Peer, Role, open_peer

#: Seconds a server has to answer ``initialize``, by default.
INIT_TIMEOUT: Final = 30.0


#: The server did not answer ``initialize`` in time (the public
#: :class:`trio_mcp.HandshakeTimeout`, a :class:`ConnectionClosed`).
InitializeTimeout = HandshakeTimeout

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
