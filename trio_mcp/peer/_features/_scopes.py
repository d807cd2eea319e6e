"""Scopes: which caller may see and use which tool, resource, prompt and task operation.

A tool, resource, template or prompt registered with ``scopes=[...]`` is
listed to, and usable by, only a caller whose verified identity
(:class:`trio_mcp.auth.Identity`, put in ``bus.info["identity"]`` by the
transport) grants every one of them; the App's ``task_scopes`` likewise
guard ``tasks/*``. Deny by default: a connection without an identity
(stdio, or a server without a verifier) holds no scope at all.

Refusals: the Streamable HTTP server checks :func:`required_scopes` before
the request reaches the peer and answers HTTP 403 with ``WWW-Authenticate:
Bearer error="insufficient_scope", scope="..."`` (MCP authorization, "Scope
Challenge Handling"); everywhere else (and as a second line behind HTTP) the
feature raises the JSON-RPC error of :func:`check_scopes`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..._errors import INVALID_PARAMS, McpError
from ...auth import Identity
from .._messages import Request
from ._base import AppView, PeerCore, Role

#: The key of ``MessageBus.info`` that holds the connection's verified :class:`Identity`.
IDENTITY_INFO: Final = "identity"
#: The ``tasks/*`` methods the App's ``task_scopes`` guard (both eras).
TASK_METHODS: Final = frozenset(
    {"tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update"}
)
_NONE: Final[frozenset[str]] = frozenset()


def scope_set(scopes: Iterable[str] | str | None) -> frozenset[str]:
    """Scopes as a frozen set (a string is one scope, not its letters).

    Raises:
        ValueError: An empty scope or one with whitespace or quotes.
    """
    found = frozenset([scopes] if isinstance(scopes, str) else scopes or ())
    for scope in found:
        if not scope or any(c.isspace() or c in '"\\' for c in scope) or not scope.isprintable():
            raise ValueError(f"a scope is a non-empty token without spaces or quotes: {scope!r}")
    return found


def identity_of(peer: PeerCore, req: Request | None) -> Identity | None:
    """The verified identity of ``req``'s sender (its caller's, else the connection's), if any."""
    value = peer.info_of(req).get(IDENTITY_INFO)
    return value if isinstance(value, Identity) else None


def rule(app: AppView, kind: str, name: str) -> frozenset[str]:
    """The scopes registered for a ``tool``, ``resource``, ``template`` or ``prompt``."""
    return app.scope_rules.get((kind, name), _NONE) if app.scope_rules else _NONE


def granted(peer: PeerCore, req: Request, required: frozenset[str]) -> bool:
    """True when the identity of ``req``'s sender holds every scope of ``required``."""
    if not required:
        return True
    identity = identity_of(peer, req)
    return identity is not None and required <= identity.scopes


def check_scopes(peer: PeerCore, req: Request, required: frozenset[str], what: str) -> None:
    """Refuse the request unless the caller holds ``required``.

    Raises:
        McpError: -32602 ``Insufficient scope`` with ``data`` ``{"error":
            "insufficient_scope", "scope": "..."}`` (the scopes needed).
    """
    if granted(peer, req, required):
        return
    needed = " ".join(sorted(required))
    raise McpError(INVALID_PARAMS, f"Insufficient scope: {what} requires the scope(s) {needed}",
                   {"error": "insufficient_scope", "scope": needed})


def check_task_scopes(peer: PeerCore, req: Request, method: str) -> None:
    """Refuse a ``tasks/*`` request of a caller without the App's ``task_scopes`` (server side).

    Raises:
        McpError: As :func:`check_scopes`.
    """
    if peer.app.task_scopes and peer.role is Role.SERVER:
        check_scopes(peer, req, peer.app.task_scopes, method)


def visible(peer: PeerCore, req: Request, kind: str, names: Iterable[Any], key: Any) -> list[Any]:
    """The items of a list the caller may see (``key(item)`` is the item's name)."""
    rules = peer.app.scope_rules
    if not rules:
        return list(names)
    return [item for item in names if granted(peer, req, rules.get((kind, key(item)), _NONE))]


def required_scopes(app: AppView, method: str, params: Mapping[str, Any] | None) -> frozenset[str]:
    """The scopes a request needs, from its method and params (nothing for unknown names).

    ``tools/call``: the tool's; ``resources/read`` and ``resources/subscribe``:
    the fixed resource's, or the first matching template's; ``prompts/get``:
    the prompt's; ``tasks/*``: the App's ``task_scopes``.
    """
    params = params or {}
    if method in TASK_METHODS:
        return app.task_scopes
    if not app.scope_rules:
        return _NONE
    if method == "tools/call" and isinstance(name := params.get("name"), str):
        return rule(app, "tool", name)
    if method == "prompts/get" and isinstance(name := params.get("name"), str):
        return rule(app, "prompt", name)
    if method in ("resources/read", "resources/subscribe") and isinstance(
        uri := params.get("uri"), str
    ):
        if uri in app.resources:
            return rule(app, "resource", uri)
        for template in app.resource_templates.values():
            if template.match(uri) is not None:
                return rule(app, "template", template.template.uri_template)
    return _NONE
