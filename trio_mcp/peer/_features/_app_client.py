"""What an App does as a client beyond sampling and elicitation: roots and callbacks.

:class:`ClientHandlers` is a mixin of :class:`trio_mcp.App`: it answers
``roots/list`` (a fixed list with :meth:`~ClientHandlers.set_roots`, which
tells open connections it changed, or a function with
:meth:`~ClientHandlers.on_roots`) and registers the callbacks for the
notifications a server sends (log messages, resource updates, list changes,
URL-elicitation completions).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from .._messages import Root
from ._base import PeerCore, Role
from ._callbacks import Callbacks, NotificationCallback
from ._context import RequestContext
from ._list_changes import broadcast

RootsHandler = Callable[[RequestContext], Awaitable[Any]]
H = TypeVar("H", bound=RootsHandler)
N = TypeVar("N", bound=NotificationCallback)


class ClientHandlers:
    """Roots and notification callbacks of an App (a mixin of ``App``)."""

    roots_handler: RootsHandler | None
    callbacks: Callbacks
    connections: set[PeerCore]

    def on_roots(self, handler: H) -> H:
        """Register ``async def roots(ctx) -> list[Root]`` answering ``roots/list``.

        The client then declares ``roots: {listChanged: true}``; call
        :meth:`roots_changed` when the list it returns changes.
        """
        self.roots_handler = handler
        return handler

    def set_roots(self, roots: Iterable[Root | str]) -> int:
        """Answer ``roots/list`` with ``roots`` (``Root`` objects or URIs) from now on.

        Open client connections are sent ``notifications/roots/list_changed``.

        Returns:
            How many connections were told.

        Raises:
            ValueError: A root's URI does not start with ``file://`` (2025-11-25
                allows no other scheme yet).
        """
        fixed = [r if isinstance(r, Root) else Root(r) for r in roots]
        bad = [r.uri for r in fixed if not r.uri.startswith("file://")]
        if bad:
            raise ValueError(f"root URIs start with file:// for now, not {bad[:3]}")

        async def answer(ctx: RequestContext) -> list[Root]:
            return list(fixed)

        had_roots = self.roots_handler is not None
        self.roots_handler = answer
        return self.roots_changed() if had_roots else 0

    def roots_changed(self) -> int:
        """Send ``notifications/roots/list_changed`` to every open client connection.

        Returns:
            How many connections it was queued for.
        """
        return broadcast(self, Role.CLIENT, "notifications/roots/list_changed")  # type: ignore[arg-type]

    def on_log_message(self, callback: N) -> N:
        """Register ``callback(peer, LoggingMessageParams)`` for ``notifications/message``.

        Sync callbacks run in order with the connection's other messages;
        ``async`` ones are started in the connection's nursery.
        """
        self.callbacks.log_message = callback
        return callback

    def on_resource_updated(self, callback: N) -> N:
        """Register ``callback(peer, uri)`` for ``notifications/resources/updated``."""
        self.callbacks.resource_updated = callback
        return callback

    def on_list_changed(self, callback: N) -> N:
        """Register ``callback(peer, kind)`` for the ``notifications/*/list_changed``.

        ``kind`` is ``"tools"``, ``"resources"`` or ``"prompts"``.
        """
        self.callbacks.list_changed = callback
        return callback

    def on_elicitation_complete(self, callback: N) -> N:
        """Register ``callback(peer, elicitation_id)`` for ``notifications/elicitation/complete``.

        Called once per URL-mode elicitation this client accepted; notices
        about unknown or already completed ids are ignored.
        """
        self.callbacks.elicitation_complete = callback
        return callback

    def on_roots_changed(self, callback: N) -> N:
        """Register ``callback(peer, None)`` for ``notifications/roots/list_changed`` (server)."""
        self.callbacks.roots_changed = callback
        return callback
