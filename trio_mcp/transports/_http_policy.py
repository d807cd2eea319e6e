"""Who may talk to the Streamable HTTP endpoint: Host, Origin and bearer-token checks.

Plus the small ASGI helpers the server shares (headers, content negotiation,
error answers with a JSON-RPC body).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Literal, final

import attrs
import trio

from .._errors import INVALID_REQUEST
from ..peer import encode_for_wire
from ..peer._messages import ErrorData, ErrorResponse
from ._websocket_server import origin_allowed

log = logging.getLogger("trio_mcp.transports")
audit = logging.getLogger("trio_mcp.audit")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
#: Bearer token -> identity (a non-empty string), or None to refuse.
Authenticator = Callable[[str], str | None]

#: ``Host`` names allowed by default: this machine only.
LOOPBACK_HOST_NAMES: Final = frozenset({"localhost", "127.0.0.1", "[::1]"})
_WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
_JSON: Final = [(b"content-type", b"application/json")]


def header_values(scope: Scope, name: str) -> list[str]:
    """Every value of header ``name`` (lower case) in an ASGI scope."""
    key = name.encode("ascii")
    return [v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == key]


def header(scope: Scope, name: str) -> str | None:
    """The value of header ``name``: repeated values joined with ``,``; None when absent."""
    values = header_values(scope, name)
    return ",".join(values) if values else None


def wants(scope: Scope, media_type: str) -> bool:
    """True when the ``Accept`` header lists ``media_type`` (wildcards count)."""
    major = media_type.split("/")[0]
    for item in (header(scope, "accept") or "").split(","):
        accepted = item.split(";")[0].strip().lower()
        if accepted in (media_type, f"{major}/*", "*/*"):
            return True
    return False


async def respond(
    send: Send, status: int, body: bytes = b"", headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """Send a whole response."""
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": body})


async def fail(
    send: Send,
    status: int,
    message: str,
    *,
    code: int = INVALID_REQUEST,
    request_id: str | int | None = None,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Answer with an HTTP error whose body is a JSON-RPC error response."""
    body = encode_for_wire(ErrorResponse(request_id, ErrorData(code, message))) or b""
    await respond(send, status, body, [*_JSON, *headers])


async def until_disconnect(receive: Receive, work: Callable[[], Awaitable[Any]]) -> bool:
    """Run ``work()`` until it returns (True) or the client disconnects (False).

    Cancellation: cancels ``work``.
    """
    done = False
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        await work()
        done = True
        nursery.cancel_scope.cancel()
    return done


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@final
@attrs.define(eq=False)
class HttpPolicy:
    """The checks every request to the MCP endpoint passes, in this order.

    1. ``Host`` (DNS rebinding): its name must be in ``allowed_hosts``
       besides the loopback names (``"*"`` allows any) -> else 403.
    2. ``Origin``, when present: loopback or in ``allowed_origins``
       (:func:`trio_mcp.origin_allowed`) -> else 403.
    3. With ``tokens`` or ``authenticate``: ``Authorization: Bearer <token>``
       with a known token -> else 401 and ``WWW-Authenticate: Bearer``
       (with ``resource_metadata=`` when ``resource_metadata`` is set).

    Attributes:
        tokens: Bearer token -> identity, compared in constant time.
        authenticate: Called with a token not in ``tokens``; returns the
            identity or None to refuse (500 if it raises).
        allowed_origins: Origins allowed besides loopback ones.
        allowed_hosts: ``Host`` names (no port) allowed besides loopback ones.
        resource_metadata: An RFC 9728 protected-resource metadata document
            (``{"resource": ..., "authorization_servers": [...]}``), served
            at ``/.well-known/oauth-protected-resource<path>`` and named in
            401 answers.
    """

    tokens: Mapping[str, str] | None = None
    authenticate: Authenticator | None = None
    allowed_origins: Sequence[str] | None = None
    allowed_hosts: Sequence[str] | None = None
    resource_metadata: Mapping[str, Any] | None = None

    @property
    def requires_token(self) -> bool:
        """True when every request needs a bearer token."""
        return self.tokens is not None or self.authenticate is not None

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """The (status, reason) to refuse a request with for its Host or Origin, or None."""
        hosts = header_values(scope, "host")
        allowed = LOOPBACK_HOST_NAMES | {h.lower() for h in self.allowed_hosts or ()}
        if "*" not in allowed and (len(hosts) != 1 or _host_name(hosts[0]) not in allowed):
            return 403, f"the Host {hosts[0][:100] if hosts else None!r} is not allowed"
        origins = header_values(scope, "origin")
        if len(origins) > 1 or not origin_allowed(
            origins[0] if origins else None, self.allowed_origins
        ):
            return 403, f"the Origin {origins[0][:100] if origins else None!r} is not allowed"
        return None

    def identity(self, token: str) -> str | None:
        """The identity of ``token``, or None when it is unknown."""
        found: str | None = None
        if self.tokens is not None:
            presented = token.encode()
            for known, identity in self.tokens.items():  # constant time: no early exit
                if hmac.compare_digest(known.encode(), presented):
                    found = identity
        if found is None and self.authenticate is not None:
            found = self.authenticate(token)
        return found or None

    def metadata_path(self, path: str | None) -> str:
        """Where the protected-resource metadata document is served."""
        return _WELL_KNOWN + (path or "")

    def _metadata_url(self, scope: Scope, path: str | None) -> str:
        host = header(scope, "host") or "localhost"
        return f"{scope.get('scheme', 'http')}://{host}{self.metadata_path(path)}"

    async def serve_metadata(self, scope: Scope, send: Send, path: str | None) -> None:
        """Answer the RFC 9728 metadata document."""
        body = json.dumps(self.resource_metadata).encode()
        await respond(send, 200, body, _JSON)

    async def authenticate_request(
        self, scope: Scope, send: Send, path: str | None
    ) -> str | Literal[False] | None:
        """Check the bearer token; answer 401/500 and return False when refused.

        Returns:
            The identity, None when no token is required, or False when the
            request was refused (and answered).
        """
        if not self.requires_token:
            return None
        values = header_values(scope, "authorization")
        token: str | None = None
        if len(values) == 1:
            scheme, _, credentials = values[0].strip().partition(" ")
            if scheme.lower() == "bearer" and credentials.strip():
                token = credentials.strip()
        try:
            identity = None if token is None else self.identity(token)
        except Exception:
            log.exception("the authenticate callback failed")
            await fail(send, 500, "Internal error")
            return False
        if identity is None:
            audit.warning("http refused remote=%s reason=%s", scope.get("client"),
                          "no token" if token is None else "unknown token")
            challenge = 'Bearer realm="mcp"'
            if token is not None:
                challenge += ', error="invalid_token"'
            if self.resource_metadata is not None:
                challenge += f', resource_metadata="{self._metadata_url(scope, path)}"'
            await fail(send, 401, "Unauthorized: a valid bearer token is required",
                       headers=[(b"www-authenticate", challenge.encode("latin-1"))])
            return False
        return identity
