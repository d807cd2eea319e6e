"""The roots feature: ``roots/list`` and ``notifications/roots/list_changed``.

As a client it answers ``roots/list`` from the App (:meth:`trio_mcp.App.on_roots`
or :meth:`trio_mcp.App.set_roots`, which also tells open connections the list
changed); as a server it asks (:meth:`list_roots`, ``ctx.list_roots()``) and
hands ``notifications/roots/list_changed`` to the App's callback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._errors import METHOD_NOT_FOUND, LocalUsageError, McpError
from .._messages import ListRootsResult, Notification, Request, Root
from ._base import AppView, PeerCore, Role
from ._callbacks import run_callback
from ._context import RequestContext


class Roots(PeerCore):
    """Answer ``roots/list`` as a client; ask it as a server."""

    def install(self) -> None:
        self.session.request_handlers["roots/list"] = self._on_roots_list
        notes = self.session.notification_handlers
        notes["notifications/roots/list_changed"] = self._on_roots_changed

    @classmethod
    def declare_client(cls, app: AppView, declared: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"roots": {"listChanged": True}} if app.roots_handler is not None else {}

    async def _on_roots_list(self, req: Request) -> ListRootsResult:
        handler = self.app.roots_handler
        if self.role is not Role.CLIENT or handler is None:
            raise McpError(METHOD_NOT_FOUND, "Method not found: roots/list")
        value = await handler(RequestContext(self, req.id, (req.params or {}).get("_meta")))
        if isinstance(value, ListRootsResult):
            return value
        return ListRootsResult(roots=list(value))

    def _on_roots_changed(self, note: Notification) -> None:
        if self.role is Role.SERVER:
            run_callback(self, self.app.callbacks.roots_changed, None)

    async def list_roots(self) -> list[Root]:
        """Ask the client for its roots (``roots/list``).

        Raises:
            LocalUsageError: The client did not declare the roots capability.
            RemoteError: The client refused.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled``; nothing else changes.
        """
        caps = self.remote_client_capabilities
        if caps is None or caps.roots is None:
            raise LocalUsageError("the client did not declare the roots capability")
        return (await self.request("roots/list", None, ListRootsResult)).roots
