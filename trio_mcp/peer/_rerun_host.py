"""Serving a re-runnable task's stored request again, in a process that claimed it.

A task claimed from the store (its process stopped; or a front queued it) has no
connection here: its requestor is elsewhere. :class:`Rerunner` serves the stored
``tools/call`` through a server peer of the request's era that has no connection
(2026-07-28: one peer in that dialect, as :class:`~._request_server.RequestServer`
has; 2025-11-25: one per protocol version and client capabilities, as if its
handshake was made), with the stored caller on the request (its requestor context,
principal and identity's scopes). The tool's own path runs (scopes, arguments,
the dialect, the task's questions); only the record is not new: the registry adopts
the claimed one (:data:`~._tasks._rerun.ADOPTING`), same id, ``ctx.attempt`` one up.

What such a peer would send to its client goes nowhere (progress of a task whose
requestor is on another process; a request to the client is refused at once);
a task's questions go through the store (a shared store) or to the requestor's
connection in this process.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
from collections.abc import Callable
from typing import Any, Final, final

import attrs
import trio

from .._errors import INTERNAL_ERROR, McpError
from ..auth import Identity
from ._app import App
from ._features import Role
from ._features._base import Caller, PeerCore
from ._features._scopes import IDENTITY_INFO
from ._messages import (
    MODERN_PROTOCOL_VERSION,
    ClientCapabilities,
    ErrorData,
    ErrorResponse,
    Message,
    Request,
    TaskStatus,
    from_wire,
)
from ._session import Answered, open_bus
from ._tasks._rerun import ADOPTING, decode_request
from ._tasks._store import TaskRecord, now_iso

log = logging.getLogger("trio_mcp.tasks")

_REFUSED: Final = "a task run again in another process cannot send requests to its client"

#: Makes a server peer: ``Peer(app, bus, Role.SERVER, era=...)``.
PeerFactory = Callable[..., Any]


@final
class Rerunner:
    """An App's :class:`~._tasks._rerun.RerunHost`: runs claimed tasks again here.

    Args:
        app: Whose tools run.
        make_peer: ``Peer`` (passed in: this module sits below it).
    """

    def __init__(self, app: App, make_peer: PeerFactory) -> None:
        self.app = app
        self._make_peer = make_peer
        self._peers: dict[str, Any] = {}
        self._ids = itertools.count(1)

    @property
    def tools(self) -> frozenset[str]:
        """The tools whose tasks this process may run again: every tool that may be a task
        (a front queues each one; ``rerun=`` ones are also re-run)."""
        return frozenset(
            name for name, spec in self.app.tools.items() if spec.tool.task_support != "forbidden"
        )

    def rerun(self, record: TaskRecord) -> None:
        """Serve ``record``'s stored request again, in the registry's nursery."""
        self.app.registry.start_soon(self._serve, record)

    async def _serve(self, record: TaskRecord) -> None:
        registry = self.app.registry
        ticket = record.rerun
        assert ticket is not None
        problem = "its stored request could not be served again"
        try:
            stored = decode_request(ticket.request)
            peer = await self._peer_for(stored)
            req = Request(
                f"rerun-{next(self._ids)}", str(stored["method"]), stored.get("params") or {},
                caller=_caller(stored),
            )  # fmt: skip
            token = ADOPTING.set(record)
            try:
                started = peer.session.serve_here(req, req.id)
                answered: Answered = (
                    started if isinstance(started, tuple) else await started
                )
            finally:
                ADOPTING.reset(token)
            reply, after_send = answered
            if after_send is not None:
                after_send()  # the adopted actor starts
            if isinstance(reply, ErrorResponse):
                problem = f"{problem}: {reply.error.message}"
        except (McpError, ValueError, KeyError, TypeError) as exc:
            log.warning("task %s: could not be run again: %s", record.task_id, exc)
            problem = f"{problem}: {exc}"
        if registry.running_actor(record.task_id) is None:
            await self._fail(record, problem)

    async def _fail(self, record: TaskRecord, message: str) -> None:
        """A claimed task that could not start again here: failed, in the store."""
        failed = attrs.evolve(
            record, status=TaskStatus.FAILED, status_message=message[:500],
            last_updated_at=now_iso(),
            outcome=ErrorData(INTERNAL_ERROR, message[:500]),
        )  # fmt: skip
        with contextlib.suppress(McpError):
            await self.app.registry.store.update(failed)

    async def _peer_for(self, stored: dict[str, Any]) -> PeerCore:
        """The connection-less server peer of the stored request's era (made once)."""
        era = stored.get("era") or MODERN_PROTOCOL_VERSION
        capabilities = stored.get("clientCapabilities")
        key = json.dumps([era, capabilities], sort_keys=True)
        peer = self._peers.get(key)
        if peer is not None:
            return peer  # type: ignore[no-any-return]
        bus, ends = open_bus(info={"transport": "rerun"})
        route = _drop(ends.to_peer)
        bus.shortcuts.write_now = route
        if era == MODERN_PROTOCOL_VERSION:
            peer = self._make_peer(self.app, bus, Role.SERVER, era=MODERN_PROTOCOL_VERSION)
        else:
            peer = self._make_peer(self.app, bus, Role.SERVER)
            peer.assume_initialized(era)
            if isinstance(capabilities, dict):
                peer.remote_capabilities = from_wire(capabilities, ClientCapabilities)
        self._peers[key] = peer
        self.app.registry.start_soon(_run_peer, peer, ends, route)
        return peer  # type: ignore[no-any-return]


async def _run_peer(peer: Any, ends: Any, route: Callable[[Message], bool]) -> None:
    """Run a connection-less peer until the registry stops (its bus never delivers;
    what it sends is dropped, see :func:`_drop`)."""
    async with trio.open_nursery() as nursery:

        async def drain() -> None:
            async with ends.from_peer:
                async for msg in ends.from_peer:
                    route(msg)

        nursery.start_soon(drain)
        await peer.run()
        nursery.cancel_scope.cancel()


def _drop(to_peer: trio.MemorySendChannel[Any]) -> Callable[[Message], bool]:
    """The bus's ``write_now``: nothing goes out; a request to the client is refused."""

    def write_now(msg: Message) -> bool:
        if isinstance(msg, Request):
            with contextlib.suppress(trio.WouldBlock, trio.ClosedResourceError):
                to_peer.send_nowait(ErrorResponse(msg.id, ErrorData(INTERNAL_ERROR, _REFUSED)))
        return True

    return write_now


def _caller(stored: dict[str, Any]) -> Caller:
    """Who sent the stored request: its requestor context, principal and identity."""
    info: dict[str, Any] = {"transport": stored.get("transport") or "rerun"}
    found = stored.get("identity")
    if isinstance(found, dict):
        info[IDENTITY_INFO] = Identity(
            subject=found.get("subject"), client_id=found.get("clientId"),
            scopes=found.get("scopes") or (),
        )  # fmt: skip
    principal = stored.get("principal")
    return Caller(str(stored["context"]), principal if isinstance(principal, str) else None, info)
