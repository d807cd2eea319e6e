"""Who a bearer token speaks for: :class:`Identity`, and the :class:`TokenVerifier` contract.

An MCP server on HTTP is an OAuth 2.1 resource server: every request carries
``Authorization: Bearer <token>``, and a verifier turns the token into the
identity of the caller, or refuses it. The identity is what the rest of
trio-mcp sees: it owns tasks (:attr:`Identity.owner`), it is
``ctx.identity`` in a handler, and its scopes decide which tools, resources
and prompts the caller may list and use. The token itself is never kept
(no token passthrough).
"""

from __future__ import annotations

import hmac
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol, final, runtime_checkable

import attrs

log = logging.getLogger("trio_mcp.auth")


class InvalidToken(Exception):
    """A verifier refuses a token (HTTP 401 with ``error="invalid_token"``).

    The message is logged, never sent: the client learns only that the token
    is invalid.
    """


def _scopes(value: Iterable[str] | str | None) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    return frozenset(value)


def _claims(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


@final
@attrs.frozen
class Identity:
    """The verified caller behind a bearer token.

    Attributes:
        subject: The token's subject (``sub``): the user, or the client
            itself for a ``client_credentials`` token.
        client_id: The OAuth client the token was issued to (``client_id``
            or ``azp``), if known.
        scopes: The scopes the token grants (a space-separated string or any
            iterable is accepted).
        expires_at: When the token expires (seconds since the epoch), if known.
        claims: Every claim of the token (JWT) or introspection answer, read-only.
    """

    subject: str | None
    client_id: str | None = None
    scopes: frozenset[str] = attrs.field(default=frozenset(), converter=_scopes)
    expires_at: float | None = None
    claims: Mapping[str, Any] = attrs.field(factory=dict, converter=_claims, eq=False)

    @property
    def owner(self) -> str:
        """The stable name tasks are owned by: the subject, else ``client:<client_id>``.

        The same caller gets the same owner with every token (a refreshed or
        re-issued one too), so its tasks survive reconnects; a token's
        scopes and expiry do not change it.
        """
        if self.subject:
            return self.subject
        if self.client_id:
            return f"client:{self.client_id}"
        raise ValueError("an identity needs a subject or a client id")

    def has_scopes(self, required: Iterable[str]) -> bool:
        """True when every scope of ``required`` is granted."""
        return frozenset(required) <= self.scopes


def as_identity(value: str | Identity | None) -> Identity | None:
    """An identity from what a callback returned: a name is a subject with no scopes."""
    if value is None or isinstance(value, Identity):
        return value
    if not isinstance(value, str):
        raise TypeError(f"an authenticate callback returned {type(value).__name__}, "
                        "not a str, an Identity or None")
    return Identity(subject=value) if value else None


@runtime_checkable
class TokenVerifier(Protocol):
    """What turns a bearer token into an :class:`Identity` (FastMCP and the SDK call it so too).

    Implementations: :class:`CallbackVerifier`, :class:`JWTVerifier`,
    :class:`IntrospectionVerifier`; any object with this method will do.
    """

    async def verify(self, token: str) -> Identity | None:
        """The identity ``token`` speaks for.

        Returns:
            The identity, or None to refuse the token (as :class:`InvalidToken` does).

        Raises:
            InvalidToken: The token is refused (the reason is logged).
            Exception: Anything else is a server failure (HTTP 500), not a refusal.

        Cancellation: nothing is cached from a cancelled verification.
        """
        ...


#: A callback: token -> identity (a name or an :class:`Identity`), or None to refuse.
Authenticate = Callable[[str], "str | Identity | Awaitable[str | Identity | None] | None"]


@final
@attrs.define(eq=False)
class CallbackVerifier:
    """Static tokens and/or a callback: trio-mcp's ``tokens=``/``authenticate=`` options.

    Attributes:
        tokens: Bearer token -> identity (a name, or an :class:`Identity` with
            scopes), compared in constant time.
        authenticate: Called with a token not in ``tokens``; returns the
            identity (a name or an :class:`Identity`; sync or ``async``) or None.
    """

    tokens: Mapping[str, str | Identity] | None = None
    authenticate: Authenticate | None = None

    def lookup(self, token: str) -> Identity | None:
        """The identity of a static token, or None (every token compared: constant time)."""
        found: str | Identity | None = None
        if self.tokens is not None:
            presented = token.encode()
            for known, identity in self.tokens.items():  # no early exit to time
                if hmac.compare_digest(known.encode(), presented):
                    found = identity
        return as_identity(found)

    async def verify(self, token: str) -> Identity | None:
        """The identity of ``token``: from ``tokens``, else from ``authenticate``.

        Cancellation: cancels an ``async`` callback.
        """
        found = self.lookup(token)
        if found is None and self.authenticate is not None:
            result = self.authenticate(token)
            if inspect.isawaitable(result):
                result = await result
            found = as_identity(result)
        return found
