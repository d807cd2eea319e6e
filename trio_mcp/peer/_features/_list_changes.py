"""List changes: ``notifications/{tools,resources,prompts}/list_changed``.

The App sends them (through :func:`broadcast`) to each open, initialized
server connection when a tool, resource, template or prompt is registered or
removed; a client hands them to the App's
:meth:`~trio_mcp.App.on_list_changed` callback with the kind of list.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from .._messages import Notification, to_wire
from .._session import current_request_id
from ._base import AppView, ChangeListener, PeerCore, Role
from ._callbacks import run_callback

#: The lists that announce their changes, by notification method.
LIST_CHANGED: Final = {
    "notifications/tools/list_changed": "tools",
    "notifications/resources/list_changed": "resources",
    "notifications/prompts/list_changed": "prompts",
}


def ready(peer: PeerCore) -> bool:
    """Whether ``peer`` is open and past the handshake (may get notifications)."""
    gate = peer.session.gate
    return peer.is_open and (gate is None or gate.is_set())


def announce(peers: Iterable[PeerCore], method: str, params: Any = None) -> int:
    """Queue a notification to each of ``peers``, as part of no request.

    An announcement (a list change, a resource update) must not carry the id
    of the request whose handler caused it: that id would route it to that
    request's stream.

    Returns:
        How many peers it was queued for.
    """
    count = 0
    token = current_request_id.set(None)
    try:
        for peer in peers:
            peer.notify_soon(method, params)
            count += 1
    finally:
        current_request_id.reset(token)
    return count


def offer_all(
    listeners: set[ChangeListener], method: str, params: dict[str, Any] | None = None
) -> int:
    """Offer a notification to every listener; returns how many queued it."""
    return sum(1 for listener in list(listeners) if listener.offer(method, params))


def broadcast(app: AppView, role: Role, method: str, params: Any = None) -> int:
    """Queue a notification to each of ``app``'s ready connections playing ``role``.

    A server's notification is also offered to the open ``subscriptions/listen``
    requests (2026-07-28) whose filter names it.

    Returns:
        How many connections (and subscriptions) it was queued for.
    """
    count = offer_all(app.listeners, method, to_wire(params) if params is not None else None) if (
        role is Role.SERVER
    ) else 0
    peers = [p for p in list(app.connections) if p.role is role and ready(p)]
    return count + announce(peers, method, params)


class ListChanges(PeerCore):
    """Receive the other side's list changes (client role)."""

    def install(self) -> None:
        for method in LIST_CHANGED:
            self.session.notification_handlers[method] = self._on_list_changed

    def _on_list_changed(self, note: Notification) -> None:
        if self.role is Role.CLIENT:
            run_callback(self, self.app.callbacks.list_changed, LIST_CHANGED[note.method])
