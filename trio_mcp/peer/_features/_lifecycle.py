"""The lifecycle feature: ``initialize``, version negotiation, ``ping``, ``server/discover``.

Before the handshake is over, a server refuses every request but
``initialize``, ``ping`` and ``server/discover``, and neither side sends a
request but those (the session's gate). ``initialize`` cannot be cancelled.

A server connection speaks both eras: until its era is chosen, the session's
``route`` looks at each request first; ``initialize`` keeps this module's
2025-11-25 path, a request with modern ``_meta`` switches the connection to the
2026-07-28 dialect. That switch and the server's ``server/discover`` (answered in
either state) are the dialect's (``trio_mcp.peer._dialects._modern.offer_both_eras``),
installed by :class:`~trio_mcp.Peer`; this feature imports no dialect.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import trio

from ..._errors import INVALID_REQUEST, METHOD_NOT_FOUND, McpError, RemoteProtocolError
from .._messages import (
    LATEST_PROTOCOL_VERSION,
    SUPPORTED_PROTOCOL_VERSIONS,
    ClientCapabilities,
    ErrorData,
    InitializeParams,
    InitializeResult,
    Notification,
    Request,
    from_wire,
)
from ._base import PeerCore, Role

#: Requests either side may send before the handshake is over.
_BEFORE_HANDSHAKE = frozenset({"initialize", "ping", "server/discover"})
#: Methods 2026-07-28 has and 2025-11-25 has not (a modern connection's dialect
#: replaces these handlers): what a 2025-11-25 session answers says so.
_MODERN_ONLY = {
    "tasks/update": "MCP 2026-07-28's tasks extension (io.modelcontextprotocol/tasks)",
    "subscriptions/listen": "MCP 2026-07-28",
}
_NOT_INITIALIZED = ErrorData(INVALID_REQUEST, "Invalid request: the session is not initialized yet")


class Lifecycle(PeerCore):
    """``initialize`` / ``notifications/initialized`` / ``ping``, both roles."""

    _initialize_id: str | int | None
    _initialize_answered: bool

    def install(self) -> None:
        self._initialize_id = None
        self._initialize_answered = False
        session = self.session
        session.gate = trio.Event()
        session.gate_exempt = _BEFORE_HANDSHAKE
        session.admit = self._admit
        session.request_handlers["initialize"] = self._on_initialize
        session.request_handlers["ping"] = self._on_ping
        # A server's is the dialect's, with the era switch (Peer installs both).
        session.request_handlers["server/discover"] = self._on_discover
        if self.role is Role.SERVER:
            for method, where in _MODERN_ONLY.items():
                session.request_handlers[method] = partial(_modern_only, where)
        session.notification_handlers["notifications/initialized"] = self._on_initialized

    def _admit(self, req: Request) -> ErrorData | None:
        if req.method in _BEFORE_HANDSHAKE:
            return None
        if self.role is Role.SERVER:
            return None if self._initialize_answered else _NOT_INITIALIZED
        return None if self.protocol_version is not None else _NOT_INITIALIZED

    async def _on_initialize(self, req: Request) -> InitializeResult:
        if self.role is not Role.SERVER:
            raise McpError(METHOD_NOT_FOUND, "Method not found: initialize (this side is a client)")
        if self._initialize_answered or self._initialize_id is not None:
            raise McpError(INVALID_REQUEST, "Invalid request: already initialized")
        self._initialize_id = req.id
        self.session.uncancellable.add(req.id)
        params = from_wire(req.params or {}, InitializeParams)
        requested = params.protocol_version
        version = requested if requested in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
        self.protocol_version = version
        self.remote_info = params.client_info
        self.remote_capabilities = params.capabilities
        self._initialize_answered = True
        self.session.admit = None  # from now on every request is admitted
        self.declared_capabilities = self.app.server_capabilities()
        return InitializeResult(
            protocol_version=version,
            capabilities=self.declared_capabilities,
            server_info=self.app.info,
            instructions=self.app.instructions,
        )

    def assume_initialized(self, protocol_version: str | None) -> None:
        """Serve as a server whose client made no handshake but each request stands alone.

        Stateless Streamable HTTP (2025-11-25): every POST is served on its
        own, with the protocol version its ``MCP-Protocol-Version`` header
        names (the latest when absent or unknown) and no client capabilities
        or client info (none was sent). Nothing goes on the wire.
        """
        requested = protocol_version or LATEST_PROTOCOL_VERSION
        version = requested if requested in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
        self.protocol_version = version
        self.remote_capabilities = ClientCapabilities()
        self._initialize_answered = True
        self.session.admit = None
        self.session.route = None  # the era is chosen: 2025-11-25, as an initialize would
        self.declared_capabilities = self.app.server_capabilities()
        if self.session.gate is not None:
            self.session.gate.set()

    async def _on_discover(self, req: Request) -> dict[str, Any]:
        raise McpError(
            METHOD_NOT_FOUND, "Method not found: server/discover (this side is a client)"
        )

    async def _on_ping(self, req: Request) -> dict[str, Any]:
        return {}

    def _on_initialized(self, note: Notification) -> None:
        if self.role is Role.SERVER and self._initialize_answered and self.session.gate is not None:
            self.session.gate.set()

    async def _handshake(self) -> None:
        """Send ``initialize`` and ``notifications/initialized`` (client role).

        Raises:
            RemoteError, RemoteProtocolError, ConnectionClosed: The handshake failed.
        """
        self.declared_capabilities = self.app.client_capabilities()
        params = InitializeParams(
            protocol_version=LATEST_PROTOCOL_VERSION,
            capabilities=self.declared_capabilities,
            client_info=self.client_info or self.app.info,
        )
        result = await self.session.request(
            "initialize", params, InitializeResult, cancellable=False
        )
        if result.protocol_version not in SUPPORTED_PROTOCOL_VERSIONS:
            await self.aclose()
            raise RemoteProtocolError(
                f"the server chose protocol version {result.protocol_version!r}, "
                f"which this client does not support"
            )
        self.protocol_version = result.protocol_version
        self.session.admit = None  # from now on every request is admitted
        self.remote_info = result.server_info
        self.remote_capabilities = result.capabilities
        self.instructions = result.instructions
        await self.session.send(Notification("notifications/initialized"))
        if self.session.gate is not None:
            self.session.gate.set()

    async def ping(self) -> None:
        """Send ``ping`` and wait for the answer.

        Raises:
            RemoteError, ConnectionClosed: As for :meth:`request`.

        Cancellation: sends ``notifications/cancelled``; nothing else changes.
        """
        await self.client_era.ping()  # (2026-07-28 has no ping: a discover round trip)


async def _modern_only(where: str, req: Request) -> dict[str, Any]:
    """A 2026-07-28 method in a 2025-11-25 connection: -32601 with the era hint."""
    raise McpError(
        METHOD_NOT_FOUND,
        f"Method not found: {req.method} (a method of {where}; this connection speaks "
        "MCP 2025-11-25, chosen by its initialize: a 2026-07-28 request carries its "
        "protocolVersion in _meta, and over HTTP its MCP-Protocol-Version, without a session)",
    )
