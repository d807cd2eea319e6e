"""``Peer``: one MCP connection, in either role, made of the features.

The JSON-RPC mechanics live in the session (``peer._session``); each MCP
feature is a mixin (``_lifecycle``, ``_tools``, ``_resources``, ``_prompts``,
``_completion``, ``_logging``, ``_list_changes``, ``_client``,
``_elicitation``, ``_roots``, ``_task_receiver``, ``_task_requestor``)
listed in ``_catalog.FEATURES``.
This module only composes them and runs the connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import final

import trio

from .._util import interrupt_wins, unwrap_group
from ._app import App
from ._dialects._legacy import LegacyClient, LegacyDialect
from ._dialects._modern import become_modern, offer_both_eras
from ._dialects._modern_client import choose_client_era
from ._features._base import ANONYMOUS_CONTEXT, Role
from ._features._catalog import FEATURES, install_features
from ._features._client import ClientFeatures
from ._features._completion import Completions
from ._features._elicitation import UrlElicitation
from ._features._lifecycle import Lifecycle
from ._features._list_changes import ListChanges
from ._features._logging import Logging
from ._features._prompts import Prompts
from ._features._resources import Resources
from ._features._roots import Roots
from ._features._task_receiver import TaskReceiver
from ._features._task_requestor import TaskRequestor
from ._features._tools import Tools
from ._messages import MODERN_PROTOCOL_VERSION, Implementation
from ._rerun_host import Rerunner
from ._session import MessageBus


@final
class Peer(
    Lifecycle,
    Tools,
    Resources,
    Prompts,
    Completions,
    Logging,
    ListChanges,
    ClientFeatures,
    UrlElicitation,
    Roots,
    TaskReceiver,
    TaskRequestor,
):
    """One MCP connection, in either role, requestor and receiver at once.

    Create it with :func:`open_peer` (or a transport's ``open_*`` /
    ``serve_*``). As a client it sends ``initialize``; as a server it answers
    it. Either way it answers the other side's requests from its :class:`App`
    and sends its own with the methods of its features.

    Args:
        app: What this side offers.
        bus: The transport's channels.
        role: CLIENT or SERVER.
        client_info: The ``clientInfo`` to send instead of the App's (client role).
        era: Server role: ``None`` (default) lets the connection's first
            request choose (``initialize``: 2025-11-25; a request with
            modern ``_meta``: 2026-07-28); ``"2026-07-28"`` serves that
            revision from the start (a Streamable HTTP request that said so
            in its headers). Client role: see the ``open_*_client`` functions.
    """

    app: App

    def __init__(
        self,
        app: App,
        bus: MessageBus,
        role: Role,
        *,
        client_info: Implementation | None = None,
        era: str | None = None,
    ) -> None:
        super().__init__(app, bus, role, client_info=client_info)
        self.dialect = LegacyDialect(self)  # until a 2026-07-28 request brings its own
        self.client_era = LegacyClient(self)  # until the client chose 2026-07-28
        self.era = era
        if role is Role.SERVER:
            host_reruns(app)
        install_features(self)
        if role is Role.SERVER:
            offer_both_eras(self)  # the first request chooses (or the transport did)
        if role is Role.SERVER and era == MODERN_PROTOCOL_VERSION:
            if bus.context is None:
                # A stateless request (Streamable HTTP) has no connection to bind
                # its tasks to: without an authenticated identity they belong to
                # whoever holds their unguessable id (SEP-2663: ids as bearer tokens).
                self._context = ANONYMOUS_CONTEXT
            become_modern(self)

    async def run(self, *, task_status: trio.TaskStatus[Peer] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the connection until the bus closes or the caller cancels.

        As a client, performs the ``initialize`` handshake before reporting
        started. Runs the App's task registry if no one else runs it.

        Raises:
            RemoteError, ConnectionClosed, RemoteProtocolError: The
                handshake failed (client role).

        Cancellation: cancels every in-flight handler; pending callers wake
            with :class:`ConnectionClosed`; tasks live on in the registry if
            it is run by someone else.
        """
        registry = self.app.registry
        async with registry.running():
            if self.protocol_version != MODERN_PROTOCOL_VERSION:
                registry.attach(self.context, self)  # (a modern server connection is not)
            self.app.connections.add(self)
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.session.run)
                    if self.role is Role.CLIENT:
                        modern = await choose_client_era(
                            self, self.era or "2025-11-25", self._handshake,
                            server_key=self.bus.info.get("server_key"),
                        )
                        callbacks = self.app.callbacks
                        if modern is not None:
                            self.client_era = modern
                            if (
                                callbacks.list_changed is not None
                                or callbacks.resource_updated is not None
                            ):
                                await modern.subscribe()
                    task_status.started(self)
            finally:
                self.app.connections.discard(self)
                registry.detach(self.context, self)
                self.session.close()


# Peer's bases are the catalogue: a feature missing from either is a bug.
assert Peer.__mro__[1 : 1 + len(FEATURES)] == FEATURES, "Peer bases must be _catalog.FEATURES"


def host_reruns(app: App) -> None:
    """Let ``app`` serve claimed re-runnable tasks again (a :class:`Rerunner` as its
    registry's host): done by every server peer when it is made, and by a server or a
    worker that runs the registry before any connection."""
    if app.registry.rerun_host is None:
        app.registry.rerun_host = Rerunner(app, Peer)


@asynccontextmanager
async def open_peer(
    app: App,
    bus: MessageBus,
    role: Role,
    *,
    client_info: Implementation | None = None,
    era: str | None = None,
) -> AsyncIterator[Peer]:
    """Run a :class:`Peer` over ``bus`` for the duration of the block.

    As a client, the block starts after the ``initialize`` handshake.
    Leaving the block closes the connection.

    Raises:
        RemoteError, RemoteProtocolError, ConnectionClosed: The handshake
            failed (client role).
    """
    peer = Peer(app, bus, role, client_info=client_info, era=era)
    # interrupt_wins: a Ctrl-C meeting a failing handshake inside nursery.start
    # is a plain KeyboardInterrupt, never a TrioInternalError.
    with interrupt_wins(), unwrap_group():
        async with trio.open_nursery() as nursery:
            await nursery.start(peer.run)
            try:
                yield peer
            finally:
                await peer.aclose()
                nursery.cancel_scope.cancel()
