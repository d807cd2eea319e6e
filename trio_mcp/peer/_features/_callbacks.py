"""The client-side callbacks an App registers for notifications it receives.

A callback is a plain function (called at once, in order with the other
messages of the connection) or an ``async`` function (started in the
connection's nursery, so it cannot hold up the receive loop). It is called
with the connection (a :class:`trio_mcp.Peer`) and the notification's params.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Callable
from typing import Any, final

import attrs

from ..._errors import ConnectionClosed
from ._base import PeerCore

log = logging.getLogger("trio_mcp.peer")

#: ``callback(peer, params)``, sync or ``async``.
NotificationCallback = Callable[[Any, Any], Any]


@final
@attrs.define(eq=False)
class Callbacks:
    """What an App does with the notifications a server (or client) sends it.

    Attributes:
        log_message: ``notifications/message`` (a :class:`~trio_mcp.LoggingMessageParams`).
        resource_updated: ``notifications/resources/updated`` (the updated URI, a ``str``).
        list_changed: ``notifications/{tools,resources,prompts}/list_changed``
            (``"tools"``, ``"resources"`` or ``"prompts"``).
        elicitation_complete: ``notifications/elicitation/complete`` (the
            ``elicitationId``, a ``str``).
        roots_changed: ``notifications/roots/list_changed`` (``None``), as a server.
    """

    log_message: NotificationCallback | None = None
    resource_updated: NotificationCallback | None = None
    list_changed: NotificationCallback | None = None
    elicitation_complete: NotificationCallback | None = None
    roots_changed: NotificationCallback | None = None


def run_callback(peer: PeerCore, callback: NotificationCallback | None, value: Any) -> None:
    """Call ``callback(peer, value)`` now, or start it if it is ``async``."""
    if callback is None:
        return
    if inspect.iscoroutinefunction(callback):
        with contextlib.suppress(ConnectionClosed):
            peer.start_soon(callback, peer, value)
        return
    callback(peer, value)
