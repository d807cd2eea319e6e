"""Who may talk to the Streamable HTTP endpoint: Host, Origin and bearer-token settings.

The token checks themselves are in :mod:`._http_auth`.

Plus the small ASGI helpers the server shares (headers, content negotiation,
error answers with a JSON-RPC body).
"""

from __future__ import annotations

import base64
import binascii
import decimal
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, final

import attrs
import trio

from .._errors import INVALID_REQUEST
from ..auth import CallbackVerifier, TokenVerifier
from ..peer import encode_for_wire
from ..peer._messages import META_PROTOCOL_VERSION, ErrorData, ErrorResponse
from ._websocket_server import origin_allowed

log = logging.getLogger("trio_mcp.transports")
audit = logging.getLogger("trio_mcp.audit")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
#: Bearer token -> identity (a name or an :class:`~trio_mcp.auth.Identity`), or None to refuse.
Authenticator = Callable[[str], Any]

#: ``Host`` names allowed by default: this machine only.
LOOPBACK_HOST_NAMES: Final = frozenset({"localhost", "127.0.0.1", "[::1]"})
_JSON: Final = [(b"content-type", b"application/json")]


#: Where :func:`header_values` keeps a request's headers by name, in its ASGI scope.
_BY_NAME: Final = "trio_mcp.headers"
_NONE: Final[tuple[str, ...]] = ()


def header_values(scope: Scope, name: str) -> Sequence[str]:
    """Every value of header ``name`` (lower case) in an ASGI scope, in order.

    The headers are read into a table by name once per request (kept in the
    scope): a request's dozen lookups do not each scan every header.
    """
    table: dict[str, list[str]] | None = scope.get(_BY_NAME)
    if table is None:
        table = {}
        for key, value in scope.get("headers", ()):
            name_ = key.decode("latin-1").lower()
            found = table.get(name_)
            if found is None:
                table[name_] = [value.decode("latin-1")]
            else:
                found.append(value.decode("latin-1"))
        scope[_BY_NAME] = table
    return table.get(name, _NONE)


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
    data: Any = None,
) -> None:
    """Answer with an HTTP error whose body is a JSON-RPC error response."""
    error = ErrorData(code, message, data)
    body = encode_for_wire(ErrorResponse(request_id, error)) or b""
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
    3. With a ``verifier`` (or ``tokens``/``authenticate``):
       ``Authorization: Bearer <token>`` that the verifier accepts -> else
       401 and ``WWW-Authenticate: Bearer`` (``error="invalid_token"`` for a
       refused token; ``resource_metadata=`` when there is metadata to name;
       ``scope=``); the ``required_scopes`` -> else 403
       ``insufficient_scope``. Per request, the scopes of the tool, resource,
       prompt or task operation it names -> else 403 ``insufficient_scope``.

    Attributes:
        tokens: Bearer token -> identity (a name, or a
            :class:`~trio_mcp.auth.Identity` with scopes), compared in
            constant time.
        authenticate: Called with a token not in ``tokens``; returns the
            identity (a name or an ``Identity``; may be ``async``) or None
            to refuse (500 if it raises).
        allowed_origins: Origins allowed besides loopback ones.
        allowed_hosts: ``Host`` names (no port) allowed besides loopback ones.
        resource_metadata: An RFC 9728 protected-resource metadata document
            to serve as is (instead of the one made from the fields below).
        verifier: A :class:`~trio_mcp.auth.TokenVerifier` (JWT, introspection,
            your own); ``tokens``/``authenticate`` are ignored when set.
        resource: This server's canonical URI (the metadata's ``resource``);
            by default the verifier's ``audience``, else the request's URL.
        authorization_servers: The metadata's ``authorization_servers``; by
            default the verifier's ``issuer``. Without any (and without
            ``resource_metadata``) no metadata is served.
        scopes_supported: The metadata's ``scopes_supported``.
        required_scopes: Scopes every request needs (403 without them); named
            in the ``scope=`` of 401 challenges.
    """

    tokens: Mapping[str, Any] | None = None
    authenticate: Callable[[str], Any] | None = None
    allowed_origins: Sequence[str] | None = None
    allowed_hosts: Sequence[str] | None = None
    resource_metadata: Mapping[str, Any] | None = None
    verifier: TokenVerifier | None = None
    resource: str | None = None
    authorization_servers: Sequence[str] | None = None
    scopes_supported: Sequence[str] | None = None
    required_scopes: Sequence[str] = ()

    @property
    def requires_token(self) -> bool:
        """True when every request needs a bearer token."""
        return self.token_verifier is not None

    @property
    def token_verifier(self) -> TokenVerifier | None:
        """The verifier in force: ``verifier``, else one of ``tokens``/``authenticate``."""
        if self.verifier is not None:
            return self.verifier
        if self.tokens is None and self.authenticate is None:
            return None
        return CallbackVerifier(self.tokens, self.authenticate)

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


# --- 2026-07-28: the request metadata headers -------------------------------------------------

#: The body field each method's ``Mcp-Name`` header mirrors.
MCP_NAME_FIELDS: Final = {
    "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
    # The tasks extension (SEP-2663): Mcp-Name mirrors params.taskId.
    "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
}
#: Methods whose missing ``Mcp-Name`` is accepted (one that disagrees is not).
#: SEP-2663 asks the client to send it so that intermediaries can route a task's
#: requests to the instance holding it; this server reads the task from the
#: body's ``taskId`` and decides access by the caller's identity, so a missing
#: header harms nothing here, and the one Python tasks requester (fastmcp-tasks
#: 4.1.4) does not send it. No conformance check asks for its refusal.
MCP_NAME_OPTIONAL: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
_B64_PREFIX: Final = "=?base64?"
_B64_SUFFIX: Final = "?="
#: Deepest ``properties`` chain searched for ``x-mcp-header`` annotations.
_MAX_SCHEMA_DEPTH: Final = 32


@final
@attrs.define(eq=False)
class OncePerClient:
    """Which clients were told about something already: to log a thing once per client.

    Bounded: past ``limit`` clients it starts over (a client may then be
    logged again, never more than that).

    Attributes:
        limit: Most clients remembered.
    """

    limit: int = 1024
    _seen: set[tuple[Any, ...]] = attrs.field(factory=set, init=False)

    def first(self, client: tuple[Any, ...]) -> bool:
        """Whether ``client`` is new (it is remembered from now on)."""
        if client in self._seen:
            return False
        if len(self._seen) >= self.limit:
            self._seen.clear()
        self._seen.add(client)
        return True


class HeaderMismatch(Exception):
    """A modern request's headers disagree with its body (JSON-RPC -32020, HTTP 400)."""


def _shown(value: str) -> str:
    return repr(value if len(value) <= 100 else value[:100] + "...")


def _field_value(scope: Scope, name: str, display: str) -> str | None:
    """The one value of header ``name``, without surrounding whitespace; None when absent.

    Raises:
        HeaderMismatch: The header is repeated or holds a character outside
            visible ASCII, space and tab.
    """
    values = header_values(scope, name)
    if not values:
        return None
    if len(values) > 1:
        raise HeaderMismatch(f"Header mismatch: the {display} header is repeated")
    value = values[0]
    # Visible ASCII, space and tab: ASCII's printable characters are 0x20-0x7E.
    if not (value.isascii() and (value.isprintable() or value.replace("\t", " ").isprintable())):
        raise HeaderMismatch(f"Header mismatch: the {display} header holds invalid characters")
    return value.strip(" \t")


def decode_header_value(value: str) -> str | None:
    """A ``Mcp-Name`` or ``Mcp-Param-*`` value, Base64 sentinel (``=?base64?...?=``) decoded.

    Returns:
        The value (as is when it is not in the sentinel form), or None when
        the sentinel form holds malformed Base64 or non-UTF-8 bytes.
    """
    if not (
        value.startswith(_B64_PREFIX) and value.endswith(_B64_SUFFIX)
        and len(value) >= len(_B64_PREFIX) + len(_B64_SUFFIX)
    ):
        return value
    try:
        raw = base64.b64decode(value[len(_B64_PREFIX):-len(_B64_SUFFIX)], validate=True)
        return raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None


#: ``header_parameters`` of the input schemas seen, by identity (the schema is kept, so its
#: id is not reused while cached): a tool's schema is walked once, not on every call.
_PARAMETERS: dict[int, tuple[Mapping[str, Any], tuple[tuple[tuple[str, ...], str], ...]]] = {}
_PARAMETERS_KEPT: Final = 256


def header_parameters(schema: Mapping[str, Any]) -> tuple[tuple[tuple[str, ...], str], ...]:
    """``(property path, header name)`` of each ``x-mcp-header`` reachable by ``properties``.

    Remembered per schema object: a tool's input schema does not change once registered
    (a re-registered tool has a new one).
    """
    kept = _PARAMETERS.get(id(schema))
    if kept is not None and kept[0] is schema:
        return kept[1]
    found: list[tuple[tuple[str, ...], str]] = []

    def walk(node: Mapping[str, Any], path: tuple[str, ...]) -> None:
        properties = node.get("properties")
        if not isinstance(properties, Mapping) or len(path) >= _MAX_SCHEMA_DEPTH:
            return
        for key, sub in properties.items():
            if not isinstance(key, str) or not isinstance(sub, Mapping):
                continue
            name = sub.get("x-mcp-header")
            if isinstance(name, str) and name and name.isascii():
                found.append(((*path, key), name))
            walk(sub, (*path, key))

    walk(schema, ())
    if len(_PARAMETERS) >= _PARAMETERS_KEPT:
        _PARAMETERS.clear()
    _PARAMETERS[id(schema)] = (schema, tuple(found))
    return _PARAMETERS[id(schema)][1]


_ABSENT: Final = object()


def _argument_at(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return _ABSENT
        node = node[key]
    return _ABSENT if node is None else node


def _parameter_matches(header_value: str, value: Any) -> bool:
    if isinstance(value, bool):
        return header_value == ("true" if value else "false")
    if isinstance(value, int | float):
        try:  # numerically: "42.0" is 42
            return decimal.Decimal(header_value) == decimal.Decimal(value)
        except (decimal.InvalidOperation, ValueError):
            return False
    return isinstance(value, str) and header_value == value


def check_modern_headers(
    scope: Scope,
    method: str,
    params: Mapping[str, Any],
    input_schema: Callable[[str], Mapping[str, Any] | None],
) -> bool:
    """Check a modern POST's headers against its JSON-RPC request (MCP 2026-07-28).

    ``MCP-Protocol-Version`` must be present and equal the body's
    ``_meta`` protocol version (when the body has one: without it the
    request is the peer's -32602); ``Mcp-Method`` must equal ``method``;
    ``Mcp-Name`` must equal ``params.name`` (``tools/call``,
    ``prompts/get``), ``params.uri`` (``resources/read``) or
    ``params.taskId`` (``tasks/get|update|cancel``); for
    ``tools/call``, ``Mcp-Param-{Name}`` must be present exactly when the
    argument its ``x-mcp-header`` annotation names has a value, and equal
    it. ``Mcp-Name`` and ``Mcp-Param-*`` values may be Base64 sentinels.
    A missing ``Mcp-Name`` is accepted on the methods of
    :data:`MCP_NAME_OPTIONAL` (``tasks/*``), nowhere else.

    Args:
        input_schema: The ``inputSchema`` of a tool, by name (None: unknown tool).

    Returns:
        True when the request lacked an ``Mcp-Name`` it should carry and was
        accepted anyway (for the caller to note).

    Raises:
        HeaderMismatch: The first disagreement found.
    """
    meta = params.get("_meta")
    meta_version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, Mapping) else None
    version = _field_value(scope, "mcp-protocol-version", "MCP-Protocol-Version")
    if version is None:
        expected = f" (expected {_shown(meta_version)})" if isinstance(meta_version, str) else ""
        raise HeaderMismatch(
            f"Header mismatch: the MCP-Protocol-Version header is required{expected}"
        )
    if isinstance(meta_version, str) and meta_version != version:
        raise HeaderMismatch(
            f"Header mismatch: MCP-Protocol-Version header value {_shown(version)} does not "
            f"match body value {_shown(meta_version)}"
        )
    header_method = _field_value(scope, "mcp-method", "Mcp-Method")
    if header_method is None:
        raise HeaderMismatch(
            f"Header mismatch: the Mcp-Method header is required (expected {_shown(method)})"
        )
    if header_method != method:
        raise HeaderMismatch(
            f"Header mismatch: Mcp-Method header value {_shown(header_method)} does not match "
            f"body value {_shown(method)}"
        )
    field = MCP_NAME_FIELDS.get(method)
    source = params.get(field) if field is not None else None
    if isinstance(source, str):
        name = _field_value(scope, "mcp-name", "Mcp-Name")
        if name is None and method in MCP_NAME_OPTIONAL:
            return True
        if name is None:
            raise HeaderMismatch(
                f"Header mismatch: the Mcp-Name header is required (expected {_shown(source)})"
            )
        decoded = decode_header_value(name)
        if decoded is None:
            raise HeaderMismatch("Header mismatch: the Mcp-Name header holds malformed Base64")
        if decoded != source:
            raise HeaderMismatch(
                f"Header mismatch: Mcp-Name header value {_shown(decoded)} does not match "
                f"body value {_shown(source)}"
            )
    if method == "tools/call" and isinstance(source, str):
        schema = input_schema(source)
        if schema is not None:
            _check_parameters(scope, schema, params.get("arguments"))
    return False


def _check_parameters(scope: Scope, schema: Mapping[str, Any], arguments: Any) -> None:
    for path, name in header_parameters(schema):
        display = f"Mcp-Param-{name}"
        found = _field_value(scope, display.lower(), display)
        value = _argument_at(arguments, path)
        argument = ".".join(path)
        if value is _ABSENT:
            if found is not None:
                raise HeaderMismatch(
                    f"Header mismatch: the {display} header is present but argument "
                    f"{_shown(argument)} has no value"
                )
            continue
        if not isinstance(value, str | int | float):  # not a primitive: not mirrored
            continue
        if found is None:
            raise HeaderMismatch(
                f"Header mismatch: the {display} header is required (argument "
                f"{_shown(argument)} has a value)"
            )
        decoded = decode_header_value(found)
        if decoded is None:
            raise HeaderMismatch(f"Header mismatch: the {display} header holds malformed Base64")
        if not _parameter_matches(decoded, value):
            raise HeaderMismatch(
                f"Header mismatch: {display} header value {_shown(decoded)} does not match "
                f"argument {_shown(argument)}"
            )
