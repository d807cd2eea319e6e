"""What the stdio, WebSocket and HTTP clients share: the bounded handshake, the era, and Ctrl-C.

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
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import trio

from .._errors import ConnectionClosed, ConnectionFailed, HandshakeTimeout
from .._util import interrupt_wins as interrupt_wins
from .._util import is_interrupt as is_interrupt
from ..peer import App, Implementation, MessageBus, Peer, Role, open_peer
from ..peer._dialects import ERAS
from ._failures import ended_early

#: Seconds a server has to answer ``initialize``, by default.
INIT_TIMEOUT: Final = 30.0


#: The server did not answer ``initialize`` in time (the public
#: :class:`trio_mcp.HandshakeTimeout`, a :class:`ConnectionClosed`).
InitializeTimeout = HandshakeTimeout

#: The era the ``open_*_client`` functions speak unless told otherwise. ``"auto"``
#: is opt-in until the tasks extension of 2026-07-28 is supported: a modern
#: connection has no 2025-11-25 tasks.
DEFAULT_ERA: Final = "2025-11-25"


def check_era(era: str) -> str:
    """``era`` if a client may ask for it (``"auto"``, ``"2025-11-25"``, ``"2026-07-28"``).

    Raises:
        ValueError: Any other value.
    """
    if era not in ERAS:
        raise ValueError(f"era must be one of {', '.join(map(repr, ERAS))}, not {era!r}")
    return era

def server_key(url: str) -> str:
    """The name under which ``auto`` remembers a URL's era: ``scheme://host:port/path``.

    The query, fragment and credentials are left out; the default port is
    written out, so ``http://h/mcp`` and ``http://h:80/mcp`` are one server.
    """
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "ws": 80, "https": 443, "wss": 443}.get(scheme)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path or '/'}"


@asynccontextmanager
async def open_client_peer(
    app: App,
    bus: MessageBus,
    *,
    client_info: Implementation | None,
    init_timeout: float | None,
    era: str = DEFAULT_ERA,
) -> AsyncIterator[Peer]:
    """Run a client :class:`Peer` over ``bus``; the block starts after the handshake.

    Args:
        app: What this client offers.
        bus: The transport's bus; ``bus.info["server_key"]`` names the server
            for the era cache of ``auto``.
        client_info: ``clientInfo`` to send instead of the App's.
        init_timeout: Seconds the server has to answer ``initialize`` (or
            ``server/discover``, and the ``auto`` probe with its fallback);
            ``None`` waits forever.
        era: ``"2025-11-25"`` (``initialize``), ``"2026-07-28"``
            (``server/discover``, per-request ``_meta``) or ``"auto"`` (probe,
            fall back to ``initialize``); ``peer.protocol_version`` tells the
            outcome.

    Raises:
        ValueError: An unknown ``era``.
        ConnectionFailed: The server did not answer ``initialize`` in time
            (:class:`~trio_mcp.HandshakeTimeout`), or the connection ended
            first (the :class:`ConnectionClosed` as ``__cause__``).
        RemoteError, RemoteProtocolError: The server refused the handshake
            (:class:`~trio_mcp.UnsupportedProtocolVersion` and the other
            typed errors for the modern codes).

    Cancellation: cancelling the handshake or the block closes the
        connection (the peer stops; the caller closes the transport).
    """
    check_era(era)
    deadline = math.inf if init_timeout is None else trio.current_time() + init_timeout
    timed_out = f"the server did not answer initialize within {init_timeout or 0:g} s"
    started = False
    with trio.CancelScope(deadline=deadline) as scope:
        try:
            async with open_peer(
                app, bus, Role.CLIENT, client_info=client_info, era=era
            ) as peer:
                if scope.cancel_called:  # the deadline passed as the handshake ended
                    raise InitializeTimeout(timed_out)
                scope.deadline = math.inf
                started = True
                yield peer
        except ConnectionClosed as exc:
            if started or isinstance(exc, ConnectionFailed):
                raise
            where = bus.info.get("server_key") or bus.info.get("command") or "the server"
            raise ended_early(str(where), exc) from exc
    if not started:  # this scope cancelled the handshake
        raise InitializeTimeout(timed_out)
