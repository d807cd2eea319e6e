"""The llhttp server: accepting, the connection limit, TLS, graceful shutdown."""

from __future__ import annotations

import contextlib
import errno
import logging
from collections.abc import Awaitable, Callable
from typing import Any, final

import attrs
import trio

from ._answer import DateHeader
from ._connection import Connection
from ._settings import AsgiApp, HttpServerSettings

log = logging.getLogger("trio_mcp.transports.http11")


@final
@attrs.define(eq=False)
class Http11Server:
    """The llhttp HTTP/1.1 server: serves an ASGI app on listeners until cancelled.

    Attributes:
        app: The ASGI application (``http`` scopes only; no ``lifespan``).
        settings: Limits and timeouts.
        ssl_context: Serve HTTPS with it (``None``: plain HTTP).
        closing: True once the server is shutting down.
        connections: The connections being served.
    """

    app: AsgiApp
    settings: HttpServerSettings = attrs.field(factory=HttpServerSettings)
    ssl_context: Any = None
    closing: bool = attrs.field(default=False, init=False)
    connections: set[Connection] = attrs.field(factory=set, init=False)
    _date: DateHeader = attrs.field(factory=DateHeader, init=False)
    _server_line: bytes = attrs.field(default=b"", init=False)

    def __attrs_post_init__(self) -> None:
        if self.settings.server_header is not None:
            value = self.settings.server_header.encode("latin-1")
            self._server_line = b"server: " + value + b"\r\n"

    def common_headers(self) -> bytes:
        """The ``Date`` and ``Server`` lines of every answer."""
        date = self._date.get() if self.settings.date_header else b""
        return date + self._server_line

    async def serve(
        self, listeners: list[trio.SocketListener], *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept and serve connections on ``listeners`` until cancelled.

        Cancellation: the graceful shutdown: the listeners close, idle
        connections close at once, requests in progress get
        ``shutdown_timeout`` seconds to finish (no new request is read on
        their connection), then are cancelled; this returns (raising
        ``Cancelled``) once every connection is closed.
        """
        async with trio.open_nursery() as connections:
            try:
                async with trio.open_nursery() as accepting:
                    for listener in listeners:
                        accepting.start_soon(self._accept, listener, connections)
                    task_status.started()
            finally:
                self._shut_down()
                with trio.CancelScope(shield=True):
                    for listener in listeners:
                        await listener.aclose()

    async def serve_beside(
        self, background: Callable[..., Awaitable[None]], listeners: list[trio.SocketListener],
        *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """:meth:`serve`, with ``background`` (the app's own tasks) outliving the drain.

        ``background`` is started first (``await nursery.start(background)``)
        and cancelled only once every connection has closed, so that the
        requests finishing during the graceful shutdown still have their
        sessions.

        Cancellation: as :meth:`serve`, then ``background`` is cancelled.
        """
        # Shielded from the cancellation that stops the server; cancelled after the drain.
        kept = trio.CancelScope(shield=True)

        async def run_background(*, task_status: trio.TaskStatus[None]) -> None:
            with kept:
                await background(task_status=task_status)

        async def run_server(*, task_status: trio.TaskStatus[None]) -> None:
            try:
                await self.serve(listeners, task_status=task_status)
            finally:
                kept.cancel()

        async with trio.open_nursery() as nursery:
            await nursery.start(run_background)
            await nursery.start(run_server)
            task_status.started()

    def _shut_down(self) -> None:
        self.closing = True
        deadline = trio.current_time() + self.settings.shutdown_timeout
        for connection in self.connections:
            if connection.idle:
                connection.scope.cancel()
            else:
                connection.scope.deadline = min(connection.scope.deadline, deadline)

    async def _accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as error:
                if error.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS):
                    log.error("accept failed (%s); retrying in 100 ms", error)
                    await trio.sleep(0.1)
                    continue
                raise
            nursery.start_soon(self._handle, stream)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            client = _address(stream.socket.getpeername())
            local = _address(stream.socket.getsockname())
        except OSError:
            await trio.aclose_forcefully(stream)
            return
        if len(self.connections) >= self.settings.max_connections:
            with trio.move_on_after(1.0):
                body = b"Service Unavailable: too many connections\n"
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await stream.send_all(
                        b"HTTP/1.1 503 Service Unavailable\r\n" + self.common_headers()
                        + b"content-type: text/plain; charset=utf-8\r\n"
                        b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body)
            await trio.aclose_forcefully(stream)
            return
        wrapped: trio.abc.Stream = stream
        if self.ssl_context is not None:
            wrapped = trio.SSLStream(stream, self.ssl_context, server_side=True,
                                     https_compatible=True)
        connection = Connection(
            self, wrapped, "https" if self.ssl_context is not None else "http", client, local,
        )
        if self.closing:
            await trio.aclose_forcefully(stream)
            return
        self.connections.add(connection)
        try:
            await connection.run()
        except trio.BrokenResourceError as error:  # a failed TLS handshake, mostly
            log.debug("connection from %s failed: %r", client, error)
        finally:
            self.connections.discard(connection)


def _address(value: Any) -> tuple[str, int] | None:
    if isinstance(value, tuple) and len(value) >= 2:
        return str(value[0]), int(value[1])
    return None
