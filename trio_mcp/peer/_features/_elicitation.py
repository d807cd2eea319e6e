"""URL-mode elicitation: ``notifications/elicitation/complete``.

The request itself (``elicitation/create``, both modes) is the client
features' (``_client.py``); this feature carries what URL mode adds. As a
client it remembers the ``elicitationId`` of each URL-mode request it
accepted on this connection and hands the completion notice for it, once, to
the App's :meth:`~trio_mcp.App.on_elicitation_complete` callback (unknown or
already completed ids are ignored, as the spec requires). As a server it
sends the notice on the connection the elicitation went to. It installs
after the client features and wraps their ``elicitation/create`` handler.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from ..._errors import LocalUsageError, McpError
from .._messages import ElicitationCompleteParams, ElicitResult, Notification, Request, from_wire
from ._base import PeerCore, Role
from ._callbacks import run_callback

log = logging.getLogger("trio_mcp.peer")

#: The most URL-mode elicitations a client remembers per connection.
MAX_OPEN_ELICITATIONS: Final = 1_000


class UrlElicitation(PeerCore):
    """Follow URL-mode elicitations to their completion notice.

    Attributes:
        open_elicitations: Ids of the URL-mode elicitations this client
            accepted and has not yet seen completed (client role).
    """

    open_elicitations: dict[str, None]

    def install(self) -> None:
        self.open_elicitations = {}
        self.session.notification_handlers["notifications/elicitation/complete"] = (
            self._on_elicitation_complete
        )
        answer = self.session.request_handlers.get("elicitation/create")
        if answer is None:
            return

        async def answer_and_remember(req: Request) -> Any:
            result = await answer(req)
            params = req.params or {}
            elicitation_id = params.get("elicitationId")
            if (
                params.get("mode") == "url"
                and isinstance(elicitation_id, str)
                and isinstance(result, ElicitResult)
                and result.action == "accept"
            ):
                self.remember_elicitation(elicitation_id)
            return result

        self.session.request_handlers["elicitation/create"] = answer_and_remember

    def remember_elicitation(self, elicitation_id: str) -> None:
        """Note a URL-mode elicitation this client accepted (oldest forgotten past the cap)."""
        self.open_elicitations[elicitation_id] = None
        if len(self.open_elicitations) > MAX_OPEN_ELICITATIONS:
            del self.open_elicitations[next(iter(self.open_elicitations))]

    def _on_elicitation_complete(self, note: Notification) -> None:
        if self.role is not Role.CLIENT:
            return
        try:
            elicitation_id = from_wire(note.params or {}, ElicitationCompleteParams).elicitation_id
        except McpError:
            log.info("malformed notifications/elicitation/complete ignored")
            return
        if elicitation_id not in self.open_elicitations:
            log.debug("completion of unknown elicitation %r ignored", elicitation_id[:100])
            return
        del self.open_elicitations[elicitation_id]
        run_callback(self, self.app.callbacks.elicitation_complete, elicitation_id)

    async def notify_elicitation_complete(self, elicitation_id: str) -> None:
        """Tell the client a URL-mode elicitation is complete (server role).

        Send it on the connection the ``elicitation/create`` went to.

        Raises:
            LocalUsageError: This side is the client.
            ConnectionClosed: The connection is closed.

        Cancellation: the notification may or may not have been sent.
        """
        if self.role is not Role.SERVER:
            raise LocalUsageError("only a server completes elicitations")
        await self.notify(
            "notifications/elicitation/complete", ElicitationCompleteParams(elicitation_id)
        )
