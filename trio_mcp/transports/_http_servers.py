"""The two HTTP/1.1 servers :func:`~trio_mcp.serve_http` can run an ASGI app on.

``"llhttp"``: trio-mcp's own server (:mod:`._http11`, ``httptools``), the
default when installed; ``"hypercorn"``: hypercorn's Trio worker (h11).
"""

from __future__ import annotations

import logging
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal, final

import attrs
import trio

from ._http11 import LLHTTP_AVAILABLE, AsgiApp, HttpServerSettings
from ._http11._settings import KEEP_ALIVE_TIMEOUT

log = logging.getLogger("trio_mcp.transports")


@final
@attrs.frozen
class HttpAddress:
    """Where :func:`serve_http` listens; what ``nursery.start`` returns.

    Attributes:
        host: The host the server was bound to, as given.
        port: The bound port (the one the kernel chose, for port 0).
        path: The MCP endpoint's path.
        scheme: ``"https"`` when served with TLS, else ``"http"``.
    """

    host: str
    port: int
    path: str = "/mcp"
    scheme: str = "http"

    @property
    def url(self) -> str:
        """The endpoint's URL, e.g. ``http://127.0.0.1:8000/mcp``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"


#: Which HTTP/1.1 server :func:`serve_http` runs.
HttpServerName = Literal["llhttp", "hypercorn"]


def default_http_server() -> HttpServerName:
    """The server :func:`serve_http` runs by default.

    Returns:
        ``"llhttp"`` when ``httptools`` (the ``fast`` extra) is installed,
        else ``"hypercorn"``.
    """
    return "llhttp" if LLHTTP_AVAILABLE else "hypercorn"


def _bound_port(binds: list[str]) -> int:
    port = urllib.parse.urlsplit(binds[0]).port
    assert port is not None
    return port


def _scheme(certfile: str | None) -> str:
    return "http" if certfile is None else "https"


async def run_server(
    app: AsgiApp, background: Callable[..., Awaitable[None]], host: str, port: int, path: str,
    *, server: HttpServerName, settings: HttpServerSettings, certfile: str | None,
    keyfile: str | None, task_status: trio.TaskStatus[HttpAddress],
) -> None:
    """Serve ``app`` on ``server`` until cancelled, ``background`` (its own tasks) beside it.

    Cancellation: the server stops (llhttp: gracefully, within
        ``settings.shutdown_timeout``), then ``background`` is cancelled.
    """
    if server == "hypercorn":
        await _serve_hypercorn(app, background, host, port, path, certfile, keyfile, task_status)
        return
    from ._http11._server import Http11Server

    context = None
    if certfile is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certfile, keyfile)
        context.set_alpn_protocols(["http/1.1"])
    listeners = await trio.open_tcp_listeners(port, host=host, backlog=settings.backlog)
    async with trio.open_nursery() as nursery:
        await nursery.start(Http11Server(app, settings, context).serve_beside, background,
                            listeners)
        address = HttpAddress(host, listeners[0].socket.getsockname()[1], path,
                              _scheme(certfile))
        log.info("serving MCP over Streamable HTTP (llhttp) at %s", address.url)
        task_status.started(address)


async def _serve_hypercorn(
    app: AsgiApp, background: Callable[..., Awaitable[None]], host: str, port: int, path: str,
    certfile: str | None, keyfile: str | None, task_status: trio.TaskStatus[HttpAddress],
) -> None:
    import hypercorn.config
    import hypercorn.trio

    config = hypercorn.config.Config()
    config.certfile = certfile
    config.keyfile = keyfile
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    # hypercorn's default backlog (100) drops a burst of new connections
    # while the one Trio thread is busy: their requests would be lost.
    config.backlog = 1024
    config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT
    config.errorlog = logging.getLogger("hypercorn.error")
    config.accesslog = None
    config.graceful_timeout = 0.5
    # Cancelled, hypercorn stops as the llhttp server does: gracefully. Its own
    # shutdown (no new connections, the requests in progress answered within
    # graceful_timeout) runs shielded, with the App's sessions (background) still
    # beside it, since they write those answers; a deadline bounds it. Cancelling
    # hypercorn's task instead would cut an answer being written (a drained
    # process's last tasks/result).
    stop = trio.Event()
    guard = trio.CancelScope(shield=True)

    async def serve_then_stop(*, task_status: trio.TaskStatus[list[str]]) -> None:
        with guard:
            async with trio.open_nursery() as nursery:
                await nursery.start(background)

                async def hypercorn_serve(*, task_status: trio.TaskStatus[list[str]]) -> None:
                    # Our ASGI callable (hypercorn types its own events), reading
                    # a body the app left before it answers.
                    asgi: Any = _ReadsBodyBeforeAnswer(app)
                    await hypercorn.trio.serve(
                        asgi, config, shutdown_trigger=stop.wait, task_status=task_status
                    )
                    nursery.cancel_scope.cancel()  # shut down: the sessions go too

                task_status.started(await nursery.start(hypercorn_serve))

    async with trio.open_nursery() as nursery:
        binds = await nursery.start(serve_then_stop)
        address = HttpAddress(host, _bound_port(binds), path, _scheme(certfile))
        log.info("serving MCP over Streamable HTTP (hypercorn) at %s", address.url)
        task_status.started(address)
        try:
            await trio.sleep_forever()
        finally:
            stop.set()
            guard.deadline = trio.current_time() + config.graceful_timeout + 2


#: The most of an unread request body the hypercorn adapter reads, before it answers,
#: to keep the connection (a bigger one: the answer says ``Connection: close``).
DRAIN_LIMIT: Final = 1 << 20


@final
@attrs.frozen
class _ReadsBodyBeforeAnswer:
    """An ASGI app as hypercorn should run it: the request's body has all arrived
    before the answer starts.

    The app answers some POSTs before it reads their body (a 406, 415, 401 or a
    version refused from the headers). When the body arrives after that answer,
    hypercorn (h11) closes the connection without saying so, and a client that
    reuses it (httpx, and so the Python SDK) fails its next request with "Server
    disconnected without sending a response". So the rest of the body is read
    first (up to :data:`DRAIN_LIMIT`; beyond, the answer says ``Connection:
    close``), as the llhttp server reads a body the app left.
    """

    app: AsgiApp

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        arrived = False

        async def receive_watched() -> Any:
            nonlocal arrived
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                arrived = True
            return message

        async def send_watched(message: Any) -> None:
            nonlocal arrived
            if message["type"] == "http.response.start" and not arrived:
                read = 0
                while not arrived and read <= DRAIN_LIMIT:
                    read += len((await receive_watched()).get("body", b""))
                if not arrived:
                    headers = [h for h in message.get("headers", ())
                               if h[0].lower() != b"connection"]
                    message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await self.app(scope, receive_watched, send_watched)


def _has_body(scope: Any) -> bool:
    """Whether the request's headers announce a body (a non-zero length, or chunks)."""
    for name, value in scope.get("headers", ()):
        name = name.lower()
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False
