"""Two peers in one process, joined by an in-memory bus pair."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple

import trio

from .._util import unwrap_group
from ..peer import App, Peer, Role, memory_bus_pair, open_peer, run_memory_link


class MemoryPair(NamedTuple):
    """The two ends :func:`open_memory_pair` yields: ``pair.client`` and ``pair.server``.

    It unpacks as ``client, server = pair`` (client first: the side that
    calls), whatever order the apps were given in.
    """

    client: Peer
    server: Peer


@asynccontextmanager
async def open_memory_pair(
    server_app: App,
    client_app: App | None = None,
    *,
    client_context: str | None = None,
    era: str = "2025-11-25",
) -> AsyncIterator[MemoryPair]:
    """Run a server and a client peer joined in memory; yield a :class:`MemoryPair`.

    Use ``pair.client`` / ``pair.server``, or unpack it as
    ``client, server = pair`` -- **client first** (the side you call from),
    although the server's app is the first argument. Messages cross as JSON
    exactly as on a real transport. The block starts after the
    ``initialize`` handshake; leaving it closes both.

    Cancellation: cancelling the block closes both peers; their pending
    callers wake with :class:`~trio_mcp.ConnectionClosed`.

    Args:
        server_app: What the server side offers.
        client_app: What the client side offers (a bare App if omitted).
        client_context: An identity to bind the client's tasks to, as an
            authenticated transport would.
        era: The client's era: ``"2025-11-25"`` (default: the ``initialize``
            handshake), ``"2026-07-28"`` or ``"auto"`` (the server speaks both).
    """
    client_app = client_app if client_app is not None else App("trio-mcp-client")
    client_bus, server_bus, client_ends, server_ends = memory_bus_pair(context_b=client_context)
    with unwrap_group():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_memory_link, client_ends, server_ends)
            server = Peer(server_app, server_bus, Role.SERVER)
            await nursery.start(server.run)
            async with open_peer(client_app, client_bus, Role.CLIENT, era=era) as client:
                yield MemoryPair(client, server)
            await server.aclose()
            nursery.cancel_scope.cancel()
