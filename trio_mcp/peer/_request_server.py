"""Requests that come without a connection, each served in its caller's own task.

A 2026-07-28 Streamable HTTP POST is one request and nothing else: no session
to keep, no stream to resume, no handshake. :class:`RequestServer` holds one
server :class:`Peer` in the 2026-07-28 dialect for an App: its handler tables,
made once, and the one Trio nursery its features may start work in. Each
request is served by :meth:`RequestServer.serve` in the task of whoever
carried it (the HTTP request's), through :meth:`Session.serve_here`: the same
tables, dialect and answer shaping as a request read from a connection, and
no bus, session or task of its own.

Who sent a request travels on it (``Request.caller``, a :class:`Caller`: its
requestor context, identity and transport facts), not on a connection. What
its handler sends while it runs (progress, log messages, the notifications of
a ``subscriptions/listen``) goes to the :class:`Outlet` the caller gave for
it: the peer's outgoing messages are routed by the key they are related to,
from the sender's own task. A message related to no open request (a list
change broadcast to every connection, a log record) has nowhere to go in this
revision and is dropped; a request to the client is refused at once (a
2026-07-28 server asks with ``input_required``, never with a request).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable
from typing import Final, Protocol, final

import trio

from .._errors import INVALID_REQUEST
from ._app import App
from ._features import Role
from ._messages import (
    MODERN_PROTOCOL_VERSION,
    ErrorData,
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    encode_for_wire,
)
from ._peer import Peer
from ._session import Answered, open_bus

log = logging.getLogger("trio_mcp.peer")

_NO_CLIENT_REQUESTS: Final = (
    "Server-to-client requests are not available: a 2026-07-28 request has no stream "
    "to receive them on (ask with input_required)"
)


class Outlet(Protocol):
    """Where the messages a request's handler sends go (its HTTP response)."""

    def deliver(self, data: bytes) -> None:
        """Take one encoded notification of the request, in order; never waits."""
        ...


@final
class RequestServer:
    """An App's server for requests without a connection (2026-07-28 POSTs).

    Run it (:meth:`run`) for as long as requests may come; then
    :meth:`serve` each one in the task that carries it.

    Attributes:
        app: What it serves.
        peer: Its one server peer in the 2026-07-28 dialect (its handler
            tables; ``peer.bus.info`` has only ``transport``).
    """

    def __init__(self, app: App, *, transport: str = "http") -> None:
        self.app = app
        bus, self._ends = open_bus(info={"transport": transport})
        self.peer = Peer(app, bus, Role.SERVER, era=MODERN_PROTOCOL_VERSION)
        bus.shortcuts.write_now = self._route
        self._outlets: dict[RequestId, Outlet] = {}
        self._keys = itertools.count(1)
        self._nursery: trio.Nursery | None = None

    @property
    def running(self) -> bool:
        """True between :meth:`run`'s start and its end."""
        return self._nursery is not None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the peer (the App's task registry with it) until cancelled.

        Cancellation: this is how it stops: the requests still being served
            lose their peer (their callers' tasks see it closed).
        """
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                nursery.start_soon(self._refuse_requests)
                await nursery.start(self.peer.run)
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def serve(self, req: Request, outlet: Outlet) -> Answered | Awaitable[Answered]:
        """Serve ``req`` (its ``caller`` set) in this task; notifications go to ``outlet``.

        Returns:
            The answer and what to call once it is sent (or could not be:
            call it all the same; a task's work starts there), when the
            handler did not wait; else an awaitable of them, to await in
            this task (cancel it to cancel the handler; :meth:`done` after).
        """
        key = next(self._keys)
        self._outlets[key] = outlet
        try:
            started = self.peer.session.serve_here(req, key)
        except BaseException:  # (a tracer's bug, say): nothing of the request stays
            del self._outlets[key]
            raise
        if type(started) is tuple:
            del self._outlets[key]
            return started
        return self._finish(key, started)  # type: ignore[arg-type]

    async def _finish(self, key: int, rest: Awaitable[Answered]) -> Answered:
        try:
            return await rest
        finally:
            del self._outlets[key]

    def _route(self, msg: Message) -> bool:
        """The peer bus's ``write_now``: hand ``msg`` to its request's outlet, at once."""
        related = getattr(msg, "related_request_id", None)
        outlet = self._outlets.get(related) if isinstance(related, int) else None
        if isinstance(msg, Request):
            error = ErrorResponse(msg.id, ErrorData(INVALID_REQUEST, _NO_CLIENT_REQUESTS))
            try:
                self._ends.to_peer.send_nowait(error)  # its answer: the session reads it
            except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
                log.warning("a request to the client could not be refused: %s", msg.method)
            return True
        if outlet is None or not isinstance(msg, Notification):
            log.debug("2026-07-28: dropped a %s related to no open request",
                      getattr(msg, "method", type(msg).__name__))
            return True
        data = encode_for_wire(msg)
        if data is None:
            log.error("dropped a message that cannot be encoded as JSON: %.200r", msg)
            return True
        outlet.deliver(data)
        return True

    async def _refuse_requests(self) -> None:
        """Drain what the peer's bus holds (nothing is written to it but by :meth:`_route`)."""
        async with self._ends.from_peer:
            async for msg in self._ends.from_peer:
                self._route(msg)
