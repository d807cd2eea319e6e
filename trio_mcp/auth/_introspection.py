"""Opaque access tokens checked with the authorization server (RFC 7662 token introspection).

Each token is POSTed to the introspection endpoint with this server's own
client credentials (HTTP Basic, ``client_secret_basic``; or in the body,
``client_secret_post``). An answer counts only when it is ``active: true``
and, when present, its ``exp`` is in the future and its ``nbf`` past; with
``audience`` set its ``aud`` must name this server (RFC 8707), with
``issuer`` set its ``iss`` must be that issuer. Answers are cached by a
SHA-256 of the token for at most ``cache_ttl`` seconds and never past the
token's ``exp``, in a bounded table (oldest dropped first); refusals are
not cached.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Literal, final
from urllib.parse import quote_plus

import attrs
import trio

from ._identity import Identity, InvalidToken
from ._jwt import audience_matches, check_times, identity_from_claims

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("trio_mcp.auth")

#: Most cached introspection answers.
DEFAULT_CACHE_SIZE: Final = 10_000


@final
@attrs.define(eq=False)
class IntrospectionVerifier:
    """Verify tokens by asking the authorization server (RFC 7662).

    Attributes:
        introspection_url: The introspection endpoint.
        client_id: This resource server's client id at the authorization server.
        client_secret: Its secret.
        auth_method: ``"client_secret_basic"`` (default) or ``"client_secret_post"``.
        issuer: The authorization server named in the protected-resource
            metadata; when set, an answer's ``iss`` (if any) must equal it.
        audience: This server's canonical URI (or several); when set, an
            answer must carry an ``aud`` naming one.
        leeway: Seconds of clock skew allowed on ``exp`` and ``nbf``.
        cache_ttl: Most seconds an answer is reused (0: ask every time).
        cache_size: Most answers cached.
        timeout: Seconds for one introspection request.
        http_client: The httpx client to use (not closed here); by default
            a fresh one per request.
    """

    introspection_url: str
    client_id: str
    client_secret: str = attrs.field(repr=False)
    auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"
    issuer: str | None = None
    audience: str | Sequence[str] | None = None
    leeway: float = 30.0
    cache_ttl: float = 60.0
    cache_size: int = DEFAULT_CACHE_SIZE
    timeout: float = 10.0
    http_client: httpx.AsyncClient | None = None
    _cache: OrderedDict[bytes, tuple[float, Identity]] = attrs.field(
        factory=OrderedDict, init=False, repr=False
    )
    requests: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        if self.audience is None:
            log.warning("IntrospectionVerifier(%s) has no audience: the MCP authorization spec "
                        "requires checking that tokens were issued for this server; set "
                        "audience= unless the authorization server does", self.introspection_url)

    async def verify(self, token: str) -> Identity:
        """The identity of an active token.

        Raises:
            InvalidToken: Inactive, expired, not yet valid, or for another
                audience or issuer.
            httpx.HTTPError: The endpoint could not be reached or refused us.

        Cancellation: the request is abandoned; nothing is cached.
        """
        digest = hashlib.sha256(token.encode()).digest()
        now = trio.current_time()
        cached = self._cache.get(digest)
        if cached is not None:
            until, identity = cached
            if now < until and (identity.expires_at is None or time.time() < identity.expires_at):
                return identity
            del self._cache[digest]
        identity = await self._introspect(token)
        ttl = self.cache_ttl
        if identity.expires_at is not None:
            ttl = min(ttl, identity.expires_at - time.time())
        if ttl > 0:
            self._cache[digest] = (now + ttl, identity)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return identity

    async def _introspect(self, token: str) -> Identity:
        import httpx  # here, not at import: a server that never introspects need not load it

        data = {"token": token, "token_type_hint": "access_token"}
        headers = {"Accept": "application/json"}
        if self.auth_method == "client_secret_post":
            data |= {"client_id": self.client_id, "client_secret": self.client_secret}
        else:  # RFC 7662 2.1 with RFC 6749 2.3.1: each part form-encoded, then Base64
            pair = f"{quote_plus(self.client_id)}:{quote_plus(self.client_secret)}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        client = self.http_client or httpx.AsyncClient(timeout=self.timeout, trust_env=False)
        try:
            response = await client.post(self.introspection_url, data=data, headers=headers)
        finally:
            if self.http_client is None:
                await client.aclose()
        self.requests += 1
        response.raise_for_status()
        answer = response.json()
        if not isinstance(answer, dict) or answer.get("active") is not True:
            raise InvalidToken("inactive")
        exp: float | None = None
        if "exp" in answer:
            exp = check_times(answer, self.leeway, time.time())
        elif "nbf" in answer:
            check_times({**answer, "exp": float("inf")}, self.leeway, time.time())
        if self.issuer is not None and "iss" in answer and answer["iss"] != self.issuer:
            raise InvalidToken("wrong issuer")
        if self.audience is not None:
            accepted = (self.audience,) if isinstance(self.audience, str) else tuple(self.audience)
            if not audience_matches(answer.get("aud"), accepted):
                raise InvalidToken("wrong audience")
        return identity_from_claims(answer, exp)
