"""Two peers in one process, joined by an in-memory bus pair."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from .._util import unwrap_group
from ..peer import App, Peer, Role, memory_bus_pair, open_peer, run_memory_link


@asynccontextmanager
async def open_memory_pair(
    server_app: App,
    client_app: App | None = None,
    *,
    client_context: str | None = None,
) -> AsyncIterator[tuple[Peer, Peer]]:
    """Run a server and a client peer joined in memory; yield ``(client, server)``.

    Messages cross as JSON exactly as on a real transport. The block starts
    after the ``initialize`` handshake; leaving it closes both.

    Args:
        server_app: What the server side offers.
        client_app: What the client side offers (a bare App if omitted).
        client_context: An identity to bind the client's tasks to, as an
            authenticated transport would.
    """
    client_app = client_app if client_app is not None else App("trio-mcp-client")
    client_bus, server_bus, client_ends, server_ends = memory_bus_pair(context_b=client_context)
    with unwrap_group():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_memory_link, client_ends, server_ends)
            server = Peer(server_app, server_bus, Role.SERVER)
            await nursery.start(server.run)
            async with open_peer(client_app, client_bus, Role.CLIENT) as client:
                yield client, server
            await server.aclose()
            nursery.cancel_scope.cancel()
