"""MCP 2025-11-25 types used by trio-mcp, as frozen attrs classes.

Field names are ``snake_case``; :mod:`._convert` maps them to the wire's
``camelCase`` (``meta`` is ``_meta``). Every class that the peer may receive
carries an ``extra`` dict so that fields this library does not model survive
a round trip. Open-ended JSON (schemas, capability sub-objects, annotations)
stays a plain ``dict``.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import attrs

LATEST_PROTOCOL_VERSION: Final = "2025-11-25"
#: Versions this peer speaks, newest first.
SUPPORTED_PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
#: MCP 2026-07-28 ("modern": per-request ``_meta``, no ``initialize``).
MODERN_PROTOCOL_VERSION: Final = "2026-07-28"
#: Modern versions this peer speaks, newest first.
MODERN_PROTOCOL_VERSIONS: Final = ("2026-07-28",)
#: Every version this peer speaks, both eras, newest first (``server/discover``).
ALL_PROTOCOL_VERSIONS: Final = (*MODERN_PROTOCOL_VERSIONS, *SUPPORTED_PROTOCOL_VERSIONS)
#: The reserved per-request ``_meta`` keys of 2026-07-28.
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
#: The progress token of a request's ``_meta`` (both eras; a string or an integer).
META_PROGRESS_TOKEN: Final = "progressToken"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
RELATED_TASK_META: Final = "io.modelcontextprotocol/related-task"
MODEL_IMMEDIATE_RESPONSE_META: Final = "io.modelcontextprotocol/model-immediate-response"

ProgressToken: TypeAlias = str | int
Meta: TypeAlias = dict[str, Any] | None


def _extra() -> Any:
    return attrs.field(factory=dict, kw_only=True, repr=False)


def _meta() -> Any:
    return attrs.field(default=None, kw_only=True)


# --- lifecycle ---------------------------------------------------------------


@attrs.frozen
class Implementation:
    """Name and version of an MCP implementation (``clientInfo``/``serverInfo``)."""

    name: str
    version: str
    title: str | None = None
    description: str | None = None
    website_url: str | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ClientCapabilities:
    """What a client supports; each present member is a JSON object."""

    sampling: dict[str, Any] | None = None
    elicitation: dict[str, Any] | None = None
    roots: dict[str, Any] | None = None
    tasks: dict[str, Any] | None = None
    experimental: dict[str, Any] | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ServerCapabilities:
    """What a server supports; each present member is a JSON object."""

    tools: dict[str, Any] | None = None
    tasks: dict[str, Any] | None = None
    logging: dict[str, Any] | None = None
    prompts: dict[str, Any] | None = None
    resources: dict[str, Any] | None = None
    completions: dict[str, Any] | None = None
    experimental: dict[str, Any] | None = None
    extra: dict[str, Any] = _extra()


#: Which client capability each server-to-client question (input request) needs.
CAPABILITY_OF: Final = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def task_capability(caps: ClientCapabilities | ServerCapabilities | None, method: str) -> bool:
    """Tell whether ``caps`` declares task augmentation for ``method``.

    Args:
        caps: The receiver's declared capabilities (``None`` if unknown).
        method: A request method such as ``"tools/call"``.

    Returns:
        True when ``tasks.requests.<category>.<action>`` is present.
    """
    if caps is None or not isinstance(caps.tasks, dict):
        return False
    category, _, action = method.partition("/")
    requests = caps.tasks.get("requests")
    if not isinstance(requests, dict):
        return False
    group = requests.get(category)
    return isinstance(group, dict) and isinstance(group.get(action), dict)


@attrs.frozen
class InitializeParams:
    """Parameters of ``initialize``."""

    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class InitializeResult:
    """Result of ``initialize``."""

    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class EmptyResult:
    """A result with no content (``ping``, acknowledgements)."""

    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


# --- utilities -----------------------------------------------------------------------


@attrs.frozen
class ProgressParams:
    """Parameters of ``notifications/progress``."""

    progress_token: str | int
    progress: float
    total: float | None = None
    message: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CancelledParams:
    """Parameters of ``notifications/cancelled``."""

    request_id: str | int | None = None
    reason: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class PaginatedParams:
    """Parameters of a paginated list request."""

    cursor: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()
