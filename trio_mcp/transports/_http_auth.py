"""The Streamable HTTP server as an OAuth 2.1 resource server (MCP authorization).

* Every request to the endpoint needs ``Authorization: Bearer <token>``
  when the :class:`~._http_policy.HttpPolicy` has a verifier (or tokens): the
  verifier's :class:`~trio_mcp.auth.Identity` goes with the request (the
  ASGI scope's :data:`IDENTITY_KEY`), its :attr:`~trio_mcp.auth.Identity.owner`
  binds the session and owns the tasks. No token: 401 with ``WWW-Authenticate:
  Bearer resource_metadata="...", scope="..."``; a refused one: 401 with
  ``error="invalid_token"``; a token without the policy's ``required_scopes``,
  or a request for a tool, resource, prompt or task operation whose scopes
  it lacks: 403 with ``error="insufficient_scope", scope="..."``.
* The protected-resource metadata (RFC 9728) is served at
  ``/.well-known/oauth-protected-resource`` and at the same path suffixed
  with the endpoint's path (``.../oauth-protected-resource/mcp``), which is
  the one the 401 challenges name.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from ..auth import Identity, InvalidToken
from ..peer import IDENTITY_INFO
from ._http_policy import HttpPolicy, Scope, Send, fail, header, header_values, respond

log = logging.getLogger("trio_mcp.transports")
audit = logging.getLogger("trio_mcp.audit")

#: The ASGI scope key under which a verified request carries its :class:`Identity`.
IDENTITY_KEY: Final = "trio_mcp.identity"
WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
_JSON: Final = [(b"content-type", b"application/json")]


def request_facts(scope: Scope, session_id: str | None = None) -> dict[str, Any]:
    """What the transport knows of an HTTP request's sender (a peer's ``bus.info``, or a
    2026-07-28 POST's ``Caller.info``): transport, path, session id, remote address and
    the verified identity, if any."""
    client = scope.get("client")
    info: dict[str, Any] = {
        "transport": "http",
        "path": scope.get("path"),
        "session_id": session_id,
        "remote": f"{client[0]}:{client[1]}" if client else None,
    }
    if isinstance(verified := scope.get(IDENTITY_KEY), Identity):
        info[IDENTITY_INFO] = verified
    return info


def metadata_paths(path: str | None, resource: str | None = None) -> tuple[str, ...]:
    """Where the metadata is served: path-suffixed first (RFC 9728 3.1), then the root.

    With a configured ``resource`` whose path differs from the endpoint's (a
    proxy in front), its path-suffixed form is served too.
    """
    found = [WELL_KNOWN + suffix] if (suffix := (path or "").rstrip("/")) else []
    if resource is not None:
        extra = WELL_KNOWN + urllib.parse.urlsplit(resource).path.rstrip("/")
        if extra not in found and extra != WELL_KNOWN:
            found.append(extra)
    return (*found, WELL_KNOWN)


def configured_resource(policy: HttpPolicy) -> str | None:
    """The canonical URI configured (``resource``, else the verifier's ``audience``), if any."""
    if policy.resource is not None:
        return policy.resource
    audience = getattr(policy.verifier, "audience", None)
    if isinstance(audience, str):
        return audience
    if isinstance(audience, list | tuple) and audience and isinstance(audience[0], str):
        return audience[0]
    return None


def metadata_url(policy: HttpPolicy, scope: Scope, path: str | None) -> str:
    """The metadata's URL named in challenges: from the configured canonical URI when there
    is one (RFC 9728 3.1: the well-known path inserted before its path; right behind a
    TLS-terminating proxy too), else from the request's scheme and ``Host``."""
    resource = configured_resource(policy)
    if resource is not None:
        parts = urllib.parse.urlsplit(resource)
        if parts.scheme in ("http", "https") and parts.netloc:
            suffix = parts.path.rstrip("/")
            return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{suffix}"
    return _origin(scope) + metadata_paths(path)[0]


def _origin(scope: Scope) -> str:
    host = header(scope, "host") or "localhost"
    return f"{scope.get('scheme', 'http')}://{host}"


def resource_uri(policy: HttpPolicy, scope: Scope, path: str | None) -> str:
    """This server's canonical URI: the configured one, the verifier's audience, or the URL."""
    return configured_resource(policy) or _origin(scope) + (path or "")


def authorization_servers(policy: HttpPolicy) -> list[str]:
    """The authorization servers to name: configured, else the verifier's issuer."""
    if policy.authorization_servers is not None:
        return list(policy.authorization_servers)
    issuer = getattr(policy.verifier, "issuer", None)
    return [issuer] if isinstance(issuer, str) else []


def serves_metadata(policy: HttpPolicy) -> bool:
    """True when there is a protected-resource metadata document to serve."""
    return policy.resource_metadata is not None or bool(authorization_servers(policy))


def metadata_document(policy: HttpPolicy, scope: Scope, path: str | None) -> Mapping[str, Any]:
    """The RFC 9728 document: the given one, else made from the policy."""
    if policy.resource_metadata is not None:
        return policy.resource_metadata
    document: dict[str, Any] = {
        "resource": resource_uri(policy, scope, path),
        "authorization_servers": authorization_servers(policy),
        "bearer_methods_supported": ["header"],
    }
    if policy.scopes_supported is not None:
        document["scopes_supported"] = list(policy.scopes_supported)
    return document


async def serve_metadata(policy: HttpPolicy, scope: Scope, send: Send, path: str | None) -> None:
    """Answer the metadata document (JSON, 200).

    Cancellation: the answer is abandoned.
    """
    body = json.dumps(metadata_document(policy, scope, path)).encode()
    await respond(send, 200, body, [*_JSON, (b"cache-control", b"max-age=300")])


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(
    policy: HttpPolicy, scope: Scope, path: str | None, *, error: str | None = None,
    scopes: Iterable[str] = (),
) -> bytes:
    """A ``WWW-Authenticate: Bearer`` challenge (RFC 6750 3, RFC 9728 5.1)."""
    parts = ['Bearer realm="mcp"']
    if error is not None:
        parts.append(f"error={_quoted(error)}")
    named = " ".join(sorted(scopes))
    if named:
        parts.append(f"scope={_quoted(named)}")
    if serves_metadata(policy):
        parts.append(f"resource_metadata={_quoted(metadata_url(policy, scope, path))}")
    return ", ".join(parts).encode("latin-1")


def _token(scope: Scope) -> str | None:
    values = header_values(scope, "authorization")
    if len(values) != 1:
        return None
    kind, _, credentials = values[0].strip().partition(" ")
    credentials = credentials.strip()
    return credentials if kind.lower() == "bearer" and credentials else None


def _advertised(policy: HttpPolicy) -> list[str]:
    # The scopes "required for accessing the resource" (MCP: Scope Selection Strategy):
    # not scopes_supported, which a client would then ask for all at once.
    return list(policy.required_scopes)


async def authenticate(
    policy: HttpPolicy, scope: Scope, send: Send, path: str | None
) -> Identity | Literal[False] | None:
    """Verify the request's bearer token; answer 401/403/500 and return False when refused.

    Returns:
        The identity, None when no token is required, or False when the
        request was refused (and answered).

    Cancellation: the request is abandoned unanswered.
    """
    verifier = policy.token_verifier
    if verifier is None:
        return None
    token = _token(scope)
    identity: Identity | None = None
    reason = "no token"
    if token is not None:
        try:
            identity = await verifier.verify(token)
            reason = "refused token"
            _ = identity and identity.owner  # ValueError: neither subject nor client id
        except InvalidToken as exc:
            reason = f"invalid token: {exc}"
        except Exception:
            log.exception("the token verifier failed")
            await fail(send, 500, "Internal error: the access token could not be verified")
            return False
    if identity is None:
        audit.warning("http refused remote=%s reason=%s", scope.get("client"), reason)
        www = challenge(policy, scope, path, error=None if token is None else "invalid_token",
                        scopes=_advertised(policy))
        await fail(send, 401, "Unauthorized: a valid bearer token is required",
                   headers=[(b"www-authenticate", www)])
        return False
    scope[IDENTITY_KEY] = identity
    if policy.required_scopes and not identity.has_scopes(policy.required_scopes):
        await insufficient_scope(policy, scope, send, path, frozenset(policy.required_scopes))
        return False
    return identity


async def insufficient_scope(
    policy: HttpPolicy, scope: Scope, send: Send, path: str | None, required: frozenset[str],
    request_id: str | int | None = None,
) -> None:
    """Answer 403 with ``error="insufficient_scope"`` and the scopes ``required``.

    Cancellation: the answer is abandoned.
    """
    identity = scope.get(IDENTITY_KEY)
    audit.warning("http refused remote=%s identity=%s reason=insufficient scope (needs %s)",
                  scope.get("client"), getattr(identity, "owner", None), " ".join(sorted(required)))
    www = challenge(policy, scope, path, error="insufficient_scope", scopes=required)
    await fail(send, 403, "Forbidden: insufficient scope (needs "
               + " ".join(sorted(required)) + ")", request_id=request_id,
               headers=[(b"www-authenticate", www)],
               data={"error": "insufficient_scope", "scope": " ".join(sorted(required))})
