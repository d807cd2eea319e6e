"""Exceptions and JSON-RPC error codes used throughout trio-mcp.

Two families mirror h11's ``LocalProtocolError`` / ``RemoteProtocolError``:

* :class:`McpError` is raised *by a handler* (or by the router on its behalf) and
  carries the JSON-RPC code that the peer will be answered with.
* :class:`RemoteError` is raised *to a caller* when the other side answered a
  request with a JSON-RPC error.

:class:`ConnectionClosed` wakes every waiter when the transport goes away, and
:class:`LocalUsageError` reports a misuse of the API that never reaches the wire.
"""

from __future__ import annotations

from typing import Any, Final

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
#: Not a JSON-RPC standard code; used for rate limits and resource caps.
RESOURCE_LIMIT: Final = -32000
#: MCP 2026-07-28: HTTP headers do not match the body (``HeaderMismatchError``).
HEADER_MISMATCH: Final = -32020
#: MCP 2026-07-28: the request needs a client capability it did not declare.
MISSING_CLIENT_CAPABILITY: Final = -32021
#: MCP 2026-07-28: the request's protocol version is not supported here.
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022


class TrioMcpError(Exception):
    """Base class of every exception trio-mcp raises on purpose."""


class McpError(TrioMcpError):
    """An error that is answered to the peer as a JSON-RPC error object.

    Raise it from any request handler (tool, sampling, elicitation, ...) to
    answer with a specific code; the router never adds traceback text.

    Args:
        code: The JSON-RPC error code, e.g. :data:`INVALID_PARAMS`.
        message: A short, single-sentence description sent to the peer.
        data: Optional extra JSON data for the ``error.data`` member.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.message!r})"


class RemoteError(TrioMcpError):
    """The peer answered our request with a JSON-RPC error.

    Attributes:
        code: The JSON-RPC error code the peer sent.
        message: The peer's message.
        data: The peer's ``error.data``, if any.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message
        self.data = data


class RemoteProtocolError(TrioMcpError):
    """The peer sent something the protocol does not allow (e.g. a result
    that does not fit the request's result type)."""


class ConnectionClosed(TrioMcpError):
    """The connection to the peer is closed; no response will ever arrive.

    Every pending request wakes with this error at once when the transport
    closes, and every later attempt to send raises it too.
    """


class ConnectionFailed(ConnectionClosed):
    """The connection could not be opened: the client functions' one error for it.

    Raised by ``open_stdio_client``, ``open_websocket_client`` and
    ``open_http_client`` on every transport, with the transport's own error
    as ``__cause__``: the server cannot be reached (``OSError``,
    ``httpx.ConnectError``, ``trio_websocket.HandshakeError``), refused the
    connection (an HTTP status: 401 without a valid token, 403, 404 on a
    wrong path), or went away before the handshake ended (a stdio server
    that exited: :class:`ConnectionClosed`). A :class:`ConnectionClosed`, so
    code that catches that still works. A refusal is also an instance of the
    transport's own refusal type (``trio_websocket.ConnectionRejected``,
    ``httpx.HTTPStatusError``).

    Attributes:
        url: The server's URL (or the stdio command), when known.
        status_code: The HTTP status of a refusal; ``None`` when the server
            was not reached or gave no status.
    """

    def __init__(
        self, message: str, *, url: str | None = None, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.url = url
        self.status_code = status_code


class HandshakeTimeout(ConnectionFailed, TimeoutError):
    """The other side did not answer ``initialize`` in time; the connection is closed.

    Raised by the clients' ``init_timeout`` (``open_stdio_client``,
    ``open_websocket_client``, ``open_http_client``); a
    :class:`ConnectionFailed` (so a :class:`ConnectionClosed`) and a
    :class:`TimeoutError`, so any of these ``except`` clauses catches it.
    """


class LocalUsageError(TrioMcpError):
    """The API was used in a way the protocol forbids; nothing was sent.

    For example: calling a tool whose ``execution.taskSupport`` is
    ``"required"`` without a task, or augmenting a request with a task when the
    receiver did not declare the capability.
    """


class TaskCancelled(RemoteError):
    """The task was cancelled, so it has no result.

    Raised by :meth:`trio_mcp.TaskHandle.result` (a :class:`RemoteError`, so
    code that catches that still works). ``task`` is the last snapshot seen.
    """

    def __init__(self, code: int, message: str, data: Any = None, *, task: Any = None) -> None:
        super().__init__(code, message, data)
        self.task = task


class TaskFailed(RemoteError):
    """The task's underlying request failed with a JSON-RPC error.

    Raised by :meth:`trio_mcp.TaskHandle.result`; ``code``, ``message`` and
    ``data`` are the error the request would have returned, ``task`` the last
    snapshot seen. (A tool that *reports* failure completes its task with a
    ``CallToolResult`` whose ``is_error`` is set; that result is returned,
    not raised.)
    """

    def __init__(self, code: int, message: str, data: Any = None, *, task: Any = None) -> None:
        super().__init__(code, message, data)
        self.task = task


class HeaderMismatch(RemoteError):
    """The server refused a request whose HTTP headers do not match its body (-32020).

    A client of ours derives the headers from the body, so this means an
    intermediary changed one, or the tool's ``x-mcp-header`` annotations
    changed: list the tools again (``list_all_tools``) and retry.
    """


class MissingClientCapability(RemoteError):
    """The server needs a client capability the request did not declare (-32021).

    Attributes:
        required: The capabilities the server named (``data.requiredCapabilities``),
            e.g. ``{"sampling": {}}``: register the matching handler on the
            client's App (``on_sampling``, ``on_elicitation``, ``on_roots``) and retry.
    """

    @property
    def required(self) -> dict[str, Any]:
        """The capabilities the server requires, as it named them."""
        data = self.data if isinstance(self.data, dict) else {}
        caps = data.get("requiredCapabilities")
        return caps if isinstance(caps, dict) else {}


class UnsupportedProtocolVersion(RemoteError):
    """The server does not speak the protocol version the request carried (-32022).

    Attributes:
        supported: The versions the server named (``data.supported``); pick
            one this side speaks (``era=`` of the ``open_*_client`` functions).
    """

    @property
    def supported(self) -> list[str]:
        """The versions the server supports, as it named them."""
        data = self.data if isinstance(self.data, dict) else {}
        versions = data.get("supported")
        return [v for v in versions if isinstance(v, str)] if isinstance(versions, list) else []
