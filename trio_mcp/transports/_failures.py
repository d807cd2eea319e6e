"""A connection that cannot be opened, on any transport: :class:`~trio_mcp.ConnectionFailed`.

The clients raise one trio-mcp exception whatever the transport, with the
transport's own error as ``__cause__``. A refusal (an HTTP status) is raised
as a class that is both a :class:`ConnectionFailed` and the transport's own
refusal type (``httpx.HTTPStatusError``, ``trio_websocket.ConnectionRejected``),
so code written against either keeps working; so is a server that cannot be
reached (``httpx.TransportError``, ``trio_websocket.HandshakeError``). Those
classes live with their client (:mod:`._http_client`, :mod:`._websocket_client`),
so that this module, which every client imports, loads neither httpx nor
trio_websocket.
"""

from __future__ import annotations

import urllib.parse

from .._errors import ConnectionClosed, ConnectionFailed

#: How the HTTP client's answer to a request whose POST could not be made begins (a
#: local -32603): the connection was lost, the server did not answer.
POST_FAILED = "Streamable HTTP: the POST failed"

#: Where :func:`trio_mcp.serve_http` serves MCP unless told otherwise.
DEFAULT_PATH = "/mcp"


def endpoint_hint(url: str) -> str | None:
    """The URL with the default MCP path, when ``url`` has another path; else ``None``."""
    parts = urllib.parse.urlsplit(url)
    if parts.path == DEFAULT_PATH:
        return None
    return urllib.parse.urlunsplit(parts._replace(path=DEFAULT_PATH, query="", fragment=""))


def body_text(body: bytes | None) -> str:
    """``": "`` and a refusal's body as one short line of text (never raw bytes), or ``""``."""
    text = " ".join((body or b"")[:200].decode("utf-8", errors="replace").split())
    return f": {text}" if text else ""


def ended_early(where: str, error: ConnectionClosed) -> ConnectionFailed:
    """The connection ended before the handshake did (a stdio server that exited...)."""
    if isinstance(error, ConnectionFailed):
        return error
    return ConnectionFailed(str(error) or f"{where} closed the connection", url=where)
