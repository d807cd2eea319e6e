"""The logging utility: ``logging/setLevel`` and ``notifications/message``.

As a server, each connection has its own level (set by the client with
``logging/setLevel``); until the client sets one every message is sent.
Messages below the level are not sent. As a client, ``notifications/message``
goes to the App's :meth:`~trio_mcp.App.on_log_message` callback.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Final

import trio

from ..._errors import INVALID_PARAMS, METHOD_NOT_FOUND, ConnectionClosed, LocalUsageError, McpError
from .._messages import (
    LOGGING_LEVELS,
    EmptyResult,
    LoggingMessageParams,
    Notification,
    Request,
    SetLevelParams,
    from_wire,
    level_rank,
)
from ._base import AppView, Dialect, PeerCore, Role, current_dialect
from ._callbacks import run_callback
from ._list_changes import ready

log = logging.getLogger("trio_mcp.peer")

_STDLIB_LEVELS: Final = (
    (logging.CRITICAL, "critical"),
    (logging.ERROR, "error"),
    (logging.WARNING, "warning"),
    (logging.INFO, "info"),
)


class Logging(PeerCore):
    """Send log messages to a client at its level; receive a server's.

    Attributes:
        log_level: The level the client set with ``logging/setLevel`` (server
            role); ``None`` until it sets one, and then every message is sent.
    """

    log_level: str | None

    def install(self) -> None:
        self.log_level = None
        self.session.request_handlers["logging/setLevel"] = self._on_set_level
        self.session.notification_handlers["notifications/message"] = self._on_log_message

    @classmethod
    def declare_server(cls, app: AppView, declared: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"logging": {}}

    # --- server side -------------------------------------------------------------------

    async def _on_set_level(self, req: Request) -> EmptyResult:
        if self.role is not Role.SERVER:
            raise McpError(METHOD_NOT_FOUND, "Method not found: logging/setLevel")
        level = from_wire(req.params or {}, SetLevelParams).level
        if level not in LOGGING_LEVELS:
            raise McpError(INVALID_PARAMS, f"Invalid log level: {level[:20]!r}")
        self.log_level = level
        return EmptyResult()

    def wants_log(self, level: str) -> bool:
        """Whether a message at ``level`` goes to this connection (server role).

        A message sent from a 2026-07-28 request's handler (Python ``logging``
        through :class:`McpLogHandler`, or :meth:`send_log_message`) is weighed
        against that request's log level (:data:`~._base.current_dialect`).

        Raises:
            ValueError: ``level`` is not an RFC 5424 level name.
        """
        return self.wants_log_for(level, current_dialect.get() or self.dialect)

    def wants_log_for(self, level: str, dialect: Dialect) -> bool:
        """Whether a message at ``level`` goes to this connection for a request of ``dialect``
        (:meth:`Dialect.lets_log <._base.Dialect.lets_log>`: 2025-11-25, the connection's
        ``logging/setLevel``; 2026-07-28, the request's own ``logLevel``).

        Raises:
            ValueError: ``level`` is not an RFC 5424 level name.
        """
        return dialect.lets_log(level_rank(level))

    def _log_params(
        self, level: str, data: Any, logger: str | None
    ) -> LoggingMessageParams | None:
        if self.role is not Role.SERVER:
            raise LocalUsageError("only a server sends log messages")
        if not self.wants_log(level):
            return None
        return LoggingMessageParams(level=level, data=data, logger=logger)

    async def send_log_message(self, level: str, data: Any, *, logger: str | None = None) -> None:
        """Send ``notifications/message`` if the client's level lets ``level`` through.

        Args:
            level: An RFC 5424 level: debug, info, notice, warning, error,
                critical, alert, emergency.
            data: Any JSON value (a message string, an object...).
            logger: The name of the logger, if any.

        Raises:
            ValueError: ``level`` is not a level name.
            LocalUsageError: This side is the client.

        Cancellation: the message may or may not have been sent. A closed
            connection is ignored.
        """
        params = self._log_params(level, data, logger)
        if params is not None:
            with contextlib.suppress(ConnectionClosed):
                await self.notify("notifications/message", params)

    def send_log_message_soon(self, level: str, data: Any, *, logger: str | None = None) -> None:
        """Queue ``notifications/message`` without waiting (see :meth:`send_log_message`)."""
        params = self._log_params(level, data, logger)
        if params is not None:
            self.notify_soon("notifications/message", params)

    # --- client side -------------------------------------------------------------------

    def _on_log_message(self, note: Notification) -> None:
        if self.role is not Role.CLIENT:
            return
        try:
            params = from_wire(note.params or {}, LoggingMessageParams)
        except McpError:
            log.info("malformed notifications/message ignored")
            return
        run_callback(self, self.app.callbacks.log_message, params)

    async def set_logging_level(self, level: str) -> None:
        """Ask the server to send log messages at ``level`` and above (``logging/setLevel``).

        Raises:
            ValueError: ``level`` is not an RFC 5424 level name.
            RemoteError: The server refused.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled``; the level may or may
            not have changed.
        """
        level_rank(level)
        await self.client_era.set_log_level(level)  # (2026-07-28: in each request's _meta)


def rfc5424_level(levelno: int) -> str:
    """The RFC 5424 level of a stdlib logging level number."""
    for threshold, name in _STDLIB_LEVELS:
        if levelno >= threshold:
            return name
    return "debug"


class McpLogHandler(logging.Handler):
    """Forward stdlib log records as ``notifications/message`` to an App's clients.

    Made by :meth:`trio_mcp.App.log_handler`. A record emitted in another
    thread (``trio.to_thread``) is handed to the Trio thread the handler last
    saw (or was made in); with none, or once that run is over, it is dropped.
    A record emitted while this handler is sending (a log call made while
    sending) is dropped too.
    """

    def __init__(self, app: AppView, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.app = app
        self._emitting = False
        self._token: trio.lowlevel.TrioToken | None = None
        with contextlib.suppress(RuntimeError):
            self._token = trio.lowlevel.current_trio_token()

    def emit(self, record: logging.LogRecord) -> None:
        """Queue the record for each server connection whose level lets it through."""
        try:
            text = self.format(record)
        except Exception:
            self.handleError(record)
            return
        level = rfc5424_level(record.levelno)
        try:
            self._token = trio.lowlevel.current_trio_token()
        except RuntimeError:
            if self._token is not None:
                with contextlib.suppress(trio.RunFinishedError):
                    self._token.run_sync_soon(self._send, level, text, record.name)
            return
        self._send(level, text, record.name)

    def _send(self, level: str, text: str, logger: str) -> None:
        if self._emitting:
            return
        self._emitting = True
        try:
            for peer in list(self.app.connections):
                if isinstance(peer, Logging) and peer.role is Role.SERVER and ready(peer):
                    peer.send_log_message_soon(level, text, logger=logger)
        finally:
            self._emitting = False
