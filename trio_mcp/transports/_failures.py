"""A connection that cannot be opened, on any transport: :class:`~trio_mcp.ConnectionFailed`.

The clients raise one trio-mcp exception whatever the transport, with the
transport's own error as ``__cause__``. A refusal (an HTTP status) is raised
as a class that is both a :class:`ConnectionFailed` and the transport's own
refusal type (``httpx.HTTPStatusError``, ``trio_websocket.ConnectionRejected``),
so code written against either keeps working; so is a server that cannot be
reached (``httpx.TransportError``, ``trio_websocket.HandshakeError``).
"""

from __future__ import annotations

import urllib.parse
from typing import final

import httpx
import trio_websocket

from .._errors import ConnectionClosed, ConnectionFailed

#: How the HTTP client's answer to a request whose POST could not be made begins (a
#: local -32603): the connection was lost, the server did not answer.
POST_FAILED = "Streamable HTTP: the POST failed"

#: Where :func:`trio_mcp.serve_http` serves MCP unless told otherwise.
DEFAULT_PATH = "/mcp"


@final
class HttpRefused(ConnectionFailed, httpx.HTTPStatusError):
    """The HTTP server refused the connection: a :class:`ConnectionFailed` and an
    ``httpx.HTTPStatusError`` (``.response``) at once."""

    def __init__(self, message: str, *, url: str, response: httpx.Response) -> None:
        httpx.HTTPStatusError.__init__(self, message, request=response.request, response=response)
        self.url = url
        self.status_code = response.status_code


@final
class WebSocketRefused(ConnectionFailed, trio_websocket.ConnectionRejected):  # type: ignore[misc]
    """The WebSocket server refused the handshake: a :class:`ConnectionFailed` and a
    ``trio_websocket.ConnectionRejected`` (``.status_code``, ``.headers``, ``.body``)."""

    def __init__(self, message: str, *, url: str, rejected: trio_websocket.ConnectionRejected):
        trio_websocket.ConnectionRejected.__init__(
            self, rejected.status_code, rejected.headers, rejected.body
        )
        self.args = (message,)
        self.url = url

    def __str__(self) -> str:
        return str(self.args[0])


@final
class HttpUnreachable(ConnectionFailed, httpx.TransportError):
    """The HTTP server could not be reached: a :class:`ConnectionFailed` and an
    ``httpx.TransportError`` at once (the original as ``__cause__``)."""

    def __init__(self, message: str, *, url: str) -> None:
        httpx.TransportError.__init__(self, message)
        self.url = url
        self.status_code = None


@final
class WebSocketUnreachable(ConnectionFailed, trio_websocket.HandshakeError):
    """The WebSocket server could not be reached or did not complete the handshake: a
    :class:`ConnectionFailed` and a ``trio_websocket.HandshakeError`` at once."""

    def __init__(self, message: str, *, url: str) -> None:
        trio_websocket.HandshakeError.__init__(self, message)
        self.url = url
        self.status_code = None


def endpoint_hint(url: str) -> str | None:
    """The URL with the default MCP path, when ``url`` has another path; else ``None``."""
    parts = urllib.parse.urlsplit(url)
    if parts.path == DEFAULT_PATH:
        return None
    return urllib.parse.urlunsplit(parts._replace(path=DEFAULT_PATH, query="", fragment=""))


def http_failure(url: str, error: BaseException) -> BaseException:
    """What ``open_http_client`` raises for the transport's fatal ``error`` (from it)."""
    if isinstance(error, httpx.HTTPStatusError):
        status = error.response.status_code
        message = str(error)
        hint = endpoint_hint(url)
        if status == 404 and hint is not None:
            message += f" (is the path right? trio-mcp serves {DEFAULT_PATH}: {hint})"
        return HttpRefused(message, url=url, response=error.response)
    if isinstance(error, httpx.TransportError):
        return HttpUnreachable(f"cannot connect to {url}: {error or type(error).__name__}",
                               url=url)
    return error


def body_text(body: bytes | None) -> str:
    """``": "`` and a refusal's body as one short line of text (never raw bytes), or ``""``."""
    text = " ".join((body or b"")[:200].decode("utf-8", errors="replace").split())
    return f": {text}" if text else ""


def websocket_failure(url: str, error: BaseException) -> ConnectionFailed:
    """What ``open_websocket_client`` raises for a handshake that failed (from ``error``)."""
    if isinstance(error, trio_websocket.ConnectionRejected):
        return WebSocketRefused(
            f"the server refused the WebSocket connection to {url}: HTTP {error.status_code}"
            f"{body_text(error.body)}",
            url=url, rejected=error,
        )
    return WebSocketUnreachable(
        f"cannot connect to {url}: {error or type(error).__name__}", url=url
    )


def ended_early(where: str, error: ConnectionClosed) -> ConnectionFailed:
    """The connection ended before the handshake did (a stdio server that exited...)."""
    if isinstance(error, ConnectionFailed):
        return error
    return ConnectionFailed(str(error) or f"{where} closed the connection", url=where)
